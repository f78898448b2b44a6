/* test/test_sync_batch_norm.c — SyncBatchNorm in one process (a world of one): BatchNorm bit for
 * bit in training and eval, the converter (tree, names, shared tensors, settings, modes), and the
 * errors for bad settings and inputs. The multi-rank equivalence is test/dist/sync_bn_check.c. */
#include "test_util.h"

static dg_comm *world_of_one(void) {
    const char *vars[] = { "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT",
                           "FLAGS_selected_gpus", "DG_JOB_TOKEN", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
    dg_comm *c = dg_comm_new(dg_comm_default_params());
    cr_assert(c, "%s", dg_last_error());
    cr_assert_eq(dg_comm_size(c), 1);
    return c;
}

static void same_bits(const char *what, const dg_tensor *a, const dg_tensor *b) {
    cr_assert(a && b, "%s: missing (%s)", what, dg_last_error());
    cr_assert_eq(dg_numel(a), dg_numel(b), "%s", what);
    cr_assert_eq(dg_dtype_of(a), dg_dtype_of(b), "%s", what);
    size_t nb = (size_t)dg_numel(a) * (dg_dtype_of(a) == DG_F64 || dg_dtype_of(a) == DG_I64 ? 8 : 4);
    void *x = malloc(nb), *y = malloc(nb);
    cr_assert(!dg_to_host(dg_contiguous(a), x, nb) && !dg_to_host(dg_contiguous(b), y, nb), "%s", what);
    cr_assert(!memcmp(x, y, nb), "%s differs from BatchNorm's", what);
    free(x);
    free(y);
}

/* train 3 steps then eval once: SyncBatchNorm over a world of one against BatchNorm2d/1d */
static void world_of_one_case(bool two_d, dg_nn_batch_norm_params p, dg_shape xs) {
    dg_comm *c = world_of_one();
    dg_layer *ref = two_d ? dg_nn_batch_norm2d(xs.d[1], p) : dg_nn_batch_norm1d(xs.d[1], p);
    dg_layer *sbn = dg_nn_sync_batch_norm(xs.d[1], p, c);
    cr_assert(ref && sbn, "%s", dg_last_error());
    for (int step = 0; step < 4; step++) {
        if (step == 3) { dg_layer_eval(ref); dg_layer_eval(sbn); }
        dg_scope *sc = dg_scope_begin();
        dg_manual_seed(50 + step);
        dg_tensor *x = dg_add_scalar(dg_randn(xs, p.dtype), 0.7), *r = dg_randn(xs, p.dtype);
        dg_tensor *x1 = dg_clone(x), *x2 = dg_clone(x);
        dg_set_requires_grad(x1, true);
        dg_set_requires_grad(x2, true);
        dg_tensor *y1 = dg_forward(ref, x1), *y2 = dg_forward(sbn, x2);
        same_bits("output", y2, y1);
        cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y1, r))), 0, "%s", dg_last_error());
        cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y2, r))), 0, "%s", dg_last_error());
        same_bits("input gradient", dg_grad(x2), dg_grad(x1));
        if (p.affine) {
            same_bits("weight gradient", dg_grad(dg_layer_parameter(sbn, "weight")), dg_grad(dg_layer_parameter(ref, "weight")));
            same_bits("bias gradient", dg_grad(dg_layer_parameter(sbn, "bias")), dg_grad(dg_layer_parameter(ref, "bias")));
        }
        dg_layer_clear_gradients(ref);
        dg_layer_clear_gradients(sbn);
        dg_scope_end(sc);
    }
    int n1, n2;
    dg_named_tensor *s1 = dg_layer_state_dict(ref, &n1), *s2 = dg_layer_state_dict(sbn, &n2);
    cr_assert_eq(n1, n2);
    for (int i = 0; i < n1; i++) {
        cr_assert_str_eq(s2[i].name, s1[i].name);
        same_bits(s1[i].name, s2[i].tensor, s1[i].tensor);
    }
    free(s1);
    free(s2);
    dg_layer_free(ref);
    dg_layer_free(sbn);
    dg_comm_free(c);
}

