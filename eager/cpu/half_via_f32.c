/* eager/cpu/half_via_f32.c — float16 / bfloat16 for the CPU entries that have no 2-byte kernel
 * of their own: each half operand is widened into a float32 scratch buffer, the f32 kernel runs,
 * and the outputs are rounded back (round-to-nearest-even). So every reduction, softmax, loss
 * and batch-norm statistic accumulates in f32, and every op works on half tensors on the CPU
 * with one kernel per entry. The table in cpu_backend.c points at these wrappers; a call with
 * no half operand goes straight to the kernel. The fast half paths (oneDNN convolutions and
 * GEMM, the elementwise kernels, pooling with one half dtype) live with their kernels. */
#include "../backend.h"
#include "cpu_kernels.h"

typedef struct scratch {
    dg_kview view[8];
    dg_kview *orig[8];       /* the half view each scratch view stands for, to round back */
    bool out[8];
    int n;
    bool failed;
} scratch;

static bool is_half(const dg_kview *v) { return v && dg_dtype_is_half(v->dtype); }

/* v as f32: v itself when it is not half (or NULL); else a contiguous f32 buffer of v's shape,
 * filled from v when `load` (inputs, and outputs a kernel accumulates into). */
static dg_kview *widen(scratch *s, const dg_kview *v, bool load, bool out) {
    if (!is_half(v)) return (dg_kview *)v;
    dg_kview *w = &s->view[s->n];
    *w = *v;
    w->dtype = DG_F32;
    dg_compute_strides(v->shape, v->ndim, w->stride);
    w->data = dg_block_alloc((size_t)(v->numel ? v->numel : 1) * sizeof(float));
    if (!w->data) { s->failed = true; return w; }
    if (load) dg_cpu_copy(&dg_cpu_backend, v, w);
    s->orig[s->n] = (dg_kview *)v;
    s->out[s->n] = out;
    s->n++;
    return w;
}

/* Rounds the outputs back (when the kernel succeeded) and frees the buffers. */
static int finish(scratch *s, int rc) {
    for (int i = 0; i < s->n; i++) {
        if (rc == 0 && s->out[i]) dg_cpu_copy(&dg_cpu_backend, &s->view[i], s->orig[i]);
        dg_block_free(s->view[i].data);
    }
    return rc;
}

#define ANY_HALF(...) any_half((const dg_kview *[]){ __VA_ARGS__ }, sizeof((const dg_kview *[]){ __VA_ARGS__ }) / sizeof(dg_kview *))
static bool any_half(const dg_kview *const *v, size_t n) {
    for (size_t i = 0; i < n; i++) if (is_half(v[i])) return true;
    return false;
}
#define IN(v) widen(&s, (v), true, false)
#define OUT(v) widen(&s, (v), false, true)
#define INOUT(v) widen(&s, (v), true, true)
/* The wrapper's call: the kernel on the widened views, unless a buffer could not be had. */
#define RUN(CALL) do {                                                                    \
        if (s.failed) { DG_ERR(DG_ENOMEM, "cpu: no memory for the f32 copy of a half operand"); return finish(&s, DG_ENOMEM); } \
        return finish(&s, (CALL));                                                        \
    } while (0)

int dg_cpu_reduce_any(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y) {
    if (!ANY_HALF(x, y)) return dg_cpu_reduce(be, op, x, y);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_reduce(be, op, xf, yf));
}

int dg_cpu_softmax_any(const dg_backend *be, const dg_kview *x, dg_kview *y, int64_t rows, int64_t cols, bool log) {
    if (!ANY_HALF(x, y)) return dg_cpu_softmax(be, x, y, rows, cols, log);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_softmax(be, xf, yf, rows, cols, log));
}

int dg_cpu_softmax_backward_any(const dg_backend *be, const dg_kview *y, const dg_kview *gy, dg_kview *gx, int64_t rows, int64_t cols, bool log) {
    if (!ANY_HALF(y, gy, gx)) return dg_cpu_softmax_backward(be, y, gy, gx, rows, cols, log);
    scratch s = { .n = 0 };
    dg_kview *yf = IN(y), *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cpu_softmax_backward(be, yf, gyf, gxf, rows, cols, log));
}

