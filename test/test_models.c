/* test/test_models.c — the model zoo (include/dygraph/models.h): ResNet18/34/50 and the seeds'
 * networks have torch's state_dict (names, order, kinds, shapes, dtypes, parameter counts;
 * test/goldens/models_names.txt), torchvision's init, the right output shapes; the MNIST CNN and
 * torchvision's residual blocks reproduce PyTorch's outputs, gradients and running statistics on
 * loaded weights (test/goldens/models_numeric.safetensors; both files made by
 * make_models_goldens.py); the MNIST CNN learns a small synthetic problem; a ResNet18 training
 * step reaches every parameter and leaks nothing; MyNet and FaceNet compute what the seed
 * writes; bad configurations and inputs are errors. DG_TEST_VERBOSE=1 prints every error measured. */
#include "test_util.h"

/* ---------------- helpers ---------------- */

#define NAMES_FILE "test/goldens/models_names.txt"
#define NUMERIC_FILE "test/goldens/models_numeric.safetensors"


/* One torch state_dict entry from models_names.txt. */
typedef struct { char kind; char name[128]; char dtype[8]; int ndim; int64_t d[8]; } name_rec;

/* Reads the records of model `tag`; returns how many (and the parameter count in *params). */
static int read_names(const char *tag, name_rec **out, int64_t *params) {
    FILE *f = fopen(NAMES_FILE, "r");
    cr_assert(f, "cannot open %s (run from the repo root)", NAMES_FILE);
    char line[512];
    int n = -1;
    name_rec *r = NULL;
    while (fgets(line, sizeof line, f)) {
        char t[64];
        long long p;
        int entries;
        if (sscanf(line, "model %63s params %lld entries %d", t, &p, &entries) != 3 || strcmp(t, tag)) continue;
        *params = p;
        r = calloc((size_t)entries, sizeof *r);
        for (n = 0; n < entries; n++) {
            cr_assert(fgets(line, sizeof line, f), "%s: model %s is cut short", NAMES_FILE, tag);
            name_rec *e = &r[n];
            int at = 0;
            cr_assert(sscanf(line, " %c %127s %7s %d%n", &e->kind, e->name, e->dtype, &e->ndim, &at) == 4, "bad line '%s'", line);
            for (int i = 0; i < e->ndim; i++) {
                int used = 0;
                long long d;
                cr_assert(sscanf(line + at, "%lld%n", &d, &used) == 1, "bad line '%s'", line);
                e->d[i] = d;
                at += used;
            }
        }
        break;
    }
    fclose(f);
    cr_assert(n >= 0, "%s has no model '%s'", NAMES_FILE, tag);
    *out = r;
    return n;
}

