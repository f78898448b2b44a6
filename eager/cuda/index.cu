/* eager/cuda/index.cu — index_select / index_add, gather / scatter_add and the NLL rows behind
 * cross entropy (the GPU twin of eager/cpu/index.c). As on the CPU every index is range-checked
 * before anything is written: a check kernel records the first bad position with atomicMin in
 * a device flag, the host reads it back (one stream sync per call) and fails with the CPU's
 * message, naming the op, the value and its position. The op kernels also skip bad indices, so
 * no path reads or writes out of bounds. The adds use atomicAdd (f32 and f64): accumulation
 * order then varies between runs, which only moves float rounding. */
#include "kernel_util.cuh"

#define NO_BAD 0xffffffffffffffffull

/* first out-of-range position, NO_BAD when none; per device, used only on the one compute
 * stream, reset by every check */
__device__ unsigned long long g_bad_pos;

template <typename IT>
__global__ void check_kernel(const IT *ix, int64_t n, int64_t limit, bool use_ignore, long long ignore) {
    DGK_FOR(i, n) {
        long long v = (long long)ix[i];
        if (use_ignore && v == ignore) continue;
        if (v < 0 || v >= limit) atomicMin(&g_bad_pos, (unsigned long long)i);
    }
}

/* 0 when every index of ix is in [0, limit) (or equals ignore, for labels); else DG_EINVAL
 * with the message dg_cpu_* would give. Synchronizes the stream. */
static int check_indices(const dg_kview *ix, int64_t limit, const char *op, bool labels, int64_t ignore) {
    int64_t n = ix->numel;
    if (n == 0) return 0;
    cudaStream_t st = dg_cuda_stream();
    void *flag = NULL;
    int rc = DG_CUDA(cudaGetSymbolAddress(&flag, g_bad_pos));
    if (!rc) rc = DG_CUDA(cudaMemsetAsync(flag, 0xff, sizeof(unsigned long long), st));
    if (rc) return rc;
    const void *p = ix->data;
    if (ix->dtype == DG_I64)
        DGK_LAUNCH(dgk_blocks(n), DGK_THREADS, 0, st, check_kernel<long long>)((const long long *)p, n, limit, labels, (long long)ignore);
    else
        DGK_LAUNCH(dgk_blocks(n), DGK_THREADS, 0, st, check_kernel<int32_t>)((const int32_t *)p, n, limit, labels, (long long)ignore);
    unsigned long long pos = NO_BAD;
    rc = DG_CUDA(cudaGetLastError());
    if (!rc) rc = DG_CUDA(cudaMemcpyAsync(&pos, flag, sizeof pos, cudaMemcpyDeviceToHost, st));
    if (!rc) rc = DG_CUDA(cudaStreamSynchronize(st));
    if (rc || pos == NO_BAD) return rc;
    /* error path only: fetch the offending value for the message */
    long long v = 0;
    int32_t v32 = 0;
    size_t es = ix->dtype == DG_I64 ? 8 : 4;
    rc = DG_CUDA(cudaMemcpyAsync(es == 8 ? (void *)&v : (void *)&v32, (const char *)p + pos * es, es, cudaMemcpyDeviceToHost, st));
    if (!rc) rc = DG_CUDA(cudaStreamSynchronize(st));
    if (rc) return rc;
    if (es == 4) v = v32;
    if (labels)
        DG_ERR(DG_EINVAL, "cross_entropy: label %lld at row %lld is out of range [0, %lld)", v, (long long)pos, (long long)limit);
    else
        DG_ERR(DG_EINVAL, "%s: index %lld at position %lld is out of range [0, %lld)", op, v, (long long)pos, (long long)limit);
    return DG_EINVAL;
}

static int index_dtype_ok(const dg_kview *ix, const char *op) {
    if (ix->dtype == DG_I64 || ix->dtype == DG_I32) return 0;
    DG_ERR(DG_EINVAL, "cuda %s: index dtype must be int64 or int32, got %s", op, dg_dtype_name(ix->dtype));
    return DG_EINVAL;
}

template <int ES> struct raw_t;
template <> struct raw_t<1> { typedef uint8_t T; };
template <> struct raw_t<2> { typedef uint16_t T; };
template <> struct raw_t<4> { typedef uint32_t T; };
template <> struct raw_t<8> { typedef unsigned long long T; };

/* ---- index_select / index_add: x as [outer, dim, inner], n = index entries ---- */
template <typename R, typename IT>
__global__ void index_select_kernel(const R *x, const IT *ix, R *y, int64_t outer, int64_t dim, int64_t inner, int64_t n) {
    DGK_FOR(t, outer * n * inner) {
        int64_t q = t, i = dgk_divmod(q, inner), j = dgk_divmod(q, n), o = q;
        int64_t k = (int64_t)ix[j];
        if (k >= 0 && k < dim) y[t] = x[(o * dim + k) * inner + i];
    }
}

