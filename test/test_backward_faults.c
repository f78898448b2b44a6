/* test/test_backward_faults.c — dg_backward when something inside the walk fails (issue 30.2).
 * Every tensor allocation of one backward is made to fail in turn (the CPU allocator's fault
 * hook, eager/internal.h), on a graph where a node receives two gradients (the sum the walk
 * adds), a leaf receives several, and a recompute segment runs a nested walk over a parameter
 * that is also used outside it. Each time: dg_backward either fails with a message naming a
 * node, or succeeds with the reference gradients; a grad-ready hook never fires for a gradient
 * that is incomplete; and the next, unfaulted backward gives the reference gradients with every
 * hook fired once (the leaf counts were left as they were). */
#include "test_util.h"
#include "../eager/internal.h"

enum { NLEAF = 3 };
typedef struct fault_net { dg_tensor *x, *w[NLEAF]; } fault_net;

static dg_tensor *segment(void *ctx, const dg_tensor *h) {
    const fault_net *n = ctx;
    return dg_tanh(dg_matmul(h, n->w[2]));   /* [5,4] x [4,4] */
}

/* loss = sum(relu(h) @ w1) + 0.5 sum(reshape(h)) + sum(recompute(tanh(z @ w2))) + sum(w0 * w0)
 *        + sum(h^T * h^T),
 * h = x @ w0, z = h @ w2: h's node gets five gradients (the sum the walk adds); w0 two; w2 one
 * from the nested walk and one from z's node, which runs after the recompute node (it made the
 * segment's input), so w2's count is still the outer walk's while the nested walk runs. */
static dg_tensor *forward(fault_net *n) {
    dg_tensor *h = dg_matmul(n->x, n->w[0]);
    dg_tensor *a = dg_sum_all(dg_matmul(dg_relu(h), n->w[1]));
    dg_tensor *b = dg_mul_scalar(dg_sum_all(dg_reshape(h, DG_SHAPE(20))), 0.5);
    dg_tensor *c = dg_sum_all(dg_recompute("seg", segment, n, dg_matmul(h, n->w[2])));
    dg_tensor *d = dg_sum_all(dg_mul(n->w[0], n->w[0]));
    /* two consumers whose gradients for h are transposed views: the walk's sum of them allocates */
    dg_tensor *e = dg_sum_all(dg_mul(dg_transpose(h, 0, 1), dg_transpose(h, 0, 1)));
    return dg_add(dg_add(dg_add(a, b), dg_add(c, d)), e);
}

typedef struct hook_log { int fired; bool complete; const float *want; int64_t numel; } hook_log;
static hook_log g_log[NLEAF];

static bool grad_is(const dg_tensor *leaf, const float *want, int64_t numel) {
    dg_tensor *g = dg_grad(leaf);
    if (!g || dg_numel(g) != numel) return false;
    const float *v = dg_data(g);
    for (int64_t i = 0; i < numel; i++)
        if (fabsf(v[i] - want[i]) > 1e-5f * fmaxf(1.f, fabsf(want[i]))) return false;
    return true;
}

static void on_ready(dg_tensor *leaf, void *user) {
    hook_log *l = user;
    l->fired++;
    l->complete = l->want ? grad_is(leaf, l->want, l->numel) : true;
}

static void reset_logs(void) {
    for (int i = 0; i < NLEAF; i++) g_log[i].fired = 0, g_log[i].complete = false;
}

