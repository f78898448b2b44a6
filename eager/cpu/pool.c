/* eager/cpu/pool.c — max, average and adaptive-average 2-D pooling on the CPU backend
 * (contiguous NCHW; f32, f64, and f16/bf16 loaded to f32), forward and backward.
 *
 * Window rules follow PyTorch (and Paddle): a window starts at o*stride - pad; average pooling
 * divides by the window clipped to the padded input when count_include_pad, else by the number
 * of real input elements it covers. The op layer has already dropped ceil_mode windows that
 * would start inside the padding, so every window here covers at least one input element.
 * Adaptive pooling uses start = floor(i*H/oh), end = ceil((i+1)*H/oh).
 *
 * Every (n, c) plane is independent, so threads split planes; backward writes only into its
 * own plane of gx and needs no atomics. Max-pool backward recomputes the argmax from x (the
 * first maximum in row-major window order, as the forward picks it) instead of storing indices.
 * A half kernel is the f32 kernel on loaded values: the same comparisons, and the same f32/f64
 * sums (gradient planes in an f32 buffer), rounded once on store, so its results are the f32
 * kernel's on the widened input, rounded, bit for bit. */
#include "../backend.h"
#include "cpu_kernels.h"
#include "iter.h"
#include <math.h>
#include <string.h>

/* Clipped window [*s, *e) of output index o along one axis of size n. */
static inline void window(int64_t o, int stride, int pad, int k, int64_t n, int64_t *s, int64_t *e) {
    int64_t a = o * stride - pad, b = a + k;
    *s = a < 0 ? 0 : a;
    *e = b > n ? n : b;
}
/* Divisor of one average window (see the top comment). */
static inline int64_t avg_divisor(const dg_pool2d_geom *g, int64_t oy, int64_t ox) {
    if (g->divisor > 0) return g->divisor;   /* torch's divisor_override */
    int64_t ys, ye, xs, xe;
    window(oy, g->sh, g->ph, g->kh, g->h, &ys, &ye);
    window(ox, g->sw, g->pw, g->kw, g->w, &xs, &xe);
    if (!g->count_include_pad) return (ye - ys) * (xe - xs);
    int64_t a = oy * g->sh - g->ph, b = a + g->kh, c = ox * g->sw - g->pw, d = c + g->kw;
    if (b > g->h + g->ph) b = g->h + g->ph;
    if (d > g->w + g->pw) d = g->w + g->pw;
    return (b - a) * (d - c);
}
/* Bounds of every window: rows of output row oy at [2*oy, 2*oy+1], columns of output column ox
 * at [2*(oh+ox), 2*(oh+ox)+1]. NULL when out of memory (callers then compute them per output). */
/* 2x2, stride 2, no padding, and every output window inside the input (no ceil_mode overhang) */
static bool is_2x2(const dg_pool2d_geom *g) {
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 &&
           2 * g->oh <= g->h && 2 * g->ow <= g->w && g->ow <= 4096;   /* the row buffer lives on the stack */
}
/* 3x3, stride 2, padding 1, floor output size (ResNet's stem pool) */
static bool is_3x3s2(const dg_pool2d_geom *g) {
    return g->kh == 3 && g->kw == 3 && g->sh == 2 && g->sw == 2 && g->ph == 1 && g->pw == 1 && g->h >= 2 && g->w >= 2 &&
           g->oh == (g->h - 1) / 2 + 1 && g->ow == (g->w - 1) / 2 + 1 && g->w <= 8192;
}
static int64_t *pool_windows(const dg_pool2d_geom *g) {
    int64_t *w = malloc(sizeof *w * 2 * (size_t)(g->oh + g->ow));
    if (!w) return NULL;
    for (int64_t oy = 0; oy < g->oh; oy++) window(oy, g->sh, g->ph, g->kh, g->h, &w[2 * oy], &w[2 * oy + 1]);
    for (int64_t ox = 0; ox < g->ow; ox++) window(ox, g->sw, g->pw, g->kw, g->w, &w[2 * (g->oh + ox)], &w[2 * (g->oh + ox) + 1]);
    return w;
}
static inline int64_t adapt_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
static inline int64_t adapt_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

/* Storage T, arithmetic A: f32 and f64 compute in their own type (LD/ST_same, the plain code);
 * float16 / bfloat16 load each element to float and round every result once on store (as
 * eager/cpu/elementwise.c), and do every comparison and sum in the very operations of the f32
 * kernel, so a half result is the f32 kernel's on the widened input, rounded: bit for bit. */
