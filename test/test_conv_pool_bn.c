/* test/test_conv_pool_bn.c — conv2d and max/avg/adaptive-avg pooling (batch_norm and dropout:
 * test/test_norm_dropout.c):
 * hand-computed forward values, a naive reference convolution, f64 finite-difference gradient
 * checks over the parameter space (stride, padding, dilation, groups, bias, ceil_mode,
 * count_include_pad), f32 against f64, running-statistics updates, dropout mask statistics,
 * and bad input (NULL return plus an error naming the op). */
#include "test_util.h"
#include "test_layer_ops.h"

/* ================= conv2d ================= */

/* Direct-loop convolution on host f64 data, for comparison. */
static double *ref_conv(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p, dg_shape *out) {
    int64_t n = dg_dim(x, 0), c = dg_dim(x, 1), h = dg_dim(x, 2), wd = dg_dim(x, 3);
    int64_t oc = dg_dim(w, 0), cg = dg_dim(w, 1), kh = dg_dim(w, 2), kw = dg_dim(w, 3);
    int sh = p.stride[0] ? p.stride[0] : 1, sw = p.stride[1] ? p.stride[1] : 1, ph = p.padding[0], pw = p.padding[1];
    int dh = p.dilation[0] ? p.dilation[0] : 1, dw = p.dilation[1] ? p.dilation[1] : 1, g = p.groups ? p.groups : 1;
    int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (wd + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    double *xv = malloc(sizeof(double) * (size_t)dg_numel(x)), *wv = malloc(sizeof(double) * (size_t)dg_numel(w));
    double bv[64] = {0};
    dg_scope *s = dg_scope_begin();
    dg_to_host(dg_cast(x, DG_F64), xv, sizeof(double) * (size_t)dg_numel(x));
    dg_to_host(dg_cast(w, DG_F64), wv, sizeof(double) * (size_t)dg_numel(w));
    if (b) dg_to_host(dg_cast(b, DG_F64), bv, sizeof(double) * (size_t)oc);
    dg_scope_end(s);
    double *y = malloc(sizeof(double) * (size_t)(n * oc * oh * ow));
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < oc; o++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    double acc = bv[o];
                    int64_t grp = o / (oc / g);
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t ki = 0; ki < kh; ki++)
                            for (int64_t kj = 0; kj < kw; kj++) {
                                int64_t iy = oy * sh - ph + ki * dh, ix = ox * sw - pw + kj * dw;
                                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                                acc += xv[((i * c + grp * cg + ci) * h + iy) * wd + ix] * wv[((o * cg + ci) * kh + ki) * kw + kj];
                            }
                    y[((i * oc + o) * oh + oy) * ow + ox] = acc;
                }
    free(xv);
    free(wv);
    *out = DG_SHAPE(n, oc, oh, ow);
    return y;
}

static dg_tensor *conv_fn(dg_tensor *const *in, void *ctx) { return dg_conv2d(in[0], in[1], in[2], *(dg_conv2d_params *)ctx); }

/* Forward against the reference, then the gradient check, for one configuration in f64. */
static void conv_case(const char *name, dg_shape xs, int64_t oc, int64_t kh, int64_t kw, dg_conv2d_params p, bool bias) {
    dg_scope *s = dg_scope_begin();
    int g = p.groups ? p.groups : 1;
    dg_tensor *in[3] = { gc_input(xs, -1, 1), gc_input(DG_SHAPE(oc, xs.d[1] / g, kh, kw), -1, 1),
                         bias ? gc_input(DG_SHAPE(oc), -1, 1) : NULL };
    dg_tensor *y = dg_conv2d(in[0], in[1], in[2], p);
    dg_shape want;
    double *ref = ref_conv(in[0], in[1], in[2], p, &want);
    expect_shape(y, want, name);
    expect_values(y, ref, dg_numel(y), 1e-12, name);
    free(ref);
    cr_assert_str_eq(dg_grad_fn_name(y), "conv2d");
    gradcheck(name, conv_fn, in, 3, &p, 1e-6);
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 0, "%s: tensors leaked", name);
}

Test(conv, forward_hand_values) {
    dg_scope *s = dg_scope_begin();
    double xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, wv[4] = {1, 2, 3, 4}, bv[1] = {0.5};
    dg_tensor *x = f64_of(DG_SHAPE(1, 1, 3, 3), xv), *w = f64_of(DG_SHAPE(1, 1, 2, 2), wv), *b = f64_of(DG_SHAPE(1), bv);
    /* y[i,j] = sum_kl x[i+k, j+l] * w[k,l] */
    expect_values(dg_conv2d(x, w, NULL, dg_conv2d_default_params()), (double[]){37, 47, 67, 77}, 4, 1e-12, "plain");
    expect_values(dg_conv2d(x, w, b, dg_conv2d_default_params()), (double[]){37.5, 47.5, 67.5, 77.5}, 4, 1e-12, "bias");
    /* stride 2, padding 1: windows start at -1 and 1 */
    dg_conv2d_params sp = dg_conv2d_default_params();
    sp.stride[0] = sp.stride[1] = 2;
    sp.padding[0] = sp.padding[1] = 1;
    expect_values(dg_conv2d(x, w, NULL, sp), (double[]){4, 18, 36, 77}, 4, 1e-12, "stride2 pad1");
    /* f32 through oneDNN gives the same small integers exactly */
    expect_values(dg_conv2d(dg_cast(x, DG_F32), dg_cast(w, DG_F32), dg_cast(b, DG_F32), dg_conv2d_default_params()),
                  (double[]){37.5, 47.5, 67.5, 77.5}, 4, 0, "f32");
    dg_scope_end(s);
}

