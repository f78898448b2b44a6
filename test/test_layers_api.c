/* test/test_layers_api.c — the layer API an embedder builds on: layer classes (identity by
 * address, never by name; built-in classes; DataParallel refusing other layers), layers with
 * several inputs (dg_layer_new_multi / dg_forward_multi), and moving a layer to a device
 * (dg_layer_to). */
#include "test_util.h"

/* ---------------- classes ---------------- */

static const dg_layer_class gate_class = DG_LAYER_CLASS("Gate");
static const dg_layer_class other_gate_class = DG_LAYER_CLASS("Gate");   /* same name, another class */
static const dg_layer_class fake_dp_class = DG_LAYER_CLASS("DataParallel");

Test(layer_class, user_class_identity_is_by_address) {
    dg_layer *a = dg_layer_new(&gate_class, NULL, NULL, NULL), *b = dg_layer_new(&other_gate_class, NULL, NULL, NULL);
    cr_assert(a && b, "%s", dg_last_error());
    cr_assert_eq(dg_layer_class_of(a), &gate_class);
    cr_assert(dg_layer_is(a, &gate_class));
    cr_assert(!dg_layer_is(a, &other_gate_class), "one name, two classes: not the same class");
    cr_assert(!dg_layer_is(b, &gate_class));
    cr_assert_str_eq(dg_layer_type(a), "Gate");
    cr_assert_str_eq(dg_layer_type(b), "Gate");
    cr_assert(!dg_layer_is(NULL, &gate_class) && !dg_layer_is(a, NULL) && !dg_layer_class_of(NULL));
    char *s = dg_layer_to_string(a);
    cr_assert_str_eq(s, "Gate()");
    free(s);
    dg_layer_free(a);
    dg_layer_free(b);
}

Test(layer_class, built_in_classes) {
    dg_layer *lin = dg_nn_linear(3, 2), *bn1 = dg_nn_batch_norm1d(3, dg_nn_batch_norm_default_params());
    dg_layer *seq = dg_nn_sequential(2, dg_nn_linear(3, 3), dg_nn_relu());
    cr_assert(dg_layer_is(lin, dg_nn_linear_class()) && !dg_layer_is(lin, dg_nn_conv2d_class()));
    cr_assert(dg_layer_is(bn1, dg_nn_batch_norm1d_class()) && !dg_layer_is(bn1, dg_nn_batch_norm2d_class()));
    cr_assert(dg_layer_is(seq, dg_nn_sequential_class()));
    cr_assert(dg_layer_is(dg_layer_child(seq, 1), dg_nn_relu_class()));
    cr_assert_str_eq(dg_layer_class_of(lin)->name, "Linear");
    /* every built-in getter names its class the way torch does */
    const struct { const dg_layer_class *cls; const char *name; } all[] = {
        { dg_nn_linear_class(), "Linear" }, { dg_nn_conv2d_class(), "Conv2d" }, { dg_nn_max_pool2d_class(), "MaxPool2d" },
        { dg_nn_avg_pool2d_class(), "AvgPool2d" }, { dg_nn_adaptive_avg_pool2d_class(), "AdaptiveAvgPool2d" },
        { dg_nn_batch_norm1d_class(), "BatchNorm1d" }, { dg_nn_batch_norm2d_class(), "BatchNorm2d" },
        { dg_nn_dropout_class(), "Dropout" }, { dg_nn_dropout2d_class(), "Dropout2d" }, { dg_nn_relu_class(), "ReLU" }, { dg_nn_leaky_relu_class(), "LeakyReLU" },
        { dg_nn_sigmoid_class(), "Sigmoid" }, { dg_nn_tanh_class(), "Tanh" }, { dg_nn_gelu_class(), "GELU" },
        { dg_nn_softmax_class(), "Softmax" }, { dg_nn_flatten_class(), "Flatten" }, { dg_nn_identity_class(), "Identity" },
        { dg_nn_sequential_class(), "Sequential" }, { dg_nn_mse_loss_class(), "MSELoss" }, { dg_nn_l1_loss_class(), "L1Loss" },
        { dg_nn_cross_entropy_loss_class(), "CrossEntropyLoss" }, { dg_nn_bce_with_logits_loss_class(), "BCEWithLogitsLoss" },
        { dg_resnet_class(), "ResNet" }, { dg_resnet_basic_block_class(), "BasicBlock" },
        { dg_resnet_bottleneck_class(), "Bottleneck" }, { dg_mnist_cnn_class(), "MNIST" }, { dg_cifar_mynet_class(), "MyNet" },
        { dg_facenet_class(), "FaceNet" }, { dg_data_parallel_class(), "DataParallel" },
        { dg_nn_embedding_class(), "Embedding" }, { dg_nn_layer_norm_class(), "LayerNorm" }, { dg_nn_group_norm_class(), "GroupNorm" },
    };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        cr_assert(all[i].cls && !strcmp(all[i].cls->name, all[i].name), "class %zu is not %s", i, all[i].name);
        for (size_t j = 0; j < i; j++) cr_assert_neq(all[i].cls, all[j].cls, "%s and %s share a class", all[i].name, all[j].name);
    }
    dg_layer *m = dg_mnist_cnn();
    cr_assert(dg_layer_is(m, dg_mnist_cnn_class()) && dg_layer_is(dg_layer_sublayer(m, "conv1"), dg_nn_conv2d_class()));
    dg_layer_free(m);
    dg_layer_free(lin);
    dg_layer_free(bn1);
    dg_layer_free(seq);
}

