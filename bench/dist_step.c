/* bench/dist_step.c — the cost of DataParallel on the MNIST CNN: mean training-step time at a
 * per-rank batch (synthetic inputs, Adam), and the time spent inside apply_collective_grads.
 * Run alone it is the single-process baseline (world of one: apply only checks); under mpirun
 * with 2 ranks it measures the DataParallel step with overlap off or on. With overlap off the
 * apply time is the whole communication; with overlap on it is the part left exposed, so
 * 1 - exposed(on) / apply(off) is the fraction of communication hidden behind backward.
 *
 *   bench_dist_step [--batch 64] [--steps 60] [--warmup 10] [--overlap 0|1] [--bucket-mb X] [--local-sgd K]
 * prints: "dist_step world W overlap O batch B: step_ms X apply_ms Y" (rank 0; medians over steps);
 * with --local-sgd K (Local SGD, dg_dp_set_local_sgd: the step includes dg_dp_local_sgd_step) also
 * "local_sgd K: N all-reduce rounds in S steps" (gradient rounds at K = 1, averagings above). */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../samples/flags.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp); return v[n / 2]; }
int main(int argc, char **argv) {
    static const char *const flags[] = { "--batch=64", "--steps=60", "--warmup=10", "--overlap=0", "--bucket-mb=25 (first bucket 1)",
                                         "--threads=1", "--local-sgd=0 (off)", NULL };
    su_args(argc, argv, flags);
    int64_t B = (int64_t)su_flag_range(argc, argv, "--batch", 64, 1, 65536);
    int steps = (int)su_flag_range(argc, argv, "--steps", 60, 1, 1e6), warm = (int)su_flag_range(argc, argv, "--warmup", 10, 0, 1e6);
    dg_fleet_strategy st = dg_fleet_default_strategy();
    st.overlap = su_flag_range(argc, argv, "--overlap", 0, 0, 1) != 0;
    if (su_flag(argc, argv, "--bucket-mb", NULL))   /* else Paddle's 25 MB and a 1 MB first bucket */
        st.fuse_grad_size_in_MB = st.first_bucket_mb = su_flag_range(argc, argv, "--bucket-mb", 25, 1e-9, 1e6);
    dg_init_params ip = dg_init_default_params();
    ip.quiet = true;
    ip.num_threads = (int)su_flag_range(argc, argv, "--threads", 1, 1, 1024);
    ip.seed = 7;
    if (dg_init(&ip) ||
        dg_fleet_init(true, &st)) {
        fprintf(stderr, "bench_dist_step: %s\n", dg_last_error());
        return 1;
    }
    dg_layer *net = dg_mnist_cnn();
    dg_layer *dp = dg_fleet_distributed_model(dg_layer_ref(net));
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = 1e-3;
    dg_optimizer *opt = dg_adam(params, n, adp);
    free(params);
    if (!dp || !opt) { fprintf(stderr, "bench_dist_step: %s\n", dg_last_error()); return 1; }
    int local_k = (int)su_flag_count(argc, argv, "--local-sgd", 0);
    if (local_k > 0 && dg_dp_set_local_sgd(dp, local_k, false)) { fprintf(stderr, "bench_dist_step: %s\n", dg_last_error()); return 1; }
    dg_tensor *x = dg_randn(DG_SHAPE(B, 1, 28, 28), DG_F32);
    dg_tensor *y = dg_cast(dg_mul_scalar(dg_rand(DG_SHAPE(B), DG_F32), 9.999), DG_I64);
    /* per-step times; medians, since one step stalled by the OS (2 ranks on 2 cores) would
     * dominate a mean of sub-millisecond apply times */
    double *t_all = calloc((size_t)steps, sizeof *t_all), *t_apply = calloc((size_t)steps, sizeof *t_apply);
    for (int s = 0; s < warm + steps; s++) {
        dg_scope *sc = dg_scope_begin();
        double t0 = now();
        dg_tensor *loss = dg_dp_scale_loss(dp, dg_cross_entropy(dg_forward(dp, x), y));
        if (!loss || dg_backward(loss)) { fprintf(stderr, "step: %s\n", dg_last_error()); return 1; }
        double t1 = now();
        if (dg_dp_apply_collective_grads(dp)) { fprintf(stderr, "apply: %s\n", dg_last_error()); return 1; }
        double t2 = now();
        dg_optimizer_step(opt);
        if (local_k > 0 && dg_dp_local_sgd_step(dp) < 0) { fprintf(stderr, "local sgd: %s\n", dg_last_error()); return 1; }
        dg_optimizer_clear_grad(opt);
        dg_scope_end(sc);
        double t3 = now();
        if (s >= warm) { t_all[s - warm] = t3 - t0; t_apply[s - warm] = t2 - t1; }
    }
    if (dg_fleet_worker_index() == 0)
        printf("dist_step world %d overlap %d batch %lld: step_ms %.3f apply_ms %.3f (medians of %d steps)\n", dg_fleet_worker_num(),
               st.overlap, (long long)B, median(t_all, steps) * 1e3, median(t_apply, steps) * 1e3, steps);
    if (local_k > 0 && dg_fleet_worker_index() == 0)
        printf("local_sgd %d: %lld all-reduce rounds in %d steps\n", local_k,
               (long long)(local_k == 1 ? warm + steps : dg_dp_local_sgd_averagings(dp)), warm + steps);
    free(t_all);
    free(t_apply);
    dg_tensor_free(x);
    dg_tensor_free(y);
    dg_optimizer_free(opt);
    dg_layer_free(dp);
    dg_layer_free(net);
    dg_fleet_shutdown();
    return 0;
}
