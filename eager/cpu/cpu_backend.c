/* eager/cpu/cpu_backend.c — the CPU backend's table, memory, fill/copy/cast, where and the
 * Philox-driven random fills. */
#include "../half_via_f32.h"
#include "iter.h"
#include "cpu_kernels.h"
#include <math.h>


/* Fault injection for tests (eager/internal.h): per thread, so a test's count is not disturbed
 * by a loader thread's allocations. */
static _Thread_local int64_t t_alloc_count, t_fail_at;
void dg_cpu_alloc_fault(int64_t nth) { t_fail_at = nth > 0 ? t_alloc_count + nth : 0; }
int64_t dg_cpu_alloc_count(void) { return t_alloc_count; }

/* 64-byte aligned; small buffers come from the per-thread block cache (eager/block_cache.c),
 * large ones from the system */
static void *cpu_alloc(const dg_backend *be, size_t n) {
    if (++t_alloc_count == t_fail_at) return NULL;
    return dg_block_alloc(n);
}
static void cpu_free(const dg_backend *be, void *p) { dg_block_free(p); }
static int cpu_copy_bytes(const dg_backend *be, void *dst, const void *src, size_t n) { if (n) memcpy(dst, src, n); return 0; }
static int cpu_sync(const dg_backend *be) { return 0; }
static int cpu_memory_stats(const dg_backend *be, dg_memory_stats *out) { return dg_large_stats(out); }
static int cpu_empty_cache(const dg_backend *be) { return dg_large_release_free(); }


static int cpu_fill(const dg_backend *be, dg_kview *y, double v) {
    dg_iter it;
    const dg_kview *ops[1] = { y };
    dg_iter_init(&it, ops, 1);
    for (int64_t r = 0; r < it.rows; r++) {
        char *p[1]; int64_t st[1];
        int64_t len = dg_iter_row(&it, r, p, st);
        if (y->dtype == DG_F32) { float f = (float)v; float *q = (float *)p[0]; for (int64_t i = 0; i < len; i++) q[i * st[0]] = f; }
        else if (y->dtype == DG_F64) { double *q = (double *)p[0]; for (int64_t i = 0; i < len; i++) q[i * st[0]] = v; }
        else for (int64_t i = 0; i < len; i++) dg_store_from_double(p[0] + i * st[0] * (int64_t)it.esize[0], y->dtype, v);
    }
    return 0;
}

int dg_cpu_copy(const dg_backend *be, const dg_kview *x, dg_kview *y) {
    dg_iter it;
    const dg_kview *ops[2] = { y, x };
    dg_iter_init(&it, ops, 2);
    bool same = x->dtype == y->dtype;
    size_t es = dg_dtype_bytes(y->dtype);
    bool par = dg_iter_numel(&it) >= DG_PAR_MIN && it.rows > 1;
    #pragma omp parallel for if(par) schedule(static)
    for (int64_t r = 0; r < it.rows; r++) {
        char *p[2]; int64_t st[2];
        int64_t len = dg_iter_row(&it, r, p, st);
        if (same && st[0] == 1 && st[1] == 1) { memcpy(p[0], p[1], (size_t)len * es); continue; }
        if (same && es == 4) { for (int64_t i = 0; i < len; i++) ((uint32_t *)p[0])[i * st[0]] = ((const uint32_t *)p[1])[i * st[1]]; continue; }
        if (same && es == 8) { for (int64_t i = 0; i < len; i++) ((uint64_t *)p[0])[i * st[0]] = ((const uint64_t *)p[1])[i * st[1]]; continue; }
        if (same && es == 2) { for (int64_t i = 0; i < len; i++) ((uint16_t *)p[0])[i * st[0]] = ((const uint16_t *)p[1])[i * st[1]]; continue; }
        /* the casts mixed precision makes all the time (weights, activations, gradients) */
        if (x->dtype == DG_F32 && dg_dtype_is_half(y->dtype)) {
            const float *a = (const float *)p[1];
            uint16_t *b = (uint16_t *)p[0];
            if (y->dtype == DG_BF16) for (int64_t i = 0; i < len; i++) b[i * st[0]] = dg_f32_to_bf16(a[i * st[1]]);
            else for (int64_t i = 0; i < len; i++) b[i * st[0]] = dg_f32_to_f16(a[i * st[1]]);
            continue;
        }
        if (dg_dtype_is_half(x->dtype) && y->dtype == DG_F32) {
            const uint16_t *a = (const uint16_t *)p[1];
            float *b = (float *)p[0];
            if (x->dtype == DG_BF16) for (int64_t i = 0; i < len; i++) b[i * st[0]] = dg_bf16_to_f32(a[i * st[1]]);
            else for (int64_t i = 0; i < len; i++) b[i * st[0]] = dg_f16_to_f32(a[i * st[1]]);
            continue;
        }
        if (x->dtype == DG_I64) {   /* one rounding, not two through a double */
            for (int64_t i = 0; i < len; i++)
                dg_store_from_i64(p[0] + i * st[0] * (int64_t)it.esize[0], y->dtype, ((const int64_t *)p[1])[i * st[1]]);
            continue;
        }
        for (int64_t i = 0; i < len; i++)
            dg_store_from_double(p[0] + i * st[0] * (int64_t)it.esize[0], y->dtype, dg_load_as_double(p[1] + i * st[1] * (int64_t)it.esize[1], x->dtype));
    }
    return 0;
}