/* A user layer that calls itself DataParallel is not one: the dg_dp_* calls refuse it (they
 * used to compare the name and then read its user state as theirs). */
Test(layer_class, data_parallel_refuses_other_layers) {
    int user_state = 42;
    dg_layer *fake = dg_layer_new(&fake_dp_class, NULL, &user_state, NULL), *lin = dg_nn_linear(2, 2);
    dg_clear_error();
    cr_assert_eq(dg_dp_apply_collective_grads(fake), DG_EINVAL);
    expect_error_contains("fake DataParallel", "apply_collective_grads: layer is a DataParallel, not a DataParallel",
                          "wrap it with dg_data_parallel");
    cr_assert_eq(dg_dp_no_sync(lin, true), DG_EINVAL);
    expect_error_contains("Linear as DataParallel", "no_sync: layer is a Linear, not a DataParallel", NULL);
    cr_assert_null(dg_dp_scale_loss(lin, NULL));
    expect_error_contains("scale_loss", "scale_loss", "not a DataParallel");
    cr_assert_null(dg_dp_comm(fake));
    expect_error_contains("dp_comm", "dp_comm", "not a DataParallel");
    cr_assert_null(dg_dp_module(NULL));
    expect_error_contains("dp_module NULL", "dp_module", "NULL");
    cr_assert_eq(user_state, 42);
    dg_layer_free(fake);
    dg_layer_free(lin);
}

Test(layer_class, sequential_append_checks_the_class) {
    static const dg_layer_class seq_name_class = DG_LAYER_CLASS("Sequential");
    dg_layer *fake = dg_layer_new(&seq_name_class, NULL, NULL, NULL);
    cr_assert_eq(dg_nn_sequential_append(fake, dg_nn_relu()), DG_EINVAL);
    expect_error_contains("append to a fake Sequential", "Sequential", "not a Sequential");
    dg_layer_free(fake);
}

/* ---------------- several inputs ---------------- */

/* A gated sum of two inputs a, b [N, F]: g = sigmoid(a @ wa^T + b @ wb^T + c), y = g * a + (1 - g) * b,
 * with its own parameters wa, wb [F, F] and c [F]. */
typedef struct { dg_tensor *wa, *wb, *c; int64_t f; } gated_sum;
static const dg_layer_class gated_sum_class = DG_LAYER_CLASS("GatedSum");

static dg_tensor *gated_sum_forward(dg_layer *self, const dg_tensor *const *in, int n) {
    gated_sum *g = dg_layer_user(self);
    cr_assert_eq(n, 2, "the layer is called with the count it was made with");
    for (int i = 0; i < 2; i++)
        if (dg_ndim(in[i]) != 2 || dg_dim(in[i], 1) != g->f)
            return DG_LAYER_ERROR(self, "input %d must be [N, %lld]", i, (long long)g->f);
    dg_tensor *gate = dg_sigmoid(dg_add(dg_add(dg_linear(in[0], g->wa, NULL), dg_linear(in[1], g->wb, NULL)), g->c));
    /* temporaries need no freeing: dg_forward_multi frees all but the result */
    return dg_add(dg_mul(gate, in[0]), dg_mul(dg_rsub_scalar(gate, 1.0), in[1]));
}

