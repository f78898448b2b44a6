/* samples/eval_offline.c — Paddle's collective FleetAPI guide's offline evaluation: run a saved model over a dataset
 * and write its last layer's output vectors, so a deployed service can be checked against
 * them. Output: a safetensors file with "vectors" [N, D] (f32) and "labels" [N] (i64).
 *
 *   eval_offline --model resnet50|resnet18|mnist|mynet|facenet [--num-classes 1000]
 *                --checkpoint MODEL.safetensors --out vectors.safetensors [--batch-size 32]
 *                and one data source:
 *                --list train.txt --root DIR [--image-size 224]   (Paddle's collective FleetAPI guide image list)
 *                --mnist DIR                                     (IDX t10k-* files)
 *                --cifar DIR                                     (test_batch.bin) */
#include "sample_util.h"

static dg_layer *make_model(const char *name, int64_t classes) {
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = classes;
    if (strcmp(name, "resnet50") == 0) return dg_resnet50(rp);
    if (strcmp(name, "resnet18") == 0) return dg_resnet18(rp);
    if (strcmp(name, "mnist") == 0) return dg_mnist_cnn();
    if (strcmp(name, "mynet") == 0) return dg_cifar_mynet(classes);
    if (strcmp(name, "facenet") == 0) return dg_facenet(15);
    fprintf(stderr, "unknown model %s\n", name);
    return NULL;
}

static dg_dataset *make_data(int argc, char **argv) {
    const char *list = su_flag(argc, argv, "--list", NULL), *mnist = su_flag(argc, argv, "--mnist", NULL);
    const char *cifar = su_flag(argc, argv, "--cifar", NULL);
    if (list) {
        int size = (int)su_flag_num(argc, argv, "--image-size", 224);
        dg_dataset *raw = dg_image_list_dataset(su_flag(argc, argv, "--root", "."), list);
        /* the tutorial's reader: resize the short side to 256/224 of the crop, center crop, ImageNet normalisation */
        dg_transform tf[3] = {
            { .kind = DG_TF_RESIZE, .size = {size * 256 / 224, size * 256 / 224} },
            { .kind = DG_TF_CENTER_CROP, .size = {size, size} },
            { .kind = DG_TF_NORMALIZE, .channels = 3, .mean = {0.485, 0.456, 0.406}, .std = {0.229, 0.224, 0.225} },
        };
        dg_dataset *ds = raw ? dg_dataset_transform(raw, tf, 3) : NULL;
        dg_dataset_free(raw);
        return ds;
    }
    if (mnist) {
        char im[512], lb[512];
        snprintf(im, sizeof im, "%s/t10k-images-idx3-ubyte.gz", mnist);
        snprintf(lb, sizeof lb, "%s/t10k-labels-idx1-ubyte.gz", mnist);
        return dg_mnist_idx_dataset(im, lb);
    }
    if (cifar) return dg_cifar10_dataset(cifar, false);
    fprintf(stderr, "give --list/--root, --mnist DIR or --cifar DIR\n");
    return NULL;
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--batch-size=32", "--checkpoint=none (initial weights)", "--cifar=none", "--device=$DG_DEVICE, else FLAGS_selected_gpus, else cpu", "--image-size=224", "--list=none", "--mnist=none", "--model=resnet50", "--num-classes=1000", "--out=vectors.safetensors", "--root=.", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    const char *model = su_flag(argc, argv, "--model", "resnet50"), *ckpt = su_flag(argc, argv, "--checkpoint", NULL);
    const char *out = su_flag(argc, argv, "--out", "vectors.safetensors");
    int64_t batch = (int64_t)su_flag_num(argc, argv, "--batch-size", 32);
    dg_init_params ip = dg_init_default_params();
    ip.device = su_flag(argc, argv, "--device", NULL);
    if (dg_init(&ip)) return su_die("init");
    if (su_profile_start(argc, argv)) return su_die("--profile");
    dg_layer *net = make_model(model, (int64_t)su_flag_num(argc, argv, "--num-classes", 1000));
    if (!net) return su_die("model");
    if (ckpt && dg_layer_load(net, ckpt, dg_load_default_params(), NULL)) return su_die("checkpoint");
    if (!ckpt) fprintf(stderr, "warning: no --checkpoint, evaluating the freshly initialised model\n");
    dg_layer_eval(net);
    dg_dataset *ds = make_data(argc, argv);
    if (!ds) return su_die("dataset");
    dg_dataloader_params dlp = dg_dataloader_default_params();
    dlp.batch_size = batch;
    dlp.num_workers = 2;
    dg_dataloader *dl = dg_dataloader_new(ds, dlp);
    if (!dl || dg_dataloader_start_epoch(dl, 0)) return su_die("loader");

    dg_tensor *vectors[4096], *labels[4096];
    int nb = 0;
    for (;;) {
        dg_sample b;
        int got = dg_dataloader_next(dl, &b);     /* no scope open: the batch is ours to free */
        if (got < 0) return su_die("loader");
        if (got == 0) break;
        if (nb == 4096) { fprintf(stderr, "more than 4096 batches: raise --batch-size\n"); return 1; }
        dg_no_grad_begin();
        dg_scope *s = dg_scope_begin();
        vectors[nb] = dg_keep(dg_forward(net, b.t[0]));
        dg_scope_end(s);
        dg_no_grad_end();
        if (!vectors[nb]) return su_die("forward");
        labels[nb] = b.n > 1 ? dg_keep(dg_reshape(b.t[1], DG_SHAPE(-1))) : NULL;
        if (nb % 100 == 0) printf("batch: %d\n", nb);
        nb++;
        dg_sample_clear(&b);
    }
    dg_scope *s = dg_scope_begin();
    dg_tensor_dict *d = dg_tensor_dict_new();
    dg_tensor_dict_set(d, "vectors", dg_concat(vectors, nb, 0));
    if (nb && labels[0]) dg_tensor_dict_set(d, "labels", dg_concat(labels, nb, 0));
    dg_scope_end(s);
    if (!dg_tensor_dict_get(d, "vectors") || dg_save_safetensors(out, d)) return su_die("write");
    printf("wrote %lld vectors of %lld values to %s\n", (long long)dg_dim(dg_tensor_dict_get(d, "vectors"), 0),
           (long long)dg_dim(dg_tensor_dict_get(d, "vectors"), 1), out);
    for (int i = 0; i < nb; i++) { dg_tensor_free(vectors[i]); dg_tensor_free(labels[i]); }
    dg_tensor_dict_free(d);
    dg_dataloader_free(dl);
    dg_dataset_free(ds);
    dg_layer_free(net);
    dg_shutdown();
    return 0;
}
