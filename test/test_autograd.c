/* test/test_autograd.c — the tape: accumulation across uses and calls, retain_graph, the error
 * on a freed graph, no_grad, detach, stop_gradient, leaf hooks, and a custom op. */
#include "test_util.h"

Test(autograd, accumulates_across_uses_and_calls) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_full(DG_SHAPE(3), 2.0, DG_F32);
    dg_set_requires_grad(x, true);
    /* y = x*x + 3x  -> dy/dx = 2x + 3 = 7 */
    dg_tensor *y = dg_sum_all(dg_add(dg_mul(x, x), dg_mul_scalar(x, 3)));
    cr_assert_eq(dg_backward(y), 0, "%s", dg_last_error());
    cr_assert_float_eq(dg_get(dg_grad(x), (int64_t[]){1}), 7.0, 1e-6);
    dg_tensor *y2 = dg_sum_all(dg_mul_scalar(x, 2));
    dg_backward(y2);
    cr_assert_float_eq(dg_get(dg_grad(x), (int64_t[]){1}), 9.0, 1e-6, "grads accumulate until cleared");
    dg_clear_grad(x);
    cr_assert_null(dg_grad(x));
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(autograd, freed_graph_error_and_retain_graph) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *x = dg_full(DG_SHAPE(2), 1.0, DG_F32);
    dg_set_requires_grad(x, true);
    dg_tensor *y = dg_sum_all(dg_exp(x));
    dg_backward_params bwp = dg_backward_default_params();
    bwp.retain_graph = true;
    cr_assert_eq(dg_backward_ext(y, bwp), 0);
    cr_assert_eq(dg_backward(y), 0, "retained graph can be walked again");
    cr_assert_float_eq(dg_get(dg_grad(x), (int64_t[]){0}), 2 * exp(1.0), 1e-5);
    int rc = dg_backward(y);
    cr_assert_eq(rc, DG_ESTATE);
    cr_assert(strstr(dg_last_error(), "freed") && strstr(dg_last_error(), "retain_graph"), "%s", dg_last_error());
    dg_clear_error();
    dg_scope_end(s);
}

Test(autograd, no_grad_detach_stop_gradient) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(2), DG_F32);
    dg_set_requires_grad(x, true);
    dg_no_grad_begin();
    dg_tensor *y = dg_mul(x, x);
    dg_no_grad_end();
    cr_assert(!dg_requires_grad(y), "made under no_grad");
    dg_tensor *d = dg_detach(dg_mul(x, x));
    cr_assert(!dg_requires_grad(d) && dg_is_leaf(d));
    dg_tensor *w = dg_ones(DG_SHAPE(2), DG_F32);
    dg_set_stop_gradient(w, true);
    dg_tensor *z = dg_sum_all(dg_mul(x, w));
    cr_assert_eq(dg_backward(z), 0);
    cr_assert_null(dg_grad(w));
    cr_assert_not_null(dg_grad(x));
    cr_assert_str_eq(dg_grad_fn_name(z), "sum");
    dg_clear_error();
    cr_assert_neq(dg_backward(d), 0, "backward on a tensor without grad is an error");
    dg_clear_error();
    dg_scope_end(s);
}

typedef struct { int calls; dg_tensor *order[4]; } hook_log;
static void on_ready(dg_tensor *leaf, void *user) {
    hook_log *h = user;
    cr_assert_not_null(dg_grad(leaf), "hook fires after the gradient is in place");
    h->order[h->calls++] = leaf;
}

Test(autograd, grad_ready_hooks_fire_once_when_complete) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *w1 = dg_ones(DG_SHAPE(3, 3), DG_F32), *w2 = dg_ones(DG_SHAPE(3, 1), DG_F32);
    dg_set_requires_grad(w1, true);
    dg_set_requires_grad(w2, true);
    hook_log log = {0};
    dg_register_grad_hook(w1, on_ready, &log);
    dg_register_grad_hook(w2, on_ready, &log);
    dg_tensor *x = dg_ones(DG_SHAPE(2, 3), DG_F32);
    /* w1 used twice: its hook must wait for both contributions */
    dg_tensor *h = dg_add(dg_matmul(x, w1), dg_matmul(dg_matmul(x, w1), w1));
    dg_tensor *loss = dg_sum_all(dg_matmul(h, w2));
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    cr_assert_eq(log.calls, 2);
    cr_assert_eq(log.order[0], w2, "the last layer's parameter is ready first");
    cr_assert_eq(log.order[1], w1);
    dg_scope_end(s);
}

/* A custom op written with the public API: y = x^3, dy/dx = 3x^2. */
static int cube_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *x = dg_node_saved(n, 0);
    gi[0] = dg_mul(g, dg_mul_scalar(dg_mul(x, x), 3.0));
    return 0;
}
/* README's custom op, as written there */
static dg_tensor *cube(const dg_tensor *x) {
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *y = dg_mul(dg_mul(x, x), x);
    dg_no_grad_end();
    if (y && dg_needs_record(&x, 1)) {
        dg_node *n = dg_record("cube", y, &x, 1, cube_bw);
        if (!n || dg_node_save(n, x) != 0) y = NULL;
    }
    if (y) y = dg_keep_in_parent(y);
    dg_scope_end(s);
    return y;
}
static dg_tensor *cube_fn(dg_tensor *const *in, void *ctx) { return cube(in[0]); }

Test(autograd, custom_op) {
    dg_tensor *x = gc_input(DG_SHAPE(4), -2, 2);
    gradcheck("cube", cube_fn, &x, 1, NULL, 1e-6);
    dg_tensor_free(x);
}

Test(autograd, custom_op_leaves_nothing_behind_without_a_scope) {
    size_t before = dg_live_tensors();
    dg_tensor *x = dg_ones(DG_SHAPE(4), DG_F32);
    cr_assert_eq(dg_set_requires_grad(x, true), 0);
    dg_tensor *y = cube(x);
    cr_assert(y, "%s", dg_last_error());
    dg_tensor *loss = dg_sum_all(y);
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    dg_tensor_free(loss);
    dg_tensor_free(y);
    dg_tensor_free(x);
    cr_expect_eq(dg_live_tensors(), before, "%zu tensors left", dg_live_tensors() - before);
}

Test(autograd, long_chain_frees_without_recursion) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_ones(DG_SHAPE(1), DG_F32);
    dg_set_requires_grad(x, true);
    dg_tensor *y = x;
    for (int i = 0; i < 100000; i++) y = dg_add_scalar(y, 0.0);
    cr_assert_eq(dg_backward(y), 0);
    cr_assert_float_eq(dg_get(dg_grad(x), (int64_t[]){0}), 1.0, 0);
    dg_scope_end(s);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(autograd, explicit_grad_output) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_full(DG_SHAPE(2, 2), 3.0, DG_F32);
    dg_set_requires_grad(x, true);
    dg_tensor *y = dg_mul_scalar(x, 2.0);
    dg_tensor *go = dg_full(DG_SHAPE(2, 2), 0.5, DG_F32);
    dg_backward_params bwp2 = dg_backward_default_params();
    bwp2.grad_output = go;
    cr_assert_eq(dg_backward_ext(y, bwp2), 0);
    cr_assert_float_eq(dg_get(dg_grad(x), (int64_t[]){1, 1}), 1.0, 0);
    dg_clear_error();
    dg_tensor *y2 = dg_mul_scalar(x, 2.0);
    cr_assert_neq(dg_backward(y2), 0, "non-scalar output needs grad_output");
    cr_assert(strstr(dg_last_error(), "grad_output"));
    dg_clear_error();
    dg_scope_end(s);
}
