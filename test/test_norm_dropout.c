/* test/test_norm_dropout.c — batch_norm and dropout: hand-computed forward values, running
 * statistics, f64 finite-difference gradients in train and eval mode, f32 against f64, dropout
 * mask statistics, and bad input (NULL plus an error naming the op). */
#include "test_util.h"
#include "test_layer_ops.h"

/* ================= batch_norm ================= */

typedef struct { bool training; dg_tensor *rm, *rv; } bn_ctx;
static dg_tensor *bn_fn(dg_tensor *const *in, void *ctx) {
    bn_ctx *c = ctx;
    dg_batch_norm_params bnp = dg_batch_norm_default_params();
    bnp.training = c->training;
    return dg_batch_norm(in[0], c->rm, c->rv, in[1], in[2], bnp);
}

/* Per-channel mean and biased variance of host data laid out [n, c, inner]. */
static void channel_stats(const double *x, int64_t n, int64_t c, int64_t inner, int64_t ch, double *mean, double *var) {
    double s = 0, ss = 0, m = (double)(n * inner);
    for (int64_t i = 0; i < n; i++) for (int64_t j = 0; j < inner; j++) s += x[(i * c + ch) * inner + j];
    *mean = s / m;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < inner; j++) { double d = x[(i * c + ch) * inner + j] - *mean; ss += d * d; }
    *var = ss / m;
}

Test(batch_norm, train_values_and_running_stats) {
    dg_scope *s = dg_scope_begin();
    double xv[8] = {1, 2, 3, 4, 5, 7, 11, -3};
    /* channel 0: 1,3,5,11 -> mean 5, biased var 14, unbiased 56/3; channel 1: 2,4,7,-3 -> 2.5, 13.25, 53/3 */
    dg_tensor *x = f64_of(DG_SHAPE(4, 2), xv);
    dg_tensor *w = f64_of(DG_SHAPE(2), (double[]){2, -1}), *b = f64_of(DG_SHAPE(2), (double[]){0.5, 1});
    dg_tensor *rm = dg_zeros(DG_SHAPE(2), DG_F64), *rv = dg_ones(DG_SHAPE(2), DG_F64);
    dg_batch_norm_params bnp2 = dg_batch_norm_default_params();
    bnp2.training = true;
    dg_tensor *y = dg_batch_norm(x, rm, rv, w, b, bnp2);
    double want[8], mu[2] = {5, 2.5}, var[2] = {14, 13.25}, wv[2] = {2, -1}, bv[2] = {0.5, 1};
    for (int i = 0; i < 8; i++) want[i] = (xv[i] - mu[i % 2]) / sqrt(var[i % 2] + 1e-5) * wv[i % 2] + bv[i % 2];
    expect_values(y, want, 8, 1e-12, "train y");
    /* momentum 0.1 (the default): running = 0.9 * running + 0.1 * batch, unbiased var */
    expect_values(rm, (double[]){0.5, 0.25}, 2, 1e-12, "running_mean step 1");
    expect_values(rv, (double[]){0.9 + 0.1 * 56. / 3, 0.9 + 0.1 * 53. / 3}, 2, 1e-10, "running_var step 1");
    /* a second step with momentum 0.5 on shifted data */
    dg_tensor *x2 = dg_add_scalar(x, 1.0);
    dg_batch_norm_params bnp3 = dg_batch_norm_default_params();
    bnp3.training = true;
    bnp3.momentum = 0.5;
    cr_assert_not_null(dg_batch_norm(x2, rm, rv, NULL, NULL, bnp3));
    expect_values(rm, (double[]){0.5 * 0.5 + 0.5 * 6, 0.5 * 0.25 + 0.5 * 3.5}, 2, 1e-12, "running_mean step 2");
    expect_values(rv, (double[]){0.5 * (0.9 + 0.1 * 56. / 3) + 0.5 * 56. / 3, 0.5 * (0.9 + 0.1 * 53. / 3) + 0.5 * 53. / 3},
                  2, 1e-10, "running_var step 2");
    /* eval uses the running stats and leaves them alone */
    dg_batch_norm_params bnp4 = dg_batch_norm_default_params();
    bnp4.eps = 1e-3;
    dg_tensor *ye = dg_batch_norm(x, rm, rv, w, b, bnp4);
    double rmv[2], rvv[2];
    dg_to_host(rm, rmv, sizeof rmv);
    dg_to_host(rv, rvv, sizeof rvv);
    for (int i = 0; i < 8; i++) want[i] = (xv[i] - rmv[i % 2]) / sqrt(rvv[i % 2] + 1e-3) * wv[i % 2] + bv[i % 2];
    expect_values(ye, want, 8, 1e-12, "eval y");
    expect_values(rm, rmv, 2, 0, "eval keeps running_mean");
    dg_scope_end(s);
}

