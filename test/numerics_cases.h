/* test/numerics_cases.h — results that must equal PyTorch 1.13's on inputs at the edges of the
 * dtypes and shapes (issue 30, item 8): int64 comparisons past 2^53, comparisons under the
 * arithmetic's type promotion, integer scalars outside the tensor's range or at 2^62 and beyond,
 * where with mixed dtypes, and the empty cases of group_norm, logsumexp, embedding's max_norm
 * and mean. One function per case, run on a device: test/test_numerics.c runs them on the CPU,
 * test/gpu/test_gpu_numerics.c on gpu:0. Every expected value was printed by torch 1.13 through
 * its public API; the expression is in the comment beside it. */
#ifndef DG_TEST_NUMERICS_CASES_H
#define DG_TEST_NUMERICS_CASES_H

#include <dygraph.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* n int64 values on dev */
static inline dg_tensor *nc_i64(dg_device dev, const int64_t *v, int64_t n) {
    return dg_to_device(dg_from_data(DG_SHAPE(n), DG_I64, v), dev);
}
#define NC_I64(dev, ...) nc_i64(dev, (const int64_t[]){ __VA_ARGS__ }, (int64_t)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)))
#define NC_I32(dev, ...) dg_to_device(dg_from_data(DG_SHAPE(sizeof((const int32_t[]){ __VA_ARGS__ }) / sizeof(int32_t)), DG_I32, \
                                                   (const int32_t[]){ __VA_ARGS__ }), dev)
#define NC_F32(dev, ...) dg_to_device(dg_from_data(DG_SHAPE(sizeof((const float[]){ __VA_ARGS__ }) / sizeof(float)), DG_F32, \
                                                   (const float[]){ __VA_ARGS__ }), dev)
#define NC_F64(dev, ...) dg_to_device(dg_from_data(DG_SHAPE(sizeof((const double[]){ __VA_ARGS__ }) / sizeof(double)), DG_F64, \
                                                   (const double[]){ __VA_ARGS__ }), dev)
#define NC_BOOL(dev, ...) dg_to_device(dg_from_data(DG_SHAPE(sizeof((const uint8_t[]){ __VA_ARGS__ }) / sizeof(uint8_t)), DG_BOOL, \
                                                    (const uint8_t[]){ __VA_ARGS__ }), dev)

/* t has dtype dt and the n elements want[] exactly, read in t's own dtype (an int64 is compared as
 * an int64, never through a double). */
static inline void nc_expect(const char *what, const dg_tensor *t, dg_dtype dt, const void *want, int64_t n) {
    cr_assert(t, "%s: failed: %s", what, dg_last_error());
    cr_expect_eq(dg_dtype_of(t), dt, "%s: dtype %s, torch gives %s", what, dg_dtype_name(dg_dtype_of(t)), dg_dtype_name(dt));
    cr_assert_eq(dg_numel(t), n, "%s: %lld elements, want %lld", what, (long long)dg_numel(t), (long long)n);
    if (dg_dtype_of(t) != dt || n == 0) return;
    unsigned char got[256];
    size_t nb = (size_t)n * dg_dtype_size(dt);
    cr_assert(nb <= sizeof got);
    dg_scope *s = dg_scope_begin();
    cr_assert_eq(dg_to_host(dg_contiguous(t), got, nb), 0, "%s: %s", what, dg_last_error());
    dg_scope_end(s);
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case DG_I64: cr_expect_eq(((int64_t *)got)[i], ((const int64_t *)want)[i], "%s[%lld]: %lld, torch gives %lld", what, (long long)i,
                                  (long long)((int64_t *)got)[i], (long long)((const int64_t *)want)[i]); break;
        case DG_I32: cr_expect_eq(((int32_t *)got)[i], ((const int32_t *)want)[i], "%s[%lld]: %d, torch gives %d", what, (long long)i,
                                  ((int32_t *)got)[i], ((const int32_t *)want)[i]); break;
        case DG_BOOL: cr_expect_eq(((uint8_t *)got)[i], ((const uint8_t *)want)[i], "%s[%lld]: %d, torch gives %d", what, (long long)i,
                                   ((uint8_t *)got)[i], ((const uint8_t *)want)[i]); break;
        case DG_F32: {
            float g = ((float *)got)[i], w = ((const float *)want)[i];
            cr_expect(g == w || (isnan(g) && isnan(w)), "%s[%lld]: %.9g, torch gives %.9g", what, (long long)i, g, w);
            break;
        }
        case DG_F64: {
            double g = ((double *)got)[i], w = ((const double *)want)[i];
            cr_expect(g == w || (isnan(g) && isnan(w)), "%s[%lld]: %.17g, torch gives %.17g", what, (long long)i, g, w);
            break;
        }
        default: cr_assert_fail("%s: dtype %s not handled", what, dg_dtype_name(dt));
        }
    }
}
#define NC_EXPECT(what, t, dt, ctype, ...) \
    nc_expect(what, t, dt, (const ctype[]){ __VA_ARGS__ }, (int64_t)(sizeof((const ctype[]){ __VA_ARGS__ }) / sizeof(ctype)))