static dg_layer *gated_sum_new(int64_t f) {
    gated_sum *g = calloc(1, sizeof *g);
    g->f = f;
    dg_layer *l = dg_layer_new_multi(&gated_sum_class, gated_sum_forward, 2, g, free);
    if (!l) return NULL;
    if (dg_layer_add_parameter(l, "wa", g->wa = dg_uniform(DG_SHAPE(f, f), -0.5, 0.5, DG_F32)) ||
        dg_layer_add_parameter(l, "wb", g->wb = dg_uniform(DG_SHAPE(f, f), -0.5, 0.5, DG_F32)) ||
        dg_layer_add_parameter(l, "c", g->c = dg_zeros(DG_SHAPE(f), DG_F32))) {
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

Test(multi_input, gated_sum_trains) {
    dg_manual_seed(11);
    dg_layer *gs = gated_sum_new(4);
    cr_assert(gs, "%s", dg_last_error());
    cr_assert_eq(dg_layer_num_inputs(gs), 2);
    int n;
    dg_tensor **ps = dg_layer_parameters(gs, &n);
    cr_assert_eq(n, 3);
    dg_adam_params ap = dg_adam_default_params();
    ap.lr = 0.05;
    dg_optimizer *opt = dg_adam(ps, n, ap);
    free(ps);
    /* the target picks a where a > b elementwise, softly: a gate of the two can learn it */
    double first = 0, last = 0;
    size_t live = dg_live_tensors();
    for (int step = 0; step < 60; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *a = dg_randn(DG_SHAPE(32, 4), DG_F32), *b = dg_randn(DG_SHAPE(32, 4), DG_F32);
        dg_tensor *target = dg_maximum(a, b);
        const dg_tensor *in[2] = { a, b };
        if (step == 0) {   /* without the tape (which keeps what backward needs) only the result stays */
            dg_no_grad_begin();
            size_t before = dg_live_tensors();
            dg_tensor *y0 = dg_forward_multi(gs, in, 2);
            cr_assert(y0, "%s", dg_last_error());
            cr_assert_eq(dg_live_tensors(), before + 1, "the forward left %zu temporaries", dg_live_tensors() - before - 1);
            dg_no_grad_end();
        }
        dg_tensor *y = dg_forward_multi(gs, in, 2);
        cr_assert(y, "step %d: %s", step, dg_last_error());
        dg_tensor *loss = dg_mse_loss(y, target);
        cr_assert(loss && dg_backward(loss) == 0 && dg_optimizer_step(opt) == 0, "step %d: %s", step, dg_last_error());
        dg_optimizer_clear_grad(opt);
        last = dg_item(loss);
        if (step == 0) first = last;
        dg_scope_end(s);
    }
    cr_assert_lt(last, 0.6 * first, "loss %g -> %g", first, last);
    live += (size_t)dg_optimizer_state_count(opt) - 1;   /* Adam's state made by the steps ("lr" was there) */
    cr_assert_eq(dg_live_tensors(), live, "%zu tensors leaked", dg_live_tensors() - live);
    /* with no scope open the result is the caller's (no tape: nothing else stays) */
    dg_tensor *a = dg_ones(DG_SHAPE(1, 4), DG_F32), *b = dg_zeros(DG_SHAPE(1, 4), DG_F32);
    dg_no_grad_begin();
    dg_tensor *y = dg_forward_multi(gs, (const dg_tensor *[]){ a, b }, 2);
    dg_no_grad_end();
    cr_assert(y);
    cr_assert_eq(dg_live_tensors(), live + 3);
    dg_tensor_free(y);
    dg_tensor_free(a);
    dg_tensor_free(b);
    dg_optimizer_free(opt);
    dg_layer_free(gs);
}

Test(multi_input, wrong_input_counts_are_errors) {
    dg_scope *s = dg_scope_begin();
    dg_layer *gs = gated_sum_new(3), *lin = dg_nn_linear(3, 3), *mse = dg_nn_mse_loss(DG_REDUCE_MEAN);
    dg_tensor *x = dg_ones(DG_SHAPE(2, 3), DG_F32);
    const dg_tensor *three[3] = { x, x, x };
    dg_clear_error();
    cr_assert_null(dg_forward_multi(gs, three, 3));
    expect_error_contains("3 inputs to GatedSum", "GatedSum", "takes 2 inputs, got 3");
    cr_assert_null(dg_forward_multi(gs, three, 1));
    expect_error_contains("1 input to GatedSum", "GatedSum", "takes 2 inputs, got 1");
    cr_assert_null(dg_forward(gs, x));
    expect_error_contains("dg_forward on GatedSum", "GatedSum", "call dg_forward_multi");
    cr_assert_null(dg_loss_forward(gs, x, x));
    expect_error_contains("dg_loss_forward on GatedSum", "GatedSum", "takes 2 inputs");
    cr_assert_null(dg_forward_multi(gs, NULL, 2));
    expect_error_contains("NULL array", "GatedSum", "NULL array");
    cr_assert_null(dg_forward_multi(gs, (const dg_tensor *[]){ x, NULL }, 2));
    expect_error_contains("NULL input 1", "GatedSum", "input 1 is NULL");
    cr_assert_null(dg_forward_multi(gs, (const dg_tensor *[]){ x, dg_ones(DG_SHAPE(2, 5), DG_F32) }, 2));
    expect_error_contains("bad shape", "GatedSum", "input 1 must be [N, 3]");
    /* single-input and loss layers run through dg_forward_multi with their own counts */
    cr_assert(dg_forward_multi(lin, three, 1), "%s", dg_last_error());
    cr_assert_null(dg_forward_multi(lin, three, 2));
    expect_error_contains("2 inputs to Linear", "Linear", "takes 1 input, got 2");
    cr_assert_eq(dg_item(dg_forward_multi(mse, three, 2)), 0, "%s", dg_last_error());
    /* constructors */
    cr_assert_null(dg_layer_new_multi(&gated_sum_class, gated_sum_forward, 0, NULL, NULL));
    expect_error_contains("0 inputs", "GatedSum", "n_inputs must be in [1, 64], got 0");
    cr_assert_null(dg_layer_new_multi(&gated_sum_class, NULL, 2, NULL, NULL));
    expect_error_contains("no forward", "GatedSum", "forward function is NULL");
    /* a Sequential hands each child one tensor: a two-input layer is refused when added */
    cr_assert_null(dg_nn_sequential(2, dg_nn_relu(), gated_sum_new(3)));
    expect_error_contains("Sequential with GatedSum", "Sequential", "layer 1 (GatedSum) takes 2 inputs");
    dg_layer *seq = dg_nn_sequential(1, dg_nn_relu());
    cr_assert_eq(dg_nn_sequential_append(seq, dg_nn_mse_loss(DG_REDUCE_SUM)), DG_EINVAL);
    expect_error_contains("Sequential with a loss", "MSELoss", "takes 2 inputs");
    cr_assert_eq(dg_layer_num_children(seq), 1);
    dg_layer_free(seq);
    dg_layer_free(gs);
    dg_layer_free(lin);
    dg_layer_free(mse);
    dg_scope_end(s);
}

/* A single-input layer made with dg_layer_new_multi(.., 1, ..) runs through dg_forward and in a
 * Sequential like any other; DataParallel (a world of one) forwards both kinds. */
static dg_tensor *double_it(dg_layer *self, const dg_tensor *const *in, int n) { return dg_mul_scalar(in[0], 2.0); }
Test(multi_input, one_input_multi_layer_and_data_parallel) {
    static const dg_layer_class double_class = DG_LAYER_CLASS("Double");
    dg_scope *s = dg_scope_begin();
    dg_layer *seq = dg_nn_sequential(2, dg_layer_new_multi(&double_class, double_it, 1, NULL, NULL), dg_nn_relu());
    cr_assert(seq, "%s", dg_last_error());
    dg_tensor *x = dg_full(DG_SHAPE(3), 1.5, DG_F32);
    cr_assert_eq(dg_item(dg_sum_all(dg_forward(seq, x))), 9.0, "%s", dg_last_error());
    cr_assert_eq(dg_fleet_init(true, NULL), 0, "%s", dg_last_error());
    dg_manual_seed(3);
    dg_layer *gs = gated_sum_new(3);
    dg_layer *dp = dg_fleet_distributed_model(dg_layer_ref(gs));
    cr_assert(dp, "%s", dg_last_error());
    cr_assert_eq(dg_layer_num_inputs(dp), 2);
    const dg_tensor *in[2] = { dg_randn(DG_SHAPE(2, 3), DG_F32), dg_randn(DG_SHAPE(2, 3), DG_F32) };
    cr_assert(max_rel_err(dg_forward_multi(dp, in, 2), dg_forward_multi(gs, in, 2), 1e-6) == 0, "%s", dg_last_error());
    dg_layer_free(dp);
    dg_layer_free(gs);
    dg_layer_free(seq);
    dg_fleet_shutdown();
    dg_scope_end(s);
}

/* ---------------- moving a layer to a device ---------------- */

static bool gpu_usable(void) {
    bool ok = dg_set_device("gpu:0") == 0;
    dg_set_device("cpu");
    dg_clear_error();
    return ok;
}

/* handles, data addresses and values of every parameter and buffer, to compare before/after */
typedef struct { int n; dg_tensor *t[16]; void *data[16]; double sum[16]; } snapshot;
static snapshot snap(const dg_layer *l) {
    snapshot s = { 0 };
    int n = 0;
    dg_named_tensor *sd = dg_layer_state_dict(l, &n);
    cr_assert(sd && n <= 16);
    for (int i = 0; i < n; i++) {
        s.t[i] = sd[i].tensor;
        s.data[i] = dg_data(sd[i].tensor);
        dg_tensor *c = dg_cast(sd[i].tensor, DG_F64);
        dg_tensor *sum = dg_sum_all(c);
        s.sum[i] = dg_item(sum);
        dg_tensor_free(sum);
        dg_tensor_free(c);
    }
    s.n = n;
    free(sd);
    return s;
}

Test(layer_to, cpu_to_cpu_changes_nothing) {
    dg_manual_seed(12);
    dg_layer *net = dg_nn_sequential(3, dg_nn_linear(4, 6), dg_nn_batch_norm1d(6, dg_nn_batch_norm_default_params()),
                                     dg_nn_linear(6, 2));
    int np;
    dg_tensor **ps = dg_layer_parameters(net, &np);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.1;
    dg_optimizer *opt = dg_sgd(ps, np, sp);   /* made before the move: sees the same handles */
    snapshot before = snap(net);
    cr_assert_eq(dg_layer_to(net, dg_cpu()), 0, "%s", dg_last_error());
    snapshot after = snap(net);
    cr_assert_eq(after.n, before.n);
    for (int i = 0; i < before.n; i++) {
        cr_assert_eq(after.t[i], before.t[i], "entry %d: same handle", i);
        cr_assert_eq(after.data[i], before.data[i], "entry %d: same storage (nothing copied)", i);
        cr_assert_eq(after.sum[i], before.sum[i]);
        cr_assert_eq(dg_device_of(after.t[i]).type, DG_CPU);
    }
    dg_scope *s = dg_scope_begin();
    dg_tensor *loss = dg_mean_all(dg_forward(net, dg_randn(DG_SHAPE(5, 4), DG_F32)));
    cr_assert(loss && dg_backward(loss) == 0 && dg_optimizer_step(opt) == 0, "%s", dg_last_error());
    dg_scope_end(s);
    cr_assert_eq(dg_layer_to(net, dg_cpu()), 0, "with gradients too: %s", dg_last_error());
    cr_assert(dg_grad(ps[0]) && dg_device_of(dg_grad(ps[0])).type == DG_CPU);
    free(ps);
    dg_optimizer_free(opt);
    dg_layer_free(net);
}

Test(layer_to, bad_devices_are_errors_that_change_nothing) {
    dg_manual_seed(13);
    dg_layer *net = dg_nn_sequential(2, dg_nn_linear(3, 3), dg_nn_batch_norm1d(3, dg_nn_batch_norm_default_params()));
    snapshot before = snap(net);
    dg_clear_error();
    cr_assert_eq(dg_layer_to(net, (dg_device){ (dg_device_type)7, 0 }), DG_EINVAL);
    expect_error_contains("device type 7", "layer_to", "type 7");
    cr_assert_eq(dg_layer_to(net, (dg_device){ DG_CUDA, -1 }), DG_EINVAL);
    expect_error_contains("index -1", "layer_to", "index -1");
    cr_assert_eq(dg_layer_to(net, (dg_device){ DG_CPU, 2 }), DG_EINVAL);
    expect_error_contains("cpu index 2", "layer_to", "index 2");
    cr_assert_eq(dg_layer_to(NULL, dg_cpu()), DG_EINVAL);
    expect_error_contains("NULL layer", "layer_to", "NULL");
    if (!gpu_usable()) {
        /* no GPU here (or no CUDA module): the message says which, under the layer's name */
        cr_assert_lt(dg_layer_to(net, (dg_device){ DG_CUDA, 0 }), 0);
        const char *m = dg_last_error();
        cr_assert(strstr(m, "Sequential") && strstr(m, "layer_to(gpu:0)") && strstr(m, "parameter '0.weight'"), "%s", m);
        cr_assert(strstr(m, "cuda") || strstr(m, "CUDA") || strstr(m, "GPU") || strstr(m, "gpu"), "%s", m);
        dg_clear_error();
    }
    snapshot after = snap(net);
    for (int i = 0; i < before.n; i++)
        cr_assert(after.t[i] == before.t[i] && after.data[i] == before.data[i] && after.sum[i] == before.sum[i],
                  "entry %d changed after a failed move", i);
    dg_layer_free(net);
}