/* 4-D input in f32: statistics over N, H, W per channel, against host loops. */
Test(batch_norm, train_4d_f32_running_stats) {
    dg_scope *s = dg_scope_begin();
    int64_t n = 3, c = 4, inner = 5 * 6;
    dg_tensor *x64 = dg_normal(DG_SHAPE(3, 4, 5, 6), 2.0, 3.0, DG_F64);
    double *xv = malloc(sizeof(double) * (size_t)(n * c * inner));
    dg_to_host(x64, xv, sizeof(double) * (size_t)(n * c * inner));
    dg_tensor *rm = dg_full(DG_SHAPE(4), 0.5, DG_F32), *rv = dg_full(DG_SHAPE(4), 2.0, DG_F32);
    dg_batch_norm_params bnp5 = dg_batch_norm_default_params();
    bnp5.training = true;
    bnp5.momentum = 0.3;
    dg_tensor *y = dg_batch_norm(dg_cast(x64, DG_F32), rm, rv, NULL, NULL, bnp5);
    cr_assert_not_null(y, "%s", dg_last_error());
    double wm[4], wv[4];
    double *wy = malloc(sizeof(double) * (size_t)(n * c * inner));
    for (int64_t ch = 0; ch < c; ch++) {
        double mu, var;
        channel_stats(xv, n, c, inner, ch, &mu, &var);
        wm[ch] = 0.7 * 0.5 + 0.3 * mu;
        wv[ch] = 0.7 * 2.0 + 0.3 * var * (double)(n * inner) / (double)(n * inner - 1);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < inner; j++) {
                int64_t k = (i * c + ch) * inner + j;
                wy[k] = (xv[k] - mu) / sqrt(var + 1e-5);
            }
    }
    expect_values(rm, wm, 4, 1e-5, "running_mean 4d");
    expect_values(rv, wv, 4, 1e-5, "running_var 4d");
    expect_values(y, wy, n * c * inner, 1e-5, "y 4d");
    free(xv);
    free(wy);
    dg_scope_end(s);
}

