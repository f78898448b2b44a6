/* eager/cuda/pool.cu — the pooling and batch-norm kernels of the CUDA backend that do not go
 * through cuDNN (the GPU twins of eager/cpu/pool.c and eager/cpu/batchnorm.c), plus the small
 * raw-buffer helpers the cuDNN files need (fill, bias broadcast, per-channel sum).
 *
 * Max pooling is always ours: the CPU gives each window's gradient to the first maximum in
 * row-major window order (NaN wins, padding is never a candidate, a window with no input
 * element yields -inf), and after a ReLU whole windows are zeros, so which element a tie goes
 * to decides where gradients land. cuDNN does not promise any tie rule, so its backward could
 * route gradients to other elements than the CPU and than our own forward's argmax.
 * Average pooling is ours where cuDNN's windows differ from the CPU's (ceil_mode overhang,
 * sizes past int) and for the whole backward (cudnnPoolingBackward wants x and y, which the
 * avg_pool2d_backward entry does not get). Adaptive average pooling uses PyTorch's windows
 * start = floor(i*H/oh), end = ceil((i+1)*H/oh), which cuDNN has no mode for.
 *
 * Forward kernels take one output element per thread and reproduce the CPU loop (sums in
 * double, same window order), so they match the CPU bit for bit. Backward kernels are
 * gather-style: one thread per input element walks the outputs whose window covers it in the
 * CPU's row-major output order and adds in T, so they need no atomics. Where windows overlap
 * (3x3 stride 2) the CPU's vectorised path adds an element's contributions in another order, so
 * those gradients agree within an ulp or two, not bit for bit.
 *
 * Batch norm here is the fallback for what cuDNN cannot do plus the eval-mode backward (which
 * cuDNN has no call for): one block per channel reduces in double, then an elementwise pass
 * applies the per-channel coefficients with the CPU's unfused arithmetic. */
#include "kernel_util.cuh"

/* ---- pooling geometry (eager/cpu/pool.c) ---- */

/* Row and column of flat index i in a [planes, rows, cols] tensor; returns the plane. */
__device__ __forceinline__ int64_t plane_pos(int64_t i, int64_t rows, int64_t cols, int64_t &row, int64_t &col) {
    int64_t r = i;
    col = dgk_divmod(r, cols);
    row = dgk_divmod(r, rows);
    return r;
}

/* Clipped window [s, e) of output index o along one axis of size n. */
__device__ __forceinline__ void pw_window(int64_t o, int stride, int pad, int k, int64_t n, int64_t &s, int64_t &e) {
    int64_t a = o * stride - pad, b = a + k;
    s = a < 0 ? 0 : a;
    e = b > n ? n : b;
}

/* Divisor of average window (oy, ox): the window clipped to the padded input when
 * count_include_pad, else the number of real input elements it covers. */
__device__ __forceinline__ int64_t pw_avg_divisor(const dg_pool2d_geom &g, int64_t oy, int64_t ox) {
    if (g.divisor > 0) return g.divisor;   /* torch's divisor_override */
    int64_t ys, ye, xs, xe;
    pw_window(oy, g.sh, g.ph, g.kh, g.h, ys, ye);
    pw_window(ox, g.sw, g.pw, g.kw, g.w, xs, xe);
    if (!g.count_include_pad) return (ye - ys) * (xe - xs);
    int64_t a = oy * g.sh - g.ph, b = a + g.kh, c = ox * g.sw - g.pw, d = c + g.kw;
    if (b > g.h + g.ph) b = g.h + g.ph;
    if (d > g.w + g.pw) d = g.w + g.pw;
    return (b - a) * (d - c);
}

/* Outputs [lo, hi] along one axis whose window holds input index i (none when lo > hi):
 * o*stride - pad <= i < o*stride - pad + k. Clipping only drops indices outside the input, so
 * for an index inside it the unclipped test is the right one. */