#define LD_same(v) (v)
#define ST_same(v) (v)
#define LD_bf16(v) dg_bf16_to_f32(v)
#define ST_bf16(v) dg_f32_to_bf16((float)(v))
#define LD_f16(v) dg_f16_to_f32(v)
#define ST_f16(v) dg_f32_to_f16((float)(v))
/* Backward passes that sum gradients into gx (overlapping windows) sum a half plane in an f32
 * buffer on the thread's stack, zeroed and then rounded into gx once, so the sums are the f32
 * kernel's; f32/f64 sum in gx itself (ACC is then gx's plane and the copies are dead code).
 * Larger planes are widened to f32 instead (cpu/half.c asks dg_cpu_pool_half_plane_fits). */
#define ACC_BEGIN(HALF, A, buf, gxp, hw)                                                           \
    A buf##_st[(HALF) ? DG_CPU_POOL_HALF_PLANE_MAX : 1];                                           \
    A *buf = (HALF) ? buf##_st : (A *)(void *)(gxp);                                               \
    memset(buf, 0, sizeof(A) * (size_t)(hw))
#define ACC_END(HALF, ST, buf, gxp, hw)                                                            \
    do { if (HALF) for (int64_t i_ = 0; i_ < (hw); i_++) (gxp)[i_] = ST(buf[i_]); } while (0)

#define POOL_KERNELS(T, A, SUF, LD, ST, HALF)                                                       \
static inline int64_t argmax_in_##SUF(const T *xp, int64_t w, int64_t ys, int64_t ye, int64_t xs, int64_t xe); \
/* index (within the plane) of the first maximum of window (oy, ox); -1 for an empty window;     \
 * NaN wins, as in PyTorch, so it propagates */                                                    \
static inline int64_t argmax_##SUF(const T *xp, const dg_pool2d_geom *g, int64_t oy, int64_t ox) { \
    int64_t ys, ye, xs, xe;                                                                        \
    window(oy, g->sh, g->ph, g->kh, g->h, &ys, &ye);                                               \
    window(ox, g->sw, g->pw, g->kw, g->w, &xs, &xe);                                               \
    return argmax_in_##SUF(xp, g->w, ys, ye, xs, xe);                                              \
}                                                                                                  \
/* the same over a window given by its bounds (rows [ys, ye), columns [xs, xe)) */                \
static inline int64_t argmax_in_##SUF(const T *xp, int64_t w, int64_t ys, int64_t ye, int64_t xs, int64_t xe) { \
    int64_t best = -1;                                                                             \
    A m = 0;                                                                                       \
    for (int64_t iy = ys; iy < ye; iy++)                                                           \
        for (int64_t ix = xs; ix < xe; ix++) {                                                     \
            A v = LD(xp[iy * w + ix]);                                                             \
            if (best < 0 || v > m || (isnan(v) && !isnan(m))) { m = v; best = iy * w + ix; }       \
        }                                                                                          \
    return best;                                                                                   \
}                                                                                                  \
/* 2x2 windows with stride 2 and no padding (the Paddle tutorials' CNNs): every window is inside the plane  \
 * and windows do not overlap, so each output looks at exactly its four inputs, in the generic  \
 * rule's order (first maximum, NaN wins). */                                                      \
/* 2x2/stride-2 rows written so the compiler vectorises them: a vertical pass (the larger of the \
 * two input rows, NaN winning) into a row buffer, then pairs of it. The backward pass gives    \
 * each window's gradient to the first of its four inputs (row-major) equal to the maximum, or  \
 * the first NaN: the generic rule's winner. No input gets two windows' gradients, so a half   \
 * gradient is stored directly. */                                                                 \
/* two selects rather than one on (a > b) | (a != a): GCC vectorises this form when nested */   \
static inline A nmax_##SUF(A a, A b) { A m = a > b ? a : b; return a != a ? a : m; }              \
static void max2x2_row_##SUF(const T *restrict r0, const T *restrict r1, A *restrict t, T *restrict y, int64_t ow) { \
    for (int64_t i = 0; i < 2 * ow; i++) t[i] = nmax_##SUF(LD(r0[i]), LD(r1[i]));                 \
    for (int64_t ox = 0; ox < ow; ox++) y[ox] = ST(nmax_##SUF(t[2 * ox], t[2 * ox + 1]));          \
}                                                                                                  \
/* v where c, else +0, on the stored bits: the scalar tail of a short row (ResNet's and MyNet's  \
 * 7x7 and 15x15 planes are all tail for AVX-512) stays branch-free, where a select on floats  \
 * became a mispredicted branch */                                                               \
