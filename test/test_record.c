/* test/test_record.c — the recording API of custom_op.h reports every failure: a node holds at
 * most DG_MAX_NODE_INPUTS inputs and DG_MAX_NODE_SAVED saved tensors, an output records once,
 * NULL and freed tensors are refused, each with a message naming the op; an op whose recording
 * fails returns NULL and leaves nothing behind, instead of handing out an output cut off from
 * the graph. Inputs are taken as const dg_tensor *. */
#include "test_util.h"

static int sum_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    for (int i = 0; i < 8; i++) if (dg_node_needs_grad(n, i)) gi[i] = (dg_tensor *)g;
    return 0;
}

/* y = sum of x[0..n-1] (same shape), saving `n_save` tensors; NULL when recording fails */
static dg_tensor *sum_op(const dg_tensor *const *x, int n, int n_record, int n_save) {
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *y = dg_clone(x[0]);
    for (int i = 1; i < n; i++) y = dg_add(y, x[i]);
    dg_no_grad_end();
    if (y && dg_needs_record(x, n)) {
        dg_node *nd = dg_record("sum_op", y, x, n_record, sum_bw);
        int rc = nd ? 0 : DG_EINVAL;
        for (int k = 0; k < n_save && !rc; k++) rc = dg_node_save(nd, x[k % n]);
        if (rc) y = NULL;   /* freed with the scope; the failure said why */
    }
    if (y) y = dg_keep_in_parent(y);
    dg_scope_end(s);
    return y;
}

Test(record, saving_more_than_the_node_holds_is_an_error) {
    dg_tensor *a = dg_ones(DG_SHAPE(3), DG_F32), *b = dg_ones(DG_SHAPE(3), DG_F32);
    dg_set_requires_grad(a, true);
    const dg_tensor *in[2] = { a, b };
    size_t live = dg_live_tensors();
    dg_tensor *ok = sum_op(in, 2, 2, DG_MAX_NODE_SAVED);   /* exactly full */
    cr_assert(ok, "%s", dg_last_error());
    dg_tensor_free(ok);
    dg_clear_error();
    cr_assert_null(sum_op(in, 2, 2, DG_MAX_NODE_SAVED + 1), "the save past the last slot must fail, not be dropped");
    cr_assert_eq(dg_last_status(), DG_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "at most %d saved tensors", DG_MAX_NODE_SAVED);
    expect_error_contains("one save too many", "node_save(sum_op)", want);
    cr_assert_eq(dg_live_tensors(), live, "a failed recording leaves %zu tensors", dg_live_tensors() - live);
    dg_tensor_free(a);
    dg_tensor_free(b);
}

Test(record, more_inputs_than_a_node_holds_is_an_error) {
    dg_tensor *x[DG_MAX_NODE_INPUTS + 1];
    for (int i = 0; i <= DG_MAX_NODE_INPUTS; i++) {
        x[i] = dg_full(DG_SHAPE(2), i, DG_F64);
        dg_set_requires_grad(x[i], true);
    }
    const dg_tensor *const *in = (const dg_tensor *const *)x;
    size_t live = dg_live_tensors();
    dg_clear_error();
    cr_assert_null(sum_op(in, DG_MAX_NODE_INPUTS + 1, DG_MAX_NODE_INPUTS + 1, 0));
    char want[64];
    snprintf(want, sizeof want, "%d inputs; a node takes 0..%d", DG_MAX_NODE_INPUTS + 1, DG_MAX_NODE_INPUTS);
    expect_error_contains("one input too many", "record(sum_op)", want);
    cr_assert_eq(dg_live_tensors(), live);
    /* DG_MAX_NODE_INPUTS is fine, and its gradient reaches every input */
    dg_tensor *y = sum_op(in, DG_MAX_NODE_INPUTS, DG_MAX_NODE_INPUTS, 1);
    cr_assert(y, "%s", dg_last_error());
    dg_tensor *loss = dg_sum_all(y);
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    dg_scope *s = dg_scope_begin();
    for (int i = 0; i < DG_MAX_NODE_INPUTS; i++) cr_assert(dg_grad(x[i]) && dg_item(dg_sum_all(dg_grad(x[i]))) == 2);
    dg_scope_end(s);
    dg_tensor_free(loss);
    dg_tensor_free(y);
    for (int i = 0; i <= DG_MAX_NODE_INPUTS; i++) dg_tensor_free(x[i]);
}

Test(record, bad_calls_are_errors_with_messages) {
    dg_set_checked(true);   /* a freed handle stays readable (quarantined) so its use is reported */
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(2), DG_F32);
    dg_set_requires_grad(x, true);
    const dg_tensor *in[1] = { x };
    dg_tensor *y = dg_mul_scalar(x, 2.0);   /* made by an op: has a node */
    dg_clear_error();
    cr_assert_null(dg_record("again", y, in, 1, sum_bw));
    expect_error_contains("second node", "record(again)", "already has a node (made by 'mul_scalar')");
    dg_tensor *fresh = dg_ones(DG_SHAPE(2), DG_F32);
    cr_assert_null(dg_record("nobw", fresh, in, 1, NULL));
    expect_error_contains("no backward", "record(nobw)", "backward function is NULL");
    cr_assert_null(dg_record("noin", fresh, NULL, 1, sum_bw));
    expect_error_contains("inputs NULL", "record(noin)", "inputs is NULL");
    cr_assert_null(dg_record("neg", fresh, in, -1, sum_bw));
    expect_error_contains("negative count", "record(neg)", "-1 inputs");
    dg_tensor *dead = dg_ones(DG_SHAPE(2), DG_F32);
    dg_tensor_free(dead);
    cr_assert_null(dg_record("dead", fresh, (const dg_tensor *[]){ dead }, 1, sum_bw));
    expect_error_contains("freed input", "record", "freed");
    /* a NULL node (a failed dg_record) or tensor: refused, never a crash */
    cr_assert_eq(dg_node_save(NULL, x), DG_EINVAL);
    expect_error_contains("NULL node", "node_save", "node is NULL");
    dg_node *n = dg_record("ok", fresh, in, 1, sum_bw);
    cr_assert(n, "%s", dg_last_error());
    cr_assert_eq(dg_node_save(n, NULL), DG_EINVAL);
    expect_error_contains("NULL tensor", "node_save(ok)", "is NULL");
    cr_assert_eq(dg_node_save(n, dead), DG_ESTATE);
    expect_error_contains("freed tensor", "node_save", "freed");
    cr_assert_eq(dg_node_save(n, x), 0, "a good save after the failures: %s", dg_last_error());
    cr_assert(!dg_needs_record((const dg_tensor *[]){ NULL, dg_ones(DG_SHAPE(2), DG_F32) }, 2), "NULL entries are skipped");
    cr_assert(dg_needs_record((const dg_tensor *[]){ NULL, x }, 2));
    dg_scope_end(s);
}
