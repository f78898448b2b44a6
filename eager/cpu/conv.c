/* eager/cpu/conv.c — 2-D convolution on the CPU backend (contiguous NCHW, f32 and f64).
 *
 * Forward: per image and group, im2col into a [C/g*KH*KW, OH*OW] buffer, then one GEMM with the
 * group's filters [OC/g, C/g*KH*KW] (f32 goes to oneDNN's sgemm). A 1x1, stride-1, unpadded
 * convolution is already a GEMM on the input plane, so it skips im2col.
 * Backward data: GEMM with the transposed filters into a column buffer, then col2im.
 * Backward filter: im2col again and gw += gy . col^T, accumulated over the batch; gb = sum gy.
 *
 * Threads: with at least as many images as threads each thread takes whole images with its own
 * column buffer (and, for the filter gradient, its own partial gw that is reduced at the end);
 * otherwise images go one by one and the threads work inside im2col/col2im and the GEMM. */
#include "../backend.h"
#include "iter.h"
#include <omp.h>

/* The CPU's entries keep no per-instance state, so the GEMM is called here with no instance
 * (which also keeps this file from depending on the table that refers to it). */
int dg_cpu_gemm(const dg_backend *be, dg_dtype, bool, bool, int64_t, int64_t, int64_t, double, const void *, int64_t, int64_t,
                const void *, int64_t, int64_t, double, void *, int64_t, int64_t, int64_t);

/* Partial filter gradients per thread cost threads * |gw| of memory; above this we loop images
 * sequentially instead (the big-filter layers have small planes, where that loses little). */
#define PARTIAL_GW_MAX_BYTES ((size_t)256 << 20)

/* Range [lo, hi) of output columns ox whose input column ox*s + x0 lies inside [0, w). */
static inline void valid_cols(int64_t x0, int64_t s, int64_t w, int64_t ow, int64_t *lo, int64_t *hi) {
    int64_t l = x0 >= 0 ? 0 : (-x0 + s - 1) / s;
    int64_t h = x0 > w - 1 ? 0 : (w - 1 - x0) / s + 1;
    if (h > ow) h = ow;
    if (l > ow) l = ow;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

#define CONV_KERNELS(T, SUF)                                                                        \
/* x: [cg, H, W] of one image and group -> col: [cg*KH*KW, OH*OW] */                               \
static void im2col_##SUF(const T *x, int64_t cg, const dg_conv2d_geom *g, T *col, bool par) {     \
    const int64_t H = g->h, W = g->w, OH = g->oh, OW = g->ow, KH = g->kh, KW = g->kw;              \
    _Pragma("omp parallel for if(par) schedule(static)")                                           \
    for (int64_t r = 0; r < cg * KH * KW; r++) {                                                   \
        int64_t c = r / (KH * KW), ki = (r / KW) % KH, kj = r % KW;                                \
        const T *xc = x + c * H * W;                                                               \
        T *cr = col + r * OH * OW;                                                                 \
        int64_t x0 = kj * g->dw - g->pw, lo, hi;                                                   \
        valid_cols(x0, g->sw, W, OW, &lo, &hi);                                                    \
        for (int64_t oy = 0; oy < OH; oy++) {                                                      \
            int64_t iy = oy * g->sh - g->ph + ki * g->dh;                                          \
            T *dst = cr + oy * OW;                                                                 \
            if (iy < 0 || iy >= H) { memset(dst, 0, sizeof(T) * (size_t)OW); continue; }          \
            const T *src = xc + iy * W + x0;                                                       \
            for (int64_t ox = 0; ox < lo; ox++) dst[ox] = 0;                                       \
            if (g->sw == 1) memcpy(dst + lo, src + lo, sizeof(T) * (size_t)(hi - lo));             \
            else for (int64_t ox = lo; ox < hi; ox++) dst[ox] = src[ox * g->sw];                   \
            for (int64_t ox = hi; ox < OW; ox++) dst[ox] = 0;                                      \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
/* col: [cg*KH*KW, OH*OW] -> x: [cg, H, W], overwriting x. Threads split channels, so no two     \
 * threads ever add into the same input plane. */                                                  \
static void col2im_##SUF(const T *col, int64_t cg, const dg_conv2d_geom *g, T *x, bool par) {     \
    const int64_t H = g->h, W = g->w, OH = g->oh, OW = g->ow, KH = g->kh, KW = g->kw;              \
    _Pragma("omp parallel for if(par) schedule(static)")                                           \
    for (int64_t c = 0; c < cg; c++) {                                                             \
        T *xc = x + c * H * W;                                                                     \
        memset(xc, 0, sizeof(T) * (size_t)(H * W));                                                \
        for (int64_t ki = 0; ki < KH; ki++)                                                        \
            for (int64_t kj = 0; kj < KW; kj++) {                                                  \
                const T *cr = col + ((c * KH + ki) * KW + kj) * OH * OW;                           \
                int64_t x0 = kj * g->dw - g->pw, lo, hi;                                           \
                valid_cols(x0, g->sw, W, OW, &lo, &hi);                                            \
                for (int64_t oy = 0; oy < OH; oy++) {                                              \
                    int64_t iy = oy * g->sh - g->ph + ki * g->dh;                                  \
                    if (iy < 0 || iy >= H) continue;                                               \
                    T *dst = xc + iy * W + x0;                                                     \
                    const T *src = cr + oy * OW;                                                   \
                    for (int64_t ox = lo; ox < hi; ox++) dst[ox * g->sw] += src[ox];               \
                }                                                                                  \
            }                                                                                      \
    }                                                                                              \
}                                                                                                  \
/* y[oc, :] = b[oc] for the [oc, L] block of one image (the GEMM then adds with beta = 1) */      \
static void fill_bias_##SUF(T *y, const T *b, int64_t oc, int64_t l) {                             \
    for (int64_t o = 0; o < oc; o++) for (int64_t i = 0; i < l; i++) y[o * l + i] = b[o];        \
}                                                                                                  \
/* gb[o] = sum over n and L of gy[n, o, :] (accumulated in double) */                              \
static void bias_grad_##SUF(const T *gy, T *gb, int64_t n, int64_t oc, int64_t l) {                \
    _Pragma("omp parallel for if(n * oc * l >= DG_PAR_MIN) schedule(static)")                      \
    for (int64_t o = 0; o < oc; o++) {                                                             \
        double s = 0;                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T *p = gy + (i * oc + o) * l;                                                    \
            _Pragma("omp simd reduction(+:s)")   /* vector lanes of partial sums, still in double */ \
            for (int64_t j = 0; j < l; j++) s += p[j];                                             \
        }                                                                                          \
        gb[o] = (T)s;                                                                              \
    }                                                                                              \
}                                                                                                  \
/* gw = sum of the per-thread partial buffers */                                                  \
static void reduce_parts_##SUF(T *gw, void *const *parts, int nparts, int64_t len) {              \
    _Pragma("omp parallel for if(len * nparts >= DG_PAR_MIN) schedule(static)")                    \
    for (int64_t j = 0; j < len; j++) {                                                            \
        T s = 0;                                                                                   \
        for (int t = 0; t < nparts; t++) s += ((const T *)parts[t])[j];                            \
        gw[j] = s;                                                                                 \
    }                                                                                              \
}
CONV_KERNELS(float, f32)
CONV_KERNELS(double, f64)

