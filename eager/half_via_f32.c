/* eager/half_via_f32.c — the float16 / bfloat16 wrappers every backend shares (contract in
 * eager/half_via_f32.h): widen the half operands the backend does not keep into f32 scratch, run
 * its kernel, round the outputs back once, free the scratch. Built into the core for the CPU
 * table and into the CUDA module for the GPU table; it calls nothing of the core beyond what a
 * module's shim forwards (errors), and reaches memory, casts and kernels only through the table
 * it is handed. */
#include "half_via_f32.h"

/* One wrapped call: the call as keep sees it, and the f32 views standing for widened operands. */
typedef struct scratch {
    const dg_backend *be;
    const dg_half_via_f32 *h;
    dg_half_call call;
    unsigned keep;                            /* keep's answer: operands passed as they are */
    dg_kview view[DG_HALF_MAX_VIEWS];         /* the f32 copies */
    dg_kview *orig[DG_HALF_MAX_VIEWS];        /* the half view each copy stands for, to round back */
    bool out[DG_HALF_MAX_VIEWS];
    int n;
    int rc;                                   /* the first failure while widening */
} scratch;

static bool any_half(const dg_half_call *c) {
    for (int i = 0; i < c->n; i++)
        if (c->v[i] && dg_dtype_is_half(c->v[i]->dtype)) return true;
    return false;
}

/* Whether the call needs the wrapper at all (a half operand); if so, readies s and asks keep. */
static bool begin(const dg_backend *be, scratch *s) {
    if (!any_half(&s->call)) return false;
    s->be = be;
    s->h = be->half;
    s->n = 0;
    s->rc = 0;
    s->keep = s->h->keep ? s->h->keep(be, &s->call) : 0;
    return true;
}

/* Operand i as the kernel gets it: itself when absent, not half or kept; else a contiguous f32
 * buffer of its shape, filled from it when `load` (inputs, and outputs the kernel accumulates
 * into), rounded back into it at the end when `out`. */
static dg_kview *widen(scratch *s, int i, bool load, bool out) {
    const dg_kview *v = s->call.v[i];
    if (!v || !dg_dtype_is_half(v->dtype) || ((s->keep >> i) & 1u) || s->rc) return (dg_kview *)v;
    dg_kview *w = &s->view[s->n];
    *w = *v;
    w->dtype = DG_F32;
    for (int d = v->ndim - 1; d >= 0; d--)   /* contiguous, row-major */
        w->stride[d] = d == v->ndim - 1 ? 1 : w->stride[d + 1] * v->shape[d + 1];
    size_t bytes = (size_t)(v->numel ? v->numel : 1) * sizeof(float);
    w->data = s->h->scratch_alloc ? s->h->scratch_alloc(s->be, bytes) : s->be->alloc(s->be, bytes);
    if (!w->data) {   /* the allocator recorded why */
        int st = dg_last_status();
        s->rc = st < 0 ? st : DG_ENOMEM;
        return w;
    }
    s->orig[s->n] = (dg_kview *)v;
    s->out[s->n] = out;
    s->n++;
    if (load) s->rc = s->be->copy(s->be, v, w);
    return w;
}

/* Rounds the kernel's results back into the half outputs (when it succeeded) and frees the
 * scratch. On a device the frees come after the copies are queued on the same stream. */
static int finish(scratch *s, int rc) {
    for (int i = 0; i < s->n; i++) {
        if (rc == 0 && s->out[i]) rc = s->be->copy(s->be, &s->view[i], s->orig[i]);
        if (s->h->scratch_free) s->h->scratch_free(s->be, s->view[i].data);
        else s->be->free(s->be, s->view[i].data);
    }
    return rc;
}

/* The pieces of every wrapper below:
 *   CALL(entry, op, geom, views...)  the call record (views in the entry's argument order);
 *   DIRECT(kernel call)              the kernel on the call as it is when no operand is half, or
 *                                    when keep passes them all and the kernel does not decline;
 *   IN(i) / OUT(i) / INOUT(i)        operand i widened for reading / writing / both;
 *   RUN(kernel call)                 the kernel on the widened views unless widening failed,
 *                                    then the outputs rounded back. */
