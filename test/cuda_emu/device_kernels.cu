/* test/cuda_emu/device_kernels.cu — the two kernels test_emu_devices.c launches on one device or
 * another: a fill and a read of one buffer into another. Which device's memory they may touch is
 * the point of those tests, so they stay this simple. */
#include <cuda_runtime.h>
#include "device_kernels.h"

#ifndef DGK_LAUNCH
#define DGK_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<grid, block, shmem, stream>>>
#endif

__global__ void dgm_fill_kernel(int *p, int n, int v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) p[i] = v;
}
__global__ void dgm_add_kernel(const int *x, int *y, int n, int v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i] + v;
}

extern "C" int dgm_fill(int *p, int n, int v, cudaStream_t s) {
    cudaGetLastError();
    DGK_LAUNCH(2, 128, 0, s, dgm_fill_kernel)(p, n, v);
    return (int)cudaGetLastError();
}
extern "C" int dgm_add(const int *x, int *y, int n, int v, cudaStream_t s) {
    cudaGetLastError();
    DGK_LAUNCH(2, 128, 0, s, dgm_add_kernel)(x, y, n, v);
    return (int)cudaGetLastError();
}