Test(backward_faults, every_allocation_of_the_walk_failing_in_turn) {
    dg_set_num_threads(1);   /* the same rounding in every run */
    fault_net n;
    n.x = dg_randn(DG_SHAPE(5, 3), DG_F32);
    int64_t shapes[NLEAF][2] = { { 3, 4 }, { 4, 2 }, { 4, 4 } };   /* w0, w1, w2 */
    for (int i = 0; i < NLEAF; i++) {
        n.w[i] = dg_randn(DG_SHAPE(shapes[i][0], shapes[i][1]), DG_F32);
        dg_set_requires_grad(n.w[i], true);
        cr_assert_eq(dg_register_grad_hook(n.w[i], on_ready, &g_log[i]), 0);
    }

    /* the reference: gradients and how many allocations one backward makes */
    float *want[NLEAF];
    dg_scope *s = dg_scope_begin();
    dg_tensor *loss = forward(&n);
    cr_assert(loss, "%s", dg_last_error());
    int64_t before = dg_cpu_alloc_count();
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    int64_t allocs = dg_cpu_alloc_count() - before;
    dg_scope_end(s);
    cr_assert_gt(allocs, 5, "the walk allocated %lld times", (long long)allocs);
    for (int i = 0; i < NLEAF; i++) {
        cr_assert_eq(g_log[i].fired, 1, "leaf %d's hook fired %d times", i, g_log[i].fired);
        g_log[i].numel = dg_numel(n.w[i]);
        want[i] = malloc(sizeof(float) * (size_t)g_log[i].numel);
        memcpy(want[i], dg_data(dg_grad(n.w[i])), sizeof(float) * (size_t)g_log[i].numel);
        g_log[i].want = want[i];
    }

    int failed = 0, sum_failed = 0, nested_failed = 0;
    for (int64_t k = 1; k <= allocs; k++) {
        for (int i = 0; i < NLEAF; i++) dg_clear_grad(n.w[i]);
        reset_logs();
        s = dg_scope_begin();
        loss = forward(&n);
        cr_assert(loss, "%s", dg_last_error());
        dg_clear_error();
        dg_cpu_alloc_fault(k);
        int rc = dg_backward(loss);
        dg_cpu_alloc_fault(0);
        dg_scope_end(s);
        if (rc) {
            failed++;
            const char *msg = dg_last_error();
            cr_expect(strstr(msg, "backward of '") || strstr(msg, "backward: "), "allocation %lld: '%s'", (long long)k, msg);
            cr_expect(strstr(msg, "out of memory"), "allocation %lld: the cause is lost: '%s'", (long long)k, msg);
            cr_log_info("allocation %lld: %s\n", (long long)k, msg);
            if (strstr(msg, "adding its gradient")) sum_failed++;
            if (strstr(msg, "backward of 'seg' failed: backward")) nested_failed++;
        }
        for (int i = 0; i < NLEAF; i++) {
            cr_expect_leq(g_log[i].fired, 1, "allocation %lld: leaf %d's hook fired %d times", (long long)k, i, g_log[i].fired);
            if (g_log[i].fired)
                cr_expect(g_log[i].complete, "allocation %lld (%s): leaf %d's hook fired on an incomplete gradient",
                          (long long)k, rc ? "failed" : "succeeded", i);
            if (!rc) {
                cr_expect_eq(g_log[i].fired, 1, "allocation %lld: backward succeeded but leaf %d's hook did not fire", (long long)k, i);
                cr_expect(grad_is(n.w[i], want[i], g_log[i].numel),
                          "allocation %lld: backward succeeded with a wrong gradient for leaf %d", (long long)k, i);
            }
        }
        /* the next backward is untouched by the failure */
        for (int i = 0; i < NLEAF; i++) dg_clear_grad(n.w[i]);
        reset_logs();
        s = dg_scope_begin();
        cr_assert_eq(dg_backward(forward(&n)), 0, "after allocation %lld: %s", (long long)k, dg_last_error());
        dg_scope_end(s);
        for (int i = 0; i < NLEAF; i++) {
            cr_expect_eq(g_log[i].fired, 1, "after allocation %lld failed: leaf %d's hook fired %d times", (long long)k, i,
                         g_log[i].fired);
            cr_expect(g_log[i].complete && grad_is(n.w[i], want[i], g_log[i].numel),
                      "after allocation %lld failed: leaf %d's gradient is wrong", (long long)k, i);
        }
    }
    cr_log_info("backward_faults: %lld allocations, %d failed the walk (%d in a sum of two gradients, %d in the nested walk)\n",
                (long long)allocs, failed, sum_failed, nested_failed);
    cr_expect_gt(failed, 0);
    cr_expect_gt(sum_failed, 0, "no failure hit the sum of a node's two gradients");
    cr_expect_gt(nested_failed, 0, "no failure hit the nested walk");
    for (int i = 0; i < NLEAF; i++) { dg_tensor_free(n.w[i]); free(want[i]); }
    dg_tensor_free(n.x);
}