Test(conv, grad_plain) { conv_case("conv plain", DG_SHAPE(2, 3, 5, 4), 4, 3, 3, dg_conv2d_default_params(), true); }
Test(conv, grad_stride2_padding) {
    dg_conv2d_params cvp = dg_conv2d_default_params();
    cvp.stride[0] = cvp.stride[1] = 2;
    cvp.padding[0] = 1;
    cvp.padding[1] = 2;
    conv_case("conv stride2 pad", DG_SHAPE(2, 2, 6, 5), 3, 3, 2, cvp, true);
}
Test(conv, grad_dilation2) {
    dg_conv2d_params cvp2 = dg_conv2d_default_params();
    cvp2.dilation[0] = cvp2.dilation[1] = 2;
    cvp2.padding[0] = 1;
    conv_case("conv dilation2", DG_SHAPE(1, 2, 7, 6), 3, 3, 2, cvp2, true);
}
Test(conv, grad_groups2) {
    dg_conv2d_params cvp3 = dg_conv2d_default_params();
    cvp3.groups = 2;
    cvp3.padding[0] = cvp3.padding[1] = 1;
    conv_case("conv groups2", DG_SHAPE(3, 4, 5, 5), 6, 3, 3, cvp3, true);
}
Test(conv, grad_no_bias) {
    dg_conv2d_params cvp4 = dg_conv2d_default_params();
    cvp4.stride[1] = 2;
    conv_case("conv no bias", DG_SHAPE(2, 3, 5, 5), 2, 2, 3, cvp4, false);
}
Test(conv, grad_1x1) {
    conv_case("conv 1x1", DG_SHAPE(3, 4, 3, 4), 5, 1, 1, dg_conv2d_default_params(), true);
    dg_conv2d_params cvp5 = dg_conv2d_default_params();
    cvp5.groups = 2;
    conv_case("conv 1x1 groups", DG_SHAPE(1, 4, 3, 3), 2, 1, 1, cvp5, false);
    dg_conv2d_params cvp6 = dg_conv2d_default_params();
    cvp6.stride[0] = cvp6.stride[1] = 2;
    conv_case("conv 1x1 stride2", DG_SHAPE(2, 2, 5, 5), 3, 1, 1, cvp6, true);
}

/* The kernels split the batch across threads only when every thread gets an image; with more
 * threads than images they go image by image (threads inside). Both must give the same
 * gradients, including the filter gradient summed over several images. */
Test(conv, grad_thread_splits) {
    dg_conv2d_params p = dg_conv2d_default_params();
    p.stride[0] = 2;
    p.stride[1] = 1;
    p.padding[0] = p.padding[1] = 1;
    p.groups = 2;
    dg_set_num_threads(8);   /* 3 images < 8 threads: image by image */
    conv_case("conv sequential batch", DG_SHAPE(3, 4, 5, 5), 4, 3, 2, p, true);
    dg_set_num_threads(3);   /* one image per thread */
    conv_case("conv 3 threads", DG_SHAPE(3, 4, 5, 5), 4, 3, 2, p, true);
    dg_set_num_threads(2);   /* uneven split: 5 images over 2 threads */
    conv_case("conv 2 threads 5 images", DG_SHAPE(5, 2, 4, 4), 2, 2, 2, dg_conv2d_default_params(), true);
    dg_set_num_threads(4);
    conv_case("conv 1x1 sequential", DG_SHAPE(3, 2, 3, 3), 3, 1, 1, dg_conv2d_default_params(), true);
}

/* Grad wrt the bias only (weight frozen) and wrt the input only. */
Test(conv, grad_partial_inputs) {
    dg_scope *s = dg_scope_begin();
    dg_conv2d_params p = dg_conv2d_default_params();
    p.padding[0] = p.padding[1] = 1;
    dg_tensor *in[3] = { dg_uniform(DG_SHAPE(2, 2, 4, 4), -1, 1, DG_F64), dg_uniform(DG_SHAPE(3, 2, 3, 3), -1, 1, DG_F64),
                         gc_input(DG_SHAPE(3), -1, 1) };
    gradcheck("conv bias only", conv_fn, in, 3, &p, 1e-6);
    cr_assert_null(dg_grad(in[1]));
    dg_set_requires_grad(in[0], true);
    dg_set_requires_grad(in[2], false);
    gradcheck("conv input only", conv_fn, in, 3, &p, 1e-6);
    dg_scope_end(s);
}

/* f32 (oneDNN sgemm) against the reference and against the f64 gradients, with the batch
 * split across threads (N >= threads) and image by image (N = 1). */
