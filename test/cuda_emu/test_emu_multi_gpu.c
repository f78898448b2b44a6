/* test/cuda_emu/test_emu_multi_gpu.c — two GPUs in one process under the emulator: each device
 * is its own backend instance (streams, library handles, memory pool), ops on gpu:0 and gpu:1
 * interleave and each gives the CPU's numbers, tensors move between the devices directly and
 * autograd follows them back, a layer trains on each device side by side, and dg_shutdown
 * releases both. The emulator refuses what a real GPU refuses (a kernel launched onto another
 * device's stream, a kernel touching another device's memory), so a context mix-up fails here
 * the way it would on a machine with two GPUs. */
#include <criterion/criterion.h>
#include <dygraph.h>
#include <dygraph/extension.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "emu_internal.h"

static const dg_device CPU = { DG_CPU, 0 }, GPU0 = { DG_CUDA, 0 }, GPU1 = { DG_CUDA, 1 };

static void host_of(const dg_tensor *t, float *out, size_t n) {
    cr_assert(t, "%s", dg_last_error());
    cr_assert_eq(dg_to_host(t, out, n * sizeof(float)), 0, "%s", dg_last_error());
}

static void expect_close(const float *want, const float *got, int n, float tol, const char *what) {
    for (int i = 0; i < n; i++)
        cr_expect(fabsf(want[i] - got[i]) <= tol, "%s, element %d: cpu %g, gpu %g", what, i, want[i], got[i]);
}

Test(emu_multi_gpu, both_devices_compute_like_the_cpu_interleaved) {
    cr_assert_geq(dgemu_device_count(), 2, "the emulator is set up with 2 devices");
    dg_manual_seed(5);
    dg_tensor *a = dg_randn(DG_SHAPE(24, 16), DG_F32), *b = dg_randn(DG_SHAPE(16, 8), DG_F32);
    float want[24 * 8], got0[24 * 8], got1[24 * 8];
    host_of(dg_softmax(dg_relu(dg_matmul(a, b)), -1), want, 24 * 8);
    dg_tensor *a0 = dg_to_device(a, GPU0), *b0 = dg_to_device(b, GPU0);
    dg_tensor *a1 = dg_to_device(a, GPU1), *b1 = dg_to_device(b, GPU1);
    cr_assert(a0 && b0 && a1 && b1, "%s", dg_last_error());
    /* alternate the devices op by op: each call must make its own device current */
    dg_tensor *m0 = dg_matmul(a0, b0), *m1 = dg_matmul(a1, b1);
    dg_tensor *r0 = dg_relu(m0), *r1 = dg_relu(m1);
    dg_tensor *y0 = dg_softmax(r0, -1), *y1 = dg_softmax(r1, -1);
    cr_assert(y0 && y1, "%s", dg_last_error());
    cr_expect_eq(dg_device_of(y0).index, 0);
    cr_expect_eq(dg_device_of(y1).index, 1);
    host_of(y1, got1, 24 * 8);
    host_of(y0, got0, 24 * 8);
    expect_close(want, got0, 24 * 8, 1e-5f, "gpu:0");
    expect_close(want, got1, 24 * 8, 1e-5f, "gpu:1");
    /* ops that mix the devices are refused, naming both */
    cr_expect_null(dg_add(y0, y1));
    cr_expect(strstr(dg_last_error(), "gpu:0") && strstr(dg_last_error(), "gpu:1"), "message: %s", dg_last_error());
}

