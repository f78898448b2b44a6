/* test/test_golden.c — ops checked against PyTorch reference files (test/goldens/ *.txt, written
 * by test/goldens/make_goldens.py; `make goldens` regenerates them).
 *
 * Each file holds the inputs, the op's parameters (small i64 tensors named "params", so the two
 * sides cannot drift apart), the output "out", a random weighting "gout" and "grad_<input>",
 * the gradients of sum(out * gout). The C side runs the op on f32 leaves, backpropagates gout
 * and compares: values within 1e-5 and gradients within 1e-4 relative error.
 *
 * Relative to what: the goldens are the float64 answer (rounded to f32) for the f32 inputs, and
 * an f32 kernel that sums K products carries an absolute error of about K * 6e-8 * |terms|, so an
 * entry that is small through cancellation (a conv output near 0, a log-probability near 0)
 * cannot be compared to itself. Every entry is compared relative to max(|want|, floor) with
 * floor = max(1e-3, 1e-2 * max|want over the tensor|). PyTorch's own f32 CPU kernels pass these
 * files with that floor (worst: 4.2e-6 on values, 1.2e-5 on gradients), and so do ours (2.7e-6,
 * 6.5e-6); with a flat floor of 1e-3 neither would (PyTorch: conv2d out 1.5e-5, log_softmax out
 * 8.7e-5; ours: conv2d out 3.5e-5, batched matmul out 1.1e-5). */
#include "golden_check.h"

/* ------------------------------------------------------------------------------- conv2d */
static void run_conv(const char *file) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    /* params: stride_h stride_w pad_h pad_w dil_h dil_w groups has_bias */
    dg_conv2d_params p = dg_conv2d_default_params();
    p.stride[0] = (int)param(g, "params", 0);
    p.stride[1] = (int)param(g, "params", 1);
    p.padding[0] = (int)param(g, "params", 2);
    p.padding[1] = (int)param(g, "params", 3);
    p.dilation[0] = (int)param(g, "params", 4);
    p.dilation[1] = (int)param(g, "params", 5);
    p.groups = (int)param(g, "params", 6);
    bool has_bias = param(g, "params", 7) != 0;
    dg_tensor *x = golden_leaf(g, "x"), *w = golden_leaf(g, "w"), *b = has_bias ? golden_leaf(g, "b") : NULL;
    dg_tensor *out = dg_conv2d(x, w, b, p);
    cr_assert(out, "%s: conv2d failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, false);
    expect_grad(file, g, x, "x");
    expect_grad(file, g, w, "w");
    if (b) expect_grad(file, g, b, "b");
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, conv2d_plain_3x3_pad1) { run_conv("conv2d_plain.txt"); }
Test(golden, conv2d_stride2_pad1) { run_conv("conv2d_stride2.txt"); }
Test(golden, conv2d_groups2) { run_conv("conv2d_groups2.txt"); }
Test(golden, conv2d_dilation2) { run_conv("conv2d_dilation2.txt"); }
Test(golden, conv2d_bias) { run_conv("conv2d_bias.txt"); }
Test(golden, conv2d_rect_kernel_stride_pad_bias) { run_conv("conv2d_rect.txt"); }

