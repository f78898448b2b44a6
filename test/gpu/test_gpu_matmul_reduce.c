/* test/gpu/test_gpu_matmul_reduce.c — CPU vs gpu:0 for matmul (2-D, batched, broadcast batch
 * dims, vectors, transposed operands, strided views, f64), linear (with and without bias,
 * batched input) and the reductions sum/mean/max/min/argmax/argmin (all axes, some axes,
 * keepdim, long rows that need many blocks, strided input). */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define GP(lo, hi, ...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), lo, hi }
#define G64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), 0, 0 }

/* f64 sums in another order still agree to ~1e-15 per term */
#define TOL_F64 { 1e-10, 1e-12, false }

F(f_mm, dg_matmul(in[0], in[1]))
F(f_mm_nt, dg_matmul_t(in[0], in[1], false, true))
F(f_mm_tn, dg_matmul_t(in[0], in[1], true, false))
F(f_mm_tt, dg_matmul_t(in[0], in[1], true, true))
F(f_mm_nn_t, dg_matmul_t(in[0], in[1], false, false))
F(f_mm_strided, dg_matmul(dg_transpose(in[0], 0, 1), in[1]))
F(f_mm_strided_b, dg_matmul(in[0], dg_transpose(in[1], -1, -2)))
F(f_linear, dg_linear(in[0], in[1], in[2]))
F(f_linear_nobias, dg_linear(in[0], in[1], NULL))

static const int ax0[] = {0}, ax1[] = {1}, axm1[] = {-1}, ax02[] = {0, 2}, ax12[] = {1, 2};
F(f_sum_all, dg_sum_all(in[0]))
F(f_sum_none, dg_sum(in[0], NULL, 0, false))
F(f_sum_1, dg_sum(in[0], ax1, 1, false))
F(f_sum_02k, dg_sum(in[0], ax02, 2, true))
F(f_sum_m1, dg_sum(in[0], axm1, 1, false))
F(f_sum_0, dg_sum(in[0], ax0, 1, false))
F(f_sum_strided, dg_sum(dg_transpose(in[0], 0, 1), ax0, 1, false))
F(f_mean_all, dg_mean_all(in[0]))
F(f_mean_m1, dg_mean(in[0], axm1, 1, false))
F(f_mean_12k, dg_mean(in[0], ax12, 2, true))
F(f_max_1, dg_max(in[0], ax1, 1, false))
F(f_max_all, dg_max(in[0], NULL, 0, false))
F(f_max_0k, dg_max(in[0], ax0, 1, true))
F(f_max_m1, dg_max(in[0], axm1, 1, false))
F(f_min_all, dg_min(in[0], NULL, 0, false))
F(f_min_m1k, dg_min(in[0], axm1, 1, true))
F(f_min_0, dg_min(in[0], ax0, 1, false))
F(f_argmax_1, dg_argmax(in[0], 1, false))
F(f_argmax_1k, dg_argmax(in[0], 1, true))
F(f_argmax_0, dg_argmax(in[0], 0, false))
F(f_argmin_m1, dg_argmin(in[0], -1, false))
F(f_argmin_0k, dg_argmin(in[0], 0, true))