static void rec_shape(const name_rec *e, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < e->ndim && at < n; i++) at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)e->d[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

/* state_dict, named_parameters and named_buffers of m equal torch's, entry by entry, and so does
 * the parameter count. */
static void expect_torch_names(dg_layer *m, const char *tag) {
    cr_assert_not_null(m, "%s: %s", tag, dg_last_error());
    name_rec *want;
    int64_t want_params;
    int nw = read_names(tag, &want, &want_params);
    int n, np, nb;
    dg_named_tensor *sd = dg_layer_state_dict(m, &n);
    dg_named_tensor *ps = dg_layer_named_parameters(m, &np);
    dg_named_tensor *bs = dg_layer_named_buffers(m, &nb);
    cr_assert(sd && ps && bs, "%s", dg_last_error());
    cr_assert_eq(n, nw, "%s: state_dict has %d entries, torch's has %d", tag, n, nw);
    int ip = 0, ib = 0;
    for (int i = 0; i < n; i++) {
        const name_rec *e = &want[i];
        cr_assert_str_eq(sd[i].name, e->name, "%s: state_dict entry %d", tag, i);
        char a[128], b[128];
        rec_shape(e, b, sizeof b);
        cr_assert_str_eq(dg_shape_str(sd[i].tensor, a, sizeof a), b, "%s: %s shape", tag, e->name);
        cr_assert_eq(dg_dtype_of(sd[i].tensor), strcmp(e->dtype, "i64") ? DG_F32 : DG_I64, "%s: %s dtype", tag, e->name);
        /* parameters and buffers come in the same relative order as torch's */
        if (e->kind == 'p') {
            cr_assert(ip < np, "%s: %s should be a parameter", tag, e->name);
            cr_assert_str_eq(ps[ip].name, e->name, "%s: parameter %d", tag, ip);
            cr_assert(dg_requires_grad(ps[ip].tensor), "%s: %s does not require grad", tag, e->name);
            ip++;
        } else {
            cr_assert(ib < nb, "%s: %s should be a buffer", tag, e->name);
            cr_assert_str_eq(bs[ib].name, e->name, "%s: buffer %d", tag, ib);
            cr_assert(!dg_requires_grad(bs[ib].tensor), "%s: buffer %s requires grad", tag, e->name);
            ib++;
        }
    }
    cr_assert_eq(ip, np, "%s: %d parameters, torch has %d", tag, np, ip);
    cr_assert_eq(ib, nb, "%s: %d buffers, torch has %d", tag, nb, ib);
    cr_assert_eq(dg_layer_num_parameters(m), want_params, "%s: %lld parameters, torch has %lld", tag,
                 (long long)dg_layer_num_parameters(m), (long long)want_params);
    free(sd);
    free(ps);
    free(bs);
    free(want);
}

static double max_abs(const dg_tensor *t) {
    dg_scope *s = dg_scope_begin();
    double v = dg_item(dg_max(dg_abs(dg_cast(t, DG_F64)), NULL, 0, false));
    dg_scope_end(s);
    return v;
}

/* got ~ want elementwise: |got - want| <= tol * max(|want|, 1e-2 * max|want|). The floor keeps
 * the test about float32 rounding rather than cancellation in values near zero. */
static void expect_close(const dg_tensor *got, const dg_tensor *want, double tol, const char *what) {
    cr_assert_not_null(got, "%s: missing: %s", what, dg_last_error());
    char a[96], b[96];
    cr_assert_str_eq(dg_shape_str(got, a, sizeof a), dg_shape_str(want, b, sizeof b), "%s: shape", what);
    double e = max_rel_err(got, want, fmax(1e-2 * max_abs(want), 1e-30));
    if (getenv("DG_TEST_VERBOSE")) fprintf(stderr, "%-40s rel err %.3g\n", what, e);
    cr_assert(e <= tol, "%s: max relative error %.3g > %.3g", what, e, tol);
}

static dg_tensor_dict *numeric(void) {
    dg_tensor_dict *d = dg_load_safetensors(NUMERIC_FILE);
    cr_assert_not_null(d, "%s (run from the repo root)", dg_last_error());
    return d;
}

static dg_tensor *rec(const dg_tensor_dict *d, const char *tag, const char *what) {
    char name[256];
    snprintf(name, sizeof name, "%s.%s", tag, what);
    dg_tensor *t = dg_tensor_dict_get(d, name);
    cr_assert_not_null(t, "%s lacks '%s'", NUMERIC_FILE, name);
    return t;
}

/* Loads every state_dict entry of m from "<tag>.<its C name>" and checks that the file holds no
 * state entry for tag that m lacks. */
static void load_state(dg_layer *m, const dg_tensor_dict *d, const char *tag) {
    int n;
    dg_named_tensor *sd = dg_layer_state_dict(m, &n);
    cr_assert_not_null(sd, "%s", dg_last_error());
    for (int i = 0; i < n; i++) {
        dg_tensor *src = rec(d, tag, sd[i].name);
        char a[96], b[96];
        cr_assert_str_eq(dg_shape_str(sd[i].tensor, a, sizeof a), dg_shape_str(src, b, sizeof b), "%s.%s: shape", tag, sd[i].name);
        cr_assert_eq(dg_dtype_of(sd[i].tensor), dg_dtype_of(src), "%s.%s: dtype", tag, sd[i].name);
        dg_no_grad_begin();
        cr_assert_eq(dg_copy_(sd[i].tensor, src), 0, "%s.%s: %s", tag, sd[i].name, dg_last_error());
        dg_no_grad_end();
    }
    /* the file's state records for tag: all "<tag>.*" but the inputs and answers */
    static const char *const extra[] = { "x", "out", "gout", "grad_x", "out_eval" };
    size_t lt = strlen(tag);
    int state_records = 0;
    for (int i = 0; i < dg_tensor_dict_size(d); i++) {
        const char *nm = dg_tensor_dict_name(d, i);
        if (strncmp(nm, tag, lt) || nm[lt] != '.') continue;
        const char *rest = nm + lt + 1;
        bool is_extra = !strncmp(rest, "grad.", 5) || !strncmp(rest, "after.", 6);
        for (size_t k = 0; k < sizeof extra / sizeof *extra; k++) is_extra |= !strcmp(rest, extra[k]);
        state_records += !is_extra;
    }
    cr_assert_eq(n, state_records, "%s: state dict has %d entries, torch's has %d", tag, n, state_records);
    free(sd);
}

/* Forward (in the layer's current mode), backward of sum(out * gout), and the comparison of the
 * output, the input gradient and every parameter gradient with PyTorch's. */
static void expect_forward_backward(dg_layer *m, const dg_tensor_dict *d, const char *tag, double tol) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_clone(rec(d, tag, "x"));
    dg_set_requires_grad(x, true);
    dg_tensor *out = dg_forward(m, x);
    cr_assert_not_null(out, "%s: %s", tag, dg_last_error());
    char what[256];
    snprintf(what, sizeof what, "%s.out", tag);
    expect_close(out, rec(d, tag, "out"), tol, what);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(out, rec(d, tag, "gout")))), 0, "%s: %s", tag, dg_last_error());
    snprintf(what, sizeof what, "%s.grad_x", tag);
    expect_close(dg_grad(x), rec(d, tag, "grad_x"), tol, what);
    int n;
    dg_named_tensor *np = dg_layer_named_parameters(m, &n);
    for (int i = 0; i < n; i++) {
        char g[200];
        snprintf(g, sizeof g, "grad.%s", np[i].name);
        snprintf(what, sizeof what, "%s.%s", tag, g);
        expect_close(dg_grad(np[i].tensor), rec(d, tag, g), tol, what);
    }
    free(np);
    dg_scope_end(s);
}

static void expect_shape(const dg_tensor *t, const char *want, const char *what) {
    cr_assert_not_null(t, "%s: %s", what, dg_last_error());
    char a[96];
    cr_assert_str_eq(dg_shape_str(t, a, sizeof a), want, "%s: output shape", what);
}

/* ---------------- names, order, shapes, counts and init against torch ---------------- */

static void mean_std(const dg_tensor *t, double *mean, double *std) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_cast(t, DG_F64);
    *mean = dg_item(dg_mean_all(x));
    *std = sqrt(dg_item(dg_mean_all(dg_mul(dg_sub_scalar(x, *mean), dg_sub_scalar(x, *mean)))));
    dg_scope_end(s);
}

