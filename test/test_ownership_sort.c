/* test/test_ownership_sort.c — test/test_ownership.c's check for sort/argsort/topk, cumsum, prod,
 * scatter_add and scatter: called with no scope open, each leaves exactly its results to the
 * caller (both of sort's and topk's, or the one asked for), with plain inputs and with inputs that
 * require gradients; a refused call leaves nothing. */
#include <criterion/criterion.h>
#include <dygraph.h>

static void expect_no_leak(size_t before, const char *what) {
    cr_expect_eq(dg_live_tensors(), before, "%s: %zu tensor(s) left behind with no scope open", what, dg_live_tensors() - before);
}

static void run_all(bool grad) {
    size_t before = dg_live_tensors();
    dg_manual_seed(5);
    dg_tensor *x = dg_randn(DG_SHAPE(3, 5), DG_F32), *src = dg_randn(DG_SHAPE(3, 5), DG_F32);
    int64_t iv[6] = { 0, 4, 4, 1, 2, 3 };
    dg_tensor *ix = dg_from_data(DG_SHAPE(2, 3), DG_I64, iv);
    dg_tensor *ix2 = dg_from_data(DG_SHAPE(1, 3), DG_I64, (const int64_t[]){2, 0, 1});
    cr_assert(x && src && ix && ix2, "%s", dg_last_error());
    if (grad) cr_assert(dg_set_requires_grad(x, true) == 0 && dg_set_requires_grad(src, true) == 0, "%s", dg_last_error());
    const int ax1[] = {1};
    dg_tensor *v = NULL, *i = NULL;
    cr_assert_eq(dg_sort(x, 1, true, &v, &i), 0, "%s", dg_last_error());
    dg_tensor_free(v);
    dg_tensor_free(i);
    cr_assert_eq(dg_sort(x, 0, false, &v, NULL), 0, "%s", dg_last_error());
    dg_tensor_free(v);
    cr_assert_eq(dg_topk(x, 2, 1, true, &v, &i), 0, "%s", dg_last_error());
    dg_tensor_free(v);
    dg_tensor_free(i);
    cr_assert_eq(dg_topk(x, 2, 0, false, NULL, &i), 0, "%s", dg_last_error());
    dg_tensor_free(i);
    cr_assert_neq(dg_topk(x, 9, 1, true, &v, &i), 0);   /* refused: nothing made */
    dg_clear_error();
    dg_tensor *r[] = {
        dg_argsort(x, -1, false), dg_cumsum(x, 1), dg_prod(x, ax1, 1, false), dg_prod(x, NULL, 0, true),
        dg_scatter_add(x, 1, ix, src), dg_scatter(x, 0, ix2, src),
    };
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) {
        cr_expect(r[k], "op %zu failed: %s", k, dg_last_error());
        dg_tensor_free(r[k]);
    }
    dg_tensor_free(x);
    dg_tensor_free(src);
    dg_tensor_free(ix);
    dg_tensor_free(ix2);
    expect_no_leak(before, grad ? "inputs require grad" : "plain inputs");
}

Test(ownership_sort, no_scope_plain_inputs) { run_all(false); }
Test(ownership_sort, no_scope_inputs_require_grad) { run_all(true); }