static const gt_op_case cases[] = {
    /* matmul */
    { "matmul [3,4]@[4,5]", f_mm, 2, IN(G(3, 4), G(4, 5)), GT_RED, GT_RED },
    { "matmul [64,128]@[128,96]", f_mm, 2, IN(G(64, 128), G(128, 96)), GT_RED, GT_RED },
    { "matmul [130,70]@[70,33] (ragged tiles)", f_mm, 2, IN(G(130, 70), G(70, 33)), GT_RED, GT_RED },
    { "matmul batched [2,3,4]@[4,5] (shared right)", f_mm, 2, IN(G(2, 3, 4), G(4, 5)), GT_RED, GT_RED },
    { "matmul batched [4,3,6]@[4,6,5]", f_mm, 2, IN(G(4, 3, 6), G(4, 6, 5)), GT_RED, GT_RED },
    { "matmul broadcast batch [2,1,3,4]@[3,4,2]", f_mm, 2, IN(G(2, 1, 3, 4), G(3, 4, 2)), GT_RED, GT_RED },
    { "matmul shared left [3,4]@[2,4,5]", f_mm, 2, IN(G(3, 4), G(2, 4, 5)), GT_RED, GT_RED },
    { "matmul vector@matrix [4]@[4,3]", f_mm, 2, IN(G(4), G(4, 3)), GT_RED, GT_RED },
    { "matmul matrix@vector [2,3,4]@[4]", f_mm, 2, IN(G(2, 3, 4), G(4)), GT_RED, GT_RED },
    { "matmul vector@vector [7]@[7]", f_mm, 2, IN(G(7), G(7)), GT_RED, GT_RED },
    { "matmul_t a@b^T", f_mm_nt, 2, IN(G(3, 4), G(5, 4)), GT_RED, GT_RED },
    { "matmul_t a^T@b batched", f_mm_tn, 2, IN(G(2, 4, 3), G(2, 4, 5)), GT_RED, GT_RED },
    { "matmul_t a^T@b^T", f_mm_tt, 2, IN(G(4, 3), G(5, 4)), GT_RED, GT_RED },
    { "matmul_t no transpose", f_mm_nn_t, 2, IN(G(6, 4), G(4, 2)), GT_RED, GT_RED },
    { "matmul transposed view left", f_mm_strided, 2, IN(G(4, 3), G(4, 2)), GT_RED, GT_RED },
    { "matmul transposed view right batched", f_mm_strided_b, 2, IN(G(2, 3, 4), G(2, 5, 4)), GT_RED, GT_RED },
    { "matmul f64 [16,32]@[32,8]", f_mm, 2, IN(G64(16, 32), G64(32, 8)), TOL_F64, TOL_F64 },
    /* linear: x @ w + b, w [in, out] */
    { "linear [5,3]x[2,3]^T+b", f_linear, 3, IN(G(5, 3), G(2, 3), G(2)), GT_RED, GT_RED },
    { "linear [32,128]x[64,128]^T+b", f_linear, 3, IN(G(32, 128), G(64, 128), G(64)), GT_RED, GT_RED },
    { "linear batched [2,3,4]x[6,4]^T+b", f_linear, 3, IN(G(2, 3, 4), G(6, 4), G(6)), GT_RED, GT_RED },
    { "linear no bias", f_linear_nobias, 2, IN(G(7, 5), G(3, 5)), GT_RED, GT_RED },
    /* sum */
    { "sum_all [3,4,2]", f_sum_all, 1, IN(G(3, 4, 2)), GT_RED, GT_RED },
    { "sum all axes (NULL)", f_sum_none, 1, IN(G(3, 4, 2)), GT_RED, GT_RED },
    { "sum axis 1", f_sum_1, 1, IN(G(3, 4, 2)), GT_RED, GT_RED },
    { "sum axes 0,2 keepdim", f_sum_02k, 1, IN(G(3, 4, 2)), GT_RED, GT_RED },
    { "sum axis -1 [4,5000]", f_sum_m1, 1, IN(GP(0, 1, 4, 5000)), GT_RED, GT_RED },
    { "sum axis 0 [3000,3]", f_sum_0, 1, IN(GP(0, 1, 3000, 3)), GT_RED, GT_RED },
    { "sum_all [100000]", f_sum_all, 1, IN(GP(0, 1, 100000)), GT_RED, GT_RED },
    { "sum of a transposed view", f_sum_strided, 1, IN(G(5, 7)), GT_RED, GT_RED },
    { "sum axis 1 f64", f_sum_1, 1, IN(G64(3, 500, 2)), TOL_F64, TOL_F64 },
    /* mean */
    { "mean_all", f_mean_all, 1, IN(G(3, 4)), GT_RED, GT_RED },
    { "mean axis -1", f_mean_m1, 1, IN(G(3, 4, 2)), GT_RED, GT_RED },
    { "mean axes 1,2 keepdim", f_mean_12k, 1, IN(G(2, 3, 4, 5)), GT_RED, GT_RED },
    { "mean_all [70000]", f_mean_all, 1, IN(GP(0, 1, 70000)), GT_RED, GT_RED },
    /* max / min (values are exact; the gradient goes to the one extreme element) */
    { "max axis 1", f_max_1, 1, IN(G(3, 4, 2)), GT_EXACT, GT_EW },
    { "max all", f_max_all, 1, IN(G(3, 4)), GT_EXACT, GT_EW },
    { "max axis 0 keepdim", f_max_0k, 1, IN(G(5, 3)), GT_EXACT, GT_EW },
    { "max axis -1 [4,5000]", f_max_m1, 1, IN(G(4, 5000)), GT_EXACT, GT_EW },
    { "min all", f_min_all, 1, IN(G(3, 4)), GT_EXACT, GT_EW },
    { "min axis -1 keepdim", f_min_m1k, 1, IN(G(3, 4, 2)), GT_EXACT, GT_EW },
    { "min axis 0 [2000,3]", f_min_0, 1, IN(G(2000, 3)), GT_EXACT, GT_EW },
    /* argmax / argmin: i64, exact */
    { "argmax axis 1", f_argmax_1, 1, IN(G(4, 7)), GT_EXACT, GT_EXACT },
    { "argmax axis 1 keepdim", f_argmax_1k, 1, IN(G(4, 7, 2)), GT_EXACT, GT_EXACT },
    { "argmax axis 0", f_argmax_0, 1, IN(G(6, 3)), GT_EXACT, GT_EXACT },
    { "argmax axis 1 [6,3000]", f_argmax_1, 1, IN(G(6, 3000)), GT_EXACT, GT_EXACT },
    { "argmin axis -1", f_argmin_m1, 1, IN(G(3, 4, 9)), GT_EXACT, GT_EXACT },
    { "argmin axis 0 keepdim", f_argmin_0k, 1, IN(G(8, 5)), GT_EXACT, GT_EXACT },
};

GT_TABLE_TESTS(gpu_matmul_reduce, cases, gt_expect_op_matches_cpu, 2000)
