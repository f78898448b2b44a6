/* test/cuda_emu/nccl_peer_exit.c — the NCCL transport when a peer is gone or stalls: run by
 * `dgrun --gpus 0,1` on the emulated GPUs. Both ranks first pass a barrier; then rank 1 leaves
 * (`exit`) or stops answering for longer than the 2 s timeout (`stall`), and rank 0's all-reduce
 * must fail with a message (peer gone, or the timeout and an aborted communicator), neither hang
 * nor report success. Exits 0 when rank 0 saw the error. */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    bool stall = argc > 1 && strcmp(argv[1], "stall") == 0;
    const char *id = getenv("PADDLE_TRAINER_ID");
    int rank = id ? atoi(id) : 0;
    char dev[16];
    snprintf(dev, sizeof dev, "gpu:%d", rank % 2);
    dg_init_params ip = dg_init_default_params();
    ip.device = dev;
    ip.quiet = true;
    ip.num_threads = 1;
    if (dg_init(&ip)) return 2;
    dg_comm_params cmp = dg_comm_default_params();
    cmp.timeout_s = stall ? 2 : 20;
    dg_comm *c = dg_comm_new(cmp);
    if (!c) { fprintf(stderr, "rank %d: %s\n", rank, dg_last_error()); return 3; }
    if (dg_comm_barrier(c) != 0) { fprintf(stderr, "rank %d: barrier: %s\n", rank, dg_last_error()); return 4; }
    if (rank == 1) {
        sleep(stall ? 5 : 1);
        _exit(0);
    }
    float v[4] = { 1, 2, 3, 4 };
    dg_tensor *t = dg_from_data(DG_SHAPE(4), DG_F32, v);
    int rc = dg_comm_all_reduce(c, t, DG_COMM_SUM);
    printf("rank 0: all_reduce with rank 1 %s: %s\n", stall ? "stalled" : "gone", rc ? dg_last_error() : "succeeded (wrong)");
    dg_comm_free(c);
    return rc ? 0 : 1;
}