static void conv_f32_case(int threads, int64_t n, dg_conv2d_params p, int64_t kh, int64_t kw) {
    dg_set_num_threads(threads);
    dg_scope *s = dg_scope_begin();
    int g = p.groups ? p.groups : 1;
    dg_tensor *x64 = dg_uniform(DG_SHAPE(n, 4, 9, 8), -1, 1, DG_F64), *w64 = dg_uniform(DG_SHAPE(6, 4 / g, kh, kw), -1, 1, DG_F64);
    dg_tensor *b64 = dg_uniform(DG_SHAPE(6), -1, 1, DG_F64);
    dg_tensor *x32 = dg_cast(x64, DG_F32), *w32 = dg_cast(w64, DG_F32), *b32 = dg_cast(b64, DG_F32);
    dg_tensor *ts[6] = { x64, w64, b64, x32, w32, b32 };
    for (int i = 0; i < 6; i++) dg_set_requires_grad(ts[i], true);
    dg_tensor *y32 = dg_conv2d(x32, w32, b32, p), *y64 = dg_conv2d(x64, w64, b64, p);
    dg_shape want;
    double *ref = ref_conv(x64, w64, b64, p, &want);
    expect_shape(y32, want, "f32 conv");
    expect_values(y32, ref, dg_numel(y32), 1e-4, "f32 conv vs reference");
    free(ref);
    dg_tensor *wt = dg_uniform(dg_shape_of(y64), 0.5, 1.5, DG_F64);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y64, wt))), 0, "%s", dg_last_error());
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y32, dg_cast(wt, DG_F32)))), 0, "%s", dg_last_error());
    for (int i = 0; i < 3; i++) {
        double e = max_rel_err(dg_grad(ts[i + 3]), dg_grad(ts[i]), 1.0);
        cr_assert(e < 1e-4, "threads %d n %lld: f32 gradient %d differs from f64 by %g", threads, (long long)n, i, e);
    }
    dg_scope_end(s);
}

Test(conv, f32_matches_reference_and_f64) {
    dg_conv2d_params p = dg_conv2d_default_params();
    p.stride[0] = 2;
    p.stride[1] = 1;
    p.padding[0] = 1;
    p.padding[1] = 2;
    p.dilation[0] = 1;
    p.dilation[1] = 2;
    p.groups = 2;
    conv_f32_case(2, 5, p, 3, 2);
    conv_f32_case(2, 1, p, 3, 2);
    conv_f32_case(1, 3, p, 3, 2);
    conv_f32_case(4, 5, dg_conv2d_default_params(), 1, 1);
    conv_f32_case(2, 1, dg_conv2d_default_params(), 1, 1);
}

/* dg_set_cpu_bf16: forward, input, weight and bias gradients of a convolution with 32 input
 * channels (oneDNN's path) computed from bf16-rounded operands (the bias gradient sums the
 * rounded upstream gradient): within bf16's precision of the f32 results, and not equal to them
 * (bf16 really ran: a silent fallback to f32 fails here). */
Test(conv, cpu_bf16_is_close_to_f32) {
    if (dg_set_cpu_bf16(true) != 0) {
        cr_assert_eq(dg_last_status(), DG_EUNSUPPORTED);
        cr_assert(strstr(dg_last_error(), "bf16"), "%s", dg_last_error());
        cr_skip_test("no bf16 instructions on this CPU: %s", dg_last_error());
    }
    dg_set_cpu_bf16(false);
    dg_scope *all = dg_scope_begin();
    dg_manual_seed(8);
    dg_tensor *x = dg_randn(DG_SHAPE(4, 32, 12, 12), DG_F32), *w = dg_mul_scalar(dg_randn(DG_SHAPE(32, 32, 3, 3), DG_F32), 0.1);
    dg_tensor *b = dg_randn(DG_SHAPE(32), DG_F32), *gy = dg_randn(DG_SHAPE(4, 32, 12, 12), DG_F32);
    dg_tensor *out[2][4];   /* [f32, bf16][y, gx, gw, gb] */
    for (int lp = 0; lp < 2; lp++) {
        cr_assert_eq(dg_set_cpu_bf16(lp), 0, "%s", dg_last_error());
        cr_assert_eq(dg_get_cpu_bf16(), lp);
        dg_tensor *xl = dg_detach(x), *wl = dg_detach(w), *bl = dg_detach(b);
        dg_set_requires_grad(xl, true); dg_set_requires_grad(wl, true); dg_set_requires_grad(bl, true);
        dg_conv2d_params cvp7 = dg_conv2d_default_params();
        cvp7.padding[0] = cvp7.padding[1] = 1;
        dg_tensor *y = dg_conv2d(xl, wl, bl, cvp7);
        cr_assert_not_null(y, "%s", dg_last_error());
        dg_backward_params bwp = dg_backward_default_params();
        bwp.grad_output = gy;
        cr_assert_eq(dg_backward_ext(y, bwp), 0, "%s", dg_last_error());
        out[lp][0] = dg_detach(y); out[lp][1] = dg_detach(dg_grad(xl)); out[lp][2] = dg_detach(dg_grad(wl)); out[lp][3] = dg_detach(dg_grad(bl));
    }
    dg_set_cpu_bf16(false);
    const char *name[4] = { "output", "input gradient", "weight gradient", "bias gradient" };
    for (int i = 0; i < 4; i++) {
        dg_scope *sc = dg_scope_begin();
        double scale = dg_item(dg_max(dg_abs(out[0][i]), NULL, 0, false));
        double err = dg_item(dg_max(dg_abs(dg_sub(out[1][i], out[0][i])), NULL, 0, false)) / scale;
        dg_scope_end(sc);
        cr_assert(err <= 2e-2, "bf16 %s: max error %g of the largest value", name[i], err);
        cr_assert(err > 1e-6, "bf16 %s equals f32's (max error %g): bf16 did not run", name[i], err);
    }
    dg_scope_end(all);
}

