/* bench/gpu_models.c — training throughput of dygraph on gpu:0 (f32, TF32 off):
 *   resnet18_b32_96    ResNet18, 1000 classes, batch 32 at 96x96, SGD momentum, cross-entropy
 *   resnet18_b128_224  the same at batch 128, 224x224
 *   resnet18_b16_224   the same at batch 16 (the allocator's reserved/peak figure is read here)
 *   mnist_cnn_b100     Paddle's multi-GPU MNIST tutorial's MNIST CNN (dg_mnist_cnn), batch 100, SGD momentum, cross-entropy
 *   linearnet          Paddle's dynamic-graph distributed quick start's LinearNet (samples/linear_single.c): Linear(10,10) -> Linear(10,1),
 *                      MSE, Adam 1e-3, a fresh random batch of 10 each step
 *   bench_gpu_models [--probe] [workload ...]     (no workload: all four)
 * Each workload warms up (first-touch allocations, cuDNN algorithm choice), then times a number
 * of steps sized from the warm-up to last about BENCH_SECONDS (default 3), with dg_synchronize
 * before each clock read so queued kernels are counted. One line per workload:
 *   <workload> <figure> img/s|steps/s device_mallocs <cudaMalloc calls during the timed steps>
 *       reserved_mb <R> peak_mb <P> reserved/peak <R/P>
 * The malloc count must be 0 (the caching allocator serves a steady loop) and reserved memory at
 * most 1.15x the peak of live bytes on the ResNet18 loops; otherwise a line on stderr says so and
 * the exit status is 1. Run one workload per process for the peak to be that workload's. bench/gpu_models_torch.py prints the same lines for
 * PyTorch and bench/run_gpu.sh compares the two. Without a usable GPU it prints one skip line
 * and exits 0 (--probe: exits 3 instead, for scripts). */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../samples/flags.h"

#define SKIP_STATUS 3
static const dg_device GPU = { DG_CUDA, 0 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *workload, const char *what) {
    fprintf(stderr, "bench_gpu_models: %s: %s: %s\n", workload, what, dg_last_error());
    exit(1);
}

typedef struct workload {
    const char *name;
    int batch, hw;              /* images per step and their side; batch 0: LinearNet */
    int warmup;
} workload;

static const workload WORKLOADS[] = {
    { "resnet18_b32_96", 32, 96, 5 },
    { "resnet18_b128_224", 128, 224, 5 },
    { "resnet18_b16_224", 16, 224, 5 },
    { "mnist_cnn_b100", 100, 28, 20 },
    { "linearnet", 0, 0, 50 },
};

typedef struct run {
    const workload *w;
    dg_layer *net;
    dg_optimizer *opt;
    dg_tensor *x, *y;           /* fixed batch (image models) */
} run;

static void step(run *r) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *loss;
    if (r->w->batch) {
        loss = dg_cross_entropy(dg_forward(r->net, r->x), r->y);
    } else {
        /* as the tutorial's loop: new inputs and labels every step, made on the device */
        dg_tensor *x = dg_randn(DG_SHAPE(10, 10), DG_F32), *y = dg_randn(DG_SHAPE(10, 1), DG_F32);
        loss = dg_mse_loss(dg_forward(r->net, x), y);
    }
    if (!loss) die(r->w->name, "forward");
    if (dg_backward(loss)) die(r->w->name, "backward");
    if (dg_optimizer_step(r->opt)) die(r->w->name, "optimizer step");
    if (dg_optimizer_clear_grad(r->opt)) die(r->w->name, "clear_grad");
    dg_scope_end(s);
}

static void sync_or_die(const workload *w) {
    if (dg_synchronize(GPU)) die(w->name, "synchronize");
}

static uint64_t mallocs(const workload *w) {
    dg_memory_stats m;
    if (dg_memory_stats_get(GPU, &m)) die(w->name, "memory_stats");
    return m.device_mallocs;
}

