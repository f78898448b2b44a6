/* eager/cuda/pool_indices.cu — max pooling that reports torch's indices on the CUDA backend
 * (the GPU twin of eager/cpu/pool_indices.c): dilated max pooling (cuDNN's pooling has no
 * dilation), adaptive max pooling, and their shared backward.
 *
 * Forward kernels take one output per thread and scan its window in the CPU's order with the
 * CPU's comparison (first maximum, NaN wins), so values and indices match the CPU exactly.
 * The backward is gather-style, as pool.cu's: one thread per input element walks, in row-major
 * order, the outputs whose window could hold it and adds the gradients of those whose index is
 * that element; the CPU adds in the same order, so the two agree bit for bit, with no atomics.
 * The candidate range only has to contain every output that can point at the element: the index
 * comparison decides, so the dilated window's full extent stands in for its sparse taps. */
#include "kernel_util.cuh"

__device__ __forceinline__ int64_t pi_ad_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
__device__ __forceinline__ int64_t pi_ad_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

/* The CPU's scan: rows ys + j*dy (j < ny), columns xs + k*dx (k < nx), inside the plane only. */
template <typename T>
__device__ __forceinline__ int64_t pi_argmax(const T *xp, int64_t h, int64_t w, int64_t ys, int ny, int dy, int64_t xs,
                                             int nx, int dx, T &m) {
    int64_t best = -1;
    m = (T)-INFINITY;
    for (int j = 0; j < ny; j++) {
        int64_t iy = ys + (int64_t)j * dy;
        if (iy < 0 || iy >= h) continue;
        for (int k = 0; k < nx; k++) {
            int64_t ix = xs + (int64_t)k * dx;
            if (ix < 0 || ix >= w) continue;
            T v = xp[iy * w + ix];
            if (best < 0 || v > m || (isnan(v) && !isnan(m))) { m = v; best = iy * w + ix; }
        }
    }
    return best;
}

template <typename T>
__global__ void max_idx_fwd_kernel(const T *x, T *y, int64_t *idx, const dg_pool2d_geom g, int64_t total) {
    DGK_FOR(i, total) {
        int64_t r = i, ox = dgk_divmod(r, g.ow), oy = dgk_divmod(r, g.oh), plane = r;
        T m;
        idx[i] = pi_argmax(x + plane * g.h * g.w, g.h, g.w, oy * g.sh - g.ph, g.kh, g.dh, ox * g.sw - g.pw, g.kw, g.dw, m);
        y[i] = m;
    }
}

template <typename T>
__global__ void adapt_max_fwd_kernel(const T *x, T *y, int64_t *idx, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t total) {
    DGK_FOR(i, total) {
        int64_t r = i, ox = dgk_divmod(r, ow), oy = dgk_divmod(r, oh), plane = r;
        int64_t ys = pi_ad_start(oy, h, oh), ye = pi_ad_end(oy, h, oh), xs = pi_ad_start(ox, w, ow), xe = pi_ad_end(ox, w, ow);
        T m;
        idx[i] = pi_argmax(x + plane * h * w, h, w, ys, (int)(ye - ys), 1, xs, (int)(xe - xs), 1, m);
        y[i] = m;
    }
}

/* Outputs [lo, hi] along one axis whose window extent (span = dilation*(k-1)+1) holds input i. */
__device__ __forceinline__ void pi_covering(int64_t i, int stride, int pad, int64_t span, int64_t on, int64_t &lo, int64_t &hi) {
    int64_t t = i + pad;
    lo = t - span < 0 ? 0 : (t - span) / stride + 1;
    hi = t / stride;
    if (hi > on - 1) hi = on - 1;
}

