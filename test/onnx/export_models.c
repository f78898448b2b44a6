/* test/onnx/export_models.c — writes what test/onnx/check.py checks: each test model exported
 * with dg_onnx_export (batch-1 example, dynamic batch) into OUTDIR/<name>.onnx, and for batch
 * sizes 1 and 7 an input and dygraph's eval output (under no_grad: the deployment path, with
 * nn/fuse.c's Conv+BN folding) as raw little-endian files, listed in OUTDIR/manifest.txt:
 *   name batch input_file input_dtype input_shape ref_file ref_shape ref_dtype
 * Models: the MNIST CNN, CIFAR MyNet, ResNet18 (also with BatchNorm folded into the convolutions),
 * FaceNet, a layer of our own chaining many supported ops, and an Embedding + LayerNorm model
 * (opset 17's LayerNormalization, and opset 13 where it is written as arithmetic), and the small
 * one-op-group models of op_models.c (TopK, sort, argmax, where, cumsum, scatter, 1-d conv and
 * pools, GroupNorm, ceil-mode pools, LSTM / GRU / RNN; one of them, with lengths, at a fixed batch of 3). BatchNorm statistics and affine parameters are drawn at
 * random, so they matter. */
#define ONNX_PROGRAM "export_models"
#include "op_models.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char *outdir;
static FILE *manifest;

static void write_raw(const char *path, const dg_tensor *t) {
    FILE *f = fopen(path, "wb");
    ONNX_ASSERT(f, path);
    dg_tensor *c = dg_contiguous(dg_to_device(t, (dg_device){ DG_CPU, 0 }));
    ONNX_ASSERT(c, "host copy");
    size_t nb = (size_t)dg_numel(c) * dg_dtype_size(dg_dtype_of(c));
    ONNX_ASSERT(fwrite(dg_data(c), 1, nb, f) == nb && fclose(f) == 0, path);
}

static void shape_str(const dg_tensor *t, char *buf, size_t len) {
    size_t o = 0;
    for (int i = 0; i < dg_ndim(t); i++) o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "", (long long)dg_dim(t, i));
    if (!dg_ndim(t)) snprintf(buf, len, "-");
}

/* BatchNorm's statistics and affine parameters at random, so a wrong mapping shows */
static void randomize_buffers(dg_layer *net) {
    int nb = 0, np = 0;
    dg_named_tensor *b = dg_layer_named_buffers(net, &nb), *p = dg_layer_named_parameters(net, &np);
    dg_no_grad_begin();
    for (int i = 0; i < nb; i++) {
        if (strstr(b[i].name, "running_mean")) ONNX_ASSERT(dg_uniform_(b[i].tensor, -0.3, 0.3) == 0, "running_mean");
        if (strstr(b[i].name, "running_var")) ONNX_ASSERT(dg_uniform_(b[i].tensor, 0.5, 1.5) == 0, "running_var");
    }
    for (int i = 0; i < np; i++) {
        const char *n = p[i].name;
        size_t l = strlen(n);
        if (strstr(n, "bn") || strstr(n, "downsample.1")) {
            if (l > 7 && !strcmp(n + l - 7, ".weight")) ONNX_ASSERT(dg_uniform_(p[i].tensor, 0.5, 1.5) == 0, "bn weight");
            if (l > 5 && !strcmp(n + l - 5, ".bias")) ONNX_ASSERT(dg_uniform_(p[i].tensor, -0.2, 0.2) == 0, "bn bias");
        }
    }
    dg_no_grad_end();
    free(b);
    free(p);
}

typedef dg_tensor *(*make_input_fn)(int64_t batch);

static void run_case_at(const char *name, dg_layer *net, make_input_fn make, dg_onnx_export_params p, int64_t fixed) {
    char path[1024], in_path[1024], ref_path[1024], ish[128], osh[128];
    dg_scope *s = dg_scope_begin();
    snprintf(path, sizeof path, "%s/%s.onnx", outdir, name);
    if (fixed) p.dynamic_batch = false;
    ONNX_ASSERT(dg_onnx_export(net, make(fixed ? fixed : 1), path, p) == 0, name);
    ONNX_ASSERT(dg_layer_is_training(net), "the layer's train mode is back after export");
    dg_layer_eval(net);
    int64_t batches[2] = { fixed ? fixed : 1, 7 };
    for (int i = 0; i < (fixed ? 1 : 2); i++) {
        dg_tensor *x = make(batches[i]);
        dg_no_grad_begin();
        dg_tensor *y = dg_forward(net, x);
        dg_no_grad_end();
        ONNX_ASSERT(y, "eval forward");
        snprintf(in_path, sizeof in_path, "%s/%s.b%lld.in", outdir, name, (long long)batches[i]);
        snprintf(ref_path, sizeof ref_path, "%s/%s.b%lld.ref", outdir, name, (long long)batches[i]);
        write_raw(in_path, x);
        write_raw(ref_path, y);
        shape_str(x, ish, sizeof ish);
        shape_str(y, osh, sizeof osh);
        fprintf(manifest, "%s %lld %s %s %s %s %s %s\n", name, (long long)batches[i], in_path,
                dg_dtype_of(x) == DG_F32 ? "float32" : "int64", ish, ref_path, osh, dg_dtype_of(y) == DG_F32 ? "float32" : "int64");
    }
    dg_layer_train(net);
    dg_scope_end(s);
    printf("export_models: %s written\n", path);
}
static void run_case(const char *name, dg_layer *net, make_input_fn make, dg_onnx_export_params p) {
    run_case_at(name, net, make, p, 0);
}