Test(batch_norm, grad_train) {
    dg_scope *s = dg_scope_begin();
    bn_ctx ctx = { .training = true };
    dg_tensor *in2[3] = { gc_input(DG_SHAPE(5, 3), -2, 2), gc_input(DG_SHAPE(3), 0.5, 1.5), gc_input(DG_SHAPE(3), -1, 1) };
    gradcheck("batch_norm train 2d", bn_fn, in2, 3, &ctx, 1e-5);
    dg_tensor *in4[3] = { gc_input(DG_SHAPE(2, 3, 3, 4), -2, 2), gc_input(DG_SHAPE(3), 0.5, 1.5), gc_input(DG_SHAPE(3), -1, 1) };
    gradcheck("batch_norm train 4d", bn_fn, in4, 3, &ctx, 1e-5);
    dg_tensor *in0[3] = { gc_input(DG_SHAPE(3, 2, 2, 2), -2, 2), NULL, NULL };
    gradcheck("batch_norm train no affine", bn_fn, in0, 3, &ctx, 1e-5);
    dg_tensor *in3[3] = { gc_input(DG_SHAPE(2, 2, 3), -2, 2), gc_input(DG_SHAPE(2), 0.5, 1.5), NULL };   /* [N, C, L] */
    gradcheck("batch_norm train 3d weight only", bn_fn, in3, 3, &ctx, 1e-5);
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* Eval: the running stats are constants, so the gradient is gy * w / sqrt(running_var + eps). */
Test(batch_norm, grad_eval) {
    dg_scope *s = dg_scope_begin();
    bn_ctx ctx = { .training = false, .rm = dg_uniform(DG_SHAPE(3), -1, 1, DG_F64), .rv = dg_uniform(DG_SHAPE(3), 0.5, 2, DG_F64) };
    dg_tensor *in[3] = { gc_input(DG_SHAPE(2, 3, 2, 3), -2, 2), gc_input(DG_SHAPE(3), 0.5, 1.5), gc_input(DG_SHAPE(3), -1, 1) };
    gradcheck("batch_norm eval", bn_fn, in, 3, &ctx, 1e-6);
    dg_tensor *inx[3] = { gc_input(DG_SHAPE(4, 3), -2, 2), NULL, NULL };
    gradcheck("batch_norm eval no affine", bn_fn, inx, 3, &ctx, 1e-6);
    dg_scope_end(s);
}

Test(batch_norm, f32_matches_f64) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x64 = dg_normal(DG_SHAPE(8, 5, 7, 7), 1.0, 2.0, DG_F64), *w64 = dg_uniform(DG_SHAPE(5), 0.5, 1.5, DG_F64);
    dg_tensor *b64 = dg_uniform(DG_SHAPE(5), -1, 1, DG_F64);
    dg_tensor *x32 = dg_cast(x64, DG_F32), *w32 = dg_cast(w64, DG_F32), *b32 = dg_cast(b64, DG_F32);
    dg_tensor *ts[6] = { x64, w64, b64, x32, w32, b32 };
    for (int i = 0; i < 6; i++) dg_set_requires_grad(ts[i], true);
    dg_batch_norm_params p = dg_batch_norm_default_params();
    p.training = true;
    dg_tensor *y64 = dg_batch_norm(x64, NULL, NULL, w64, b64, p), *y32 = dg_batch_norm(x32, NULL, NULL, w32, b32, p);
    cr_assert(max_rel_err(y32, y64, 1.0) < 1e-5);
    dg_tensor *wt = dg_uniform(dg_shape_of(y64), 0.5, 1.5, DG_F64);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y64, wt))), 0);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y32, dg_cast(wt, DG_F32)))), 0);
    for (int i = 0; i < 3; i++) {
        double e = max_rel_err(dg_grad(ts[i + 3]), dg_grad(ts[i]), 1.0);
        cr_assert(e < 1e-4, "f32 gradient %d differs from f64 by %g", i, e);
    }
    dg_scope_end(s);
}

Test(batch_norm, bad_input) {
    dg_clear_error();
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(4, 3, 2, 2), DG_F32), *c3 = dg_ones(DG_SHAPE(3), DG_F32);
    dg_batch_norm_params tr = dg_batch_norm_default_params(), ev = dg_batch_norm_default_params();
    tr.training = true;
    cr_assert_not_null(dg_batch_norm(x, dg_zeros(DG_SHAPE(3), DG_F32), dg_ones(DG_SHAPE(3), DG_F32), c3, c3, tr),
                       "valid call: %s", dg_last_error());
    EXPECT_FAIL(dg_batch_norm(NULL, NULL, NULL, NULL, NULL, tr), "batch_norm");
    EXPECT_FAIL(dg_batch_norm(dg_ones(DG_SHAPE(4), DG_F32), NULL, NULL, NULL, NULL, tr), "batch_norm");          /* 1-D */
    EXPECT_FAIL(dg_batch_norm(dg_ones(DG_SHAPE(4, 3), DG_I64), NULL, NULL, NULL, NULL, tr), "batch_norm");       /* int */
    EXPECT_FAIL(dg_batch_norm(x, NULL, NULL, dg_ones(DG_SHAPE(4), DG_F32), NULL, tr), "batch_norm");             /* weight [4] */
    EXPECT_FAIL(dg_batch_norm(x, NULL, NULL, NULL, dg_ones(DG_SHAPE(3, 1), DG_F32), tr), "batch_norm");          /* bias 2-D */
    EXPECT_FAIL(dg_batch_norm(x, NULL, NULL, dg_ones(DG_SHAPE(3), DG_F64), NULL, tr), "batch_norm");             /* dtype */
    EXPECT_FAIL(dg_batch_norm(x, c3, dg_ones(DG_SHAPE(2), DG_F32), NULL, NULL, tr), "batch_norm");               /* running_var [2] */
    EXPECT_FAIL(dg_batch_norm(x, c3, NULL, NULL, NULL, tr), "batch_norm");                                       /* only one stat */
    EXPECT_FAIL(dg_batch_norm(x, NULL, NULL, NULL, NULL, ev), "batch_norm");                                     /* eval, no stats */
    EXPECT_FAIL(dg_batch_norm(dg_ones(DG_SHAPE(1, 3), DG_F32), NULL, NULL, NULL, NULL, tr), "batch_norm");       /* 1 value/channel */
    dg_batch_norm_params bnp6 = dg_batch_norm_default_params();
    bnp6.training = true;
    bnp6.momentum = 1.5;
    EXPECT_FAIL(dg_batch_norm(x, NULL, NULL, NULL, NULL, bnp6), "batch_norm");
    dg_batch_norm_params bnp7 = dg_batch_norm_default_params();
    bnp7.training = true;
    bnp7.eps = -1;
    EXPECT_FAIL(dg_batch_norm(x, NULL, NULL, NULL, NULL, bnp7), "batch_norm");
    dg_scope_end(s);
}

