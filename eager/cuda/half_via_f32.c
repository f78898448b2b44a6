/* eager/cuda/half_via_f32.c — float16 / bfloat16 for the CUDA entries that have no 2-byte
 * kernel of their own (the GPU twin of eager/cpu/half_via_f32.c): each half operand is widened
 * on the device into a float32 scratch buffer from the caching allocator, the f32 kernel runs,
 * and the outputs are rounded back to nearest even by the cast kernel (copy.cu). So unary and
 * binary ops compute in f32 and round once, every reduction, softmax, loss, pooling window and
 * batch-norm statistic accumulates in f32, and the results are the CPU's (which does the same
 * widening) up to the f32 kernels' own summation order. The table in cuda_backend.c points at
 * these wrappers; a call with no half operand goes straight to the kernel. Native half paths:
 * fill, copy/cast, where, the comparisons, index_select and gather (copy.cu, elementwise.cu,
 * index.cu: raw or exact moves), GEMM on cuBLAS with
 * f32 compute (gemm.cu) and convolutions on cuDNN with f32 compute (cudnn_conv.c). The scratch
 * is freed as soon as the work is queued: the allocator hands a block to later work on the same
 * compute stream only, which runs after this. */
#include "cuda_internal.h"

typedef struct scratch {
    dg_kview view[8];
    dg_kview *orig[8];       /* the half view each scratch view stands for, to round back */
    bool out[8];
    int n;
    int rc;                  /* first failure while widening */
    const dg_backend *be;
} scratch;

static bool is_half(const dg_kview *v) { return v && dg_dtype_is_half(v->dtype); }

/* v as f32: v itself when it is not half (or NULL); else a contiguous f32 buffer of v's shape,
 * filled from v when `load` (inputs, and outputs a kernel accumulates into). */
static dg_kview *widen(scratch *s, const dg_kview *v, bool load, bool out) {
    if (!is_half(v)) return (dg_kview *)v;
    dg_kview *w = &s->view[s->n];
    *w = *v;
    w->dtype = DG_F32;
    for (int d = v->ndim - 1; d >= 0; d--)   /* contiguous, row-major */
        w->stride[d] = d == v->ndim - 1 ? 1 : w->stride[d + 1] * v->shape[d + 1];
    w->data = dg_cuda_alloc((size_t)(v->numel ? v->numel : 1) * sizeof(float));
    if (!w->data) {
        if (!s->rc) { DG_ERR(DG_ENOMEM, "cuda: no device memory for the f32 copy of a %s operand", dg_dtype_name(v->dtype)); s->rc = DG_ENOMEM; }
        return w;
    }
    if (load && !s->rc) s->rc = dg_cuda_copy(s->be, v, w);
    s->orig[s->n] = (dg_kview *)v;
    s->out[s->n] = out;
    s->n++;
    return w;
}

/* Runs the kernel's result back into the half outputs (when it succeeded) and frees the buffers. */
static int finish(scratch *s, int rc) {
    for (int i = 0; i < s->n; i++) {
        if (rc == 0 && s->out[i]) rc = dg_cuda_copy(s->be, &s->view[i], s->orig[i]);
        dg_cuda_free(s->view[i].data);
    }
    return rc;
}

#define ANY_HALF(...) any_half((const dg_kview *[]){ __VA_ARGS__ }, sizeof((const dg_kview *[]){ __VA_ARGS__ }) / sizeof(dg_kview *))
static bool any_half(const dg_kview *const *v, size_t n) {
    for (size_t i = 0; i < n; i++) if (is_half(v[i])) return true;
    return false;
}
/* The wrapper's start: the device made current before its scratch is allocated there. */
#define BEGIN() scratch s = { .n = 0, .rc = 0, .be = be }; DG_CUDA_ENTER(be)
#define IN(v) widen(&s, (v), true, false)
#define OUT(v) widen(&s, (v), false, true)
#define INOUT(v) widen(&s, (v), true, true)
/* The wrapper's call: the kernel on the widened views, unless widening failed. */
#define RUN(CALL) return finish(&s, s.rc ? s.rc : (CALL))