static dg_tensor *mnist_input(int64_t b) { return dg_randn(DG_SHAPE(b, 1, 28, 28), DG_F32); }
static dg_tensor *cifar_input(int64_t b) { return dg_randn(DG_SHAPE(b, 3, 32, 32), DG_F32); }
static dg_tensor *image64_input(int64_t b) { return dg_randn(DG_SHAPE(b, 3, 64, 64), DG_F32); }
static dg_tensor *ids_input(int64_t b) {
    int64_t ids[7 * 5];
    for (int i = 0; i < 7 * 5; i++) ids[i] = (i * 37 + 11) % 100;
    return dg_from_data(DG_SHAPE(b, 5), DG_I64, ids);
}

/* ---- a layer of our own: conv (stride, dilation, groups), pads, pools, activations, arithmetic,
 * shapes, reductions and a matmul, chained in one forward ---- */
static const dg_layer_class custom_class = DG_LAYER_CLASS("CustomChain");
static dg_tensor *param(dg_layer *l, const char *n) { return dg_layer_parameter(l, n); }
static dg_tensor *custom_forward(dg_layer *self, const dg_tensor *x) {
    dg_conv2d_params cp = dg_conv2d_default_params();
    cp.stride[0] = cp.stride[1] = 1;
    cp.padding[0] = 2; cp.padding[1] = 1;
    cp.dilation[0] = 2; cp.dilation[1] = 1;
    cp.groups = 1;
    int64_t pads[4] = { 1, 1, 1, 1 };
    dg_tensor *y = dg_pad(x, pads, 4, DG_PAD_REFLECT, 0.0);                       /* [N,4,18,18] */
    y = dg_conv2d(y, param(self, "conv_weight"), param(self, "conv_bias"), cp);     /* [N,8,18,18] */
    y = dg_leaky_relu(y, 0.1);
    dg_conv2d_params gp = dg_conv2d_default_params();
    gp.groups = 2; gp.stride[0] = gp.stride[1] = 2; gp.padding[0] = gp.padding[1] = 1;
    y = dg_conv2d(y, param(self, "gconv_weight"), NULL, gp);                        /* [N,8,9,9] */
    dg_pool2d_params ap = dg_pool2d_default_params();
    ap.kernel[0] = ap.kernel[1] = 3; ap.stride[0] = ap.stride[1] = 2; ap.padding[0] = ap.padding[1] = 1;
    dg_tensor *a = dg_avg_pool2d(y, ap);                                            /* [N,8,5,5] */
    ap.count_include_pad = true;
    dg_tensor *m = dg_max_pool2d(y, ap);
    y = dg_add(dg_mul(a, dg_sigmoid(m)), dg_div(dg_tanh(a), dg_add_scalar(dg_abs(m), 1.5)));
    y = dg_gelu(dg_sub(y, dg_mul_scalar(y, 0.25)), false);
    y = dg_concat((dg_tensor *[]){ y, dg_gelu(y, true) }, 2, 1);                    /* [N,16,5,5] */
    y = dg_clip(dg_exp(dg_neg(dg_pow_scalar(y, 2.0))), 0.05, 0.95);
    y = dg_sqrt(dg_add_scalar(y, 0.5));
    y = dg_slice(y, 2, 1, 5, 2);                                                    /* [N,16,2,5] */
    y = dg_permute(y, (int[]){ 0, 2, 3, 1 });                                       /* [N,2,5,16] */
    y = dg_matmul(y, param(self, "proj"));                                          /* [N,2,5,6] */
    y = dg_sub(y, dg_mean(y, (int[]){ 3 }, 1, true));
    y = dg_flatten(y, 1, -1);                                                       /* [N,60] */
    y = dg_linear(y, param(self, "fc_weight"), param(self, "fc_bias"));             /* [N,10] */
    y = dg_add(y, dg_sum(dg_relu(y), (int[]){ 1 }, 1, true));
    return dg_log_softmax(dg_rdiv_scalar(dg_add_scalar(dg_sigmoid(y), 1.0), 2.0), 1);
}
static dg_layer *custom_layer(void) {
    dg_layer *l = dg_layer_new(&custom_class, custom_forward, NULL, NULL);
    ONNX_ASSERT(l, "custom layer");
    ONNX_ASSERT(dg_layer_add_parameter(l, "conv_weight", dg_uniform(DG_SHAPE(8, 4, 3, 3), -0.3, 0.3, DG_F32)) == 0 &&
          dg_layer_add_parameter(l, "conv_bias", dg_uniform(DG_SHAPE(8), -0.1, 0.1, DG_F32)) == 0 &&
          dg_layer_add_parameter(l, "gconv_weight", dg_uniform(DG_SHAPE(8, 4, 3, 3), -0.3, 0.3, DG_F32)) == 0 &&
          dg_layer_add_parameter(l, "proj", dg_uniform(DG_SHAPE(16, 6), -0.3, 0.3, DG_F32)) == 0 &&
          dg_layer_add_parameter(l, "fc_weight", dg_uniform(DG_SHAPE(10, 60), -0.2, 0.2, DG_F32)) == 0 &&
          dg_layer_add_parameter(l, "fc_bias", dg_uniform(DG_SHAPE(10), -0.1, 0.1, DG_F32)) == 0, "custom parameters");
    return l;
}
static dg_tensor *custom_input(int64_t b) { return dg_randn(DG_SHAPE(b, 4, 16, 16), DG_F32); }