/* adaptive: geometry with sh == 0 (the bins' ranges); else the pool's windows */
template <typename T>
__global__ void idx_bwd_kernel(const int64_t *idx, const T *gy, T *gx, const dg_pool2d_geom g, bool adaptive, int64_t total) {
    DGK_FOR(i, total) {
        int64_t r = i, ix = dgk_divmod(r, g.w), iy = dgk_divmod(r, g.h), plane = r;
        int64_t y0, y1, x0, x1;
        if (adaptive) {
            y0 = iy * g.oh / g.h; y1 = ((iy + 1) * g.oh + g.h - 1) / g.h - 1;
            x0 = ix * g.ow / g.w; x1 = ((ix + 1) * g.ow + g.w - 1) / g.w - 1;
            if (y1 > g.oh - 1) y1 = g.oh - 1;
            if (x1 > g.ow - 1) x1 = g.ow - 1;
        } else {
            pi_covering(iy, g.sh, g.ph, (int64_t)g.dh * (g.kh - 1) + 1, g.oh, y0, y1);
            pi_covering(ix, g.sw, g.pw, (int64_t)g.dw * (g.kw - 1) + 1, g.ow, x0, x1);
        }
        const int64_t me = iy * g.w + ix, base = plane * g.oh * g.ow;
        T acc = 0;
        for (int64_t oy = y0; oy <= y1; oy++)
            for (int64_t ox = x0; ox <= x1; ox++) {
                int64_t o = base + oy * g.ow + ox;
                if (idx[o] == me) acc += gy[o];
            }
        gx[i] = acc;
    }
}

static int pi_bad_dtype(const char *op, const dg_kview *t) {
    char sh[96];
    dg_shape_fmt(t->shape, t->ndim, sh, sizeof sh);
    DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cuda (input %s)", op, dg_dtype_name(t->dtype), sh);
    return DG_EUNSUPPORTED;
}
static bool pi_float(dg_dtype dt) { return dt == DG_F32 || dt == DG_F64; }

#define PI_LAUNCH(DT, N, KERNEL, ...)                                                                                  \
    do {                                                                                                               \
        if ((DT) == DG_F32) { typedef float T; DGK_LAUNCH(dgk_blocks(N), DGK_THREADS, 0, dg_cuda_stream(), KERNEL<T>)(__VA_ARGS__); } \
        else { typedef double T; DGK_LAUNCH(dgk_blocks(N), DGK_THREADS, 0, dg_cuda_stream(), KERNEL<T>)(__VA_ARGS__); }            \
    } while (0)

extern "C" int dg_cuda_max_pool2d_with_indices(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y,
                                               dg_kview *idx) {
    DG_CUDA_ENTER(be);
    if (!pi_float(x->dtype)) return pi_bad_dtype("max_pool2d_with_indices", x);
    int64_t total = y->numel;
    if (total == 0) return 0;
    PI_LAUNCH(x->dtype, total, max_idx_fwd_kernel, (const T *)x->data, (T *)y->data, (int64_t *)idx->data, *g, total);
    return DG_CUDA(cudaGetLastError());
}

extern "C" int dg_cuda_adaptive_max_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y, dg_kview *idx) {
    DG_CUDA_ENTER(be);
    if (!pi_float(x->dtype)) return pi_bad_dtype("adaptive_max_pool2d", x);
    int64_t total = y->numel, h = x->shape[2], w = x->shape[3], oh = y->shape[2], ow = y->shape[3];
    if (total == 0) return 0;
    PI_LAUNCH(x->dtype, total, adapt_max_fwd_kernel, (const T *)x->data, (T *)y->data, (int64_t *)idx->data, h, w, oh, ow, total);
    return DG_CUDA(cudaGetLastError());
}

extern "C" int dg_cuda_max_pool2d_indices_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *idx,
                                                   const dg_kview *gy, dg_kview *gx) {
    DG_CUDA_ENTER(be);
    if (!pi_float(gy->dtype)) return pi_bad_dtype("max_pool2d backward", gy);
    int64_t total = gx->numel;
    if (total == 0) return 0;
    if (gy->numel == 0)
        return DG_CUDA(cudaMemsetAsync(gx->data, 0, (size_t)total * dg_dtype_size(gx->dtype), dg_cuda_stream()));
    dg_pool2d_geom a = { 0 };
    if (g) a = *g;
    a.n = gx->shape[0]; a.c = gx->shape[1]; a.h = gx->shape[2]; a.w = gx->shape[3];
    a.oh = gy->shape[2]; a.ow = gy->shape[3];
    PI_LAUNCH(gy->dtype, total, idx_bwd_kernel, (const int64_t *)idx->data, (const T *)gy->data, (T *)gx->data, a, g == NULL, total);
    return DG_CUDA(cudaGetLastError());
}