#define K (be->half->kernels)
#define CALL(ENTRY, OP, GEOM, ...)                                                            \
    scratch s;                                                                                \
    s.call = (dg_half_call){ (ENTRY), (int)(OP), (GEOM),                                      \
                             (int)(sizeof((const dg_kview *[]){ __VA_ARGS__ }) / sizeof(const dg_kview *)), \
                             { __VA_ARGS__ } }
#define DIRECT(KCALL) do {                                                                    \
        if (!begin(be, &s)) return (KCALL);                                                   \
        if (s.keep == DG_HALF_KEEP_ALL) {                                                     \
            int rc_ = (KCALL);                                                                \
            if (rc_ != DG_HALF_DECLINED) return rc_;                                          \
            s.keep = 0;                                                                       \
        }                                                                                     \
    } while (0)
#define IN(i) widen(&s, (i), true, false)
#define OUT(i) widen(&s, (i), false, true)
#define INOUT(i) widen(&s, (i), true, true)
#define RUN(KCALL) return finish(&s, s.rc ? s.rc : (KCALL))

/* ---- elementwise (unary and binary compute in f32 and round once; random's f32 draws rounded
 * once are the bits the CPU stores from the same draws) ---- */
int dg_half_unary(const dg_backend *be, dg_unary_op op, const dg_kview *x, dg_kview *y, double p0, double p1) {
    CALL(DG_BE_unary, op, NULL, x, y);
    DIRECT(K->unary(be, op, x, y, p0, p1));
    dg_kview *xf = IN(0), *yf = OUT(1);
    RUN(K->unary(be, op, xf, yf, p0, p1));
}

int dg_half_binary(const dg_backend *be, dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, double p0, double p1) {
    CALL(DG_BE_binary, op, NULL, a, b, y);
    DIRECT(K->binary(be, op, a, b, y, p0, p1));
    dg_kview *af = IN(0), *bf = IN(1), *yf = OUT(2);
    RUN(K->binary(be, op, af, bf, yf, p0, p1));
}

int dg_half_random(const dg_backend *be, dg_random_kind kind, dg_kview *y, double p0, double p1, uint64_t seed, uint64_t ctr) {
    CALL(DG_BE_random, kind, NULL, y);
    DIRECT(K->random(be, kind, y, p0, p1, seed, ctr));
    dg_kview *yf = OUT(0);
    RUN(K->random(be, kind, yf, p0, p1, seed, ctr));
}

/* ---- reductions, softmax, losses: accumulated in f32 ---- */
int dg_half_reduce(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y) {
    CALL(DG_BE_reduce, op, NULL, x, y);
    DIRECT(K->reduce(be, op, x, y));
    dg_kview *xf = IN(0), *yf = OUT(1);
    RUN(K->reduce(be, op, xf, yf));
}

int dg_half_softmax(const dg_backend *be, const dg_kview *x, dg_kview *y, int64_t rows, int64_t cols, bool log) {
    CALL(DG_BE_softmax, 0, NULL, x, y);
    DIRECT(K->softmax(be, x, y, rows, cols, log));
    dg_kview *xf = IN(0), *yf = OUT(1);
    RUN(K->softmax(be, xf, yf, rows, cols, log));
}

int dg_half_softmax_backward(const dg_backend *be, const dg_kview *y, const dg_kview *gy, dg_kview *gx, int64_t rows, int64_t cols, bool log) {
    CALL(DG_BE_softmax_backward, 0, NULL, y, gy, gx);
    DIRECT(K->softmax_backward(be, y, gy, gx, rows, cols, log));
    dg_kview *yf = IN(0), *gyf = IN(1), *gxf = OUT(2);
    RUN(K->softmax_backward(be, yf, gyf, gxf, rows, cols, log));
}