/* ---- Embedding + LayerNorm: ids [N, 5] -> embedding 16 -> LayerNorm -> GELU -> Linear (3-D: MatMul + Add)
 * -> dropout -> mean over the sequence ---- */
static const dg_layer_class embed_class = DG_LAYER_CLASS("EmbedLN");
static dg_tensor *embed_forward(dg_layer *self, const dg_tensor *ids) {
    dg_tensor *y = dg_forward(dg_layer_sublayer(self, "emb"), ids);
    y = dg_gelu(dg_forward(dg_layer_sublayer(self, "ln"), y), false);
    y = dg_forward(dg_layer_sublayer(self, "drop"), dg_forward(dg_layer_sublayer(self, "fc"), y));
    return dg_mean(y, (int[]){ 1 }, 1, false);
}
static dg_layer *embed_model(void) {
    dg_layer *l = dg_layer_new(&embed_class, embed_forward, NULL, NULL);
    ONNX_ASSERT(l && dg_layer_add_sublayer(l, "emb", dg_nn_embedding(100, 16, dg_nn_embedding_default_params())) == 0 &&
          dg_layer_add_sublayer(l, "ln", dg_nn_layer_norm(DG_SHAPE(16), dg_nn_layer_norm_default_params())) == 0 &&
          dg_layer_add_sublayer(l, "fc", dg_nn_linear(16, 8)) == 0 &&
          dg_layer_add_sublayer(l, "drop", dg_nn_dropout(0.3)) == 0, "embedding model");
    dg_no_grad_begin();
    ONNX_ASSERT(dg_uniform_(dg_layer_parameter(l, "ln.weight"), 0.5, 1.5) == 0 && dg_uniform_(dg_layer_parameter(l, "ln.bias"), -0.2, 0.2) == 0,
          "ln params");
    dg_no_grad_end();
    return l;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: export_models OUTDIR\n"); return 2; }
    outdir = argv[1];
    char mpath[1024];
    snprintf(mpath, sizeof mpath, "%s/manifest.txt", outdir);
    ONNX_ASSERT(dg_init(NULL) == 0, "init");
    dg_manual_seed(19);
    manifest = fopen(mpath, "w");
    ONNX_ASSERT(manifest, mpath);
    dg_onnx_export_params p = dg_onnx_export_default_params();

    dg_layer *mnist = dg_mnist_cnn(), *mynet = dg_cifar_mynet(10), *resnet = dg_resnet18(dg_resnet_default_params());
    dg_layer *face = dg_facenet(15), *custom = custom_layer(), *embed = embed_model();
    ONNX_ASSERT(mnist && mynet && resnet && face, "models");
    randomize_buffers(resnet);
    randomize_buffers(face);
    run_case("mnist_cnn", mnist, mnist_input, p);
    run_case("cifar_mynet", mynet, cifar_input, p);
    run_case("resnet18", resnet, image64_input, p);
    dg_onnx_export_params fold = p;
    fold.fold_batch_norm = true;
    run_case("resnet18_folded", resnet, image64_input, fold);
    run_case("facenet", face, image64_input, p);
    run_case("custom_chain", custom, custom_input, p);
    run_case("embed_layernorm", embed, ids_input, p);
    dg_onnx_export_params op13 = p;
    op13.opset = 13;
    run_case("embed_layernorm_opset13", embed, ids_input, op13);
    for (int i = 0; i < n_op_models; i++) {
        dg_layer *l = op_models[i].make();
        run_case_at(op_models[i].name, l, op_models[i].input, p, op_models[i].fixed_batch);
        dg_layer_free(l);
    }
    ONNX_ASSERT(fclose(manifest) == 0, mpath);
    dg_layer_free(mnist); dg_layer_free(mynet); dg_layer_free(resnet); dg_layer_free(face); dg_layer_free(custom); dg_layer_free(embed);
    dg_shutdown();
    return 0;
}
