/* eager/cuda/sort.cu — the stable argsort behind dg_sort, dg_argsort and dg_topk (the GPU twin of
 * eager/cpu/sort.c). Both paths order by (value, position), a total order, so the result is
 * exactly the CPU's stable order, ties and NaNs included, and deterministic:
 *  - short lines (dim <= RANK_MAX_DIM): one thread per element counts the elements of its line
 *    that come before it — its rank — and writes its position there (dim compares per element,
 *    one launch, no scratch);
 *  - longer lines: a bitonic sort of (value, position) pairs in a scratch copy padded to a power
 *    of two p, one launch per compare-exchange stage (log2(p) (log2(p) + 1) / 2 launches,
 *    p log^2 p compares per line), pads ordered after everything. */
#include "kernel_util.cuh"

#define RANK_MAX_DIM 64

template <typename T> __device__ __forceinline__ bool sort_isnan(T v) { return v != v; }

/* a before b in torch's order: NaN the largest; positions break ties */
template <typename T>
__device__ __forceinline__ bool sort_before(T a, int64_t ia, T b, int64_t ib, bool desc) {
    bool na = sort_isnan(a), nb = sort_isnan(b);
    if (na != nb) return desc ? na : nb;
    if (!na && a != b) return desc ? a > b : a < b;
    return ia < ib;
}

template <typename T>
__global__ void argsort_rank_kernel(const T *x, int64_t *idx, int64_t outer, int64_t dim, int64_t inner, bool desc) {
    DGK_FOR(t, outer * dim * inner) {
        int64_t q = t, i = dgk_divmod(q, inner), j = dgk_divmod(q, dim), o = q;
        const T *line = x + o * dim * inner + i;
        T v = line[j * inner];
        int64_t rank = 0;
        for (int64_t k = 0; k < dim; k++) rank += sort_before(line[k * inner], k, v, j, desc);
        idx[(o * dim + rank) * inner + i] = j;
    }
}

/* lines of p (value, position) pairs; line = o * inner + i. Pads hold position >= dim. */
template <typename T>
__global__ void bitonic_load_kernel(const T *x, T *key, int64_t *pos, int64_t outer, int64_t dim, int64_t inner, int64_t p) {
    DGK_FOR(t, outer * inner * p) {
        int64_t q = t, j = dgk_divmod(q, p), i = dgk_divmod(q, inner), o = q;
        pos[t] = j;
        key[t] = x[(o * dim + (j < dim ? j : 0)) * inner + i];   /* a pad's value is never compared */
    }
}

template <typename T>
__global__ void bitonic_step_kernel(T *key, int64_t *pos, int64_t lines, int64_t p, int64_t dim, int64_t k, int64_t j, bool desc) {
    DGK_FOR(t, lines * p) {
        int64_t i = t % p, l = i ^ j;
        if (l <= i) continue;   /* each pair once, by its lower member */
        int64_t a = t, b = t - i + l, pa = pos[a], pb = pos[b];
        /* b before a in the order (pads after everything); a block with bit k set runs reversed */
        bool b_first = pa >= dim ? pb < dim : (pb < dim && sort_before(key[b], pb, key[a], pa, desc));
        bool a_first = pb >= dim ? pa < dim : (pa < dim && sort_before(key[a], pa, key[b], pb, desc));
        if ((i & k) == 0 ? b_first : a_first) {
            T kv = key[a]; key[a] = key[b]; key[b] = kv;
            pos[a] = pb; pos[b] = pa;
        }
    }
}

__global__ void bitonic_store_kernel(const int64_t *pos, int64_t *idx, int64_t outer, int64_t dim, int64_t inner, int64_t p) {
    DGK_FOR(t, outer * dim * inner) {
        int64_t q = t, i = dgk_divmod(q, inner), r = dgk_divmod(q, dim), o = q;
        idx[t] = pos[(o * inner + i) * p + r];
    }
}

template <typename T>
static int argsort_typed(const T *x, int64_t *idx, int64_t outer, int64_t dim, int64_t inner, bool desc) {
    cudaStream_t st = dg_cuda_stream();
    int64_t n = outer * dim * inner;
    if (dim <= RANK_MAX_DIM) {
        DGK_LAUNCH(dgk_blocks(n), DGK_THREADS, 0, st, argsort_rank_kernel<T>)(x, idx, outer, dim, inner, desc);
        return DG_CUDA(cudaGetLastError());
    }
    int64_t p = 1, lines = outer * inner;
    while (p < dim) p *= 2;
    int64_t total = lines * p;
    char *scratch = (char *)dg_cuda_alloc((size_t)total * (sizeof(T) + sizeof(int64_t)));
    if (!scratch) return DG_ENOMEM;   /* the allocator said why */
    int64_t *pos = (int64_t *)scratch;
    T *key = (T *)(scratch + (size_t)total * sizeof(int64_t));
    DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, st, bitonic_load_kernel<T>)(x, key, pos, outer, dim, inner, p);
    int rc = DG_CUDA(cudaGetLastError());
    for (int64_t k = 2; k <= p && !rc; k *= 2)
        for (int64_t j = k / 2; j > 0 && !rc; j /= 2) {
            DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, st, bitonic_step_kernel<T>)(key, pos, lines, p, dim, k, j, desc);
            rc = DG_CUDA(cudaGetLastError());
        }
    if (!rc) {
        DGK_LAUNCH(dgk_blocks(n), DGK_THREADS, 0, st, bitonic_store_kernel)(pos, idx, outer, dim, inner, p);
        rc = DG_CUDA(cudaGetLastError());
    }
    dg_cuda_free(scratch);   /* stream-ordered: reused only by work queued after these kernels */
    return rc;
}

extern "C" int dg_cuda_argsort(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t outer, int64_t dim, int64_t inner, bool descending) {
    DG_CUDA_ENTER(be);
    if (idx->dtype != DG_I64) {
        DG_ERR(DG_EINVAL, "argsort: the index output must be int64, got %s", dg_dtype_name(idx->dtype));
        return DG_EINVAL;
    }
    if (outer * dim * inner == 0) return 0;
    int64_t *ix = (int64_t *)idx->data;
    switch (x->dtype) {
    case DG_F32: return argsort_typed((const float *)x->data, ix, outer, dim, inner, descending);
    case DG_F64: return argsort_typed((const double *)x->data, ix, outer, dim, inner, descending);
    case DG_I64: return argsort_typed((const long long *)x->data, ix, outer, dim, inner, descending);
    case DG_I32: return argsort_typed((const int32_t *)x->data, ix, outer, dim, inner, descending);
    default:
        DG_ERR(DG_EUNSUPPORTED, "cuda argsort: dtype %s not supported (float32/float64/int64/int32)", dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
}
