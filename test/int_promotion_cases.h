/* test/int_promotion_cases.h — integer arithmetic and PyTorch's type promotion, as one function
 * run on a device: test/test_promotion.c runs it on the CPU, test/gpu/test_gpu_edges.c on gpu:0.
 * Every expected dtype is what torch 1.13 gives for the same expression (checked with it when the
 * cases were written); values are worked out by hand. */
#ifndef DG_TEST_INT_PROMOTION_CASES_H
#define DG_TEST_INT_PROMOTION_CASES_H

#include <dygraph.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline void ip_expect(const char *what, const dg_tensor *t, dg_dtype dt, const double *want, int n) {
    cr_assert(t, "%s: failed: %s", what, dg_last_error());
    cr_expect_eq(dg_dtype_of(t), dt, "%s: dtype %s, torch gives %s", what, dg_dtype_name(dg_dtype_of(t)), dg_dtype_name(dt));
    cr_assert_eq(dg_numel(t), n, "%s: %lld elements", what, (long long)dg_numel(t));
    dg_scope *s = dg_scope_begin();
    dg_tensor *h = dg_to_device(dg_cast(t, DG_F64), dg_cpu());
    for (int i = 0; i < n; i++)
        cr_expect(((const double *)dg_data(h))[i] == want[i], "%s[%d]: %.17g, want %.17g", what, i, ((const double *)dg_data(h))[i], want[i]);
    dg_scope_end(s);
}
#define IP_EXPECT(what, t, dt, ...) ip_expect(what, t, dt, (const double[]){ __VA_ARGS__ }, (int)(sizeof((const double[]){ __VA_ARGS__ }) / sizeof(double)))