/* ------------------------------------------------------------------------------- pooling */
static void run_pool(const char *file, bool is_max) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    /* params: kh kw sh sw ph pw ceil_mode count_include_pad */
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = (int)param(g, "params", 0);
    p.kernel[1] = (int)param(g, "params", 1);
    p.stride[0] = (int)param(g, "params", 2);
    p.stride[1] = (int)param(g, "params", 3);
    p.padding[0] = (int)param(g, "params", 4);
    p.padding[1] = (int)param(g, "params", 5);
    p.ceil_mode = param(g, "params", 6) != 0;
    p.count_include_pad = param(g, "params", 7) != 0;
    dg_tensor *x = golden_leaf(g, "x");
    dg_tensor *out = is_max ? dg_max_pool2d(x, p) : dg_avg_pool2d(x, p);
    cr_assert(out, "%s: pool failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, false);
    expect_grad(file, g, x, "x");
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, max_pool2d_k3s2p1) { run_pool("max_pool2d_k3s2p1.txt", true); }
Test(golden, max_pool2d_k2s2) { run_pool("max_pool2d_k2s2.txt", true); }
Test(golden, max_pool2d_ceil_mode) { run_pool("max_pool2d_ceil.txt", true); }
Test(golden, avg_pool2d_k3s2p1_exclude_pad) { run_pool("avg_pool2d_k3s2p1_excl.txt", false); }
Test(golden, avg_pool2d_k3s2p1_include_pad) { run_pool("avg_pool2d_k3s2p1_incl.txt", false); }
Test(golden, avg_pool2d_ceil_mode) { run_pool("avg_pool2d_ceil.txt", false); }
/* ceil_mode + padding + count_include_pad: PyTorch divides a window that runs past the padded
 * edge by its size clipped to the padded input, (min(start+k, H+pad) - start) per axis. */
Test(golden, avg_pool2d_ceil_mode_pad_include_pad) { run_pool("avg_pool2d_ceil_pad_incl.txt", false); }

