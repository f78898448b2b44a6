/* test/test_memory.c — a training loop's memory is flat: 10,000 steps of seed 001's LinearNet
 * (forward, backward, SGD update inside a per-step scope) keep both the live-tensor count and
 * the resident set size constant. */
#include "test_util.h"
#include <unistd.h>

static long rss_bytes(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

Test(memory, ten_thousand_steps_flat) {
    dg_manual_seed(3);
    dg_tensor *p[4] = { dg_uniform(DG_SHAPE(10, 10), -0.5, 0.5, DG_F32), dg_zeros(DG_SHAPE(10), DG_F32),
                        dg_uniform(DG_SHAPE(10, 1), -0.5, 0.5, DG_F32), dg_zeros(DG_SHAPE(1), DG_F32) };
    for (int i = 0; i < 4; i++) dg_set_requires_grad(p[i], true);
    size_t live_before = dg_live_tensors();
    long rss_at_1000 = 0;
    for (int step = 1; step <= 10000; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *x = dg_randn(DG_SHAPE(10, 10), DG_F32), *y = dg_randn(DG_SHAPE(10, 1), DG_F32);
        dg_tensor *loss = dg_mse_loss(dg_linear(dg_linear(x, p[0], p[1]), p[2], p[3]), y);
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        dg_no_grad_begin();
        for (int i = 0; i < 4; i++) { dg_axpy_(p[i], -0.01, dg_grad(p[i])); dg_clear_grad(p[i]); }
        dg_no_grad_end();
        dg_scope_end(s);
        cr_assert_eq(dg_live_tensors(), live_before, "step %d leaves %zu tensors alive", step, dg_live_tensors() - live_before);
        if (step == 1000) rss_at_1000 = rss_bytes();
    }
    long rss_end = rss_bytes();
#ifndef __SANITIZE_ADDRESS__
    /* AddressSanitizer quarantines freed memory, so RSS grows there by design; the live-tensor
     * count above and LeakSanitizer cover that build */
    cr_assert(labs(rss_end - rss_at_1000) <= 1 << 20, "RSS after step 1000: %ld, after step 10000: %ld", rss_at_1000, rss_end);
#else
    (void)rss_end; (void)rss_at_1000;
#endif
    for (int i = 0; i < 4; i++) dg_tensor_free(p[i]);
    cr_assert_eq(dg_live_tensors(), 0);
}