/* t's shape is s */
static inline void nc_expect_shape(const char *what, const dg_tensor *t, dg_shape s) {
    cr_assert(t, "%s: failed: %s", what, dg_last_error());
    dg_shape got = dg_shape_of(t);
    bool same = got.ndim == s.ndim;
    for (int i = 0; same && i < s.ndim; i++) same = got.d[i] == s.d[i];
    char b[64];
    cr_expect(same, "%s: shape %s", what, dg_shape_str(t, b, sizeof b));
}

/* int64 comparisons are exact: values past 2^53 that a double cannot tell apart. */
static inline void nc_int64_compare(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *a = NC_I64(dev, ((int64_t)1 << 53) + 1, INT64_MAX), *b = NC_I64(dev, (int64_t)1 << 53, INT64_MAX - 1);
    cr_assert(a && b, "%s", dg_last_error());
    /* torch.eq(torch.tensor([2**53+1, 2**63-1]), torch.tensor([2**53, 2**63-2])) -> [False, False] */
    NC_EXPECT("equal i64 past 2^53", dg_equal(a, b), DG_BOOL, uint8_t, 0, 0);
    /* torch.gt(a, b) -> [True, True]; torch.gt(b, a) -> [False, False] */
    NC_EXPECT("greater i64 past 2^53", dg_greater(a, b), DG_BOOL, uint8_t, 1, 1);
    NC_EXPECT("greater i64 past 2^53, swapped", dg_greater(b, a), DG_BOOL, uint8_t, 0, 0);
    /* torch.eq(a, a) -> [True, True]; INT64_MIN against INT64_MIN + 1: torch.gt -> [False] */
    NC_EXPECT("equal i64 to itself", dg_equal(a, a), DG_BOOL, uint8_t, 1, 1);
    NC_EXPECT("greater INT64_MIN+1 > INT64_MIN", dg_greater(NC_I64(dev, INT64_MIN + 1), NC_I64(dev, INT64_MIN)), DG_BOOL, uint8_t, 1);
    /* broadcast against a 0-d int64: torch.eq(a, torch.tensor(2**63-1)) -> [False, True] */
    dg_tensor *max0 = dg_reshape(NC_I64(dev, INT64_MAX), DG_SCALAR_SHAPE);
    NC_EXPECT("equal i64 against 0-d INT64_MAX", dg_equal(a, max0), DG_BOOL, uint8_t, 0, 1);
    dg_scope_end(s);
}