/* A non-contiguous input (a transposed view) is convolved as its values, not its memory. */
Test(conv, noncontiguous_input) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *base = dg_uniform(DG_SHAPE(1, 2, 5, 6), -1, 1, DG_F64), *w = dg_uniform(DG_SHAPE(3, 2, 2, 2), -1, 1, DG_F64);
    dg_tensor *xt = dg_transpose(base, 2, 3);
    cr_assert(!dg_is_contiguous(xt));
    dg_tensor *a = dg_conv2d(xt, w, NULL, dg_conv2d_default_params()), *b = dg_conv2d(dg_contiguous(xt), w, NULL, dg_conv2d_default_params());
    cr_assert(a && b);
    cr_assert(max_rel_err(a, b, 1.0) == 0);
    dg_scope_end(s);
}


Test(conv, bad_input) {
    dg_clear_error();
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_zeros(DG_SHAPE(2, 4, 5, 5), DG_F32), *w = dg_zeros(DG_SHAPE(6, 2, 3, 3), DG_F32);
    dg_conv2d_params g2 = dg_conv2d_default_params();
    g2.groups = 2;
    cr_assert_not_null(dg_conv2d(x, w, NULL, g2), "the valid call works: %s", dg_last_error());
    EXPECT_FAIL(dg_conv2d(NULL, w, NULL, g2), "conv2d");
    EXPECT_FAIL(dg_conv2d(x, NULL, NULL, g2), "conv2d");
    EXPECT_FAIL(dg_conv2d(dg_zeros(DG_SHAPE(4, 5, 5), DG_F32), w, NULL, g2), "conv2d");                 /* 3-D input */
    EXPECT_FAIL(dg_conv2d(x, dg_zeros(DG_SHAPE(6, 2, 3), DG_F32), NULL, g2), "conv2d");                 /* 3-D weight */
    EXPECT_FAIL(dg_conv2d(x, w, NULL, dg_conv2d_default_params()), "conv2d");                                /* C != 2*groups(1) */
    EXPECT_FAIL(dg_conv2d(x, dg_zeros(DG_SHAPE(5, 2, 3, 3), DG_F32), NULL, g2), "conv2d");              /* OC % groups */
    EXPECT_FAIL(dg_conv2d(x, w, dg_zeros(DG_SHAPE(5), DG_F32), g2), "conv2d");                          /* bias size */
    EXPECT_FAIL(dg_conv2d(x, w, dg_zeros(DG_SHAPE(6, 1), DG_F32), g2), "conv2d");                       /* bias ndim */
    EXPECT_FAIL(dg_conv2d(x, dg_zeros(DG_SHAPE(6, 2, 7, 3), DG_F32), NULL, g2), "conv2d");              /* kernel > input */
    dg_conv2d_params cvp8 = dg_conv2d_default_params();
    cvp8.groups = 2;
    cvp8.dilation[0] = 3;
    cvp8.dilation[1] = 1;
    EXPECT_FAIL(dg_conv2d(x, w, NULL, cvp8), "conv2d"); /* dilated too */
    dg_conv2d_params cvp9 = dg_conv2d_default_params();
    cvp9.groups = 2;
    cvp9.stride[0] = -1;
    cvp9.stride[1] = 1;
    EXPECT_FAIL(dg_conv2d(x, w, NULL, cvp9), "conv2d");
    dg_conv2d_params cvp10 = dg_conv2d_default_params();
    cvp10.groups = -2;
    EXPECT_FAIL(dg_conv2d(x, w, NULL, cvp10), "conv2d");
    EXPECT_FAIL(dg_conv2d(dg_zeros(DG_SHAPE(2, 4, 5, 5), DG_I64), dg_zeros(DG_SHAPE(6, 2, 3, 3), DG_I64), NULL, g2), "conv2d");
    EXPECT_FAIL(dg_conv2d(x, dg_zeros(DG_SHAPE(6, 2, 3, 3), DG_F64), NULL, g2), "conv2d");              /* dtype mismatch */
    EXPECT_FAIL(dg_conv2d(x, w, dg_zeros(DG_SHAPE(6), DG_F64), g2), "conv2d");
    EXPECT_FAIL(dg_conv2d(x, dg_empty(DG_SHAPE(0, 2, 3, 3), DG_F32), NULL, g2), "conv2d");              /* empty weight */
    dg_scope_end(s);
}

/* ================= pooling ================= */

/* A table row's fields over the defaults (a literal is refused: its dilation would be 0) */
static dg_pool2d_params over_defaults(dg_pool2d_params row) {
    dg_pool2d_params p = dg_pool2d_default_params();
    memcpy(p.kernel, row.kernel, sizeof p.kernel);
    memcpy(p.stride, row.stride, sizeof p.stride);
    memcpy(p.padding, row.padding, sizeof p.padding);
    p.ceil_mode = row.ceil_mode;
    p.count_include_pad = row.count_include_pad;
    return p;
}
static dg_tensor *maxpool_fn(dg_tensor *const *in, void *ctx) { return dg_max_pool2d(in[0], *(dg_pool2d_params *)ctx); }
static dg_tensor *avgpool_fn(dg_tensor *const *in, void *ctx) { return dg_avg_pool2d(in[0], *(dg_pool2d_params *)ctx); }
static dg_tensor *adaptive_fn(dg_tensor *const *in, void *ctx) { const int *o = ctx; return dg_adaptive_avg_pool2d(in[0], o[0], o[1]); }