static bool is_direct(const dg_conv2d_geom *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}
static void im2col(dg_dtype dt, const void *x, int64_t cg, const dg_conv2d_geom *g, void *col, bool par) {
    if (dt == DG_F32) im2col_f32(x, cg, g, col, par); else im2col_f64(x, cg, g, col, par);
}
static void col2im(dg_dtype dt, const void *col, int64_t cg, const dg_conv2d_geom *g, void *x, bool par) {
    if (dt == DG_F32) col2im_f32(col, cg, g, x, par); else col2im_f64(col, cg, g, x, par);
}
/* Batch-level threading pays when every thread gets at least one whole image. */
static int batch_threads(int64_t n) {
    int t = dg_threads();
    return (t > 1 && n >= t) ? t : 1;
}
static int unsupported(const char *op, dg_dtype dt) {
    DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cpu", op, dg_dtype_name(dt));
    return DG_EUNSUPPORTED;
}
/* Kernel errors raised on a worker thread land in that thread's error slot: unless this thread
 * recorded why since the entry began (errs), say it here. */
static int report(int rc, const char *op, uint64_t errs) {
    if (rc && !dg_error_since(errs))
        DG_ERR(rc, "%s: cpu kernel failed (%s)", op, rc == DG_ENOMEM ? "out of memory" : "gemm");
    return rc;
}

/* ---- forward ---- */
static int conv_image(const dg_conv2d_geom *g, dg_dtype dt, const char *x, const char *w, const char *b,
                      char *y, char *col, bool par) {
    size_t es = dg_dtype_bytes(dt);
    int64_t cg = g->c / g->groups, ocg = g->oc / g->groups, k = cg * g->kh * g->kw, l = g->oh * g->ow;
    for (int gi = 0; gi < g->groups; gi++) {
        const char *xg = x + (size_t)(gi * cg * g->h * g->w) * es;
        char *yg = y + (size_t)(gi * ocg * l) * es;
        const char *src = xg;
        if (!is_direct(g)) { im2col(dt, xg, cg, g, col, par); src = col; }
        if (b) {
            const char *bg = b + (size_t)(gi * ocg) * es;
            if (dt == DG_F32) fill_bias_f32((float *)yg, (const float *)bg, ocg, l);
            else fill_bias_f64((double *)yg, (const double *)bg, ocg, l);
        }
        int rc = dg_cpu_gemm(NULL, dt, false, false, ocg, l, k, 1.0, w + (size_t)(gi * ocg * k) * es, k, 0,
                             src, l, 0, b ? 1.0 : 0.0, yg, l, 0, 1);
        if (rc) return rc;
    }
    return 0;
}