int dg_cpu_index_select_any(const dg_backend *be, const dg_kview *x, const dg_kview *idx, dg_kview *y, int64_t o, int64_t d, int64_t in) {
    if (!ANY_HALF(x, y)) return dg_cpu_index_select(be, x, idx, y, o, d, in);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_index_select(be, xf, idx, yf, o, d, in));
}

int dg_cpu_index_add_any(const dg_backend *be, const dg_kview *gy, const dg_kview *idx, dg_kview *gx, int64_t o, int64_t d, int64_t in) {
    if (!ANY_HALF(gy, gx)) return dg_cpu_index_add(be, gy, idx, gx, o, d, in);
    scratch s = { .n = 0 };
    dg_kview *gyf = IN(gy), *gxf = INOUT(gx);
    RUN(dg_cpu_index_add(be, gyf, idx, gxf, o, d, in));
}

int dg_cpu_gather_any(const dg_backend *be, const dg_kview *x, const dg_kview *idx, dg_kview *y, int64_t o, int64_t xd, int64_t id, int64_t in) {
    if (!ANY_HALF(x, y)) return dg_cpu_gather(be, x, idx, y, o, xd, id, in);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_gather(be, xf, idx, yf, o, xd, id, in));
}

int dg_cpu_scatter_add_any(const dg_backend *be, const dg_kview *gy, const dg_kview *idx, dg_kview *gx, int64_t o, int64_t xd, int64_t id, int64_t in) {
    if (!ANY_HALF(gy, gx)) return dg_cpu_scatter_add(be, gy, idx, gx, o, xd, id, in);
    scratch s = { .n = 0 };
    dg_kview *gyf = IN(gy), *gxf = INOUT(gx);
    RUN(dg_cpu_scatter_add(be, gyf, idx, gxf, o, xd, id, in));
}

int dg_cpu_argsort_any(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t o, int64_t d, int64_t in, bool desc) {
    if (!ANY_HALF(x)) return dg_cpu_argsort(be, x, idx, o, d, in, desc);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x);   /* widening is exact, so the order is the half values' order */
    RUN(dg_cpu_argsort(be, xf, idx, o, d, in, desc));
}

int dg_cpu_nll_any(const dg_backend *be, const dg_kview *logp, const dg_kview *label, dg_kview *loss, int64_t rows, int64_t cols, int64_t ign) {
    if (!ANY_HALF(logp, loss)) return dg_cpu_nll(be, logp, label, loss, rows, cols, ign);
    scratch s = { .n = 0 };
    dg_kview *lf = IN(logp), *of = OUT(loss);
    RUN(dg_cpu_nll(be, lf, label, of, rows, cols, ign));
}

int dg_cpu_nll_backward_any(const dg_backend *be, const dg_kview *g, const dg_kview *label, dg_kview *glogp, int64_t rows, int64_t cols, int64_t ign) {
    if (!ANY_HALF(g, glogp)) return dg_cpu_nll_backward(be, g, label, glogp, rows, cols, ign);
    scratch s = { .n = 0 };
    dg_kview *gf = IN(g), *of = OUT(glogp);
    RUN(dg_cpu_nll_backward(be, gf, label, of, rows, cols, ign));
}

/* ---- convolution: all-bf16 operands run natively in oneDNN (conv_dnnl.c, f32 accumulation);
 * f16, mixed dtypes and the geometries oneDNN declines are widened here ---- */
static bool all_bf16(const dg_kview *a, const dg_kview *b, const dg_kview *c, const dg_kview *d) {
    return a->dtype == DG_BF16 && b->dtype == DG_BF16 && c->dtype == DG_BF16 && (!d || d->dtype == DG_BF16);
}
int dg_cpu_conv2d_any(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y) {
    if (!ANY_HALF(x, w, b, y)) return dg_cpu_conv2d(be, g, x, w, b, y);
    if (all_bf16(x, w, y, b) && dg_dnnl_conv2d(g, x, w, b, y) == 1)   /* the fused ReLU is the caller's to apply (NaN kept) */
        return g->relu ? dg_cpu_unary(be, DG_UN_RELU, y, y, 0, 0) : 0;
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *wf = IN(w), *bf = IN(b), *yf = OUT(y);
    RUN(dg_cpu_conv2d(be, g, xf, wf, bf, yf));
}

