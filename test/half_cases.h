/* test/half_cases.h — float16 / bfloat16 tensors on one device, as a function: test/test_half.c
 * runs it on the CPU, the GPU suite on gpu:0 (under the CUDA emulator in `make test`). The cast
 * bit patterns are what torch 1.13 gives for the same float32 values; every other expectation
 * is "the f32 op on the widened inputs, rounded once", with the tolerance of one rounding. */
#ifndef DG_TEST_HALF_CASES_H
#define DG_TEST_HALF_CASES_H

#include <dygraph.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* t (any dtype, any device) as f64 values on the host */
static inline void hc_values(const dg_tensor *t, double *out, int64_t n) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *h = dg_contiguous(dg_to_device(dg_cast(t, DG_F64), dg_cpu()));
    cr_assert(h, "%s", dg_last_error());
    cr_assert_eq(dg_numel(h), n);
    memcpy(out, dg_data(h), (size_t)n * sizeof(double));
    dg_scope_end(s);
}

/* max |got - want| / max(|want|, floor) over the elements */
static inline double hc_rel_err(const dg_tensor *got, const dg_tensor *want, double floor) {
    int64_t n = dg_numel(want);
    cr_assert_eq(dg_numel(got), n);
    double *a = malloc((size_t)n * sizeof(double)), *b = malloc((size_t)n * sizeof(double)), err = 0;
    hc_values(got, a, n);
    hc_values(want, b, n);
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / fmax(fabs(b[i]), floor);
        if (!(e <= err)) err = e;   /* NaN counts as the worst */
    }
    free(a); free(b);
    return err;
}

/* max |got - want| over max |want|: for sums with cancellation (gradients) */
static inline double hc_err_of_max(const dg_tensor *got, const dg_tensor *want) {
    int64_t n = dg_numel(want);
    double *b = malloc((size_t)n * sizeof(double)), m = 0;
    hc_values(want, b, n);
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(b[i]));
    free(b);
    return hc_rel_err(got, want, m);
}

/* One rounding to the type: 2^-8 relative for bf16 (8 significant bits), 2^-11 for f16. */
static inline double hc_ulp(dg_dtype dt) { return dt == DG_BF16 ? 0x1p-8 : 0x1p-11; }

static const float hc_cast_in[] = { 0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.0f, 65520.0f, 1e5f, 3e-8f, 6e-8f, 1e-7f,
                                    5.96e-8f, 1.00390625f, 1.01171875f, 1.00048828125f, 1.00146484375f,
                                    3.3895313892515355e38f, 3.39e38f, INFINITY, -INFINITY, 1e-40f, 0.1f, -0.3333333f };
static const uint16_t hc_cast_bf16[] = { 0x0000, 0x8000, 0x3f80, 0xc020, 0x4780, 0x4780, 0x4780, 0x47c3, 0x3301, 0x3381, 0x33d7,
                                         0x3380, 0x3f80, 0x3f82, 0x3f80, 0x3f80, 0x7f7f, 0x7f7f, 0x7f80, 0xff80, 0x0001, 0x3dcd, 0xbeab };
static const uint16_t hc_cast_f16[] = { 0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x7bff, 0x7c00, 0x7c00, 0x0001, 0x0001, 0x0002,
                                        0x0001, 0x3c04, 0x3c0c, 0x3c00, 0x3c02, 0x7c00, 0x7c00, 0x7c00, 0xfc00, 0x0000, 0x2e66, 0xb555 };

static inline void hc_casts(dg_device dev) {
    int n = (int)(sizeof hc_cast_in / sizeof *hc_cast_in);
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_to_device(dg_from_data(DG_SHAPE(n), DG_F32, hc_cast_in), dev);
    for (int k = 0; k < 2; k++) {
        dg_dtype dt = k ? DG_F16 : DG_BF16;
        const uint16_t *want = k ? hc_cast_f16 : hc_cast_bf16;
        dg_tensor *h = dg_to_device(dg_cast(x, dt), dg_cpu());
        cr_assert(h, "cast to %s: %s", dg_dtype_name(dt), dg_last_error());
        const uint16_t *bits = dg_data(h);
        for (int i = 0; i < n; i++)
            cr_expect_eq(bits[i], want[i], "%s(%.9g): 0x%04x, torch gives 0x%04x", dg_dtype_name(dt), (double)hc_cast_in[i], bits[i], want[i]);
        /* widening is exact: back to f32 and to half again gives the same bits */
        dg_tensor *again = dg_to_device(dg_cast(dg_cast(dg_to_device(h, dev), DG_F32), dt), dg_cpu());
        cr_expect(again && memcmp(dg_data(again), bits, (size_t)n * 2) == 0, "%s -> f32 -> %s changed bits", dg_dtype_name(dt), dg_dtype_name(dt));
        dg_tensor *nan = dg_to_device(dg_cast(dg_cast(dg_to_device(dg_full(DG_SHAPE(2), NAN, DG_F32), dev), dt), DG_F64), dg_cpu());
        cr_expect(nan && isnan(((double *)dg_data(nan))[0]), "%s NaN did not stay NaN", dg_dtype_name(dt));
        dg_tensor *f64 = dg_to_device(dg_cast(dg_cast(dg_to_device(dg_full(DG_SHAPE(2), 1.0 / 3.0, DG_F64), dev), dt), DG_F64), dg_cpu());
        cr_expect(f64 && fabs(((double *)dg_data(f64))[0] - 1.0 / 3.0) < hc_ulp(dt), "f64 -> %s", dg_dtype_name(dt));
    }
    dg_scope_end(s);
}

