/* bench/dist_allreduce.c — all-reduce bandwidth of the communicator for 1..64 MB f32 buffers.
 * Run it under the launcher (bench/run_dist.sh does): `mpirun -np 2 build/bin/bench_dist_allreduce`
 * for the MPI transport (or dgrun --gpus 0,1 for NCCL). Prints, per size, the median time of
 * the repetitions, algorithm bandwidth (bytes / time) and bus bandwidth (algbw * 2(n-1)/n, the
 * figure nccl-tests print, comparable across world sizes). */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "../samples/flags.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

int main(int argc, char **argv) {
    static const char *const flags[] = { NULL };
    su_args(argc, argv, flags);
    dg_init_params ip = dg_init_default_params();
    ip.quiet = true;
    ip.num_threads = 1;
    if (dg_init(&ip) || dg_fleet_init(true, NULL)) {
        fprintf(stderr, "bench_dist_allreduce: %s\n", dg_last_error());
        return 1;
    }
    dg_comm *c = dg_fleet_comm();
    int world = dg_comm_size(c), rank = dg_comm_rank(c);
    if (rank == 0) printf("all-reduce (sum, f32) over %d ranks, transport %s\n%10s %12s %14s %14s\n", world,
                          dg_comm_backend_name(c), "MB", "time ms", "algbw GB/s", "busbw GB/s");
    for (int mb = 1; mb <= 64; mb *= 2) {
        int64_t n = (int64_t)mb * 1048576 / 4;
        dg_tensor *t = dg_ones(DG_SHAPE(n), DG_F32);
        enum { REPS = 9 };
        double ts[REPS];
        for (int w = 0; w < 2; w++) dg_comm_all_reduce(c, t, DG_COMM_SUM);
        for (int r = 0; r < REPS; r++) {
            dg_comm_barrier(c);
            double t0 = now();
            if (dg_comm_all_reduce(c, t, DG_COMM_SUM)) { fprintf(stderr, "%s\n", dg_last_error()); return 1; }
            dg_synchronize(dg_get_device());
            ts[r] = now() - t0;
        }
        qsort(ts, REPS, sizeof *ts, cmp);
        double med = ts[REPS / 2], bytes = (double)n * 4;
        if (rank == 0) printf("%10d %12.3f %14.2f %14.2f\n", mb, med * 1e3, bytes / med / 1e9, bytes / med / 1e9 * 2.0 * (world - 1) / world);
        dg_tensor_free(t);
    }
    dg_fleet_shutdown();
    return 0;
}
