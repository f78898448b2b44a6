/* test/golden_check.h — reading PyTorch golden files and comparing against them, shared by the
 * golden test files (test/test_golden.c explains the tolerances and the floor they are relative
 * to). */
#ifndef DG_TEST_GOLDEN_CHECK_H
#define DG_TEST_GOLDEN_CHECK_H

#include "test_util.h"

#define GOLDEN_DIR "test/goldens/"
#define TOL_VALUE 1e-5
#define TOL_GRAD 1e-4

static inline golden *load(const char *file) {
    char path[256];
    snprintf(path, sizeof path, GOLDEN_DIR "%s", file);
    return golden_load(path);
}

static inline int64_t param(golden *g, const char *name, int64_t i) {
    dg_tensor *p = golden_get(g, name);
    cr_assert(i < dg_numel(p), "params index %lld out of range", (long long)i);
    return (int64_t)dg_get(p, &i);
}

static inline double floor_for(const dg_tensor *want) {
    dg_scope *s = dg_scope_begin();
    double m = dg_item(dg_max(dg_abs(dg_cast(want, DG_F64)), NULL, 0, false));
    dg_scope_end(s);
    return fmax(1e-3, 1e-2 * m);
}

/* Returns the max relative error (an f64 result is compared through f32, the golden's type). */
static inline double expect_close(const char *file, const char *what, const dg_tensor *got, const dg_tensor *want, double tol) {
    cr_assert(got, "%s: %s missing (%s)", file, what, dg_last_error());
    char gs[64], ws[64];
    dg_shape_str(got, gs, sizeof gs);
    dg_shape_str(want, ws, sizeof ws);
    cr_assert_str_eq(gs, ws, "%s: %s has shape %s, PyTorch %s", file, what, gs, ws);
    dg_scope *s = dg_scope_begin();
    double e = max_rel_err(dg_dtype_of(got) == DG_F64 ? dg_cast(got, DG_F32) : got, want, floor_for(want));
    dg_scope_end(s);
    cr_expect(e <= tol, "%s: %s max relative error %.3g > %.g", file, what, e, tol);
    return e;
}

static inline void expect_output(const char *file, golden *g, const dg_tensor *out) {
    expect_close(file, "out", out, golden_get(g, "out"), TOL_VALUE);
}

/* Backward of sum(out * gout): through grad_output, or by building the weighted sum. */
static inline void backward_weighted(const char *file, golden *g, dg_tensor *out, bool via_sum) {
    dg_tensor *gout = golden_get(g, "gout");
    dg_backward_params bwp = dg_backward_default_params();
    bwp.grad_output = gout;
    int rc = via_sum ? dg_backward(dg_sum_all(dg_mul(out, gout)))
                     : dg_backward_ext(out, bwp);
    cr_assert_eq(rc, 0, "%s: backward failed: %s", file, dg_last_error());
}

static inline void expect_grad(const char *file, golden *g, const dg_tensor *leaf, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "grad_%s", name);
    cr_assert(dg_grad(leaf), "%s: no gradient for %s", file, name);
    expect_close(file, key, dg_grad(leaf), golden_get(g, key), TOL_GRAD);
}

#endif
