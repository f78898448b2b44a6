/* test/test_nn.c — the layer system (include/dygraph/nn.h): state-dict names, order and
 * parameter counts against PyTorch, forward/backward of Linear and of a Conv2d+BatchNorm2d+ReLU+
 * MaxPool2d block against PyTorch goldens on loaded weights (test/goldens/nn_*.txt, made by
 * make_nn_goldens.py), train/eval switching (BatchNorm, Dropout), a custom layer written on the
 * public API, initialisers, loss layers, printing, bad input, clear_gradients and leaks. */
#include "test_util.h"

/* ---------------- helpers ---------------- */

/* Copies every state_dict entry of m from the golden record of the same name (shapes must
 * match) and checks that the golden holds no state entry m lacks (names starting with a digit
 * are state entries in these files). */
static void load_state(dg_layer *m, golden *g) {
    int n;
    dg_named_tensor *sd = dg_layer_state_dict(m, &n);
    cr_assert_not_null(sd, "%s", dg_last_error());
    for (int i = 0; i < n; i++) {
        dg_tensor *src = golden_get(g, sd[i].name);
        char a[96], b[96];
        cr_assert_str_eq(dg_shape_str(sd[i].tensor, a, sizeof a), dg_shape_str(src, b, sizeof b), "%s: shape", sd[i].name);
        cr_assert_eq(dg_dtype_of(sd[i].tensor), dg_dtype_of(src), "%s: dtype", sd[i].name);
        dg_no_grad_begin();
        cr_assert_eq(dg_copy_(sd[i].tensor, src), 0, "%s: %s", sd[i].name, dg_last_error());
        dg_no_grad_end();
    }
    int state_records = 0;
    for (int i = 0; i < g->n; i++) state_records += g->names[i][0] >= '0' && g->names[i][0] <= '9';
    cr_assert_eq(n, state_records, "state dict has %d entries, torch's has %d", n, state_records);
    free(sd);
}

static void expect_close(const dg_tensor *got, const dg_tensor *want, double tol, const char *what) {
    cr_assert_not_null(got, "%s: missing: %s", what, dg_last_error());
    char a[96], b[96];
    cr_assert_str_eq(dg_shape_str(got, a, sizeof a), dg_shape_str(want, b, sizeof b), "%s: shape", what);
    double e = max_rel_err(got, want, 1e-2);
    cr_assert(e <= tol, "%s: max relative error %.3g > %.3g", what, e, tol);
}


static double sum_of(const dg_tensor *t) {
    dg_scope *s = dg_scope_begin();
    double v = dg_item(dg_sum_all(dg_cast(t, DG_F64)));
    dg_scope_end(s);
    return v;
}

/* sum(out * gout), then backward */
static void backward_weighted(dg_tensor *out, dg_tensor *gout) {
    dg_tensor *loss = dg_sum_all(dg_mul(out, gout));
    cr_assert_not_null(loss, "%s", dg_last_error());
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
}

/* ---------------- names, order and counts against torch ---------------- */

Test(nn, names_and_counts_match_torch) {
    size_t live0 = dg_live_tensors();
    golden *g = golden_load("test/goldens/nn_names.txt");
    dg_layer *m = dg_nn_sequential(5, dg_nn_linear(10, 20), dg_nn_batch_norm1d(20, dg_nn_batch_norm_default_params()),
                                   dg_nn_relu(), dg_nn_dropout(0.5), dg_nn_linear(20, 2));
    cr_assert_not_null(m, "%s", dg_last_error());

    /* state_dict: same names, same order, same shapes and dtypes as torch's */
    int n;
    dg_named_tensor *sd = dg_layer_state_dict(m, &n);
    cr_assert_eq(n, g->n - 1, "state_dict has %d entries, torch's has %d", n, g->n - 1);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(sd[i].name, g->names[i], "entry %d", i);
        char a[96], b[96];
        cr_assert_str_eq(dg_shape_str(sd[i].tensor, a, sizeof a), dg_shape_str(g->t[i], b, sizeof b), "%s", sd[i].name);
        cr_assert_eq(dg_dtype_of(sd[i].tensor), dg_dtype_of(g->t[i]), "%s dtype", sd[i].name);
    }
    cr_assert_null(sd[n].name, "terminator");
    free(sd);

    /* parameter count and number of parameter tensors as sum(p.numel()) / len(parameters()) */
    dg_tensor *count = golden_get(g, "param_count");
    int64_t want[2];
    dg_to_host(count, want, sizeof want);
    cr_assert_eq(dg_layer_num_parameters(m), want[0]);
    dg_tensor **ps = dg_layer_parameters(m, &n);
    cr_assert_eq(n, want[1]);
    cr_assert_null(ps[n]);
    for (int i = 0; i < n; i++) cr_assert(dg_requires_grad(ps[i]) && dg_is_leaf(ps[i]), "parameter %d", i);
    cr_assert_eq(ps[0], dg_layer_parameter(m, "0.weight"));
    cr_assert_eq(ps[5], dg_layer_parameter(m, "4.bias"));
    free(ps);

    /* named parameters / buffers */
    dg_named_tensor *np = dg_layer_named_parameters(m, &n);
    const char *pn[] = { "0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias" };
    cr_assert_eq(n, 6);
    for (int i = 0; i < n; i++) cr_assert_str_eq(np[i].name, pn[i]);
    free(np);
    dg_named_tensor *nb = dg_layer_named_buffers(m, &n);
    const char *bn[] = { "1.running_mean", "1.running_var", "1.num_batches_tracked" };
    cr_assert_eq(n, 3);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(nb[i].name, bn[i]);
        cr_assert(!dg_requires_grad(nb[i].tensor), "%s requires grad", nb[i].name);
    }
    dg_tensor *nbt = dg_layer_buffer(m, "1.num_batches_tracked");
    cr_assert_eq(nbt, nb[2].tensor);
    cr_assert_eq(dg_dtype_of(nbt), DG_I64);
    cr_assert_eq(dg_ndim(nbt), 0);
    free(nb);

    /* lookups */
    cr_assert_str_eq(dg_layer_type(dg_layer_sublayer(m, "1")), "BatchNorm1d");
    cr_assert_eq(dg_layer_num_children(m), 5);
    cr_assert_str_eq(dg_layer_child_name(m, 3), "3");
    cr_assert_null(dg_layer_parameter(m, "1.running_mean"), "a buffer is not a parameter");
    cr_assert_null(dg_layer_parameter(m, "9.weight"));
    cr_assert_null(dg_layer_sublayer(m, "0.x"));
    char path[64];
    cr_assert_str_eq(dg_layer_full_name(dg_layer_child(m, 4), path, sizeof path), "4");
    cr_assert_str_eq(dg_layer_full_name(m, path, sizeof path), "");

    dg_layer_free(m);
    golden_free(g);
    cr_assert_eq(dg_live_tensors(), live0, "layer_free leaves %zu tensors", dg_live_tensors() - live0);
}

