/* test/cuda_emu/nccl_peer_exit.c — the NCCL transport when a peer is gone: run by
 * `dgrun --gpus 0,1` on the emulated GPUs, rank 1 leaves right after the communicator is made;
 * rank 0's all-reduce must fail with a message naming the failure (the communicator aborted),
 * neither hang nor report success. Exits 0 when rank 0 saw the error. */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    const char *id = getenv("PADDLE_TRAINER_ID");
    int rank = id ? atoi(id) : 0;
    char dev[16];
    snprintf(dev, sizeof dev, "gpu:%d", rank % 2);
    if (dg_init(&(dg_init_params){ .device = dev, .quiet = true, .num_threads = 1 })) return 2;
    dg_comm *c = dg_comm_new((dg_comm_params){ .timeout_s = 20 });
    if (!c) { fprintf(stderr, "rank %d: %s\n", rank, dg_last_error()); return 3; }
    if (rank == 1) { sleep(1); _exit(0); }
    float v[4] = { 1, 2, 3, 4 };
    dg_tensor *t = dg_from_data(DG_SHAPE(4), DG_F32, v);
    int rc = dg_comm_all_reduce(c, t, DG_COMM_SUM);
    printf("rank 0: all_reduce with rank 1 gone: %s\n", rc ? dg_last_error() : "succeeded (wrong)");
    dg_comm_free(c);
    return rc ? 0 : 1;
}