static inline T keep_if_##SUF(int c, T v) {                                                        \
    if (sizeof(T) == 2) { uint16_t u; memcpy(&u, &v, 2); u &= (uint16_t)-c; memcpy(&v, &u, 2); }   \
    else if (sizeof(T) == 4) { uint32_t u; memcpy(&u, &v, 4); u &= (uint32_t)-c; memcpy(&v, &u, 4); } \
    else { uint64_t u; memcpy(&u, &v, 8); u &= (uint64_t)-c; memcpy(&v, &u, 8); }                  \
    return v;                                                                                      \
}                                                                                                  \
/* Per window: the first input equal to the maximum (or the first NaN) gets gy's value as stored \
 * (a half gradient is not converted at all), every other input +0. */                           \
static void max2x2_row_bwd_##SUF(const T *restrict r0, const T *restrict r1, const T *restrict gy,  \
                                 T *restrict g0, T *restrict g1, int64_t ow) {                     \
    for (int64_t ox = 0; ox < ow; ox++) {                                                          \
        A a = LD(r0[2 * ox]), b = LD(r0[2 * ox + 1]), c = LD(r1[2 * ox]), d = LD(r1[2 * ox + 1]);  \
        A m = nmax_##SUF(nmax_##SUF(a, b), nmax_##SUF(c, d));                                      \
        int ha = (a == m) | (a != a), hb = (b == m) | (b != b), hc = (c == m) | (c != c);          \
        int na = !ha, nb = !hb;                                                                    \
        T v = gy[ox];                                                                              \
        g0[2 * ox] = keep_if_##SUF(ha, v);                                                         \
        g0[2 * ox + 1] = keep_if_##SUF(na & hb, v);                                                \
        g1[2 * ox] = keep_if_##SUF(na & nb & hc, v);                                               \
        g1[2 * ox + 1] = keep_if_##SUF(na & nb & !hc, v);                                          \
    }                                                                                              \
}                                                                                                  \
static void max2x2_fwd_##SUF(const dg_pool2d_geom *g, const T *x, T *y) {                          \
    int64_t planes = g->n * g->c, W = g->w, OH = g->oh, OW = g->ow;                                \
    _Pragma("omp parallel for if(planes * g->h * W >= DG_PAR_MIN) schedule(static)")               \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        A t[2 * OW];                                                                               \
        const T *xp = x + p * g->h * W; T *yp = y + p * OH * OW;                                   \
        for (int64_t oy = 0; oy < OH; oy++)                                                        \
            max2x2_row_##SUF(xp + 2 * oy * W, xp + (2 * oy + 1) * W, t, yp + oy * OW, OW);          \
    }                                                                                              \
}                                                                                                  \
static void max2x2_bwd_##SUF(const dg_pool2d_geom *g, const T *x, const T *gy, T *gx) {            \
    int64_t planes = g->n * g->c, H = g->h, W = g->w, OH = g->oh, OW = g->ow;                      \
    _Pragma("omp parallel for if(planes * H * W >= DG_PAR_MIN) schedule(static)")                  \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        const T *xp = x + p * H * W, *gp = gy + p * OH * OW; T *gxp = gx + p * H * W;              \
        /* rows/columns no window covers (odd sizes) get zero (all-zero bits: +0 in every type) */ \
        if (2 * OH < H || 2 * OW < W) memset(gxp, 0, sizeof(T) * (size_t)(H * W));                  \
        for (int64_t oy = 0; oy < OH; oy++)                                                        \
            max2x2_row_bwd_##SUF(xp + 2 * oy * W, xp + (2 * oy + 1) * W, gp + oy * OW,              \
                                 gxp + 2 * oy * W, gxp + (2 * oy + 1) * W, OW);                    \
    }                                                                                              \
}                                                                                                  \
/* 3x3/stride-2/padding-1 forward (ResNet's stem pool): the window's value only, so the         \
 * vertical max of up to three rows, then of three neighbouring columns, both vectorised;       \
 * padding is never a candidate (edges take the columns/rows that exist). */                    \