/* Distinct values 0.01 apart in a scrambled order: no ties, and a finite-difference step
 * cannot change which element is a window's maximum. */
static dg_tensor *tie_free(dg_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.d[i];
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 37 + 11) % n) * 0.01 - 0.3;  /* 37 coprime with the sizes used */
    dg_tensor *t = f64_of(s, v);
    free(v);
    dg_set_requires_grad(t, true);
    return t;
}

Test(max_pool, forward_hand_values) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_arange(0, 16, 1, DG_F64);
    x = dg_reshape(x, DG_SHAPE(1, 1, 4, 4));
    dg_pool2d_params plp = dg_pool2d_default_params();
    plp.kernel[0] = plp.kernel[1] = 2;
    expect_values(dg_max_pool2d(x, plp), (double[]){5, 7, 13, 15}, 4, 0, "k2");
    dg_pool2d_params plp2 = dg_pool2d_default_params();
    plp2.kernel[0] = plp2.kernel[1] = 3;
    plp2.stride[0] = plp2.stride[1] = 2;
    plp2.padding[0] = plp2.padding[1] = 1;
    expect_values(dg_max_pool2d(x, plp2),
                  (double[]){5, 7, 13, 15}, 4, 0, "k3 s2 p1");
    dg_pool2d_params plp3 = dg_pool2d_default_params();
    plp3.kernel[0] = plp3.kernel[1] = 2;
    plp3.stride[0] = plp3.stride[1] = 1;
    expect_values(dg_max_pool2d(x, plp3),
                  (double[]){5, 6, 7, 9, 10, 11, 13, 14, 15}, 9, 0, "k2 s1");
    /* ceil_mode on 5x5 keeps a last, partial window */
    dg_tensor *x5 = dg_reshape(dg_arange(0, 25, 1, DG_F32), DG_SHAPE(1, 1, 5, 5));
    dg_pool2d_params plp4 = dg_pool2d_default_params();
    plp4.kernel[0] = plp4.kernel[1] = 2;
    plp4.ceil_mode = true;
    dg_tensor *y = dg_max_pool2d(x5, plp4);
    expect_shape(y, DG_SHAPE(1, 1, 3, 3), "ceil 5x5");
    expect_values(y, (double[]){6, 8, 9, 16, 18, 19, 21, 23, 24}, 9, 0, "ceil 5x5");
    dg_pool2d_params plp5 = dg_pool2d_default_params();
    plp5.kernel[0] = plp5.kernel[1] = 2;
    expect_shape(dg_max_pool2d(x5, plp5), DG_SHAPE(1, 1, 2, 2), "floor 5x5");
    /* negative inputs next to padding: padding never wins */
    dg_tensor *neg = dg_add_scalar(x, -100);
    dg_pool2d_params plp6 = dg_pool2d_default_params();
    plp6.kernel[0] = plp6.kernel[1] = 2;
    plp6.stride[0] = plp6.stride[1] = 2;
    plp6.padding[0] = plp6.padding[1] = 1;
    expect_values(dg_max_pool2d(neg, plp6),
                  (double[]){-100, -98, -97, -92, -90, -89, -88, -86, -85}, 9, 0, "negative with padding");
    dg_scope_end(s);
}

Test(max_pool, grad) {
    dg_pool2d_params cases[] = {   /* the fields that differ from the defaults (over_defaults) */
        { .kernel = {2, 2}, .stride = {DG_STRIDE_KERNEL, DG_STRIDE_KERNEL} },
        { .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1} },
        { .kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 0} },      /* overlapping windows */
        { .kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *in[1] = { tie_free(DG_SHAPE(2, 3, 5, 7)) };
        dg_pool2d_params p = over_defaults(cases[i]);
        gradcheck("max_pool2d", maxpool_fn, in, 1, &p, 1e-6);
        dg_scope_end(s);
    }
    cr_assert_eq(dg_live_tensors(), 0);
}

/* The gradient lands on the window's maximum only, and sums where windows overlap. */
Test(max_pool, grad_routes_to_argmax) {
    dg_scope *s = dg_scope_begin();
    double v[9] = {0, 1, 0, 0, 9, 0, 0, 2, 0};
    dg_tensor *x = f64_of(DG_SHAPE(1, 1, 3, 3), v);
    dg_set_requires_grad(x, true);
    dg_pool2d_params plp7 = dg_pool2d_default_params();
    plp7.kernel[0] = plp7.kernel[1] = 2;
    plp7.stride[0] = plp7.stride[1] = 1;
    dg_tensor *y = dg_max_pool2d(x, plp7);
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0);
    expect_values(dg_grad(x), (double[]){0, 0, 0, 0, 4, 0, 0, 0, 0}, 9, 0, "argmax gradient");
    dg_scope_end(s);
}

/* The 2x2/stride-2 fast path against the rule: ties go to the first element of the window in
 * row-major order, a NaN wins (the first one), uncovered rows/columns of odd sizes get zero. */
