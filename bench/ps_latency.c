/* bench/ps_latency.c — parameter-server round trips as a worker sees them: for requests of 1k,
 * 10k and 100k rows of a sparse table (rows of --dim floats, the CTR sample's 10), the time of a
 * pull (the embedding lookup of that many distinct ids) and of a push (dg_optimizer_step sending
 * their row gradients, plus a 2-element dense table), medians over --rounds, and the rows per
 * second each moves. Run as a job over the real transport:
 *
 *   dgrun --server_num 1 --worker_num 1 build/bin/bench_ps_latency [--dim 10] [--rounds 15]
 *
 * The rows exist before timing (a first pass makes them), so the figures are the steady state. The
 * job runs in sync mode, where each request is a round trip on the worker's thread (async posts
 * its pushes to the communicator and returns at once). */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}
static int die(const char *what) {
    fprintf(stderr, "bench_ps_latency: %s: %s\n", what, dg_last_error());
    return 1;
}

int main(int argc, char **argv) {
    int64_t dim = 10;
    int rounds = 15;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--dim") == 0) dim = atoll(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[++i]);
        else { fprintf(stderr, "usage: %s [--dim N] [--rounds N]\n", argv[0]); return 2; }
    }
    if (dim < 1 || dim > 4096 || rounds < 1 || rounds > 1000) { fprintf(stderr, "%s: --dim 1..4096, --rounds 1..1000\n", argv[0]); return 2; }
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = 1;
    if (dg_init(&ip) != 0) return die("init");
    dg_fleet_strategy st = dg_fleet_default_strategy();   /* sync: every push is a round trip on this thread */
    if (dg_fleet_init(false, &st) != 0) return die("fleet_init (run under dgrun --server_num S --worker_num 1)");
    if (dg_fleet_is_server()) {
        if (dg_fleet_init_server(NULL) != 0 || dg_fleet_run_server() != 0) return die("server");
        dg_fleet_shutdown();
        dg_shutdown();
        return 0;
    }
    if (dg_fleet_init_worker() != 0) return die("init_worker");
    dg_layer *emb = dg_fleet_sparse_embedding(dim, dg_fleet_sparse_default_params()), *fc = dg_nn_linear(1, 1);
    if (!emb || !fc) return die("model");
    int np;
    dg_tensor **params = dg_layer_parameters(fc, &np);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 1e-3;
    dg_optimizer *opt = dg_sgd(params, np, sp);
    free(params);
    if (!opt || !(opt = dg_fleet_distributed_optimizer(opt))) return die("optimizer");

    const int64_t sizes[3] = { 1000, 10000, 100000 };
    int64_t *ids = malloc(sizeof(int64_t) * 100000);
    double *pull = malloc(sizeof(double) * (size_t)rounds), *push = malloc(sizeof(double) * (size_t)rounds);
    if (!ids || !pull || !push) return die("out of memory");
    for (int64_t i = 0; i < 100000; i++) ids[i] = i * 7919 + 13;   /* distinct, spread over the hash */
    printf("parameter-server round trips, 1 server x 1 worker, rows of %lld floats, medians of %d:\n", (long long)dim, rounds);
    printf("  %8s  %10s  %12s  %10s  %12s\n", "rows", "pull ms", "pull rows/s", "push ms", "push rows/s");
    for (int k = 0; k < 3; k++) {
        int64_t n = sizes[k];
        for (int r = -1; r < rounds; r++) {   /* round -1 makes the rows */
            dg_scope *s = dg_scope_begin();
            dg_tensor *idt = dg_from_data(DG_SHAPE(n), DG_I64, ids);
            double t0 = now();
            dg_tensor *rows = dg_forward(emb, idt);
            double t1 = now();
            dg_tensor *loss = rows ? dg_add(dg_sum(rows, NULL, 0, false), dg_sum(dg_forward(fc, dg_ones(DG_SHAPE(1, 1), DG_F32)), NULL, 0, false)) : NULL;
            if (!loss || dg_backward(loss)) return die("lookup");
            double t2 = now();
            if (dg_optimizer_step(opt)) return die("push");
            double t3 = now();
            dg_optimizer_clear_grad(opt);
            dg_scope_end(s);
            if (r >= 0) pull[r] = t1 - t0, push[r] = t3 - t2;
        }
        double pl = median(pull, rounds), ps = median(push, rounds);
        printf("  %8lld  %10.3f  %12.0f  %10.3f  %12.0f\n", (long long)n, pl * 1e3, (double)n / pl, ps * 1e3, (double)n / ps);
    }
    free(ids);
    free(pull);
    free(push);
    if (dg_fleet_stop_worker() != 0) return die("stop_worker");
    dg_optimizer_free(opt);
    dg_layer_free(emb);
    dg_layer_free(fc);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