template <typename T, typename IT>
__global__ void index_add_kernel(const T *gy, const IT *ix, T *gx, int64_t outer, int64_t dim, int64_t inner, int64_t n) {
    DGK_FOR(t, outer * n * inner) {
        int64_t q = t, i = dgk_divmod(q, inner), j = dgk_divmod(q, n), o = q;
        int64_t k = (int64_t)ix[j];
        if (k >= 0 && k < dim) atomicAdd(gx + (o * dim + k) * inner + i, gy[t]);
    }
}

/* ---- gather / scatter_add: index and y as [outer, idim, inner], x as [outer, xdim, inner] ---- */
template <typename R, typename IT>
__global__ void gather_kernel(const R *x, const IT *ix, R *y, int64_t outer, int64_t xdim, int64_t idim, int64_t inner) {
    DGK_FOR(t, outer * idim * inner) {
        int64_t q = t, i = dgk_divmod(q, inner), o = q / idim;
        int64_t k = (int64_t)ix[t];
        if (k >= 0 && k < xdim) y[t] = x[(o * xdim + k) * inner + i];
    }
}

template <typename T, typename IT>
__global__ void scatter_add_kernel(const T *gy, const IT *ix, T *gx, int64_t outer, int64_t xdim, int64_t idim, int64_t inner) {
    DGK_FOR(t, outer * idim * inner) {
        int64_t q = t, i = dgk_divmod(q, inner), o = q / idim;
        int64_t k = (int64_t)ix[t];
        if (k >= 0 && k < xdim) atomicAdd(gx + (o * xdim + k) * inner + i, gy[t]);
    }
}

/* Launch KERNEL<VT, IT> with IT the index dtype's C type; IXP in the arguments is the typed
 * index pointer. Needs `ix` and `int rc` in scope. */
#define LAUNCH_IT(KERNEL, VT, total, ...)                                                            \
    do {                                                                                             \
        if ((total) <= 0) break;                                                                     \
        if (ix->dtype == DG_I64) {                                                                   \
            typedef long long IT;                                                                    \
            DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, dg_cuda_stream(), KERNEL<VT, IT>)(__VA_ARGS__);    \
        } else {                                                                                     \
            typedef int32_t IT;                                                                      \
            DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, dg_cuda_stream(), KERNEL<VT, IT>)(__VA_ARGS__);    \
        }                                                                                            \
        rc = DG_CUDA(cudaGetLastError());                                                            \
    } while (0)
#define IXP ((const IT *)ix->data)

/* LAUNCH_IT with VT the raw type of V's element size: index_select and gather only move
 * elements, so one instantiation per size serves every dtype. VT names it in the arguments;
 * a size with no raw type sets rc to DG_EUNSUPPORTED, naming OP. */
#define LAUNCH_IT_RAW(OP, V, KERNEL, total, ...)                                                     \
    do {                                                                                             \
        switch (dg_dtype_size((V)->dtype)) {                                                         \
        case 1: { typedef raw_t<1>::T VT; LAUNCH_IT(KERNEL, VT, total, __VA_ARGS__); break; }        \
        case 2: { typedef raw_t<2>::T VT; LAUNCH_IT(KERNEL, VT, total, __VA_ARGS__); break; }        \
        case 4: { typedef raw_t<4>::T VT; LAUNCH_IT(KERNEL, VT, total, __VA_ARGS__); break; }        \
        case 8: { typedef raw_t<8>::T VT; LAUNCH_IT(KERNEL, VT, total, __VA_ARGS__); break; }        \
        default:                                                                                     \
            DG_ERR(DG_EUNSUPPORTED, "cuda %s: dtype %s not supported", OP, dg_dtype_name((V)->dtype)); \
            rc = DG_EUNSUPPORTED;                                                                    \
        }                                                                                            \
    } while (0)

/* LAUNCH_IT with VT float or double by V's dtype (add_dtype_ok has let only those through). */
#define LAUNCH_IT_FLOAT(V, KERNEL, total, ...)                                                       \
    do {                                                                                             \
        if ((V)->dtype == DG_F32) { typedef float VT; LAUNCH_IT(KERNEL, VT, total, __VA_ARGS__); }   \
        else { typedef double VT; LAUNCH_IT(KERNEL, VT, total, __VA_ARGS__); }                       \
    } while (0)

extern "C" int dg_cuda_index_select(const dg_backend *be, const dg_kview *x, const dg_kview *ix, dg_kview *y, int64_t outer, int64_t dim, int64_t inner) {
    DG_CUDA_ENTER(be);
    int rc = index_dtype_ok(ix, "index_select");
    if (!rc) rc = check_indices(ix, dim, "index_select", false, 0);
    if (rc) return rc;
    int64_t n = ix->numel;
    LAUNCH_IT_RAW("index_select", x, index_select_kernel, outer * n * inner,
                  (const VT *)x->data, IXP, (VT *)y->data, outer, dim, inner, n);
    return rc;
}

