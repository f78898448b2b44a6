/* eager/cpu/pool_indices.c — max pooling that reports torch's indices, on the CPU backend
 * (contiguous NCHW; f32, f64, and f16/bf16 loaded to f32): dilated windows (torch's max_pool2d dilation), adaptive max
 * pooling, and the backward both share, which adds each output's gradient at its index.
 *
 * Indices are flat within the input plane (torch's return_indices). The winner is the first
 * maximum in row-major window order, NaN winning so it propagates: eager/cpu/pool.c's rule, so
 * a max pool gives the same values and gradients on either path. Adaptive bins are torch's:
 * start = floor(i*H/oh), end = ceil((i+1)*H/oh). Planes are independent, so threads split
 * them and the backward needs no atomics. A half kernel compares loaded f32 values and sums a
 * gradient plane in an f32 buffer, rounding once on store: the f32 kernel's results, rounded. */
#include "../backend.h"
#include "cpu_kernels.h"
#include "iter.h"
#include <math.h>

static inline int64_t ad_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
static inline int64_t ad_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

/* storage T, arithmetic A, as eager/cpu/pool.c */
#define LD_same(v) (v)
#define ST_same(v) (v)
#define LD_bf16(v) dg_bf16_to_f32(v)
#define ST_bf16(v) dg_f32_to_bf16((float)(v))
#define LD_f16(v) dg_f16_to_f32(v)
#define ST_f16(v) dg_f32_to_f16((float)(v))

#define INDEX_KERNELS(T, A, SUF, LD, ST, HALF)                                                      \
/* first maximum over rows ys + j*dy (j < ny) and columns xs + j*dx (j < nx) that lie inside    \
 * the plane; -1 when none does */                                                                 \
static inline int64_t argmax_##SUF(const T *xp, int64_t h, int64_t w, int64_t ys, int ny, int dy,  \
                                   int64_t xs, int nx, int dx, T *out) {                           \
    int64_t best = -1;                                                                             \
    A m = (A)-INFINITY;                                                                            \
    for (int j = 0; j < ny; j++) {                                                                 \
        int64_t iy = ys + (int64_t)j * dy;                                                         \
        if (iy < 0 || iy >= h) continue;                                                           \
        for (int k = 0; k < nx; k++) {                                                             \
            int64_t ix = xs + (int64_t)k * dx;                                                     \
            if (ix < 0 || ix >= w) continue;                                                       \
            A v = LD(xp[iy * w + ix]);                                                             \
            if (best < 0 || v > m || (isnan(v) && !isnan(m))) { m = v; best = iy * w + ix; }       \
        }                                                                                          \
    }                                                                                              \
    *out = ST(m);                                                                                  \
    return best;                                                                                   \
}                                                                                                  \
static void max_idx_fwd_##SUF(const dg_pool2d_geom *g, const T *x, T *y, int64_t *idx) {           \
    int64_t planes = g->n * g->c, hw = g->h * g->w, ohw = g->oh * g->ow;                           \
    _Pragma("omp parallel for if(planes * ohw * g->kh * g->kw >= DG_PAR_MIN) schedule(static)")    \
    for (int64_t p = 0; p < planes; p++)                                                           \
        for (int64_t oy = 0; oy < g->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                int64_t o = p * ohw + oy * g->ow + ox;                                             \
                idx[o] = argmax_##SUF(x + p * hw, g->h, g->w, oy * g->sh - g->ph, g->kh, g->dh,    \
                                      ox * g->sw - g->pw, g->kw, g->dw, &y[o]);                    \
            }                                                                                      \
}                                                                                                  \
static void adapt_max_fwd_##SUF(const T *x, T *y, int64_t *idx, int64_t planes, int64_t h, int64_t w, \
                                int64_t oh, int64_t ow) {                                          \
    _Pragma("omp parallel for if(planes * h * w >= DG_PAR_MIN) schedule(static)")                  \
    for (int64_t p = 0; p < planes; p++)                                                           \
        for (int64_t oy = 0; oy < oh; oy++) {                                                      \
            int64_t ys = ad_start(oy, h, oh), ye = ad_end(oy, h, oh);                              \
            for (int64_t ox = 0; ox < ow; ox++) {                                                  \
                int64_t xs = ad_start(ox, w, ow), xe = ad_end(ox, w, ow), o = (p * oh + oy) * ow + ox; \
                idx[o] = argmax_##SUF(x + p * h * w, h, w, ys, (int)(ye - ys), 1, xs, (int)(xe - xs), 1, &y[o]); \
            }                                                                                      \
        }                                                                                          \
}                                                                                                  \
/* windows may share an input (stride < kernel), so gradients are summed: a half plane in an   \
 * f32 stack buffer, rounded into gx once (dg_cpu_pool_half_plane_fits bounds the plane) */       \