Test(golden, adaptive_avg_pool2d_5x7_to_3x2) {
    const char *file = "adaptive_avg_pool2d_5x7_to_3x2.txt";
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = golden_leaf(g, "x");
    dg_tensor *out = dg_adaptive_avg_pool2d(x, (int)param(g, "params", 0), (int)param(g, "params", 1));
    cr_assert(out, "%s: adaptive_avg_pool2d failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, false);
    expect_grad(file, g, x, "x");
    dg_scope_end(s);
    golden_free(g);
}

/* ------------------------------------------------------------------------------- batch norm */
static void run_batch_norm(const char *file) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    dg_batch_norm_params p = dg_batch_norm_default_params();
    p.training = param(g, "training", 0) != 0;
    p.momentum = (float)dg_item(golden_get(g, "momentum"));
    p.eps = (float)dg_item(golden_get(g, "eps"));
    dg_tensor *x = golden_leaf(g, "x"), *w = golden_leaf(g, "weight"), *b = golden_leaf(g, "bias");
    dg_tensor *rm = dg_clone(golden_get(g, "running_mean")), *rv = dg_clone(golden_get(g, "running_var"));
    dg_tensor *out = dg_batch_norm(x, rm, rv, w, b, p);
    cr_assert(out, "%s: batch_norm failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    /* training: updated with momentum 0.1 and the unbiased batch variance; eval: unchanged */
    expect_close(file, "running_mean", rm, golden_get(g, "running_mean_after"), TOL_VALUE);
    expect_close(file, "running_var", rv, golden_get(g, "running_var_after"), TOL_VALUE);
    backward_weighted(file, g, out, false);
    expect_grad(file, g, x, "x");
    expect_grad(file, g, w, "weight");
    expect_grad(file, g, b, "bias");
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, batch_norm_train_nchw) { run_batch_norm("batch_norm_train.txt"); }
Test(golden, batch_norm_train_2d) { run_batch_norm("batch_norm_train_2d.txt"); }
Test(golden, batch_norm_eval) { run_batch_norm("batch_norm_eval.txt"); }

/* ------------------------------------------------------------------------------- cross entropy */
static void run_cross_entropy(const char *file) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    /* params: reduction (0 mean, 1 sum, 2 none), soft_label, use_ignore_index, ignore_index, axis */
    dg_cross_entropy_params p = dg_cross_entropy_default_params();
    p.reduction = (dg_reduction)param(g, "params", 0);
    p.soft_label = param(g, "params", 1) != 0;
    p.use_ignore_index = param(g, "params", 2) != 0;
    p.ignore_index = param(g, "params", 3);
    p.axis = (int)param(g, "params", 4);
    dg_tensor *x = golden_leaf(g, "x");
    dg_tensor *label = p.soft_label ? golden_leaf(g, "label") : golden_get(g, "label");
    dg_tensor *out = dg_cross_entropy_ext(x, label, p);
    cr_assert(out, "%s: cross_entropy failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    /* scalar losses through the weighted sum, per-row losses through grad_output */
    backward_weighted(file, g, out, p.reduction != DG_REDUCE_NONE);
    expect_grad(file, g, x, "x");
    if (p.soft_label) expect_grad(file, g, label, "label");
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, cross_entropy_hard_mean) { run_cross_entropy("cross_entropy_mean.txt"); }
Test(golden, cross_entropy_hard_sum) { run_cross_entropy("cross_entropy_sum.txt"); }
Test(golden, cross_entropy_hard_none) { run_cross_entropy("cross_entropy_none.txt"); }
Test(golden, cross_entropy_soft_label) { run_cross_entropy("cross_entropy_soft.txt"); }
Test(golden, cross_entropy_ignore_index_mean) { run_cross_entropy("cross_entropy_ignore.txt"); }
Test(golden, cross_entropy_ignore_index_none) { run_cross_entropy("cross_entropy_ignore_none.txt"); }
Test(golden, cross_entropy_class_axis1_nchw) { run_cross_entropy("cross_entropy_axis1.txt"); }

/* ------------------------------------------------------------------------------- loss options
 * test/goldens/make_loss_goldens.py: iparams = kind, reduction, soft_label/log_target,
 * use_ignore_index, ignore_index, has_weight, has_pos_weight; fparams = smoothing / beta / delta.
 * Besides the value, each file's worst relative errors are logged for the issue note. */
static void run_loss(const char *file) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    int kind = (int)param(g, "iparams", 0);
    dg_reduction r = (dg_reduction)param(g, "iparams", 1);
    bool flag = param(g, "iparams", 2) != 0;
    dg_tensor *w = param(g, "iparams", 5) ? golden_get(g, "weight") : NULL;
    dg_tensor *pw = param(g, "iparams", 6) ? golden_get(g, "pos_weight") : NULL;
    double f = dg_item(golden_get(g, "fparams"));
    dg_tensor *x = golden_leaf(g, "x"), *label = golden_get(g, "label"), *out = NULL;
    if (kind == 0) {
        dg_cross_entropy_params p = dg_cross_entropy_default_params();
        p.reduction = r;
        p.soft_label = flag;
        p.use_ignore_index = param(g, "iparams", 3) != 0;
        p.ignore_index = param(g, "iparams", 4);
        p.axis = 1;
        p.weight = w;
        p.label_smoothing = f;
        out = dg_cross_entropy_ext(x, label, p);
    } else if (kind == 1) {
        dg_nll_loss_params p = dg_nll_loss_default_params();
        p.reduction = r;
        p.ignore_index = param(g, "iparams", 4);
        p.weight = w;
        out = dg_nll_loss_ext(x, label, p);
    } else if (kind == 2 || kind == 3) {
        dg_bce_params p = dg_bce_default_params();
        p.reduction = r;
        p.weight = w;
        p.pos_weight = pw;
        out = kind == 2 ? dg_binary_cross_entropy(x, label, p) : dg_binary_cross_entropy_with_logits_ext(x, label, p);
    } else if (kind == 4) {
        out = dg_smooth_l1_loss(x, label, r, f);
    } else if (kind == 5) {
        out = dg_huber_loss(x, label, r, f);
    } else {
        out = dg_kl_div(x, label, r, flag);
    }
    cr_assert(out, "%s: the loss failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, r != DG_REDUCE_NONE);
    expect_grad(file, g, x, "x");
    cr_log_info("%s: out %.2e, grad %.2e (max relative error)", file, max_rel_err(out, golden_get(g, "out"), floor_for(golden_get(g, "out"))),
                max_rel_err(dg_grad(x), golden_get(g, "grad_x"), floor_for(golden_get(g, "grad_x"))));
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, loss_ce_weight_mean) { run_loss("loss_ce_weight_mean.txt"); }
Test(golden, loss_ce_weight_ignore_mean) { run_loss("loss_ce_weight_ignore_mean.txt"); }
Test(golden, loss_ce_smooth_ignore_mean) { run_loss("loss_ce_smooth_ignore_mean.txt"); }
Test(golden, loss_ce_weight_smooth_ignore_mean) { run_loss("loss_ce_weight_smooth_ignore_mean.txt"); }
Test(golden, loss_ce_weight_smooth_sum) { run_loss("loss_ce_weight_smooth_sum.txt"); }
Test(golden, loss_ce_weight_smooth_none) { run_loss("loss_ce_weight_smooth_none.txt"); }
Test(golden, loss_ce_soft_weight_smooth_mean) { run_loss("loss_ce_soft_weight_smooth_mean.txt"); }
Test(golden, loss_nll_weight_ignore_mean) { run_loss("loss_nll_weight_ignore_mean.txt"); }
Test(golden, loss_nll_weight_none) { run_loss("loss_nll_weight_none.txt"); }
Test(golden, loss_nll_weight_3d_mean) { run_loss("loss_nll_weight_3d_mean.txt"); }
Test(golden, loss_bce_weight_mean) { run_loss("loss_bce_weight_mean.txt"); }
Test(golden, loss_bce_none) { run_loss("loss_bce_none.txt"); }
Test(golden, loss_bce_logits_weight_pos_weight_mean) { run_loss("loss_bce_logits_weight_pos_weight_mean.txt"); }
Test(golden, loss_bce_logits_pos_weight_none) { run_loss("loss_bce_logits_pos_weight_none.txt"); }
Test(golden, loss_smooth_l1_beta05_mean) { run_loss("loss_smooth_l1_beta05_mean.txt"); }
Test(golden, loss_smooth_l1_beta0_sum) { run_loss("loss_smooth_l1_beta0_sum.txt"); }
Test(golden, loss_huber_delta2_none) { run_loss("loss_huber_delta2_none.txt"); }
Test(golden, loss_kl_div_batchmean) { run_loss("loss_kl_div_batchmean.txt"); }
Test(golden, loss_kl_div_none) { run_loss("loss_kl_div_none.txt"); }
Test(golden, loss_kl_div_log_target_mean) { run_loss("loss_kl_div_log_target_mean.txt"); }

/* ------------------------------------------------------------------------------- log_softmax */
static void run_log_softmax(const char *file) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = golden_leaf(g, "x");
    dg_tensor *out = dg_log_softmax(x, (int)param(g, "params", 0));
    cr_assert(out, "%s: log_softmax failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, false);
    expect_grad(file, g, x, "x");
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, log_softmax_last_axis) { run_log_softmax("log_softmax_last.txt"); }
Test(golden, log_softmax_axis1_3d) { run_log_softmax("log_softmax_axis1.txt"); }

/* ------------------------------------------------------------------------------- matmul, linear */
static void run_matmul(const char *file) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    bool ta = param(g, "params", 0) != 0, tb = param(g, "params", 1) != 0;
    dg_tensor *a = golden_leaf(g, "a"), *b = golden_leaf(g, "b");
    dg_tensor *out = (ta || tb) ? dg_matmul_t(a, b, ta, tb) : dg_matmul(a, b);
    cr_assert(out, "%s: matmul failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, false);
    expect_grad(file, g, a, "a");
    expect_grad(file, g, b, "b");
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, matmul_2d) { run_matmul("matmul_2d.txt"); }
Test(golden, matmul_batched_broadcast) { run_matmul("matmul_batched_bcast.txt"); }
Test(golden, matmul_batched_with_2d_rhs) { run_matmul("matmul_batched_2d_rhs.txt"); }
Test(golden, matmul_transposed_both) { run_matmul("matmul_transposed.txt"); }
Test(golden, matmul_transposed_b_batched) { run_matmul("matmul_transposed_b_batched.txt"); }

static void run_linear(const char *file, bool has_bias) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = golden_leaf(g, "x"), *w = golden_leaf(g, "w"), *b = has_bias ? golden_leaf(g, "b") : NULL;
    dg_tensor *out = dg_linear(x, dg_transpose(w, 0, 1), b);   /* the golden stores w as [in, out] */
    cr_assert(out, "%s: linear failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, true);
    expect_grad(file, g, x, "x");
    expect_grad(file, g, w, "w");
    if (b) expect_grad(file, g, b, "b");
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, linear_3d_input_with_bias) { run_linear("linear.txt", true); }
Test(golden, linear_2d_no_bias) { run_linear("linear_2d_nobias.txt", false); }

/* ------------------------------------------------------------------------------- composite ops
 * test/goldens/make_op_goldens.py: iparams = kind, flag (keepdim / pad mode), unbiased, n, then n
 * axes / reps / pads; fparams = value or p. The worst relative errors are logged per file. */
static void run_op(const char *file) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    int kind = (int)param(g, "iparams", 0);
    int64_t flag = param(g, "iparams", 1);
    bool unbiased = param(g, "iparams", 2) != 0;
    int n = (int)param(g, "iparams", 3);
    int axes[DG_MAX_DIMS * 2];
    int64_t ints[DG_MAX_DIMS * 2];
    cr_assert(n <= DG_MAX_DIMS * 2, "%s: %d parameters", file, n);
    for (int i = 0; i < n; i++) { ints[i] = param(g, "iparams", 4 + i); axes[i] = (int)ints[i]; }
    double f = dg_item(golden_get(g, "fparams"));
    dg_tensor *x = golden_leaf(g, "x"), *out = NULL;
    switch (kind) {
    case 0: out = dg_flip(x, axes, n); break;
    case 1: out = dg_tile(x, ints, n); break;
    case 2: out = dg_masked_fill(x, dg_cast(golden_get(g, "mask"), DG_BOOL), f); break;
    case 3: out = dg_logsumexp(x, axes, n, flag != 0); break;
    case 4: out = dg_var(x, axes, n, unbiased, flag != 0); break;
    case 5: out = dg_std(x, axes, n, unbiased, flag != 0); break;
    case 6: out = dg_norm(x, f, axes, n, flag != 0); break;
    default: out = dg_pad(x, ints, n, (dg_pad_mode)flag, f); break;
    }
    cr_assert(out, "%s: the op failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, dg_ndim(out) == 0);
    expect_grad(file, g, x, "x");
    cr_log_info("%s: out %.2e, grad %.2e (max relative error)", file, max_rel_err(out, golden_get(g, "out"), floor_for(golden_get(g, "out"))),
                max_rel_err(dg_grad(x), golden_get(g, "grad_x"), floor_for(golden_get(g, "grad_x"))));
    /* f64 runs the same composition: it must agree with the golden at least as well */
    dg_tensor *x64 = dg_detach(dg_cast(x, DG_F64));
    cr_assert_eq(dg_set_requires_grad(x64, true), 0, "%s: %s", file, dg_last_error());
    dg_tensor *o64 = NULL;
    switch (kind) {
    case 0: o64 = dg_flip(x64, axes, n); break;
    case 1: o64 = dg_tile(x64, ints, n); break;
    case 2: o64 = dg_masked_fill(x64, dg_cast(golden_get(g, "mask"), DG_BOOL), f); break;
    case 3: o64 = dg_logsumexp(x64, axes, n, flag != 0); break;
    case 4: o64 = dg_var(x64, axes, n, unbiased, flag != 0); break;
    case 5: o64 = dg_std(x64, axes, n, unbiased, flag != 0); break;
    case 6: o64 = dg_norm(x64, f, axes, n, flag != 0); break;
    default: o64 = dg_pad(x64, ints, n, (dg_pad_mode)flag, f); break;
    }
    cr_assert(o64 && dg_dtype_of(o64) == DG_F64, "%s: the f64 op failed: %s", file, dg_last_error());
    expect_close(file, "out (f64)", dg_cast(o64, DG_F32), golden_get(g, "out"), TOL_VALUE);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(o64, dg_cast(golden_get(g, "gout"), DG_F64)))), 0, "%s: f64 backward: %s", file, dg_last_error());
    expect_close(file, "grad_x (f64)", dg_cast(dg_grad(x64), DG_F32), golden_get(g, "grad_x"), TOL_GRAD);
    dg_scope_end(s);
    golden_free(g);
}