/* torchvision's init: every conv kaiming_normal_(fan_out, relu) = N(0, sqrt(2 / (OC*KH*KW))),
 * every BN weight 1 (0 for the last BN of a block with zero_init_residual) and bias 0, fc
 * Linear's U(+-1/sqrt(in)). Returns the number of convs seen. */
static int expect_torchvision_init(dg_layer *m, const char *last_bn, bool zero_init_residual) {
    int n, convs = 0, bns = 0;
    dg_named_tensor *np = dg_layer_named_parameters(m, &n);
    for (int i = 0; i < n; i++) {
        const dg_tensor *t = np[i].tensor;
        const char *nm = np[i].name;
        double mean, std;
        mean_std(t, &mean, &std);
        if (dg_ndim(t) == 4) {
            double want = sqrt(2.0 / (double)(dg_dim(t, 0) * dg_dim(t, 2) * dg_dim(t, 3)));
            cr_assert(fabs(std / want - 1) < 0.05, "%s: std %.4g, kaiming_normal_ fan_out wants %.4g", nm, std, want);
            cr_assert(fabs(mean) < 0.05 * want, "%s: mean %.4g", nm, mean);
            convs++;
        } else if (strncmp(nm, "fc.", 3)) {   /* BatchNorm2d */
            bool weight = strstr(nm, ".weight") != NULL;
            char last[32];
            snprintf(last, sizeof last, ".%s.weight", last_bn);
            bool zero = !weight || (zero_init_residual && strstr(nm, last) && !strstr(nm, "downsample"));
            cr_assert(mean == (zero ? 0.0 : 1.0) && std == 0, "%s: mean %g std %g, want all %d", nm, mean, std, !zero);
            bns++;
        }
    }
    cr_assert_eq(bns, 2 * (convs + 0), "%d convs but %d BN tensors", convs, bns);   /* one BN per conv */
    /* fc keeps Linear's default: U(-b, b), b = 1/sqrt(in), std b/sqrt(3) */
    const dg_tensor *w = dg_layer_parameter(m, "fc.weight");
    double mean, std, bound = 1 / sqrt((double)dg_dim(w, 1));
    mean_std(w, &mean, &std);
    cr_assert(fabs(std / (bound / sqrt(3.0)) - 1) < 0.05, "fc.weight std %.4g, want %.4g", std, bound / sqrt(3.0));
    cr_assert(max_abs(w) <= bound, "fc.weight exceeds the Linear bound");
    cr_assert(max_abs(dg_layer_parameter(m, "fc.bias")) <= bound, "fc.bias exceeds the Linear bound");
    free(np);
    return convs;
}

/* The larger networks are built once here and checked for names, init and a forward, to keep
 * the file fast (random init dominates under the sanitizers). */
Test(models, resnets_match_torchvision) {
    size_t live0 = dg_live_tensors();
    dg_manual_seed(7);
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = 10;
    dg_layer *m = dg_resnet18(rp);
    expect_torch_names(m, "resnet18_10");
    cr_assert_eq(dg_layer_num_parameters(m), 11181642);
    cr_assert_str_eq(dg_layer_type(m), "ResNet");
    cr_assert_str_eq(dg_layer_type(dg_layer_sublayer(m, "layer1.0")), "BasicBlock");
    cr_assert_str_eq(dg_layer_type(dg_layer_sublayer(m, "layer2.0.downsample")), "Sequential");
    cr_assert_null(dg_layer_sublayer(m, "layer1.0.downsample"), "layer1.0 needs no downsample (stride 1, 64 -> 64)");
    /* the module tree, not only the tensors: torchvision's children in order */
    const char *kids[] = { "conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc" };
    cr_assert_eq(dg_layer_num_children(m), 10);
    for (int i = 0; i < 10; i++) cr_assert_str_eq(dg_layer_child_name(m, i), kids[i]);
    const char *bkids[] = { "conv1", "bn1", "relu", "conv2", "bn2", "downsample" };
    dg_layer *b = dg_layer_sublayer(m, "layer3.0");
    cr_assert_eq(dg_layer_num_children(b), 6);
    for (int i = 0; i < 6; i++) cr_assert_str_eq(dg_layer_child_name(b, i), bkids[i]);
    cr_assert_eq(expect_torchvision_init(m, "bn2", false), 20, "resnet18 has 20 convs");
    dg_layer_free(m);

    dg_resnet_params rp2 = dg_resnet_default_params();
    rp2.num_classes = 10;
    m = dg_resnet34(rp2);
    expect_torch_names(m, "resnet34_10");
    dg_layer_free(m);

    /* resnet50 with zero_init_residual: same tree, bn3 of every block starts at 0 */
    dg_resnet_params rp3 = dg_resnet_default_params();
    rp3.num_classes = 10;
    rp3.zero_init_residual = true;
    m = dg_resnet50(rp3);
    expect_torch_names(m, "resnet50_10");
    cr_assert_str_eq(dg_layer_type(dg_layer_sublayer(m, "layer1.0")), "Bottleneck");
    const char *bnkids[] = { "conv1", "bn1", "conv2", "bn2", "conv3", "bn3", "relu", "downsample" };
    b = dg_layer_sublayer(m, "layer1.0");   /* 64 -> 256 channels: downsample at stride 1 */
    cr_assert_eq(dg_layer_num_children(b), 8);
    for (int i = 0; i < 8; i++) cr_assert_str_eq(dg_layer_child_name(b, i), bnkids[i]);
    cr_assert_eq(expect_torchvision_init(m, "bn3", true), 53, "resnet50 has 53 convs");
    cr_assert_eq(max_abs(dg_layer_parameter(m, "layer4.2.bn3.weight")), 0.0);
    /* the stride sits on the 3x3 conv (v1.5): conv1 (1x1) keeps 8x8, conv2 halves it */
    dg_layer_eval(m);
    dg_no_grad_begin();
    dg_scope *s = dg_scope_begin();
    dg_tensor *h = dg_forward(dg_layer_sublayer(m, "layer2.0.conv1"), dg_randn(DG_SHAPE(1, 256, 8, 8), DG_F32));
    expect_shape(h, "[1, 128, 8, 8]", "resnet50 layer2.0.conv1");
    expect_shape(dg_forward(dg_layer_sublayer(m, "layer2.0.conv2"), h), "[1, 128, 4, 4]", "resnet50 layer2.0.conv2");
    expect_shape(dg_forward(dg_layer_sublayer(m, "layer1"), dg_randn(DG_SHAPE(1, 64, 8, 8), DG_F32)), "[1, 256, 8, 8]",
                 "resnet50 layer1");
    expect_shape(dg_forward(m, dg_randn(DG_SHAPE(2, 3, 64, 64), DG_F32)), "[2, 10]", "resnet50 64x64");
    dg_scope_end(s);
    dg_no_grad_end();
    dg_layer_free(m);
    cr_assert_eq(dg_live_tensors(), live0, "%zd tensors left", (ssize_t)(dg_live_tensors() - live0));
}