/* backward on a leaf itself, its accumulation failing: an error, no hook */
Test(backward_faults, a_leaf_seed_failing) {
    dg_tensor *w = dg_randn(DG_SHAPE(3), DG_F32);
    dg_set_requires_grad(w, true);
    hook_log log = { 0 };
    cr_assert_eq(dg_register_grad_hook(w, on_ready, &log), 0);
    dg_tensor *go = dg_ones(DG_SHAPE(3), DG_F32);
    dg_backward_params p = dg_backward_default_params();
    p.grad_output = go;
    int64_t before = dg_cpu_alloc_count();
    cr_assert_eq(dg_backward_ext(w, p), 0, "%s", dg_last_error());
    int64_t allocs = dg_cpu_alloc_count() - before;
    cr_assert_eq(log.fired, 1);
    for (int64_t k = 1; k <= allocs; k++) {
        dg_clear_grad(w);
        log.fired = 0;
        dg_cpu_alloc_fault(k);
        int rc = dg_backward_ext(w, p);
        dg_cpu_alloc_fault(0);
        if (rc) {
            cr_expect_eq(log.fired, 0, "allocation %lld: a failed backward fired the hook", (long long)k);
            cr_expect(strstr(dg_last_error(), "out of memory"), "%s", dg_last_error());
        } else {
            cr_expect_eq(log.fired, 1);
        }
        log.fired = 0;
        dg_clear_grad(w);
        cr_assert_eq(dg_backward_ext(w, p), 0, "%s", dg_last_error());
        cr_expect_eq(log.fired, 1, "after allocation %lld: the hook fired %d times", (long long)k, log.fired);
    }
    dg_tensor_free(go);
    dg_tensor_free(w);
}

/* A backward rule that runs a walk of its own which fails, and recovers (it computes its gradient
 * another way): the outer walk goes on, so the inner walk must leave the counts of a leaf both
 * share as the outer walk had them. Here w is counted once by the outer walk (the node that
 * scaled it, run after this rule) and once by the inner one. */
static int refuse_backward(dg_node *node, const dg_tensor *g, dg_tensor **gin) {
    DG_ERR(DG_EINVAL, "refuse: this rule always fails");
    return DG_EINVAL;
}
static int recovering_backward(dg_node *node, const dg_tensor *g, dg_tensor **gin) {
    dg_tensor *w = (dg_tensor *)dg_node_saved(node, 0);
    int depth = dg_grad_mode_swap(0);   /* rules run under no-grad; the inner graph must record */
    dg_no_grad_begin();
    dg_tensor *inner = dg_clone(w);
    dg_no_grad_end();
    dg_tensor *in[1] = { w };
    dg_node *nd = dg_record("refuse", inner, (const dg_tensor *const *)in, 1, refuse_backward);
    int rc = nd ? dg_backward(dg_sum_all(inner)) : -1;
    dg_grad_mode_swap(depth);
    cr_assert(nd);
    cr_assert_neq(rc, 0, "the inner walk was meant to fail");
    gin[0] = dg_clone(g);   /* the recovery */
    return 0;
}
static dg_tensor *recovering_op(const dg_tensor *x, const dg_tensor *w) {
    dg_no_grad_begin();
    dg_tensor *y = dg_clone(x);
    dg_no_grad_end();
    const dg_tensor *in[1] = { x };
    dg_node *nd = dg_record("recovering", y, in, 1, recovering_backward);
    cr_assert(nd, "%s", dg_last_error());
    cr_assert_eq(dg_node_save(nd, w), 0);
    return y;
}

Test(backward_faults, a_failed_inner_walk_keeps_the_outer_counts) {
    dg_tensor *w = dg_ones(DG_SHAPE(3), DG_F32);
    dg_set_requires_grad(w, true);
    hook_log log = { 0 };
    cr_assert_eq(dg_register_grad_hook(w, on_ready, &log), 0);
    for (int round = 0; round < 2; round++) {
        log.fired = 0;
        dg_clear_grad(w);
        dg_scope *s = dg_scope_begin();
        dg_tensor *z = dg_mul_scalar(w, 3.0);
        dg_tensor *loss = dg_sum_all(recovering_op(z, w));
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        dg_scope_end(s);
        cr_expect_eq(log.fired, 1, "round %d: w's hook fired %d times", round, log.fired);
        dg_tensor *gw = dg_grad(w);
        cr_assert(gw);
        for (int i = 0; i < 3; i++) cr_expect_float_eq(((const float *)dg_data(gw))[i], 3.f, 1e-6, "round %d", round);
    }
    dg_tensor_free(w);
}