Test(emu_multi_gpu, tensors_move_between_devices_and_gradients_follow) {
    dg_manual_seed(9);
    dg_tensor *x = dg_randn(DG_SHAPE(7, 5), DG_F32);
    dg_tensor *x0 = dg_to_device(x, GPU0);
    cr_assert(x0, "%s", dg_last_error());
    dg_set_requires_grad(x0, true);
    /* strided source: the move goes through a contiguous copy first */
    dg_tensor *x1 = dg_to_device(dg_transpose(x0, 0, 1), GPU1);
    cr_assert(x1, "%s", dg_last_error());
    cr_expect_eq(dg_device_of(x1).index, 1);
    float hx[35], hx1[35];
    host_of(x, hx, 35);
    host_of(x1, hx1, 35);
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 5; j++) cr_expect_eq(hx1[j * 7 + i], hx[i * 5 + j], "moved element (%d, %d)", i, j);
    /* loss on gpu:1 of a value that lives on gpu:0: the gradient comes back to gpu:0 */
    dg_tensor *loss = dg_sum_all(dg_mul(x1, x1));
    cr_assert(loss, "%s", dg_last_error());
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    const dg_tensor *g = dg_grad(x0);
    cr_assert(g, "no gradient reached gpu:0");
    cr_expect_eq(dg_device_of(g).index, 0);
    float hg[35];
    host_of(g, hg, 35);
    for (int i = 0; i < 35; i++) cr_expect(fabsf(hg[i] - 2 * hx[i]) <= 1e-6f, "gradient %d: %g, want %g", i, hg[i], 2 * hx[i]);
    /* and back to the CPU */
    float back[35];
    host_of(dg_to_device(x1, CPU), back, 35);
    cr_expect_eq(memcmp(back, hx1, sizeof back), 0);
}

/* The copy between devices is ordered after the source's queued work and before the source's
 * next work: the source block, freed at once, is reused by the next kernel on gpu:0. */
Test(emu_multi_gpu, a_move_reads_the_source_before_its_block_is_reused) {
    for (int round = 0; round < 20; round++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *src = dg_full(DG_SHAPE(4096), (double)round, DG_F32);   /* made on the current device */
        cr_assert(src, "%s", dg_last_error());
        dg_tensor *on0 = dg_to_device(src, GPU0);
        dg_tensor *on1 = dg_to_device(on0, GPU1);
        cr_assert(on1, "%s", dg_last_error());
        dg_tensor_free(on0);                                                /* block back to gpu:0's pool */
        dg_tensor *other = dg_to_device(dg_full(DG_SHAPE(4096), -1.0, DG_F32), GPU0);   /* likely the same block */
        cr_assert(other, "%s", dg_last_error());
        float h[4096];
        host_of(on1, h, 4096);
        for (int i = 0; i < 4096; i += 511) cr_expect_eq(h[i], (float)round, "round %d element %d", round, i);
        dg_scope_end(s);
    }
}

Test(emu_multi_gpu, each_device_has_its_own_memory_pool) {
    cr_assert_eq(dg_set_device("gpu:1"), 0, "%s", dg_last_error());
    dg_memory_stats s0a, s1a, s0b, s1b;
    cr_assert_eq(dg_memory_stats_get(GPU0, &s0a), 0, "%s", dg_last_error());
    cr_assert_eq(dg_memory_stats_get(GPU1, &s1a), 0, "%s", dg_last_error());
    dg_tensor *big = dg_zeros(DG_SHAPE(1 << 20), DG_F32);   /* 4 MiB on gpu:1, the current device */
    cr_assert(big, "%s", dg_last_error());
    cr_expect_eq(dg_device_of(big).index, 1);
    cr_assert_eq(dg_memory_stats_get(GPU0, &s0b), 0);
    cr_assert_eq(dg_memory_stats_get(GPU1, &s1b), 0);
    cr_expect_eq(s0b.allocated, s0a.allocated, "gpu:0's pool changed: %zu -> %zu", s0a.allocated, s0b.allocated);
    cr_expect_geq(s1b.allocated, s1a.allocated + (4u << 20), "gpu:1's pool: %zu -> %zu", s1a.allocated, s1b.allocated);
    cr_expect_neq(dg_device_stream(GPU0), dg_device_stream(GPU1), "each device has its own stream");
    dg_tensor_free(big);
    cr_assert_eq(dg_memory_stats_get(GPU1, &s1b), 0);
    cr_expect_eq(s1b.allocated, s1a.allocated);
}

