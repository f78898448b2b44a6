/* test/test_conv_pool_ext_grad.c — finite-difference gradient checks (f64) and argument errors
 * of the conv/pool parity ops (conv_transpose2d, conv1d, dilated / indexed max pooling,
 * divisor_override, adaptive max pooling, 1-d pools). Goldens: test/test_conv_pool_ext.c. */
#include "test_util.h"

static dg_tensor *gc_ct(dg_tensor *const *in, void *ctx) {
    return dg_conv_transpose2d(in[0], in[1], in[2], *(dg_conv_transpose2d_params *)ctx);
}
static dg_tensor *gc_c1(dg_tensor *const *in, void *ctx) { return dg_conv1d(in[0], in[1], in[2], *(dg_conv1d_params *)ctx); }
static dg_tensor *gc_mp(dg_tensor *const *in, void *ctx) { return dg_max_pool2d(in[0], *(dg_pool2d_params *)ctx); }
static dg_tensor *gc_ap(dg_tensor *const *in, void *ctx) { return dg_avg_pool2d(in[0], *(dg_pool2d_params *)ctx); }
static dg_tensor *gc_amp(dg_tensor *const *in, void *ctx) { return dg_adaptive_max_pool2d(in[0], 3, 2, NULL); }
static dg_tensor *gc_mp1(dg_tensor *const *in, void *ctx) { return dg_max_pool1d(in[0], *(dg_pool1d_params *)ctx); }
static dg_tensor *gc_ap1(dg_tensor *const *in, void *ctx) { return dg_avg_pool1d(in[0], *(dg_pool1d_params *)ctx); }
static dg_tensor *gc_amp1(dg_tensor *const *in, void *ctx) { return dg_adaptive_max_pool1d(in[0], 3, NULL); }
static dg_tensor *gc_aap1(dg_tensor *const *in, void *ctx) { return dg_adaptive_avg_pool1d(in[0], 3); }

Test(conv_pool_ext_grad, conv_transpose2d) {
    dg_scope *s = dg_scope_begin();
    dg_conv_transpose2d_params p = dg_conv_transpose2d_default_params();
    p.stride[0] = 2; p.padding[0] = 1; p.output_padding[0] = 1; p.groups = 2; p.dilation[1] = 2;
    dg_tensor *in[3] = { gc_input(DG_SHAPE(2, 4, 3, 3), -1, 1), gc_input(DG_SHAPE(4, 1, 3, 2), -1, 1), gc_input(DG_SHAPE(2), -1, 1) };
    gradcheck("conv_transpose2d", gc_ct, in, 3, &p, 1e-6);
    /* output_padding past the stride (below the dilation): the padded-input path */
    p = dg_conv_transpose2d_default_params();
    p.dilation[0] = p.dilation[1] = 3; p.padding[0] = 1; p.output_padding[0] = 2; p.output_padding[1] = 1;
    dg_tensor *in2[3] = { gc_input(DG_SHAPE(1, 2, 3, 4), -1, 1), gc_input(DG_SHAPE(2, 3, 2, 2), -1, 1), gc_input(DG_SHAPE(3), -1, 1) };
    gradcheck("conv_transpose2d op past stride", gc_ct, in2, 3, &p, 1e-6);
    dg_scope_end(s);
}

Test(conv_pool_ext_grad, conv1d) {
    dg_scope *s = dg_scope_begin();
    dg_conv1d_params p = dg_conv1d_default_params();
    p.stride = 2, p.padding = 2, p.dilation = 2, p.groups = 1;
    dg_tensor *in[3] = { gc_input(DG_SHAPE(2, 3, 9), -1, 1), gc_input(DG_SHAPE(4, 3, 3), -1, 1), gc_input(DG_SHAPE(4), -1, 1) };
    gradcheck("conv1d", gc_c1, in, 3, &p, 1e-6);
    dg_scope_end(s);
}

