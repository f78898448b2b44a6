/* test/cuda_emu/detector_kernels.cu — small CUDA programs, right and deliberately broken, that
 * test_emu_detectors.c runs to show that the emulator catches what it claims to catch: a missing
 * synchronise, a host read of a device pointer, a missing event between streams, a divergent
 * barrier, an out-of-bounds access, launches over the device limits; and that barriers, warp
 * shuffles and atomics compute what they should. Each function returns what the host saw. */
#include <cuda_runtime.h>
#include <stdio.h>
#include "detector_kernels.h"

#ifndef DGK_LAUNCH
#define DGK_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<grid, block, shmem, stream>>>
#endif

__global__ void fill_kernel(int *p, int n, int v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) p[i] = v;
}
__global__ void copy_plus_one(const int *x, int *y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i] + 1;
}
/* threads below `quit` leave before the barrier when quit > 0 */
__global__ void barrier_kernel(int *out, int quit) {
    __shared__ int sh[256];
    if ((int)threadIdx.x < quit) return;
    sh[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = sh[blockDim.x - 1 - threadIdx.x];
}
__global__ void warp_sum_kernel(const int *x, int *out) {
    int v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int s = 16; s > 0; s >>= 1) v += __shfl_down_sync(0xffffffffu, v, s);
    if ((threadIdx.x & 31) == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
}
__global__ void atomic_kernel(int *count, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) atomicAdd(count, 1);
}
__global__ void overrun_kernel(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    p[i + n] = 1;    /* every thread writes n elements too far */
}

static int *dev_ints(int n) {
    void *p = NULL;
    if (cudaMalloc(&p, (size_t)n * sizeof(int)) != cudaSuccess) return NULL;
    return (int *)p;
}

extern "C" int dgd_read_after_copy(bool synchronise) {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int *d = dev_ints(1024), host[1024] = { 0 };
    DGK_LAUNCH(4, 256, 0, s, fill_kernel)(d, 1024, 7);
    cudaMemcpyAsync(host, d, sizeof host, cudaMemcpyDeviceToHost, s);
    if (synchronise) cudaStreamSynchronize(s);
    int seen = host[1000];
    cudaStreamSynchronize(s);   /* the copy lands before `host` goes out of scope */
    cudaFree(d);
    cudaStreamDestroy(s);
    return seen;
}

extern "C" float dgd_host_reads_device_pointer(void) {
    void *p = NULL;
    cudaMalloc(&p, 64);
    cudaMemset(p, 0, 64);
    return *(volatile float *)p;   /* the defect: a device pointer dereferenced on the host */
}

extern "C" int dgd_two_streams(bool with_event) {
    cudaStream_t a, b;
    cudaEvent_t e;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    int *x = dev_ints(512), *y = dev_ints(512), host = -1;
    cudaMemsetAsync(x, 0, 512 * sizeof(int), a);
    cudaMemsetAsync(y, 0, 512 * sizeof(int), b);
    cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    DGK_LAUNCH(2, 256, 0, a, fill_kernel)(x, 512, 41);
    if (with_event) {
        cudaEventRecord(e, a);
        cudaStreamWaitEvent(b, e, 0);
    }
    DGK_LAUNCH(2, 256, 0, b, copy_plus_one)(x, y, 512);
    cudaMemcpyAsync(&host, y + 300, sizeof host, cudaMemcpyDeviceToHost, b);
    cudaStreamSynchronize(b);
    cudaDeviceSynchronize();
    cudaFree(x);
    cudaFree(y);
    cudaEventDestroy(e);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    return host;
}

extern "C" int dgd_barrier(int quit, int *out_value) {
    int *d = dev_ints(2 * 256);
    DGK_LAUNCH(2, 256, 0, (cudaStream_t)0, barrier_kernel)(d, quit);
    int host[512];
    cudaError_t e = cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && out_value) *out_value = host[256 + 10];
    return (int)e;
}

extern "C" int dgd_warp_sum(int blocks, int *out_total) {
    int n = blocks * 256;
    int *x = dev_ints(n), *w = dev_ints(n / 32);
    int *h = new int[n];
    for (int i = 0; i < n; i++) h[i] = i % 97;
    cudaMemcpy(x, h, (size_t)n * sizeof(int), cudaMemcpyHostToDevice);
    DGK_LAUNCH(blocks, 256, 0, (cudaStream_t)0, warp_sum_kernel)(x, w);
    cudaError_t e = cudaMemcpy(h, w, (size_t)(n / 32) * sizeof(int), cudaMemcpyDeviceToHost);
    long long t = 0;
    for (int i = 0; i < n / 32; i++) t += h[i];
    *out_total = (int)t;
    delete[] h;
    cudaFree(x);
    cudaFree(w);
    return (int)e;
}

extern "C" int dgd_atomics(int n, int *out_count) {
    int *c = dev_ints(1);
    cudaMemset(c, 0, sizeof(int));
    DGK_LAUNCH(64, 128, 0, (cudaStream_t)0, atomic_kernel)(c, n);
    return (int)cudaMemcpy(out_count, c, sizeof(int), cudaMemcpyDeviceToHost);
}

extern "C" int dgd_overrun(void) {
    int *d = dev_ints(1024);
    DGK_LAUNCH(4, 256, 0, (cudaStream_t)0, overrun_kernel)(d, 1024);
    return (int)cudaDeviceSynchronize();
}