static void max3x3s2_fwd_##SUF(const dg_pool2d_geom *g, const T *x, T *y) {                        \
    int64_t planes = g->n * g->c, H = g->h, W = g->w, OH = g->oh, OW = g->ow;                      \
    _Pragma("omp parallel for if(planes * H * W >= DG_PAR_MIN) schedule(static)")                  \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        A t[W], te[OW], to[OW];                                                                    \
        const T *xp = x + p * H * W; T *yp = y + p * OH * OW;                                      \
        for (int64_t oy = 0; oy < OH; oy++) {                                                      \
            int64_t y0 = 2 * oy - 1 < 0 ? 0 : 2 * oy - 1, y1 = 2 * oy + 1 < H - 1 ? 2 * oy + 1 : H - 1; \
            const T *ra = xp + y0 * W;                                                             \
            for (int64_t i = 0; i < W; i++) t[i] = LD(ra[i]);                                      \
            for (int64_t r = y0 + 1; r <= y1; r++) {                                               \
                const T *rr = xp + r * W;                                                          \
                for (int64_t i = 0; i < W; i++) t[i] = nmax_##SUF(t[i], LD(rr[i]));                \
            }                                                                                      \
            T *yr = yp + oy * OW;                                                                  \
            /* ox = 0 sees columns 0..1; the last may lack its right column */                     \
            yr[0] = ST(W > 1 ? nmax_##SUF(t[0], t[1]) : t[0]);                                     \
            int64_t last = (2 * (OW - 1) + 1 < W) ? OW - 1 : OW - 2;   /* last ox with 3 columns */ \
            /* even and odd columns apart, so the windows' loads are contiguous and vectorise */  \
            for (int64_t i = 0; i < OW; i++) te[i] = t[2 * i];                                     \
            for (int64_t i = 0; i < W / 2; i++) to[i] = t[2 * i + 1];                              \
            for (int64_t ox = 1; ox <= last; ox++)                                                 \
                yr[ox] = ST(nmax_##SUF(nmax_##SUF(to[ox - 1], te[ox]), to[ox]));                   \
            for (int64_t ox = last + 1 > 1 ? last + 1 : 1; ox < OW; ox++)                          \
                yr[ox] = ST(nmax_##SUF(t[2 * ox - 1], t[2 * ox]));                                 \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
static void max_fwd_##SUF(const dg_pool2d_geom *g, const T *x, T *y) {                             \
    int64_t planes = g->n * g->c, hw = g->h * g->w, ohw = g->oh * g->ow;                           \
    if (is_2x2(g)) { max2x2_fwd_##SUF(g, x, y); return; }                                          \
    if (is_3x3s2(g)) { max3x3s2_fwd_##SUF(g, x, y); return; }                                      \
    int64_t *win = pool_windows(g);   /* window bounds once, not per output and plane */        \
    _Pragma("omp parallel for if(planes * hw >= DG_PAR_MIN) schedule(static)")                     \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        const T *xp = x + p * hw; T *yp = y + p * ohw;                                             \
        for (int64_t oy = 0; oy < g->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                int64_t a = win ? argmax_in_##SUF(xp, g->w, win[2 * oy], win[2 * oy + 1],          \
                                                  win[2 * (g->oh + ox)], win[2 * (g->oh + ox) + 1]) \
                                : argmax_##SUF(xp, g, oy, ox);                                     \
                yp[oy * g->ow + ox] = ST(a < 0 ? (A)-INFINITY : LD(xp[a]));                        \
            }                                                                                      \
    }                                                                                              \
    free(win);                                                                                     \
}                                                                                                  \
static void max_bwd_##SUF(const dg_pool2d_geom *g, const T *x, const T *gy, T *gx) {               \
    int64_t planes = g->n * g->c, hw = g->h * g->w, ohw = g->oh * g->ow;                           \
    if (is_2x2(g)) { max2x2_bwd_##SUF(g, x, gy, gx); return; }                                     \
    int64_t *win = pool_windows(g);                                                                \
    _Pragma("omp parallel for if(planes * hw >= DG_PAR_MIN) schedule(static)")                     \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        const T *xp = x + p * hw, *gp = gy + p * ohw; T *gxp = gx + p * hw;                        \
        ACC_BEGIN(HALF, A, acc, gxp, hw);                                                          \
        for (int64_t oy = 0; oy < g->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                int64_t a = win ? argmax_in_##SUF(xp, g->w, win[2 * oy], win[2 * oy + 1],          \
                                                  win[2 * (g->oh + ox)], win[2 * (g->oh + ox) + 1]) \
                                : argmax_##SUF(xp, g, oy, ox);                                     \
                if (a >= 0) acc[a] += LD(gp[oy * g->ow + ox]);                                     \
            }                                                                                      \
        ACC_END(HALF, ST, acc, gxp, hw);                                                           \
    }                                                                                              \
    free(win);                                                                                     \
}                                                                                                  \
static void avg_fwd_##SUF(const dg_pool2d_geom *g, const T *x, T *y) {                             \
    int64_t planes = g->n * g->c, hw = g->h * g->w, ohw = g->oh * g->ow;                           \
    _Pragma("omp parallel for if(planes * hw >= DG_PAR_MIN) schedule(static)")                     \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        const T *xp = x + p * hw; T *yp = y + p * ohw;                                             \
        for (int64_t oy = 0; oy < g->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                int64_t ys, ye, xs, xe, d = avg_divisor(g, oy, ox);                                \
                window(oy, g->sh, g->ph, g->kh, g->h, &ys, &ye);                                   \
                window(ox, g->sw, g->pw, g->kw, g->w, &xs, &xe);                                   \
                double s = 0;                                                                      \
                for (int64_t iy = ys; iy < ye; iy++)                                               \
                    for (int64_t ix = xs; ix < xe; ix++) s += LD(xp[iy * g->w + ix]);              \
                yp[oy * g->ow + ox] = d > 0 ? ST((A)(s / (double)d)) : ST((A)0);                   \
            }                                                                                      \
    }                                                                                              \
}                                                                                                  \
static void avg_bwd_##SUF(const dg_pool2d_geom *g, const T *gy, T *gx) {                           \
    int64_t planes = g->n * g->c, hw = g->h * g->w, ohw = g->oh * g->ow;                           \
    _Pragma("omp parallel for if(planes * hw >= DG_PAR_MIN) schedule(static)")                     \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        const T *gp = gy + p * ohw; T *gxp = gx + p * hw;                                          \
        ACC_BEGIN(HALF, A, acc, gxp, hw);                                                          \
        for (int64_t oy = 0; oy < g->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                int64_t ys, ye, xs, xe, d = avg_divisor(g, oy, ox);                                \
                if (d <= 0) continue;                                                              \
                window(oy, g->sh, g->ph, g->kh, g->h, &ys, &ye);                                   \
                window(ox, g->sw, g->pw, g->kw, g->w, &xs, &xe);                                   \
                A v = (A)(LD(gp[oy * g->ow + ox]) / (double)d);                                    \
                for (int64_t iy = ys; iy < ye; iy++)                                               \
                    for (int64_t ix = xs; ix < xe; ix++) acc[iy * g->w + ix] += v;                 \
            }                                                                                      \
        ACC_END(HALF, ST, acc, gxp, hw);                                                           \
    }                                                                                              \
}                                                                                                  \
/* adaptive average: x planes [h, w] -> y planes [oh, ow] */                                      \
static void adapt_fwd_##SUF(const T *x, T *y, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow) { \
    _Pragma("omp parallel for if(planes * h * w >= DG_PAR_MIN) schedule(static)")                  \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        const T *xp = x + p * h * w; T *yp = y + p * oh * ow;                                      \
        for (int64_t oy = 0; oy < oh; oy++) {                                                      \
            int64_t ys = adapt_start(oy, h, oh), ye = adapt_end(oy, h, oh);                        \
            for (int64_t ox = 0; ox < ow; ox++) {                                                  \
                int64_t xs = adapt_start(ox, w, ow), xe = adapt_end(ox, w, ow);                    \
                double cnt = (double)((ye - ys) * (xe - xs)), s = 0;                               \
                for (int64_t iy = ys; iy < ye; iy++)                                               \
                    for (int64_t ix = xs; ix < xe; ix++) s += LD(xp[iy * w + ix]);                 \
                yp[oy * ow + ox] = ST((A)(s / cnt));                                               \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
/* its backward: gy planes [oh, ow] -> gx planes [h, w] */                                        \
static void adapt_bwd_##SUF(T *gx, const T *gy, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow) { \
    _Pragma("omp parallel for if(planes * h * w >= DG_PAR_MIN) schedule(static)")                  \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        T *gxp = gx + p * h * w; const T *gp = gy + p * oh * ow;                                   \
        ACC_BEGIN(HALF, A, acc, gxp, h * w);                                                       \
        for (int64_t oy = 0; oy < oh; oy++) {                                                      \
            int64_t ys = adapt_start(oy, h, oh), ye = adapt_end(oy, h, oh);                        \
            for (int64_t ox = 0; ox < ow; ox++) {                                                  \
                int64_t xs = adapt_start(ox, w, ow), xe = adapt_end(ox, w, ow);                    \
                double cnt = (double)((ye - ys) * (xe - xs));                                      \
                A v = (A)(LD(gp[oy * ow + ox]) / cnt);                                             \
                for (int64_t iy = ys; iy < ye; iy++)                                               \
                    for (int64_t ix = xs; ix < xe; ix++) acc[iy * w + ix] += v;                    \
            }                                                                                      \
        }                                                                                          \
        ACC_END(HALF, ST, acc, gxp, h * w);                                                        \
    }                                                                                              \
}
POOL_KERNELS(float, float, f32, LD_same, ST_same, 0)
POOL_KERNELS(double, double, f64, LD_same, ST_same, 0)
POOL_KERNELS(uint16_t, float, bf16, LD_bf16, ST_bf16, 1)
POOL_KERNELS(uint16_t, float, f16, LD_f16, ST_f16, 1)