__device__ __forceinline__ void pw_covering(int64_t i, int stride, int pad, int k, int64_t on, int64_t &lo, int64_t &hi) {
    int64_t t = i + pad;          /* >= 0 */
    lo = t - k < 0 ? 0 : (t - k) / stride + 1;
    hi = t / stride;
    if (hi > on - 1) hi = on - 1;
}

/* Index within the plane of the first maximum of window (oy, ox), -1 for an empty window:
 * the CPU's scan and comparison, so ties and NaNs resolve to the same element. */
template <typename T>
__device__ __forceinline__ int64_t pw_argmax(const T *xp, const dg_pool2d_geom &g, int64_t oy, int64_t ox) {
    int64_t ys, ye, xs, xe, best = -1;
    pw_window(oy, g.sh, g.ph, g.kh, g.h, ys, ye);
    pw_window(ox, g.sw, g.pw, g.kw, g.w, xs, xe);
    T m = 0;
    for (int64_t iy = ys; iy < ye; iy++)
        for (int64_t ix = xs; ix < xe; ix++) {
            T v = xp[iy * g.w + ix];
            if (best < 0 || v > m || (isnan(v) && !isnan(m))) { m = v; best = iy * g.w + ix; }
        }
    return best;
}

/* Adaptive windows (eager/cpu/pool.c's adapt_start / adapt_end). */
__device__ __forceinline__ int64_t ad_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
__device__ __forceinline__ int64_t ad_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

/* ---- max pooling ---- */

template <typename T>
__global__ void max_fwd_kernel(const T *x, T *y, const dg_pool2d_geom g, int64_t total) {
    DGK_FOR(i, total) {
        int64_t oy, ox, plane = plane_pos(i, g.oh, g.ow, oy, ox);
        const T *xp = x + plane * g.h * g.w;
        int64_t a = pw_argmax(xp, g, oy, ox);
        y[i] = a < 0 ? (T)-INFINITY : xp[a];
    }
}

/* The argmax of every window, found again from x (as the CPU backward does) so that the
 * gather pass below compares indices instead of rescanning each window per input. */
template <typename T, typename I>
__global__ void max_idx_kernel(const T *x, I *idx, const dg_pool2d_geom g, int64_t total) {
    DGK_FOR(i, total) {
        int64_t oy, ox, plane = plane_pos(i, g.oh, g.ow, oy, ox);
        idx[i] = (I)pw_argmax(x + plane * g.h * g.w, g, oy, ox);
    }
}

template <typename T, typename I>
__global__ void max_bwd_kernel(const I *idx, const T *gy, T *gx, const dg_pool2d_geom g, int64_t total) {
    DGK_FOR(i, total) {
        int64_t iy, ix, plane = plane_pos(i, g.h, g.w, iy, ix);
        int64_t y0, y1, x0, x1;
        pw_covering(iy, g.sh, g.ph, g.kh, g.oh, y0, y1);
        pw_covering(ix, g.sw, g.pw, g.kw, g.ow, x0, x1);
        const I me = (I)(iy * g.w + ix);
        const int64_t base = plane * g.oh * g.ow;
        T acc = 0;
        for (int64_t oy = y0; oy <= y1; oy++)
            for (int64_t ox = x0; ox <= x1; ox++) {
                int64_t o = base + oy * g.ow + ox;
                if (idx[o] == me) acc += gy[o];
            }
        gx[i] = acc;
    }
}

/* ---- average pooling ---- */

template <typename T>
__global__ void avg_fwd_kernel(const T *x, T *y, const dg_pool2d_geom g, int64_t total) {
    DGK_FOR(i, total) {
        int64_t oy, ox, plane = plane_pos(i, g.oh, g.ow, oy, ox);
        const T *xp = x + plane * g.h * g.w;
        int64_t ys, ye, xs, xe, d = pw_avg_divisor(g, oy, ox);
        pw_window(oy, g.sh, g.ph, g.kh, g.h, ys, ye);
        pw_window(ox, g.sw, g.pw, g.kw, g.w, xs, xe);
        double s = 0;
        for (int64_t iy = ys; iy < ye; iy++)
            for (int64_t ix = xs; ix < xe; ix++) s += (double)xp[iy * g.w + ix];
        y[i] = d > 0 ? (T)(s / (double)d) : (T)0;
    }
}