Test(max_pool, two_by_two_ties_nan_and_odd_sizes) {
    dg_scope *s = dg_scope_begin();
    float v[15] = { 1, 1, 2, 5, 7,
                    1, 0, 5, 2, 7,
                    NAN, 3, 4, NAN, 9 };     /* [1, 1, 3, 5]: windows over rows 0-1, columns 0-3 */
    for (int dt = 0; dt < 2; dt++) {
        dg_tensor *x = dg_from_data(DG_SHAPE(1, 1, 3, 5), DG_F32, v);
        if (dt) x = dg_cast(x, DG_F64);
        dg_set_requires_grad(x, true);
        dg_pool2d_params plp8 = dg_pool2d_default_params();
        plp8.kernel[0] = plp8.kernel[1] = 2;
        plp8.stride[0] = plp8.stride[1] = 2;
        dg_tensor *y = dg_max_pool2d(x, plp8);
        cr_assert_eq(dg_dim(y, 2), 1);
        cr_assert_eq(dg_dim(y, 3), 2);
        expect_values(y, (double[]){ 1, 5 }, 2, 0, "2x2 values");
        cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y, dg_cast(dg_from_data(DG_SHAPE(1, 1, 1, 2), DG_F32, (float[]){ 10, 20 }), dg_dtype_of(y))))), 0);
        /* tie 1,1,1 -> first; tie 5,5 -> the first 5 (row 0); row 2 and column 4 uncovered */
        expect_values(dg_grad(x), (double[]){ 10, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 15, 0, "2x2 gradient");
    }
    float w[8] = { 1, 2, NAN, 0, 3, NAN, 1, 1 };   /* [1, 1, 2, 4]: the first NaN of each window wins */
    dg_tensor *x = dg_from_data(DG_SHAPE(1, 1, 2, 4), DG_F32, w);
    dg_set_requires_grad(x, true);
    dg_pool2d_params plp9 = dg_pool2d_default_params();
    plp9.kernel[0] = plp9.kernel[1] = 2;
    plp9.stride[0] = plp9.stride[1] = 2;
    dg_tensor *y = dg_max_pool2d(x, plp9);
    float out[2];
    dg_to_host(y, out, sizeof out);
    cr_assert(isnan(out[0]) && isnan(out[1]), "NaN propagates: %g %g", out[0], out[1]);
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0);
    expect_values(dg_grad(x), (double[]){ 0, 0, 1, 0, 0, 1, 0, 0 }, 8, 0, "NaN takes the gradient");
    dg_scope_end(s);
}

/* The 3x3/stride-2/padding-1 fast paths (ResNet's stem pool) against a direct loop, on odd and
 * even sizes, with a NaN and with ties (values rounded to a few levels): values, and gradients
 * routed to the row-major first maximum of each window (NaN first), summed where windows overlap. */
Test(max_pool, three_by_three_stride_two_matches_a_direct_loop) {
    dg_scope *s = dg_scope_begin();
    /* the wide ones run the vectorised loops' bodies, not just their remainders */
    int sizes[6][2] = { { 7, 6 }, { 6, 7 }, { 2, 2 }, { 9, 9 }, { 13, 40 }, { 40, 33 } };
    for (int c = 0; c < 6; c++) {
        int H = sizes[c][0], W = sizes[c][1];
        dg_tensor *x = dg_randn(DG_SHAPE(2, 3, H, W), DG_F32);
        float *xv = dg_data(x);
        for (int i = 0; i < 6 * H * W; i++) xv[i] = roundf(xv[i] * 2) / 2;   /* ties */
        if (c == 0) xv[1 * H * W + 2 * W + 3] = NAN;
        if (c == 4) { xv[5 * H * W + 6 * W + 17] = NAN; xv[5 * H * W + 6 * W + 18] = NAN; }
        dg_set_requires_grad(x, true);
        dg_pool2d_params plp10 = dg_pool2d_default_params();
        plp10.kernel[0] = plp10.kernel[1] = 3;
        plp10.stride[0] = plp10.stride[1] = 2;
        plp10.padding[0] = plp10.padding[1] = 1;
        dg_tensor *y = dg_max_pool2d(x, plp10);
        cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
        const float *gv = dg_data(dg_grad(x));
        float *want = calloc((size_t)(6 * H * W), sizeof *want);
        int OH = (H - 1) / 2 + 1, OW = (W - 1) / 2 + 1;
        cr_assert(dg_dim(y, 2) == OH && dg_dim(y, 3) == OW);
        const float *yv = dg_data(y);
        for (int p = 0; p < 6; p++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    float m = -INFINITY, wm = 0;
                    bool nan = false;
                    int arg = -1;
                    for (int iy = 2 * oy - 1; iy <= 2 * oy + 1; iy++)
                        for (int ix = 2 * ox - 1; ix <= 2 * ox + 1; ix++) {
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            float v = xv[p * H * W + iy * W + ix];
                            if (isnan(v)) nan = true; else if (v > m) m = v;
                            /* the generic rule: row-major first maximum, the first NaN wins */
                            if (arg < 0 || v > wm || (isnan(v) && !isnan(wm))) { wm = v; arg = iy * W + ix; }
                        }
                    want[p * H * W + arg] += 1;
                    float got = yv[p * OH * OW + oy * OW + ox];
                    if (nan) cr_assert(isnan(got), "%dx%d plane %d (%d,%d): NaN expected, got %g", H, W, p, oy, ox, got);
                    else cr_assert_eq(got, m, "%dx%d plane %d (%d,%d): %g vs %g", H, W, p, oy, ox, got, m);
                }
        for (int i = 0; i < 6 * H * W; i++) cr_assert_eq(gv[i], want[i], "%dx%d grad[%d]: %g vs %g", H, W, i, gv[i], want[i]);
        free(want);
    }
    dg_scope_end(s);
}

