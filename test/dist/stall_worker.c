/* test/dist/stall_worker.c — a worker for launcher_test.sh's watchdog checks: a small LinearNet
 * under DataParallel (buckets all-reduced from backward's hooks) plus one explicit all-reduce per
 * step, STEPS steps spaced by 50 ms, so the test has time to stop one rank mid-run. Each rank
 * writes its pid to DIR/pid.stall.RANK (for the test's SIGSTOP and its cleanup) and, at the end,
 * the sum of its parameters, which a run whose rank was stopped and resumed in time must match.
 *
 *   stall_worker --dir DIR [--steps N] */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f, const char *prog) { fprintf(f, "usage: %s --dir DIR [--steps N]\n", prog); }

int main(int argc, char **argv) {
    const char *dir = NULL;
    int steps = 60;
    /* flags as argparse takes them: --name value; anything else exits 2 */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout, argv[0]); return 0; }
        bool d = !strcmp(argv[i], "--dir"), s = !strcmp(argv[i], "--steps");
        if (!d && !s) { usage(stderr, argv[0]); fprintf(stderr, "%s: error: unrecognized arguments: %s\n", argv[0], argv[i]); return 2; }
        if (i + 1 >= argc) { usage(stderr, argv[0]); fprintf(stderr, "%s: error: argument %s: expected one argument\n", argv[0], argv[i]); return 2; }
        const char *v = argv[++i];
        char *end;
        long n = strtol(v, &end, 10);
        if (s && (!*v || *end || n < 1)) { usage(stderr, argv[0]); fprintf(stderr, "%s: error: argument --steps: invalid value: '%s'\n", argv[0], v); return 2; }
        if (d) dir = v; else steps = (int)n;
    }
    if (!dir) { usage(stderr, argv[0]); fprintf(stderr, "%s: error: the following arguments are required: --dir\n", argv[0]); return 2; }
    if (dg_init(NULL) != 0 || dg_fleet_init(true, NULL) != 0) { fprintf(stderr, "init: %s\n", dg_last_error()); return 1; }
    int rank = dg_fleet_worker_index();
    char path[512];
    snprintf(path, sizeof path, "%s/pid.stall.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "cannot write %s\n", path); return 1; }
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);

    dg_manual_seed(7 + (uint64_t)rank);
    dg_layer *net = dg_nn_sequential(2, dg_nn_linear(10, 10), dg_nn_linear(10, 1));
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.01;
    dg_optimizer *opt = dg_fleet_distributed_optimizer(dg_sgd(params, n, sp));
    dg_layer *dp = dg_fleet_distributed_model(net);
    if (!dp || !opt) { fprintf(stderr, "setup: %s\n", dg_last_error()); return 1; }
    for (int step = 0; step < steps; step++) {
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        dg_scope *s = dg_scope_begin();
        dg_tensor *loss = dg_mse_loss(dg_forward(dp, dg_randn(DG_SHAPE(8, 10), DG_F32)), dg_randn(DG_SHAPE(8, 1), DG_F32));
        dg_tensor *count = dg_full(DG_SHAPE(1), 1.0, DG_F32);
        if (!loss || dg_backward(dg_dp_scale_loss(dp, loss)) || dg_dp_apply_collective_grads(dp) || dg_optimizer_step(opt) ||
            dg_comm_all_reduce(dg_fleet_comm(), count, DG_COMM_SUM)) {
            fprintf(stderr, "rank %d step %d: %s\n", rank, step, dg_last_error());
            return 1;
        }
        dg_optimizer_clear_grad(opt);
        printf("rank %d step %d ranks %g\n", rank, step, dg_item(count));
        fflush(stdout);
        dg_scope_end(s);
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += dg_item(dg_sum_all(params[i]));
    printf("rank %d done: parameter sum %.9g\n", rank, sum);
    free(params);
    dg_fleet_shutdown();
    return 0;
}
