/* test/gpu/test_gpu_sort.c — CPU vs gpu:0 for sort/argsort/topk (eager/cuda/sort.cu against the
 * CPU's qsort: the same stable order, ties and all, so indices must match exactly, on both of its
 * paths: the rank kernel for short lines, the bitonic stages for long ones), cumsum and prod
 * (compositions: they must stay on the device), scatter_add (the atomicAdd scatter, repeats
 * included) and scatter. */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define G64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define C(...) { GT_CONST, GT_SHAPE(__VA_ARGS__), 0, 1 }
#define INTS(hi, ...) { GT_INTF, GT_SHAPE(__VA_ARGS__), 0, hi }
#define LAB(hi, ...) { GT_LABELS, GT_SHAPE(__VA_ARGS__), 0, hi }
#define LAB32(hi, ...) { GT_LABELS32, GT_SHAPE(__VA_ARGS__), 0, hi }
#define TOL_F64 { 1e-10, 1e-12, false }

static dg_tensor *values(const dg_tensor *x, int axis, bool desc) {
    dg_tensor *v = NULL;
    return dg_sort(x, axis, desc, &v, NULL) == 0 ? v : NULL;
}
static dg_tensor *topk_v(const dg_tensor *x, int64_t k, int axis, bool largest) {
    dg_tensor *v = NULL;
    return dg_topk(x, k, axis, largest, &v, NULL) == 0 ? v : NULL;
}
static dg_tensor *topk_i(const dg_tensor *x, int64_t k, int axis, bool largest) {
    dg_tensor *i = NULL;
    return dg_topk(x, k, axis, largest, NULL, &i) == 0 ? i : NULL;
}
/* k distinct positions per row of [rows, n]: the first k of a random permutation */
static dg_tensor *distinct(const dg_tensor *noise, int64_t k) {
    return dg_contiguous(dg_slice(dg_argsort(noise, 1, false), 1, 0, k, 1));
}
/* row 1 of a [3, 5] input gets one zero, row 2 two (the gradient at a zero is the rest's product) */
static dg_tensor *with_zeros(dg_tensor *x) {
    dg_tensor *m = dg_from_data(DG_SHAPE(3, 5), DG_F32, (const float[]){1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1});
    return m ? dg_mul(x, m) : NULL;
}
static const int ax1[] = {1}, ax02[] = {0, 2};

F(f_sort1, values(in[0], 1, false))
F(f_sort0, values(in[0], 0, false))
F(f_sort_desc, values(in[0], -1, true))
F(f_argsort_ties, dg_argsort(in[0], -1, false))
F(f_argsort_ties_desc, dg_argsort(in[0], 0, true))
F(f_argsort_i64, dg_argsort(in[0], 1, true))
F(f_topk, topk_v(in[0], 3, -1, true))
F(f_topk_small, topk_v(in[0], 2, 0, false))
F(f_topk_ties, topk_i(in[0], 4, 1, true))
F(f_cumsum1, dg_cumsum(in[0], 1))
F(f_cumsum_last, dg_cumsum(in[0], -1))
F(f_prod1, dg_prod(in[0], ax1, 1, false))
F(f_prod02, dg_prod(in[0], ax02, 2, true))
F(f_prod_all, dg_prod(in[0], NULL, 0, false))
F(f_prod_zeros, dg_prod(with_zeros(in[0]), ax1, 1, false))
F(f_scatter_add1, dg_scatter_add(in[0], 1, in[2], in[1]))
F(f_scatter_add0, dg_scatter_add(in[0], 0, in[2], in[1]))
F(f_scatter1, dg_scatter(in[0], 1, distinct(in[2], 3), in[1]))