/* 3x3/stride-2/padding-1 backward (ResNet's stem pool; the generic loop was 4% of a FaceNet
 * step). A window's gradient goes to its first input, row-major, equal to the forward's output
 * y: the generic rule's winner, found by comparing with y instead of re-running the max. The
 * three input rows of an output row are split into even columns and odd ones, with NaN standing
 * for rows and columns outside the plane (NaN equals nothing), so every window is the same nine
 * comparisons and the search vectorises across the output row. A window whose output is NaN
 * matches nothing there and takes the generic rule (the first NaN wins). Gradients where
 * windows overlap are summed in another order than the generic loop's (a half plane in f32, see
 * ACC_BEGIN). Planes up to 1024 wide (the row buffers live on the stack). */
#define MAX3X3S2_BWD_MAX_W 1024
#define MAX3X3S2_BWD(T, A, SUF, LD, ST, HALF)                                                       \
static void max3x3s2_bwd_##SUF(const dg_pool2d_geom *g, const T *x, const T *y, const T *gy, T *gx) { \
    int64_t planes = g->n * g->c, H = g->h, W = g->w, OH = g->oh, OW = g->ow;                      \
    _Pragma("omp parallel for if(planes * H * W >= DG_PAR_MIN) schedule(static)")                  \
    for (int64_t p = 0; p < planes; p++) {                                                         \
        /* row k of the window: ev[k][ox] = column 2ox, od[k][ox] = column 2ox-1 (od[k][ox+1] is   \
         * 2ox+1); g*[k][ox]: the gradient window ox gives its left / middle / right column */    \
        A ev[3][OW], od[3][OW + 1], gl[3][OW + 1], gm[3][OW], gr[3][OW];                           \
        const T *xp = x + p * H * W, *yp = y + p * OH * OW, *gp = gy + p * OH * OW;               \
        T *gxp = gx + p * H * W;                                                                   \
        ACC_BEGIN(HALF, A, acc, gxp, H * W);                                                       \
        for (int64_t oy = 0; oy < OH; oy++) {                                                      \
            const T *m = yp + oy * OW, *v = gp + oy * OW;                                          \
            for (int k = 0; k < 3; k++) {                                                          \
                int64_t r = 2 * oy - 1 + k;                                                        \
                od[k][0] = NAN;                                                                    \
                if (r < 0 || r >= H) {                                                             \
                    for (int64_t i = 0; i < OW; i++) { ev[k][i] = NAN; od[k][i + 1] = NAN; }       \
                    continue;                                                                      \
                }                                                                                  \
                const T *xr = xp + r * W;                                                          \
                for (int64_t i = 0; i < OW; i++) ev[k][i] = LD(xr[2 * i]);                         \
                for (int64_t i = 0; i < W / 2; i++) od[k][i + 1] = LD(xr[2 * i + 1]);              \
                if (W % 2) od[k][OW] = NAN;                /* the last window has no right column */ \
            }                                                                                      \
            for (int64_t ox = 0; ox < OW; ox++) {                                                  \
                A mm = LD(m[ox]), vv = LD(v[ox]);                                                  \
                int e0 = od[0][ox] == mm;                                                          \
                int e1 = !e0 & (ev[0][ox] == mm), s = e0 | e1;                                     \
                int e2 = !s & (od[0][ox + 1] == mm); s |= e2;                                      \
                int e3 = !s & (od[1][ox] == mm); s |= e3;                                          \
                int e4 = !s & (ev[1][ox] == mm); s |= e4;                                          \
                int e5 = !s & (od[1][ox + 1] == mm); s |= e5;                                      \
                int e6 = !s & (od[2][ox] == mm); s |= e6;                                          \
                int e7 = !s & (ev[2][ox] == mm); s |= e7;                                          \
                int e8 = !s & (od[2][ox + 1] == mm);                                               \
                gl[0][ox] = e0 ? vv : (A)0; gm[0][ox] = e1 ? vv : (A)0; gr[0][ox] = e2 ? vv : (A)0; \
                gl[1][ox] = e3 ? vv : (A)0; gm[1][ox] = e4 ? vv : (A)0; gr[1][ox] = e5 ? vv : (A)0; \
                gl[2][ox] = e6 ? vv : (A)0; gm[2][ox] = e7 ? vv : (A)0; gr[2][ox] = e8 ? vv : (A)0; \
            }                                                                                      \
            for (int k = 0; k < 3; k++) {                                                          \
                int64_t r = 2 * oy - 1 + k;                                                        \
                if (r < 0 || r >= H) continue;                                                     \
                A *row = acc + r * W;                                                              \
                gl[k][OW] = 0;                                                                     \
                for (int64_t i = 0; i < OW; i++) row[2 * i] += gm[k][i];                           \
                /* odd column 2i+1: the right column of window i, the left one of window i+1 */    \
                for (int64_t i = 0; i < W / 2; i++) row[2 * i + 1] += gr[k][i] + gl[k][i + 1];     \
            }                                                                                      \
            int64_t ys = 2 * oy - 1 < 0 ? 0 : 2 * oy - 1, ye = 2 * oy + 2 < H ? 2 * oy + 2 : H;     \
            for (int64_t ox = 0; ox < OW; ox++)                                                    \
                if (LD(m[ox]) != LD(m[ox])) {                                                      \
                    int64_t xs = 2 * ox - 1 < 0 ? 0 : 2 * ox - 1, xe = 2 * ox + 2 < W ? 2 * ox + 2 : W; \
                    int64_t a = argmax_in_##SUF(xp, W, ys, ye, xs, xe);                            \
                    if (a >= 0) acc[a] += LD(v[ox]);                                               \
                }                                                                                  \
        }                                                                                          \
        ACC_END(HALF, ST, acc, gxp, H * W);                                                        \
    }                                                                                              \
}
MAX3X3S2_BWD(float, float, f32, LD_same, ST_same, 0)
MAX3X3S2_BWD(double, double, f64, LD_same, ST_same, 0)
MAX3X3S2_BWD(uint16_t, float, bf16, LD_bf16, ST_bf16, 1)
MAX3X3S2_BWD(uint16_t, float, f16, LD_f16, ST_f16, 1)