/* Comparisons promote their operands as the arithmetic does, then compare in that dtype. */
static inline void nc_compare_promotion(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *i32 = NC_I32(dev, (1 << 24) + 1), *f32 = NC_F32(dev, 16777216.0f);
    cr_assert(i32 && f32, "%s", dg_last_error());
    /* torch.eq(torch.tensor([2**24+1], dtype=torch.int32), torch.tensor([2.0**24])) -> [True] (compared in float32) */
    NC_EXPECT("equal i32 with f32", dg_equal(i32, f32), DG_BOOL, uint8_t, 1);
    NC_EXPECT("equal f32 with i32", dg_equal(f32, i32), DG_BOOL, uint8_t, 1);
    /* torch.gt(same) -> [False] */
    NC_EXPECT("greater i32 than f32", dg_greater(i32, f32), DG_BOOL, uint8_t, 0);
    /* torch.tensor([2**24+1]) == torch.tensor([2.0**24]) -> [True] (int64 with float32: float32) */
    NC_EXPECT("equal i64 with f32", dg_equal(NC_I64(dev, (1 << 24) + 1), f32), DG_BOOL, uint8_t, 1);
    /* torch.tensor([0.1]) == torch.tensor(0.1, dtype=torch.float64) -> [True]: the dimensioned
     * float32 wins over the 0-d float64 */
    dg_tensor *tenth0 = dg_to_device(dg_scalar(0.1, DG_F64), dev);
    NC_EXPECT("equal f32 with 0-d f64", dg_equal(NC_F32(dev, 0.1f), tenth0), DG_BOOL, uint8_t, 1);
    /* ...while against a float64 tensor with dims it is compared in float64 -> [False] */
    NC_EXPECT("equal f32 with f64", dg_equal(NC_F32(dev, 0.1f), NC_F64(dev, 0.1)), DG_BOOL, uint8_t, 0);
    /* torch.tensor([16777217], dtype=torch.int32) == torch.tensor([16777216]) -> [False] (int64) */
    NC_EXPECT("equal i32 with i64", dg_equal(i32, NC_I64(dev, 1 << 24)), DG_BOOL, uint8_t, 0);
    /* torch.tensor([1.0, 2.0]) > torch.tensor([1]) -> [False, True] */
    NC_EXPECT("greater f32 than i64", dg_greater(NC_F32(dev, 1.0f, 2.0f), NC_I64(dev, 1)), DG_BOOL, uint8_t, 0, 1);
    /* torch.tensor([True, False]) == torch.tensor([1, 1]) -> [True, False] */
    NC_EXPECT("equal bool with i64", dg_equal(NC_BOOL(dev, 1, 0), NC_I64(dev, 1, 1)), DG_BOOL, uint8_t, 1, 0);
    dg_scope_end(s);
}

/* A whole-number scalar outside an int32 tensor's range is wrapped into it, as torch wraps a
 * Python int. */
static inline void nc_scalar_wrap_i32(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = NC_I32(dev, 1, -5);
    cr_assert(x, "%s", dg_last_error());
    /* x = torch.tensor([1, -5], dtype=torch.int32); x + 3000000000 -> [-1294967295, -1294967301] int32 */
    NC_EXPECT("i32 + 3e9", dg_add_scalar(x, 3e9), DG_I32, int32_t, -1294967295, -1294967301);
    /* x - 3000000000 -> [1294967297, 1294967291] */
    NC_EXPECT("i32 - 3e9", dg_sub_scalar(x, 3e9), DG_I32, int32_t, 1294967297, 1294967291);
    /* x * 3000000000 -> [-1294967296, -2115098112]; x * -3000000000 -> [1294967296, 2115098112] */
    NC_EXPECT("i32 * 3e9", dg_mul_scalar(x, 3e9), DG_I32, int32_t, -1294967296, -2115098112);
    NC_EXPECT("i32 * -3e9", dg_mul_scalar(x, -3e9), DG_I32, int32_t, 1294967296, 2115098112);
    /* torch.rsub(x, 3000000000) -> [-1294967297, -1294967291] */
    NC_EXPECT("3e9 - i32", dg_rsub_scalar(x, 3e9), DG_I32, int32_t, -1294967297, -1294967291);
    /* x + 2**40 -> [1, -5] (2^40 wraps to 0) */
    NC_EXPECT("i32 + 2^40", dg_add_scalar(x, 0x1p40), DG_I32, int32_t, 1, -5);
    dg_scope_end(s);
}

/* Whole-number scalars up to 2^63 in magnitude keep an int64 tensor's dtype (torch's Python int);
 * past the int64 range a scalar is a float one (as a Python float). */
