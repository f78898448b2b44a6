/* test/test_index_parity.c — indexing as torch does it: gather with an index smaller than the
 * input off the axis, negative slice bounds (Python's rules), negative axes, and the negative
 * index values torch refuses (index_select, gather). Expected values are torch 1.13's for the same
 * calls, written out. */
#include "test_util.h"

static dg_tensor *f_gather_small(dg_tensor *const *in, void *ctx) { return dg_gather(in[0], (const dg_tensor *)ctx, -1); }

Test(index_parity, gather_with_a_smaller_index) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_arange(0, 12, 1, DG_F64);
    x = dg_reshape(x, DG_SHAPE(3, 4));
    /* torch.gather(arange(12.).reshape(3, 4), 1, tensor([[3, 0], [1, 1]])) = [[3, 0], [5, 5]] */
    dg_tensor *ix = dg_from_data(DG_SHAPE(2, 2), DG_I64, (int64_t[]){ 3, 0, 1, 1 });
    dg_tensor *y = dg_gather(x, ix, 1);
    cr_assert(y && dg_dim(y, 0) == 2 && dg_dim(y, 1) == 2, "%s", dg_last_error());
    const double want[4] = { 3, 0, 5, 5 };
    for (int i = 0; i < 4; i++) cr_expect_eq(dg_get(y, (int64_t[]){ i / 2, i % 2 }), want[i], "y[%d]", i);
    /* gradient: the repeated (1, 1) gets 2, rows past the index none */
    dg_tensor *xl = dg_detach(x);
    dg_set_requires_grad(xl, true);
    cr_assert_eq(dg_backward(dg_sum_all(dg_gather(xl, ix, 1))), 0, "%s", dg_last_error());
    const double gw[12] = { 1, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0 };
    for (int i = 0; i < 12; i++) cr_expect_eq(dg_get(dg_grad(xl), (int64_t[]){ i / 4, i % 4 }), gw[i], "grad[%d]", i);
    /* along axis 0 with fewer columns, and the finite-difference check */
    dg_tensor *ix0 = dg_from_data(DG_SHAPE(1, 3), DG_I64, (int64_t[]){ 2, 0, 1 });
    y = dg_gather(x, ix0, 0);
    cr_assert(y, "%s", dg_last_error());
    cr_expect(dg_get(y, (int64_t[]){ 0, 0 }) == 8 && dg_get(y, (int64_t[]){ 0, 1 }) == 1 && dg_get(y, (int64_t[]){ 0, 2 }) == 6);
    dg_tensor *w = gc_input(DG_SHAPE(3, 5), -1, 1);
    dg_tensor *ixs = dg_from_data(DG_SHAPE(2, 3), DG_I64, (int64_t[]){ 4, 0, 4, 2, 2, 1 });
    gradcheck("gather smaller index", f_gather_small, &w, 1, ixs, 1e-6);
    dg_tensor_free(w);
    /* larger off the axis is refused */
    cr_assert_null(dg_gather(x, dg_zeros(DG_SHAPE(4, 1), DG_I64), 1));
    expect_error_contains("index larger off the axis", "gather", "larger");
    dg_scope_end(s);
}

Test(index_parity, negative_bounds_axes_and_indices) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_reshape(dg_arange(0, 12, 1, DG_F32), DG_SHAPE(3, 4));
    /* x[-2:, -3:-1] = [[5, 6], [9, 10]] */
    dg_tensor *y = dg_slice(dg_slice(x, 0, -2, INT64_MAX, 1), -1, -3, -1, 1);
    cr_assert(y && dg_dim(y, 0) == 2 && dg_dim(y, 1) == 2, "%s", dg_last_error());
    cr_expect(dg_get(y, (int64_t[]){ 0, 0 }) == 5 && dg_get(y, (int64_t[]){ 1, 1 }) == 10);
    /* x[:, -10:2] clamps the start; x[:, 3:-3] is empty */
    cr_expect_eq(dg_dim(dg_slice(x, 1, -10, 2, 1), 1), 2);
    cr_expect_eq(dg_dim(dg_slice(x, 1, 3, -3, 1), 1), 0);
    /* negative axes */
    cr_expect_eq(dg_dim(dg_index_select(x, dg_from_data(DG_SHAPE(1), DG_I64, (int64_t[]){ 3 }), -1), 1), 1);
    cr_expect_eq(dg_get(dg_sum(x, (int[]){ -2 }, 1, false), (int64_t[]){ 1 }), 15.0);
    /* torch refuses negative index values in index_select and gather ("index out of range") */
    cr_assert_null(dg_index_select(x, dg_from_data(DG_SHAPE(1), DG_I64, (int64_t[]){ -1 }), 0));
    expect_error_contains("index_select -1", "-1", NULL);
    cr_assert_null(dg_gather(x, dg_from_data(DG_SHAPE(1, 1), DG_I64, (int64_t[]){ -1 }), 1));
    expect_error_contains("gather -1", "-1", NULL);
    dg_scope_end(s);
}