static int bad_dtype(const char *op, dg_dtype dt) {
    DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cpu", op, dg_dtype_name(dt));
    return DG_EUNSUPPORTED;
}
/* A half backward whose gradient plane is too large for the f32 stack accumulator: the caller
 * (cpu/half.c) asks dg_cpu_pool_half_plane_fits first, so this is a misuse, not a state. */
static int plane_too_large(const char *op, int64_t hw) {
    DG_ERR(DG_EUNSUPPORTED, "%s: a %lld-element half gradient plane is over the native kernel's %d "
           "(the widened path takes it)", op, (long long)hw, DG_CPU_POOL_HALF_PLANE_MAX);
    return DG_EUNSUPPORTED;
}
bool dg_cpu_pool_half_plane_fits(int64_t hw) { return hw <= DG_CPU_POOL_HALF_PLANE_MAX; }
bool dg_cpu_max_pool2d_half_bwd_fits(const dg_pool2d_geom *g) {
    return is_2x2(g) || dg_cpu_pool_half_plane_fits(g->h * g->w);   /* 2x2 windows sum nothing */
}
#define DISPATCH(op, dt, call_f32, call_f64, call_bf16, call_f16) do {     \
        if ((dt) == DG_F32) { call_f32; } else if ((dt) == DG_F64) { call_f64; } \
        else if ((dt) == DG_BF16) { call_bf16; } else if ((dt) == DG_F16) { call_f16; } \
        else return bad_dtype(op, dt);                                     \
        return 0;                                                          \
    } while (0)