Test(avg_pool, forward_hand_values) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_reshape(dg_arange(1, 10, 1, DG_F64), DG_SHAPE(1, 1, 3, 3));
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = 2;
    p.stride[0] = p.stride[1] = 1;
    p.padding[0] = p.padding[1] = 1;
    /* exclusive (default): divide by the real elements covered */
    expect_values(dg_avg_pool2d(x, p), (double[]){1, 1.5, 2.5, 3, 2.5, 3, 4, 4.5, 5.5, 6, 7, 7.5, 7, 7.5, 8.5, 9}, 16, 1e-12, "exclusive");
    p.count_include_pad = true;
    expect_values(dg_avg_pool2d(x, p), (double[]){0.25, 0.75, 1.25, 0.75, 1.25, 3, 4, 2.25, 2.75, 6, 7, 3.75, 1.75, 3.75, 4.25, 2.25},
                  16, 1e-12, "count_include_pad");
    /* no padding, default stride = kernel */
    dg_tensor *x4 = dg_reshape(dg_arange(0, 16, 1, DG_F32), DG_SHAPE(1, 1, 4, 4));
    dg_pool2d_params plp11 = dg_pool2d_default_params();
    plp11.kernel[0] = plp11.kernel[1] = 2;
    expect_values(dg_avg_pool2d(x4, plp11), (double[]){2.5, 4.5, 10.5, 12.5}, 4, 1e-6, "k2");
    /* ceil_mode: the last window is clipped to the padded input (H + pad) for the divisor */
    dg_tensor *ones = dg_ones(DG_SHAPE(1, 1, 4, 4), DG_F64);
    dg_pool2d_params c = dg_pool2d_default_params();
    c.kernel[0] = c.kernel[1] = 3;
    c.stride[0] = c.stride[1] = 2;
    c.padding[0] = c.padding[1] = 1;
    c.ceil_mode = true;
    c.count_include_pad = true;
    dg_tensor *y = dg_avg_pool2d(ones, c);
    expect_shape(y, DG_SHAPE(1, 1, 3, 3), "ceil include_pad");
    expect_values(y, (double[]){4. / 9, 6. / 9, 2. / 6, 6. / 9, 1, 3. / 6, 2. / 6, 3. / 6, 1. / 4}, 9, 1e-12, "ceil include_pad");
    c.count_include_pad = false;
    expect_values(dg_avg_pool2d(ones, c), (double[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, 9, 1e-12, "ceil exclusive");
    dg_scope_end(s);
}

/* PyTorch drops a ceil_mode window that would start inside the padding. */
Test(avg_pool, ceil_mode_drops_window_in_padding) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(1, 1, 5, 5), DG_F64);
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = 2;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0] = p.padding[1] = 1;
    p.ceil_mode = true;
    expect_shape(dg_avg_pool2d(x, p), DG_SHAPE(1, 1, 3, 3), "dropped window");     /* ceil gives 4, the 4th starts at 5 */
    expect_shape(dg_max_pool2d(x, p), DG_SHAPE(1, 1, 3, 3), "dropped window max");
    p.ceil_mode = false;
    expect_shape(dg_avg_pool2d(x, p), DG_SHAPE(1, 1, 3, 3), "floor");
    dg_pool2d_params plp12 = dg_pool2d_default_params();
    plp12.kernel[0] = plp12.kernel[1] = 3;
    plp12.stride[0] = plp12.stride[1] = 2;
    plp12.ceil_mode = true;
    expect_shape(dg_avg_pool2d(dg_ones(DG_SHAPE(1, 1, 6, 6), DG_F64), plp12), DG_SHAPE(1, 1, 3, 3), "kept partial window");
    dg_scope_end(s);
}

Test(avg_pool, grad) {
    dg_pool2d_params cases[] = {   /* the fields that differ from the defaults (over_defaults) */
        { .kernel = {2, 2}, .stride = {DG_STRIDE_KERNEL, DG_STRIDE_KERNEL} },
        { .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1} },
        { .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = true },
        { .kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .ceil_mode = true },
        { .kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .ceil_mode = true, .count_include_pad = true },
        { .kernel = {2, 3}, .stride = {2, 2}, .ceil_mode = true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *in[1] = { gc_input(DG_SHAPE(2, 2, 5, 6), -1, 1) };
        dg_pool2d_params p = over_defaults(cases[i]);
        gradcheck("avg_pool2d", avgpool_fn, in, 1, &p, 1e-6);
        dg_scope_end(s);
    }
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(adaptive_avg_pool, forward_hand_values) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_reshape(dg_arange(0, 35, 1, DG_F64), DG_SHAPE(1, 1, 5, 7));
    /* rows {0,1} {1,2,3} {3,4}; cols {0..3} {3..6}; mean of 7r+c is 7*mean(r) + mean(c) */
    dg_tensor *y = dg_adaptive_avg_pool2d(x, 3, 2);
    expect_shape(y, DG_SHAPE(1, 1, 3, 2), "5x7 -> 3x2");
    expect_values(y, (double[]){5, 8, 15.5, 18.5, 26, 29}, 6, 1e-12, "5x7 -> 3x2");
    expect_values(dg_adaptive_avg_pool2d(x, 1, 1), (double[]){17}, 1, 1e-12, "global");
    /* output larger than input repeats elements */
    dg_tensor *x2 = dg_reshape(dg_arange(0, 4, 1, DG_F32), DG_SHAPE(1, 1, 2, 2));
    expect_values(dg_adaptive_avg_pool2d(x2, 3, 3), (double[]){0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3}, 9, 1e-6, "2x2 -> 3x3");
    dg_scope_end(s);
}

