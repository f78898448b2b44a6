/* test/cuda_emu/device_kernels.h — the kernel launches test_emu_devices.c's programs make
 * (device_kernels.cu): each queues one kernel on stream s and returns cudaGetLastError(), the
 * launch's own error (cudaErrorInvalidResourceHandle on a stream of another device). */
#ifndef DGEMU_DEVICE_KERNELS_H
#define DGEMU_DEVICE_KERNELS_H
#include <cuda_runtime.h>
#ifdef __cplusplus
extern "C" {
#endif
int dgm_fill(int *p, int n, int v, cudaStream_t s);               /* p[i] = v */
int dgm_add(const int *x, int *y, int n, int v, cudaStream_t s);  /* y[i] = x[i] + v */
#ifdef __cplusplus
}
#endif
#endif