Test(models, tutorial_nets_match_torch) {
    size_t live0 = dg_live_tensors();
    dg_layer *m = dg_mnist_cnn();
    expect_torch_names(m, "mnist_cnn");
    cr_assert_str_eq(dg_layer_type(m), "MNIST");
    const char *mk[] = { "conv1", "pool1", "conv2", "pool2", "fc" };
    cr_assert_eq(dg_layer_num_children(m), 5);
    for (int i = 0; i < 5; i++) cr_assert_str_eq(dg_layer_child_name(m, i), mk[i]);
    dg_layer_free(m);

    m = dg_cifar_mynet(10);
    expect_torch_names(m, "cifar_mynet_10");
    const char *ck[] = { "conv1", "pool1", "conv2", "pool2", "conv3", "flatten", "linear1", "linear2" };
    cr_assert_eq(dg_layer_num_children(m), 8);
    for (int i = 0; i < 8; i++) cr_assert_str_eq(dg_layer_child_name(m, i), ck[i]);
    dg_layer_free(m);

    /* FaceNet's backbone is resnet18 with the default num_classes (1000) */
    m = dg_facenet(15);
    expect_torch_names(m, "facenet_15");
    cr_assert_eq(dg_dim(dg_layer_parameter(m, "backbone.fc.weight"), 0), 1000);
    cr_assert_eq(dg_layer_num_parameters(dg_layer_sublayer(m, "backbone")), 11689512, "resnet18 with 1000 classes");
    cr_assert_str_eq(dg_layer_type(dg_layer_sublayer(m, "outLayer1.2")), "Dropout");
    dg_layer_eval(m);
    dg_no_grad_begin();
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 96, 96), DG_F32);
    dg_tensor *y = dg_forward(m, x);
    expect_shape(y, "[2, 30]", "facenet");
    /* outLayer2(outLayer1(backbone(x))), dropout being the identity in eval mode */
    dg_tensor *feat = dg_forward(dg_layer_sublayer(m, "backbone"), x);
    expect_shape(feat, "[2, 1000]", "facenet backbone");
    dg_tensor *h = dg_relu(dg_add(dg_matmul_t(feat, dg_layer_parameter(m, "outLayer1.0.weight"), false, true),
                       dg_layer_parameter(m, "outLayer1.0.bias")));
    dg_tensor *want = dg_add(dg_matmul_t(h, dg_layer_parameter(m, "outLayer2.weight"), false, true),
                             dg_layer_parameter(m, "outLayer2.bias"));
    cr_assert(max_rel_err(y, want, 1e-3) < 1e-5, "facenet forward is not outLayer2(outLayer1(backbone(x)))");
    cr_assert_null(dg_forward(m, dg_zeros(DG_SHAPE(2, 1, 96, 96), DG_F32)));
    expect_error_contains("facenet 1 channel", "FaceNet", "[N, 3, H, W]");
    dg_scope_end(s);
    dg_no_grad_end();
    dg_layer_free(m);

    /* the same seed gives the same weights */
    dg_manual_seed(7);
    dg_layer *a = dg_mnist_cnn();
    dg_manual_seed(7);
    dg_layer *b = dg_mnist_cnn();
    cr_assert_eq(max_rel_err(dg_layer_parameter(a, "conv2.weight"), dg_layer_parameter(b, "conv2.weight"), 1), 0.0);
    dg_layer_free(a);
    dg_layer_free(b);
    cr_assert_eq(dg_live_tensors(), live0);
}

/* MyNet's forward is the tutorial's: the layer against the same computation written with the
 * functional ops on its own parameters. */
Test(models, mynet_forward_is_the_tutorials) {
    size_t live0 = dg_live_tensors();
    dg_manual_seed(9);
    dg_layer *m = dg_cifar_mynet(10);
    cr_assert_not_null(m, "%s", dg_last_error());
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(3, 3, 32, 32), DG_F32);
    dg_tensor *y = dg_forward(m, x);
    expect_shape(y, "[3, 10]", "mynet");
