/* eager/cuda/softmax.cu — softmax / log-softmax over the last axis of a contiguous
 * [rows, cols] view and their backward rules (the GPU twin of eager/cpu/softmax.c), stable:
 * the row max is subtracted before exp, and row sums accumulate in double. Per element the
 * arithmetic is the CPU's (exp of the T difference rounded to T, products unfused), so only
 * the order of the double row sums differs. A row belongs to one warp when cols <= 1024
 * (8 rows per block, no shared memory, no block barrier) and to one block otherwise. */
#include "kernel_util.cuh"

#define WARP_ROWS 8               /* rows (warps) per block in the warp-per-row kernels */

struct sum_op { template <typename V> __device__ V operator()(V a, V b) const { return a + b; } };
/* max that skips NaN: a NaN in the row already makes the row sum (and so every output) NaN,
 * exactly as on the CPU whose scan starts from the row's first element */
struct nanmax_op {
    template <typename V> __device__ V operator()(V a, V b) const { return isnan(a) ? b : (isnan(b) ? a : (b > a ? b : a)); }
};

/* every lane gets lane 0's result, so all lanes use one value even when max ties of +0/-0
 * could leave lanes with different signs of zero */
template <typename V, typename F> __device__ __forceinline__ V warp_allreduce(V v, F f) {
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, s));
    return __shfl_sync(0xffffffffu, v, 0);
}

/* Whole-block all-reduce; every thread combines the warp results in the same order. */
template <typename V, typename F> __device__ __forceinline__ V block_allreduce(V v, F f) {
    __shared__ V sh[32];
    v = warp_allreduce(v, f);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    V r = sh[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) r = f(r, sh[w]);
    __syncthreads();              /* sh is reused by the next reduction */
    return r;
}

template <bool WARP, typename V, typename F> __device__ __forceinline__ V row_allreduce(V v, F f) {
    if (WARP) return warp_allreduce(v, f);
    return block_allreduce(v, f);
}

/* Row loop shared by the kernels: lane/nthreads index the columns of row r. */
#define ROW_LOOP(WARP)                                                                      \
    const int lane = threadIdx.x, nth = WARP ? 32 : blockDim.x;                              \
    const int64_t r0 = WARP ? (int64_t)blockIdx.x * WARP_ROWS + threadIdx.y : blockIdx.x;    \
    const int64_t rstep = WARP ? (int64_t)gridDim.x * WARP_ROWS : gridDim.x;                 \
    for (int64_t r = r0; r < rows; r += rstep)

template <typename T, bool LOG, bool WARP>
__global__ void softmax_kernel(const T *x, T *y, int64_t rows, int64_t cols) {
    ROW_LOOP(WARP) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        T mx = (T)-INFINITY;
        for (int64_t j = lane; j < cols; j += nth) mx = nanmax_op()(mx, xr[j]);
        mx = row_allreduce<WARP>(mx, nanmax_op());
        double s = 0;
        for (int64_t j = lane; j < cols; j += nth) s += (double)(T)exp((double)(xr[j] - mx));
        s = row_allreduce<WARP>(s, sum_op());
        if (LOG) {
            T ls = (T)log(s);
            for (int64_t j = lane; j < cols; j += nth) yr[j] = xr[j] - mx - ls;
        } else {
            /* e recomputed (same bits as the first pass) instead of stored and reloaded */
            T inv = (T)(1.0 / s);
            for (int64_t j = lane; j < cols; j += nth) yr[j] = dgk_mul((T)exp((double)(xr[j] - mx)), inv);
        }
    }
}

template <typename T, bool LOG, bool WARP>
__global__ void softmax_bw_kernel(const T *y, const T *gy, T *gx, int64_t rows, int64_t cols) {
    ROW_LOOP(WARP) {
        const T *yr = y + r * cols, *gr = gy + r * cols;
        T *xr = gx + r * cols;
        double s = 0;
        if (LOG) for (int64_t j = lane; j < cols; j += nth) s += (double)gr[j];
        else for (int64_t j = lane; j < cols; j += nth) s = dgk_add(s, dgk_mul((double)gr[j], (double)yr[j]));
        s = row_allreduce<WARP>(s, sum_op());
        /* writes come after the row's reduction, so gx may alias gy */
        if (LOG) for (int64_t j = lane; j < cols; j += nth) xr[j] = (T)dgk_sub((double)gr[j], dgk_mul(exp((double)yr[j]), s));
        else for (int64_t j = lane; j < cols; j += nth) xr[j] = (T)dgk_mul((double)yr[j], dgk_sub((double)gr[j], s));
    }
}

