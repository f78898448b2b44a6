/* test/cuda_emu/test_emu_devices.c — CUDA's rules for several devices in one process, as the
 * emulator holds them (runtime.cc's "Several devices", cublas.c's and cudnn.c's handles): each
 * rule is shown to catch a broken program (suite emu_devices) and to let the right one run
 * (suite emu_devices_semantics).
 *
 * Broken: a kernel that touches another device's memory without peer access (also right after
 * that device's own work ran in the same synchronise, and under random interleaving), peer
 * access used in the direction never enabled or after it was disabled, a kernel or memset on
 * another device's stream, an event recorded on another device's stream, a peer copy naming the
 * wrong devices, a cuBLAS or cuDNN handle given another device's stream or used while another
 * device is current, an NCCL collective on another device's stream. Right: the peer-access
 * calls, streams that belong to the device current at their creation, copies between devices on
 * any device's stream, waits on another device's events, freeing and asking about another
 * device's pointer, NCCL working on its own device whatever is current, and two devices
 * computing side by side under random interleaving (cuBLAS with a peer copy and a peer read
 * between them; cuDNN).
 *
 * The kernels are device_kernels.cu's. Criterion runs every test in its own process, so one
 * test's sticky error does not reach another. */
#include <criterion/criterion.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include "device_kernels.h"
#include "emu_internal.h"

#define CU(call) do { cudaError_t e_ = (call); cr_assert_eq(e_, cudaSuccess, "%s: %s", #call, cudaGetErrorName(e_)); } while (0)

static void need_two(void) { cr_assert_geq(dgemu_device_count(), 2, "these tests need DGEMU_DEVICES >= 2"); }