/* ---- backward data ---- */
static int conv_bwd_data_image(const dg_conv2d_geom *g, dg_dtype dt, const char *gy, const char *w, char *gx,
                               char *col, bool par) {
    size_t es = dg_dtype_bytes(dt);
    int64_t cg = g->c / g->groups, ocg = g->oc / g->groups, k = cg * g->kh * g->kw, l = g->oh * g->ow;
    for (int gi = 0; gi < g->groups; gi++) {
        const char *gyg = gy + (size_t)(gi * ocg * l) * es, *wg = w + (size_t)(gi * ocg * k) * es;
        char *gxg = gx + (size_t)(gi * cg * g->h * g->w) * es;
        /* columns = W_g^T [k, ocg] . gy_g [ocg, l]; direct convs write straight into gx */
        char *dst = is_direct(g) ? gxg : col;
        int rc = dg_cpu_gemm(NULL, dt, true, false, k, l, ocg, 1.0, wg, k, 0, gyg, l, 0, 0.0, dst, l, 0, 1);
        if (rc) return rc;
        if (!is_direct(g)) col2im(dt, col, cg, g, gxg, par);
    }
    return 0;
}

/* The batch loop of the forward pass (backward false: in x, out y, bias b or NULL) and of the
 * backward-data pass (backward true: in gy, out gx), which thread alike (see the top comment)
 * and differ only in the pass over one image. */
static int batch_images(const dg_conv2d_geom *g, dg_dtype dt, bool backward, const char *in, const char *w,
                        const char *b, char *out) {
    size_t es = dg_dtype_bytes(dt);
    int64_t xs = g->c * g->h * g->w, ys = g->oc * g->oh * g->ow;
    int64_t ins = backward ? ys : xs, outs = backward ? xs : ys;
    size_t colb = is_direct(g) ? 0 : (size_t)(g->c / g->groups * g->kh * g->kw * g->oh * g->ow) * es;
    int nt = batch_threads(g->n), rc = 0;
    #pragma omp parallel num_threads(nt) if(nt > 1)
    {
        char *col = colb ? malloc(colb) : NULL;
        int my = (colb && !col) ? DG_ENOMEM : 0;
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < g->n; i++) {
            if (my) continue;
            const char *im = in + (size_t)(i * ins) * es;
            char *om = out + (size_t)(i * outs) * es;
            my = backward ? conv_bwd_data_image(g, dt, im, w, om, col, nt == 1)
                          : conv_image(g, dt, im, w, b, om, col, nt == 1);
        }
        free(col);
        if (my) {
            #pragma omp atomic write
            rc = my;
        }
    }
    return rc;
}

/* oneDNN's primitives first for f32 (eager/cpu/conv_dnnl.c); DG_CPU_CONV=im2col keeps to the
 * code below (for comparisons). */
int dg_dnnl_conv2d(const dg_conv2d_geom *, const dg_kview *, const dg_kview *, const dg_kview *, dg_kview *);
int dg_cpu_unary(const dg_backend *be, dg_unary_op, const dg_kview *, dg_kview *, double, double);
int dg_dnnl_conv2d_backward_data(const dg_conv2d_geom *, const dg_kview *, const dg_kview *, dg_kview *);
int dg_dnnl_conv2d_backward_filter(const dg_conv2d_geom *, const dg_kview *, const dg_kview *, dg_kview *, dg_kview *);
static bool use_dnnl(void) {
    static int use = -1;
    if (use < 0) { const char *e = getenv("DG_CPU_CONV"); use = !(e && strcmp(e, "im2col") == 0); }
    return use;
}

int dg_cpu_conv2d(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y) {
    uint64_t errs = dg_error_count();
    if (use_dnnl() && dg_dnnl_conv2d(g, x, w, b, y) == 1)
        return g->relu ? report(dg_cpu_unary(be, DG_UN_RELU, y, y, 0, 0), "conv2d", errs) : 0;   /* in place, NaN kept */
    dg_dtype dt = x->dtype;
    if (dt != DG_F32 && dt != DG_F64) return unsupported("conv2d", dt);
    int rc = batch_images(g, dt, false, x->data, w->data, b ? b->data : NULL, y->data);
    if (!rc && g->relu) rc = dg_cpu_unary(be, DG_UN_RELU, y, y, 0, 0);
    return report(rc, "conv2d", errs);
}