template <typename T>
__global__ void avg_bwd_kernel(const T *gy, T *gx, const dg_pool2d_geom g, int64_t total) {
    DGK_FOR(i, total) {
        int64_t iy, ix, plane = plane_pos(i, g.h, g.w, iy, ix);
        int64_t y0, y1, x0, x1;
        pw_covering(iy, g.sh, g.ph, g.kh, g.oh, y0, y1);
        pw_covering(ix, g.sw, g.pw, g.kw, g.ow, x0, x1);
        const T *gp = gy + plane * g.oh * g.ow;
        T acc = 0;
        for (int64_t oy = y0; oy <= y1; oy++)
            for (int64_t ox = x0; ox <= x1; ox++) {
                int64_t d = pw_avg_divisor(g, oy, ox);
                if (d <= 0) continue;
                acc += (T)((double)gp[oy * g.ow + ox] / (double)d);
            }
        gx[i] = acc;
    }
}

/* ---- adaptive average pooling ---- */

template <typename T>
__global__ void adapt_fwd_kernel(const T *x, T *y, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t total) {
    DGK_FOR(i, total) {
        int64_t oy, ox, plane = plane_pos(i, oh, ow, oy, ox);
        const T *xp = x + plane * h * w;
        int64_t ys = ad_start(oy, h, oh), ye = ad_end(oy, h, oh);
        int64_t xs = ad_start(ox, w, ow), xe = ad_end(ox, w, ow);
        double s = 0;
        for (int64_t iy = ys; iy < ye; iy++)
            for (int64_t ix = xs; ix < xe; ix++) s += (double)xp[iy * w + ix];
        y[i] = (T)(s / (double)((ye - ys) * (xe - xs)));
    }
}

/* Output o's window holds input i exactly for o in [floor(i*out/in), ceil((i+1)*out/in)); the
 * window test is repeated inside the loop so a rounding slip in that range cannot add a wrong
 * term (it could only miss one, and the range is exact). */
template <typename T>
__global__ void adapt_bwd_kernel(const T *gy, T *gx, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t total) {
    DGK_FOR(i, total) {
        int64_t iy, ix, plane = plane_pos(i, h, w, iy, ix);
        int64_t y0 = iy * oh / h, y1 = ((iy + 1) * oh + h - 1) / h;
        int64_t x0 = ix * ow / w, x1 = ((ix + 1) * ow + w - 1) / w;
        if (y1 > oh) y1 = oh;
        if (x1 > ow) x1 = ow;
        const T *gp = gy + plane * oh * ow;
        T acc = 0;
        for (int64_t oy = y0; oy < y1; oy++) {
            int64_t ys = ad_start(oy, h, oh), ye = ad_end(oy, h, oh);
            if (iy < ys || iy >= ye) continue;
            for (int64_t ox = x0; ox < x1; ox++) {
                int64_t xs = ad_start(ox, w, ow), xe = ad_end(ox, w, ow);
                if (ix < xs || ix >= xe) continue;
                acc += (T)((double)gp[oy * ow + ox] / (double)((ye - ys) * (xe - xs)));
            }
        }
        gx[i] = acc;
    }
}

/* ---- per-channel reductions (batch norm, bias gradient) ---- */

#define CH_THREADS 256            /* a multiple of 32 (block_sum2 works by warps) */

/* Blocks for a one-block-per-channel kernel (grid-stride over channels beyond that). */
static inline unsigned ch_blocks(int64_t c) { return (unsigned)(c < 65535 ? (c < 1 ? 1 : c) : 65535); }

