/* dist/nccl/cuda_shim.c — built into the NCCL module: the CUDA module's streams, events and
 * memory that the transport orders its collectives with, reached through the core by name
 * ("cuda:NAME", eager/module.c) so that both modules share the one CUDA context and stream. */
#include "../dist_internal.h"
#include "nccl_cuda.h"


cudaStream_t dg_cuda_comm_stream_at(int k) { DG_MODULE_FN(cudaStream_t (*)(int), "cuda:dg_cuda_comm_stream_at"); return fn ? fn(k) : NULL; }
int dg_cuda_comm_wait_compute_at(int k) { DG_MODULE_FN(int (*)(int), "cuda:dg_cuda_comm_wait_compute_at"); return fn ? fn(k) : DG_EUNSUPPORTED; }
int dg_cuda_compute_wait_comms(int n) { DG_MODULE_FN(int (*)(int), "cuda:dg_cuda_compute_wait_comms"); return fn ? fn(n) : DG_EUNSUPPORTED; }
void *dg_cuda_alloc(size_t n) { DG_MODULE_FN(void *(*)(size_t), "cuda:dg_cuda_alloc"); return fn ? fn(n) : NULL; }
void dg_cuda_free(void *p) { DG_MODULE_FN(void (*)(void *), "cuda:dg_cuda_free"); if (fn) fn(p); }
int dg_cuda_check(cudaError_t e, const char *what, const char *file, int line) {
    DG_MODULE_FN(int (*)(cudaError_t, const char *, const char *, int), "cuda:dg_cuda_check");
    return fn ? fn(e, what, file, line) : DG_EUNSUPPORTED;
}