Test(sync_batch_norm, world_of_one_is_batch_norm_bit_for_bit) {
    world_of_one_case(true, dg_nn_batch_norm_default_params(), DG_SHAPE(4, 3, 5, 5));
    dg_nn_batch_norm_params p = dg_nn_batch_norm_default_params();
    p.momentum = 0.3;
    p.eps = 1e-3;
    p.dtype = DG_F64;
    world_of_one_case(false, p, DG_SHAPE(6, 5));
    p = dg_nn_batch_norm_default_params();
    p.cumulative_average = true;
    p.affine = false;
    world_of_one_case(false, p, DG_SHAPE(3, 4, 7));
}

Test(sync_batch_norm, names_and_settings_are_batch_norms) {
    dg_comm *c = world_of_one();
    dg_nn_batch_norm_params p = dg_nn_batch_norm_default_params();
    dg_layer *l = dg_nn_sync_batch_norm(8, p, c);
    cr_assert(l, "%s", dg_last_error());
    cr_assert(dg_layer_is(l, dg_nn_sync_batch_norm_class()));
    char *s = dg_layer_to_string(l);
    cr_assert_str_eq(s, "SyncBatchNorm(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
    free(s);
    const char *names[5] = { "weight", "bias", "running_mean", "running_var", "num_batches_tracked" };
    int n;
    dg_named_tensor *sd = dg_layer_state_dict(l, &n);
    cr_assert_eq(n, 5);
    for (int i = 0; i < 5; i++) cr_assert_str_eq(sd[i].name, names[i]);
    free(sd);
    dg_layer_free(l);
    dg_comm_free(c);
}

/* ---- the converter ---- */

static const dg_layer_class holder_class = DG_LAYER_CLASS("Holder");

Test(sync_batch_norm, converter_replaces_every_batch_norm_and_keeps_the_rest) {
    dg_comm *c = world_of_one();
    dg_nn_batch_norm_params p = dg_nn_batch_norm_default_params();
    p.momentum = 0.25;
    p.eps = 1e-4;
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    dg_layer *shared = dg_nn_batch_norm1d(6, dg_nn_batch_norm_default_params());
    dg_layer *inner = dg_nn_sequential(3, dg_nn_conv2d(3, 4, 3, cp), dg_nn_batch_norm2d(4, p), dg_nn_relu());
    dg_layer *head = dg_nn_sequential(2, dg_nn_linear(4, 6), dg_layer_ref(shared));
    dg_layer *net = dg_layer_new(&holder_class, NULL, NULL, NULL);
    cr_assert_eq(dg_layer_add_sublayer(net, "features", inner), 0);
    cr_assert_eq(dg_layer_add_sublayer(net, "head", head), 0);
    cr_assert_eq(dg_layer_add_sublayer(net, "again", shared), 0);   /* the same BatchNorm under two names */
    dg_layer_eval(dg_layer_sublayer(net, "features.1"));               /* a mode of its own to keep */
    int n0;
    dg_named_tensor *before = dg_layer_state_dict(net, &n0);
    cr_assert(before);
    dg_tensor *w = dg_layer_parameter(net, "features.1.weight"), *rm = dg_layer_buffer(net, "head.1.running_mean");
    dg_layer *out = dg_nn_convert_sync_batch_norm(net, c);
    cr_assert_eq(out, net, "%s", dg_last_error());
    dg_layer *a = dg_layer_sublayer(net, "features.1"), *b = dg_layer_sublayer(net, "head.1");
    cr_assert(dg_layer_is(a, dg_nn_sync_batch_norm_class()) && dg_layer_is(b, dg_nn_sync_batch_norm_class()));
    cr_assert_eq(dg_layer_sublayer(net, "again"), b, "a shared BatchNorm stays one (shared) layer");
    cr_assert_str_eq(dg_layer_type(dg_layer_sublayer(net, "features.0")), "Conv2d");
    cr_assert_not(dg_layer_is_training(a), "eval mode kept");
    cr_assert(dg_layer_is_training(b), "training mode kept");
    char *s = dg_layer_to_string(a);
    cr_assert(strstr(s, "SyncBatchNorm(4, eps=0.0001, momentum=0.25, affine=True, track_running_stats=True)"), "%s", s);
    free(s);
    /* the very same tensors under the same names, so optimizers and state dicts carry over */
    cr_assert_eq(dg_layer_parameter(net, "features.1.weight"), w);
    cr_assert_eq(dg_layer_buffer(net, "head.1.running_mean"), rm);
    int n1;
    dg_named_tensor *after = dg_layer_state_dict(net, &n1);
    cr_assert_eq(n1, n0);
    for (int i = 0; i < n0; i++) {
        cr_assert_str_eq(after[i].name, before[i].name);
        cr_assert_eq(after[i].tensor, before[i].tensor, "%s", after[i].name);
    }
    free(before);
    free(after);
    dg_layer_free(net);

    /* a BatchNorm itself becomes a new layer, with the old one released */
    size_t live = dg_live_tensors();
    dg_layer *bn = dg_nn_batch_norm2d(3, p);
    dg_layer *sbn = dg_nn_convert_sync_batch_norm(bn, c);
    cr_assert(dg_layer_is(sbn, dg_nn_sync_batch_norm_class()), "%s", dg_last_error());
    cr_assert_eq(dg_live_tensors(), live + 5);
    dg_layer_free(sbn);
    cr_assert_eq(dg_live_tensors(), live);
    dg_comm_free(c);
}

Test(sync_batch_norm, converter_refusals) {
    dg_comm *c = world_of_one();
    size_t live = dg_live_tensors();
    cr_assert_null(dg_nn_convert_sync_batch_norm(dg_nn_sequential(1, dg_nn_batch_norm2d(3, dg_nn_batch_norm_default_params())), NULL));
    cr_assert(strstr(dg_last_error(), "communicator is NULL"), "%s", dg_last_error());
    cr_assert_eq(dg_live_tensors(), live, "the model was released");
    dg_layer *dp = dg_data_parallel(dg_nn_sequential(1, dg_nn_batch_norm2d(3, dg_nn_batch_norm_default_params())), c,
                                    dg_dp_default_params());
    cr_assert(dp, "%s", dg_last_error());
    cr_assert_null(dg_nn_convert_sync_batch_norm(dp, c));
    cr_assert(strstr(dg_last_error(), "convert the net first"), "%s", dg_last_error());
    cr_assert_eq(dg_live_tensors(), live);
    dg_clear_error();
    cr_assert_null(dg_nn_convert_sync_batch_norm(NULL, c));
    dg_comm_free(c);
}

/* ---- errors ---- */

Test(sync_batch_norm, bad_settings_and_inputs_are_errors_naming_the_layer_and_shapes) {
    dg_comm *c = world_of_one();
    dg_nn_batch_norm_params p = dg_nn_batch_norm_default_params();
    cr_assert_null(dg_nn_sync_batch_norm(4, p, NULL));
    cr_assert(strstr(dg_last_error(), "SyncBatchNorm") && strstr(dg_last_error(), "communicator NULL"), "%s", dg_last_error());
    cr_assert_null(dg_nn_sync_batch_norm(0, p, c));
    cr_assert(strstr(dg_last_error(), "num_features 0"), "%s", dg_last_error());
    p.eps = 0;
    cr_assert_null(dg_nn_sync_batch_norm(4, p, c));
    p = dg_nn_batch_norm_default_params();
    p.momentum = 1.5;
    cr_assert_null(dg_nn_sync_batch_norm(4, p, c));
    cr_assert(strstr(dg_last_error(), "momentum 1.5"), "%s", dg_last_error());
    p = dg_nn_batch_norm_default_params();
    p.dtype = DG_I32;
    cr_assert_null(dg_nn_sync_batch_norm(4, p, c));
    cr_assert(strstr(dg_last_error(), "int32"), "%s", dg_last_error());

    /* the settings the converter reads from a BatchNorm, and only from one */
    dg_nn_batch_norm_params got;
    int64_t nf = 0;
    p = dg_nn_batch_norm_default_params();
    p.momentum = 0.05;
    p.cumulative_average = true;
    p.track_running_stats = false;
    p.dtype = DG_F64;
    dg_layer *bn = dg_nn_batch_norm1d(6, p), *lin = dg_nn_linear(2, 2);
    cr_assert_eq(dg_nn_batch_norm_settings(bn, &got, &nf), 0, "%s", dg_last_error());
    cr_assert(nf == 6 && got.momentum == 0.05 && got.eps == p.eps && got.cumulative_average && got.affine &&
              !got.track_running_stats && got.dtype == DG_F64);
    cr_assert_lt(dg_nn_batch_norm_settings(lin, &got, &nf), 0);
    cr_assert(strstr(dg_last_error(), "layer is a Linear, not a BatchNorm1d/BatchNorm2d"), "%s", dg_last_error());
    cr_assert_lt(dg_nn_batch_norm_settings(bn, NULL, &nf), 0);
    dg_layer_free(bn);
    dg_layer_free(lin);

    dg_layer *l = dg_nn_sync_batch_norm(4, dg_nn_batch_norm_default_params(), c);
    cr_assert(l, "%s", dg_last_error());
    dg_scope *sc = dg_scope_begin();
    cr_assert_null(dg_forward(l, dg_zeros(DG_SHAPE(2, 5, 3, 3), DG_F32)));
    cr_assert(strstr(dg_last_error(), "SyncBatchNorm") && strstr(dg_last_error(), "[2, 5, 3, 3]") &&
              strstr(dg_last_error(), "num_features = 4") && strstr(dg_last_error(), "sync_batch_norm.c:"), "%s", dg_last_error());
    cr_assert_null(dg_forward(l, dg_zeros(DG_SHAPE(4), DG_F32)));
    cr_assert(strstr(dg_last_error(), "[4] must be [N, C, ...]"), "%s", dg_last_error());
    cr_assert_null(dg_forward(l, dg_zeros(DG_SHAPE(2, 4), DG_F64)));
    cr_assert(strstr(dg_last_error(), "float64") && strstr(dg_last_error(), "float32"), "%s", dg_last_error());
    cr_assert_null(dg_forward(l, dg_zeros(DG_SHAPE(2, 4), DG_I64)));
    cr_assert_null(dg_forward(l, dg_zeros(DG_SHAPE(1, 4), DG_F32)));
    cr_assert(strstr(dg_last_error(), "more than 1 value per channel"), "%s", dg_last_error());
    cr_assert_null(dg_forward(l, NULL));
    dg_layer_eval(l);
    cr_assert(dg_forward(l, dg_zeros(DG_SHAPE(1, 4), DG_F32)), "one value per channel is fine in eval: %s", dg_last_error());
    dg_scope_end(sc);
    dg_layer_free(l);
    dg_comm_free(c);
}

/* mixed precision O2 keeps normalisation layers in float32, SyncBatchNorm among them, and the
 * converted net runs a bf16 input through them */
Test(sync_batch_norm, o2_keeps_it_float32) {
    dg_comm *c = world_of_one();
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    dg_layer *net = dg_nn_convert_sync_batch_norm(
        dg_nn_sequential(2, dg_nn_conv2d(3, 4, 3, cp), dg_nn_batch_norm2d(4, dg_nn_batch_norm_default_params())), c);
    cr_assert(net, "%s", dg_last_error());
    cr_assert(dg_layer_is(dg_layer_child(net, 1), dg_nn_sync_batch_norm_class()));
    cr_assert_eq(dg_layer_to_dtype(net, DG_BF16, true), 0, "%s", dg_last_error());
    cr_assert_eq(dg_dtype_of(dg_layer_parameter(net, "0.weight")), DG_BF16);
    cr_assert_eq(dg_dtype_of(dg_layer_parameter(net, "1.weight")), DG_F32, "O2 cast SyncBatchNorm's weight");
    cr_assert_eq(dg_dtype_of(dg_layer_buffer(net, "1.running_mean")), DG_F32);
    dg_tensor *x = dg_cast(dg_randn(DG_SHAPE(2, 3, 6, 6), DG_F32), DG_BF16);
    dg_tensor *y = dg_forward(net, x);
    cr_assert(y, "%s", dg_last_error());
    dg_tensor_free(y);
    dg_tensor_free(x);
    dg_layer_free(net);
    dg_comm_free(c);
}