int dg_cpu_conv2d_backward_data_any(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx) {
    if (!ANY_HALF(gy, w, gx)) return dg_cpu_conv2d_backward_data(be, g, gy, w, gx);
    if (all_bf16(gy, w, gx, NULL) && dg_dnnl_conv2d_backward_data(g, gy, w, gx) == 1) return 0;
    scratch s = { .n = 0 };
    dg_kview *gyf = IN(gy), *wf = IN(w), *gxf = OUT(gx);
    RUN(dg_cpu_conv2d_backward_data(be, g, gyf, wf, gxf));
}

int dg_cpu_conv2d_backward_filter_any(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb) {
    if (!ANY_HALF(gy, x, gw, gb)) return dg_cpu_conv2d_backward_filter(be, g, gy, x, gw, gb);
    if (gw && all_bf16(gy, x, gw, gb) && dg_dnnl_conv2d_backward_filter(g, gy, x, gw, gb) == 1) return 0;
    scratch s = { .n = 0 };
    dg_kview *gyf = IN(gy), *xf = IN(x), *gwf = OUT(gw), *gbf = OUT(gb);
    RUN(dg_cpu_conv2d_backward_filter(be, g, gyf, xf, gwf, gbf));
}

/* ---- pooling: the kernels (pool.c, pool_indices.c) take f16/bf16 themselves, loading to f32
 * and rounding once, so operands of one half dtype go straight to them. Widened here still:
 * mixed dtypes (e.g. an f32 gradient for a half input), and backward passes whose gradient
 * plane is over the kernels' f32 stack accumulator (DG_CPU_POOL_HALF_PLANE_MAX elements). ---- */
#define ALL_HALF_AS(x, ...) all_half_as((x), (const dg_kview *[]){ __VA_ARGS__ }, sizeof((const dg_kview *[]){ __VA_ARGS__ }) / sizeof(dg_kview *))
static bool all_half_as(const dg_kview *x, const dg_kview *const *v, size_t n) {
    if (!is_half(x)) return false;
    for (size_t i = 0; i < n; i++) if (v[i]->dtype != x->dtype) return false;
    return true;
}
static int64_t plane_of(const dg_kview *v) { return v->shape[2] * v->shape[3]; }

int dg_cpu_max_pool2d_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    if (!ANY_HALF(x, y) || ALL_HALF_AS(x, y)) return dg_cpu_max_pool2d(be, g, x, y);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_max_pool2d(be, g, xf, yf));
}

int dg_cpu_max_pool2d_backward_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, const dg_kview *y, const dg_kview *gy, dg_kview *gx) {
    if (!ANY_HALF(x, y, gy, gx) || (ALL_HALF_AS(x, y, gy, gx) && dg_cpu_max_pool2d_half_bwd_fits(g)))
        return dg_cpu_max_pool2d_backward(be, g, x, y, gy, gx);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = IN(y), *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cpu_max_pool2d_backward(be, g, xf, yf, gyf, gxf));
}

int dg_cpu_avg_pool2d_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    if (!ANY_HALF(x, y) || ALL_HALF_AS(x, y)) return dg_cpu_avg_pool2d(be, g, x, y);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_avg_pool2d(be, g, xf, yf));
}

int dg_cpu_avg_pool2d_backward_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *gy, dg_kview *gx) {
    if (!ANY_HALF(gy, gx) || (ALL_HALF_AS(gy, gx) && dg_cpu_pool_half_plane_fits(g->h * g->w)))
        return dg_cpu_avg_pool2d_backward(be, g, gy, gx);
    scratch s = { .n = 0 };
    dg_kview *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cpu_avg_pool2d_backward(be, g, gyf, gxf));
}

int dg_cpu_adaptive_avg_pool2d_any(const dg_backend *be, const dg_kview *x, dg_kview *y) {
    if (!ANY_HALF(x, y) || ALL_HALF_AS(x, y)) return dg_cpu_adaptive_avg_pool2d(be, x, y);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_adaptive_avg_pool2d(be, xf, yf));
}