/* Runs every case with tensors made on `dev`. */
static inline void ip_all_cases(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *i32 = dg_to_device(dg_from_data(DG_SHAPE(3), DG_I32, (int32_t[]){ 7, -3, 2 }), dev);
    dg_tensor *i64 = dg_to_device(dg_from_data(DG_SHAPE(3), DG_I64, (int64_t[]){ 2, 5, -4 }), dev);
    dg_tensor *f32 = dg_to_device(dg_from_data(DG_SHAPE(3), DG_F32, (float[]){ 0.5f, 1.5f, -2.0f }), dev);
    dg_tensor *f64 = dg_to_device(dg_from_data(DG_SHAPE(3), DG_F64, (double[]){ 0.25, 2.0, 4.0 }), dev);
    dg_tensor *f64_0d = dg_to_device(dg_scalar(2.5, DG_F64), dev);
    dg_tensor *i64_0d = dg_to_device(dg_scalar(3, DG_I64), dev);
    cr_assert(i32 && i64 && f32 && f64 && f64_0d && i64_0d, "%s", dg_last_error());

    IP_EXPECT("i32 + i32", dg_add(i32, i32), DG_I32, 14, -6, 4);
    dg_tensor *i32b = dg_to_device(dg_from_data(DG_SHAPE(3), DG_I32, (int32_t[]){ 1, 4, -6 }), dev);
    IP_EXPECT("i32 - i32", dg_sub(i32, i32b), DG_I32, 6, -7, 8);
    IP_EXPECT("maximum i32, i32", dg_maximum(i32, i32b), DG_I32, 7, 4, 2);
    IP_EXPECT("minimum i32, i32", dg_minimum(i32, i32b), DG_I32, 1, -3, -6);
    IP_EXPECT("i32 + i64", dg_add(i32, i64), DG_I64, 9, 2, -2);
    IP_EXPECT("i32 - i64", dg_sub(i32, i64), DG_I64, 5, -8, 6);
    IP_EXPECT("i32 * i64", dg_mul(i32, i64), DG_I64, 14, -15, -8);
    IP_EXPECT("maximum i32, i64", dg_maximum(i32, i64), DG_I64, 7, 5, 2);
    IP_EXPECT("minimum i32, i64", dg_minimum(i32, i64), DG_I64, 2, -3, -4);
    IP_EXPECT("i32 / i32 (true division)", dg_div(i32, dg_add(i32, i32)), DG_F32, 0.5, 0.5, 0.5);
    IP_EXPECT("i64 / i32", dg_div(i64, i32), DG_F32, (double)(2.0f / 7.0f), (double)(5.0f / -3.0f), -2);
    IP_EXPECT("i64 + f32", dg_add(i64, f32), DG_F32, 2.5, 6.5, -6);
    IP_EXPECT("f32 + f64", dg_add(f32, f64), DG_F64, 0.75, 3.5, 2);
    IP_EXPECT("f32 + 0-d f64 (the dimensioned float wins)", dg_add(f32, f64_0d), DG_F32, 3, 4, 0.5);
    IP_EXPECT("i64 + 0-d f64 (a higher category wins)", dg_mul(i64, f64_0d), DG_F64, 5, 12.5, -10);
    IP_EXPECT("i32 + 0-d i64 (the dimensioned int wins)", dg_add(i32, i64_0d), DG_I32, 10, 0, 5);
    IP_EXPECT("i32 broadcast [3,1] * [3]", dg_mul(dg_reshape(i32, DG_SHAPE(3, 1)), i32), DG_I32, 49, -21, 14, -21, 9, -6, 14, -6, 4);
    IP_EXPECT("i64 * 3", dg_mul_scalar(i64, 3), DG_I64, 6, 15, -12);
    IP_EXPECT("i64 + -1", dg_add_scalar(i64, -1), DG_I64, 1, 4, -5);
    IP_EXPECT("10 - i32", dg_rsub_scalar(i32, 10), DG_I32, 3, 13, 8);
    IP_EXPECT("i64 * 2.5", dg_mul_scalar(i64, 2.5), DG_F32, 5, 12.5, -10);
    IP_EXPECT("i64 / 2", dg_div_scalar(i64, 2), DG_F32, 1, 2.5, -2);
    IP_EXPECT("-i32", dg_neg(i32), DG_I32, -7, 3, -2);
    IP_EXPECT("abs i64", dg_abs(i64), DG_I64, 2, 5, 4);
    IP_EXPECT("sqrt i64 of squares", dg_sqrt(dg_mul(i64, i64)), DG_F32, 2, 5, 4);
    IP_EXPECT("sum i32 (int64, torch's)", dg_sum_all(i32), DG_I64, 6);
    IP_EXPECT("max i32 axis 0", dg_max(i32, (int[]){ 0 }, 1, false), DG_I32, 7);
    /* wrapping, as torch's int32 */
    dg_tensor *big = dg_to_device(dg_from_data(DG_SHAPE(2), DG_I32, (int32_t[]){ INT32_MAX, INT32_MIN }), dev);
    IP_EXPECT("i32 max + 1 wraps", dg_add_scalar(big, 1), DG_I32, (double)INT32_MIN, (double)INT32_MIN + 1);
    dg_tensor *big64 = dg_to_device(dg_from_data(DG_SHAPE(1), DG_I64, (int64_t[]){ (int64_t)1 << 60 }), dev);
    dg_tensor *sq = dg_mul(big64, dg_to_device(dg_scalar(8, DG_I64), dev));   /* 2^63 wraps to INT64_MIN */
    cr_assert(sq, "%s", dg_last_error());
    int64_t got = 0;
    cr_assert_eq(dg_to_host(sq, &got, sizeof got), 0, "%s", dg_last_error());
    cr_expect_eq(got, INT64_MIN, "2^60 * 8 in int64: %lld", (long long)got);

    /* refused with the op and dtypes named */
    dg_clear_error();
    cr_expect_null(dg_pow(i64, i64));
    cr_expect(strstr(dg_last_error(), "pow") && strstr(dg_last_error(), "int64"), "%s", dg_last_error());
    dg_clear_error();
    cr_expect_null(dg_relu(i64));
    cr_expect(strstr(dg_last_error(), "relu") && strstr(dg_last_error(), "int64"), "%s", dg_last_error());
    dg_clear_error();
    cr_expect_null(dg_mean_all(i32));
    cr_expect(strstr(dg_last_error(), "mean"), "%s", dg_last_error());
    dg_tensor *mask = dg_greater(f32, dg_zeros_like(f32));
    dg_clear_error();
    cr_expect_null(dg_add(mask, mask));
    cr_expect(strstr(dg_last_error(), "bool"), "%s", dg_last_error());

    /* a float32 leaf in a float64 expression: its gradient comes back in float32 */
    dg_tensor *leaf = dg_to_device(dg_from_data(DG_SHAPE(3), DG_F32, (float[]){ 1, 2, 3 }), dev);
    cr_assert_eq(dg_set_requires_grad(leaf, true), 0, "%s", dg_last_error());
    dg_tensor *y = dg_mul(leaf, f64);
    cr_assert(y && dg_dtype_of(y) == DG_F64, "%s", dg_last_error());
    cr_assert_eq(dg_backward(dg_sum_all(dg_add(y, i64))), 0, "%s", dg_last_error());
    IP_EXPECT("grad of f32 leaf through f64", dg_grad(leaf), DG_F32, 0.25, 2, 4);
    dg_scope_end(s);
}

#endif