/* gx/gy dtype must be f32 or f64 (atomicAdd) */
static int add_dtype_ok(const dg_kview *gx, const char *op) {
    if (gx->dtype == DG_F32 || gx->dtype == DG_F64) return 0;
    DG_ERR(DG_EUNSUPPORTED, "cuda %s: dtype %s not supported", op, dg_dtype_name(gx->dtype));
    return DG_EUNSUPPORTED;
}

extern "C" int dg_cuda_index_add(const dg_backend *be, const dg_kview *gy, const dg_kview *ix, dg_kview *gx, int64_t outer, int64_t dim, int64_t inner) {
    DG_CUDA_ENTER(be);
    int rc = index_dtype_ok(ix, "index_add");
    if (!rc) rc = add_dtype_ok(gx, "index_add");
    if (!rc) rc = check_indices(ix, dim, "index_add", false, 0);
    if (rc) return rc;
    int64_t n = ix->numel;
    LAUNCH_IT_FLOAT(gx, index_add_kernel, outer * n * inner,
                    (const VT *)gy->data, IXP, (VT *)gx->data, outer, dim, inner, n);
    return rc;
}

extern "C" int dg_cuda_gather(const dg_backend *be, const dg_kview *x, const dg_kview *ix, dg_kview *y, int64_t outer, int64_t xdim, int64_t idim, int64_t inner) {
    DG_CUDA_ENTER(be);
    int rc = index_dtype_ok(ix, "gather");
    if (!rc) rc = check_indices(ix, xdim, "gather", false, 0);
    if (rc) return rc;
    LAUNCH_IT_RAW("gather", x, gather_kernel, outer * idim * inner,
                  (const VT *)x->data, IXP, (VT *)y->data, outer, xdim, idim, inner);
    return rc;
}

extern "C" int dg_cuda_scatter_add(const dg_backend *be, const dg_kview *gy, const dg_kview *ix, dg_kview *gx, int64_t outer, int64_t xdim, int64_t idim, int64_t inner) {
    DG_CUDA_ENTER(be);
    int rc = index_dtype_ok(ix, "scatter_add");
    if (!rc) rc = add_dtype_ok(gx, "scatter_add");
    if (!rc) rc = check_indices(ix, xdim, "scatter_add", false, 0);
    if (rc) return rc;
    LAUNCH_IT_FLOAT(gx, scatter_add_kernel, outer * idim * inner,
                    (const VT *)gy->data, IXP, (VT *)gx->data, outer, xdim, idim, inner);
    return rc;
}

/* ---- NLL rows: loss[r] = -logp[r, label[r]], 0 for ignored rows; backward scatters -g[r] ---- */
template <typename T, typename IT>
__global__ void nll_kernel(const T *logp, const IT *label, T *loss, int64_t rows, int64_t cols, long long ignore) {
    DGK_FOR(r, rows) {
        long long c = (long long)label[r];
        loss[r] = (c == ignore || c < 0 || c >= cols) ? (T)0 : -logp[r * cols + c];
    }
}

template <typename T, typename IT>
__global__ void nll_bw_kernel(const T *g, const IT *label, T *glogp, int64_t rows, int64_t cols, long long ignore) {
    DGK_FOR(r, rows) {
        long long c = (long long)label[r];
        if (c != ignore && c >= 0 && c < cols) glogp[r * cols + c] = -g[r];
    }
}

/* What both NLL directions check: the label dtype, logp's (or its gradient's) float dtype, every
 * label in range. */
static int nll_checks(const dg_kview *label, const dg_kview *logp, int64_t cols, int64_t ignore) {
    int rc = index_dtype_ok(label, "cross_entropy");
    if (!rc) rc = add_dtype_ok(logp, "cross_entropy");
    if (!rc) rc = check_indices(label, cols, "cross_entropy", true, ignore);
    return rc;
}

extern "C" int dg_cuda_nll(const dg_backend *be, const dg_kview *logp, const dg_kview *label, dg_kview *loss, int64_t rows, int64_t cols, int64_t ignore) {
    DG_CUDA_ENTER(be);
    const dg_kview *ix = label;
    int rc = nll_checks(label, logp, cols, ignore);
    if (rc) return rc;
    LAUNCH_IT_FLOAT(logp, nll_kernel, rows, (const VT *)logp->data, IXP, (VT *)loss->data, rows, cols, (long long)ignore);
    return rc;
}

extern "C" int dg_cuda_nll_backward(const dg_backend *be, const dg_kview *g, const dg_kview *label, dg_kview *glogp, int64_t rows, int64_t cols, int64_t ignore) {
    DG_CUDA_ENTER(be);
    const dg_kview *ix = label;
    int rc = nll_checks(label, glogp, cols, ignore);
    if (rc) return rc;
    if (rows <= 0 || cols <= 0) return 0;
    rc = DG_CUDA(cudaMemsetAsync(glogp->data, 0, (size_t)(rows * cols) * dg_dtype_size(glogp->dtype), dg_cuda_stream()));
    if (rc) return rc;
    LAUNCH_IT_FLOAT(glogp, nll_bw_kernel, rows, (const VT *)g->data, IXP, (VT *)glogp->data, rows, cols, (long long)ignore);
    return rc;
}
