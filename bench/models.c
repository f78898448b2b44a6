/* bench/models.c — training and inference throughput of the Paddle tutorials' models on the CPU, one
 * workload per process so peak RSS belongs to it:
 *   bench_models <workload> <threads>
 * workloads: mnist (Paddle's multi-GPU MNIST tutorial CNN, batch 100, SGD 0.01), cifar (Paddle's Fleet collective tutorial MyNet, batch 32, Adam),
 * face (Paddle's Fleet collective tutorial FaceNet = ResNet18 + keypoint head, batch 32 at 96x96, MSE, Adam),
 * resnet18_infer (ResNet18 eval, batch 32 at 224x224), linear (Paddle's dynamic-graph distributed quick start LinearNet, batch 10,
 * MSE, Adam: an overhead-bound loop, reported in steps/s). Prints
 *   <workload>_t<threads> <images/s | steps/s> img/s|steps/s <peak RSS MB> MB
 * and on stderr the peak bytes held by live tensors (dg_memory_stats_get's peak_allocated).
 * bench/run_models.sh alternates it with bench/models_torch.py. DG_BENCH_AMP=bf16|fp16 trains and
 * infers under autocast (O1; DG_BENCH_AMP_LEVEL=O2 also casts the model, norm layers kept f32).
 * --profile FILE: after the warm-up, PROFILE_STEPS steps run under the profiler (dygraph/profiler.h),
 * which writes FILE and prints its table on stderr; the timed loop then runs with it off. */
#include <dygraph.h>
#include "../samples/flags.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct work {
    dg_layer *net;
    dg_optimizer *opt;
    dg_tensor *x, *y;
    int batch;
    bool train, mse;
    dg_dtype amp;   /* DG_F32: off */
} work;

static void step(work *w) {
    dg_scope *s = dg_scope_begin();
    if (w->amp != DG_F32) dg_autocast_begin(w->amp);
    if (w->train) {
        dg_tensor *out = dg_forward(w->net, w->x);
        dg_tensor *loss = w->mse ? dg_mse_loss(out, w->y) : dg_cross_entropy(out, w->y);
        if (w->amp != DG_F32) dg_autocast_end();
        if (!loss || dg_backward(loss) || dg_optimizer_step(w->opt)) { fprintf(stderr, "step: %s\n", dg_last_error()); exit(1); }
        dg_optimizer_clear_grad(w->opt);
    } else {
        dg_no_grad_begin();
        if (!dg_forward(w->net, w->x)) { fprintf(stderr, "forward: %s\n", dg_last_error()); exit(1); }
        dg_no_grad_end();
        if (w->amp != DG_F32) dg_autocast_end();
    }
    dg_scope_end(s);
}

#define PROFILE_STEPS 10

