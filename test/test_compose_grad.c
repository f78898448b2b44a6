/* test/test_compose_grad.c — finite-difference gradient checks (f64) for the composite ops of
 * eager/ops/compose.c (their PyTorch goldens are in test/test_golden.c). Inputs are drawn away
 * from the kinks (ties of norm inf, zeros of norm 1) where a central difference is meaningless. */
#include "test_util.h"

static const int ax0m1[] = { 0, -1 }, ax1[] = { 1 }, ax12[] = { 1, 2 };
static const int64_t reps[] = { 2, 1, 3 }, pads[] = { 1, 2, 2, 1 }, crop[] = { -1, 2, 1, -1 };
#define FN(name, expr) static dg_tensor *name(dg_tensor *const *in, void *ctx) { (void)ctx; return (expr); }
FN(f_flip, dg_flip(in[0], ax0m1, 2))
FN(f_tile, dg_tile(in[0], reps, 3))
FN(f_masked_fill, dg_masked_fill(in[0], (const dg_tensor *)ctx, -2.5))
FN(f_lse, dg_logsumexp(in[0], ax12, 2, false))
FN(f_var, dg_var(in[0], ax1, 1, true, false))
FN(f_var_biased, dg_var(in[0], NULL, 0, false, true))
FN(f_std, dg_std(in[0], ax1, 1, true, true))
FN(f_norm1, dg_norm(in[0], 1.0, ax1, 1, false))
FN(f_norm2, dg_norm(in[0], 2.0, NULL, 0, false))
FN(f_norminf, dg_norm(in[0], INFINITY, ax1, 1, true))
FN(f_pad_const, dg_pad(in[0], pads, 4, DG_PAD_CONSTANT, 0.5))
FN(f_pad_crop, dg_pad(in[0], crop, 4, DG_PAD_CONSTANT, -1.0))
FN(f_pad_reflect, dg_pad(in[0], pads, 4, DG_PAD_REFLECT, 0))
FN(f_pad_replicate, dg_pad(in[0], pads, 4, DG_PAD_REPLICATE, 0))

static void check1(const char *name, gc_fn f, dg_shape s, double lo, double hi, void *ctx) {
    dg_tensor *x = gc_input(s, lo, hi);
    gradcheck(name, f, &x, 1, ctx, 1e-6);
    dg_tensor_free(x);
}

Test(grad_compose, finite_differences) {
    size_t live = dg_live_tensors();
    dg_manual_seed(9);
    check1("flip", f_flip, DG_SHAPE(2, 3, 4), -1, 1, NULL);
    check1("tile", f_tile, DG_SHAPE(2, 3), -1, 1, NULL);
    dg_tensor *mask = dg_from_data(DG_SHAPE(1, 4), DG_BOOL, (uint8_t[]){ 1, 0, 0, 1 });
    check1("masked_fill", f_masked_fill, DG_SHAPE(3, 4), -1, 1, mask);
    dg_tensor_free(mask);
    check1("logsumexp", f_lse, DG_SHAPE(2, 3, 4), -3, 3, NULL);
    check1("var unbiased", f_var, DG_SHAPE(3, 5, 2), -1, 1, NULL);
    check1("var biased all", f_var_biased, DG_SHAPE(3, 4), -1, 1, NULL);
    check1("std", f_std, DG_SHAPE(4, 5), -1, 1, NULL);
    check1("norm 1", f_norm1, DG_SHAPE(3, 4), 0.2, 1, NULL);   /* positive: away from |x|'s kink */
    check1("norm 2", f_norm2, DG_SHAPE(2, 3, 4), -1, 1, NULL);
    check1("norm inf", f_norminf, DG_SHAPE(3, 4), -1, 1, NULL);   /* distinct values: one max per row */
    check1("pad constant", f_pad_const, DG_SHAPE(2, 3, 4), -1, 1, NULL);
    check1("pad crop", f_pad_crop, DG_SHAPE(2, 3, 5), -1, 1, NULL);
    check1("pad reflect", f_pad_reflect, DG_SHAPE(2, 3, 4), -1, 1, NULL);
    check1("pad replicate", f_pad_replicate, DG_SHAPE(2, 3, 4), -1, 1, NULL);
    cr_assert_eq(dg_live_tensors(), live, "the checks left %zu tensors alive", dg_live_tensors() - live);
}