/* Block-wide sums of two doubles; every thread gets the same totals (all combine the warp
 * partials in the same order). */
__device__ __forceinline__ double2 block_sum2(double a, double b) {
    __shared__ double2 sh[32];
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, s);
        b += __shfl_xor_sync(0xffffffffu, b, s);
    }
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = make_double2(a, b);
    __syncthreads();
    double2 r = sh[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) { r.x += sh[w].x; r.y += sh[w].y; }
    __syncthreads();              /* sh is reused by the next reduction */
    return r;
}

/* Offset of element j of channel ch in x viewed as [n, c, inner], j running over n*inner. */
__device__ __forceinline__ int64_t ch_off(int64_t j, int64_t ch, int64_t c, int64_t inner) {
    int64_t q = j;
    int64_t k = dgk_divmod(q, inner);
    return (q * c + ch) * inner + k;
}

/* Per channel: training computes the batch mean and inverse std (biased variance, two passes in
 * double, as the CPU) into mean/inv; eval reads the running mean and variance from them. Then
 * coef[2ch], coef[2ch+1] = the folded scale and shift in T, computed as the CPU does. */
template <typename T>
__global__ void bn_fwd_prep(const T *x, const T *w, const T *b, T *mean, T *inv, T *coef, bool training, double eps,
                            int64_t n, int64_t c, int64_t inner) {
    const int64_t m = n * inner;
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double mu, is;
        if (training) {
            double s = 0, ss = 0;
            for (int64_t j = threadIdx.x; j < m; j += blockDim.x) s += (double)x[ch_off(j, ch, c, inner)];
            s = block_sum2(s, 0).x;
            mu = m > 0 ? s / (double)m : 0;
            for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
                double d = dgk_sub((double)x[ch_off(j, ch, c, inner)], mu);
                ss = dgk_add(ss, dgk_mul(d, d));
            }
            ss = block_sum2(ss, 0).x;
            is = 1.0 / sqrt((m > 0 ? ss / (double)m : 0) + eps);
            if (threadIdx.x == 0) { mean[ch] = (T)mu; inv[ch] = (T)is; }
        } else {
            mu = (double)mean[ch];
            is = 1.0 / sqrt((double)inv[ch] + eps);
        }
        if (threadIdx.x == 0) {
            double scale = dgk_mul(w ? (double)w[ch] : 1.0, is);
            double shift = dgk_sub(b ? (double)b[ch] : 0.0, dgk_mul(mu, scale));
            coef[2 * ch] = (T)scale;
            coef[2 * ch + 1] = (T)shift;
        }
    }
}

template <typename T>
__global__ void bn_fwd_apply(const T *x, const T *coef, T *y, int64_t c, int64_t inner, int64_t total) {
    DGK_FOR(e, total) {
        int64_t r = e;
        dgk_divmod(r, inner);
        int64_t ch = dgk_divmod(r, c);
        y[e] = dgk_add(dgk_mul(x[e], coef[2 * ch]), coef[2 * ch + 1]);
    }
}

/* Per channel: sg = sum gy, sgx = sum gy * xhat (when sums), written to gw/gb when given, and
 * the gx coefficients k = w*invstd, a = mean(gy), bq = mean(gy*xhat) (a = bq = 0 in eval, where
 * the statistics are constants) into coef[3ch..3ch+2] when coef is given. */