int dg_half_nll(const dg_backend *be, const dg_kview *logp, const dg_kview *label, dg_kview *loss, int64_t rows, int64_t cols, int64_t ign) {
    CALL(DG_BE_nll, 0, NULL, logp, label, loss);
    DIRECT(K->nll(be, logp, label, loss, rows, cols, ign));
    dg_kview *lf = IN(0), *of = OUT(2);
    RUN(K->nll(be, lf, label, of, rows, cols, ign));
}

int dg_half_nll_backward(const dg_backend *be, const dg_kview *g, const dg_kview *label, dg_kview *glogp, int64_t rows, int64_t cols, int64_t ign) {
    CALL(DG_BE_nll_backward, 0, NULL, g, label, glogp);
    DIRECT(K->nll_backward(be, g, label, glogp, rows, cols, ign));
    dg_kview *gf = IN(0), *of = OUT(2);
    RUN(K->nll_backward(be, gf, label, of, rows, cols, ign));
}

/* ---- indexing (the index views pass as they are) ---- */
int dg_half_index_select(const dg_backend *be, const dg_kview *x, const dg_kview *idx, dg_kview *y, int64_t o, int64_t d, int64_t in) {
    CALL(DG_BE_index_select, 0, NULL, x, idx, y);
    DIRECT(K->index_select(be, x, idx, y, o, d, in));
    dg_kview *xf = IN(0), *yf = OUT(2);
    RUN(K->index_select(be, xf, idx, yf, o, d, in));
}

int dg_half_index_add(const dg_backend *be, const dg_kview *gy, const dg_kview *idx, dg_kview *gx, int64_t o, int64_t d, int64_t in) {
    CALL(DG_BE_index_add, 0, NULL, gy, idx, gx);
    DIRECT(K->index_add(be, gy, idx, gx, o, d, in));
    dg_kview *gyf = IN(0), *gxf = INOUT(2);
    RUN(K->index_add(be, gyf, idx, gxf, o, d, in));
}

int dg_half_gather(const dg_backend *be, const dg_kview *x, const dg_kview *idx, dg_kview *y, int64_t o, int64_t xd, int64_t id, int64_t in) {
    CALL(DG_BE_gather, 0, NULL, x, idx, y);
    DIRECT(K->gather(be, x, idx, y, o, xd, id, in));
    dg_kview *xf = IN(0), *yf = OUT(2);
    RUN(K->gather(be, xf, idx, yf, o, xd, id, in));
}

int dg_half_scatter_add(const dg_backend *be, const dg_kview *gy, const dg_kview *idx, dg_kview *gx, int64_t o, int64_t xd, int64_t id, int64_t in) {
    CALL(DG_BE_scatter_add, 0, NULL, gy, idx, gx);
    DIRECT(K->scatter_add(be, gy, idx, gx, o, xd, id, in));
    dg_kview *gyf = IN(0), *gxf = INOUT(2);
    RUN(K->scatter_add(be, gyf, idx, gxf, o, xd, id, in));
}

int dg_half_argsort(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t o, int64_t d, int64_t in, bool desc) {
    CALL(DG_BE_argsort, 0, NULL, x, idx);
    DIRECT(K->argsort(be, x, idx, o, d, in, desc));
    dg_kview *xf = IN(0);   /* widening is exact, so the order is the half values' order */
    RUN(K->argsort(be, xf, idx, o, d, in, desc));
}

/* ---- convolution ---- */
int dg_half_conv2d(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y) {
    CALL(DG_BE_conv2d, 0, g, x, w, b, y);
    DIRECT(K->conv2d(be, g, x, w, b, y));
    dg_kview *xf = IN(0), *wf = IN(1), *bf = IN(2), *yf = OUT(3);
    RUN(K->conv2d(be, g, xf, wf, bf, yf));
}