extern "C" int dgd_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
    int *d = dev_ints(16);
    cudaGetLastError();
    DGK_LAUNCH(dim3(gx, gy, gz), dim3(bx, by, bz), 0, (cudaStream_t)0, fill_kernel)(d, 0, 0);
    return (int)cudaGetLastError();
}

/* ---- right programs the emulator must run as a GPU would ---- */

__global__ void set_one(int *p, int v) { if (threadIdx.x == 0 && blockIdx.x == 0) *p = v; }
__global__ void copy_one(const int *x, int *y) { if (threadIdx.x == 0 && blockIdx.x == 0) *y = *x; }

extern "C" int dgd_event_rerecorded_elsewhere(void) {
    cudaStream_t a, b, c;
    cudaEvent_t e;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking);
    cudaEventCreate(&e);
    int *x = dev_ints(1), *y = dev_ints(1), h = -1;
    cudaMemset(x, 0, 4);
    cudaMemset(y, 0, 4);
    DGK_LAUNCH(1, 1, 0, a, set_one)(x, 1);
    cudaEventRecord(e, a);            /* c waits for this record ... */
    cudaStreamWaitEvent(c, e, 0);
    cudaEventRecord(e, b);            /* ... not for this later one on another stream */
    cudaStreamSynchronize(b);
    DGK_LAUNCH(1, 1, 0, c, copy_one)(x, y);
    cudaStreamSynchronize(c);
    cudaMemcpy(&h, y, 4, cudaMemcpyDeviceToHost);
    cudaDeviceSynchronize();
    cudaEventDestroy(e);
    return h;
}

extern "C" int dgd_wait_chain(int n) {
    cudaStream_t s[64];
    cudaEvent_t e[64];
    int *x = dev_ints(1), h = -1;
    for (int i = 0; i < n; i++) { cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking); cudaEventCreate(&e[i]); }
    DGK_LAUNCH(1, 1, 0, s[n - 1], set_one)(x, 5);
    cudaEventRecord(e[n - 1], s[n - 1]);
    for (int i = n - 2; i >= 0; i--) { cudaStreamWaitEvent(s[i], e[i + 1], 0); cudaEventRecord(e[i], s[i]); }
    cudaMemcpyAsync(&h, x, 4, cudaMemcpyDeviceToHost, s[0]);
    cudaStreamSynchronize(s[0]);
    return h;
}

extern "C" int dgd_legacy_stream_orders_blocking_streams(void) {
    cudaStream_t s;
    cudaStreamCreate(&s);   /* a blocking stream: the legacy default stream waits for it */
    int *x = dev_ints(1), h = -1;
    cudaMemset(x, 0, 4);
    DGK_LAUNCH(1, 1, 0, s, set_one)(x, 7);
    cudaMemcpy(&h, x, 4, cudaMemcpyDeviceToHost);
    cudaStreamSynchronize(s);
    return h;
}

/* lanes 0-15 shuffle among themselves, then the whole warp: the parities must still agree */
__global__ void partial_then_full(int *out) {
    int lane = threadIdx.x & 31, v = lane;
    if (lane < 16) v = __shfl_sync(0x0000ffffu, v, lane ^ 1);
    __syncthreads();
    out[threadIdx.x] = __shfl_sync(0xffffffffu, v, (lane + 16) & 31);
}
/* the two halves of a warp shuffle separately (legal since Volta) */
__global__ void halves(int *out) {
    int lane = threadIdx.x & 31, v = lane;
    if (lane < 16) v = __shfl_xor_sync(0x0000ffffu, v, 1);
    else v = __shfl_xor_sync(0xffff0000u, v, 1);
    out[threadIdx.x] = v;
}
extern "C" int dgd_shuffle_groups(int *partial0, int *partial16, int *half0, int *half17) {
    int *d = dev_ints(32), h[32];
    DGK_LAUNCH(1, 32, 0, (cudaStream_t)0, partial_then_full)(d);
    cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    *partial0 = h[0];
    *partial16 = h[16];
    DGK_LAUNCH(1, 32, 0, (cudaStream_t)0, halves)(d);
    if (!e) e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    *half0 = h[0];
    *half17 = h[17];
    return (int)e;
}

/* block 0 leaves before the barrier the others meet (legal: no thread of block 0 waits) */
__global__ void skip_first_block(int *out) {
    __shared__ int sh[32];
    if (blockIdx.x == 0) return;
    sh[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[blockIdx.x * 32 + threadIdx.x] = sh[31 - threadIdx.x];
}
__global__ void plain_fill(int *p) { p[blockIdx.x * blockDim.x + threadIdx.x] = 1; }
extern "C" int dgd_barrier_only_in_later_blocks(int *value) {
    int *d = dev_ints(64 * 32), h[64 * 32];
    DGK_LAUNCH(64, 32, 0, (cudaStream_t)0, skip_first_block)(d);
    cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    *value = h[5 * 32 + 3];
    return (int)e;
}
extern "C" void dgd_plain_kernel_twice(void) {
    int *d = dev_ints(64 * 64);
    DGK_LAUNCH(64, 64, 0, (cudaStream_t)0, plain_fill)(d);
    DGK_LAUNCH(64, 64, 0, (cudaStream_t)0, plain_fill)(d);
    cudaDeviceSynchronize();
}