int dg_cuda_unary_any(const dg_backend *be, dg_unary_op op, const dg_kview *x, dg_kview *y, double p0, double p1) {
    if (!ANY_HALF(x, y)) return dg_cuda_unary(be, op, x, y, p0, p1);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_unary(be, op, xf, yf, p0, p1));
}

int dg_cuda_binary_any(const dg_backend *be, dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, double p0, double p1) {
    /* the comparisons read half operands natively (exact widening, compared as doubles) */
    if (!ANY_HALF(a, b, y) || op == DG_BIN_GT || op == DG_BIN_EQ) return dg_cuda_binary(be, op, a, b, y, p0, p1);
    BEGIN();
    dg_kview *af = IN(a), *bf = IN(b), *yf = OUT(y);
    RUN(dg_cuda_binary(be, op, af, bf, yf, p0, p1));
}

int dg_cuda_reduce_any(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y) {
    if (!ANY_HALF(x, y)) return dg_cuda_reduce(be, op, x, y);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_reduce(be, op, xf, yf));
}

/* the f32 draws rounded once: the CPU stores (float)v into a half, the same bits */
int dg_cuda_random_any(const dg_backend *be, dg_random_kind kind, dg_kview *y, double p0, double p1, uint64_t seed, uint64_t ctr) {
    if (!ANY_HALF(y)) return dg_cuda_random(be, kind, y, p0, p1, seed, ctr);
    BEGIN();
    dg_kview *yf = OUT(y);
    RUN(dg_cuda_random(be, kind, yf, p0, p1, seed, ctr));
}

int dg_cuda_softmax_any(const dg_backend *be, const dg_kview *x, dg_kview *y, int64_t rows, int64_t cols, bool log) {
    if (!ANY_HALF(x, y)) return dg_cuda_softmax(be, x, y, rows, cols, log);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_softmax(be, xf, yf, rows, cols, log));
}

int dg_cuda_softmax_backward_any(const dg_backend *be, const dg_kview *y, const dg_kview *gy, dg_kview *gx, int64_t rows, int64_t cols, bool log) {
    if (!ANY_HALF(y, gy, gx)) return dg_cuda_softmax_backward(be, y, gy, gx, rows, cols, log);
    BEGIN();
    dg_kview *yf = IN(y), *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cuda_softmax_backward(be, yf, gyf, gxf, rows, cols, log));
}

int dg_cuda_index_select_any(const dg_backend *be, const dg_kview *x, const dg_kview *idx, dg_kview *y, int64_t o, int64_t d, int64_t in) {
    /* a gather moves elements as raw bits (index.cu, by element size): no widening needed */
    if (!ANY_HALF(x, y) || x->dtype == y->dtype) return dg_cuda_index_select(be, x, idx, y, o, d, in);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_index_select(be, xf, idx, yf, o, d, in));
}

int dg_cuda_index_add_any(const dg_backend *be, const dg_kview *gy, const dg_kview *idx, dg_kview *gx, int64_t o, int64_t d, int64_t in) {
    if (!ANY_HALF(gy, gx)) return dg_cuda_index_add(be, gy, idx, gx, o, d, in);
    BEGIN();
    dg_kview *gyf = IN(gy), *gxf = INOUT(gx);
    RUN(dg_cuda_index_add(be, gyf, idx, gxf, o, d, in));
}

int dg_cuda_gather_any(const dg_backend *be, const dg_kview *x, const dg_kview *idx, dg_kview *y, int64_t o, int64_t xd, int64_t id, int64_t in) {
    if (!ANY_HALF(x, y) || x->dtype == y->dtype) return dg_cuda_gather(be, x, idx, y, o, xd, id, in);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_gather(be, xf, idx, yf, o, xd, id, in));
}

int dg_cuda_scatter_add_any(const dg_backend *be, const dg_kview *gy, const dg_kview *idx, dg_kview *gx, int64_t o, int64_t xd, int64_t id, int64_t in) {
    if (!ANY_HALF(gy, gx)) return dg_cuda_scatter_add(be, gy, idx, gx, o, xd, id, in);
    BEGIN();
    dg_kview *gyf = IN(gy), *gxf = INOUT(gx);
    RUN(dg_cuda_scatter_add(be, gyf, idx, gxf, o, xd, id, in));
}