Test(conv_pool_ext_grad, pools) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x[1] = { gc_input(DG_SHAPE(2, 2, 7, 8), -1, 1) };
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = 3; p.kernel[1] = 2; p.stride[0] = 2; p.stride[1] = 1; p.padding[0] = p.padding[1] = 1;
    p.dilation[0] = 2; p.dilation[1] = 3; p.ceil_mode = true;
    gradcheck("max_pool2d dilation", gc_mp, x, 1, &p, 1e-6);
    p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = 3; p.stride[0] = p.stride[1] = 2; p.padding[0] = p.padding[1] = 1;
    p.ceil_mode = true; p.divisor_override = 4;
    gradcheck("avg_pool2d divisor_override", gc_ap, x, 1, &p, 1e-6);
    gradcheck("adaptive_max_pool2d", gc_amp, x, 1, NULL, 1e-6);
    dg_tensor *x1[1] = { gc_input(DG_SHAPE(2, 3, 10), -1, 1) };
    dg_pool1d_params q = dg_pool1d_default_params();
    q.kernel = 3; q.stride = 2; q.padding = 1; q.dilation = 2; q.ceil_mode = true;
    gradcheck("max_pool1d", gc_mp1, x1, 1, &q, 1e-6);
    q.dilation = 1;
    gradcheck("avg_pool1d", gc_ap1, x1, 1, &q, 1e-6);
    gradcheck("adaptive_max_pool1d", gc_amp1, x1, 1, NULL, 1e-6);
    gradcheck("adaptive_avg_pool1d", gc_aap1, x1, 1, NULL, 1e-6);
    dg_scope_end(s);
}

/* Ties go to the first maximum and NaN propagates with its gradient, in every max path. */
Test(conv_pool_ext_grad, ties_and_nan) {
    dg_scope *s = dg_scope_begin();
    double v[8] = { 1, 1, 0, 1, NAN, 2, 2, 2 };
    dg_tensor *x = dg_from_data(DG_SHAPE(1, 1, 2, 4), DG_F64, v);
    cr_assert(x, "%s", dg_last_error());
    dg_set_requires_grad(x, true);
    dg_tensor *idx = NULL;
    dg_tensor *y = dg_adaptive_max_pool2d(x, 1, 2, &idx);
    cr_assert(y && idx, "%s", dg_last_error());
    int64_t iv[2];
    double yv[2];
    cr_assert_eq(dg_to_host(idx, iv, sizeof iv), 0, "%s", dg_last_error());
    cr_assert_eq(dg_to_host(y, yv, sizeof yv), 0, "%s", dg_last_error());
    cr_assert_eq(iv[0], 4, "NaN wins the left bin, got %lld", (long long)iv[0]);
    cr_assert_eq(iv[1], 6, "the first 2 wins the right bin, got %lld", (long long)iv[1]);
    cr_assert(isnan(yv[0]) && yv[1] == 2);
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    const double *g = dg_data(dg_grad(x));
    double want[8] = { 0, 0, 0, 0, 1, 0, 1, 0 };
    for (int i = 0; i < 8; i++) cr_assert_eq(g[i], want[i], "grad[%d] = %g", i, g[i]);
    dg_tensor_free(idx);
    dg_scope_end(s);
}