/* n ints on device d, each v (written by a kernel of d); d is current afterwards */
static int *ints_on(int d, int n, int v) {
    int *p = NULL;
    CU(cudaSetDevice(d));
    CU(cudaMalloc((void **)&p, (size_t)n * sizeof(int)));
    cr_assert_eq(dgm_fill(p, n, v, NULL), cudaSuccess);
    CU(cudaDeviceSynchronize());
    return p;
}
/* n floats on device d, copied from v; d is current afterwards */
static float *floats_on(int d, const float *v, int n) {
    float *p = NULL;
    CU(cudaSetDevice(d));
    CU(cudaMalloc((void **)&p, (size_t)n * sizeof(float)));
    CU(cudaMemcpy(p, v, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    return p;
}
/* element i of any device's buffer (a copy names its device by the pointer) */
static int read_int(const int *p, int i) {
    int v = -1;
    CU(cudaMemcpy(&v, p + i, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}
static cudaStream_t stream_on(int d) {
    cudaStream_t s;
    CU(cudaSetDevice(d));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

/* gpu:0 fills a and records an event; gpu:1's stream waits for it and adds 1 to a into pinned
 * host memory (portable: every device's kernels may write it), with peer access from gpu:1 to
 * gpu:0 or without. The synchronise of gpu:1's stream runs gpu:0's fill first (the wait leads
 * there), then gpu:1's kernel: two devices' work in one go, and gpu:1's kernel touches nothing of
 * its own device, so only gpu:0's memory staying open from the item before could let it pass.
 * Returns the synchronise's error; *out200 gets element 200 of the result (42 when right). */
static cudaError_t cross_device_wait(bool peer, int *out200) {
    int *a = ints_on(0, 256, 0), *out = NULL;
    CU(cudaHostAlloc((void **)&out, 256 * sizeof(int), cudaHostAllocPortable));
    cudaStream_t s0 = stream_on(0), s1 = stream_on(1);
    if (peer) CU(cudaDeviceEnablePeerAccess(0, 0));
    cudaEvent_t e;
    CU(cudaSetDevice(0));
    CU(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cr_assert_eq(dgm_fill(a, 256, 41, s0), cudaSuccess);
    CU(cudaEventRecord(e, s0));
    CU(cudaSetDevice(1));
    CU(cudaStreamWaitEvent(s1, e, 0));   /* a wait on another device's event is allowed */
    cr_assert_eq(dgm_add(a, out, 256, 1, s1), cudaSuccess);
    cudaError_t r = cudaStreamSynchronize(s1);
    if (r != cudaSuccess) return r;
    *out200 = out[200];
    if (peer) CU(cudaDeviceDisablePeerAccess(0));
    CU(cudaEventDestroy(e));
    CU(cudaStreamDestroy(s0));
    CU(cudaStreamDestroy(s1));
    CU(cudaFree(a));
    CU(cudaFreeHost(out));
    return cudaSuccess;
}

/* C = A B for 2x2 column-major matrices with handle h */
static cublasStatus_t gemm2(cublasHandle_t h, const float *a, const float *b, float *c) {
    const float one = 1, zero = 0;
    return cublasSgemmStridedBatched_64(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, 2, 4, b, 2, 4, &zero, c, 2, 4, 1);
}
static const float A[4] = { 1, 2, 3, 4 };                 /* [1 3; 2 4] */
static const float A2[4] = { 7, 10, 15, 22 }, A3[4] = { 37, 54, 81, 118 };

/* a 1x4x1x1 float tensor descriptor */
static cudnnTensorDescriptor_t four_floats(void) {
    cudnnTensorDescriptor_t t;
    cr_assert_eq(cudnnCreateTensorDescriptor(&t), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 4, 1, 1), CUDNN_STATUS_SUCCESS);
    return t;
}

/* ---- broken programs the emulator must catch ---- */

Test(emu_devices, kernel_touching_another_devices_memory_is_an_illegal_address) {
    need_two();
    int *on1 = ints_on(1, 256, 7), *on0 = ints_on(0, 256, 0);
    cr_assert_eq(dgm_add(on1, on0, 256, 1, NULL), cudaSuccess, "the launch is fine: the pointer is dereferenced later");
    cr_expect_eq(cudaDeviceSynchronize(), cudaErrorIllegalAddress, "gpu:0's kernel read gpu:1's memory without peer access");
    void *p = NULL;
    cr_expect_eq(cudaMalloc(&p, 16), cudaErrorIllegalAddress, "the error is sticky");
}

Test(emu_devices, kernel_of_a_device_is_caught_between_the_other_devices_work) {
    need_two();
    int v = -1;
    cr_expect_eq(cross_device_wait(false, &v), cudaErrorIllegalAddress,
                 "gpu:1's kernel read gpu:0's memory right after gpu:0's own kernel ran: gpu:0's view must not leak");
}

Test(emu_devices, kernel_of_a_device_is_caught_under_random_interleaving) {
    setenv("DGEMU_INTERLEAVE", "random", 1);
    need_two();
    int v = -1;
    cr_expect_eq(cross_device_wait(false, &v), cudaErrorIllegalAddress);
}

Test(emu_devices, peer_access_is_one_way) {
    need_two();
    int *on1 = ints_on(1, 256, 7), *on0 = ints_on(0, 256, 0);
    CU(cudaDeviceEnablePeerAccess(1, 0));   /* gpu:0 may reach gpu:1 ... */
    cr_assert_eq(dgm_add(on1, on0, 256, 1, NULL), cudaSuccess);
    CU(cudaDeviceSynchronize());
    cr_expect_eq(read_int(on0, 9), 8);
    CU(cudaSetDevice(1));                   /* ... but gpu:1 may not reach gpu:0 */
    cr_assert_eq(dgm_add(on0, on1, 256, 1, NULL), cudaSuccess);
    cr_expect_eq(cudaDeviceSynchronize(), cudaErrorIllegalAddress, "gpu:1 never enabled access to gpu:0");
}

Test(emu_devices, disabled_peer_access_faults_again) {
    need_two();
    int *on1 = ints_on(1, 256, 7), *on0 = ints_on(0, 256, 0);
    CU(cudaDeviceEnablePeerAccess(1, 0));
    cr_assert_eq(dgm_add(on1, on0, 256, 1, NULL), cudaSuccess);
    CU(cudaDeviceSynchronize());
    CU(cudaDeviceDisablePeerAccess(1));
    cr_assert_eq(dgm_add(on1, on0, 256, 1, NULL), cudaSuccess);
    cr_expect_eq(cudaDeviceSynchronize(), cudaErrorIllegalAddress, "peer access was disabled before this kernel ran");
}

Test(emu_devices, kernel_or_memset_on_another_devices_stream_fails) {
    need_two();
    cudaStream_t s1 = stream_on(1);
    int *p = ints_on(0, 256, 0);   /* gpu:0 is current */
    cr_expect_eq(dgm_fill(p, 256, 1, s1), cudaErrorInvalidResourceHandle, "a kernel onto a stream of gpu:1");
    cr_expect_eq(cudaMemsetAsync(p, 0, 256 * sizeof(int), s1), cudaErrorInvalidResourceHandle, "a memset onto it");
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    cr_expect_eq(cudaGetLastError(), cudaSuccess, "launch errors are not sticky");
    cr_expect_eq(dgm_fill(p, 256, 3, NULL), cudaSuccess, "gpu:0's own streams still work");
    CU(cudaDeviceSynchronize());
    cr_expect_eq(read_int(p, 9), 3);
}

Test(emu_devices, event_recorded_on_another_devices_stream_fails) {
    need_two();
    cudaStream_t s1 = stream_on(1);
    cudaEvent_t e0, e1;
    CU(cudaSetDevice(0));
    CU(cudaEventCreate(&e0));
    CU(cudaSetDevice(1));
    CU(cudaEventCreate(&e1));
    cr_expect_eq(cudaEventRecord(e0, s1), cudaErrorInvalidResourceHandle, "an event of gpu:0 on a stream of gpu:1");
    cr_expect_eq(cudaEventRecord(e0, NULL), cudaErrorInvalidResourceHandle, "NULL is gpu:1's legacy stream while gpu:1 is current");
    CU(cudaEventRecord(e1, s1));
    CU(cudaSetDevice(0));
    CU(cudaEventRecord(e0, NULL));
    CU(cudaEventSynchronize(e1));           /* waiting for another device's event is allowed */
    CU(cudaEventSynchronize(e0));
    float ms = 0;
    cr_expect_eq(cudaEventElapsedTime(&ms, e0, e1), cudaErrorInvalidResourceHandle, "two devices' events have no common clock");
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    cr_expect_eq(cudaGetLastError(), cudaSuccess, "not sticky");
}

Test(emu_devices, peer_copy_naming_the_wrong_devices_is_refused) {
    need_two();
    int *a = ints_on(0, 64, 1), *b = ints_on(1, 64, 2), host[64];
    size_t n = sizeof host;
    cr_expect_eq(cudaMemcpyPeer(b, 0, a, 1, n), cudaErrorInvalidValue, "b is gpu:1's and a gpu:0's, not the other way round");
    cr_expect_eq(cudaMemcpyPeerAsync(host, 1, a, 0, n, NULL), cudaErrorInvalidValue, "a host buffer is no device's");
    cr_expect_eq(cudaMemcpyPeer(b, 1, a, dgemu_device_count(), n), cudaErrorInvalidDevice);
    CU(cudaMemcpyPeer(b, 1, a, 0, n));
    cr_expect_eq(read_int(b, 5), 1, "the right one copies");
}

Test(emu_devices, cublas_handle_is_bound_to_its_device) {
    need_two();
    float *a1 = floats_on(1, A, 4);
    float *a = floats_on(0, A, 4), *c = floats_on(0, A, 4);
    cudaStream_t s1 = stream_on(1);
    CU(cudaSetDevice(0));
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);   /* gpu:0's */
    cr_expect_eq(cublasSetStream(h, s1), CUBLAS_STATUS_INVALID_VALUE, "a stream of gpu:1 for gpu:0's handle");
    cr_expect_eq(gemm2(h, a, a1, c), CUBLAS_STATUS_INVALID_VALUE, "gpu:1's matrix without peer access");
    CU(cudaSetDevice(1));
    cr_expect_eq(gemm2(h, a, a, c), CUBLAS_STATUS_EXECUTION_FAILED, "gpu:0's handle used while gpu:1 is current");
    cr_expect_eq(cublasSetStream(h, NULL), CUBLAS_STATUS_SUCCESS, "the legacy stream suits any handle");
    CU(cudaSetDevice(0));
    cr_expect_eq(gemm2(h, a, a, c), CUBLAS_STATUS_SUCCESS, "under its own device it works");
    float got[4];
    CU(cudaMemcpy(got, c, sizeof got, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], A2[i]);
    cublasDestroy(h);
}

Test(emu_devices, cudnn_handle_is_bound_to_its_device) {
    need_two();
    const float v[4] = { 1, 2, 3, 4 }, one = 1;
    cudaStream_t s1 = stream_on(1);
    float *x = floats_on(0, v, 4), *y = floats_on(0, v, 4);
    cudnnHandle_t h;
    cr_assert_eq(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);   /* gpu:0's */
    cudnnTensorDescriptor_t t = four_floats();
    cr_expect_eq(cudnnSetStream(h, s1), CUDNN_STATUS_MAPPING_ERROR, "a stream of gpu:1 for gpu:0's handle");
    CU(cudaSetDevice(1));
    cr_expect_eq(cudnnAddTensor(h, &one, t, x, &one, t, y), CUDNN_STATUS_BAD_PARAM, "gpu:0's handle used while gpu:1 is current");
    CU(cudaSetDevice(0));
    cr_expect_eq(cudnnAddTensor(h, &one, t, x, &one, t, y), CUDNN_STATUS_SUCCESS);
    float got[4];
    CU(cudaMemcpy(got, y, sizeof got, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], 2 * v[i]);
    cudnnDestroyTensorDescriptor(t);
    cr_expect_eq(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
}

/* A one-rank communicator made on gpu:0 and four floats (1..4) in gpu:0's memory for it. */
static ncclComm_t one_rank_comm_on_gpu0(float **x) {
    const float v[4] = { 1, 2, 3, 4 };
    *x = floats_on(0, v, 4);
    ncclUniqueId id;
    ncclComm_t comm;
    cr_assert_eq(ncclGetUniqueId(&id), ncclSuccess);
    cr_assert_eq(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
    return comm;
}

Test(emu_devices, nccl_collective_on_another_devices_stream_fails) {
    need_two();
    cudaStream_t s1 = stream_on(1);
    float *x;
    ncclComm_t comm = one_rank_comm_on_gpu0(&x);
    cr_expect_eq(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, s1), ncclUnhandledCudaError,
                 "its work cannot go to a stream of gpu:1");
    ncclCommAbort(comm);
}

/* ---- right programs the emulator must run as a GPU does ---- */

Test(emu_devices_semantics, peer_access_calls_answer_as_cuda_does) {
    need_two();
    int can = -1, n = dgemu_device_count();
    CU(cudaDeviceCanAccessPeer(&can, 0, 1));
    cr_expect_eq(can, 1);
    CU(cudaDeviceCanAccessPeer(&can, 1, 1));
    cr_expect_eq(can, 0, "a device is not its own peer");
    cr_expect_eq(cudaDeviceCanAccessPeer(&can, 0, n), cudaErrorInvalidDevice);
    CU(cudaSetDevice(0));
    CU(cudaDeviceEnablePeerAccess(1, 0));
    cr_expect_eq(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    cr_expect_eq(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice, "not to itself");
    cr_expect_eq(cudaDeviceEnablePeerAccess(n, 0), cudaErrorInvalidDevice);
    cr_expect_eq(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue, "flags must be 0");
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
    cr_expect_eq(cudaGetLastError(), cudaSuccess, "none of these errors is sticky");
    CU(cudaSetDevice(1));
    cr_expect_eq(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled, "gpu:0's grant is gpu:0's, not gpu:1's");
    CU(cudaSetDevice(0));
    CU(cudaDeviceDisablePeerAccess(1));
    cr_expect_eq(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    cudaGetLastError();
}

Test(emu_devices_semantics, peer_access_lets_kernels_use_another_devices_memory) {
    need_two();
    int *on1 = ints_on(1, 256, 7), *on0 = ints_on(0, 256, 0);
    CU(cudaDeviceEnablePeerAccess(1, 0));   /* gpu:0, current, may reach gpu:1 */
    cr_assert_eq(dgm_add(on1, on0, 256, 1, NULL), cudaSuccess, "read gpu:1's memory");
    cr_assert_eq(dgm_add(on0, on1, 256, 1, NULL), cudaSuccess, "write it");
    CU(cudaDeviceSynchronize());
    cr_expect_eq(read_int(on0, 3), 8);
    cr_expect_eq(read_int(on1, 4), 9);
}

Test(emu_devices_semantics, a_stream_waits_for_another_devices_event) {
    need_two();
    int v = -1;
    CU(cross_device_wait(true, &v));
    cr_expect_eq(v, 42, "gpu:1's kernel ran after gpu:0's fill, which it awaited");
}

Test(emu_devices_semantics, streams_belong_to_the_device_current_at_their_creation) {
    need_two();
    cudaStream_t s1 = stream_on(1);
    cr_expect_eq(dgemu_stream_device(s1), 1);
    cr_expect_eq(dgemu_stream_device(NULL), 1, "the legacy stream is the current device's");
    int *b = ints_on(1, 256, 0);
    cr_expect_eq(dgm_fill(b, 256, 4, s1), cudaSuccess, "gpu:1 current, gpu:1's stream");
    CU(cudaStreamSynchronize(s1));
    cr_expect_eq(dgm_add(b, b, 256, 1, NULL), cudaSuccess, "NULL while gpu:1 is current: gpu:1's legacy stream");
    CU(cudaDeviceSynchronize());
    cr_expect_eq(read_int(b, 17), 5);
    CU(cudaSetDevice(0));
    cr_expect_eq(dgemu_stream_device(NULL), 0);
    cr_expect_eq(cudaStreamQuery(s1), cudaSuccess, "queries and synchronises take any device's stream");
    CU(cudaStreamSynchronize(s1));
    CU(cudaStreamDestroy(s1));
}

Test(emu_devices_semantics, copies_cross_devices_on_any_devices_stream) {
    need_two();
    int *a = ints_on(0, 256, 0), *b = ints_on(1, 256, 0), host[256];
    for (int i = 0; i < 256; i++) host[i] = i;
    cudaStream_t s0 = stream_on(0), s1 = stream_on(1);
    CU(cudaSetDevice(0));
    CU(cudaMemcpyAsync(b, host, sizeof host, cudaMemcpyHostToDevice, s1));   /* gpu:0 current, gpu:1's stream */
    CU(cudaStreamSynchronize(s1));
    cr_expect_eq(read_int(b, 100), 100);
    CU(cudaMemcpy(a, b, sizeof host, cudaMemcpyDeviceToDevice));             /* no peer access needed */
    cr_expect_eq(read_int(a, 101), 101);
    cr_assert_eq(dgm_fill(a, 256, 9, NULL), cudaSuccess);
    CU(cudaMemcpy(b, a, sizeof host, cudaMemcpyDefault));
    cr_expect_eq(read_int(b, 5), 9);
    cr_assert_eq(dgm_fill(a, 256, 11, s0), cudaSuccess);                     /* still queued on gpu:0 ... */
    CU(cudaSetDevice(1));
    CU(cudaMemcpyPeer(b, 1, a, 0, sizeof host));                             /* ... which the peer copy waits for */
    cr_expect_eq(read_int(b, 6), 11);
    cr_assert_eq(dgm_fill(b, 256, 13, s1), cudaSuccess);
    CU(cudaSetDevice(0));
    CU(cudaMemcpyPeerAsync(a, 0, b, 1, sizeof host, s1));                    /* after the fill, in gpu:1's stream */
    CU(cudaStreamSynchronize(s1));
    cr_expect_eq(read_int(a, 7), 13);
}

Test(emu_devices_semantics, another_devices_pointer_is_freed_and_named_by_its_device) {
    need_two();
    int *b = ints_on(1, 256, 0);
    cudaStream_t s1 = stream_on(1);
    cr_assert_eq(dgm_fill(b, 256, 2, s1), cudaSuccess);   /* still queued when gpu:0 frees b */
    CU(cudaSetDevice(0));
    struct cudaPointerAttributes at;
    CU(cudaPointerGetAttributes(&at, b + 10));
    cr_expect_eq(at.type, cudaMemoryTypeDevice);
    cr_expect_eq(at.device, 1, "a pointer names its device, whichever is current");
    dgemu_stats before, after;
    dgemu_get_stats(&before);
    CU(cudaFree(b));   /* CUDA looks the pointer's device up; its queued work runs first */
    dgemu_get_stats(&after);
    cr_expect_eq(after.device_frees, before.device_frees + 1);
    cr_expect_eq(cudaStreamQuery(s1), cudaSuccess, "the fill that used the block ran before it was freed");
    CU(cudaPointerGetAttributes(&at, b));
    cr_expect_eq(at.type, cudaMemoryTypeUnregistered, "freed device memory is nobody's");
    void *pinned = NULL;
    CU(cudaSetDevice(1));
    CU(cudaHostAlloc(&pinned, 64, cudaHostAllocDefault));
    CU(cudaSetDevice(0));
    CU(cudaPointerGetAttributes(&at, pinned));
    cr_expect_eq(at.type, cudaMemoryTypeHost);
    cr_expect_eq(at.device, 1, "pinned memory names the device current at its allocation");
    int local = 0;
    CU(cudaPointerGetAttributes(&at, &local));
    cr_expect_eq(at.type, cudaMemoryTypeUnregistered);
    CU(cudaFreeHost(pinned));
}

Test(emu_devices_semantics, nccl_works_on_its_device_whatever_is_current) {
    need_two();
    cudaStream_t s0 = stream_on(0);
    float *x;
    ncclComm_t comm = one_rank_comm_on_gpu0(&x);
    CU(cudaSetDevice(1));
    cr_expect_eq(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, s0), ncclSuccess, "NCCL switches to its own device");
    cr_expect_eq(dgemu_device(), 1, "and back");
    CU(cudaStreamSynchronize(s0));
    float got[4];
    CU(cudaMemcpy(got, x, sizeof got, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], (float)(i + 1), "the sum over one rank");
    cr_expect_eq(ncclCommDestroy(comm), ncclSuccess);
}

/* Each device with its own stream and cuBLAS handle; gpu:1 takes gpu:0's A^2 by a peer copy after
 * an event and also reads it in place through peer access. Under random interleaving the two
 * devices' work mixes, and every product must still be right. */
Test(emu_devices_semantics, two_devices_compute_side_by_side_with_cublas) {
    setenv("DGEMU_INTERLEAVE", "random", 1);
    need_two();
    for (int round = 0; round < 6; round++) {
        cudaStream_t s[2];
        cublasHandle_t h[2];
        float *a[2], *c[2], *d[2];
        for (int g = 0; g < 2; g++) {
            s[g] = stream_on(g);
            a[g] = floats_on(g, A, 4);
            c[g] = floats_on(g, A, 4);
            d[g] = floats_on(g, A, 4);
            cr_assert_eq(cublasCreate(&h[g]), CUBLAS_STATUS_SUCCESS);
            cr_assert_eq(cublasSetStream(h[g], s[g]), CUBLAS_STATUS_SUCCESS);
        }
        CU(cudaDeviceEnablePeerAccess(0, 0));   /* gpu:1 (current) may read gpu:0 */
        cudaEvent_t e;
        CU(cudaSetDevice(0));
        CU(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        cr_assert_eq(gemm2(h[0], a[0], a[0], c[0]), CUBLAS_STATUS_SUCCESS);   /* c0 = A^2 */
        CU(cudaEventRecord(e, s[0]));
        cr_assert_eq(gemm2(h[0], c[0], a[0], d[0]), CUBLAS_STATUS_SUCCESS);   /* d0 = A^3 */
        CU(cudaSetDevice(1));
        CU(cudaStreamWaitEvent(s[1], e, 0));
        CU(cudaMemcpyPeerAsync(c[1], 1, c[0], 0, 4 * sizeof(float), s[1]));
        cr_assert_eq(gemm2(h[1], a[1], c[1], d[1]), CUBLAS_STATUS_SUCCESS);   /* d1 = A A^2 */
        cr_assert_eq(gemm2(h[1], c[0], a[1], c[1]), CUBLAS_STATUS_SUCCESS);   /* c1 = A^2 A, A^2 read on gpu:0 */
        for (int g = 0; g < 2; g++) {
            CU(cudaStreamSynchronize(s[g]));
            float dg[4], cg[4];
            CU(cudaMemcpy(dg, d[g], sizeof dg, cudaMemcpyDeviceToHost));
            CU(cudaMemcpy(cg, c[g], sizeof cg, cudaMemcpyDeviceToHost));
            for (int i = 0; i < 4; i++) {
                cr_expect_eq(dg[i], A3[i], "round %d: gpu:%d's A^3[%d]", round, g, i);
                cr_expect_eq(cg[i], g ? A3[i] : A2[i], "round %d: gpu:%d's c[%d]", round, g, i);
            }
        }
        for (int g = 0; g < 2; g++) {
            CU(cudaSetDevice(g));
            cublasDestroy(h[g]);
            CU(cudaStreamDestroy(s[g]));
            CU(cudaFree(a[g]));
            CU(cudaFree(c[g]));
            CU(cudaFree(d[g]));
        }
        CU(cudaSetDevice(1));
        CU(cudaDeviceDisablePeerAccess(0));
        CU(cudaEventDestroy(e));
    }
}

Test(emu_devices_semantics, two_devices_compute_side_by_side_with_cudnn) {
    setenv("DGEMU_INTERLEAVE", "random", 1);
    need_two();
    const float v[4] = { 1, 2, 3, 4 }, one = 1, two = 2;
    cudnnTensorDescriptor_t t = four_floats();
    cudnnHandle_t h[2];
    cudaStream_t s[2];
    float *x[2], *y[2];
    for (int g = 0; g < 2; g++) {
        s[g] = stream_on(g);
        x[g] = floats_on(g, v, 4);
        y[g] = floats_on(g, v, 4);
        cr_assert_eq(cudnnCreate(&h[g]), CUDNN_STATUS_SUCCESS);
        cr_assert_eq(cudnnSetStream(h[g], s[g]), CUDNN_STATUS_SUCCESS);
    }
    for (int k = 0; k < 3; k++)
        for (int g = 0; g < 2; g++) {   /* y_g = 2 y_g + x_g, on each device in turn */
            CU(cudaSetDevice(g));
            cr_assert_eq(cudnnAddTensor(h[g], &one, t, x[g], &two, t, y[g]), CUDNN_STATUS_SUCCESS);
        }
    for (int g = 0; g < 2; g++) {
        CU(cudaStreamSynchronize(s[g]));
        float got[4];
        CU(cudaMemcpy(got, y[g], sizeof got, cudaMemcpyDeviceToHost));
        for (int i = 0; i < 4; i++) cr_expect_eq(got[i], 15 * v[i], "gpu:%d: ((2v + v) 2 + v) 2 + v", g);
    }
    CU(cudaSetDevice(0));
    for (int g = 0; g < 2; g++) cr_expect_eq(cudnnDestroy(h[g]), CUDNN_STATUS_SUCCESS, "destroying gpu:%d's handle from gpu:0", g);
    cudnnDestroyTensorDescriptor(t);
}