/* Nested names as torchvision's ResNet ("layer1.0.conv1.weight", "layer1.0.bn1.running_mean"). */
static const dg_layer_class block_class = DG_LAYER_CLASS("BasicBlock"), net_class = DG_LAYER_CLASS("Net");
static dg_layer *basic_block(int64_t c) {
    dg_layer *b = dg_layer_new(&block_class, NULL, NULL, NULL);
    dg_nn_conv2d_params ncp = dg_nn_conv2d_default_params();
    ncp.padding = 1;
    ncp.bias = false;
    dg_layer_add_sublayer(b, "conv1", dg_nn_conv2d(c, c, 3, ncp));
    dg_layer_add_sublayer(b, "bn1", dg_nn_batch_norm2d(c, dg_nn_batch_norm_default_params()));
    return b;
}

Test(nn, hierarchical_names) {
    dg_layer *net = dg_layer_new(&net_class, NULL, NULL, NULL);
    dg_nn_conv2d_params ncp2 = dg_nn_conv2d_default_params();
    ncp2.bias = false;
    cr_assert_eq(dg_layer_add_sublayer(net, "conv1", dg_nn_conv2d(3, 4, 3, ncp2)), 0);
    cr_assert_eq(dg_layer_add_sublayer(net, "layer1", dg_nn_sequential(2, basic_block(4), basic_block(4))), 0);
    int n;
    dg_named_tensor *sd = dg_layer_state_dict(net, &n);
    const char *want[] = { "conv1.weight",
                           "layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias", "layer1.0.bn1.running_mean",
                           "layer1.0.bn1.running_var", "layer1.0.bn1.num_batches_tracked",
                           "layer1.1.conv1.weight", "layer1.1.bn1.weight", "layer1.1.bn1.bias", "layer1.1.bn1.running_mean",
                           "layer1.1.bn1.running_var", "layer1.1.bn1.num_batches_tracked" };
    cr_assert_eq(n, 13);
    for (int i = 0; i < n; i++) cr_assert_str_eq(sd[i].name, want[i]);
    free(sd);
    cr_assert_not_null(dg_layer_buffer(net, "layer1.1.bn1.running_var"));
    char path[64];
    cr_assert_str_eq(dg_layer_full_name(dg_layer_sublayer(net, "layer1.1.bn1"), path, sizeof path), "layer1.1.bn1");
    cr_assert_eq(dg_layer_num_parameters(net), 4 * 3 * 9 + 2 * (4 * 4 * 9 + 8));
    dg_layer_free(net);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---------------- forward/backward against PyTorch on loaded weights ---------------- */

Test(nn, linear_matches_torch) {
    golden *g = golden_load("test/goldens/nn_linear.txt");
    dg_layer *m = dg_nn_sequential(3, dg_nn_linear(5, 4), dg_nn_relu(), dg_nn_linear(4, 3));
    cr_assert_not_null(m, "%s", dg_last_error());
    load_state(m, g);
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = golden_leaf(g, "x");
    dg_tensor *out = dg_forward(m, x);
    expect_close(out, golden_get(g, "out"), 1e-5, "out");
    backward_weighted(out, golden_get(g, "gout"));
    expect_close(dg_grad(x), golden_get(g, "grad_x"), 1e-5, "grad_x");
    const char *pn[] = { "0.weight", "0.bias", "2.weight", "2.bias" };
    for (int i = 0; i < 4; i++) {
        char gname[64];
        snprintf(gname, sizeof gname, "grad_%s", pn[i]);
        expect_close(dg_grad(dg_layer_parameter(m, pn[i])), golden_get(g, gname), 1e-5, gname);
    }
    /* a 3-D input: Linear acts on the last dim */
    expect_close(dg_forward(m, golden_get(g, "x3")), golden_get(g, "out3"), 1e-5, "out3");
    dg_scope_end(s);
    dg_layer_free(m);
    golden_free(g);
    cr_assert_eq(dg_live_tensors(), 0);
}

static dg_layer *conv_block_model(void) {
    dg_nn_conv2d_params ncp3 = dg_nn_conv2d_default_params();
    ncp3.padding = 1;
    dg_nn_conv2d_params ncp4 = dg_nn_conv2d_default_params();
    ncp4.stride = 2;
    ncp4.padding = 1;
    ncp4.groups = 2;
    ncp4.bias = false;
    return dg_nn_sequential(8, dg_nn_conv2d(3, 4, 3, ncp3),
                            dg_nn_batch_norm2d(4, dg_nn_batch_norm_default_params()), dg_nn_relu(),
                            dg_nn_max_pool2d(2, dg_nn_pool2d_default_params()),
                            dg_nn_conv2d(4, 6, 3, ncp4),
                            dg_nn_adaptive_avg_pool2d(1, 1), dg_nn_flatten(1, -1), dg_nn_linear(6, 3));
}

Test(nn, conv_bn_relu_pool_matches_torch) {
    golden *g = golden_load("test/goldens/nn_conv_block.txt");
    dg_layer *m = conv_block_model();
    cr_assert_not_null(m, "%s", dg_last_error());
    load_state(m, g);
    cr_assert_eq(dg_item(dg_layer_buffer(m, "1.num_batches_tracked")), 3);
    dg_scope *s = dg_scope_begin();

    /* training step: batch statistics, running-stat update, gradients */
    dg_tensor *x = golden_leaf(g, "x");
    dg_tensor *out = dg_forward(m, x);
    expect_close(out, golden_get(g, "out_train"), 2e-5, "out_train");
    backward_weighted(out, golden_get(g, "gout"));
    expect_close(dg_grad(x), golden_get(g, "grad_x"), 2e-5, "grad_x");
    const char *pn[] = { "0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "7.weight", "7.bias" };
    int np;
    free(dg_layer_parameters(m, &np));
    cr_assert_eq(np, 7);
    for (int i = 0; i < 7; i++) {
        char gname[64];
        snprintf(gname, sizeof gname, "grad_%s", pn[i]);
        expect_close(dg_grad(dg_layer_parameter(m, pn[i])), golden_get(g, gname), 2e-5, gname);
    }
    expect_close(dg_layer_buffer(m, "1.running_mean"), golden_get(g, "after_1.running_mean"), 1e-5, "running_mean");
    expect_close(dg_layer_buffer(m, "1.running_var"), golden_get(g, "after_1.running_var"), 1e-5, "running_var");
    cr_assert_eq(dg_item(dg_layer_buffer(m, "1.num_batches_tracked")),
                 dg_item(golden_get(g, "after_1.num_batches_tracked")));

    /* eval: the updated running statistics, no update */
    cr_assert_eq(dg_layer_eval(m), 0);
    dg_tensor *rm_before = dg_clone(dg_layer_buffer(m, "1.running_mean"));
    expect_close(dg_forward(m, golden_get(g, "x")), golden_get(g, "out_eval"), 2e-5, "out_eval");
    cr_assert_eq(max_rel_err(dg_layer_buffer(m, "1.running_mean"), rm_before, 1), 0, "eval updated running_mean");
    cr_assert_eq(dg_item(dg_layer_buffer(m, "1.num_batches_tracked")), 4, "eval counted a batch");
    dg_scope_end(s);
    dg_layer_free(m);
    golden_free(g);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---------------- train / eval ---------------- */

Test(nn, train_eval_switch_batch_norm) {
    dg_manual_seed(5);
    dg_layer *m = dg_nn_sequential(2, dg_nn_linear(3, 4), dg_nn_batch_norm1d(4, dg_nn_batch_norm_default_params()));
    dg_layer *bn = dg_layer_child(m, 1);
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_normal(DG_SHAPE(16, 3), 2.0, 3.0, DG_F32);
    cr_assert(dg_layer_is_training(m) && dg_layer_is_training(bn), "layers start in training mode");

    /* training: batch statistics -> each feature has mean ~0 and (biased) variance ~1 */
    dg_tensor *y = dg_forward(m, x);
    int ax0[] = { 0 };
    dg_tensor *mean = dg_mean(y, ax0, 1, false);
    dg_tensor *var = dg_mean(dg_mul(y, y), ax0, 1, false);
    for (int64_t j = 0; j < 4; j++) {
        cr_assert(fabs(dg_get(mean, &j)) < 1e-5, "train mean %g", dg_get(mean, &j));
        cr_assert(fabs(dg_get(var, &j) - 1) < 1e-3, "train var %g", dg_get(var, &j));
    }
    dg_tensor *rm = dg_layer_buffer(m, "1.running_mean");
    cr_assert(sum_of(dg_abs(rm)) > 0, "training did not update running_mean");
    cr_assert_eq(dg_item(dg_layer_buffer(m, "1.num_batches_tracked")), 1);

    /* eval: propagated to the child; running statistics, nothing updated */
    cr_assert_eq(dg_layer_eval(m), 0);
    cr_assert(!dg_layer_is_training(bn), "eval did not reach the sublayer");
    dg_tensor *rm0 = dg_clone(rm);
    dg_tensor *ye = dg_forward(m, x);
    cr_assert(max_rel_err(ye, y, 1) > 1e-2, "eval output equals the training output");
    cr_assert_eq(max_rel_err(rm, rm0, 1), 0, "eval changed running_mean");
    cr_assert_eq(dg_item(dg_layer_buffer(m, "1.num_batches_tracked")), 1);
    /* eval output = (h - running_mean) / sqrt(running_var + eps) for the linear output h */
    dg_tensor *h = dg_forward(dg_layer_child(m, 0), x);
    dg_tensor *want = dg_div(dg_sub(h, rm), dg_sqrt(dg_add_scalar(dg_layer_buffer(m, "1.running_var"), 1e-5)));
    expect_close(ye, want, 1e-5, "eval formula");
    /* a single row works in eval, and is refused in training as torch does */
    cr_assert_not_null(dg_forward(m, dg_slice(x, 0, 0, 1, 1)), "%s", dg_last_error());
    cr_assert_eq(dg_layer_train(m), 0);
    cr_assert(dg_layer_is_training(bn));
    cr_assert_null(dg_forward(m, dg_slice(x, 0, 0, 1, 1)));
    expect_error_contains("one row in training", "BatchNorm1d '1'", "more than 1 value per channel");
    dg_scope_end(s);
    dg_layer_free(m);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(nn, batch_norm_options) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_normal(DG_SHAPE(4, 2, 3, 3), 1.0, 2.0, DG_F32);
    /* no running stats: no buffers, batch statistics in eval too */
    dg_nn_batch_norm_params nbp = dg_nn_batch_norm_default_params();
    nbp.track_running_stats = false;
    dg_layer *a = dg_nn_batch_norm2d(2, nbp);
    int n;
    free(dg_layer_named_buffers(a, &n));
    cr_assert_eq(n, 0);
    dg_tensor *ya = dg_forward(a, x);
    dg_layer_eval(a);
    expect_close(dg_forward(a, x), ya, 1e-6, "eval without running stats");
    /* no affine: no parameters */
    dg_nn_batch_norm_params nbp2 = dg_nn_batch_norm_default_params();
    nbp2.affine = false;
    dg_layer *b = dg_nn_batch_norm2d(2, nbp2);
    cr_assert_eq(dg_layer_num_parameters(b), 0);
    expect_close(dg_forward(b, x), ya, 1e-6, "no affine = weight 1, bias 0");
    /* cumulative average (momentum=None): after two batches running_mean = mean of both batch means */
    dg_nn_batch_norm_params nbp3 = dg_nn_batch_norm_default_params();
    nbp3.cumulative_average = true;
    dg_layer *c = dg_nn_batch_norm2d(2, nbp3);
    dg_tensor *x2 = dg_normal(DG_SHAPE(4, 2, 3, 3), -1.0, 1.0, DG_F32);
    dg_forward(c, x);
    dg_forward(c, x2);
    int axes[] = { 0, 2, 3 };
    dg_tensor *want = dg_div_scalar(dg_add(dg_mean(x, axes, 3, false), dg_mean(x2, axes, 3, false)), 2);
    expect_close(dg_layer_buffer(c, "running_mean"), want, 1e-5, "cumulative running_mean");
    /* momentum: running_mean = momentum * batch mean after one batch from zeros */
    dg_nn_batch_norm_params nbp4 = dg_nn_batch_norm_default_params();
    nbp4.momentum = 0.5;
    dg_layer *d = dg_nn_batch_norm2d(2, nbp4);
    dg_forward(d, x);
    expect_close(dg_layer_buffer(d, "running_mean"), dg_mul_scalar(dg_mean(x, axes, 3, false), 0.5), 1e-5, "momentum");
    dg_scope_end(s);
    dg_layer_free(a);
    dg_layer_free(b);
    dg_layer_free(c);
    dg_layer_free(d);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(nn, train_eval_switch_dropout) {
    dg_manual_seed(7);
    dg_layer *m = dg_nn_sequential(2, dg_nn_identity(), dg_nn_dropout(0.25));
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(100, 100), DG_F32);
    dg_tensor *y = dg_forward(m, x);
    const float *v = dg_data(y);
    int zeros = 0;
    for (int i = 0; i < 10000; i++) {
        if (v[i] == 0) zeros++;
        else cr_assert(fabsf(v[i] - 1.0f / 0.75f) < 1e-6f, "kept value %g", v[i]);
    }
    cr_assert(zeros > 2200 && zeros < 2800, "%d of 10000 dropped with p = 0.25", zeros);
    dg_layer_eval(m);
    dg_tensor *ye = dg_forward(m, x);
    cr_assert_neq(ye, x, "eval forward returned its input handle");
    cr_assert_eq(max_rel_err(ye, x, 1), 0, "eval dropout is not the identity");
    dg_layer_train(m);
    cr_assert(max_rel_err(dg_forward(m, x), x, 1) > 0.1, "train again: no dropout");
    dg_scope_end(s);
    dg_layer_free(m);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---------------- a custom layer on the public API ---------------- */

/* y = scale * relu(fc(x)) + shift; `shift` is a buffer, `fc` a sublayer. */
typedef struct { dg_layer *fc; dg_tensor *scale, *shift; int *freed; } my_block;

static void my_block_free(void *p) {
    my_block *b = p;
    if (b->freed) (*b->freed)++;
    free(b);
}

static dg_tensor *my_block_forward(dg_layer *self, const dg_tensor *x) {
    my_block *b = dg_layer_user(self);
    if (dg_dim(x, -1) != 3) return DG_LAYER_ERROR(self, "input must have 3 features, got %lld", (long long)dg_dim(x, -1));
    /* temporaries need no freeing: dg_forward frees all but the result */
    return dg_add(dg_mul(dg_relu(dg_forward(b->fc, x)), b->scale), b->shift);
}

static dg_layer *my_block_new(int *freed) {
    my_block *b = calloc(1, sizeof *b);
    b->freed = freed;
    static const dg_layer_class my_block_class = DG_LAYER_CLASS("MyBlock");
    dg_layer *l = dg_layer_new(&my_block_class, my_block_forward, b, my_block_free);
    if (!l) return NULL;
    int rc = dg_layer_add_parameter(l, "scale", b->scale = dg_full(DG_SHAPE(2), 2.0, DG_F32));
    if (!rc) rc = dg_layer_add_buffer(l, "shift", b->shift = dg_full(DG_SHAPE(2), 0.5, DG_F32));
    if (!rc) rc = dg_layer_add_sublayer(l, "fc", b->fc = dg_nn_linear(3, 2));
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

Test(nn, custom_layer) {
    int freed = 0;
    dg_layer *net = dg_nn_sequential(2, my_block_new(&freed), dg_nn_linear(2, 1));
    cr_assert_not_null(net, "%s", dg_last_error());
    int n;
    dg_named_tensor *np = dg_layer_named_parameters(net, &n);
    const char *want[] = { "0.scale", "0.fc.weight", "0.fc.bias", "1.weight", "1.bias" };
    cr_assert_eq(n, 5);
    for (int i = 0; i < n; i++) cr_assert_str_eq(np[i].name, want[i]);
    free(np);
    cr_assert_not_null(dg_layer_buffer(net, "0.shift"));
    cr_assert_null(dg_layer_parameter(net, "0.shift"));

    /* forward: values as written by hand */
    size_t live0 = dg_live_tensors();
    dg_tensor *x = dg_uniform(DG_SHAPE(4, 3), -1, 1, DG_F32);
    /* no scope open: the caller owns y; without a tape nothing else survives the call */
    dg_no_grad_begin();
    dg_tensor *y = dg_forward(dg_layer_child(net, 0), x);
    dg_no_grad_end();
    cr_assert_eq(dg_live_tensors(), live0 + 2, "forward left temporaries alive (%zu new tensors)", dg_live_tensors() - live0);
    dg_layer *fc = dg_layer_sublayer(net, "0.fc");
    dg_scope *s = dg_scope_begin();
    dg_tensor *h = dg_relu(dg_add(dg_matmul_t(x, dg_layer_parameter(fc, "weight"), false, true), dg_layer_parameter(fc, "bias")));
    expect_close(y, dg_add_scalar(dg_mul_scalar(h, 2.0), 0.5), 1e-6, "custom forward");
    /* gradients reach the custom parameter and the sublayer's */
    dg_tensor *out = dg_forward(net, x);
    cr_assert_eq(dg_backward(dg_sum_all(out)), 0, "%s", dg_last_error());
    cr_assert_not_null(dg_grad(dg_layer_parameter(net, "0.scale")));
    cr_assert_not_null(dg_grad(dg_layer_parameter(net, "0.fc.weight")));
    /* its own error message names it and its path */
    cr_assert_null(dg_forward(net, dg_ones(DG_SHAPE(4, 5), DG_F32)));
    expect_error_contains("custom layer error", "MyBlock '0'", "input must have 3 features, got 5");
    dg_scope_end(s);
    dg_tensor_free(y);
    dg_tensor_free(x);

    cr_assert_eq(freed, 0);
    dg_layer_free(net);
    cr_assert_eq(freed, 1, "the user state was not released");
    cr_assert_eq(dg_live_tensors(), 0);
}

/* A forward that returns its input (Identity) hands back a new handle that can be freed. */
Test(nn, forward_returning_input_gives_a_new_handle) {
    dg_layer *id = dg_nn_identity();
    dg_tensor *x = dg_randn(DG_SHAPE(2, 2), DG_F32);
    dg_set_requires_grad(x, true);
    dg_tensor *y = dg_forward(id, x);
    cr_assert_not_null(y);
    cr_assert_neq(y, x);
    cr_assert_eq(max_rel_err(y, x, 1), 0);
    dg_tensor *loss = dg_sum_all(y);
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    cr_assert_not_null(dg_grad(x), "no gradient through Identity");
    dg_tensor_free(loss);
    dg_tensor_free(y);
    dg_tensor_free(x);
    dg_layer_free(id);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---------------- shared sublayers and tied weights ---------------- */

Test(nn, shared_and_tied) {
    dg_layer *lin = dg_nn_linear(3, 3);
    dg_layer *net = dg_nn_sequential(2, dg_layer_ref(lin), lin);   /* the same layer twice */
    cr_assert_not_null(net, "%s", dg_last_error());
    int n;
    free(dg_layer_parameters(net, &n));
    cr_assert_eq(n, 2, "a shared layer's parameters are listed once");
    dg_named_tensor *sd = dg_layer_state_dict(net, &n);
    cr_assert_eq(n, 4, "state_dict keeps both names, as torch");
    cr_assert_str_eq(sd[2].name, "1.weight");
    cr_assert_eq(sd[0].tensor, sd[2].tensor);
    free(sd);
    /* tied: one tensor registered in two layers */
    static const dg_layer_class a_class = DG_LAYER_CLASS("A");
    dg_layer *a = dg_layer_new(&a_class, NULL, NULL, NULL);
    dg_tensor *w = dg_randn(DG_SHAPE(2, 2), DG_F32);
    cr_assert_eq(dg_layer_add_parameter(a, "w", w), 0);
    cr_assert_eq(dg_layer_add_sublayer(net, "tied", a), 0);
    cr_assert_eq(dg_layer_add_parameter(net, "w_again", dg_tensor_ref(w)), 0);
    dg_named_tensor *np = dg_layer_named_parameters(net, &n);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(np[0].name, "w_again", "own parameters come before the sublayers'");
    free(np);
    dg_layer_free(net);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---------------- gradients, initialisers, apply ---------------- */

Test(nn, clear_gradients) {
    dg_layer *m = conv_block_model();
    dg_scope *s = dg_scope_begin();
    dg_tensor *out = dg_forward(m, dg_randn(DG_SHAPE(2, 3, 8, 8), DG_F32));
    cr_assert_eq(dg_backward(dg_sum_all(out)), 0, "%s", dg_last_error());
    int n;
    dg_tensor **ps = dg_layer_parameters(m, &n);
    for (int i = 0; i < n; i++) cr_assert_not_null(dg_grad(ps[i]), "parameter %d has no gradient", i);
    cr_assert_eq(dg_layer_clear_gradients(m), 0);
    for (int i = 0; i < n; i++) cr_assert_null(dg_grad(ps[i]), "parameter %d kept its gradient", i);
    free(ps);
    dg_scope_end(s);
    dg_layer_free(m);
    cr_assert_eq(dg_live_tensors(), 0);
}

static double max_abs(const dg_tensor *t) {
    dg_scope *s = dg_scope_begin();
    int64_t n = dg_numel(t);
    double m = n ? dg_item(dg_max(dg_abs(dg_cast(t, DG_F64)), NULL, 0, false)) : 0;
    dg_scope_end(s);
    return m;
}

static double std_of(const dg_tensor *t) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *d = dg_cast(t, DG_F64);
    double mean = dg_item(dg_mean_all(d));
    double v = dg_item(dg_mean_all(dg_mul(dg_sub_scalar(d, mean), dg_sub_scalar(d, mean))));
    dg_scope_end(s);
    return sqrt(v);
}

Test(nn, default_init_follows_torch) {
    dg_manual_seed(3);
    dg_layer *lin = dg_nn_linear(64, 200);
    double bound = 1 / 8.0;   /* 1/sqrt(64) */
    double mw = max_abs(dg_layer_parameter(lin, "weight")), mb = max_abs(dg_layer_parameter(lin, "bias"));
    cr_assert(mw <= bound && mw > 0.98 * bound, "Linear weight max |w| %g, bound %g", mw, bound);
    cr_assert(mb <= bound && mb > 0.9 * bound, "Linear bias max |b| %g, bound %g", mb, bound);
    /* conv: fan_in = in/groups * k * k = 4/2 * 9 = 18 */
    dg_nn_conv2d_params ncp5 = dg_nn_conv2d_default_params();
    ncp5.groups = 2;
    dg_layer *conv = dg_nn_conv2d(4, 64, 3, ncp5);
    double cb = 1 / sqrt(18.0), mc = max_abs(dg_layer_parameter(conv, "weight"));
    cr_assert(mc <= cb && mc > 0.98 * cb, "Conv2d weight max %g, bound %g", mc, cb);
    dg_layer *bn = dg_nn_batch_norm2d(5, dg_nn_batch_norm_default_params());
    cr_assert_eq(sum_of(dg_layer_parameter(bn, "weight")), 5);
    cr_assert_eq(sum_of(dg_layer_parameter(bn, "bias")), 0);
    cr_assert_eq(sum_of(dg_layer_buffer(bn, "running_var")), 5);
    dg_layer_free(lin);
    dg_layer_free(conv);
    dg_layer_free(bn);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(nn, initializers) {
    dg_manual_seed(4);
    dg_layer *lin = dg_nn_linear(100, 300);   /* fan_in 100, fan_out 300 */
    dg_tensor *w = dg_layer_parameter(lin, "weight");
    int64_t fi, fo;
    cr_assert_eq(dg_nn_init_calculate_fans(w, &fi, &fo), 0);
    cr_assert(fi == 100 && fo == 300);
    /* on a parameter that requires grad, with grad mode on: the initialiser handles no_grad */
    cr_assert_eq(dg_nn_init_xavier_uniform_(w, 1.0), 0, "%s", dg_last_error());
    double b = sqrt(6.0 / 400), m = max_abs(w);
    cr_assert(m <= b && m > 0.98 * b, "xavier_uniform max %g bound %g", m, b);
    cr_assert_eq(dg_nn_init_xavier_normal_(w, 2.0), 0);
    cr_assert(fabs(std_of(w) - 2 * sqrt(2.0 / 400)) < 0.03 * 2 * sqrt(2.0 / 400), "xavier_normal std %g", std_of(w));
    cr_assert_eq(dg_nn_init_kaiming_uniform_(w, dg_nn_kaiming_default_params()), 0);
    b = sqrt(2.0) * sqrt(3.0 / 100), m = max_abs(w);
    cr_assert(m <= b && m > 0.98 * b, "kaiming_uniform max %g bound %g", m, b);
    dg_nn_kaiming_params kp = dg_nn_kaiming_default_params();
    kp.mode = DG_FAN_OUT;
    kp.nonlinearity = DG_NONLIN_TANH;
    cr_assert_eq(dg_nn_init_kaiming_normal_(w, kp), 0);
    double sd = 5.0 / 3.0 / sqrt(300.0);
    cr_assert(fabs(std_of(w) - sd) < 0.03 * sd, "kaiming_normal std %g want %g", std_of(w), sd);
    cr_assert_eq(dg_nn_init_normal_(w, 0, 0.5), 0);
    cr_assert(fabs(std_of(w) - 0.5) < 0.015, "normal std %g", std_of(w));
    cr_assert_eq(dg_nn_init_uniform_(w, 2, 3), 0);
    cr_assert(max_abs(w) <= 3 && sum_of(w) / 30000 > 2.45 && sum_of(w) / 30000 < 2.55);
    cr_assert_eq(dg_nn_init_constant_(w, 0.25), 0);
    cr_assert_eq(sum_of(w), 0.25 * 30000);
    cr_assert_eq(dg_nn_init_zeros_(dg_layer_parameter(lin, "bias")), 0);
    cr_assert_eq(max_abs(dg_layer_parameter(lin, "bias")), 0);
    cr_assert(dg_requires_grad(w), "initialising dropped requires_grad");
    cr_assert(fabs(dg_nn_init_calculate_gain(DG_NONLIN_LEAKY_RELU, sqrt(5.0)) - sqrt(1.0 / 3)) < 1e-12);
    /* bad input */
    dg_tensor *bias = dg_layer_parameter(lin, "bias");
    cr_assert_eq(dg_nn_init_xavier_uniform_(bias, 1), DG_EINVAL);
    expect_error_contains("xavier on 1-D", "at least 2 dims", "[300]");
    dg_tensor *ids = dg_zeros(DG_SHAPE(2, 2), DG_I64);
    cr_assert_eq(dg_nn_init_normal_(ids, 0, 1), DG_EINVAL);
    expect_error_contains("normal on i64", "init_normal_", "int64");
    cr_assert_eq(dg_nn_init_uniform_(NULL, 0, 1), DG_EINVAL);
    expect_error_contains("NULL", "init_uniform_", "NULL");
    cr_assert_eq(dg_nn_init_uniform_(w, 1, 0), DG_EINVAL);
    expect_error_contains("low > high", "init_uniform_", "low <= high");
    dg_tensor_free(ids);
    dg_layer_free(lin);
    cr_assert_eq(dg_live_tensors(), 0);
}

typedef struct { char order[256]; int linears; } apply_ctx;

static int reinit_linear(dg_layer *l, void *user) {
    apply_ctx *c = user;
    strncat(c->order, dg_layer_type(l), sizeof c->order - strlen(c->order) - 2);
    strcat(c->order, " ");
    if (dg_layer_is(l, dg_nn_linear_class())) {
        c->linears++;
        int rc = dg_nn_init_constant_(dg_layer_parameter(l, "weight"), 0.5);
        if (!rc) rc = dg_nn_init_zeros_(dg_layer_parameter(l, "bias"));
        return rc;
    }
    return 0;
}

Test(nn, apply_initializer) {
    dg_layer *m = dg_nn_sequential(3, dg_nn_linear(2, 3), dg_nn_sequential(2, dg_nn_tanh(), dg_nn_linear(3, 1)), dg_nn_relu());
    apply_ctx c = {0};
    cr_assert_eq(dg_layer_apply(m, reinit_linear, &c), 0);
    cr_assert_str_eq(c.order, "Linear Tanh Linear Sequential ReLU Sequential ", "children are visited before parents");
    cr_assert_eq(c.linears, 2);
    dg_scope *s = dg_scope_begin();
    /* x = [1, 1]: layer 0 gives 1.0 per unit, tanh(1) * 0.5 * 3 at the end */
    dg_tensor *y = dg_forward(m, dg_ones(DG_SHAPE(1, 2), DG_F32));
    cr_assert(fabs(dg_item(y) - 1.5 * tanh(1.0)) < 1e-6, "got %g", dg_item(y));
    dg_scope_end(s);
    dg_layer_free(m);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---------------- other layers against the functional ops ---------------- */

Test(nn, layers_match_functional_ops) {
    dg_manual_seed(9);
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 7, 6), DG_F32);
    dg_nn_pool2d_params npp = dg_nn_pool2d_default_params();
    npp.stride = 2;
    npp.padding = 1;
    dg_pool2d_params plp = dg_pool2d_default_params();
    plp.kernel[0] = plp.kernel[1] = 3;
    plp.stride[0] = plp.stride[1] = 2;
    plp.padding[0] = plp.padding[1] = 1;
    dg_nn_pool2d_params npp2 = dg_nn_pool2d_default_params();
    npp2.ceil_mode = true;
    dg_pool2d_params plp2 = dg_pool2d_default_params();
    plp2.kernel[0] = plp2.kernel[1] = 2;
    plp2.ceil_mode = true;
    struct { dg_layer *l; dg_tensor *want; const char *what; } cases[] = {
        { dg_nn_relu(), dg_relu(x), "relu" },
        { dg_nn_leaky_relu(0.2), dg_leaky_relu(x, 0.2), "leaky_relu" },
        { dg_nn_sigmoid(), dg_sigmoid(x), "sigmoid" },
        { dg_nn_tanh(), dg_tanh(x), "tanh" },
        { dg_nn_gelu(true), dg_gelu(x, true), "gelu" },
        { dg_nn_softmax(1), dg_softmax(x, 1), "softmax" },
        { dg_nn_flatten(1, -1), dg_reshape(x, DG_SHAPE(2, 126)), "flatten" },
        { dg_nn_max_pool2d(3, npp),
          dg_max_pool2d(x, plp), "max_pool" },
        { dg_nn_avg_pool2d(2, npp2),
          dg_avg_pool2d(x, plp2), "avg_pool" },
        { dg_nn_adaptive_avg_pool2d(2, 3), dg_adaptive_avg_pool2d(x, 2, 3), "adaptive_avg_pool" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_not_null(cases[i].l, "%s: %s", cases[i].what, dg_last_error());
        expect_close(dg_forward(cases[i].l, x), cases[i].want, 1e-6, cases[i].what);
        cr_assert_eq(dg_layer_num_parameters(cases[i].l), 0);
        dg_layer_free(cases[i].l);
    }
    /* conv with dilation against the op on the layer's own weights */
    dg_nn_conv2d_params ncp6 = dg_nn_conv2d_default_params();
    ncp6.dilation = 2;
    ncp6.padding = 2;
    dg_layer *conv = dg_nn_conv2d(3, 4, 3, ncp6);
    dg_conv2d_params cvp = dg_conv2d_default_params();
    cvp.dilation[0] = cvp.dilation[1] = 2;
    cvp.padding[0] = cvp.padding[1] = 2;
    expect_close(dg_forward(conv, x),
                 dg_conv2d(x, dg_layer_parameter(conv, "weight"), dg_layer_parameter(conv, "bias"),
                           cvp), 1e-6, "conv dilation");
    dg_layer_free(conv);
    /* f64 layers for gradient checks */
    dg_nn_linear_params linp = dg_nn_linear_default_params();
    linp.dtype = DG_F64;
    linp.bias = false;
    dg_layer *l64 = dg_nn_linear_ext(3, 2, linp);
    cr_assert_eq(dg_dtype_of(dg_layer_parameter(l64, "weight")), DG_F64);
    cr_assert_null(dg_layer_parameter(l64, "bias"));
    cr_assert_eq(dg_dtype_of(dg_forward(l64, dg_ones(DG_SHAPE(3), DG_F64))), DG_F64);
    dg_layer_free(l64);
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(nn, loss_layers) {
    dg_manual_seed(10);
    dg_scope *s = dg_scope_begin();
    dg_tensor *a = dg_randn(DG_SHAPE(4, 5), DG_F32), *b = dg_randn(DG_SHAPE(4, 5), DG_F32);
    int64_t lab[] = { 0, 4, 2, 1 };
    dg_tensor *label = dg_from_data(DG_SHAPE(4), DG_I64, lab);
    dg_layer *mse = dg_nn_mse_loss(DG_REDUCE_MEAN), *l1 = dg_nn_l1_loss(DG_REDUCE_SUM);
    dg_layer *ce = dg_nn_cross_entropy_loss(dg_cross_entropy_default_params());
    dg_layer *bce = dg_nn_bce_with_logits_loss(DG_REDUCE_NONE);
    expect_close(dg_loss_forward(mse, a, b), dg_mse_loss(a, b), 1e-6, "MSELoss");
    expect_close(dg_loss_forward(l1, a, b), dg_l1_loss(a, b, DG_REDUCE_SUM), 1e-6, "L1Loss");
    expect_close(dg_loss_forward(ce, a, label), dg_cross_entropy(a, label), 1e-6, "CrossEntropyLoss");
    dg_tensor *p = dg_sigmoid(b);
    expect_close(dg_loss_forward(bce, a, p), dg_binary_cross_entropy_with_logits(a, p, DG_REDUCE_NONE), 1e-6, "BCE");
    /* a loss layer through a model: gradient reaches the parameters */
    dg_layer *lin = dg_nn_linear(5, 5);
    cr_assert_eq(dg_backward(dg_loss_forward(ce, dg_forward(lin, a), label)), 0, "%s", dg_last_error());
    cr_assert_not_null(dg_grad(dg_layer_parameter(lin, "weight")));
    /* wrong entry point either way */
    cr_assert_null(dg_forward(mse, a));
    expect_error_contains("forward on a loss", "MSELoss", "dg_loss_forward");
    cr_assert_null(dg_loss_forward(lin, a, b));
    expect_error_contains("loss_forward on Linear", "Linear", "not a loss layer");
    cr_assert_null(dg_loss_forward(mse, a, NULL));
    expect_error_contains("NULL label", "MSELoss", "label is NULL");
    cr_assert_null(dg_nn_mse_loss((dg_reduction)7));
    expect_error_contains("bad reduction", "MSELoss", "reduction");
    dg_scope_end(s);
    dg_layer_free(mse);
    dg_layer_free(l1);
    dg_layer_free(ce);
    dg_layer_free(bce);
    dg_layer_free(lin);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---------------- printing ---------------- */

Test(nn, print_like_torch) {
    dg_nn_conv2d_params ncp7 = dg_nn_conv2d_default_params();
    ncp7.padding = 1;
    dg_nn_conv2d_params ncp8 = dg_nn_conv2d_default_params();
    ncp8.stride = 2;
    ncp8.groups = 2;
    ncp8.bias = false;
    ncp8.dilation = 2;
    dg_nn_linear_params linp2 = dg_nn_linear_default_params();
    linp2.bias = false;
    dg_layer *m = dg_nn_sequential(6, dg_nn_conv2d(3, 4, 3, ncp7),
                                   dg_nn_batch_norm2d(4, dg_nn_batch_norm_default_params()), dg_nn_relu(),
                                   dg_nn_max_pool2d(2, dg_nn_pool2d_default_params()),
                                   dg_nn_conv2d(4, 8, 3, ncp8),
                                   dg_nn_sequential(3, dg_nn_flatten(1, -1), dg_nn_linear_ext(4, 2, linp2),
                                                    dg_nn_dropout(0.5)));
    char *s = dg_layer_to_string(m);
    /* what PyTorch 1.13 prints for the same nn.Sequential */
    const char *want =
        "Sequential(\n"
        "  (0): Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
        "  (2): ReLU()\n"
        "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
        "  (4): Conv2d(4, 8, kernel_size=(3, 3), stride=(2, 2), dilation=(2, 2), groups=2, bias=False)\n"
        "  (5): Sequential(\n"
        "    (0): Flatten(start_dim=1, end_dim=-1)\n"
        "    (1): Linear(in_features=4, out_features=2, bias=False)\n"
        "    (2): Dropout(p=0.5, inplace=False)\n"
        "  )\n"
        ")";
    cr_assert_str_eq(s, want);
    free(s);
    dg_layer_free(m);
}

/* ---------------- bad input ---------------- */

Test(nn, no_leaks) {
    size_t live0 = dg_live_tensors();
    dg_scope *outer = dg_scope_begin();   /* layers built inside a scope still belong to the layer */
    dg_layer *m = conv_block_model();
    dg_layer *loss_fn = dg_nn_cross_entropy_loss(dg_cross_entropy_default_params());
    dg_scope_end(outer);
    cr_assert_not_null(dg_layer_parameter(m, "0.weight"), "parameters died with the scope they were made in");
    size_t live_model = dg_live_tensors();
    int64_t lab[] = { 0, 2 };
    for (int step = 0; step < 5; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 8, 8), DG_F32);
        dg_tensor *loss = dg_loss_forward(loss_fn, dg_forward(m, x), dg_from_data(DG_SHAPE(2), DG_I64, lab));
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        dg_layer_clear_gradients(m);
        dg_scope_end(s);
        cr_assert_eq(dg_live_tensors(), live_model, "step %d leaves %zld tensors", step,
                     (ssize_t)(dg_live_tensors() - live_model));
    }
    /* forward with no scope open: the caller owns the output, whose tape holds the
     * intermediates; freeing it frees them all */
    dg_layer_eval(m);
    dg_tensor *x = dg_randn(DG_SHAPE(1, 3, 8, 8), DG_F32);
    dg_tensor *y = dg_forward(m, x);
    cr_assert_not_null(y, "%s", dg_last_error());
    dg_tensor_free(y);
    cr_assert_eq(dg_live_tensors(), live_model + 1, "%zd tensors left", (ssize_t)(dg_live_tensors() - live_model - 1));
    /* and with recording off only the output exists once the call returns */
    dg_no_grad_begin();
    y = dg_forward(m, x);
    dg_no_grad_end();
    cr_assert_eq(dg_live_tensors(), live_model + 2);
    dg_tensor_free(y);
    dg_tensor_free(x);
    dg_layer_free(m);
    dg_layer_free(loss_fn);
    cr_assert_eq(dg_live_tensors(), live0, "%zd tensors left after layer_free", (ssize_t)(dg_live_tensors() - live0));
}