Test(adaptive_avg_pool, grad) {
    int sizes[][2] = { {3, 2}, {1, 1}, {5, 7}, {4, 3}, {6, 8} };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *in[1] = { gc_input(DG_SHAPE(2, 2, 5, 7), -1, 1) };
        gradcheck("adaptive_avg_pool2d", adaptive_fn, in, 1, sizes[i], 1e-6);
        dg_scope_end(s);
    }
}

Test(pool, f32_matches_f64) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x64 = dg_uniform(DG_SHAPE(4, 3, 11, 9), -1, 1, DG_F64), *x32 = dg_cast(x64, DG_F32);
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = 3;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0] = p.padding[1] = 1;
    p.ceil_mode = true;
    cr_assert(max_rel_err(dg_max_pool2d(x32, p), dg_max_pool2d(x64, p), 1.0) < 1e-6);
    cr_assert(max_rel_err(dg_avg_pool2d(x32, p), dg_avg_pool2d(x64, p), 1.0) < 1e-6);
    cr_assert(max_rel_err(dg_adaptive_avg_pool2d(x32, 4, 5), dg_adaptive_avg_pool2d(x64, 4, 5), 1.0) < 1e-6);
    dg_scope_end(s);
}

Test(pool, bad_input) {
    dg_clear_error();
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_zeros(DG_SHAPE(1, 2, 4, 4), DG_F32);
    dg_pool2d_params k2 = dg_pool2d_default_params();
    k2.kernel[0] = k2.kernel[1] = 2;
    const char *names[2] = { "max_pool2d", "avg_pool2d" };
    dg_tensor *(*fns[2])(const dg_tensor *, dg_pool2d_params) = { dg_max_pool2d, dg_avg_pool2d };
    for (int i = 0; i < 2; i++) {
        cr_assert_not_null(fns[i](x, k2), "%s: valid call fails: %s", names[i], dg_last_error());
        EXPECT_FAIL(fns[i](NULL, k2), names[i]);
        EXPECT_FAIL(fns[i](dg_zeros(DG_SHAPE(2, 4, 4), DG_F32), k2), names[i]);                      /* 3-D */
        EXPECT_FAIL(fns[i](dg_zeros(DG_SHAPE(1, 2, 4, 4), DG_I32), k2), names[i]);                   /* int dtype */
        dg_pool2d_params plp13 = dg_pool2d_default_params();
        plp13.kernel[0] = 0;
        plp13.kernel[1] = 2;
        EXPECT_FAIL(fns[i](x, plp13), names[i]);                    /* zero kernel */
        dg_pool2d_params plp14 = dg_pool2d_default_params();
        plp14.kernel[0] = 5;
        plp14.kernel[1] = 2;
        EXPECT_FAIL(fns[i](x, plp14), names[i]);                    /* output <= 0 */
        dg_pool2d_params plp15 = dg_pool2d_default_params();
        plp15.kernel[0] = plp15.kernel[1] = 2;
        plp15.padding[0] = 2;
        EXPECT_FAIL(fns[i](x, plp15), names[i]); /* pad > k/2 */
        dg_pool2d_params plp16 = dg_pool2d_default_params();
        plp16.kernel[0] = plp16.kernel[1] = 2;
        plp16.stride[0] = -2;   /* negative and not DG_STRIDE_KERNEL */
        plp16.stride[1] = 1;
        EXPECT_FAIL(fns[i](x, plp16), names[i]);
    }
    cr_assert_not_null(dg_adaptive_avg_pool2d(x, 2, 3));
    EXPECT_FAIL(dg_adaptive_avg_pool2d(NULL, 2, 2), "adaptive_avg_pool2d");
    EXPECT_FAIL(dg_adaptive_avg_pool2d(x, 0, 2), "adaptive_avg_pool2d");
    EXPECT_FAIL(dg_adaptive_avg_pool2d(x, 2, -1), "adaptive_avg_pool2d");
    EXPECT_FAIL(dg_adaptive_avg_pool2d(dg_zeros(DG_SHAPE(2, 4, 4), DG_F32), 2, 2), "adaptive_avg_pool2d");
    EXPECT_FAIL(dg_adaptive_avg_pool2d(dg_zeros(DG_SHAPE(1, 2, 4, 4), DG_I64), 2, 2), "adaptive_avg_pool2d");
    EXPECT_FAIL(dg_adaptive_avg_pool2d(dg_empty(DG_SHAPE(1, 2, 0, 4), DG_F32), 2, 2), "adaptive_avg_pool2d");
    dg_scope_end(s);
}