static const gt_op_case cases[] = {
    /* lines up to 64: the rank kernel; longer: the bitonic stages (pads when not a power of two) */
    { "sort axis 1", f_sort1, 1, IN(G(3, 5, 4)), GT_EXACT, GT_EXACT },
    { "sort descending, long lines", f_sort_desc, 1, IN(G(3, 700)), GT_EXACT, GT_EXACT },
    { "sort, a power-of-two line", f_sort_desc, 1, IN(G(2, 128)), GT_EXACT, GT_EXACT },
    { "sort f64", f_sort1, 1, IN(G64(4, 9, 2)), GT_EXACT, GT_EXACT },
    { "sort f64 long lines, axis 0", f_sort0, 1, IN(G64(130, 3)), GT_EXACT, GT_EXACT },
    { "argsort with ties (stable)", f_argsort_ties, 1, IN(INTS(4, 5, 33)), GT_EXACT, GT_EXACT },
    { "argsort with ties, long lines", f_argsort_ties, 1, IN(INTS(5, 3, 300)), GT_EXACT, GT_EXACT },
    { "argsort descending with ties, axis 0", f_argsort_ties_desc, 1, IN(INTS(3, 40, 3)), GT_EXACT, GT_EXACT },
    { "argsort descending with ties, axis 0, long", f_argsort_ties_desc, 1, IN(INTS(4, 200, 3)), GT_EXACT, GT_EXACT },
    { "argsort int64 descending", f_argsort_i64, 1, IN(LAB(6, 4, 50)), GT_EXACT, GT_EXACT },
    { "argsort int64 descending, long", f_argsort_i64, 1, IN(LAB(6, 4, 150)), GT_EXACT, GT_EXACT },
    { "argsort int32 descending", f_argsort_i64, 1, IN(LAB32(6, 4, 50)), GT_EXACT, GT_EXACT },
    { "argsort int32 descending, long", f_argsort_i64, 1, IN(LAB32(6, 4, 150)), GT_EXACT, GT_EXACT },
    { "topk largest", f_topk, 1, IN(G(4, 11)), GT_EXACT, GT_EXACT },
    { "topk smallest axis 0", f_topk_small, 1, IN(G(6, 3, 2)), GT_EXACT, GT_EXACT },
    { "topk indices among ties", f_topk_ties, 1, IN(INTS(3, 3, 20)), GT_EXACT, GT_EXACT },
    { "topk indices among ties, long", f_topk_ties, 1, IN(INTS(3, 3, 100)), GT_EXACT, GT_EXACT },
    { "cumsum axis 1", f_cumsum1, 1, IN(G(3, 37, 2)), GT_RED, GT_RED },
    { "cumsum last f64", f_cumsum_last, 1, IN(G64(2, 100)), TOL_F64, TOL_F64 },
    { "prod axis 1", f_prod1, 1, IN({ GT_GRAD, GT_SHAPE(3, 5, 2), 0.5, 1.5 }), GT_RED, GT_RED },
    { "prod axes 0,2 keepdim", f_prod02, 1, IN({ GT_GRAD, GT_SHAPE(3, 2, 3), 0.5, 1.5 }), GT_RED, GT_RED },
    { "prod all f64", f_prod_all, 1, IN({ GT_GRAD64, GT_SHAPE(2, 3), 0.5, 1.5 }), TOL_F64, TOL_F64 },
    { "prod with zeros", f_prod_zeros, 1, IN({ GT_GRAD, GT_SHAPE(3, 5), 0.5, 1.5 }), GT_RED, GT_RED },
    { "scatter_add axis 1, repeats", f_scatter_add1, 3, IN(G(4, 5), G(4, 3), LAB(5, 4, 3)), GT_RED, GT_EXACT },
    { "scatter_add axis 0, src larger", f_scatter_add0, 3, IN(G(3, 4), G(6, 5), LAB(3, 5, 4)), GT_RED, GT_EXACT },
    { "scatter_add f64", f_scatter_add1, 3, IN(G64(4, 5), G64(4, 3), LAB(5, 4, 3)), TOL_F64, GT_EXACT },
    { "scatter axis 1", f_scatter1, 3, IN(G(4, 6), G(4, 4), C(4, 6)), GT_EXACT, GT_EXACT },
    { "scatter axis 1, positions from a long argsort", f_scatter1, 3, IN(G(4, 90), G(4, 4), C(4, 90)), GT_EXACT, GT_EXACT },
};

GT_TABLE_TESTS(gpu_sort, cases, gt_expect_op_matches_cpu, 3700)

/* On the device, bad indices and repeated scatter positions are refused with the CPU's messages,
 * and results stay on the device. */
Test(gpu_sort, refusals_on_the_device) {
    gt_gpu_begin();
    gt_use(gt_dut_name());
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(3, 4), DG_F32), *src = dg_randn(DG_SHAPE(3, 4), DG_F32);
    dg_tensor *far = dg_cast(dg_full(DG_SHAPE(3, 2), 4, DG_F32), DG_I64);
    dg_tensor *twice = dg_cast(dg_full(DG_SHAPE(1, 2), 1, DG_F32), DG_I64);
    cr_assert(x && src && far && twice, "%s", dg_last_error());
    dg_clear_error();
    cr_expect_null(dg_scatter_add(x, 1, far, src), "scatter_add with index 4 of 4 columns must fail");
    cr_expect(strstr(dg_last_error(), "scatter_add: index 4 at position 0 is out of range [0, 4)"), "message: %s", dg_last_error());
    dg_clear_error();
    cr_expect_null(dg_scatter(x, 1, twice, src), "scatter writing position 1 twice must fail");
    cr_expect(strstr(dg_last_error(), "names one position of the input [3, 4] 2 times"), "message: %s", dg_last_error());
    dg_clear_error();
    dg_tensor *v = NULL, *ix = NULL;
    cr_expect_neq(dg_topk(x, 5, 1, true, &v, &ix), 0, "topk with k 5 of 4 must fail");
    dg_clear_error();
    cr_assert_eq(dg_topk(x, 2, 1, true, &v, &ix), 0, "%s", dg_last_error());
    gt_expect_on_gpu("topk", "values", v);
    gt_expect_on_gpu("topk", "indices", ix);
    gt_expect_on_gpu("argsort", "indices", dg_argsort(x, 0, true));
    dg_scope_end(s);
    gt_use("cpu");
}
