/* eager/cuda/copy.cu — fill, copy/cast and where on strided device tensors (CPU twins in
 * eager/cpu/cpu_backend.c). Same-dtype moves copy raw bits (NaN payloads and large int64
 * survive); casts between dtypes go through double exactly as the CPU's load_any/store_any,
 * float16 / bfloat16 included (rounded to nearest even by bits, kernel_util.cuh). */
#include "kernel_util.cuh"
#include <type_traits>

/* the unsigned type of an element size, for raw moves */
template <int ES> struct dgk_raw;
template <> struct dgk_raw<1> { typedef uint8_t T; };
template <> struct dgk_raw<2> { typedef uint16_t T; };
template <> struct dgk_raw<4> { typedef uint32_t T; };
template <> struct dgk_raw<8> { typedef unsigned long long T; };

#define DGK_DISPATCH_SIZE(es, F)     \
    switch (es) {                    \
    case 1: F(1); break;             \
    case 2: F(2); break;             \
    case 4: F(4); break;             \
    case 8: F(8); break;             \
    default: break;                  \
    }

template <typename T>
__global__ void fill_kernel(T *y, const __grid_constant__ dgk_geom g, T v) {
    DGK_FOR(i, g.numel) {
        int64_t off[1];
        dgk_offsets<1>(g, i, off);
        y[off[0]] = v;
    }
}

/* host twin of store_any's conversion: (T)v, bool as v != 0 */
template <typename T> static T host_from_double(double v) { return (T)v; }
template <> uint8_t host_from_double<uint8_t>(double v) { return v != 0; }
template <> dgk_f16 host_from_double<dgk_f16>(double v) { return dgk_f16{ dg_f32_to_f16((float)v) }; }
template <> dgk_bf16 host_from_double<dgk_bf16>(double v) { return dgk_bf16{ dg_f32_to_bf16((float)v) }; }

template <typename T>
static int launch_fill(dg_kview *y, const dgk_geom &g, double value) {
    DGK_LAUNCH(dgk_blocks(g.numel), DGK_THREADS, 0, dg_cuda_stream(), fill_kernel<T>)((T *)y->data, g, host_from_double<T>(value));
    return DG_CUDA(cudaGetLastError());
}

extern "C" int dg_cuda_fill(const dg_backend *be, dg_kview *y, double value) {
    DG_CUDA_ENTER(be);
    if (!dgk_dtype_ok_half(y->dtype)) {
        DG_ERR(DG_EUNSUPPORTED, "cuda fill: dtype %s not supported", dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    if (y->numel == 0) return 0;
    const dg_kview *ops[1] = { y };
    dgk_geom g;
    dgk_geom_init(&g, ops, 1);
    int rc = 0;
#define F(T) rc = launch_fill<T>(y, g, value)
    DGK_DISPATCH_ALL_HALF(y->dtype, F)
#undef F
    return rc;
}

/* TS -> TD (dgk_cast: through double, int64 with one rounding) unless the dtypes are the same
 * (then TS == TD is a raw type) */
template <typename TS, typename TD, bool RAW>
__global__ void copy_kernel(const TS *x, TD *y, const __grid_constant__ dgk_geom g) {
    DGK_FOR(i, g.numel) {
        int64_t off[2];
        dgk_offsets<2>(g, i, off);
        if constexpr (RAW) y[off[0]] = x[off[1]];
        else y[off[0]] = dgk_cast<TS, TD>::run(x[off[1]]);
    }
}

template <typename TS, typename TD, bool RAW>
static int launch_copy(const dg_kview *x, dg_kview *y, const dgk_geom &g) {
    DGK_LAUNCH(dgk_blocks(g.numel), DGK_THREADS, 0, dg_cuda_stream(), copy_kernel<TS, TD, RAW>)(
        (const TS *)x->data, (TD *)y->data, g);
    return DG_CUDA(cudaGetLastError());
}

template <typename TS>
static int launch_cast(const dg_kview *x, dg_kview *y, const dgk_geom &g) {
    int rc = 0;
/* equal dtypes never get here (dg_cuda_copy copies them raw): no instantiation for them */
#define F(TD) if constexpr (!std::is_same<TS, TD>::value) rc = launch_copy<TS, TD, false>(x, y, g)
    DGK_DISPATCH_ALL_HALF(y->dtype, F)
#undef F
    return rc;
}

extern "C" int dg_cuda_copy(const dg_backend *be, const dg_kview *x, dg_kview *y) {
    DG_CUDA_ENTER(be);
    bool same = x->dtype == y->dtype;
    size_t es = dg_dtype_size(y->dtype);
    if (same ? (es != 1 && es != 2 && es != 4 && es != 8) : !(dgk_dtype_ok_half(x->dtype) && dgk_dtype_ok_half(y->dtype))) {
        DG_ERR(DG_EUNSUPPORTED, "cuda copy: %s -> %s not supported", dg_dtype_name(x->dtype), dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    if (y->numel == 0) return 0;
    const dg_kview *ops[2] = { y, x };
    dgk_geom g;
    dgk_geom_init(&g, ops, 2);
    /* one contiguous run on both sides: a plain device-to-device copy */
    if (same && g.ndim == 1 && g.st[0][0] == 1 && g.st[1][0] == 1)
        return DG_CUDA(cudaMemcpyAsync(y->data, x->data, (size_t)g.numel * es,
                                       cudaMemcpyDeviceToDevice, dg_cuda_stream()));
    int rc = 0;
    if (same) {
#define F(ES) rc = launch_copy<dgk_raw<ES>::T, dgk_raw<ES>::T, true>(x, y, g)
        DGK_DISPATCH_SIZE(es, F)
#undef F
        return rc;
    }
#define F(TS) rc = launch_cast<TS>(x, y, g)
    DGK_DISPATCH_ALL_HALF(x->dtype, F)
#undef F
    return rc;
}

/* y = cond != 0 ? a : b; a, b and y share a dtype, moved as raw bits */
template <typename R>
__global__ void where_kernel(const void *c, int cdt, const R *a, const R *b, R *y, const __grid_constant__ dgk_geom g) {
    DGK_FOR(i, g.numel) {
        int64_t off[4];
        dgk_offsets<4>(g, i, off);
        y[off[0]] = dgk_load_any(c, cdt, off[1]) != 0 ? a[off[2]] : b[off[3]];
    }
}

extern "C" int dg_cuda_where(const dg_backend *be, const dg_kview *c, const dg_kview *a, const dg_kview *b, dg_kview *y) {
    DG_CUDA_ENTER(be);
    size_t es = dg_dtype_size(y->dtype);
    if (!dgk_dtype_ok_half(c->dtype) || (es != 1 && es != 2 && es != 4 && es != 8)) {
        DG_ERR(DG_EUNSUPPORTED, "cuda where: cond %s / values %s not supported", dg_dtype_name(c->dtype), dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    if (y->numel == 0) return 0;
    const dg_kview *ops[4] = { y, c, a, b };
    dgk_geom g;
    dgk_geom_init(&g, ops, 4);
    int rc = 0;
#define F(ES)                                                                                                  \
    do {                                                                                                       \
        typedef dgk_raw<ES>::T R;                                                                              \
        DGK_LAUNCH(dgk_blocks(g.numel), DGK_THREADS, 0, dg_cuda_stream(), where_kernel<R>)(                            \
            c->data, (int)c->dtype, (const R *)a->data, (const R *)b->data,         \
            (R *)y->data, g);                                                                         \
        rc = DG_CUDA(cudaGetLastError());                                                                      \
    } while (0)
    DGK_DISPATCH_SIZE(es, F)
#undef F
    return rc;
}