int dg_cpu_conv2d_backward_data(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx) {
    uint64_t errs = dg_error_count();
    if (use_dnnl() && dg_dnnl_conv2d_backward_data(g, gy, w, gx) == 1) return 0;
    dg_dtype dt = gy->dtype;
    if (dt != DG_F32 && dt != DG_F64) return unsupported("conv2d backward", dt);
    return report(batch_images(g, dt, true, gy->data, w->data, NULL, gx->data), "conv2d backward", errs);
}

/* ---- backward filter ---- */
/* gw (+)= gy_n . col_n^T for one image, every group; beta 0 overwrites, 1 accumulates */
static int conv_bwd_filter_image(const dg_conv2d_geom *g, dg_dtype dt, const char *gy, const char *x, char *gw,
                                 char *col, double beta, bool par) {
    size_t es = dg_dtype_bytes(dt);
    int64_t cg = g->c / g->groups, ocg = g->oc / g->groups, k = cg * g->kh * g->kw, l = g->oh * g->ow;
    for (int gi = 0; gi < g->groups; gi++) {
        const char *xg = x + (size_t)(gi * cg * g->h * g->w) * es, *src = xg;
        if (!is_direct(g)) { im2col(dt, xg, cg, g, col, par); src = col; }
        int rc = dg_cpu_gemm(NULL, dt, false, true, ocg, k, l, 1.0, gy + (size_t)(gi * ocg * l) * es, l, 0, src, l, 0,
                             beta, gw + (size_t)(gi * ocg * k) * es, k, 0, 1);
        if (rc) return rc;
    }
    return 0;
}

int dg_cpu_conv2d_backward_filter(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb) {
    uint64_t errs = dg_error_count();
    if (use_dnnl() && dg_dnnl_conv2d_backward_filter(g, gy, x, gw, gb) == 1) return 0;
    dg_dtype dt = gy->dtype;
    if (dt != DG_F32 && dt != DG_F64) return unsupported("conv2d backward", dt);
    size_t es = dg_dtype_bytes(dt);
    const char *gyp = gy->data, *xp = x->data;
    int64_t xs = g->c * g->h * g->w, ys = g->oc * g->oh * g->ow, l = g->oh * g->ow;
    if (gb) {
        if (dt == DG_F32) bias_grad_f32(gy->data, gb->data, g->n, g->oc, l);
        else bias_grad_f64(gy->data, gb->data, g->n, g->oc, l);
    }
    if (!gw) return 0;
    char *gwp = gw->data;
    size_t gwb = (size_t)gw->numel * es;
    memset(gwp, 0, gwb);   /* an empty batch has a zero gradient */
    size_t colb = is_direct(g) ? 0 : (size_t)(g->c / g->groups * g->kh * g->kw * l) * es;
    int nt = batch_threads(g->n), rc = 0;
    if (nt > 1 && gwb * (size_t)nt > PARTIAL_GW_MAX_BYTES) nt = 1;
    if (nt == 1) {
        char *col = colb ? malloc(colb) : NULL;
        if (colb && !col) return report(DG_ENOMEM, "conv2d backward", errs);
        for (int64_t i = 0; i < g->n && !rc; i++)
            rc = conv_bwd_filter_image(g, dt, gyp + (size_t)(i * ys) * es, xp + (size_t)(i * xs) * es, gwp, col,
                                       i == 0 ? 0.0 : 1.0, true);
        free(col);
        return report(rc, "conv2d backward", errs);
    }
    /* each thread sums its images into its own zeroed buffer; thread 0 reuses gw itself */
    void *parts[64];
    if (nt > 64) nt = 64;
    #pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        char *col = colb ? malloc(colb) : NULL;
        char *part = t == 0 ? gwp : calloc(1, gwb);
        parts[t] = part;
        int my = ((colb && !col) || !part) ? DG_ENOMEM : 0;
        for (int64_t i = t; i < g->n && !my; i += nth)
            my = conv_bwd_filter_image(g, dt, gyp + (size_t)(i * ys) * es, xp + (size_t)(i * xs) * es, part, col, 1.0, false);
        free(col);
        if (my) {
            #pragma omp atomic write
            rc = my;
        }
        #pragma omp barrier
        #pragma omp single
        {
            nt = nth;   /* the runtime may have given fewer threads than asked */
        }
    }
    if (!rc) {
        /* gw is parts[0]: sum the others into it */
        if (dt == DG_F32) reduce_parts_f32(gw->data, parts, nt, gw->numel);
        else reduce_parts_f64(gw->data, parts, nt, gw->numel);
    }
    for (int t = 1; t < nt; t++) free(parts[t]);
    return report(rc, "conv2d backward", errs);
}
