/* eager/cuda/kernel_util.cuh — what the CUDA kernel files share: the C headers with C linkage,
 * the strided-operand geometry (the GPU twin of eager/cpu/iter.h), launch sizing, dtype
 * load/store with the CPU's conversion rules, and arithmetic that nvcc may not fuse into FMAs.
 * Only .cu files include it; everything here is static/inline so each file gets its own copy. */
#ifndef DG_CUDA_KERNEL_UTIL_CUH
#define DG_CUDA_KERNEL_UTIL_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <dygraph.h>
/* internal.h and backend.h have no extern "C" guard of their own, and cuda_internal.h includes
 * backend.h outside its guard: without this wrapper dg_set_error_at, dg_tensor_ptr, ... would get
 * C++ (mangled) linkage and the library would not link. Their include guards make the nested
 * includes below no-ops. The system headers above are included first so they are not parsed
 * inside the extern "C" block. */
extern "C" {
#include "../internal.h"
#include "../backend.h"
}
#include "cuda_internal.h"

/* Every kernel launch is written DGK_LAUNCH(grid, block, shmem, stream, kernel)(args...): nvcc
 * gets the triple-chevron launch; the emulation build (test/cuda_emu), whose cuda_runtime.h
 * defines the macro first, queues the kernel on its emulated stream instead. */
#ifndef DGK_LAUNCH
#define DGK_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<grid, block, shmem, stream>>>
#endif

#define DGK_THREADS 256
#define DGK_MAX_BLOCKS 8192       /* grid-stride loops cover the rest; ~30 waves of 256 on an H100 */
#define DGK_MAX_OPS 4

/* Blocks for n elements, one per thread, capped (n > 0). */
static inline unsigned dgk_blocks(int64_t n, int threads = DGK_THREADS) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : (b > DGK_MAX_BLOCKS ? DGK_MAX_BLOCKS : b));
}

#define DGK_FOR(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* Up to four operands over the shape of ops[0], each with its own strides (0 = broadcast).
 * Passed to kernels by value (a few hundred bytes of parameter space). */
struct dgk_geom {
    int ndim;
    int64_t numel;
    int64_t shape[DG_MAX_DIMS];
    int64_t st[DGK_MAX_OPS][DG_MAX_DIMS];
};

/* Same coalescing as dg_iter_init: size-1 dims dropped, neighbouring dims merged when every
 * operand walks them as one, so contiguous and scalar-broadcast cases become one flat dim and
 * the kernels do no index division at all. */
static inline void dgk_geom_init(dgk_geom *g, const dg_kview *const *ops, int nops) {
    const dg_kview *y = ops[0];
    memset(g, 0, sizeof *g);
    int nd = 0;
    for (int d = 0; d < y->ndim; d++) {
        if (y->shape[d] == 1) continue;
        if (nd > 0) {
            bool merge = true;
            for (int k = 0; k < nops; k++)
                if (g->st[k][nd - 1] != ops[k]->stride[d] * y->shape[d]) { merge = false; break; }
            if (merge) {
                g->shape[nd - 1] *= y->shape[d];
                for (int k = 0; k < nops; k++) g->st[k][nd - 1] = ops[k]->stride[d];
                continue;
            }
        }
        g->shape[nd] = y->shape[d];
        for (int k = 0; k < nops; k++) g->st[k][nd] = ops[k]->stride[d];
        nd++;
    }
    if (nd == 0) { g->shape[0] = 1; for (int k = 0; k < nops; k++) g->st[k][0] = 1; nd = 1; }
    g->ndim = nd;
    g->numel = 1;
    for (int d = 0; d < nd; d++) g->numel *= g->shape[d];
}

/* q = rem / n, returns rem % n, rem = q. 32-bit division when both fit: 64-bit division is a
 * long software sequence on the GPU. */
