/* eager/cuda/absent/no_cuda.c — the CUDA lookup in a build without the CUDA backend (CUDA=0, or
 * no nvcc found): asking for a GPU is an error that says so. The build links either this file
 * or eager/cuda/cuda_backend.c. */
#include "../../backend.h"

const dg_backend *dg_cuda_backend_get(int index) {
    DG_ERR(DG_EDEVICE, "gpu:%d requested but this build has no CUDA backend (built with CUDA=0 or without nvcc)", index);
    return NULL;
}

bool dg_cuda_built(void) { return false; }
const dg_backend *dg_cuda_backend_started(void) { return NULL; }