/* ================= dropout ================= */

Test(dropout, mask_statistics_and_scale) {
    dg_manual_seed(1234);
    dg_scope *s = dg_scope_begin();
    int64_t n = 40000;
    dg_tensor *y = dg_dropout(dg_ones(DG_SHAPE(n), DG_F32), 0.3, true);
    cr_assert_not_null(y, "%s", dg_last_error());
    const float *v = dg_data(y);
    int64_t zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] == 0) zeros++;
        else cr_assert_float_eq(v[i], 1.0f / 0.7f, 1e-6, "kept element %lld is %g", (long long)i, v[i]);
    }
    double frac = (double)zeros / (double)n;
    cr_assert(fabs(frac - 0.3) < 0.015, "dropped fraction %g, want 0.3", frac);   /* ~6.5 sigma */
    /* the expectation is preserved */
    cr_assert(fabs(dg_item(dg_mean_all(y)) - 1.0) < 0.03);
    dg_scope_end(s);
}

Test(dropout, deterministic_for_a_seed) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(1000), DG_F64);
    dg_manual_seed(7);
    dg_tensor *a = dg_dropout(x, 0.5, true), *b = dg_dropout(x, 0.5, true);
    dg_manual_seed(7);
    dg_tensor *c = dg_dropout(x, 0.5, true);
    cr_assert_eq(memcmp(dg_data(a), dg_data(c), 8000), 0, "same seed, same mask");
    cr_assert_neq(memcmp(dg_data(a), dg_data(b), 8000), 0, "the stream advances");
    dg_scope_end(s);
}

Test(dropout, gradient_is_mask_times_scale) {
    dg_manual_seed(99);
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = gc_input(DG_SHAPE(30, 40), 0.5, 1.5);
    dg_tensor *y = dg_dropout(dg_transpose(x, 0, 1), 0.4, true);   /* a strided input works too */
    cr_assert_not_null(y, "%s", dg_last_error());
    cr_assert_str_eq(dg_grad_fn_name(y), "dropout");
    dg_tensor *w = dg_uniform(dg_shape_of(y), -1, 1, DG_F64);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y, w))), 0, "%s", dg_last_error());
    dg_tensor *g = dg_grad(x);
    int64_t kept = 0;
    for (int64_t i = 0; i < 30; i++)
        for (int64_t j = 0; j < 40; j++) {
            double yv = dg_get(y, (int64_t[]){j, i}), xv = dg_get(x, (int64_t[]){i, j}), wv = dg_get(w, (int64_t[]){j, i});
            double mask = yv == 0 ? 0 : 1.0 / 0.6;
            if (yv != 0) { kept++; cr_assert(fabs(yv - xv / 0.6) < 1e-12, "kept value scaled by 1/(1-p)"); }
            cr_assert(fabs(dg_get(g, (int64_t[]){i, j}) - wv * mask) < 1e-12, "grad at (%lld,%lld)", (long long)i, (long long)j);
        }
    cr_assert(kept > 600 && kept < 840, "kept %lld of 1200", (long long)kept);
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(dropout, eval_and_p0_are_identity_p1_zeros) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = gc_input(DG_SHAPE(4, 5), -1, 1);
    dg_tensor *ye = dg_dropout(x, 0.5, false), *y0 = dg_dropout(x, 0.0, true), *y1 = dg_dropout(x, 1.0, true);
    cr_assert(ye && y0 && y1, "%s", dg_last_error());
    cr_assert(max_rel_err(ye, x, 1.0) == 0 && max_rel_err(y0, x, 1.0) == 0, "identity");
    cr_assert_neq(dg_data(ye), dg_data(x), "a new tensor, not an alias");
    cr_assert_str_eq(dg_grad_fn_name(ye), "dropout");
    cr_assert_eq(dg_item(dg_sum_all(dg_abs(y1))), 0.0, "p = 1 gives zeros");
    cr_assert_eq(dg_backward(dg_add(dg_sum_all(ye), dg_add(dg_sum_all(y0), dg_sum_all(y1)))), 0);
    expect_values(dg_grad(x), (double[]){2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, 20, 0, "identity gradients");
    dg_scope_end(s);
}