static inline void nc_scalar_big_i64(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = NC_I64(dev, 1, 2, -2);
    cr_assert(y, "%s", dg_last_error());
    /* y = torch.tensor([1, 2, -2]); y * 2**62 -> [4611686018427387904, -9223372036854775808, -9223372036854775808] int64 */
    NC_EXPECT("i64 * 2^62", dg_mul_scalar(y, 0x1p62), DG_I64, int64_t, (int64_t)1 << 62, INT64_MIN, INT64_MIN);
    /* y - (-2**63) -> [-9223372036854775807, -9223372036854775806, 9223372036854775806] */
    NC_EXPECT("i64 - -2^63", dg_sub_scalar(y, -0x1p63), DG_I64, int64_t, INT64_MIN + 1, INT64_MIN + 2, INT64_MAX - 1);
    /* y + (-2**63) -> [-9223372036854775807, -9223372036854775806, 9223372036854775806] */
    NC_EXPECT("i64 + -2^63", dg_add_scalar(y, -0x1p63), DG_I64, int64_t, INT64_MIN + 1, INT64_MIN + 2, INT64_MAX - 1);
    /* y * (2**62 + 2**61) -> [6917529027641081856, -4611686018427387904, 4611686018427387904] */
    NC_EXPECT("i64 * 3*2^61", dg_mul_scalar(y, 0x1.8p62), DG_I64, int64_t, (int64_t)3 << 61, -((int64_t)1 << 62), (int64_t)1 << 62);
    /* y + 1e19 -> float32 [1e19, 1e19, 1e19] (past int64: a Python float) */
    NC_EXPECT("i64 + 1e19", dg_add_scalar(y, 1e19), DG_F32, float, 1e19f, 1e19f, 1e19f);
    dg_scope_end(s);
}

/* group_norm of an empty batch is the empty tensor, and backward through it gives zero gradients. */
static inline void nc_group_norm_empty(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_to_device(dg_zeros(DG_SHAPE(0, 4, 3), DG_F32), dev);
    dg_tensor *w = dg_to_device(dg_ones(DG_SHAPE(4), DG_F32), dev), *b = dg_to_device(dg_zeros(DG_SHAPE(4), DG_F32), dev);
    cr_assert(x && w && b, "%s", dg_last_error());
    cr_assert_eq(dg_set_requires_grad(x, true) | dg_set_requires_grad(w, true) | dg_set_requires_grad(b, true), 0, "%s", dg_last_error());
    /* F.group_norm(torch.empty(0, 4, 3), 2) -> tensor([], size=(0, 4, 3)) */
    dg_tensor *y = dg_group_norm(x, 2, w, b, 1e-5);
    nc_expect_shape("group_norm [0, 4, 3]", y, DG_SHAPE(0, 4, 3));
    /* y.sum().backward(): x.grad has shape (0, 4, 3), w.grad and b.grad are [0., 0., 0., 0.] */
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    nc_expect_shape("group_norm [0, 4, 3]: grad x", dg_grad(x), DG_SHAPE(0, 4, 3));
    NC_EXPECT("group_norm [0, 4, 3]: grad w", dg_grad(w), DG_F32, float, 0, 0, 0, 0);
    NC_EXPECT("group_norm [0, 4, 3]: grad b", dg_grad(b), DG_F32, float, 0, 0, 0, 0);
    /* F.group_norm(torch.empty(0, 4), 2) -> tensor([], size=(0, 4)) */
    nc_expect_shape("group_norm [0, 4]", dg_group_norm(dg_to_device(dg_zeros(DG_SHAPE(0, 4), DG_F64), dev), 4, NULL, NULL, 1e-5),
                    DG_SHAPE(0, 4));
    dg_scope_end(s);
}