static int row_threads(int64_t cols) { return cols > 16384 ? 1024 : (cols > 4096 ? 512 : 256); }
static unsigned warp_grid(int64_t rows) {
    int64_t b = (rows + WARP_ROWS - 1) / WARP_ROWS;
    return (unsigned)(b > 65535 ? 65535 : b);
}
static unsigned block_grid(int64_t rows) { return (unsigned)(rows > 65535 ? 65535 : rows); }

template <typename T, bool LOG>
static void launch_fw(const T *x, T *y, int64_t rows, int64_t cols, cudaStream_t st) {
    if (cols <= 1024) DGK_LAUNCH(warp_grid(rows), dim3(32, WARP_ROWS), 0, st, softmax_kernel<T, LOG, true>)(x, y, rows, cols);
    else DGK_LAUNCH(block_grid(rows), row_threads(cols), 0, st, softmax_kernel<T, LOG, false>)(x, y, rows, cols);
}

template <typename T, bool LOG>
static void launch_bw(const T *y, const T *gy, T *gx, int64_t rows, int64_t cols, cudaStream_t st) {
    if (cols <= 1024) DGK_LAUNCH(warp_grid(rows), dim3(32, WARP_ROWS), 0, st, softmax_bw_kernel<T, LOG, true>)(y, gy, gx, rows, cols);
    else DGK_LAUNCH(block_grid(rows), row_threads(cols), 0, st, softmax_bw_kernel<T, LOG, false>)(y, gy, gx, rows, cols);
}

extern "C" int dg_cuda_softmax(const dg_backend *be, const dg_kview *x, dg_kview *y, int64_t rows, int64_t cols, bool lg) {
    DG_CUDA_ENTER(be);
    if (x->dtype != DG_F32 && x->dtype != DG_F64) {
        DG_ERR(DG_EUNSUPPORTED, "cuda softmax: dtype %s not supported", dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    if (rows <= 0 || cols <= 0) return 0;
    cudaStream_t st = dg_cuda_stream();
    if (x->dtype == DG_F32) {
        const float *xp = (const float *)x->data;
        float *yp = (float *)y->data;
        if (lg) launch_fw<float, true>(xp, yp, rows, cols, st); else launch_fw<float, false>(xp, yp, rows, cols, st);
    } else {
        const double *xp = (const double *)x->data;
        double *yp = (double *)y->data;
        if (lg) launch_fw<double, true>(xp, yp, rows, cols, st); else launch_fw<double, false>(xp, yp, rows, cols, st);
    }
    return DG_CUDA(cudaGetLastError());
}

extern "C" int dg_cuda_softmax_backward(const dg_backend *be, const dg_kview *y, const dg_kview *gy, dg_kview *gx, int64_t rows, int64_t cols, bool lg) {
    DG_CUDA_ENTER(be);
    if (y->dtype != DG_F32 && y->dtype != DG_F64) {
        DG_ERR(DG_EUNSUPPORTED, "cuda softmax backward: dtype %s not supported", dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    if (rows <= 0 || cols <= 0) return 0;
    cudaStream_t st = dg_cuda_stream();
    if (y->dtype == DG_F32) {
        const float *yp = (const float *)y->data, *gp = (const float *)gy->data;
        float *xp = (float *)gx->data;
        if (lg) launch_bw<float, true>(yp, gp, xp, rows, cols, st); else launch_bw<float, false>(yp, gp, xp, rows, cols, st);
    } else {
        const double *yp = (const double *)y->data, *gp = (const double *)gy->data;
        double *xp = (double *)gx->data;
        if (lg) launch_bw<double, true>(yp, gp, xp, rows, cols, st); else launch_bw<double, false>(yp, gp, xp, rows, cols, st);
    }
    return DG_CUDA(cudaGetLastError());
}
