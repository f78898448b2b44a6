/* test/grad_parity_cases.h — four places where the gradient (or the forward) disagreed with
 * PyTorch, checked against PyTorch's values on a given device: test/test_grad_parity.c runs them
 * on the CPU, test/gpu/test_gpu_edges.c on gpu:0 (the emulator's in `make test`). Each case
 * failed before its fix:
 *   1. binary_cross_entropy_with_logits at a logit of exactly 0: the gradient is sigmoid(0) - y,
 *      not -y (relu's and abs's kinks each took the subgradient 0);
 *   2. pow: 0 where the formula meets 0 * inf or 0 * log 0 (d/da of a^0 at 0, d/db at a = 0,
 *      pow_scalar with exponent 0 at 0), as PyTorch masks them, not NaN;
 *   3. maximum/minimum ties: half of the gradient to each side, not all to the first;
 *   4. maximum/minimum with a NaN in either operand give NaN (the first operand's was dropped). */
#ifndef DG_TEST_GRAD_PARITY_CASES_H
#define DG_TEST_GRAD_PARITY_CASES_H

#include <criterion/criterion.h>
#include <dygraph.h>
#include <math.h>

static dg_tensor *gp_leaf(dg_device dev, dg_dtype dt, const double *v, int64_t n) {
    dg_tensor *h = dg_from_data(DG_SHAPE(n), DG_F64, v);
    dg_tensor *t = dg_to_device(dg_cast(h, dt), dev);
    cr_assert(t, "%s", dg_last_error());
    dg_set_requires_grad(t, true);
    return t;
}
/* Expects t (any device) to hold want[0..n) within tol; NaN and inf must match exactly. */
static void gp_expect(const char *what, const dg_tensor *t, const double *want, int64_t n, double tol) {
    cr_assert(t, "%s: no tensor: %s", what, dg_last_error());
    cr_assert_eq(dg_numel(t), n, "%s: %lld values", what, (long long)dg_numel(t));
    double got[16];
    cr_assert_eq(dg_to_host(dg_cast(t, DG_F64), got, sizeof(double) * (size_t)n), 0, "%s", dg_last_error());
    for (int64_t i = 0; i < n; i++) {
        bool ok = isnan(want[i]) ? isnan(got[i]) : isinf(want[i]) ? got[i] == want[i] : fabs(got[i] - want[i]) <= tol * fmax(1, fabs(want[i]));
        cr_expect(ok, "%s[%lld]: got %.9g, PyTorch gives %.9g", what, (long long)i, got[i], want[i]);
    }
}

static void gp_bce_with_logits_at_zero(dg_device dev, dg_dtype dt, double tol) {
    dg_scope *s = dg_scope_begin();
    const double xv[5] = { 0, 0, 0, 2, -3 }, yv[5] = { 0, 1, 0.3, 1, 0 };
    dg_tensor *x = gp_leaf(dev, dt, xv, 5), *y = dg_to_device(dg_cast(dg_from_data(DG_SHAPE(5), DG_F64, yv), dt), dev);
    dg_tensor *loss = dg_binary_cross_entropy_with_logits(x, y, DG_REDUCE_SUM);
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    double want[5], lw = 0;
    for (int i = 0; i < 5; i++) {
        double sg = 1 / (1 + exp(-xv[i]));
        want[i] = sg - yv[i];
        lw += -(yv[i] * log(sg) + (1 - yv[i]) * log(1 - sg));
    }
    gp_expect("bce_with_logits grad", dg_grad(x), want, 5, tol);
    gp_expect("bce_with_logits loss", loss, &lw, 1, tol);
    dg_scope_end(s);
}

static void gp_pow_masks(dg_device dev, dg_dtype dt, double tol) {
    dg_scope *s = dg_scope_begin();
    const double av[4] = { 0, 0, 2, 3 }, bv[4] = { 0, 2, 3, 0 };
    dg_tensor *a = gp_leaf(dev, dt, av, 4), *b = gp_leaf(dev, dt, bv, 4);
    dg_tensor *y = dg_pow(a, b);
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    const double y_want[4] = { 1, 0, 8, 1 }, da[4] = { 0, 0, 12, 0 }, db[4] = { 0, 0, 8 * log(2.0), log(3.0) };
    gp_expect("pow", y, y_want, 4, tol);
    gp_expect("pow d/da", dg_grad(a), da, 4, tol);
    gp_expect("pow d/db", dg_grad(b), db, 4, tol);
    const double xv[2] = { 0, 2 }, zero[2] = { 0, 0 };
    dg_tensor *x = gp_leaf(dev, dt, xv, 2);
    cr_assert_eq(dg_backward(dg_sum_all(dg_pow_scalar(x, 0))), 0, "%s", dg_last_error());
    gp_expect("pow_scalar(x, 0) d/dx", dg_grad(x), zero, 2, tol);
    dg_scope_end(s);
}

static void gp_maxmin_ties(dg_device dev, dg_dtype dt, double tol) {
    dg_scope *s = dg_scope_begin();
    const double av[3] = { 1, 2, 3 }, bv[3] = { 1, 5, 0 };
    const double max_a[3] = { 0.5, 0, 1 }, max_b[3] = { 0.5, 1, 0 }, min_a[3] = { 0.5, 1, 0 }, min_b[3] = { 0.5, 0, 1 };
    for (int is_max = 0; is_max < 2; is_max++) {
        dg_tensor *a = gp_leaf(dev, dt, av, 3), *b = gp_leaf(dev, dt, bv, 3);
        dg_tensor *y = is_max ? dg_maximum(a, b) : dg_minimum(a, b);
        cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
        gp_expect(is_max ? "maximum d/da" : "minimum d/da", dg_grad(a), is_max ? max_a : min_a, 3, tol);
        gp_expect(is_max ? "maximum d/db" : "minimum d/db", dg_grad(b), is_max ? max_b : min_b, 3, tol);
    }
    dg_scope_end(s);
}

static void gp_maxmin_nan(dg_device dev, dg_dtype dt) {
    dg_scope *s = dg_scope_begin();
    const double av[3] = { NAN, 1, NAN }, bv[3] = { 1, NAN, NAN }, want[3] = { NAN, NAN, NAN };
    dg_tensor *a = gp_leaf(dev, dt, av, 3), *b = gp_leaf(dev, dt, bv, 3);
    gp_expect("maximum with NaN", dg_maximum(a, b), want, 3, 0);
    gp_expect("minimum with NaN", dg_minimum(a, b), want, 3, 0);
    dg_scope_end(s);
}

/* Every case in f32 and f64 on dev. */
static inline void gp_all_cases(dg_device dev) {
    for (int k = 0; k < 2; k++) {
        dg_dtype dt = k ? DG_F64 : DG_F32;
        double tol = k ? 1e-12 : 1e-6;
        gp_bce_with_logits_at_zero(dev, dt, tol);
        gp_pow_masks(dev, dt, tol);
        gp_maxmin_ties(dev, dt, tol);
        gp_maxmin_nan(dev, dt);
    }
}

#endif