#define P(name) dg_layer_parameter(m, name)
    dg_pool2d_params pool = dg_pool2d_default_params();
    pool.kernel[0] = pool.kernel[1] = 2;
    pool.stride[0] = pool.stride[1] = 2;
    dg_tensor *h = dg_max_pool2d(dg_relu(dg_conv2d(x, P("conv1.weight"), P("conv1.bias"), dg_conv2d_default_params())), pool);
    h = dg_max_pool2d(dg_relu(dg_conv2d(h, P("conv2.weight"), P("conv2.bias"), dg_conv2d_default_params())), pool);
    h = dg_flatten(dg_relu(dg_conv2d(h, P("conv3.weight"), P("conv3.bias"), dg_conv2d_default_params())), 1, -1);
    h = dg_relu(dg_add(dg_matmul_t(h, P("linear1.weight"), false, true), P("linear1.bias")));
    dg_tensor *want = dg_add(dg_matmul_t(h, P("linear2.weight"), false, true), P("linear2.bias"));
#undef P
    cr_assert_not_null(want, "%s", dg_last_error());
    double e = max_rel_err(y, want, 1e-3);
    cr_assert(e < 1e-5, "mynet forward differs from the tutorial's computation (rel err %.3g)", e);
    /* and gradients reach every parameter */
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    int n;
    dg_tensor **ps = dg_layer_parameters(m, &n);
    cr_assert_eq(n, 10);
    for (int i = 0; i < n; i++) cr_assert_not_null(dg_grad(ps[i]), "parameter %d has no gradient", i);
    free(ps);
    dg_scope_end(s);
    dg_layer_free(m);
    cr_assert_eq(dg_live_tensors(), live0);
}

/* ---------------- output shapes ---------------- */

Test(models, output_shapes) {
    size_t live0 = dg_live_tensors();
    dg_resnet_params rp4 = dg_resnet_default_params();
    rp4.num_classes = 10;
    dg_layer *m = dg_resnet18(rp4);
    cr_assert_not_null(m, "%s", dg_last_error());
    dg_layer_eval(m);
    dg_no_grad_begin();
    dg_scope *s = dg_scope_begin();
    expect_shape(dg_forward(m, dg_randn(DG_SHAPE(2, 3, 224, 224), DG_F32)), "[2, 10]", "resnet18 224x224");
    expect_shape(dg_forward(m, dg_randn(DG_SHAPE(2, 3, 96, 96), DG_F32)), "[2, 10]", "resnet18 96x96");
    /* the stages: 96 -> 48 (conv1) -> 24 (maxpool) -> 24, 12, 6, 3 */
    dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 96, 96), DG_F32);
    dg_tensor *h = dg_forward(dg_layer_sublayer(m, "maxpool"),
                              dg_relu(dg_forward(dg_layer_sublayer(m, "bn1"), dg_forward(dg_layer_sublayer(m, "conv1"), x))));
    expect_shape(h, "[2, 64, 24, 24]", "stem");
    const char *want[] = { "[2, 64, 24, 24]", "[2, 128, 12, 12]", "[2, 256, 6, 6]", "[2, 512, 3, 3]" };
    for (int i = 0; i < 4; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "layer%d", i + 1);
        h = dg_forward(dg_layer_sublayer(m, nm), h);
        expect_shape(h, want[i], nm);
    }
    dg_layer_free(m);

    m = dg_mnist_cnn();
    expect_shape(dg_forward(m, dg_randn(DG_SHAPE(3, 1, 28, 28), DG_F32)), "[3, 10]", "mnist_cnn");
    expect_shape(dg_forward(m, dg_randn(DG_SHAPE(1, 1, 28, 28), DG_F32)), "[1, 10]", "mnist_cnn batch 1");
    dg_layer_free(m);
    m = dg_cifar_mynet(10);
    expect_shape(dg_forward(m, dg_randn(DG_SHAPE(4, 3, 32, 32), DG_F32)), "[4, 10]", "mynet");
    dg_layer_free(m);
    m = dg_cifar_mynet(3);
    expect_shape(dg_forward(m, dg_randn(DG_SHAPE(2, 3, 32, 32), DG_F32)), "[2, 3]", "mynet 3 classes");
    dg_layer_free(m);
    dg_scope_end(s);
    dg_no_grad_end();
    cr_assert_eq(dg_live_tensors(), live0);
}

/* ---------------- numbers against PyTorch ---------------- */

Test(models, mnist_cnn_matches_torch) {
    size_t live0 = dg_live_tensors();
    dg_tensor_dict *d = numeric();
    dg_layer *m = dg_mnist_cnn();
    cr_assert_not_null(m, "%s", dg_last_error());
    load_state(m, d, "mnist");
    expect_forward_backward(m, d, "mnist", 1e-4);
    /* the tutorial's FC has softmax: ours gives logits, softmax of which are the tutorial's outputs */
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *p = dg_softmax(dg_forward(m, rec(d, "mnist", "x")), -1);
    dg_no_grad_end();
    expect_close(p, dg_softmax(rec(d, "mnist", "out"), -1), 1e-4, "mnist softmax");
    dg_scope_end(s);
    dg_layer_free(m);
    dg_tensor_dict_free(d);
    cr_assert_eq(dg_live_tensors(), live0);
}

/* torchvision's BasicBlock / Bottleneck (with and without downsample) on loaded weights and
 * non-trivial BN state: a training-mode forward (batch statistics), gradients, the running
 * statistics it leaves, and eval mode with those. */