/* where promotes its branches as the arithmetic does; a float branch gets its gradient in its own dtype. */
static inline void nc_where_promotion(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *c = NC_BOOL(dev, 1, 0);
    cr_assert(c, "%s", dg_last_error());
    /* torch.where(torch.tensor([True, False]), torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1.5, 2.5])) -> [1.0, 2.5] float32 */
    NC_EXPECT("where i32/f32", dg_where(c, NC_I32(dev, 1, 2), NC_F32(dev, 1.5f, 2.5f)), DG_F32, float, 1.0f, 2.5f);
    /* torch.where(c, torch.tensor([1, 2], dtype=torch.int32), torch.tensor([3, 4])) -> [1, 4] int64 */
    NC_EXPECT("where i32/i64", dg_where(c, NC_I32(dev, 1, 2), NC_I64(dev, 3, 4)), DG_I64, int64_t, 1, 4);
    /* torch.where(c, torch.tensor([1.5, 2.5]), torch.tensor([3., 4.], dtype=torch.float64)) -> [1.5, 4.0] float64 */
    dg_tensor *leaf = NC_F32(dev, 1.5f, 2.5f);
    cr_assert_eq(dg_set_requires_grad(leaf, true), 0, "%s", dg_last_error());
    dg_tensor *y = dg_where(c, leaf, NC_F64(dev, 3, 4));
    NC_EXPECT("where f32/f64", y, DG_F64, double, 1.5, 4.0);
    /* ...sum().backward(): the float32 leaf's grad is [1., 0.] in float32 */
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    NC_EXPECT("where f32/f64: grad of the f32 branch", dg_grad(leaf), DG_F32, float, 1, 0);
    /* torch.where(c, torch.tensor([1.5, 2.5]), torch.tensor(3., dtype=torch.float64)) -> [1.5, 3.0] float32 (the 0-d yields) */
    NC_EXPECT("where f32/0-d f64", dg_where(c, NC_F32(dev, 1.5f, 2.5f), dg_to_device(dg_scalar(3, DG_F64), dev)), DG_F32, float, 1.5f, 3.0f);
    /* torch.where(c, torch.tensor([1, 2], dtype=torch.int32), torch.tensor(3)) -> [1, 3] int32 */
    NC_EXPECT("where i32/0-d i64", dg_where(c, NC_I32(dev, 1, 2), dg_to_device(dg_scalar(3, DG_I64), dev)), DG_I32, int32_t, 1, 3);
    /* torch.where(c, torch.tensor([1, 2], dtype=torch.int32), torch.tensor(3.5, dtype=torch.float64)) -> [1.0, 3.5] float64 */
    NC_EXPECT("where i32/0-d f64", dg_where(c, NC_I32(dev, 1, 2), dg_to_device(dg_scalar(3.5, DG_F64), dev)), DG_F64, double, 1.0, 3.5);
    dg_scope_end(s);
}

/* logsumexp over an empty axis is log(0) = -inf, as torch. */
static inline void nc_logsumexp_empty(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_to_device(dg_zeros(DG_SHAPE(2, 0), DG_F32), dev);
    cr_assert(x && dg_set_requires_grad(x, true) == 0, "%s", dg_last_error());
    /* torch.logsumexp(torch.empty(2, 0), 1) -> [-inf, -inf] */
    dg_tensor *y = dg_logsumexp(x, (int[]){ 1 }, 1, false);
    NC_EXPECT("logsumexp [2, 0] axis 1", y, DG_F32, float, -INFINITY, -INFINITY);
    /* y.sum().backward(): x.grad has shape (2, 0) */
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    nc_expect_shape("logsumexp [2, 0]: grad", dg_grad(x), DG_SHAPE(2, 0));
    /* torch.logsumexp(torch.empty(0, 3), 0) -> [-inf, -inf, -inf]; keepdim=True: shape (1, 3) */
    dg_tensor *e03 = dg_to_device(dg_zeros(DG_SHAPE(0, 3), DG_F64), dev);
    NC_EXPECT("logsumexp [0, 3] axis 0", dg_logsumexp(e03, (int[]){ 0 }, 1, false), DG_F64, double, -INFINITY, -INFINITY, -INFINITY);
    nc_expect_shape("logsumexp [0, 3] axis 0 keepdim", dg_logsumexp(e03, (int[]){ 0 }, 1, true), DG_SHAPE(1, 3));
    /* torch.logsumexp(torch.empty(0), 0) -> tensor(-inf) */
    NC_EXPECT("logsumexp [0]", dg_logsumexp(dg_to_device(dg_zeros(DG_SHAPE(0), DG_F32), dev), NULL, 0, false), DG_F32, float, -INFINITY);
    dg_scope_end(s);
}

/* embedding with max_norm and no ids looks up nothing and renormalises nothing. */
static inline void nc_embedding_max_norm_empty(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *w = dg_to_device(dg_full(DG_SHAPE(5, 3), 2.0, DG_F32), dev);
    cr_assert(w, "%s", dg_last_error());
    dg_embedding_params p = dg_embedding_default_params();
    p.max_norm = 1.0;
    /* torch.nn.Embedding(5, 3, max_norm=1.0)(torch.empty(0, dtype=torch.long)).shape -> (0, 3) */
    nc_expect_shape("embedding max_norm, ids [0]", dg_embedding(dg_to_device(dg_zeros(DG_SHAPE(0), DG_I64), dev), w, p), DG_SHAPE(0, 3));
    /* ...(torch.empty(2, 0, dtype=torch.long)).shape -> (2, 0, 3) */
    nc_expect_shape("embedding max_norm, ids [2, 0]", dg_embedding(dg_to_device(dg_zeros(DG_SHAPE(2, 0), DG_I32), dev), w, p),
                    DG_SHAPE(2, 0, 3));
    /* no row was looked up, so none was renormalised */
    NC_EXPECT("embedding max_norm, ids [0]: weight untouched", dg_sum_all(w), DG_F32, float, 30.0f);
    dg_scope_end(s);
}

