/* eager/cuda/sort.cu — the stable argsort behind dg_sort, dg_argsort and dg_topk (the GPU twin of
 * eager/cpu/sort.c). One thread per element counts the elements of its line that come before it
 * in the order (value, position) — its rank — and writes its position there. Ranks are distinct
 * because positions break ties, so the result is exactly the CPU's stable order, deterministic and
 * without atomics. The work is dim^2 per line: right for the short and medium lines sort and topk
 * usually see (class scores, beams, a few thousand entries); a line of 10^5 costs 10^10 compares. */
#include "kernel_util.cuh"

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

extern "C" int dg_cuda_argsort(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t outer, int64_t dim, int64_t inner, bool descending) {
    DG_CUDA_ENTER(be);
    if (idx->dtype != DG_I64) {
        DG_ERR(DG_EINVAL, "argsort: the index output must be int64, got %s", dg_dtype_name(idx->dtype));
        return DG_EINVAL;
    }
    int64_t n = outer * dim * inner;
    if (n == 0) return 0;
    cudaStream_t st = dg_cuda_stream();
    int64_t *ix = (int64_t *)idx->data;
    switch (x->dtype) {
    case DG_F32: DGK_LAUNCH(dgk_blocks(n), DGK_THREADS, 0, st, argsort_rank_kernel<float>)((const float *)x->data, ix, outer, dim, inner, descending); break;
    case DG_F64: DGK_LAUNCH(dgk_blocks(n), DGK_THREADS, 0, st, argsort_rank_kernel<double>)((const double *)x->data, ix, outer, dim, inner, descending); break;
    case DG_I64: DGK_LAUNCH(dgk_blocks(n), DGK_THREADS, 0, st, argsort_rank_kernel<long long>)((const long long *)x->data, ix, outer, dim, inner, descending); break;
    case DG_I32: DGK_LAUNCH(dgk_blocks(n), DGK_THREADS, 0, st, argsort_rank_kernel<int32_t>)((const int32_t *)x->data, ix, outer, dim, inner, descending); break;
    default:
        DG_ERR(DG_EUNSUPPORTED, "cuda argsort: dtype %s not supported (float32/float64/int64/int32)", dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    return DG_CUDA(cudaGetLastError());
}