int dg_cuda_argsort_any(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t o, int64_t d, int64_t in, bool desc) {
    if (!ANY_HALF(x)) return dg_cuda_argsort(be, x, idx, o, d, in, desc);
    BEGIN();
    dg_kview *xf = IN(x);   /* widening is exact, so the order is the half values' order */
    RUN(dg_cuda_argsort(be, xf, idx, o, d, in, desc));
}

int dg_cuda_nll_any(const dg_backend *be, const dg_kview *logp, const dg_kview *label, dg_kview *loss, int64_t rows, int64_t cols, int64_t ign) {
    if (!ANY_HALF(logp, loss)) return dg_cuda_nll(be, logp, label, loss, rows, cols, ign);
    BEGIN();
    dg_kview *lf = IN(logp), *of = OUT(loss);
    RUN(dg_cuda_nll(be, lf, label, of, rows, cols, ign));
}

int dg_cuda_nll_backward_any(const dg_backend *be, const dg_kview *g, const dg_kview *label, dg_kview *glogp, int64_t rows, int64_t cols, int64_t ign) {
    if (!ANY_HALF(g, glogp)) return dg_cuda_nll_backward(be, g, label, glogp, rows, cols, ign);
    BEGIN();
    dg_kview *gf = IN(g), *of = OUT(glogp);
    RUN(dg_cuda_nll_backward(be, gf, label, of, rows, cols, ign));
}

/* ---- pooling ---- */
int dg_cuda_max_pool2d_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    if (!ANY_HALF(x, y)) return dg_cuda_max_pool2d(be, g, x, y);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_max_pool2d(be, g, xf, yf));
}

int dg_cuda_max_pool2d_backward_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, const dg_kview *y, const dg_kview *gy, dg_kview *gx) {
    if (!ANY_HALF(x, y, gy, gx)) return dg_cuda_max_pool2d_backward(be, g, x, y, gy, gx);
    BEGIN();
    dg_kview *xf = IN(x), *yf = IN(y), *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cuda_max_pool2d_backward(be, g, xf, yf, gyf, gxf));
}

int dg_cuda_avg_pool2d_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    if (!ANY_HALF(x, y)) return dg_cuda_avg_pool2d(be, g, x, y);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_avg_pool2d(be, g, xf, yf));
}

int dg_cuda_avg_pool2d_backward_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *gy, dg_kview *gx) {
    if (!ANY_HALF(gy, gx)) return dg_cuda_avg_pool2d_backward(be, g, gy, gx);
    BEGIN();
    dg_kview *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cuda_avg_pool2d_backward(be, g, gyf, gxf));
}

int dg_cuda_adaptive_avg_pool2d_any(const dg_backend *be, const dg_kview *x, dg_kview *y) {
    if (!ANY_HALF(x, y)) return dg_cuda_adaptive_avg_pool2d(be, x, y);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_adaptive_avg_pool2d(be, xf, yf));
}

int dg_cuda_adaptive_avg_pool2d_backward_any(const dg_backend *be, const dg_kview *gy, dg_kview *gx) {
    if (!ANY_HALF(gy, gx)) return dg_cuda_adaptive_avg_pool2d_backward(be, gy, gx);
    BEGIN();
    dg_kview *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cuda_adaptive_avg_pool2d_backward(be, gyf, gxf));
}

int dg_cuda_max_pool2d_with_indices_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    if (!ANY_HALF(x, y)) return dg_cuda_max_pool2d_with_indices(be, g, x, y, idx);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_max_pool2d_with_indices(be, g, xf, yf, idx));
}

int dg_cuda_adaptive_max_pool2d_any(const dg_backend *be, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    if (!ANY_HALF(x, y)) return dg_cuda_adaptive_max_pool2d(be, x, y, idx);
    BEGIN();
    dg_kview *xf = IN(x), *yf = OUT(y);
    RUN(dg_cuda_adaptive_max_pool2d(be, xf, yf, idx));
}