Test(models, resnet_blocks_match_torchvision) {
    size_t live0 = dg_live_tensors();
    dg_tensor_dict *d = numeric();
    struct { const char *tag; bool bottleneck; int64_t in, planes; int stride; bool has_ds; } cases[] = {
        { "basic_ds", false, 8, 16, 2, true },
        { "basic", false, 8, 8, 1, false },
        { "bottleneck_ds", true, 8, 4, 2, true },
        { "bottleneck", true, 16, 4, 1, false },
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *tag = cases[c].tag;
        dg_layer *b = cases[c].bottleneck ? dg_resnet_bottleneck(cases[c].in, cases[c].planes, cases[c].stride, DG_F32)
                                          : dg_resnet_basic_block(cases[c].in, cases[c].planes, cases[c].stride, DG_F32);
        cr_assert_not_null(b, "%s: %s", tag, dg_last_error());
        cr_assert_eq(dg_layer_sublayer(b, "downsample") != NULL, cases[c].has_ds, "%s: downsample", tag);
        load_state(b, d, tag);
        expect_forward_backward(b, d, tag, 1e-4);
        /* the running statistics after that training step */
        int n;
        dg_named_tensor *bufs = dg_layer_named_buffers(b, &n);
        for (int i = 0; i < n; i++) {
            char g[200], what[256];
            snprintf(g, sizeof g, "after.%s", bufs[i].name);
            snprintf(what, sizeof what, "%s.%s", tag, g);
            dg_tensor *want = rec(d, tag, g);
            if (dg_dtype_of(want) == DG_I64) cr_assert_eq(dg_item(bufs[i].tensor), dg_item(want), "%s", what);
            else expect_close(bufs[i].tensor, want, 1e-4, what);
        }
        free(bufs);
        dg_layer_eval(b);
        dg_scope *s = dg_scope_begin();
        dg_no_grad_begin();
        char what[256];
        snprintf(what, sizeof what, "%s.out_eval", tag);
        expect_close(dg_forward(b, rec(d, tag, "x")), rec(d, tag, "out_eval"), 1e-4, what);
        dg_no_grad_end();
        dg_scope_end(s);
        dg_layer_free(b);
    }
    dg_tensor_dict_free(d);
    cr_assert_eq(dg_live_tensors(), live0);
}

/* A float64 Bottleneck with downsample: analytic input gradients against finite differences
 * (training mode: batch statistics couple the whole batch). */
static dg_tensor *block_fn(dg_tensor *const *in, void *ctx) { return dg_forward(ctx, in[0]); }

Test(models, bottleneck_gradcheck_f64) {
    dg_manual_seed(3);
    dg_layer *b = dg_resnet_bottleneck(4, 2, 2, DG_F64);
    cr_assert_not_null(b, "%s", dg_last_error());
    cr_assert_eq(dg_dtype_of(dg_layer_parameter(b, "downsample.0.weight")), DG_F64);
    dg_tensor *x = gc_input(DG_SHAPE(2, 4, 5, 5), -1, 1);
    gradcheck("bottleneck", block_fn, &x, 1, b, 1e-5);
    dg_tensor_free(x);
    dg_layer_free(b);
}

/* ---------------- training ---------------- */

/* 20 images of 10 classes: class c has a bright 6x6 square at its own place, over noise. SGD
 * (p -= lr * grad, written by hand) on the one batch must halve the cross-entropy in 30 steps. */
Test(models, mnist_cnn_learns) {
    size_t live0 = dg_live_tensors();
    dg_manual_seed(5);
    enum { N = 20 };
    float *pat = calloc(N * 28 * 28, sizeof *pat);
    int64_t lab[N];
    for (int i = 0; i < N; i++) {
        int c = i % 10, r0 = (c / 5) * 14 + 4, c0 = (c % 5) * 5 + 1;
        lab[i] = c;
        for (int r = r0; r < r0 + 6; r++)
            for (int q = c0; q < c0 + 6; q++) pat[i * 784 + r * 28 + q] = 1.0f;
    }
    dg_scope *data = dg_scope_begin();
    dg_tensor *x = dg_keep(dg_add(dg_mul_scalar(dg_randn(DG_SHAPE(N, 1, 28, 28), DG_F32), 0.3),
                                  dg_from_data(DG_SHAPE(N, 1, 28, 28), DG_F32, pat)));
    dg_scope_end(data);
    dg_tensor *y = dg_from_data(DG_SHAPE(N), DG_I64, lab);
    free(pat);
    dg_layer *m = dg_mnist_cnn();
    cr_assert(x && y && m, "%s", dg_last_error());
    int np;
    dg_tensor **ps = dg_layer_parameters(m, &np);
    double first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *loss = dg_cross_entropy(dg_forward(m, x), y);
        cr_assert_not_null(loss, "%s", dg_last_error());
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        last = dg_item(loss);
        if (step == 0) first = last;
        cr_assert(isfinite(last), "step %d: loss %g", step, last);
        dg_no_grad_begin();
        for (int i = 0; i < np; i++) {
            cr_assert_not_null(dg_grad(ps[i]), "step %d: parameter %d has no gradient", step, i);
            cr_assert_eq(dg_axpy_(ps[i], -0.1, dg_grad(ps[i])), 0, "%s", dg_last_error());
        }
        dg_no_grad_end();
        dg_layer_clear_gradients(m);
        dg_scope_end(s);
    }
    if (getenv("DG_TEST_VERBOSE")) fprintf(stderr, "mnist_cnn loss %.4f -> %.4f\n", first, last);
    cr_assert(first > 1.8, "initial loss %.4f should be near ln(10)", first);
    cr_assert(last < first / 2, "loss went from %.4f to %.4f in 30 steps, not halved", first, last);
    /* and the trained model classifies the batch */
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    double acc = dg_item(dg_accuracy(dg_forward(m, x), y, 1));
    dg_no_grad_end();
    dg_scope_end(s);
    cr_assert(acc >= 0.9, "training accuracy %.2f", acc);
    free(ps);
    dg_layer_free(m);
    dg_tensor_free(x);
    dg_tensor_free(y);
    cr_assert_eq(dg_live_tensors(), live0);
}