static int cpu_where(const dg_backend *be, const dg_kview *c, const dg_kview *a, const dg_kview *b, dg_kview *y) {
    dg_iter it;
    const dg_kview *ops[4] = { y, c, a, b };
    dg_iter_init(&it, ops, 4);
    size_t es = dg_dtype_bytes(y->dtype);
    for (int64_t r = 0; r < it.rows; r++) {
        char *p[4]; int64_t st[4];
        int64_t len = dg_iter_row(&it, r, p, st);
        for (int64_t i = 0; i < len; i++) {
            bool take_a = dg_load_as_double(p[1] + i * st[1] * (int64_t)it.esize[1], c->dtype) != 0;
            memcpy(p[0] + i * st[0] * (int64_t)es, take_a ? p[2] + i * st[2] * (int64_t)es : p[3] + i * st[3] * (int64_t)es, es);
        }
    }
    return 0;
}

/* 24 (f32) or 53 (f64) random bits to [0,1) */
static inline double u01(uint32_t a, uint32_t b, bool dbl) {
    if (!dbl) return (a >> 8) * (1.0 / 16777216.0);
    return ((((uint64_t)a << 21) ^ (b >> 11)) & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

static int cpu_random(const dg_backend *be, dg_random_kind kind, dg_kview *y, double p0, double p1, uint64_t seed, uint64_t ctr) {
    int64_t n = y->numel;
    bool dbl = y->dtype == DG_F64;
    char *base = y->data;
    size_t es = dg_dtype_bytes(y->dtype);
    /* Element i uses draws derived from (seed, ctr, i) only: the same numbers for any thread
     * count and on any backend. */
    #pragma omp parallel for if(n >= DG_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        double v;
        uint32_t o[4];
        if (kind == DG_RAND_NORMAL) {   /* Box-Muller: one counter gives a (cos, sin) pair */
            dg_philox4x32(seed, ctr + (uint64_t)i / 2, o);
            double u1 = u01(o[0], o[1], true), u2 = u01(o[2], o[3], true);
            if (u1 < 1e-300) u1 = 1e-300;
            double r = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
            v = p0 + p1 * r * (i % 2 ? sin(th) : cos(th));
        } else {
            dg_philox4x32(seed, ctr + (uint64_t)i / 2, o);
            int h = (int)(i % 2) * 2;
            double u = u01(o[h], o[h + 1], dbl);
            v = kind == DG_RAND_UNIFORM ? p0 + (p1 - p0) * u : (u < p0 ? p1 : 0.0);
        }
        dg_store_from_double(base + i * (int64_t)es, y->dtype, v);
    }
    return 0;
}

/* What each entry takes (the `supports` entry, ggml's supports_op): the dtypes of the values it
 * computes on, half ones included where half.c widens them. binary's integer arithmetic is
 * add, sub, mul, max and min (the comparisons take any dtype); random stores its draws into
 * any dtype. */
#define FLOATS DG_DT_FLOATS
#define INTS DG_DT_INTS
#define ALL DG_DT_ALL
static const unsigned cpu_dtypes[DG_BE_COUNT] = {
    /* no data dtype */
    [DG_BE_alloc] = ALL, [DG_BE_free] = ALL, [DG_BE_upload] = ALL, [DG_BE_download] = ALL, [DG_BE_synchronize] = ALL,
    [DG_BE_memory_stats] = ALL, [DG_BE_empty_cache] = ALL, [DG_BE_shutdown] = ALL, [DG_BE_supports] = ALL,
    [DG_BE_fill] = ALL, [DG_BE_copy] = ALL, [DG_BE_where] = ALL, [DG_BE_random] = ALL,
    [DG_BE_unary] = FLOATS, [DG_BE_binary] = FLOATS | INTS, [DG_BE_reduce] = FLOATS, [DG_BE_gemm] = FLOATS,
    [DG_BE_softmax] = FLOATS, [DG_BE_softmax_backward] = FLOATS,
    [DG_BE_index_select] = ALL, [DG_BE_gather] = ALL, [DG_BE_index_add] = FLOATS, [DG_BE_scatter_add] = FLOATS,
    [DG_BE_argsort] = FLOATS | INTS, [DG_BE_nll] = FLOATS, [DG_BE_nll_backward] = FLOATS,
    [DG_BE_conv2d] = FLOATS, [DG_BE_conv2d_backward_data] = FLOATS, [DG_BE_conv2d_backward_filter] = FLOATS,
    [DG_BE_max_pool2d] = FLOATS, [DG_BE_max_pool2d_backward] = FLOATS, [DG_BE_avg_pool2d] = FLOATS,
    [DG_BE_avg_pool2d_backward] = FLOATS, [DG_BE_adaptive_avg_pool2d] = FLOATS, [DG_BE_adaptive_avg_pool2d_backward] = FLOATS,
    [DG_BE_max_pool2d_with_indices] = FLOATS, [DG_BE_adaptive_max_pool2d] = FLOATS, [DG_BE_max_pool2d_indices_backward] = FLOATS,
    [DG_BE_batch_norm] = FLOATS, [DG_BE_batch_norm_backward] = FLOATS, [DG_BE_batch_norm_relu] = FLOATS,
    [DG_BE_batch_norm_relu_backward] = FLOATS,
    [DG_BE_rnn_cell] = DG_DT_BIT(DG_F32) | DG_DT_BIT(DG_F64), [DG_BE_rnn_cell_backward] = DG_DT_BIT(DG_F32) | DG_DT_BIT(DG_F64),
    [DG_BE_fused_update] = DG_DT_BIT(DG_F32) | DG_DT_BIT(DG_F64),
};
static bool cpu_supports(const dg_backend *be, dg_be_entry e, dg_dtype dt) {
    return (unsigned)e < DG_BE_COUNT && dg_dt_in(cpu_dtypes[e], dt);
}

const dg_backend dg_cpu_backend = {
    .name = "cpu",
    .type = DG_CPU,
    .half = &dg_cpu_half,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy_bytes,
    .download = cpu_copy_bytes,
    .synchronize = cpu_sync,
    .memory_stats = cpu_memory_stats,
    .empty_cache = cpu_empty_cache,
    .shutdown = dg_dnnl_release,
    .supports = cpu_supports,
    .fill = cpu_fill,
    .copy = dg_cpu_copy,
    .unary = dg_cpu_unary,
    .binary = dg_cpu_binary,
    .where = cpu_where,
    .reduce = dg_half_reduce,
    .random = cpu_random,
    .gemm = dg_cpu_gemm,
    .softmax = dg_half_softmax,
    .softmax_backward = dg_half_softmax_backward,
    .index_select = dg_half_index_select,
    .index_add = dg_half_index_add,
    .gather = dg_half_gather,
    .scatter_add = dg_half_scatter_add,
    .argsort = dg_half_argsort,
    .nll = dg_half_nll,
    .nll_backward = dg_half_nll_backward,
    .conv2d = dg_half_conv2d,
    .conv2d_backward_data = dg_half_conv2d_backward_data,
    .conv2d_backward_filter = dg_half_conv2d_backward_filter,
    .max_pool2d = dg_half_max_pool2d,
    .max_pool2d_backward = dg_half_max_pool2d_backward,
    .avg_pool2d = dg_half_avg_pool2d,
    .avg_pool2d_backward = dg_half_avg_pool2d_backward,
    .adaptive_avg_pool2d = dg_half_adaptive_avg_pool2d,
    .adaptive_avg_pool2d_backward = dg_half_adaptive_avg_pool2d_backward,
    .max_pool2d_with_indices = dg_half_max_pool2d_with_indices,
    .adaptive_max_pool2d = dg_half_adaptive_max_pool2d,
    .max_pool2d_indices_backward = dg_half_max_pool2d_indices_backward,
    .batch_norm = dg_half_batch_norm,
    .batch_norm_backward = dg_half_batch_norm_backward,
    .batch_norm_relu = dg_half_batch_norm_relu,
    .batch_norm_relu_backward = dg_half_batch_norm_relu_backward,
    .rnn_cell = dg_cpu_rnn_cell,
    .rnn_cell_backward = dg_cpu_rnn_cell_backward,
    .fused_update = dg_cpu_fused_update,
};