/* A layer and its optimizer on each device, stepped alternately from one thread: both follow
 * the CPU's training to rounding. */
Test(emu_multi_gpu, a_layer_trains_on_each_device_side_by_side) {
    dg_manual_seed(21);
    dg_tensor *x = dg_randn(DG_SHAPE(16, 10), DG_F32), *t = dg_randn(DG_SHAPE(16, 3), DG_F32);
    dg_layer *net[3];
    dg_optimizer *opt[3];
    dg_tensor *xs[3], *ts[3];
    const dg_device dev[3] = { CPU, GPU0, GPU1 };
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.1;
    for (int k = 0; k < 3; k++) {
        dg_manual_seed(22);   /* the same initial weights on each */
        net[k] = dg_nn_linear(10, 3);
        cr_assert(net[k], "%s", dg_last_error());
        cr_assert_eq(dg_layer_to(net[k], dev[k]), 0, "%s", dg_last_error());
        int np = 0;
        dg_tensor **ps = dg_layer_parameters(net[k], &np);
        opt[k] = dg_sgd(ps, np, sp);
        free(ps);
        cr_assert(opt[k], "%s", dg_last_error());
        xs[k] = dg_to_device(x, dev[k]);
        ts[k] = dg_to_device(t, dev[k]);
    }
    float loss[3][5];
    for (int step = 0; step < 5; step++)
        for (int k = 0; k < 3; k++) {
            dg_scope *s = dg_scope_begin();
            dg_tensor *l = dg_mse_loss(dg_forward(net[k], xs[k]), ts[k]);
            cr_assert(l, "%s", dg_last_error());
            loss[k][step] = (float)dg_item(l);
            cr_assert_eq(dg_backward(l), 0, "%s", dg_last_error());
            cr_assert_eq(dg_optimizer_step(opt[k]), 0, "%s", dg_last_error());
            dg_optimizer_clear_grad(opt[k]);
            dg_scope_end(s);
        }
    for (int step = 0; step < 5; step++) {
        cr_expect(fabsf(loss[1][step] - loss[0][step]) <= 1e-5f, "step %d: gpu:0 %g, cpu %g", step, loss[1][step], loss[0][step]);
        cr_expect(fabsf(loss[2][step] - loss[0][step]) <= 1e-5f, "step %d: gpu:1 %g, cpu %g", step, loss[2][step], loss[0][step]);
    }
    cr_expect_lt(loss[2][4], loss[2][0], "gpu:1 learned nothing");
    for (int k = 0; k < 3; k++) { dg_optimizer_free(opt[k]); dg_layer_free(net[k]); }
}

Test(emu_multi_gpu, shutdown_releases_both_devices) {
    dg_tensor *a = dg_to_device(dg_ones(DG_SHAPE(1000), DG_F32), GPU0);
    dg_tensor *b = dg_to_device(dg_ones(DG_SHAPE(1000), DG_F32), GPU1);
    cr_assert(a && b, "%s", dg_last_error());
    dg_tensor_free(a);
    dg_tensor_free(b);
    dgemu_stats before, after;
    dgemu_get_stats(&before);
    cr_expect_gt(before.device_bytes, 0);
    dg_shutdown();
    dgemu_get_stats(&after);
    cr_expect_eq(after.device_bytes, 0, "dg_shutdown left %zu bytes of device memory", after.device_bytes);
    cr_assert_eq(dg_init(NULL), 0, "%s", dg_last_error());
    dg_tensor *c = dg_to_device(dg_ones(DG_SHAPE(10), DG_F32), GPU1);   /* and starts again on request */
    cr_assert(c, "%s", dg_last_error());
    float h[10];
    host_of(c, h, 10);
    cr_expect_eq(h[9], 1.0f);
}