int dg_cpu_adaptive_avg_pool2d_backward_any(const dg_backend *be, const dg_kview *gy, dg_kview *gx) {
    if (!ANY_HALF(gy, gx) || (ALL_HALF_AS(gy, gx) && dg_cpu_pool_half_plane_fits(plane_of(gx))))
        return dg_cpu_adaptive_avg_pool2d_backward(be, gy, gx);
    scratch s = { .n = 0 };
    dg_kview *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cpu_adaptive_avg_pool2d_backward(be, gyf, gxf));
}

int dg_cpu_max_pool2d_with_indices_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    if (!ANY_HALF(x, y) || ALL_HALF_AS(x, y)) return dg_cpu_max_pool2d_with_indices(be, g, x, y, idx);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_max_pool2d_with_indices(be, g, xf, yf, idx));
}

int dg_cpu_adaptive_max_pool2d_any(const dg_backend *be, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    if (!ANY_HALF(x, y) || ALL_HALF_AS(x, y)) return dg_cpu_adaptive_max_pool2d(be, x, y, idx);
    scratch s = { .n = 0 };
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cpu_adaptive_max_pool2d(be, xf, yf, idx));
}

int dg_cpu_max_pool2d_indices_backward_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *idx, const dg_kview *gy, dg_kview *gx) {
    if (!ANY_HALF(gy, gx) || (ALL_HALF_AS(gy, gx) && dg_cpu_pool_half_plane_fits(plane_of(gx))))
        return dg_cpu_max_pool2d_indices_backward(be, g, idx, gy, gx);
    scratch s = { .n = 0 };
    dg_kview *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cpu_max_pool2d_indices_backward(be, g, idx, gyf, gxf));
}

/* ---- batch norm: x may be half while weight, bias and the statistics are f32 (normalisation
 * layers keep f32 parameters under O2), and the statistics are always accumulated in f32 ---- */
/* Batch norm runs on half activations natively (cpu/batchnorm.c); only per-channel tensors that
 * are half themselves (a norm layer cast to half, which O2 normally avoids) are widened here,
 * c values each. */
static int bn_forward_any(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y, dg_kview *mean,
                          dg_kview *invstd, bool training, bool relu, double eps, int64_t n, int64_t c, int64_t inner) {
    scratch s = { .n = 0 };
    dg_kview *wf = IN(w), *bf = IN(b), *mf = INOUT(mean), *sf = INOUT(invstd);
    RUN(relu ? dg_cpu_batch_norm_relu(be, x, wf, bf, y, mf, sf, training, eps, n, c, inner)
             : dg_cpu_batch_norm(be, x, wf, bf, y, mf, sf, training, eps, n, c, inner));
}
int dg_cpu_batch_norm_any(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y,
                          dg_kview *mean, dg_kview *invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    return bn_forward_any(be, x, w, b, y, mean, invstd, training, false, eps, n, c, inner);
}
int dg_cpu_batch_norm_relu_any(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y,
                               dg_kview *mean, dg_kview *invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    return bn_forward_any(be, x, w, b, y, mean, invstd, training, true, eps, n, c, inner);
}

int dg_cpu_batch_norm_relu_backward_any(const dg_backend *be, const dg_kview *x, const dg_kview *y, const dg_kview *gy,
                                        const dg_kview *w, const dg_kview *mean, const dg_kview *invstd, bool training,
                                        dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner) {
    scratch s = { .n = 0 };
    dg_kview *wf = IN(w), *mf = IN(mean), *sf = IN(invstd), *gwf = OUT(gw), *gbf = OUT(gb);
    RUN(y ? dg_cpu_batch_norm_relu_backward(be, x, y, gy, wf, mf, sf, training, gx, gwf, gbf, n, c, inner)
          : dg_cpu_batch_norm_backward(be, x, gy, wf, mf, sf, training, gx, gwf, gbf, n, c, inner));
}
int dg_cpu_batch_norm_backward_any(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *w, const dg_kview *mean,
                                   const dg_kview *invstd, bool training, dg_kview *gx, dg_kview *gw, dg_kview *gb,
                                   int64_t n, int64_t c, int64_t inner) {
    return dg_cpu_batch_norm_relu_backward_any(be, x, NULL, gy, w, mean, invstd, training, gx, gw, gb, n, c, inner);
}