/* ResNet18 in training mode, batch 2 at 96x96: forward, cross-entropy, backward; every
 * parameter gets a finite gradient of its own shape, every BN updates its statistics, a second
 * step works, and freeing the model leaves no tensor behind. */
Test(models, resnet18_train_step_reaches_every_parameter) {
    size_t live0 = dg_live_tensors();
    dg_manual_seed(11);
    dg_resnet_params rp5 = dg_resnet_default_params();
    rp5.num_classes = 10;
    dg_layer *m = dg_resnet18(rp5);
    cr_assert_not_null(m, "%s", dg_last_error());
    cr_assert(dg_layer_is_training(m));
    size_t live_model = dg_live_tensors();
    int64_t lab[] = { 3, 7 };
    for (int step = 0; step < 2; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 96, 96), DG_F32);
        dg_tensor *out = dg_forward(m, x);
        expect_shape(out, "[2, 10]", "resnet18 train");
        dg_tensor *loss = dg_cross_entropy(out, dg_from_data(DG_SHAPE(2), DG_I64, lab));
        cr_assert_not_null(loss, "%s", dg_last_error());
        cr_assert(isfinite(dg_item(loss)));
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        int n;
        dg_named_tensor *np = dg_layer_named_parameters(m, &n);
        cr_assert_eq(n, 62);
        for (int i = 0; i < n; i++) {
            dg_tensor *g = dg_grad(np[i].tensor);
            cr_assert_not_null(g, "step %d: %s has no gradient", step, np[i].name);
            char a[96], b[96];
            cr_assert_str_eq(dg_shape_str(g, a, sizeof a), dg_shape_str(np[i].tensor, b, sizeof b), "%s", np[i].name);
            double ga = max_abs(g);
            cr_assert(isfinite(ga) && ga > 0, "step %d: %s gradient max |g| = %g", step, np[i].name, ga);
        }
        free(np);
        dg_named_tensor *bufs = dg_layer_named_buffers(m, &n);
        for (int i = 0; i < n; i++)
            if (strstr(bufs[i].name, "num_batches_tracked"))
                cr_assert_eq(dg_item(bufs[i].tensor), step + 1, "%s", bufs[i].name);
        free(bufs);
        dg_layer_clear_gradients(m);
        dg_scope_end(s);
        cr_assert_eq(dg_live_tensors(), live_model, "step %d leaves %zd tensors", step,
                     (ssize_t)(dg_live_tensors() - live_model));
    }
    dg_layer_free(m);
    cr_assert_eq(dg_live_tensors(), live0, "%zd tensors left after layer_free", (ssize_t)(dg_live_tensors() - live0));
}

/* ---------------- inference folding (nn/fuse.c) ---------------- */

/* In eval mode without gradients every Conv2d+BatchNorm(+ReLU) of ResNet18 runs as one
 * convolution with the ReLU fused into it; with gradients on, the same model runs the layers as
 * they are. Both must give the same logits, with running statistics far from 0 and 1 so the
 * folding is not trivially the identity. */
static void expect_folded_inference_equals_layers(void) {
    size_t live0 = dg_live_tensors();
    dg_manual_seed(5);
    dg_resnet_params rp6 = dg_resnet_default_params();
    rp6.num_classes = 10;
    dg_layer *m = dg_resnet18(rp6);
    cr_assert_not_null(m, "%s", dg_last_error());
    dg_tensor *x = dg_randn(DG_SHAPE(3, 3, 64, 64), DG_F32);
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    for (int i = 0; i < 3; i++) dg_forward(m, dg_add_scalar(dg_mul_scalar(x, 2.0 + i), 0.5 * i));   /* moves the running stats */
    dg_no_grad_end();
    dg_scope_end(s);
    dg_layer_eval(m);
    dg_no_grad_begin();
    dg_tensor *folded = dg_forward(m, x);
    dg_no_grad_end();
    dg_tensor *layers = dg_forward(m, x);   /* parameters require grad: no folding */
    cr_assert(folded && layers, "%s", dg_last_error());
    double e = max_rel_err(folded, layers, 1e-2);
    cr_assert(e <= 1e-4, "folded inference differs from the layers: max rel err %g", e);
    cr_assert(max_abs(folded) > 1e-3, "logits are not all zero");
    dg_tensor_free(folded);
    dg_tensor_free(layers);
    dg_tensor_free(x);
    dg_layer_free(m);
    cr_assert_eq(dg_live_tensors(), live0, "%zd tensors left", (ssize_t)(dg_live_tensors() - live0));
}
Test(models, folded_inference_equals_layers) { expect_folded_inference_equals_layers(); }

/* A NaN in the input reaches the logits through the folded convolutions and their ReLUs, as it
 * does through the layers (a ReLU that turned NaN into 0 would hide it). */
