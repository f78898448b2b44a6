/* eager/cpu/half.c — the CPU's side of the shared float16 / bfloat16 wrappers
 * (eager/half_via_f32.h): the kernels behind the wrapped entries of its table, scratch from the
 * block cache, and the half calls its kernels take as they are. Native half paths: bf16
 * convolutions in oneDNN with bf16 memory (f32 accumulation; what oneDNN declines is widened),
 * pooling with operands of one half dtype (loaded to f32, rounded once: pool.c,
 * pool_indices.c), batch norm on half activations (batchnorm.c: only half per-channel tensors
 * are widened). The elementwise kernels, casts and GEMM take half operands themselves and are
 * not wrapped. */
#include "../half_via_f32.h"
#include "cpu_kernels.h"

/* Scratch from the block cache, not the table's alloc: the allocation fault injection
 * (dg_cpu_alloc_fault) counts the tensors a test makes, not this. */
static void *scratch_alloc(const dg_backend *be, size_t n) {
    void *p = dg_block_alloc(n);
    if (!p) DG_ERR(DG_ENOMEM, "cpu: no memory for the f32 copy of a half operand (%zu bytes)", n);
    return p;
}
static void scratch_free(const dg_backend *be, void *p) { dg_block_free(p); }

/* ---- convolution: all-bf16 calls (what keep lets through) run in oneDNN; a geometry it
 * declines (no images; the backward passes with fewer than 16 channels per group) comes back
 * widened, to the f32 kernels ---- */
static bool all_bf16(const dg_kview *a, const dg_kview *b, const dg_kview *c, const dg_kview *d) {
    return a->dtype == DG_BF16 && b->dtype == DG_BF16 && c->dtype == DG_BF16 && (!d || d->dtype == DG_BF16);
}
static int conv2d(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y) {
    if (x->dtype != DG_BF16) return dg_cpu_conv2d(be, g, x, w, b, y);
    if (dg_dnnl_conv2d(g, x, w, b, y) != 1) return DG_HALF_DECLINED;
    /* the fused ReLU, in place and NaN kept, as dg_cpu_conv2d applies it after oneDNN */
    return g->relu ? dg_cpu_unary(be, DG_UN_RELU, y, y, 0, 0) : 0;
}
static int conv2d_backward_data(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx) {
    if (gy->dtype != DG_BF16) return dg_cpu_conv2d_backward_data(be, g, gy, w, gx);
    return dg_dnnl_conv2d_backward_data(g, gy, w, gx) == 1 ? 0 : DG_HALF_DECLINED;
}
static int conv2d_backward_filter(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb) {
    if (gy->dtype != DG_BF16) return dg_cpu_conv2d_backward_filter(be, g, gy, x, gw, gb);
    return dg_dnnl_conv2d_backward_filter(g, gy, x, gw, gb) == 1 ? 0 : DG_HALF_DECLINED;
}

/* ---- which half calls the kernels take as they are ---- */
/* v[0..n) all of v[0]'s half dtype */
static bool one_half_dtype(const dg_kview *const *v, int n) {
    if (!dg_dtype_is_half(v[0]->dtype)) return false;
    for (int i = 1; i < n; i++) if (v[i]->dtype != v[0]->dtype) return false;
    return true;
}
static int64_t plane_of(const dg_kview *v) { return v->shape[2] * v->shape[3]; }
#define BIT(i) (1u << (i))