Test(conv_pool_ext_errors, bad_arguments_name_the_op_and_shapes) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_zeros(DG_SHAPE(1, 4, 5, 5), DG_F32), *w = dg_zeros(DG_SHAPE(4, 2, 3, 3), DG_F32);
    dg_conv_transpose2d_params p = dg_conv_transpose2d_default_params();
    p.output_padding[0] = 1;   /* stride 1, dilation 1 */
    cr_assert_null(dg_conv_transpose2d(x, w, NULL, p));
    expect_error_contains("output_padding", "conv_transpose2d", "output_padding");
    p = dg_conv_transpose2d_default_params();
    cr_assert_null(dg_conv_transpose2d(x, dg_zeros(DG_SHAPE(3, 2, 3, 3), DG_F32), NULL, p));
    expect_error_contains("channels", "conv_transpose2d", "[1, 4, 5, 5]");
    p.groups = 3;
    cr_assert_null(dg_conv_transpose2d(x, w, NULL, p));
    expect_error_contains("groups", "conv_transpose2d", "groups=3");
    p = dg_conv_transpose2d_default_params();
    cr_assert_null(dg_conv_transpose2d(x, w, dg_zeros(DG_SHAPE(3), DG_F32), p));
    expect_error_contains("bias", "conv_transpose2d", "bias");
    cr_assert_null(dg_conv_transpose2d(dg_zeros(DG_SHAPE(4, 5, 5), DG_F32), w, NULL, p));
    expect_error_contains("ndim", "conv_transpose2d", "4-D");
    p.padding[0] = 5;
    cr_assert_null(dg_conv_transpose2d(x, w, NULL, p));
    expect_error_contains("size", "conv_transpose2d", "output size");

    dg_conv1d_params c = dg_conv1d_default_params();
    cr_assert_null(dg_conv1d(x, dg_zeros(DG_SHAPE(2, 4, 3), DG_F32), NULL, c));
    expect_error_contains("conv1d ndim", "conv1d", "3-D");
    c.stride = 0;
    cr_assert_null(dg_conv1d(dg_zeros(DG_SHAPE(1, 4, 5), DG_F32), dg_zeros(DG_SHAPE(2, 4, 3), DG_F32), NULL, c));
    expect_error_contains("conv1d stride", "conv1d", "stride");

    dg_pool2d_params q = dg_pool2d_default_params();
    q.kernel[0] = q.kernel[1] = 2;
    q.dilation[0] = -1;
    cr_assert_null(dg_max_pool2d(x, q));
    expect_error_contains("dilation", "max_pool2d", "dilation");
    q.dilation[0] = 2;
    cr_assert_null(dg_avg_pool2d(x, q));
    expect_error_contains("avg dilation", "avg_pool2d", "dilation");
    q.dilation[0] = 1;
    q.divisor_override = 2;
    cr_assert_null(dg_max_pool2d(x, q));
    expect_error_contains("max divisor", "max_pool2d", "divisor_override");
    q.divisor_override = -1;
    cr_assert_null(dg_avg_pool2d(x, q));
    expect_error_contains("avg divisor", "avg_pool2d", "divisor_override");
    q.divisor_override = 0;
    q.dilation[0] = q.dilation[1] = 4;   /* extent 5 > 5 + 0: no window */
    q.kernel[0] = q.kernel[1] = 3;
    dg_tensor *idx = dg_zeros(DG_SHAPE(1), DG_F32);   /* overwritten with NULL on failure */
    cr_assert_null(dg_max_pool2d_with_indices(x, q, &idx));
    cr_assert_null(idx);
    expect_error_contains("too small", "max_pool2d_with_indices", "dilation (4,4)");

    cr_assert_null(dg_adaptive_max_pool2d(x, 0, 2, NULL));
    expect_error_contains("adaptive", "adaptive_max_pool2d", "[1, 4, 5, 5]");
    cr_assert_null(dg_adaptive_max_pool2d(dg_zeros(DG_SHAPE(4, 5), DG_F32), 1, 1, NULL));
    expect_error_contains("adaptive ndim", "adaptive_max_pool2d", "4-D");
    cr_assert_null(dg_adaptive_max_pool2d(dg_zeros(DG_SHAPE(1, 1, 2, 2), DG_I64), 1, 1, NULL));
    expect_error_contains("adaptive dtype", "adaptive_max_pool2d", "int64");

    dg_pool1d_params r = dg_pool1d_default_params();
    cr_assert_null(dg_max_pool1d(dg_zeros(DG_SHAPE(1, 2, 5), DG_F32), r));
    expect_error_contains("kernel 0", "max_pool1d", "kernel");
    r.kernel = 2;
    cr_assert_null(dg_avg_pool1d(x, r));
    expect_error_contains("pool1d ndim", "avg_pool1d", "[1, 4, 5, 5]");
    cr_assert_null(dg_adaptive_avg_pool1d(dg_zeros(DG_SHAPE(1, 2, 5), DG_F32), 0));
    expect_error_contains("adaptive 1d", "adaptive_avg_pool2d", "output size");
    dg_scope_end(s);
}