template <typename T>
__global__ void bn_bwd_prep(const T *x, const T *gy, const T *w, const T *mean, const T *inv, T *gw, T *gb,
                            double *coef, bool training, bool sums, int64_t n, int64_t c, int64_t inner) {
    const int64_t m = n * inner;
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double mu = (double)mean[ch], is = (double)inv[ch], sg = 0, sgx = 0;
        if (sums) {
            for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
                int64_t o = ch_off(j, ch, c, inner);
                double g = (double)gy[o];
                sg += g;
                sgx = dgk_add(sgx, dgk_mul(g, dgk_mul(dgk_sub((double)x[o], mu), is)));
            }
            double2 t = block_sum2(sg, sgx);
            sg = t.x;
            sgx = t.y;
        }
        if (threadIdx.x == 0) {
            if (gw) gw[ch] = (T)sgx;
            if (gb) gb[ch] = (T)sg;
            if (coef) {
                coef[3 * ch] = dgk_mul(w ? (double)w[ch] : 1.0, is);
                coef[3 * ch + 1] = training && m > 0 ? sg / (double)m : 0;
                coef[3 * ch + 2] = training && m > 0 ? sgx / (double)m : 0;
            }
        }
    }
}

/* gx = k * (gy - a - (x - mean) * invstd * bq), unfused like the CPU's expression */
template <typename T>
__global__ void bn_bwd_apply(const T *x, const T *gy, const T *mean, const T *inv, const double *coef, T *gx,
                             int64_t c, int64_t inner, int64_t total) {
    DGK_FOR(e, total) {
        int64_t r = e;
        dgk_divmod(r, inner);
        int64_t ch = dgk_divmod(r, c);
        double mu = (double)mean[ch], is = (double)inv[ch];
        double k = coef[3 * ch], a = coef[3 * ch + 1], bq = coef[3 * ch + 2];
        double t = dgk_mul(dgk_mul(dgk_sub((double)x[e], mu), is), bq);
        gx[e] = (T)dgk_mul(k, dgk_sub(dgk_sub((double)gy[e], a), t));
    }
}

template <typename T>
__global__ void channel_sum_kernel(const T *x, T *out, int64_t n, int64_t c, int64_t inner) {
    const int64_t m = n * inner;
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double s = 0;
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) s += dgk_to_double(x[ch_off(j, ch, c, inner)]);
        s = block_sum2(s, 0).x;
        if (threadIdx.x == 0) out[ch] = dgk_from_double<T>(s);
    }
}

template <typename T>
__global__ void fill_kernel(T *p, int64_t n, T v) {
    DGK_FOR(i, n) p[i] = v;
}

template <typename T>
__global__ void bias_fill_kernel(T *y, const T *b, int64_t oc, int64_t l, int64_t total) {
    DGK_FOR(i, total) {
        int64_t r = i;
        dgk_divmod(r, l);
        y[i] = b[dgk_divmod(r, oc)];
    }
}

/* ---- host side ---- */

static void *tptr(const dg_kview *t) { return t ? t->data : NULL; }

/* (DG_SHAPE_STR's compound literal is C only) */
static int bad_dtype(const char *op, const dg_kview *t) {
    char sh[96];
    dg_shape_fmt(t->shape, t->ndim, sh, sizeof sh);
    DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cuda (input %s)", op, dg_dtype_name(t->dtype), sh);
    return DG_EUNSUPPORTED;
}
static bool float_dtype(dg_dtype dt) { return dt == DG_F32 || dt == DG_F64; }
static int launched(void) { return DG_CUDA(cudaGetLastError()); }

/* A gradient with no outputs behind it (an empty gy) is all zeros. */
static int zero_fill(dg_kview *t) {
    return DG_CUDA(cudaMemsetAsync(t->data, 0, (size_t)t->numel * dg_dtype_size(t->dtype), dg_cuda_stream()));
}

/* Launch KERNEL<T> on the compute stream with T float or double by DT (the callers have let
 * only those through); T names the element type in the arguments. */
#define LAUNCH_FLOAT(DT, GRID, BLOCK, KERNEL, ...)                                                    \
    do {                                                                                              \
        if ((DT) == DG_F32) { typedef float T; DGK_LAUNCH(GRID, BLOCK, 0, dg_cuda_stream(), KERNEL<T>)(__VA_ARGS__); } \
        else { typedef double T; DGK_LAUNCH(GRID, BLOCK, 0, dg_cuda_stream(), KERNEL<T>)(__VA_ARGS__); }             \
    } while (0)