Test(dropout, bad_input) {
    dg_clear_error();
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(3), DG_F32);
    EXPECT_FAIL(dg_dropout(NULL, 0.5, true), "dropout");
    EXPECT_FAIL(dg_dropout(x, -0.1, true), "dropout");
    EXPECT_FAIL(dg_dropout(x, 1.5, true), "dropout");
    EXPECT_FAIL(dg_dropout(x, NAN, true), "dropout");
    EXPECT_FAIL(dg_dropout(dg_ones(DG_SHAPE(3), DG_I64), 0.5, true), "dropout");
    dg_scope_end(s);
}

/* ================= batch_norm_relu ================= */

/* The fused op against batch_norm then relu, bit for bit: values, running statistics and the
 * gradients of x, weight and bias, in training and eval, for every float dtype the CPU stores
 * (half x with f32 parameters, as mixed precision runs it). The input has exact zeros after
 * normalisation (a channel of equal values), values around zero, and a NaN, so the mask's edge
 * cases are compared too. */
static void bn_relu_case(dg_dtype xdt, bool training) {
    dg_scope *s = dg_scope_begin();
    dg_dtype pdt = xdt == DG_F64 ? DG_F64 : DG_F32;
    dg_manual_seed(7);
    dg_tensor *x0 = dg_normal(DG_SHAPE(4, 3, 5, 6), 0.0, 1.0, DG_F64);
    double *xv = dg_data(x0);
    for (int i = 0; i < 4 * 30; i++) xv[(i / 30) * 90 + 30 + i % 30] = 2.5;   /* channel 1 constant: x - mean = 0 */
    xv[7] = NAN;                                                             /* channel 0 has a NaN */
    dg_tensor *xs[2], *ws[2], *bs[2], *rms[2], *rvs[2], *ys[2];
    for (int k = 0; k < 2; k++) {
        xs[k] = dg_cast(x0, xdt);
        ws[k] = dg_cast(f64_of(DG_SHAPE(3), (double[]){0.7, 1.3, 1.1}), pdt);
        bs[k] = dg_cast(f64_of(DG_SHAPE(3), (double[]){0.1, 0.0, -0.2}), pdt);
        rms[k] = dg_cast(f64_of(DG_SHAPE(3), (double[]){0.2, 2.5, -0.1}), pdt);   /* eval: channel 1 normalises to 0 */
        rvs[k] = dg_cast(f64_of(DG_SHAPE(3), (double[]){1.5, 0.5, 0.8}), pdt);
        dg_set_requires_grad(xs[k], true);
        dg_set_requires_grad(ws[k], true);
        dg_set_requires_grad(bs[k], true);
    }
    dg_batch_norm_params p = dg_batch_norm_default_params();
    p.training = training;
    ys[0] = dg_relu(dg_batch_norm(xs[0], rms[0], rvs[0], ws[0], bs[0], p));
    ys[1] = dg_batch_norm_relu(xs[1], rms[1], rvs[1], ws[1], bs[1], p);
    cr_assert(ys[0] && ys[1], "%s: %s", dg_dtype_name(xdt), dg_last_error());
    dg_tensor *gy = dg_cast(dg_normal(DG_SHAPE(4, 3, 5, 6), 0.0, 1.0, DG_F64), xdt);
    for (int k = 0; k < 2; k++) {
        /* from gy directly (a loss over y would carry y's NaN into every gradient) */
        dg_backward_params bp = dg_backward_default_params();
        bp.grad_output = gy;
        cr_assert_eq(dg_backward_ext(ys[k], bp), 0, "%s", dg_last_error());
    }
    size_t es = dg_dtype_size(xdt), ps = dg_dtype_size(pdt);
    const char *what = training ? "train" : "eval";
    cr_expect(memcmp(dg_data(ys[0]), dg_data(ys[1]), 360 * es) == 0, "%s %s: y differs", dg_dtype_name(xdt), what);
    cr_expect(memcmp(dg_data(rms[0]), dg_data(rms[1]), 3 * ps) == 0 && memcmp(dg_data(rvs[0]), dg_data(rvs[1]), 3 * ps) == 0,
              "%s %s: running stats differ", dg_dtype_name(xdt), what);
    const dg_tensor *pairs[3][2] = { { xs[0], xs[1] }, { ws[0], ws[1] }, { bs[0], bs[1] } };
    const char *names[3] = { "x", "weight", "bias" };
    for (int i = 0; i < 3; i++) {
        const dg_tensor *g0 = dg_grad(pairs[i][0]), *g1 = dg_grad(pairs[i][1]);
        cr_assert(g0 && g1, "%s %s: no grad for %s", dg_dtype_name(xdt), what, names[i]);
        cr_expect(memcmp(dg_data(g0), dg_data(g1), (size_t)dg_numel(g0) * dg_dtype_size(dg_dtype_of(g0))) == 0,
                  "%s %s: grad of %s differs", dg_dtype_name(xdt), what, names[i]);
    }
    /* the fused output really is relu'd: no negative value anywhere */
    dg_tensor *y64 = dg_cast(ys[1], DG_F64);
    const double *yv = dg_data(y64);
    int neg = 0, zeros = 0;
    for (int i = 0; i < 360; i++) { neg += yv[i] < 0; zeros += yv[i] == 0; }
    cr_expect(neg == 0 && zeros > 30, "%s %s: %d negative values, %d zeros", dg_dtype_name(xdt), what, neg, zeros);
    dg_scope_end(s);
}

