/* test/test_memory.c — a training loop's memory is flat: 10,000 steps of Paddle's dynamic-graph distributed quick start's LinearNet
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
                        dg_uniform(DG_SHAPE(1, 10), -0.5, 0.5, DG_F32), dg_zeros(DG_SHAPE(1), DG_F32) };
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

/* ---- the CPU pool for blocks above 256 KB (eager/large_blocks.c) ---- */

static dg_memory_stats cpu_stats(void) {
    dg_memory_stats m;
    cr_assert_eq(dg_memory_stats_get(dg_cpu(), &m), 0, "%s", dg_last_error());
    return m;
}

/* A freed range serves smaller blocks (split) and, merged with its freed neighbour, a bigger one:
 * the pool does not grow for sizes that fit in what was freed. */
Test(memory, cpu_pool_splits_and_merges_freed_ranges) {
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("under AddressSanitizer every block goes to the system");
#endif
    dg_tensor *big = dg_zeros(DG_SHAPE(25 << 20), DG_F32);          /* 100 MB */
    cr_assert_not_null(big, "%s", dg_last_error());
    dg_memory_stats a = cpu_stats();
    cr_assert_geq(a.allocated, (size_t)100 << 20);
    dg_tensor_free(big);
    dg_memory_stats b = cpu_stats();
    cr_assert_eq(b.allocated, a.allocated - ((size_t)100 << 20) - 4096, "freed: %zu of %zu left", b.allocated, a.allocated);
    dg_tensor *part[4];
    for (int i = 0; i < 4; i++) part[i] = dg_ones(DG_SHAPE(6 << 20), DG_F32);   /* 4 x 24 MB inside the freed 100 MB */
    dg_memory_stats c = cpu_stats();
    cr_assert_eq(c.device_mallocs, b.device_mallocs, "smaller blocks grew the pool (%llu -> %llu)",
                 (unsigned long long)b.device_mallocs, (unsigned long long)c.device_mallocs);
    for (int i = 0; i < 4; i++) cr_assert_eq(dg_item(dg_sum(part[i], NULL, 0, false)), 6 << 20, "block %d holds its own data", i);
    dg_tensor_free(part[1]);
    dg_tensor_free(part[2]);
    dg_tensor *merged = dg_ones(DG_SHAPE(12 << 20), DG_F32);           /* 48 MB: only the two freed neighbours together */
    cr_assert_eq(cpu_stats().device_mallocs, b.device_mallocs, "the merged neighbours were not reused");
    cr_assert_eq(dg_item(dg_sum(part[0], NULL, 0, false)) + dg_item(dg_sum(part[3], NULL, 0, false)), 12 << 20,
                 "the neighbours of the reused range are intact");
    dg_tensor_free(merged);
    dg_tensor_free(part[0]);
    dg_tensor_free(part[3]);
    cr_assert_eq(cpu_stats().allocated, b.allocated);
    cr_assert_eq(dg_empty_cache(dg_cpu()), 0);
    cr_assert_eq(cpu_stats().reserved, cpu_stats().allocated, "empty_cache gives back every free page");
}

/* A convolutional training loop asks for the same blocks every step: after the first steps the
 * pool neither grows nor keeps more live bytes at the end of a step than after step 2. */
Test(memory, conv_training_loop_keeps_the_cpu_pool_flat) {
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("under AddressSanitizer every block goes to the system");
#endif
    dg_manual_seed(4);
    dg_layer *net = dg_mnist_cnn();
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = 1e-3;
    dg_optimizer *opt = dg_adam(p, n, adp);
    free(p);
    dg_tensor *x = dg_randn(DG_SHAPE(64, 1, 28, 28), DG_F32);
    int64_t lab[64];
    for (int i = 0; i < 64; i++) lab[i] = i % 10;
    dg_tensor *y = dg_from_data(DG_SHAPE(64), DG_I64, lab);
    dg_memory_stats after2 = {0};
    for (int step = 1; step <= 20; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *loss = dg_cross_entropy(dg_forward(net, x), y);
        cr_assert(loss && dg_backward(loss) == 0 && dg_optimizer_step(opt) == 0, "step %d: %s", step, dg_last_error());
        dg_optimizer_clear_grad(opt);
        dg_scope_end(s);
        dg_memory_stats m = cpu_stats();
        if (step == 2) after2 = m;
        if (step > 2) {
            cr_assert_eq(m.device_mallocs, after2.device_mallocs, "step %d grew the pool", step);
            cr_assert_eq(m.allocated, after2.allocated, "step %d ends with %zu live bytes, step 2 with %zu", step, m.allocated, after2.allocated);
        }
    }
    cr_assert_gt(after2.peak_allocated, (size_t)4 << 20, "the activations (%zu bytes at peak) went through the pool", after2.peak_allocated);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_tensor_free(x);
    dg_tensor_free(y);
}

/* Issue 30.7: a binary op's node keeps only what its rule reads. add and sub read nothing, mul
 * the other side only where this side needs a gradient: once the scope that made their outputs
 * ends, those outputs are gone before backward (they were all kept alive by their nodes). */
Test(memory, binary_nodes_keep_only_what_their_rule_reads) {
    if (getenv("ASAN_OPTIONS")) cr_skip_test("no pool statistics under AddressSanitizer");
    const int64_t n = 1 << 20;   /* 4 MB: the pool's blocks, which the statistics count */
    const size_t mb4 = (size_t)n * sizeof(float);
    dg_tensor *x = dg_randn(DG_SHAPE(n), DG_F32), *w = dg_randn(DG_SHAPE(n), DG_F32);
    dg_tensor *c = dg_randn(DG_SHAPE(n), DG_F32);   /* a constant: needs no gradient */
    dg_set_requires_grad(x, true);
    dg_set_requires_grad(w, true);
    size_t base = cpu_stats().allocated;
    dg_scope *outer = dg_scope_begin();
    dg_scope *inner = dg_scope_begin();
    /* three 4 MB intermediates (x + w, that - x, that * c) and the kept result (* 2, which saves nothing) */
    dg_tensor *y = dg_mul_scalar(dg_mul(dg_sub(dg_add(x, w), x), c), 2.0);
    cr_assert(y, "%s", dg_last_error());
    dg_keep_in_parent(y);
    dg_scope_end(inner);
    size_t live = cpu_stats().allocated - base;
    /* y, and c saved by mul for the gradient of its other side (c was live anyway): nothing else */
    cr_expect(live >= mb4 && live < mb4 + 65536, "after the forward %zu bytes are live beyond the inputs, %zu expected "
              "(the result only, and its block's rounding)", live, mb4);
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    dg_scope_end(outer);
    /* d/dx of 2 (x + w - x) c = 0 up to rounding, d/dw = 2 c */
    const float *gw = dg_data(dg_grad(w)), *cv = dg_data(c);
    for (int64_t i = 0; i < n; i += 4099) cr_assert_float_eq(gw[i], 2.f * cv[i], 1e-6f);
    dg_tensor_free(x);
    dg_tensor_free(w);
    dg_tensor_free(c);
}