typedef dg_tensor *(*hc_unary)(const dg_tensor *);
typedef dg_tensor *(*hc_binary)(const dg_tensor *, const dg_tensor *);

static inline dg_tensor *hc_gelu(const dg_tensor *x) { return dg_gelu(x, false); }

/* Elementwise ops, reductions, softmax, matmul, conv, pooling and batch norm in dt against the
 * same op in f32 on the same (rounded) values. */
static inline void hc_ops(dg_device dev, dg_dtype dt) {
    dg_scope *s = dg_scope_begin();
    const char *dn = dg_dtype_name(dt);
    double u = hc_ulp(dt);
    dg_generator *g = dg_generator_new(7);
    dg_tensor *x32 = dg_to_device(dg_cast(dg_cast(dg_generator_randn(g, DG_SHAPE(4, 3, 9, 10), DG_F32), dt), DG_F32), dev);
    dg_tensor *y32 = dg_to_device(dg_cast(dg_cast(dg_generator_uniform(g, DG_SHAPE(1, 3, 1, 10), 0.5, 2, DG_F32), dt), DG_F32), dev);
    dg_tensor *x = dg_cast(x32, dt), *y = dg_cast(y32, dt);
    cr_assert(x && y, "%s", dg_last_error());
    cr_expect_eq(dg_dtype_of(x), dt);

    static const hc_unary un[] = { dg_relu, dg_sigmoid, dg_tanh, hc_gelu, dg_exp, dg_neg, dg_abs };
    static const char *un_name[] = { "relu", "sigmoid", "tanh", "gelu", "exp", "neg", "abs" };
    for (size_t i = 0; i < sizeof un / sizeof *un; i++) {
        dg_tensor *got = un[i](x);
        cr_assert(got, "%s %s: %s", un_name[i], dn, dg_last_error());
        cr_expect_eq(dg_dtype_of(got), dt, "%s keeps %s", un_name[i], dn);
        double e = hc_rel_err(got, un[i](x32), 1e-3);
        cr_expect(e <= u, "%s %s: relative error %g > one rounding %g", un_name[i], dn, e, u);
    }
    static const hc_binary bin[] = { dg_add, dg_sub, dg_mul, dg_div, dg_maximum };
    static const char *bin_name[] = { "add", "sub", "mul", "div", "maximum" };
    for (size_t i = 0; i < sizeof bin / sizeof *bin; i++) {   /* y broadcasts over N, H */
        dg_tensor *got = bin[i](x, y);
        cr_assert(got, "%s %s: %s", bin_name[i], dn, dg_last_error());
        double e = hc_rel_err(got, bin[i](x32, y32), 1e-2);
        cr_expect(e <= u, "%s %s: relative error %g", bin_name[i], dn, e);
    }
    /* promotion as torch's: with f32 the result is f32; f16 with bf16 is f32; a 0-d f32 does not widen */
    cr_expect_eq(dg_dtype_of(dg_add(x, x32)), DG_F32, "%s + f32 -> float32", dn);
    cr_expect_eq(dg_dtype_of(dg_mul(dg_cast(x, DG_F16), dg_cast(x, DG_BF16))), DG_F32, "f16 * bf16 -> float32");
    cr_expect_eq(dg_dtype_of(dg_mul(x, dg_to_device(dg_scalar(2, DG_F32), dev))), dt, "%s * 0-d f32 stays %s", dn, dn);

    /* reductions accumulate in f32: 4096 ones sum to 4096 (a bf16 accumulator stops at 256) */
    dg_tensor *ones = dg_to_device(dg_ones(DG_SHAPE(4096), dt), dev);
    double v;
    hc_values(dg_sum_all(ones), &v, 1);
    cr_expect_eq(v, 4096.0, "sum of 4096 %s ones: %g", dn, v);
    hc_values(dg_mean(ones, (int[]){ 0 }, 1, false), &v, 1);
    cr_expect_eq(v, 1.0, "mean of %s ones: %g", dn, v);
    double e = hc_rel_err(dg_softmax(x, -1), dg_softmax(x32, -1), 1e-3);
    cr_expect(e <= 2 * u, "softmax %s: %g", dn, e);
    dg_tensor *lbl = dg_to_device(dg_from_data(DG_SHAPE(4), DG_I64, (int64_t[]){ 1, 0, 8, 3 }), dev);
    dg_tensor *logits = dg_reshape(x, DG_SHAPE(4, 270)), *logits32 = dg_reshape(x32, DG_SHAPE(4, 270));
    e = hc_rel_err(dg_cross_entropy(logits, lbl), dg_cross_entropy(logits32, lbl), 1e-3);
    cr_expect(e <= 2 * u, "cross_entropy %s: %g", dn, e);

    /* matmul: 1000 products of ones is 1000 (f32 accumulation), and a random product is one rounding away */
    dg_tensor *mo = dg_matmul(dg_to_device(dg_ones(DG_SHAPE(2, 1000), dt), dev), dg_to_device(dg_ones(DG_SHAPE(1000, 3), dt), dev));
    cr_assert(mo, "matmul %s: %s", dn, dg_last_error());
    double mv[6];
    hc_values(mo, mv, 6);
    for (int i = 0; i < 6; i++) cr_expect_eq(mv[i], 1000.0, "matmul of %s ones: %g", dn, mv[i]);
    dg_tensor *a2 = dg_reshape(x, DG_SHAPE(36, 30)), *b2 = dg_transpose(dg_reshape(x, DG_SHAPE(36, 30)), 0, 1);
    dg_tensor *a32 = dg_reshape(x32, DG_SHAPE(36, 30)), *b32 = dg_transpose(dg_reshape(x32, DG_SHAPE(36, 30)), 0, 1);
    e = hc_rel_err(dg_matmul(a2, b2), dg_matmul(a32, b32), 1.0);
    cr_expect(e <= u, "matmul %s: %g", dn, e);

    /* convolution with gradients to f32 leaves through the casts (what autocast records) */
    dg_tensor *w32 = dg_to_device(dg_cast(dg_cast(dg_generator_randn(g, DG_SHAPE(16, 3, 3, 3), DG_F32), dt), DG_F32), dev);
    dg_set_requires_grad(w32, true);
    dg_conv2d_params cp = dg_conv2d_default_params();
    cp.padding[0] = cp.padding[1] = 1;
    dg_tensor *c = dg_conv2d(x, dg_cast(w32, dt), NULL, cp), *c32 = dg_conv2d(x32, w32, NULL, cp);
    cr_assert(c, "conv2d %s: %s", dn, dg_last_error());
    cr_expect_eq(dg_dtype_of(c), dt);
    e = hc_rel_err(c, c32, 1.0);
    cr_expect(e <= 2 * u, "conv2d %s: %g", dn, e);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(c, c))), 0, "%s", dg_last_error());
    dg_tensor *gw = dg_clone(dg_grad(w32));
    cr_expect_eq(dg_dtype_of(gw), DG_F32, "a f32 leaf gets its gradient in f32");
    dg_clear_grad(w32);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(c32, c32))), 0, "%s", dg_last_error());
    e = hc_err_of_max(gw, dg_grad(w32));
    cr_expect(e <= 4 * u, "conv2d %s weight gradient: %g of the largest", dn, e);

    /* pooling and batch norm: half input, f32 parameters and statistics */
    dg_pool2d_params pp = dg_pool2d_default_params();
    pp.kernel[0] = pp.kernel[1] = 2;
    e = hc_rel_err(dg_max_pool2d(x, pp), dg_max_pool2d(x32, pp), 1e-3);
    cr_expect(e == 0, "max_pool2d %s: %g", dn, e);
    pp.kernel[0] = pp.kernel[1] = 3;
    e = hc_rel_err(dg_avg_pool2d(x, pp), dg_avg_pool2d(x32, pp), 1e-2);
    cr_expect(e <= u, "avg_pool2d %s: %g", dn, e);
    dg_tensor *rm = dg_to_device(dg_zeros(DG_SHAPE(3), DG_F32), dev), *rv = dg_to_device(dg_ones(DG_SHAPE(3), DG_F32), dev);
    dg_tensor *rm32 = dg_to_device(dg_zeros(DG_SHAPE(3), DG_F32), dev), *rv32 = dg_to_device(dg_ones(DG_SHAPE(3), DG_F32), dev);
    dg_tensor *bw = dg_to_device(dg_full(DG_SHAPE(3), 1.5, DG_F32), dev), *bb = dg_to_device(dg_full(DG_SHAPE(3), 0.25, DG_F32), dev);
    dg_batch_norm_params bp = dg_batch_norm_default_params();
    bp.training = true;
    dg_tensor *bn = dg_batch_norm(x, rm, rv, bw, bb, bp);
    cr_assert(bn, "batch_norm %s with f32 parameters: %s", dn, dg_last_error());
    cr_expect_eq(dg_dtype_of(bn), dt);
    e = hc_rel_err(bn, dg_batch_norm(x32, rm32, rv32, bw, bb, bp), 1.0);
    cr_expect(e <= 2 * u, "batch_norm %s: %g", dn, e);
    cr_expect(hc_rel_err(rm, rm32, 1.0) < 1e-6 && hc_rel_err(rv, rv32, 1.0) < 1e-6, "running stats of a %s input, in f32", dn);
    dg_generator_free(g);
    dg_scope_end(s);
}

static inline void hc_all_cases(dg_device dev) {
    hc_casts(dev);
    hc_ops(dev, DG_BF16);
    hc_ops(dev, DG_F16);
}

#endif