int dg_half_conv2d_backward_data(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx) {
    CALL(DG_BE_conv2d_backward_data, 0, g, gy, w, gx);
    DIRECT(K->conv2d_backward_data(be, g, gy, w, gx));
    dg_kview *gyf = IN(0), *wf = IN(1), *gxf = OUT(2);
    RUN(K->conv2d_backward_data(be, g, gyf, wf, gxf));
}

int dg_half_conv2d_backward_filter(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb) {
    CALL(DG_BE_conv2d_backward_filter, 0, g, gy, x, gw, gb);
    DIRECT(K->conv2d_backward_filter(be, g, gy, x, gw, gb));
    dg_kview *gyf = IN(0), *xf = IN(1), *gwf = OUT(2), *gbf = OUT(3);
    RUN(K->conv2d_backward_filter(be, g, gyf, xf, gwf, gbf));
}

/* ---- pooling (f32 windows and sums; the index views pass as they are) ---- */
int dg_half_max_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    CALL(DG_BE_max_pool2d, 0, g, x, y);
    DIRECT(K->max_pool2d(be, g, x, y));
    dg_kview *xf = IN(0), *yf = OUT(1);
    RUN(K->max_pool2d(be, g, xf, yf));
}

int dg_half_max_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, const dg_kview *y, const dg_kview *gy, dg_kview *gx) {
    CALL(DG_BE_max_pool2d_backward, 0, g, x, y, gy, gx);
    DIRECT(K->max_pool2d_backward(be, g, x, y, gy, gx));
    dg_kview *xf = IN(0), *yf = IN(1), *gyf = IN(2), *gxf = OUT(3);
    RUN(K->max_pool2d_backward(be, g, xf, yf, gyf, gxf));
}

int dg_half_avg_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    CALL(DG_BE_avg_pool2d, 0, g, x, y);
    DIRECT(K->avg_pool2d(be, g, x, y));
    dg_kview *xf = IN(0), *yf = OUT(1);
    RUN(K->avg_pool2d(be, g, xf, yf));
}

int dg_half_avg_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *gy, dg_kview *gx) {
    CALL(DG_BE_avg_pool2d_backward, 0, g, gy, gx);
    DIRECT(K->avg_pool2d_backward(be, g, gy, gx));
    dg_kview *gyf = IN(0), *gxf = OUT(1);
    RUN(K->avg_pool2d_backward(be, g, gyf, gxf));
}

int dg_half_adaptive_avg_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y) {
    CALL(DG_BE_adaptive_avg_pool2d, 0, NULL, x, y);
    DIRECT(K->adaptive_avg_pool2d(be, x, y));
    dg_kview *xf = IN(0), *yf = OUT(1);
    RUN(K->adaptive_avg_pool2d(be, xf, yf));
}

int dg_half_adaptive_avg_pool2d_backward(const dg_backend *be, const dg_kview *gy, dg_kview *gx) {
    CALL(DG_BE_adaptive_avg_pool2d_backward, 0, NULL, gy, gx);
    DIRECT(K->adaptive_avg_pool2d_backward(be, gy, gx));
    dg_kview *gyf = IN(0), *gxf = OUT(1);
    RUN(K->adaptive_avg_pool2d_backward(be, gyf, gxf));
}

int dg_half_max_pool2d_with_indices(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    CALL(DG_BE_max_pool2d_with_indices, 0, g, x, y, idx);
    DIRECT(K->max_pool2d_with_indices(be, g, x, y, idx));
    dg_kview *xf = IN(0), *yf = OUT(1);
    RUN(K->max_pool2d_with_indices(be, g, xf, yf, idx));
}

int dg_half_adaptive_max_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    CALL(DG_BE_adaptive_max_pool2d, 0, NULL, x, y, idx);
    DIRECT(K->adaptive_max_pool2d(be, x, y, idx));
    dg_kview *xf = IN(0), *yf = OUT(1);
    RUN(K->adaptive_max_pool2d(be, xf, yf, idx));
}