Test(models, folded_inference_keeps_nan) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(6);
    dg_resnet_params rp7 = dg_resnet_default_params();
    rp7.num_classes = 4;
    dg_layer *m = dg_resnet18(rp7);
    dg_layer_eval(m);
    dg_tensor *x = dg_randn(DG_SHAPE(1, 3, 64, 64), DG_F32);
    ((float *)dg_data(x))[3 * 64 + 7] = NAN;
    dg_no_grad_begin();
    dg_tensor *y = dg_forward(m, x);
    dg_no_grad_end();
    cr_assert_not_null(y, "%s", dg_last_error());
    float out[4];
    dg_to_host(y, out, sizeof out);
    for (int i = 0; i < 4; i++) cr_assert(isnan(out[i]), "logit %d is %g: the NaN was lost", i, out[i]);
    dg_layer_free(m);
    dg_scope_end(s);
}
Test(models, folded_inference_equals_layers_im2col) {
    setenv("DG_CPU_CONV", "im2col", 1);   /* read once per process: the fallback's fused ReLU */
    expect_folded_inference_equals_layers();
}

/* ---------------- bad configurations and inputs ---------------- */

Test(models, bad_configuration_and_input) {
    size_t live0 = dg_live_tensors();
    dg_resnet_params rp8 = dg_resnet_default_params();
    rp8.num_classes = -1;
    cr_assert_null(dg_resnet18(rp8));
    expect_error_contains("resnet18 num_classes -1", "ResNet", "num_classes");
    dg_resnet_params rp9 = dg_resnet_default_params();
    rp9.dtype = DG_I64;
    cr_assert_null(dg_resnet50(rp9));
    expect_error_contains("resnet50 i64", "ResNet", "int64");
    cr_assert_null(dg_resnet(DG_RESNET_BASIC, (const int[4]){ 2, 0, 2, 2 }, dg_resnet_default_params()));
    expect_error_contains("resnet zero-depth stage", "ResNet", "1..1024");
    cr_assert_null(dg_resnet(DG_RESNET_BASIC, NULL, dg_resnet_default_params()));
    expect_error_contains("resnet NULL layers", "ResNet", "NULL");
    cr_assert_null(dg_resnet((dg_resnet_block_kind)7, (const int[4]){ 1, 1, 1, 1 }, dg_resnet_default_params()));
    expect_error_contains("resnet bad block", "ResNet", "block 7");
    cr_assert_null(dg_resnet_basic_block(0, 4, 1, DG_F32));
    expect_error_contains("basic block 0 inplanes", "BasicBlock", "inplanes");
    cr_assert_null(dg_resnet_bottleneck(4, 4, 0, DG_F32));
    expect_error_contains("bottleneck stride 0", "Bottleneck", "stride");
    cr_assert_null(dg_cifar_mynet(0));
    expect_error_contains("mynet 0 classes", "MyNet", "num_classes");
    cr_assert_null(dg_facenet(-3));
    expect_error_contains("facenet -3 keypoints", "FaceNet", "num_keypoints");
    cr_assert_eq(dg_live_tensors(), live0);

    dg_scope *s = dg_scope_begin();
    dg_layer *m = dg_mnist_cnn();
    cr_assert_null(dg_forward(m, dg_zeros(DG_SHAPE(2, 3, 28, 28), DG_F32)));
    expect_error_contains("mnist 3 channels", "MNIST", "[2, 3, 28, 28] must be [N, 1, 28, 28]");
    cr_assert_null(dg_forward(m, dg_zeros(DG_SHAPE(2, 1, 32, 32), DG_F32)));
    expect_error_contains("mnist 32x32", "MNIST", "[N, 1, 28, 28]");
    cr_assert_null(dg_forward(m, dg_zeros(DG_SHAPE(1, 28, 28), DG_F32)));
    expect_error_contains("mnist 3-d", "MNIST", "[1, 28, 28]");
    dg_layer_free(m);
    m = dg_cifar_mynet(10);
    cr_assert_null(dg_forward(m, dg_zeros(DG_SHAPE(2, 3, 28, 28), DG_F32)));
    expect_error_contains("mynet 28x28", "MyNet", "[N, 3, 32, 32]");
    dg_layer_free(m);
    dg_resnet_params rp10 = dg_resnet_default_params();
    rp10.num_classes = 10;
    m = dg_resnet18(rp10);
    cr_assert_null(dg_forward(m, dg_zeros(DG_SHAPE(2, 1, 64, 64), DG_F32)));
    expect_error_contains("resnet18 1 channel", "ResNet", "[N, 3, H, W]");
    cr_assert_null(dg_forward(m, dg_zeros(DG_SHAPE(1, 3, 64, 64), DG_F64)));
    expect_error_contains("resnet18 f64 input", "Conv2d 'conv1'", "float64");
    /* a block that is handed the wrong channel count names itself and its path */
    cr_assert_null(dg_forward(dg_layer_sublayer(m, "layer2.0"), dg_zeros(DG_SHAPE(1, 128, 8, 8), DG_F32)));
    expect_error_contains("block channels", "BasicBlock 'layer2.0'", "[N, 64, H, W]");
    /* batch statistics need more than one value per channel (layer4 is 1x1 at 32x32, batch 1) */
    cr_assert_null(dg_forward(m, dg_zeros(DG_SHAPE(1, 3, 32, 32), DG_F32)));
    expect_error_contains("resnet18 batch 1 at 32x32 in training", "BatchNorm2d", "more than 1 value per channel");
    dg_layer_eval(m);
    expect_shape(dg_forward(m, dg_zeros(DG_SHAPE(1, 3, 32, 32), DG_F32)), "[1, 10]", "the same in eval mode");
    dg_layer_free(m);
    /* NULL in, NULL out, first message kept */
    cr_assert_null(dg_forward(NULL, NULL));
    dg_clear_error();
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), live0);
}
