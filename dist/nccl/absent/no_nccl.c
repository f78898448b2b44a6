/* dist/nccl/absent/no_nccl.c — the NCCL transport in a build without CUDA: asking for it is an
 * error that says so. */
#include "../../dist_internal.h"

bool dg_comm_nccl_built(void) { return false; }

int dg_comm_nccl_make(dg_comm *c, const dg_dist_env *env) {
    DG_ERR(DG_EUNSUPPORTED, "rank %d of %d needs the NCCL transport but this build has no CUDA backend (CUDA=0 or no nvcc)",
           env->rank, env->world_size);
    return DG_EUNSUPPORTED;
}