template <typename T, typename I>
static int max_bwd_t(const dg_pool2d_geom &g, const dg_kview *x, const dg_kview *gy, dg_kview *gx) {
    cudaStream_t st = dg_cuda_stream();
    int64_t nout = g.n * g.c * g.oh * g.ow, nin = g.n * g.c * g.h * g.w;
    I *idx = (I *)dg_cuda_alloc((size_t)nout * sizeof(I));
    if (!idx) return DG_ENOMEM;
    DGK_LAUNCH(dgk_blocks(nout), DGK_THREADS, 0, st, max_idx_kernel<T, I>)((const T *)x->data, idx, g, nout);
    int rc = launched();
    if (!rc) {
        DGK_LAUNCH(dgk_blocks(nin), DGK_THREADS, 0, st, max_bwd_kernel<T, I>)(idx, (const T *)gy->data,
                                                                    (T *)gx->data, g, nin);
        rc = launched();
    }
    dg_cuda_free(idx);            /* stream-ordered reuse: later work on the stream runs after the kernels */
    return rc;
}

extern "C" int dg_cuda_max_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    DG_CUDA_ENTER(be);
    if (!float_dtype(x->dtype)) return bad_dtype("max_pool2d", x);
    if (y->numel == 0) return 0;
    int64_t total = g->n * g->c * g->oh * g->ow;
    LAUNCH_FLOAT(x->dtype, dgk_blocks(total), DGK_THREADS, max_fwd_kernel, (const T *)x->data, (T *)y->data, *g, total);
    return launched();
}

extern "C" int dg_cuda_max_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, const dg_kview *y,
                                           const dg_kview *gy, dg_kview *gx) {
    DG_CUDA_ENTER(be);
    (void)y;  /* the argmax is found again from x, which settles ties the way the forward did */
    if (!float_dtype(x->dtype)) return bad_dtype("max_pool2d backward", x);
    if (gx->numel == 0) return 0;
    if (gy->numel == 0) return zero_fill(gx);
    bool small = g->h * g->w <= INT32_MAX;   /* plane indices fit 32 bits: half the index traffic */
    if (x->dtype == DG_F32) return small ? max_bwd_t<float, int32_t>(*g, x, gy, gx) : max_bwd_t<float, int64_t>(*g, x, gy, gx);
    return small ? max_bwd_t<double, int32_t>(*g, x, gy, gx) : max_bwd_t<double, int64_t>(*g, x, gy, gx);
}

extern "C" int dg_cuda_avg_pool2d_kernel(const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    if (!float_dtype(x->dtype)) return bad_dtype("avg_pool2d", x);
    if (y->numel == 0) return 0;
    int64_t total = g->n * g->c * g->oh * g->ow;
    LAUNCH_FLOAT(x->dtype, dgk_blocks(total), DGK_THREADS, avg_fwd_kernel, (const T *)x->data, (T *)y->data, *g, total);
    return launched();
}

extern "C" int dg_cuda_avg_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *gy, dg_kview *gx) {
    DG_CUDA_ENTER(be);
    if (!float_dtype(gy->dtype)) return bad_dtype("avg_pool2d backward", gy);
    if (gx->numel == 0) return 0;
    if (gy->numel == 0) return zero_fill(gx);
    int64_t total = g->n * g->c * g->h * g->w;
    LAUNCH_FLOAT(gy->dtype, dgk_blocks(total), DGK_THREADS, avg_bwd_kernel, (const T *)gy->data, (T *)gx->data, *g, total);
    return launched();
}