/* mean over zero elements is 0 / 0 = NaN, as torch. */
static inline void nc_mean_empty(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_to_device(dg_zeros(DG_SHAPE(0, 3), DG_F32), dev);
    cr_assert(x && dg_set_requires_grad(x, true) == 0, "%s", dg_last_error());
    /* torch.empty(0, 3).mean(0) -> [nan, nan, nan]; keepdim=True: shape (1, 3) */
    dg_tensor *y = dg_mean(x, (int[]){ 0 }, 1, false);
    NC_EXPECT("mean [0, 3] axis 0", y, DG_F32, float, NAN, NAN, NAN);
    nc_expect_shape("mean [0, 3] axis 0 keepdim", dg_mean(x, (int[]){ 0 }, 1, true), DG_SHAPE(1, 3));
    /* y.sum().backward(): x.grad has shape (0, 3) */
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    nc_expect_shape("mean [0, 3]: grad", dg_grad(x), DG_SHAPE(0, 3));
    /* torch.empty(0).mean() -> tensor(nan); torch.empty(2, 0, dtype=torch.float64).mean(1) -> [nan, nan] */
    NC_EXPECT("mean_all [0]", dg_mean_all(dg_to_device(dg_zeros(DG_SHAPE(0), DG_F32), dev)), DG_F32, float, NAN);
    NC_EXPECT("mean [2, 0] axis 1", dg_mean(dg_to_device(dg_zeros(DG_SHAPE(2, 0), DG_F64), dev), (int[]){ 1 }, 1, false), DG_F64, double,
              NAN, NAN);
    /* the count is still over the reduced axes only: torch.empty(0, 3).mean(1).shape -> (0,) */
    nc_expect_shape("mean [0, 3] axis 1", dg_mean(x, (int[]){ 1 }, 1, false), DG_SHAPE(0));
    dg_scope_end(s);
}

/* Casting int64 rounds once, as torch does (through a double it rounded twice), and wraps into
 * int32; a comparison promoting int64 against float32 goes through that cast. */
static inline void nc_int64_cast(dg_device dev) {
    dg_scope *s = dg_scope_begin();
    const int64_t big = ((int64_t)1 << 53) + ((int64_t)1 << 29) + 1;
    dg_tensor *a = NC_I64(dev, big, -big, INT64_MAX, ((int64_t)1 << 31) + 5, -((int64_t)1 << 31) - 7, 16777217);
    cr_assert(a, "%s", dg_last_error());
    /* a = torch.tensor([2**53+2**29+1, -(2**53+2**29+1), 2**63-1, 2**31+5, -2**31-7, 16777217]);
     * a.float() -> [9007200328482816, -9007200328482816, 9.223372036854776e18, 2147483648, -2147483648, 16777216] */
    NC_EXPECT("i64 -> f32", dg_cast(a, DG_F32), DG_F32, float, 9007200328482816.0f, -9007200328482816.0f, 9.223372036854776e18f,
              2147483648.0f, -2147483648.0f, 16777216.0f);
    /* a.to(torch.int32) -> [536870913, -536870913, -1, -2147483643, 2147483641, 16777217] */
    NC_EXPECT("i64 -> i32", dg_cast(a, DG_I32), DG_I32, int32_t, 536870913, -536870913, -1, -2147483643, 2147483641, 16777217);
    /* torch.tensor([2**53+2**29+1]) == torch.tensor([2.0**53 + 2.0**30]) -> [True] (compared in float32) */
    NC_EXPECT("equal i64 with f32 past 2^53", dg_equal(NC_I64(dev, big), NC_F32(dev, 9007200328482816.0f)), DG_BOOL, uint8_t, 1);
    dg_scope_end(s);
}

#endif
