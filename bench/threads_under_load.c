/* bench/threads_under_load.c — seconds per training step of the MNIST CNN (Paddle's MNIST
 * tutorial network, dg_mnist_cnn; batch 64 of synthetic images, Adam 1e-3) at a given thread
 * setting, for bench/run_threads_under_load.sh, which runs it with the machine idle and with a
 * busy-loop process beside it:
 *   bench_threads_under_load default|N [STEPS] [MAX_SECONDS]
 * "default" sets nothing (no dg_set_num_threads, no environment variable): what a program that
 * never thinks about threads gets. The timed loop stops after STEPS steps (default 300) or
 * MAX_SECONDS (default 30), whichever comes first, so a pathological setting cannot hold the
 * machine for minutes. Prints
 *   <setting> <seconds per step> s/step <steps> steps <threads in use at the end> threads
 *   <CPUs other processes kept busy during the timed loop> others
 * the last from /proc/stat's busy time less this process's own CPU time, so a run can be read
 * against what else the machine was doing. */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../samples/flags.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* busy seconds of all CPUs (user, nice, system, irq, softirq, steal); -1 without /proc/stat */
static double machine_busy(void) {
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long u = 0, ni = 0, sy = 0, id = 0, io = 0, irq = 0, si = 0, st = 0;
    int got = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &u, &ni, &sy, &id, &io, &irq, &si, &st) : 0;
    if (f) fclose(f);
    return got >= 8 ? (double)(u + ni + sy + irq + si + st) / (double)sysconf(_SC_CLK_TCK) : -1;
}
static double own_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int step(dg_layer *net, dg_optimizer *opt, const dg_tensor *x, const dg_tensor *y) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *loss = dg_cross_entropy(dg_forward(net, x), y);
    int rc = !loss || dg_backward(loss) || dg_optimizer_step(opt);
    dg_optimizer_clear_grad(opt);
    dg_scope_end(s);
    return rc;
}

int main(int argc, char **argv) {
    static const char *const flags[] = { NULL };
    su_positional pos = { .usage = "default|THREADS [STEPS (300)] [MAX_SECONDS (30)]", .min = 1, .max = 3 };
    su_args_pos(argc, argv, flags, &pos);
    const char *setting = pos.args[0];
    char *e1 = NULL, *e2 = NULL;
    int steps = pos.n > 1 ? (int)strtol(pos.args[1], &e1, 10) : 300;
    double max_s = pos.n > 2 ? strtod(pos.args[2], &e2) : 30.0;
    if ((e1 && (*e1 || steps < 1)) || (e2 && (*e2 || !(max_s > 0))))
        su_usage_error(argv[0], flags, &pos, "%s", "STEPS must be a whole number >= 1 and MAX_SECONDS a number > 0");
    char *e0 = NULL;
    long th = strcmp(setting, "default") ? strtol(setting, &e0, 10) : 1;
    if ((e0 && *e0) || th < 1 || th > 1024)
        su_usage_error(argv[0], flags, &pos, "argument THREADS: 'default' or a whole number in [1, 1024], got '%s'", setting);
    dg_init_params ip = dg_init_default_params();
    ip.quiet = true;
    if (dg_init(&ip)) { fprintf(stderr, "init: %s\n", dg_last_error()); return 1; }
    if (strcmp(setting, "default") != 0) dg_set_num_threads(atoi(setting));
    dg_manual_seed(1);
    dg_layer *net = dg_mnist_cnn();
    dg_tensor *x = dg_randn(DG_SHAPE(64, 1, 28, 28), DG_F32);
    dg_tensor *y = dg_keep(dg_cast(dg_mul_scalar(dg_rand(DG_SHAPE(64), DG_F32), 9.99), DG_I64));
    if (!net || !x || !y) { fprintf(stderr, "setup: %s\n", dg_last_error()); return 1; }
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    dg_adam_params ap = dg_adam_default_params();
    ap.lr = 1e-3;
    dg_optimizer *opt = dg_adam(p, n, ap);
    free(p);
    for (int i = 0; i < 3; i++)   /* warm-up: primitives made, blocks first touched */
        if (step(net, opt, x, y)) { fprintf(stderr, "step: %s\n", dg_last_error()); return 1; }
    int done = 0;
    double busy0 = machine_busy(), own0 = own_cpu();
    double t0 = now(), t = 0;
    while (done < steps && t < max_s) {
        if (step(net, opt, x, y)) { fprintf(stderr, "step: %s\n", dg_last_error()); return 1; }
        done++;
        t = now() - t0;
    }
    double others = busy0 < 0 ? -1 : (machine_busy() - busy0 - (own_cpu() - own0)) / t;
    printf("%s %.5f s/step %d steps %d threads %.2f others\n", setting, t / done, done, dg_get_num_threads(), others);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_tensor_free(x);
    dg_tensor_free(y);
    return 0;
}
