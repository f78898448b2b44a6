/* bench/fma_peak.c — this CPU's single-core f32 FMA peak, measured: twelve independent chains of
 * fused multiply-adds on the widest vectors the CPU has (AVX-512, else AVX2+FMA, chosen at run
 * time), for about 0.3 s, best of three. Every bench script prints it in its header beside the CPU
 * model, so a figure in GFLOP/s can be read as a fraction of what the core can do.
 *
 *   bench_fma_peak            ->  "fma peak: 184.2 GFLOP/s per core (avx512f, f32)" */
#include <immintrin.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CHAINS 12

__attribute__((target("avx512f"))) static double run_avx512(long iters, float *sink) {
    __m512 acc[CHAINS], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long k = 0; k < iters; k++)
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * CHAINS * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double run_avx2(long iters, float *sink) {
    __m256 acc[CHAINS], a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_ps((float)i);
    for (long k = 0; k < iters; k++)
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    __m256 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm256_add_ps(s, acc[i]);
    float v[8];
    _mm256_storeu_ps(v, s);
    *sink = v[0] + v[7];
    return (double)iters * CHAINS * 8 * 2;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "usage: %s (no arguments)\n", argv[0]);
        return 2;
    }
    __builtin_cpu_init();
    const char *isa = __builtin_cpu_supports("avx512f") ? "avx512f"
                    : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "avx2+fma" : NULL;
    if (!isa) {
        printf("fma peak: not measured (this CPU has neither AVX-512 nor AVX2+FMA)\n");
        return 0;
    }
    double (*run)(long, float *) = strcmp(isa, "avx512f") == 0 ? run_avx512 : run_avx2;
    float sink = 0;
    long iters = 1 << 20;
    double t0 = now();
    run(iters, &sink);   /* warm-up, and a first guess of the speed */
    double dt = now() - t0;
    iters = (long)(iters * (0.3 / (dt > 1e-6 ? dt : 1e-6)));
    double best = 0;
    for (int r = 0; r < 3; r++) {
        t0 = now();
        double flops = run(iters, &sink);
        double g = flops / (now() - t0) * 1e-9;
        if (g > best) best = g;
    }
    printf("fma peak: %.1f GFLOP/s per core (%s, f32)%s\n", best, isa, sink == 12345.f ? " " : "");
    return 0;
}