static void idx_bwd_##SUF(const int64_t *idx, const T *gy, T *gx, int64_t planes, int64_t hw, int64_t ohw) { \
    _Pragma("omp parallel for if(planes * hw >= DG_PAR_MIN) schedule(static)")                     \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        T *gxp = gx + p * hw;                                                                      \
        A acc_st[(HALF) ? DG_CPU_POOL_HALF_PLANE_MAX : 1];                                         \
        A *acc = (HALF) ? acc_st : (A *)(void *)gxp;                                               \
        memset(acc, 0, sizeof(A) * (size_t)hw);                                                    \
        for (int64_t o = p * ohw; o < (p + 1) * ohw; o++)                                          \
            if (idx[o] >= 0 && idx[o] < hw) acc[idx[o]] += LD(gy[o]);                              \
        if (HALF) for (int64_t i = 0; i < hw; i++) gxp[i] = ST(acc[i]);                            \
    }                                                                                              \
}
INDEX_KERNELS(float, float, f32, LD_same, ST_same, 0)
INDEX_KERNELS(double, double, f64, LD_same, ST_same, 0)
INDEX_KERNELS(uint16_t, float, bf16, LD_bf16, ST_bf16, 1)
INDEX_KERNELS(uint16_t, float, f16, LD_f16, ST_f16, 1)

static int bad_dtype(const char *op, dg_dtype dt) {
    DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cpu", op, dg_dtype_name(dt));
    return DG_EUNSUPPORTED;
}

int dg_cpu_max_pool2d_with_indices(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    (void)be;
    if (x->dtype == DG_F32) max_idx_fwd_f32(g, x->data, y->data, idx->data);
    else if (x->dtype == DG_F64) max_idx_fwd_f64(g, x->data, y->data, idx->data);
    else if (x->dtype == DG_BF16) max_idx_fwd_bf16(g, x->data, y->data, idx->data);
    else if (x->dtype == DG_F16) max_idx_fwd_f16(g, x->data, y->data, idx->data);
    else return bad_dtype("max_pool2d_with_indices", x->dtype);
    return 0;
}

/* x [N, C, H, W], y and idx [N, C, OH, OW] */
int dg_cpu_adaptive_max_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    (void)be;
    int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3], oh = y->shape[2], ow = y->shape[3];
    if (x->dtype == DG_F32) adapt_max_fwd_f32(x->data, y->data, idx->data, planes, h, w, oh, ow);
    else if (x->dtype == DG_F64) adapt_max_fwd_f64(x->data, y->data, idx->data, planes, h, w, oh, ow);
    else if (x->dtype == DG_BF16) adapt_max_fwd_bf16(x->data, y->data, idx->data, planes, h, w, oh, ow);
    else if (x->dtype == DG_F16) adapt_max_fwd_f16(x->data, y->data, idx->data, planes, h, w, oh, ow);
    else return bad_dtype("adaptive_max_pool2d", x->dtype);
    return 0;
}

int dg_cpu_max_pool2d_indices_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *idx, const dg_kview *gy,
                                       dg_kview *gx) {
    (void)be; (void)g;
    int64_t planes = gx->shape[0] * gx->shape[1], hw = gx->shape[2] * gx->shape[3], ohw = gy->shape[2] * gy->shape[3];
    if (dg_dtype_is_half(gy->dtype) && !dg_cpu_pool_half_plane_fits(hw)) {   /* cpu/half.c asks first */
        DG_ERR(DG_EUNSUPPORTED, "max_pool2d backward: a %lld-element half gradient plane is over the native "
               "kernel's %d (the widened path takes it)", (long long)hw, DG_CPU_POOL_HALF_PLANE_MAX);
        return DG_EUNSUPPORTED;
    }
    if (gy->dtype == DG_F32) idx_bwd_f32(idx->data, gy->data, gx->data, planes, hw, ohw);
    else if (gy->dtype == DG_F64) idx_bwd_f64(idx->data, gy->data, gx->data, planes, hw, ohw);
    else if (gy->dtype == DG_BF16) idx_bwd_bf16(idx->data, gy->data, gx->data, planes, hw, ohw);
    else if (gy->dtype == DG_F16) idx_bwd_f16(idx->data, gy->data, gx->data, planes, hw, ohw);
    else return bad_dtype("max_pool2d backward", gy->dtype);
    return 0;
}