Test(batch_norm_relu, equals_batch_norm_then_relu_bit_for_bit) {
    dg_dtype dts[4] = { DG_F32, DG_F64, DG_BF16, DG_F16 };
    for (int i = 0; i < 4; i++) {
        bn_relu_case(dts[i], true);
        bn_relu_case(dts[i], false);
    }
    cr_assert_eq(dg_live_tensors(), 0);
}

static dg_tensor *bn_relu_fn(dg_tensor *const *in, void *ctx) {
    bn_ctx *c = ctx;
    dg_batch_norm_params bnp = dg_batch_norm_default_params();
    bnp.training = c->training;
    return dg_batch_norm_relu(in[0], c->rm, c->rv, in[1], in[2], bnp);
}

Test(batch_norm_relu, grad_f64_finite_differences) {
    dg_scope *s = dg_scope_begin();
    bn_ctx ctx = { .training = true };
    dg_tensor *in[3] = { gc_input(DG_SHAPE(3, 2, 3, 3), -2, 2), gc_input(DG_SHAPE(2), 0.5, 1.5), gc_input(DG_SHAPE(2), -0.3, 0.3) };
    gradcheck("batch_norm_relu train", bn_relu_fn, in, 3, &ctx, 1e-5);
    bn_ctx ev = { .training = false, .rm = dg_uniform(DG_SHAPE(2), -1, 1, DG_F64), .rv = dg_uniform(DG_SHAPE(2), 0.5, 2, DG_F64) };
    gradcheck("batch_norm_relu eval", bn_relu_fn, in, 3, &ev, 1e-6);
    dg_scope_end(s);
}

Test(batch_norm_relu, bad_input_names_the_op) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_zeros(DG_SHAPE(2, 3, 4), DG_F32), *w = dg_ones(DG_SHAPE(4), DG_F32);
    dg_batch_norm_params p = dg_batch_norm_default_params();
    p.training = true;
    cr_expect_null(dg_batch_norm_relu(x, NULL, NULL, w, NULL, p));
    expect_error_contains("bn_relu weight", "batch_norm_relu: weight must be [3]", "[2, 3, 4]");
    dg_scope_end(s);
}
