/* bench/ops.c — single-thread figures for the eager core: sgemm GFLOP/s (256³, 1024³, 2048³),
 * conv2d forward and forward+backward GFLOP/s on ResNet18's conv shapes at batch 32, and the
 * cost of one tiny recorded op (4-element add with grad). One line per figure:
 *   <name> <value> <unit>
 * bench/run_ops.sh runs it alternately with bench/ops_torch.py and prints medians. */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../samples/flags.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Repeat fn until at least min_s has passed (after one warm-up); seconds per call. */
static double time_it(void (*fn)(void *), void *ctx, double min_s) {
    fn(ctx);
    int reps = 0;
    double t0 = now(), t;
    do { fn(ctx); reps++; t = now() - t0; } while (t < min_s);
    return t / reps;
}

typedef struct { dg_tensor *a, *b; } mm_ctx;
static void run_mm(void *p) {
    mm_ctx *c = p;
    dg_scope *s = dg_scope_begin();
    dg_matmul(c->a, c->b);
    dg_scope_end(s);
}

typedef struct { dg_tensor *x, *w; dg_conv2d_params p; bool backward; } conv_ctx;
static void run_conv(void *p) {
    conv_ctx *c = p;
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_conv2d(c->x, c->w, NULL, c->p);
    if (!y) { fprintf(stderr, "conv2d: %s\n", dg_last_error()); exit(1); }
    if (c->backward) {
        dg_backward(dg_sum_all(y));
        dg_clear_grad(c->x);
        dg_clear_grad(c->w);
    }
    dg_scope_end(s);
}

static void bench_conv(const char *name, int n, int c, int hw, int oc, int k, int stride, int pad) {
    dg_scope *s = dg_scope_begin();
    conv_ctx ctx = { .x = dg_randn(DG_SHAPE(n, c, hw, hw), DG_F32), .w = dg_randn(DG_SHAPE(oc, c, k, k), DG_F32),
                     .p = dg_conv2d_default_params() };
    ctx.p.stride[0] = ctx.p.stride[1] = stride;
    ctx.p.padding[0] = ctx.p.padding[1] = pad;
    int oh = (hw + 2 * pad - k) / stride + 1;
    double flops = 2.0 * n * oc * oh * oh * c * k * k;
    ctx.backward = false;
    double t = time_it(run_conv, &ctx, 1.0);
    printf("conv_%s_fwd %.1f GFLOP/s\n", name, flops / t / 1e9);
    dg_set_requires_grad(ctx.x, true);
    dg_set_requires_grad(ctx.w, true);
    ctx.backward = true;
    t = time_it(run_conv, &ctx, 1.5);
    printf("conv_%s_fwdbwd %.1f GFLOP/s\n", name, 3 * flops / t / 1e9);
    fflush(stdout);
    dg_scope_end(s);
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--tiny!", NULL };
    su_args(argc, argv, flags);
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = 1;
    dg_init(&ip);
    bool only_tiny = su_has(argc, argv, "--tiny");
    dg_manual_seed(1);

    /* tiny op: the per-op overhead of the eager engine (allocation, checks, tape node) */
    {
        dg_tensor *a = dg_randn(DG_SHAPE(4), DG_F32), *b = dg_randn(DG_SHAPE(4), DG_F32);
        dg_set_requires_grad(a, true);
        dg_set_requires_grad(b, true);
        const int per_scope = 1000, scopes = 2000;
        double best = 1e9;
        for (int round = 0; round < 3; round++) {
            double t0 = now();
            for (int i = 0; i < scopes; i++) {
                dg_scope *s = dg_scope_begin();
                for (int j = 0; j < per_scope; j++) dg_add(a, b);
                dg_scope_end(s);   /* frees the outputs and their tape nodes: counted in the cost */
            }
            double ns = (now() - t0) / ((double)per_scope * scopes) * 1e9;
            if (ns < best) best = ns;
        }
        printf("tiny_add_grad %.0f ns\n", best);
        fflush(stdout);
        dg_tensor_free(a);
        dg_tensor_free(b);
    }
    if (only_tiny) return 0;

    int sizes[] = {256, 1024, 2048};
    for (int i = 0; i < 3; i++) {
        int n = sizes[i];
        mm_ctx c = { dg_randn(DG_SHAPE(n, n), DG_F32), dg_randn(DG_SHAPE(n, n), DG_F32) };
        double t = time_it(run_mm, &c, 1.0);
        printf("sgemm_%d %.1f GFLOP/s\n", n, 2.0 * n * n * n / t / 1e9);
        fflush(stdout);
        dg_tensor_free(c.a);
        dg_tensor_free(c.b);
    }

    bench_conv("stem7x7s2_3to64_224", 32, 3, 224, 64, 7, 2, 3);
    bench_conv("3x3_64_56", 32, 64, 56, 64, 3, 1, 1);
    bench_conv("3x3_128_28", 32, 128, 28, 128, 3, 1, 1);
    bench_conv("3x3_256_14", 32, 256, 14, 256, 3, 1, 1);
    bench_conv("3x3_512_7", 32, 512, 7, 512, 3, 1, 1);
    bench_conv("1x1s2_64to128_56", 32, 64, 56, 128, 1, 2, 0);
    dg_shutdown();
    return 0;
}