Test(golden, op_flip_0_2) { run_op("op_flip_0_2.txt"); }
Test(golden, op_tile_repeat_2_1_3) { run_op("op_tile_repeat_2_1_3.txt"); }
Test(golden, op_tile_short_reps) { run_op("op_tile_short_reps.txt"); }
Test(golden, op_masked_fill_bcast) { run_op("op_masked_fill_bcast.txt"); }
Test(golden, op_logsumexp_1_2) { run_op("op_logsumexp_1_2.txt"); }
Test(golden, op_logsumexp_last_keepdim) { run_op("op_logsumexp_last_keepdim.txt"); }
Test(golden, op_var_unbiased_1) { run_op("op_var_unbiased_1.txt"); }
Test(golden, op_var_biased_all_keepdim) { run_op("op_var_biased_all_keepdim.txt"); }
Test(golden, op_std_unbiased_last_zero_row) { run_op("op_std_unbiased_last.txt"); }
Test(golden, op_norm_p1_1) { run_op("op_norm_p1_1.txt"); }
Test(golden, op_norm_p2_1_zero_row) { run_op("op_norm_p2_1.txt"); }
Test(golden, op_norm_inf_keepdim_tie) { run_op("op_norm_inf_0_keepdim.txt"); }
Test(golden, op_norm_p2_all) { run_op("op_norm_p2_all.txt"); }
Test(golden, op_pad_constant) { run_op("op_pad_constant.txt"); }
Test(golden, op_pad_constant_negative_crops) { run_op("op_pad_constant_crop.txt"); }
Test(golden, op_pad_reflect) { run_op("op_pad_reflect.txt"); }
Test(golden, op_pad_replicate) { run_op("op_pad_replicate.txt"); }