static unsigned keep(const dg_backend *be, const dg_half_call *c) {
    const dg_kview *const *v = c->v;
    const dg_pool2d_geom *pg = c->geom;
    switch (c->entry) {
    /* v: x, w, b, y / gy, w, gx / gy, x, gw, gb */
    case DG_BE_conv2d: return all_bf16(v[0], v[1], v[3], v[2]) ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_conv2d_backward_data: return all_bf16(v[0], v[1], v[2], NULL) ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_conv2d_backward_filter: return v[2] && all_bf16(v[0], v[1], v[2], v[3]) ? DG_HALF_KEEP_ALL : 0;
    /* pooling: operands of one half dtype (not the index views); a backward pass sums into an
     * f32 stack plane of DG_CPU_POOL_HALF_PLANE_MAX elements, so larger planes are widened */
    case DG_BE_max_pool2d: case DG_BE_avg_pool2d: case DG_BE_adaptive_avg_pool2d:    /* x, y */
    case DG_BE_max_pool2d_with_indices: case DG_BE_adaptive_max_pool2d:               /* x, y, idx */
        return one_half_dtype(v, 2) ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_max_pool2d_backward:    /* x, y, gy, gx */
        return one_half_dtype(v, 4) && dg_cpu_max_pool2d_half_bwd_fits(pg) ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_avg_pool2d_backward:    /* gy, gx */
        return one_half_dtype(v, 2) && dg_cpu_pool_half_plane_fits(pg->h * pg->w) ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_adaptive_avg_pool2d_backward:    /* gy, gx */
        return one_half_dtype(v, 2) && dg_cpu_pool_half_plane_fits(plane_of(v[1])) ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_max_pool2d_indices_backward:     /* idx, gy, gx */
        return one_half_dtype(v + 1, 2) && dg_cpu_pool_half_plane_fits(plane_of(v[2])) ? DG_HALF_KEEP_ALL : 0;
    /* batch norm reads and writes half activations itself; per-channel tensors that are half
     * (a norm layer cast to half, which O2 avoids) are widened, c values each */
    case DG_BE_batch_norm: case DG_BE_batch_norm_relu:     /* x, w, b, y, mean, invstd */
        return BIT(0) | BIT(3);
    case DG_BE_batch_norm_backward:                        /* x, gy, w, mean, invstd, gx, gw, gb */
        return BIT(0) | BIT(1) | BIT(5);
    case DG_BE_batch_norm_relu_backward:                   /* x, y, gy, w, mean, invstd, gx, gw, gb */
        return BIT(0) | BIT(1) | BIT(2) | BIT(6);
    default: return 0;
    }
}

static const dg_backend kernels = {
    .name = "cpu kernels",
    .reduce = dg_cpu_reduce,
    .softmax = dg_cpu_softmax,
    .softmax_backward = dg_cpu_softmax_backward,
    .index_select = dg_cpu_index_select,
    .index_add = dg_cpu_index_add,
    .gather = dg_cpu_gather,
    .scatter_add = dg_cpu_scatter_add,
    .argsort = dg_cpu_argsort,
    .nll = dg_cpu_nll,
    .nll_backward = dg_cpu_nll_backward,
    .conv2d = conv2d,
    .conv2d_backward_data = conv2d_backward_data,
    .conv2d_backward_filter = conv2d_backward_filter,
    .max_pool2d = dg_cpu_max_pool2d,
    .max_pool2d_backward = dg_cpu_max_pool2d_backward,
    .avg_pool2d = dg_cpu_avg_pool2d,
    .avg_pool2d_backward = dg_cpu_avg_pool2d_backward,
    .adaptive_avg_pool2d = dg_cpu_adaptive_avg_pool2d,
    .adaptive_avg_pool2d_backward = dg_cpu_adaptive_avg_pool2d_backward,
    .max_pool2d_with_indices = dg_cpu_max_pool2d_with_indices,
    .adaptive_max_pool2d = dg_cpu_adaptive_max_pool2d,
    .max_pool2d_indices_backward = dg_cpu_max_pool2d_indices_backward,
    .batch_norm = dg_cpu_batch_norm,
    .batch_norm_backward = dg_cpu_batch_norm_backward,
    .batch_norm_relu = dg_cpu_batch_norm_relu,
    .batch_norm_relu_backward = dg_cpu_batch_norm_relu_backward,
};

const dg_half_via_f32 dg_cpu_half = {
    .kernels = &kernels,
    .wrappers = &dg_half_wrappers,
    .scratch_alloc = scratch_alloc,
    .scratch_free = scratch_free,
    .keep = keep,
};
