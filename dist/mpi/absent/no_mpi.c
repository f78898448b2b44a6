/* dist/mpi/absent/no_mpi.c — the MPI transport in a build without MPI (MPI=0 or no mpi.h):
 * asking for it is an error that says how to get it. */
#include "../../dist_internal.h"

bool dg_comm_mpi_built(void) { return false; }

int dg_comm_mpi_make(dg_comm *c, const dg_dist_env *env) {
    DG_ERR(DG_EUNSUPPORTED, "rank %d of %d needs the MPI transport but this build has none "
           "(install libopenmpi-dev and rebuild with MPI=auto or MPI=1)", env->rank, env->world_size);
    return DG_EUNSUPPORTED;
}

int dg_mpi_broadcast_bytes(void *buf, size_t n, int root) {
    DG_ERR(DG_EUNSUPPORTED, "broadcasting %zu bytes over MPI: MPI was not built into this library "
           "(install libopenmpi-dev and rebuild with MPI=auto or MPI=1)", n);
    return DG_EUNSUPPORTED;
}
