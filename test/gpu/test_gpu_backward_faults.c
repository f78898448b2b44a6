/* test/gpu/test_gpu_backward_faults.c — dg_backward on the GPU when a device allocation inside the
 * walk fails (issue 30.2; the CPU's sweep is test/test_backward_faults.c). Under the emulator,
 * DGEMU_FAIL=cudaMalloc:N makes the Nth cudaMalloc from when the value is set, and every later
 * one, fail (test/cuda_emu/runtime.cc); the pool's cache is emptied before each backward so its
 * allocations reach cudaMalloc. For every N up to the reference walk's count: dg_backward fails
 * with a message naming a node, no grad-ready hook fires on an incomplete gradient, and the next
 * backward gives the reference gradients with each hook fired once. On a real GPU the variable
 * does nothing and only that last part is checked. */
#include "gpu_compare.h"

enum { NLEAF = 2 };
typedef struct hook_log { int fired; bool complete; const double *want; int64_t numel; } hook_log;
static hook_log g_log[NLEAF];

static bool grad_is(const dg_tensor *leaf, const double *want, int64_t numel) {
    dg_tensor *g = dg_grad(leaf);
    if (!g || dg_numel(g) != numel) return false;
    double *v = gt_host_f64(g, "backward_faults", "grad");
    bool ok = true;
    for (int64_t i = 0; i < numel && ok; i++) ok = fabs(v[i] - want[i]) <= 1e-5 * fmax(1.0, fabs(want[i]));
    free(v);
    return ok;
}
static void on_ready(dg_tensor *leaf, void *user) {
    hook_log *l = user;
    l->fired++;
    l->complete = l->want ? grad_is(leaf, l->want, l->numel) : true;
}

/* h = x @ w0 feeds three consumers (two of them transposed views: the walk adds their gradients
 * into a fresh tensor); w0 is also used directly, so it gets two gradients */
static dg_tensor *forward(dg_tensor *x, dg_tensor *const *w) {
    dg_tensor *h = dg_matmul(x, w[0]);
    dg_tensor *a = dg_sum_all(dg_matmul(dg_relu(h), w[1]));
    dg_tensor *e = dg_sum_all(dg_mul(dg_transpose(h, 0, 1), dg_transpose(h, 0, 1)));
    dg_tensor *d = dg_sum_all(dg_mul(w[0], w[0]));
    return dg_add(dg_add(a, e), d);
}

static uint64_t device_mallocs(void) {
    dg_memory_stats m;
    cr_assert_eq(dg_memory_stats_get(gt_dut(), &m), 0, "%s", dg_last_error());
    return m.device_mallocs;
}

Test(gpu_backward_faults, every_device_allocation_of_the_walk_failing_in_turn) {
    gt_gpu_begin();
    gt_use(gt_dut_name());
    bool emulated = getenv("DGEMU_CALLS_FILE") != NULL;   /* set by test/cuda_emu/run_tests.sh */
    dg_manual_seed(3);
    dg_tensor *x = dg_randn((dg_shape){ 2, { 192, 256 } }, DG_F32);   /* h: 768 KB, two to a small segment */
    dg_tensor *w[NLEAF] = { dg_randn((dg_shape){ 2, { 256, 1024 } }, DG_F32), dg_randn((dg_shape){ 2, { 1024, 8 } }, DG_F32) };
    double *want[NLEAF];
    for (int i = 0; i < NLEAF; i++) {
        dg_set_requires_grad(w[i], true);
        cr_assert_eq(dg_register_grad_hook(w[i], on_ready, &g_log[i]), 0);
    }
    dg_scope *s = dg_scope_begin();
    dg_tensor *loss = forward(x, w);
    cr_assert(loss, "%s", dg_last_error());
    dg_empty_cache(gt_dut());
    uint64_t before = device_mallocs();
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    int64_t mallocs = (int64_t)(device_mallocs() - before);
    dg_scope_end(s);
    for (int i = 0; i < NLEAF; i++) {
        cr_assert_eq(g_log[i].fired, 1);
        g_log[i].numel = dg_numel(w[i]);
        want[i] = gt_host_f64(dg_grad(w[i]), "backward_faults", "reference grad");
        g_log[i].want = want[i];
    }
    if (emulated) cr_assert_gt(mallocs, 0, "the walk made no device allocation to fail");

    int failed = 0;
    for (int64_t k = 1; k <= mallocs; k++) {
        for (int i = 0; i < NLEAF; i++) { dg_clear_grad(w[i]); g_log[i].fired = 0; g_log[i].complete = false; }
        s = dg_scope_begin();
        loss = forward(x, w);
        cr_assert(loss, "%s", dg_last_error());
        dg_empty_cache(gt_dut());
        char v[32];
        snprintf(v, sizeof v, "cudaMalloc:%lld", (long long)k);
        setenv("DGEMU_FAIL", v, 1);
        dg_clear_error();
        int rc = dg_backward(loss);
        unsetenv("DGEMU_FAIL");
        dg_scope_end(s);
        if (rc) {
            failed++;
            cr_expect(strstr(dg_last_error(), "backward"), "malloc %lld: '%s'", (long long)k, dg_last_error());
        }
        for (int i = 0; i < NLEAF; i++) {
            if (g_log[i].fired)
                cr_expect(g_log[i].fired == 1 && g_log[i].complete, "malloc %lld (%s): leaf %d's hook fired %d times, complete %d",
                          (long long)k, rc ? "failed" : "succeeded", i, g_log[i].fired, g_log[i].complete);
            if (!rc) cr_expect(g_log[i].fired == 1 && grad_is(w[i], want[i], g_log[i].numel),
                               "malloc %lld: backward succeeded with a wrong or unannounced gradient for leaf %d", (long long)k, i);
        }
        /* the next backward is untouched by the failure */
        for (int i = 0; i < NLEAF; i++) { dg_clear_grad(w[i]); g_log[i].fired = 0; }
        s = dg_scope_begin();
        cr_assert_eq(dg_backward(forward(x, w)), 0, "after malloc %lld: %s", (long long)k, dg_last_error());
        dg_scope_end(s);
        for (int i = 0; i < NLEAF; i++)
            cr_expect(g_log[i].fired == 1 && g_log[i].complete, "after malloc %lld failed: leaf %d fired %d times, complete %d",
                      (long long)k, i, g_log[i].fired, g_log[i].complete);
    }
    cr_log_info("gpu backward_faults: %lld device allocations, %d failed the walk\n", (long long)mallocs, failed);
    if (emulated) cr_expect_eq(failed, mallocs, "a failed cudaMalloc did not fail the walk");
    for (int i = 0; i < NLEAF; i++) { dg_tensor_free(w[i]); free(want[i]); }
    dg_tensor_free(x);
    gt_use("cpu");
}