/* x [N, C, H, W], y [N, C, OH, OW] */
extern "C" int dg_cuda_adaptive_avg_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y) {
    DG_CUDA_ENTER(be);
    if (!float_dtype(x->dtype)) return bad_dtype("adaptive_avg_pool2d", x);
    if (y->numel == 0) return 0;
    int64_t h = x->shape[2], w = x->shape[3], oh = y->shape[2], ow = y->shape[3], total = y->numel;
    if (h <= 0 || w <= 0) {
        char sh[96];
        dg_shape_fmt(x->shape, x->ndim, sh, sizeof sh);
        DG_ERR(DG_EINVAL, "adaptive_avg_pool2d: input %s has an empty spatial dim", sh);
        return DG_EINVAL;
    }
    LAUNCH_FLOAT(x->dtype, dgk_blocks(total), DGK_THREADS, adapt_fwd_kernel, (const T *)x->data, (T *)y->data,
                 h, w, oh, ow, total);
    return launched();
}

extern "C" int dg_cuda_adaptive_avg_pool2d_backward(const dg_backend *be, const dg_kview *gy, dg_kview *gx) {
    DG_CUDA_ENTER(be);
    if (!float_dtype(gy->dtype)) return bad_dtype("adaptive_avg_pool2d backward", gy);
    if (gx->numel == 0) return 0;
    int64_t h = gx->shape[2], w = gx->shape[3], oh = gy->shape[2], ow = gy->shape[3], total = gx->numel;
    if (oh <= 0 || ow <= 0) return zero_fill(gx);
    LAUNCH_FLOAT(gy->dtype, dgk_blocks(total), DGK_THREADS, adapt_bwd_kernel, (const T *)gy->data, (T *)gx->data,
                 h, w, oh, ow, total);
    return launched();
}

/* ---- batch norm fallback ---- */

template <typename T>
static int bn_fwd_t(const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y, dg_kview *mean,
                    dg_kview *inv, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    cudaStream_t st = dg_cuda_stream();
    T *coef = (T *)dg_cuda_alloc((size_t)(2 * c) * sizeof(T));
    if (!coef) return DG_ENOMEM;
    DGK_LAUNCH(ch_blocks(c), CH_THREADS, 0, st, bn_fwd_prep<T>)((const T *)x->data, (const T *)tptr(w), (const T *)tptr(b),
                                                        (T *)mean->data, (T *)inv->data, coef, training,
                                                        eps, n, c, inner);
    int rc = launched();
    int64_t total = n * c * inner;
    if (!rc && total > 0) {
        DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, st, bn_fwd_apply<T>)((const T *)x->data, coef,
                                                                   (T *)y->data, c, inner, total);
        rc = launched();
    }
    dg_cuda_free(coef);
    return rc;
}

extern "C" int dg_cuda_batch_norm_kernel(const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y,
                                         dg_kview *save_mean, dg_kview *save_invstd, bool training, double eps,
                                         int64_t n, int64_t c, int64_t inner) {
    if (!float_dtype(x->dtype)) return bad_dtype("batch_norm", x);
    if (c <= 0) return 0;
    return x->dtype == DG_F32 ? bn_fwd_t<float>(x, w, b, y, save_mean, save_invstd, training, eps, n, c, inner)
                              : bn_fwd_t<double>(x, w, b, y, save_mean, save_invstd, training, eps, n, c, inner);
}