/* The layers: torch's parameter names and layouts, and the functional ops' results. */
Test(conv_pool_ext_layers, shapes_names_and_results) {
    dg_scope *s = dg_scope_begin();
    dg_nn_conv_transpose2d_params tp = dg_nn_conv_transpose2d_default_params();
    tp.stride = 2; tp.padding = 1; tp.output_padding = 1; tp.groups = 2;
    dg_layer *ct = dg_nn_conv_transpose2d(4, 6, 3, tp);
    cr_assert(ct, "%s", dg_last_error());
    dg_tensor *w = dg_layer_parameter(ct, "weight"), *b = dg_layer_parameter(ct, "bias");
    cr_assert(w && b);
    char sh[64];
    cr_assert_str_eq(dg_shape_str(w, sh, sizeof sh), "[4, 3, 3, 3]");
    cr_assert_str_eq(dg_shape_str(b, sh, sizeof sh), "[6]");
    dg_tensor *x = dg_uniform(DG_SHAPE(2, 4, 5, 5), -1, 1, DG_F32);
    dg_tensor *y = dg_forward(ct, x);
    cr_assert(y, "%s", dg_last_error());
    cr_assert_str_eq(dg_shape_str(y, sh, sizeof sh), "[2, 6, 10, 10]");
    dg_conv_transpose2d_params fp = dg_conv_transpose2d_default_params();
    fp.stride[0] = fp.stride[1] = 2; fp.padding[0] = fp.padding[1] = 1; fp.output_padding[0] = fp.output_padding[1] = 1; fp.groups = 2;
    cr_assert(max_rel_err(y, dg_conv_transpose2d(x, w, b, fp), 1e-3) == 0);
    tp.output_padding = 2;   /* not below stride 2 or dilation 1 */
    cr_assert_null(dg_nn_conv_transpose2d(4, 6, 3, tp));
    dg_clear_error();

    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    cp.padding = 1;
    dg_layer *c1 = dg_nn_conv1d(3, 5, 3, cp);
    cr_assert(c1, "%s", dg_last_error());
    cr_assert_str_eq(dg_shape_str(dg_layer_parameter(c1, "weight"), sh, sizeof sh), "[5, 3, 3]");
    dg_tensor *y1 = dg_forward(c1, dg_uniform(DG_SHAPE(2, 3, 7), -1, 1, DG_F32));
    cr_assert(y1, "%s", dg_last_error());
    cr_assert_str_eq(dg_shape_str(y1, sh, sizeof sh), "[2, 5, 7]");

    dg_pool1d_params pp = dg_pool1d_default_params();
    pp.kernel = 3; pp.stride = 2; pp.padding = 1;
    dg_tensor *x1 = dg_uniform(DG_SHAPE(2, 3, 9), -1, 1, DG_F32);
    cr_assert(max_rel_err(dg_forward(dg_nn_avg_pool1d(pp), x1), dg_avg_pool1d(x1, pp), 1e-3) == 0);
    pp.dilation = 2;
    cr_assert(max_rel_err(dg_forward(dg_nn_max_pool1d(pp), x1), dg_max_pool1d(x1, pp), 1e-3) == 0);
    cr_assert_null(dg_nn_avg_pool1d(pp));   /* average pooling has no dilation */
    dg_clear_error();
    cr_assert(max_rel_err(dg_forward(dg_nn_adaptive_max_pool2d(2, 3), x), dg_adaptive_max_pool2d(x, 2, 3, NULL), 1e-3) == 0);

    dg_nn_pool2d_params np = dg_nn_pool2d_default_params();
    np.dilation = 2; np.padding = 1;
    dg_pool2d_params fq = dg_pool2d_default_params();
    fq.kernel[0] = fq.kernel[1] = 3; fq.stride[0] = fq.stride[1] = 3; fq.padding[0] = fq.padding[1] = 1;
    fq.dilation[0] = fq.dilation[1] = 2;
    cr_assert(max_rel_err(dg_forward(dg_nn_max_pool2d(3, np), x), dg_max_pool2d(x, fq), 1e-3) == 0);
    np = dg_nn_pool2d_default_params();
    np.divisor_override = 2;
    fq = dg_pool2d_default_params();
    fq.kernel[0] = fq.kernel[1] = 2; fq.divisor_override = 2;
    cr_assert(max_rel_err(dg_forward(dg_nn_avg_pool2d(2, np), x), dg_avg_pool2d(x, fq), 1e-3) == 0);
    np.dilation = 2;
    cr_assert_null(dg_nn_avg_pool2d(2, np));
    dg_clear_error();
    dg_scope_end(s);
}