/* argument errors name the op and the shapes */
Test(golden, op_compose_errors) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_zeros(DG_SHAPE(2, 3), DG_F32);
    const int bad[] = {2}, dup[] = {0, -2};
    cr_expect_null(dg_flip(x, bad, 1));
    cr_expect(strstr(dg_last_error(), "flip: axis 2 out of range for [2, 3]") != NULL, "%s", dg_last_error());
    cr_expect_null(dg_logsumexp(x, dup, 2, false));
    cr_expect(strstr(dg_last_error(), "logsumexp:") != NULL, "%s", dg_last_error());
    cr_expect_null(dg_norm(x, 3.0, NULL, 0, false));
    cr_expect(strstr(dg_last_error(), "norm: p must be 1, 2 or INFINITY") != NULL, "%s", dg_last_error());
    cr_expect_null(dg_tile(x, (const int64_t[]){-1}, 1));
    cr_expect(strstr(dg_last_error(), "tile:") != NULL, "%s", dg_last_error());
    cr_expect_null(dg_masked_fill(x, dg_zeros(DG_SHAPE(3, 1), DG_BOOL), 1.0));
    cr_expect(strstr(dg_last_error(), "masked_fill: mask [3, 1] does not broadcast") != NULL, "%s", dg_last_error());
    cr_expect_null(dg_pad(x, (const int64_t[]){3, 0}, 2, DG_PAD_REFLECT, 0));
    cr_expect(strstr(dg_last_error(), "pad: reflect pads (3, 0) must be smaller") != NULL, "%s", dg_last_error());
    cr_expect_null(dg_pad(x, (const int64_t[]){-1, 0}, 2, DG_PAD_REPLICATE, 0));
    cr_expect(strstr(dg_last_error(), "replicate mode refuses negative pads") != NULL, "%s", dg_last_error());
    cr_expect_null(dg_pad(x, (const int64_t[]){1, 1, 1}, 3, DG_PAD_CONSTANT, 0));
    cr_expect_null(dg_var(x, bad, 1, true, false));
    cr_expect(strstr(dg_last_error(), "var: axis 2 out of range") != NULL, "%s", dg_last_error());
    dg_scope_end(s);
}