int dg_cuda_max_pool2d_indices_backward_any(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *idx, const dg_kview *gy, dg_kview *gx) {
    if (!ANY_HALF(gy, gx)) return dg_cuda_max_pool2d_indices_backward(be, g, idx, gy, gx);
    BEGIN();
    dg_kview *gyf = IN(gy), *gxf = OUT(gx);
    RUN(dg_cuda_max_pool2d_indices_backward(be, g, idx, gyf, gxf));
}

/* ---- batch norm: x may be half while weight, bias and the statistics are f32 (normalisation
 * layers keep f32 parameters under O2); the statistics are accumulated in f32 ---- */
int dg_cuda_batch_norm_any(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y,
                           dg_kview *mean, dg_kview *invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    if (!ANY_HALF(x, w, b, y, mean, invstd)) return dg_cuda_batch_norm(be, x, w, b, y, mean, invstd, training, eps, n, c, inner);
    BEGIN();
    dg_kview *xf = IN(x), *wf = IN(w), *bf = IN(b), *yf = OUT(y), *mf = INOUT(mean), *sf = INOUT(invstd);
    RUN(dg_cuda_batch_norm(be, xf, wf, bf, yf, mf, sf, training, eps, n, c, inner));
}

int dg_cuda_batch_norm_backward_any(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *w, const dg_kview *mean,
                                    const dg_kview *invstd, bool training, dg_kview *gx, dg_kview *gw, dg_kview *gb,
                                    int64_t n, int64_t c, int64_t inner) {
    if (!ANY_HALF(x, gy, w, mean, invstd, gx, gw, gb))
        return dg_cuda_batch_norm_backward(be, x, gy, w, mean, invstd, training, gx, gw, gb, n, c, inner);
    BEGIN();
    dg_kview *xf = IN(x), *gyf = IN(gy), *wf = IN(w), *mf = IN(mean), *sf = IN(invstd);
    dg_kview *gxf = OUT(gx), *gwf = OUT(gw), *gbf = OUT(gb);
    RUN(dg_cuda_batch_norm_backward(be, xf, gyf, wf, mf, sf, training, gxf, gwf, gbf, n, c, inner));
}

/* ---- convolution: operands all of one half type run natively in cuDNN (f32 compute,
 * cudnn_conv.c); mixed dtypes and the empty-batch / empty-plane edges, which cudnn_conv.c
 * handles with f32 / f64 helpers, are widened here ---- */
static bool all_of(dg_dtype dt, const dg_kview *a, const dg_kview *b, const dg_kview *c, const dg_kview *d) {
    return dg_dtype_is_half(dt) && a->dtype == dt && b->dtype == dt && c->dtype == dt && (!d || d->dtype == dt);
}

int dg_cuda_conv2d_any(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y) {
    if (!ANY_HALF(x, w, b, y) || (all_of(x->dtype, x, w, y, b) && x->numel > 0)) return dg_cuda_conv2d(be, g, x, w, b, y);
    BEGIN();
    dg_kview *xf = IN(x), *wf = IN(w), *bf = IN(b), *yf = OUT(y);
    RUN(dg_cuda_conv2d(be, g, xf, wf, bf, yf));
}

int dg_cuda_conv2d_backward_data_any(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx) {
    if (!ANY_HALF(gy, w, gx) || (all_of(gy->dtype, gy, w, gx, NULL) && gy->numel > 0)) return dg_cuda_conv2d_backward_data(be, g, gy, w, gx);
    BEGIN();
    dg_kview *gyf = IN(gy), *wf = IN(w), *gxf = OUT(gx);
    RUN(dg_cuda_conv2d_backward_data(be, g, gyf, wf, gxf));
}

int dg_cuda_conv2d_backward_filter_any(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb) {
    if (!ANY_HALF(gy, x, gw, gb) || (gw && all_of(gy->dtype, gy, x, gw, gb) && gy->numel > 0 && x->numel > 0))
        return dg_cuda_conv2d_backward_filter(be, g, gy, x, gw, gb);
    BEGIN();
    dg_kview *gyf = IN(gy), *xf = IN(x), *gwf = OUT(gw), *gbf = OUT(gb);
    RUN(dg_cuda_conv2d_backward_filter(be, g, gyf, xf, gwf, gbf));
}