int main(int argc, char **argv) {
    static const char *const flags[] = { "--profile=none (not profiled)", NULL };
    su_positional pos = { .usage = "linear|mnist|cifar|face|resnet18_infer THREADS", .min = 2, .max = 2 };
    su_args_pos(argc, argv, flags, &pos);
    const char *name = pos.args[0];
    char *end = NULL;
    long threads_l = strtol(pos.args[1], &end, 10);
    if (end == pos.args[1] || *end || threads_l < 1 || threads_l > 4096)
        su_usage_error(argv[0], flags, &pos, "argument THREADS: a thread count >= 1, got '%s'", pos.args[1]);
    int threads = (int)threads_l;
    const char *profile = su_flag(argc, argv, "--profile", NULL);
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = threads;
    dg_init(&ip);
    dg_manual_seed(1);
    work w = { .train = true };
    bool per_step = false;
    if (strcmp(name, "linear") == 0) {
        w.net = dg_nn_sequential(2, dg_nn_linear(10, 10), dg_nn_linear(10, 1)); w.batch = 10; w.mse = true; per_step = true;
        w.x = dg_randn(DG_SHAPE(10, 10), DG_F32);
        w.y = dg_randn(DG_SHAPE(10, 1), DG_F32);
    } else if (strcmp(name, "mnist") == 0) {
        w.net = dg_mnist_cnn(); w.batch = 100;
        w.x = dg_randn(DG_SHAPE(100, 1, 28, 28), DG_F32);
        w.y = dg_keep(dg_cast(dg_mul_scalar(dg_rand(DG_SHAPE(100), DG_F32), 9.99), DG_I64));
    } else if (strcmp(name, "cifar") == 0) {
        w.net = dg_cifar_mynet(10); w.batch = 32;
        w.x = dg_randn(DG_SHAPE(32, 3, 32, 32), DG_F32);
        w.y = dg_keep(dg_cast(dg_mul_scalar(dg_rand(DG_SHAPE(32), DG_F32), 9.99), DG_I64));
    } else if (strcmp(name, "face") == 0) {
        w.net = dg_facenet(15); w.batch = 32; w.mse = true;
        w.x = dg_randn(DG_SHAPE(32, 3, 96, 96), DG_F32);
        w.y = dg_rand(DG_SHAPE(32, 30), DG_F32);
    } else if (strcmp(name, "resnet18_infer") == 0) {
        w.net = dg_resnet18(dg_resnet_default_params()); w.batch = 32; w.train = false;
        dg_layer_eval(w.net);
        w.x = dg_randn(DG_SHAPE(32, 3, 224, 224), DG_F32);
    } else {
        fprintf(stderr, "unknown workload %s\n", name);
        return 2;
    }
    if (!w.net || !w.x) { fprintf(stderr, "setup: %s\n", dg_last_error()); return 1; }
    const char *amp = getenv("DG_BENCH_AMP"), *level = getenv("DG_BENCH_AMP_LEVEL");
    w.amp = amp && strcmp(amp, "bf16") == 0 ? DG_BF16 : amp && strcmp(amp, "fp16") == 0 ? DG_F16 : DG_F32;
    if (w.amp != DG_F32 && level && strcmp(level, "O2") == 0 && dg_layer_to_dtype(w.net, w.amp, true)) {
        fprintf(stderr, "O2: %s\n", dg_last_error());
        return 1;
    }
    if (w.train) {
        int n;
        dg_tensor **p = dg_layer_parameters(w.net, &n);
        dg_sgd_params sgdp = dg_sgd_default_params();
        sgdp.lr = 0.01;
        dg_adam_params adp = dg_adam_default_params();
        adp.lr = 1e-3;
        w.opt = strcmp(name, "mnist") == 0 ? dg_sgd(p, n, sgdp) : dg_adam(p, n, adp);
        free(p);
    }
    step(&w);  /* warm-up: first-touch allocations */
    step(&w);
    if (profile) {   /* a few steps profiled, outside the timed loop */
        dg_profiler_params pp = dg_profiler_default_params();
        pp.trace_path = profile;
        pp.print_table = true;
        if (dg_profiler_start(pp)) { fprintf(stderr, "--profile: %s\n", dg_last_error()); return 1; }
        for (int k = 0; k < PROFILE_STEPS; k++) step(&w);
        if (dg_profiler_stop()) { fprintf(stderr, "--profile: %s\n", dg_last_error()); return 1; }
    }
    int steps = 0;
    double t0 = now(), t;
    do { step(&w); steps++; t = now() - t0; } while (t < 4.0 || steps < 3);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    /* the most bytes live tensors held at once (the library's large blocks: activations, saved
     * tensors), on stderr so the figure line keeps its format */
    dg_memory_stats ms;
    if (dg_memory_stats_get(dg_cpu(), &ms) == 0)
        fprintf(stderr, "%s_t%d peak live %.1f MB (dg_memory_stats_get)\n", name, threads, ms.peak_allocated / 1048576.0);
    if (per_step) printf("%s_t%d %.1f steps/s %.0f MB\n", name, threads, steps / t, ru.ru_maxrss / 1024.0);
    else printf("%s_t%d %.1f img/s %.0f MB\n", name, threads, steps * w.batch / t, ru.ru_maxrss / 1024.0);
    dg_optimizer_free(w.opt);
    dg_layer_free(w.net);
    dg_tensor_free(w.x);
    dg_tensor_free(w.y);
    free(pos.args);
    return 0;
}
