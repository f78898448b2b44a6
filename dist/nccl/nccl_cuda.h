/* dist/nccl/nccl_cuda.h — what the NCCL transport uses of the CUDA module: its communication
 * streams and the events ordering it with the compute stream, device memory, and its CUDA error
 * formatting. The NCCL module reaches them through the library by name (dist/nccl/cuda_shim.c),
 * so both modules share one CUDA context and its streams. */
#ifndef DG_DIST_NCCL_STREAMS_H
#define DG_DIST_NCCL_STREAMS_H

#include <cuda_runtime.h>

cudaStream_t dg_cuda_comm_stream_at(int k);   /* communicator k's collectives are queued here */
int dg_cuda_comm_wait_compute_at(int k);      /* comm stream k waits for the compute stream's work so far */
int dg_cuda_compute_wait_comms(int n);        /* compute waits for comm streams 0..n-1 */
void *dg_cuda_alloc(size_t nbytes);
void dg_cuda_free(void *p);
/* 0, or the error recorded with `what` and the location, as DG_CUDA(call) does */
int dg_cuda_check(cudaError_t e, const char *what, const char *file, int line);
#define DG_CUDA(call) dg_cuda_check((call), #call, __FILE__, __LINE__)

#endif
