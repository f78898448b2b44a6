/* bench/recompute.c — what recompute buys and costs on ResNet50 training steps (the model of the
 * collective guide): one process per setting, so that its peak RSS (getrusage's ru_maxrss, the
 * whole process: weights, gradients, optimizer state, activations, the allocator's caches) is
 * that setting's alone. With --recompute every Bottleneck block is marked (dg_layer_set_recompute)
 * and keeps only its input through the forward. Prints one line:
 *
 *   recompute 0|1 batch B image S: peak RSS M MB, peak allocated M MB, step median T s (K steps)
 *
 * bench/run_recompute.sh alternates the two settings over rounds and takes medians. */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static int mark_bottleneck(dg_layer *l, void *user) {
    return dg_layer_is(l, dg_resnet_bottleneck_class()) ? dg_layer_set_recompute(l, true) : 0;
}
static int parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        fprintf(stderr, "bench_recompute: %s wants an integer in [%d, %d], got '%s'\n", flag, lo, hi, v);
        return 2;
    }
    *out = (int)x;
    return 0;
}

int main(int argc, char **argv) {
    int batch = 16, image = 224, steps = 3, recompute = 0;
    for (int i = 1; i < argc; i++) {
        int rc = 0;
        if (i + 1 < argc && strcmp(argv[i], "--batch") == 0) rc = parse_int("--batch", argv[++i], 1, 1024, &batch);
        else if (i + 1 < argc && strcmp(argv[i], "--image") == 0) rc = parse_int("--image", argv[++i], 32, 512, &image);
        else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) rc = parse_int("--steps", argv[++i], 1, 100, &steps);
        else if (i + 1 < argc && strcmp(argv[i], "--recompute") == 0) rc = parse_int("--recompute", argv[++i], 0, 1, &recompute);
        else {
            fprintf(stderr, "usage: %s [--batch N (16)] [--image S (224)] [--steps N (3)] [--recompute 0|1 (0)]\n", argv[0]);
            return 2;
        }
        if (rc) return rc;
    }
    dg_manual_seed(1);
    dg_resnet_params rp = dg_resnet_default_params();
    dg_layer *net = dg_resnet50(rp);
    if (!net) { fprintf(stderr, "bench_recompute: %s\n", dg_last_error()); return 1; }
    if (recompute && dg_layer_apply(net, mark_bottleneck, NULL)) { fprintf(stderr, "bench_recompute: %s\n", dg_last_error()); return 1; }
    int np = 0;
    dg_tensor **ps = dg_layer_parameters(net, &np);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.01;
    dg_optimizer *opt = dg_sgd(ps, np, sp);
    free(ps);
    dg_tensor *x = dg_randn((dg_shape){ 4, { batch, 3, image, image } }, DG_F32);
    int64_t *lab = malloc(sizeof *lab * (size_t)batch);
    for (int i = 0; i < batch; i++) lab[i] = i % 1000;
    dg_tensor *y = dg_from_data((dg_shape){ 1, { batch } }, DG_I64, lab);
    free(lab);
    if (!opt || !x || !y) { fprintf(stderr, "bench_recompute: %s\n", dg_last_error()); return 1; }
    double *t = malloc(sizeof *t * (size_t)steps);
    for (int s = 0; s < steps; s++) {
        double t0 = now();
        dg_scope *sc = dg_scope_begin();
        dg_tensor *loss = dg_cross_entropy(dg_forward(net, x), y);
        int rc = loss ? dg_backward(loss) : -1;
        if (!rc) rc = dg_optimizer_step(opt);
        if (!rc) rc = dg_optimizer_clear_grad(opt);
        dg_scope_end(sc);
        if (rc) { fprintf(stderr, "bench_recompute: step %d: %s\n", s, dg_last_error()); return 1; }
        t[s] = now() - t0;
    }
    qsort(t, (size_t)steps, sizeof *t, cmp_d);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    dg_memory_stats ms;
    dg_memory_stats_get((dg_device){ DG_CPU, 0 }, &ms);
    printf("recompute %d batch %d image %d: peak RSS %.0f MB, peak allocated %.0f MB, step median %.3f s (%d steps)\n", recompute,
           batch, image, ru.ru_maxrss / 1024.0, ms.peak_allocated / 1048576.0, t[steps / 2], steps);
    free(t);
    dg_tensor_free(x);
    dg_tensor_free(y);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    return 0;
}