/* Returns the number of cudaMalloc calls during the timed steps; *ratio gets reserved / peak. */
static uint64_t bench(const workload *w, double seconds, double *ratio) {
    dg_manual_seed(1);
    run r = { .w = w };
    if (w->batch) {
        dg_resnet_params rp = dg_resnet_default_params();
        rp.num_classes = 1000;
        r.net = w->hw == 28 ? dg_mnist_cnn() : dg_resnet18(rp);
        int64_t classes = w->hw == 28 ? 10 : 1000;
        r.x = dg_randn(DG_SHAPE(w->batch, w->hw == 28 ? 1 : 3, w->hw, w->hw), DG_F32);
        dg_tensor *u = dg_rand(DG_SHAPE(w->batch), DG_F32);
        dg_tensor *scaled = u ? dg_mul_scalar(u, (double)classes - 0.01) : NULL;
        r.y = scaled ? dg_cast(scaled, DG_I64) : NULL;
        dg_tensor_free(u);
        dg_tensor_free(scaled);
    } else {
        r.net = dg_nn_sequential(2, dg_nn_linear(10, 10), dg_nn_linear(10, 1));
    }
    if (!r.net || (w->batch && (!r.x || !r.y))) die(w->name, "setup");
    int n;
    dg_tensor **p = dg_layer_parameters(r.net, &n);
    if (!p) die(w->name, "parameters");
    dg_momentum_params momp = dg_momentum_default_params();
    momp.lr = 0.01;
    momp.momentum = 0.9;
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = 1e-3;
    r.opt = w->batch ? dg_momentum(p, n, momp)
                     : dg_adam(p, n, adp);
    free(p);
    if (!r.opt) die(w->name, "optimizer");

    for (int i = 0; i < w->warmup; i++) step(&r);
    sync_or_die(w);
    /* size the timed run from a few synchronised steps */
    int probe = w->batch ? 3 : 20;
    double t0 = now();
    for (int i = 0; i < probe; i++) step(&r);
    sync_or_die(w);
    double per_step = (now() - t0) / probe;
    long steps = per_step > 0 ? (long)(seconds / per_step) : 1000;
    if (steps < 10) steps = 10;

    uint64_t m0 = mallocs(w);
    t0 = now();
    for (long i = 0; i < steps; i++) step(&r);
    sync_or_die(w);
    double t = now() - t0;
    uint64_t dm = mallocs(w) - m0;
    dg_memory_stats ms;
    if (dg_memory_stats_get(GPU, &ms)) die(w->name, "memory_stats");
    *ratio = ms.peak_allocated ? (double)ms.reserved / (double)ms.peak_allocated : 0;
    if (w->batch) printf("%s %.1f img/s device_mallocs %llu", w->name, steps * w->batch / t, (unsigned long long)dm);
    else printf("%s %.1f steps/s device_mallocs %llu", w->name, steps / t, (unsigned long long)dm);
    printf(" reserved_mb %.1f peak_mb %.1f reserved/peak %.3f\n", ms.reserved / 1048576.0, ms.peak_allocated / 1048576.0, *ratio);
    fflush(stdout);

    dg_optimizer_free(r.opt);
    dg_layer_free(r.net);
    dg_tensor_free(r.x);
    dg_tensor_free(r.y);
    /* the next workload starts from an empty cache, as the PyTorch side does */
    if (dg_empty_cache(GPU)) die(w->name, "empty_cache");
    return dm;
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--probe!", NULL };
    su_positional pos = { .usage = "[resnet18_b32_96|resnet18_b128_224|resnet18_b16_224|mnist_cnn_b100|linearnet ...]", .min = 0, .max = 16 };
    su_args_pos(argc, argv, flags, &pos);
    for (int a = 0; a < pos.n; a++) {
        bool known = false;
        for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0]; i++) known = known || strcmp(pos.args[a], WORKLOADS[i].name) == 0;
        if (!known) su_usage_error(argv[0], flags, &pos, "argument WORKLOAD: unknown workload '%s'", pos.args[a]);
    }
    bool probe = su_has(argc, argv, "--probe");
    dg_init_params ip = dg_init_default_params();
    ip.device = "gpu:0";
    ip.quiet = true;
    if (dg_init(&ip) != 0) {
        printf("bench_gpu_models: no usable GPU (%s): skipped\n", dg_last_error());
        return probe ? SKIP_STATUS : 0;
    }
    if (probe) return 0;
    dg_set_allow_tf32(false);   /* the default, stated: PyTorch's side turns TF32 off too */
    const char *env = getenv("BENCH_SECONDS");
    double seconds = env && atof(env) > 0 ? atof(env) : 3.0;
    int failed = 0, ran = 0;
    size_t nw = sizeof WORKLOADS / sizeof WORKLOADS[0];
    for (size_t i = 0; i < nw; i++) {
        bool wanted = pos.n == 0;
        for (int a = 0; a < pos.n && !wanted; a++) wanted = strcmp(pos.args[a], WORKLOADS[i].name) == 0;
        if (!wanted) continue;
        ran++;
        double ratio = 0;
        uint64_t dm = bench(&WORKLOADS[i], seconds, &ratio);
        if (WORKLOADS[i].hw > 28 && ratio > 1.15) {
            fprintf(stderr, "bench_gpu_models: %s: reserved %.3fx the peak of live bytes (want <= 1.15)\n", WORKLOADS[i].name, ratio);
            failed = 1;
        }
        if (dm) {
            fprintf(stderr, "bench_gpu_models: %s: %llu cudaMalloc calls during the timed steps (want 0: the caching "
                    "allocator should serve a steady loop)\n", WORKLOADS[i].name, (unsigned long long)dm);
            failed = 1;
        }
    }
    if (!ran) {
        fprintf(stderr, "usage: %s [--probe] [resnet18_b32_96|resnet18_b128_224|resnet18_b16_224|mnist_cnn_b100|linearnet ...]\n", argv[0]);
        return 2;
    }
    dg_shutdown();
    return failed;
}