int dg_cpu_max_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    DISPATCH("max_pool2d", x->dtype, max_fwd_f32(g, x->data, y->data),
             max_fwd_f64(g, x->data, y->data), max_fwd_bf16(g, x->data, y->data),
             max_fwd_f16(g, x->data, y->data));
}
int dg_cpu_max_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, const dg_kview *y, const dg_kview *gy, dg_kview *gx) {
    if (dg_dtype_is_half(x->dtype) && !dg_cpu_max_pool2d_half_bwd_fits(g))
        return plane_too_large("max_pool2d backward", g->h * g->w);
    if (is_3x3s2(g) && g->w <= MAX3X3S2_BWD_MAX_W)
        DISPATCH("max_pool2d", x->dtype, max3x3s2_bwd_f32(g, x->data, y->data, gy->data, gx->data),
                 max3x3s2_bwd_f64(g, x->data, y->data, gy->data, gx->data),
                 max3x3s2_bwd_bf16(g, x->data, y->data, gy->data, gx->data),
                 max3x3s2_bwd_f16(g, x->data, y->data, gy->data, gx->data));
    /* elsewhere the argmax is recomputed from x */
    DISPATCH("max_pool2d", x->dtype, max_bwd_f32(g, x->data, gy->data, gx->data),
             max_bwd_f64(g, x->data, gy->data, gx->data), max_bwd_bf16(g, x->data, gy->data, gx->data),
             max_bwd_f16(g, x->data, gy->data, gx->data));
}
int dg_cpu_avg_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    DISPATCH("avg_pool2d", x->dtype, avg_fwd_f32(g, x->data, y->data),
             avg_fwd_f64(g, x->data, y->data), avg_fwd_bf16(g, x->data, y->data),
             avg_fwd_f16(g, x->data, y->data));
}
int dg_cpu_avg_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *gy, dg_kview *gx) {
    if (dg_dtype_is_half(gy->dtype) && !dg_cpu_pool_half_plane_fits(g->h * g->w))
        return plane_too_large("avg_pool2d backward", g->h * g->w);
    DISPATCH("avg_pool2d", gy->dtype, avg_bwd_f32(g, gy->data, gx->data),
             avg_bwd_f64(g, gy->data, gx->data), avg_bwd_bf16(g, gy->data, gx->data),
             avg_bwd_f16(g, gy->data, gx->data));
}