int dg_half_max_pool2d_indices_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *idx, const dg_kview *gy, dg_kview *gx) {
    CALL(DG_BE_max_pool2d_indices_backward, 0, g, idx, gy, gx);
    DIRECT(K->max_pool2d_indices_backward(be, g, idx, gy, gx));
    dg_kview *gyf = IN(1), *gxf = OUT(2);
    RUN(K->max_pool2d_indices_backward(be, g, idx, gyf, gxf));
}

/* ---- batch norm: x may be half while weight, bias and the statistics are f32 (normalisation
 * layers keep f32 parameters under O2); the statistics are accumulated in f32. In eval mode
 * mean / invstd carry the running statistics in, hence INOUT. ---- */
int dg_half_batch_norm(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y,
                       dg_kview *mean, dg_kview *invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    CALL(DG_BE_batch_norm, 0, NULL, x, w, b, y, mean, invstd);
    DIRECT(K->batch_norm(be, x, w, b, y, mean, invstd, training, eps, n, c, inner));
    dg_kview *xf = IN(0), *wf = IN(1), *bf = IN(2), *yf = OUT(3), *mf = INOUT(4), *sf = INOUT(5);
    RUN(K->batch_norm(be, xf, wf, bf, yf, mf, sf, training, eps, n, c, inner));
}

int dg_half_batch_norm_relu(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y,
                            dg_kview *mean, dg_kview *invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    CALL(DG_BE_batch_norm_relu, 0, NULL, x, w, b, y, mean, invstd);
    DIRECT(K->batch_norm_relu(be, x, w, b, y, mean, invstd, training, eps, n, c, inner));
    dg_kview *xf = IN(0), *wf = IN(1), *bf = IN(2), *yf = OUT(3), *mf = INOUT(4), *sf = INOUT(5);
    RUN(K->batch_norm_relu(be, xf, wf, bf, yf, mf, sf, training, eps, n, c, inner));
}

int dg_half_batch_norm_backward(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *w, const dg_kview *mean,
                                const dg_kview *invstd, bool training, dg_kview *gx, dg_kview *gw, dg_kview *gb,
                                int64_t n, int64_t c, int64_t inner) {
    CALL(DG_BE_batch_norm_backward, 0, NULL, x, gy, w, mean, invstd, gx, gw, gb);
    DIRECT(K->batch_norm_backward(be, x, gy, w, mean, invstd, training, gx, gw, gb, n, c, inner));
    dg_kview *xf = IN(0), *gyf = IN(1), *wf = IN(2), *mf = IN(3), *sf = IN(4);
    dg_kview *gxf = OUT(5), *gwf = OUT(6), *gbf = OUT(7);
    RUN(K->batch_norm_backward(be, xf, gyf, wf, mf, sf, training, gxf, gwf, gbf, n, c, inner));
}

int dg_half_batch_norm_relu_backward(const dg_backend *be, const dg_kview *x, const dg_kview *y, const dg_kview *gy,
                                     const dg_kview *w, const dg_kview *mean, const dg_kview *invstd, bool training,
                                     dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner) {
    CALL(DG_BE_batch_norm_relu_backward, 0, NULL, x, y, gy, w, mean, invstd, gx, gw, gb);
    DIRECT(K->batch_norm_relu_backward(be, x, y, gy, w, mean, invstd, training, gx, gw, gb, n, c, inner));
    dg_kview *xf = IN(0), *yf = IN(1), *gyf = IN(2), *wf = IN(3), *mf = IN(4), *sf = IN(5);
    dg_kview *gxf = OUT(6), *gwf = OUT(7), *gbf = OUT(8);
    RUN(K->batch_norm_relu_backward(be, xf, yf, gyf, wf, mf, sf, training, gxf, gwf, gbf, n, c, inner));
}

const dg_backend dg_half_wrappers = {
    .name = "half_via_f32",
    .unary = dg_half_unary,
    .binary = dg_half_binary,
    .reduce = dg_half_reduce,
    .random = dg_half_random,
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
};