__device__ __forceinline__ int64_t dgk_divmod(int64_t &rem, int64_t n) {
    if ((((uint64_t)rem | (uint64_t)n) >> 32) == 0) {
        uint32_t r = (uint32_t)rem, nn = (uint32_t)n, q = r / nn;
        rem = q;
        return (int64_t)(r - q * nn);
    }
    int64_t q = rem / n, i = rem - q * n;
    rem = q;
    return i;
}

/* Element offsets of linear output index i for the first NOPS operands. The loop is unrolled
 * over DG_MAX_DIMS so geometry fields are read with constant indices (no local-memory copy). */
template <int NOPS>
__device__ __forceinline__ void dgk_offsets(const dgk_geom &g, int64_t i, int64_t *off) {
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] = 0;
    int64_t rem = i;
#pragma unroll
    for (int d = DG_MAX_DIMS - 1; d > 0; d--) {
        if (d >= g.ndim) continue;
        int64_t r = dgk_divmod(rem, g.shape[d]);
#pragma unroll
        for (int k = 0; k < NOPS; k++) off[k] += r * g.st[k][d];
    }
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] += rem * g.st[k][0];   /* dim 0: rem < shape[0], no mod */
}

/* ---- float16 / bfloat16 in kernels: storage types of their own (not uint16_t) so templates
 * tell them apart from raw 2-byte moves. The conversions are eager/half.h's bit functions
 * written for the device (round-to-nearest-even, NaN kept quiet, overflow to inf), so a cast
 * on the GPU gives the CPU's bits. The subnormal path rounds with one float add, as half.h
 * does; __fadd_rn keeps it exact under -ftz as well as without. ---- */
struct dgk_f16 { uint16_t bits; };
struct dgk_bf16 { uint16_t bits; };
__device__ __forceinline__ uint32_t dgk_f32_bits(float f) { return (uint32_t)__float_as_int(f); }
__device__ __forceinline__ float dgk_bits_f32(uint32_t u) { return __int_as_float((int)u); }
__device__ __forceinline__ float dgk_bf16_to_f32(uint16_t h) { return dgk_bits_f32((uint32_t)h << 16); }
__device__ __forceinline__ uint16_t dgk_f32_to_bf16(float f) {
    uint32_t u = dgk_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
__device__ __forceinline__ float dgk_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return dgk_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) return dgk_bits_f32(dgk_f32_bits(__fmul_rn((float)m, 0x1p-24f)) | sign);
    return dgk_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}
