/* test/test_layer_ops.h — checks shared by the tests of the layer ops (test_conv_pool_bn.c,
 * test_norm_dropout.c): f64 inputs, values against hand-computed ones, shapes, and a call that
 * must fail with an error naming its op. */
#ifndef DG_TEST_LAYER_OPS_H
#define DG_TEST_LAYER_OPS_H

#include "test_util.h"

static inline dg_tensor *f64_of(dg_shape s, const double *v) { return dg_from_data(s, DG_F64, v); }

static inline void expect_values(const dg_tensor *t, const double *want, int64_t n, double tol, const char *what) {
    cr_assert_not_null(t, "%s: op failed: %s", what, dg_last_error());
    cr_assert_eq(dg_numel(t), n, "%s: %lld elements, want %lld", what, (long long)dg_numel(t), (long long)n);
    double *got = malloc(sizeof(double) * (size_t)n);
    dg_scope *s = dg_scope_begin();
    dg_to_host(dg_cast(t, DG_F64), got, sizeof(double) * (size_t)n);
    dg_scope_end(s);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= tol * fmax(1.0, fabs(want[i])), "%s: element %lld is %.10g, want %.10g",
                  what, (long long)i, got[i], want[i]);
    free(got);
}

static inline void expect_shape(const dg_tensor *t, dg_shape s, const char *what) {
    cr_assert_not_null(t, "%s: op failed: %s", what, dg_last_error());
    cr_assert_eq(dg_ndim(t), s.ndim, "%s: ndim %d, want %d", what, dg_ndim(t), s.ndim);
    for (int i = 0; i < s.ndim; i++)
        cr_assert_eq(dg_dim(t, i), s.d[i], "%s: dim %d is %lld, want %lld", what, i, (long long)dg_dim(t, i), (long long)s.d[i]);
}

#define EXPECT_FAIL(expr, op) do {                                                                     \
        dg_clear_error();                                                                              \
        dg_tensor *r_ = (expr);                                                                        \
        cr_assert_null(r_, "%s should fail", #expr);                                                   \
        cr_assert_not_null(strstr(dg_last_error(), op), "error for %s does not name %s: '%s'", #expr, op, \
                           dg_last_error());                                                           \
    } while (0)

#endif
