/* test/gpu/test_gpu_compose.c — CPU vs gpu:0 for the composite ops of eager/ops/compose.c: flip,
 * tile, masked_fill, logsumexp, var/std, vector norm (1, 2, inf) and pad (constant incl. cropping,
 * reflect, replicate). They are made of other ops, so this checks that each composition stays on
 * the device (its index and fill constants made where the input lives) and that values and
 * gradients agree with the CPU's. */
#include "gpu_compare.h"

#include <math.h>

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define G64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define MASK(...) { GT_MASK, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define TOL_F64 { 1e-10, 1e-12, false }

static const int ax0m1[] = {0, -1}, ax1[] = {1}, axm1[] = {-1}, ax12[] = {1, 2};
static const int64_t reps213[] = {2, 1, 3}, reps2[] = {2};
static const int64_t pad_c[] = {1, 2, 0, 1}, pad_crop[] = {-1, 2, 1, -1}, pad_r[] = {3, 1, 2, 2};
F(f_flip, dg_flip(in[0], ax0m1, 2))
F(f_tile, dg_tile(in[0], reps213, 3))
F(f_tile_short, dg_tile(in[0], reps2, 1))
F(f_masked_fill, dg_masked_fill(in[0], in[1], -2.5))
F(f_lse_12, dg_logsumexp(in[0], ax12, 2, false))
F(f_lse_m1k, dg_logsumexp(in[0], axm1, 1, true))
F(f_var_1, dg_var(in[0], ax1, 1, true, false))
F(f_var_all_biased, dg_var(in[0], NULL, 0, false, true))
F(f_std_m1, dg_std(in[0], axm1, 1, true, false))
F(f_norm1, dg_norm(in[0], 1.0, ax1, 1, false))
F(f_norm2, dg_norm(in[0], 2.0, ax1, 1, false))
F(f_norm2_all, dg_norm(in[0], 2.0, NULL, 0, false))
F(f_norminf, dg_norm(in[0], INFINITY, ax1, 1, true))
F(f_pad_const, dg_pad(in[0], pad_c, 4, DG_PAD_CONSTANT, 0.5))
F(f_pad_crop, dg_pad(in[0], pad_crop, 4, DG_PAD_CONSTANT, -1.0))
F(f_pad_reflect, dg_pad(in[0], pad_r, 4, DG_PAD_REFLECT, 0))
F(f_pad_replicate, dg_pad(in[0], pad_r, 4, DG_PAD_REPLICATE, 0))
/* a row of zeros: the 2-norm's and std's gradient there must be 0 on both devices, not NaN */
static dg_tensor *zero_row(dg_tensor *x) {   /* row 1 of a [3, n] input zeroed (fn runs on the inputs' device) */
    dg_tensor *m = dg_from_data(DG_SHAPE(3, 1), DG_F32, (const float[]){1, 0, 1});
    return m ? dg_mul(x, m) : NULL;
}
F(f_norm2_zero_row, dg_norm(zero_row(in[0]), 2.0, ax1, 1, false))
F(f_std_zero_row, dg_std(zero_row(in[0]), ax1, 1, true, false))

static const gt_op_case cases[] = {
    { "flip axes 0,-1", f_flip, 1, IN(G(2, 3, 4)), GT_EXACT, GT_EXACT },
    { "tile / repeat 2,1,3", f_tile, 1, IN(G(2, 3)), GT_EXACT, GT_RED },
    { "tile with fewer reps than dims", f_tile_short, 1, IN(G(3, 4)), GT_EXACT, GT_RED },
    { "masked_fill broadcast mask", f_masked_fill, 2, IN(G(3, 4), MASK(1, 4)), GT_EXACT, GT_EXACT },
    { "logsumexp axes 1,2", f_lse_12, 1, IN(G(3, 4, 5)), GT_RED, GT_RED },
    { "logsumexp -1 keepdim", f_lse_m1k, 1, IN(G(4, 600)), GT_RED, GT_RED },
    { "var unbiased axis 1", f_var_1, 1, IN(G(3, 5, 2)), GT_RED, GT_RED },
    { "var biased all keepdim", f_var_all_biased, 1, IN(G(3, 5)), GT_RED, GT_RED },
    { "std unbiased -1", f_std_m1, 1, IN(G(4, 5)), GT_RED, GT_RED },
    { "std with a constant row", f_std_zero_row, 1, IN(G(3, 5)), GT_RED, GT_RED },
    { "norm p=1 axis 1", f_norm1, 1, IN(G(3, 4)), GT_RED, GT_EXACT },
    { "norm p=2 axis 1", f_norm2, 1, IN(G(3, 4)), GT_RED, GT_RED },
    { "norm p=2 with a zero row", f_norm2_zero_row, 1, IN(G(3, 4)), GT_RED, GT_RED },
    { "norm p=2 all", f_norm2_all, 1, IN(G(2, 3, 4)), GT_RED, GT_RED },
    { "norm p=inf keepdim", f_norminf, 1, IN(G(3, 4)), GT_EXACT, GT_EXACT },
    { "norm p=2 f64", f_norm2, 1, IN(G64(3, 4)), TOL_F64, TOL_F64 },
    { "logsumexp f64", f_lse_12, 1, IN(G64(3, 4, 5)), TOL_F64, TOL_F64 },
    { "pad constant", f_pad_const, 1, IN(G(2, 2, 3, 4)), GT_EXACT, GT_EXACT },
    { "pad constant, negative pads crop", f_pad_crop, 1, IN(G(2, 3, 5)), GT_EXACT, GT_EXACT },
    { "pad reflect", f_pad_reflect, 1, IN(G(2, 2, 3, 4)), GT_EXACT, GT_RED },
    { "pad replicate", f_pad_replicate, 1, IN(G(2, 2, 3, 4)), GT_EXACT, GT_RED },
    { "pad reflect f64", f_pad_reflect, 1, IN(G64(2, 2, 3, 4)), GT_EXACT, TOL_F64 },
};

GT_TABLE_TESTS(gpu_compose, cases, gt_expect_op_matches_cpu, 3500)