__device__ __forceinline__ uint16_t dgk_f32_to_f16(float f) {
    uint32_t u = dgk_f32_bits(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
    if (a < 0x38800000u) return (uint16_t)(sign | (dgk_f32_bits(__fadd_rn(dgk_bits_f32(a), 0.5f)) - 0x3f000000u));
    uint32_t odd = (a >> 13) & 1;
    a += 0xc8000fffu + odd;
    return (uint16_t)(sign | (a >> 13));
}

/* ---- dtype conversions with the CPU's rules (dg_load_as_double / dg_store_from_double in
 * eager/internal.h): every cast between different dtypes goes through double; a half is
 * stored from (float)v, as the CPU does. ---- */
template <typename T> __device__ __forceinline__ double dgk_to_double(T v) { return (double)v; }
template <typename T> __device__ __forceinline__ T dgk_from_double(double v) { return (T)v; }
template <> __device__ __forceinline__ uint8_t dgk_from_double<uint8_t>(double v) { return v != 0; }
template <> __device__ __forceinline__ double dgk_to_double<dgk_f16>(dgk_f16 v) { return dgk_f16_to_f32(v.bits); }
template <> __device__ __forceinline__ double dgk_to_double<dgk_bf16>(dgk_bf16 v) { return dgk_bf16_to_f32(v.bits); }
template <> __device__ __forceinline__ dgk_f16 dgk_from_double<dgk_f16>(double v) { return dgk_f16{ dgk_f32_to_f16((float)v) }; }
template <> __device__ __forceinline__ dgk_bf16 dgk_from_double<dgk_bf16>(double v) { return dgk_bf16{ dgk_f32_to_bf16((float)v) }; }

/* A cast element by element (copy.cu): through double, except from int64, which is converted with
 * one rounding and wraps into int32, as dg_store_from_i64 (eager/internal.h) does on the CPU. */
template <typename TS, typename TD> struct dgk_cast {
    static __device__ __forceinline__ TD run(TS v) { return dgk_from_double<TD>(dgk_to_double<TS>(v)); }
};
template <typename TD> struct dgk_cast<long long, TD> {
    static __device__ __forceinline__ TD run(long long v) { return dgk_from_double<TD>((double)v); }
};
template <> struct dgk_cast<long long, float> {
    static __device__ __forceinline__ float run(long long v) { return (float)v; }
};
template <> struct dgk_cast<long long, int32_t> {
    static __device__ __forceinline__ int32_t run(long long v) { return (int32_t)(uint32_t)(unsigned long long)v; }
};
template <> struct dgk_cast<long long, dgk_f16> {
    static __device__ __forceinline__ dgk_f16 run(long long v) { return dgk_f16{ dgk_f32_to_f16((float)v) }; }
};
template <> struct dgk_cast<long long, dgk_bf16> {
    static __device__ __forceinline__ dgk_bf16 run(long long v) { return dgk_bf16{ dgk_f32_to_bf16((float)v) }; }
};

/* Load element off of a tensor of runtime dtype dt as double (comparisons, where's cond). */
__device__ __forceinline__ double dgk_load_any(const void *p, int dt, int64_t off) {
    switch (dt) {
    case DG_F32: return ((const float *)p)[off];
    case DG_F64: return ((const double *)p)[off];
    case DG_I64: return (double)((const long long *)p)[off];
    case DG_I32: return ((const int32_t *)p)[off];
    case DG_BOOL: return ((const uint8_t *)p)[off];
    case DG_F16: return dgk_f16_to_f32(((const uint16_t *)p)[off]);
    case DG_BF16: return dgk_bf16_to_f32(((const uint16_t *)p)[off]);
    default: return 0;
    }
}

/* ---- arithmetic that must round like the CPU: gcc builds with -std=c11, which turns FMA
 * contraction off, while nvcc contracts a*b+c by default. These intrinsics are never fused. ---- */
__device__ __forceinline__ float dgk_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double dgk_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float dgk_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double dgk_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float dgk_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double dgk_sub(double a, double b) { return __dsub_rn(a, b); }

/* Host: the C type behind a dtype for template dispatch. F(T) is a macro taking the type. */
#define DGK_DISPATCH_ALL(dt, F)                      \
    switch (dt) {                                    \
    case DG_F32: F(float); break;                    \
    case DG_F64: F(double); break;                   \
    case DG_I64: F(long long); break;                \
    case DG_I32: F(int32_t); break;                  \
    case DG_BOOL: F(uint8_t); break;                 \
    default: break;                                  \
    }

static inline bool dgk_dtype_ok(dg_dtype dt) {
    return dt == DG_F32 || dt == DG_F64 || dt == DG_I64 || dt == DG_I32 || dt == DG_BOOL;
}

/* The same with the 2-byte floats: the dtypes fill, copy/cast, where's condition and the
 * comparisons take (every other entry gets half operands widened to f32, eager/half_via_f32.c). */
#define DGK_DISPATCH_ALL_HALF(dt, F)                 \
    switch (dt) {                                    \
    case DG_F16: F(dgk_f16); break;                  \
    case DG_BF16: F(dgk_bf16); break;                \
    default: DGK_DISPATCH_ALL(dt, F)                 \
    }
static inline bool dgk_dtype_ok_half(dg_dtype dt) { return dgk_dtype_ok(dt) || dt == DG_F16 || dt == DG_BF16; }

#endif