/* x [N, C, H, W], y [N, C, OH, OW] */
int dg_cpu_adaptive_avg_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y) {
    int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3], oh = y->shape[2], ow = y->shape[3];
    DISPATCH("adaptive_avg_pool2d", x->dtype,
             adapt_fwd_f32(x->data, y->data, planes, h, w, oh, ow),
             adapt_fwd_f64(x->data, y->data, planes, h, w, oh, ow),
             adapt_fwd_bf16(x->data, y->data, planes, h, w, oh, ow),
             adapt_fwd_f16(x->data, y->data, planes, h, w, oh, ow));
}
int dg_cpu_adaptive_avg_pool2d_backward(const dg_backend *be, const dg_kview *gy, dg_kview *gx) {
    int64_t planes = gx->shape[0] * gx->shape[1], h = gx->shape[2], w = gx->shape[3], oh = gy->shape[2], ow = gy->shape[3];
    if (dg_dtype_is_half(gy->dtype) && !dg_cpu_pool_half_plane_fits(h * w))
        return plane_too_large("adaptive_avg_pool2d backward", h * w);
    DISPATCH("adaptive_avg_pool2d", gy->dtype,
             adapt_bwd_f32(gx->data, gy->data, planes, h, w, oh, ow),
             adapt_bwd_f64(gx->data, gy->data, planes, h, w, oh, ow),
             adapt_bwd_bf16(gx->data, gy->data, planes, h, w, oh, ow),
             adapt_bwd_f16(gx->data, gy->data, planes, h, w, oh, ow));
}