template <typename T>
static int bn_bwd_t(const dg_kview *x, const dg_kview *gy, const dg_kview *w, const dg_kview *mean,
                    const dg_kview *inv, bool training, dg_kview *gx, dg_kview *gw, dg_kview *gb,
                    int64_t n, int64_t c, int64_t inner) {
    cudaStream_t st = dg_cuda_stream();
    int64_t total = n * c * inner;
    bool want_gx = gx && total > 0;
    bool sums = gw || gb || (training && want_gx);   /* eval gx needs no sums: its a and bq are 0 */
    double *coef = NULL;
    if (want_gx && !(coef = (double *)dg_cuda_alloc((size_t)(3 * c) * sizeof(double)))) return DG_ENOMEM;
    DGK_LAUNCH(ch_blocks(c), CH_THREADS, 0, st, bn_bwd_prep<T>)((const T *)x->data, (const T *)gy->data,
                                                        (const T *)tptr(w), (const T *)mean->data,
                                                        (const T *)inv->data, (T *)tptr(gw), (T *)tptr(gb),
                                                        coef, training, sums, n, c, inner);
    int rc = launched();
    if (!rc && want_gx) {
        DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, st, bn_bwd_apply<T>)((const T *)x->data, (const T *)gy->data,
                                                                   (const T *)mean->data, (const T *)inv->data,
                                                                   coef, (T *)gx->data, c, inner, total);
        rc = launched();
    }
    dg_cuda_free(coef);
    return rc;
}

extern "C" int dg_cuda_batch_norm_backward_kernel(const dg_kview *x, const dg_kview *gy, const dg_kview *w,
                                                  const dg_kview *save_mean, const dg_kview *save_invstd, bool training,
                                                  dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner) {
    if (!float_dtype(x->dtype)) return bad_dtype("batch_norm backward", x);
    if (c <= 0 || (!gx && !gw && !gb)) return 0;
    return x->dtype == DG_F32 ? bn_bwd_t<float>(x, gy, w, save_mean, save_invstd, training, gx, gw, gb, n, c, inner)
                              : bn_bwd_t<double>(x, gy, w, save_mean, save_invstd, training, gx, gw, gb, n, c, inner);
}

/* ---- raw-buffer helpers for the cuDNN files ---- */

static int bad_raw(const char *what, dg_dtype dt) {
    DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cuda", what, dg_dtype_name(dt));
    return DG_EUNSUPPORTED;
}

extern "C" int dg_cuda_fill_raw(void *p, dg_dtype dt, int64_t n, double v) {
    if (!float_dtype(dt)) return bad_raw("cuda fill", dt);
    if (n <= 0) return 0;
    LAUNCH_FLOAT(dt, dgk_blocks(n), DGK_THREADS, fill_kernel, (T *)p, n, (T)v);
    return launched();
}

extern "C" int dg_cuda_bias_fill_raw(void *y, const void *b, dg_dtype dt, int64_t n, int64_t oc, int64_t l) {
    if (!float_dtype(dt)) return bad_raw("conv2d bias", dt);
    int64_t total = n * oc * l;
    if (total <= 0) return 0;
    if (!b) return DG_CUDA(cudaMemsetAsync(y, 0, (size_t)total * dg_dtype_size(dt), dg_cuda_stream()));
    LAUNCH_FLOAT(dt, dgk_blocks(total), DGK_THREADS, bias_fill_kernel, (T *)y, (const T *)b, oc, l, total);
    return launched();
}

extern "C" int dg_cuda_channel_sum_raw(const void *x, void *out, dg_dtype dt, int64_t n, int64_t c, int64_t inner) {
    if (c <= 0) return 0;
    /* the 2-byte floats sum in double like the others and round once on the store */
    if (dt == DG_F16 || dt == DG_BF16) {
        if (dt == DG_F16)
            DGK_LAUNCH(ch_blocks(c), CH_THREADS, 0, dg_cuda_stream(), channel_sum_kernel<dgk_f16>)((const dgk_f16 *)x, (dgk_f16 *)out, n, c, inner);
        else
            DGK_LAUNCH(ch_blocks(c), CH_THREADS, 0, dg_cuda_stream(), channel_sum_kernel<dgk_bf16>)((const dgk_bf16 *)x, (dgk_bf16 *)out, n, c, inner);
        return launched();
    }
    if (!float_dtype(dt)) return bad_raw("channel sum", dt);
    LAUNCH_FLOAT(dt, ch_blocks(c), CH_THREADS, channel_sum_kernel, (const T *)x, (T *)out, n, c, inner);
    return launched();
}
