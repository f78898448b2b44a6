/* test/dist/workers/mpi_worker.c — a worker for launcher_test.sh that checks the CPU-mode promise
 * the library's MPI communicator relies on: the programs dgrun starts through its per-rank shim
 * form ONE MPI world whose ranks agree with PADDLE_TRAINER_ID / PADDLE_TRAINERS_NUM.
 * Built with mpicc (Open MPI); the test skips this check when it was not built. */
#include <mpi.h>
#include "worker_env.h"

int main(int argc, char **argv) {
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_worker: MPI_Init failed\n");
        return 1;
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int env_rank = -1, env_world = 0;
    const char *id = expect_rank("mpi_worker", &env_rank, &env_world);
    int mine = rank + 1, sum = 0;
    /* a collective only completes if every rank is in the same world */
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int ok = id && env_rank == rank && env_world == size && sum == size * (size + 1) / 2;
    printf("mpi rank %d of %d, PADDLE_TRAINER_ID=%d PADDLE_TRAINERS_NUM=%d allreduce=%d %s\n", rank, size,
           env_rank, env_world, sum, ok ? "ok" : "MISMATCH");
    fflush(stdout);
    MPI_Finalize();
    return ok ? 0 : 1;
}
