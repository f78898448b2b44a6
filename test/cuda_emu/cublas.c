/* test/cuda_emu/cublas.c — the emulated cuBLAS (built as build/emu/lib/libcublas.so.13, which the
 * backend opens with dlopen): handles bound to a stream, the math mode, and the strided-batched
 * GEMMs written from the cuBLAS documentation: column-major storage, op(A) = A, A^T (A^H = A^T for
 * real types), C = alpha op(A) op(B) + beta C with C not read when beta is 0, the leading-dimension
 * rules (lda >= max(1, rows of A as stored), likewise ldb, ldc >= max(1, m)) and their
 * CUBLAS_STATUS_INVALID_VALUE. Products accumulate in double and round once; TF32 math rounds
 * the f32 operands to TF32's 10-bit mantissa first, as tensor cores do. cublasGemmStridedBatchedEx
 * takes float16 / bfloat16 matrices with CUBLAS_COMPUTE_32F: each product of two halves is exact
 * in f32, the sums accumulate in f32 (a tensor core's accumulator) and C is rounded to the half
 * type once, to nearest even (eager/half.h's conversions).
 *
 * Devices. A handle belongs to the device current at cublasCreate (cuBLAS binds its context to
 * that device and asks for one handle per device). cublasSetStream with a stream of another
 * device is refused with CUBLAS_STATUS_INVALID_VALUE: cuBLAS documents only SUCCESS and
 * NOT_INITIALIZED there and would take it, then fail every call whose kernel it launches on that
 * stream, but an unusable argument is what INVALID_VALUE means and the mistake is seen where it
 * is made. A GEMM called while another device is current fails with
 * CUBLAS_STATUS_EXECUTION_FAILED, cuBLAS's status for a kernel that could not be launched (its
 * kernel would go to the handle's stream, which is not the current device's). Matrices must be
 * memory the handle's device reaches: its own, or a peer's once peer access is enabled. */
#include "emu_internal.h"
#include <cublas_v2.h>
#include "../../eager/half.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cublasContext {
    cudaStream_t stream;
    cublasMath_t math;
    int device;             /* current at cublasCreate */
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    DGEMU_API();
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
    *h = calloc(1, sizeof **h);
    if (!*h) return CUBLAS_STATUS_ALLOC_FAILED;
    (*h)->device = dgemu_device();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    DGEMU_API();
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
    DGEMU_API();
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    int d = dgemu_stream_device(s);
    if (s && d >= 0 && d != h->device) {   /* NULL, the legacy stream, is every device's */
        fprintf(stderr, "cublas-emu: cublasSetStream: the stream belongs to gpu:%d, the handle to gpu:%d (one handle per "
                "device)\n", d, h->device);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s) {
    DGEMU_API();
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!s) return CUBLAS_STATUS_INVALID_VALUE;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    DGEMU_API();
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    int base = (int)m & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base < 0 || base > CUBLAS_TF32_TENSOR_OP_MATH) return CUBLAS_STATUS_INVALID_VALUE;
    h->math = m;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *m) {
    DGEMU_API();
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!m) return CUBLAS_STATUS_INVALID_VALUE;
    *m = h->math;
    return CUBLAS_STATUS_SUCCESS;
}

enum { T_F32, T_F64, T_F16, T_BF16 };
typedef struct gemm_work {
    bool f64, tf32;
    int type;                     /* T_*: the element type of A, B and C */
    cublasOperation_t ta, tb;
    int64_t m, n, k, lda, ldb, ldc, batch;
    long long sa, sb, sc;
    double alpha, beta;
    const void *a, *b;
    void *c;
} gemm_work;

/* f32 rounded to TF32 (10 explicit mantissa bits), to nearest even; inf/NaN kept */
static float tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

static double load(const gemm_work *w, const void *p, int64_t i) {
    if (w->f64) return ((const double *)p)[i];
    if (w->type == T_F16) return dg_f16_to_f32(((const uint16_t *)p)[i]);
    if (w->type == T_BF16) return dg_bf16_to_f32(((const uint16_t *)p)[i]);
    float v = ((const float *)p)[i];
    return w->tf32 ? tf32(v) : v;
}

/* One column of C for half matrices under CUBLAS_COMPUTE_32F: f32 accumulation, alpha and beta
 * applied in f32, one rounding to the half type. */
static void half_column(const gemm_work *w, const char *A, const char *B, char *C, int64_t j) {
    float *acc = calloc((size_t)w->m, sizeof *acc);
    if (!acc) { dgemu_fault(cudaErrorMemoryAllocation, "cublas gemm: out of host memory"); return; }
    if (w->alpha != 0)
        for (int64_t p = 0; p < w->k; p++) {
            float bv = (float)load(w, B, w->tb == CUBLAS_OP_N ? p + j * w->ldb : j + p * w->ldb);
            for (int64_t i = 0; i < w->m; i++)
                acc[i] += (float)load(w, A, w->ta == CUBLAS_OP_N ? i + p * w->lda : p + i * w->lda) * bv;
        }
    uint16_t *c = (uint16_t *)C;
    for (int64_t i = 0; i < w->m; i++) {
        float r = (float)w->alpha * acc[i];
        if (w->beta != 0) r += (float)w->beta * (float)load(w, C, i + j * w->ldc);
        c[i + j * w->ldc] = w->type == T_F16 ? dg_f32_to_f16(r) : dg_f32_to_bf16(r);
    }
    free(acc);
}

static int run_gemm(void *arg) {
    const gemm_work *w = arg;
    int64_t cols = w->n * w->batch;
#pragma omp parallel for schedule(static) if (w->m * w->n * w->k * w->batch > (1 << 16))
    for (int64_t t = 0; t < cols; t++) {
        int64_t bt = t / w->n, j = t % w->n;
        int es = w->f64 ? 8 : w->type >= T_F16 ? 2 : 4;
        const char *A = (const char *)w->a + bt * w->sa * es;
        const char *B = (const char *)w->b + bt * w->sb * es;
        char *C = (char *)w->c + bt * w->sc * es;
        if (w->type >= T_F16) { half_column(w, A, B, C, j); continue; }
        double *acc = calloc((size_t)w->m, sizeof *acc);
        if (!acc) { dgemu_fault(cudaErrorMemoryAllocation, "cublas gemm: out of host memory"); continue; }
        if (w->alpha != 0)
            for (int64_t p = 0; p < w->k; p++) {
                double bv = load(w, B, w->tb == CUBLAS_OP_N ? p + j * w->ldb : j + p * w->ldb);
                for (int64_t i = 0; i < w->m; i++)
                    acc[i] += load(w, A, w->ta == CUBLAS_OP_N ? i + p * w->lda : p + i * w->lda) * bv;
            }
        for (int64_t i = 0; i < w->m; i++) {
            double r = w->alpha * acc[i];
            if (w->beta != 0) r += w->beta * (w->f64 ? ((double *)C)[i + j * w->ldc] : ((float *)C)[i + j * w->ldc]);
            if (w->f64) ((double *)C)[i + j * w->ldc] = r;
            else ((float *)C)[i + j * w->ldc] = (float)r;
        }
        free(acc);
    }
    return DGEMU_DONE;
}

static cublasStatus_t gemm(cublasHandle_t h, int type, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                           int64_t k, double alpha, const void *a, int64_t lda, long long sa, const void *b, int64_t ldb,
                           long long sb, double beta, void *c, int64_t ldc, long long sc, int64_t batch) {
    bool f64 = type == T_F64;
    static const char *const names[] = { "cublasSgemmStridedBatched", "cublasDgemmStridedBatched", "cublasGemmStridedBatchedEx",
                                         "cublasGemmStridedBatchedEx" };
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T && ta != CUBLAS_OP_C) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T && tb != CUBLAS_OP_C))
        return CUBLAS_STATUS_INVALID_VALUE;
    int64_t arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
        ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    if (dgemu_sticky_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (dgemu_device() != h->device) {
        fprintf(stderr, "cublas-emu: %s: the handle belongs to gpu:%d but gpu:%d is current (cudaSetDevice to the handle's "
                "device first)\n", names[type], h->device, dgemu_device());
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    size_t es = f64 ? 8 : type >= T_F16 ? 2 : 4;
    int64_t acols = ta == CUBLAS_OP_N ? k : m, bcols = tb == CUBLAS_OP_N ? n : k;
    /* the last batch's matrices must be device memory (their stored extents) */
    size_t need_a = (size_t)(lda * (acols - 1) + arows), need_b = (size_t)(ldb * (bcols - 1) + brows),
           need_c = (size_t)(ldc * (n - 1) + m);
    if ((k > 0 && (!dgemu_is_device((const char *)a + (batch - 1) * sa * (long long)es, need_a * es) ||
                   !dgemu_is_device((const char *)b + (batch - 1) * sb * (long long)es, need_b * es))) ||
        !dgemu_is_device((const char *)c + (batch - 1) * sc * (long long)es, need_c * es) || !dgemu_is_device(c, need_c * es))
        return CUBLAS_STATUS_INVALID_VALUE;
    gemm_work *w = malloc(sizeof *w);
    if (!w) return CUBLAS_STATUS_ALLOC_FAILED;
    *w = (gemm_work){ f64, type == T_F32 && ((int)h->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH, type, ta, tb, m, n, k, lda, ldb, ldc, batch,
                      sa, sb, sc, alpha, beta, a, b, c };
    return dgemu_enqueue(h->stream, names[type], run_gemm, w, free) == cudaSuccess
               ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t cublasSgemmStridedBatched_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                                            int64_t k, const float *alpha, const float *A, int64_t lda, long long sa,
                                            const float *B, int64_t ldb, long long sb, const float *beta, float *C, int64_t ldc,
                                            long long sc, int64_t batch) {
    DGEMU_API();
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    return gemm(h, T_F32, ta, tb, m, n, k, *alpha, A, lda, sa, B, ldb, sb, *beta, C, ldc, sc, batch);
}
cublasStatus_t cublasDgemmStridedBatched_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                                            int64_t k, const double *alpha, const double *A, int64_t lda, long long sa,
                                            const double *B, int64_t ldb, long long sb, const double *beta, double *C,
                                            int64_t ldc, long long sc, int64_t batch) {
    DGEMU_API();
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    return gemm(h, T_F64, ta, tb, m, n, k, *alpha, A, lda, sa, B, ldb, sb, *beta, C, ldc, sc, batch);
}

cublasStatus_t cublasGemmStridedBatchedEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                                             int64_t k, const void *alpha, const void *A, cudaDataType at, int64_t lda,
                                             long long sa, const void *B, cudaDataType bt, int64_t ldb, long long sb,
                                             const void *beta, void *C, cudaDataType ct, int64_t ldc, long long sc,
                                             int64_t batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    DGEMU_API();
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP) return CUBLAS_STATUS_INVALID_VALUE;
    /* the configurations emulated (cuBLAS documents more): one type for A, B and C and an f32
     * compute type, whose alpha and beta are floats */
    if (at != bt || at != ct || (at != CUDA_R_16F && at != CUDA_R_16BF && at != CUDA_R_32F)) {
        fprintf(stderr, "cublas-emu: cublasGemmStridedBatchedEx: types %d/%d/%d are not an emulated combination\n", (int)at,
                (int)bt, (int)ct);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC) {
        fprintf(stderr, "cublas-emu: cublasGemmStridedBatchedEx: compute type %d is not emulated\n", (int)compute);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    int type = at == CUDA_R_16F ? T_F16 : at == CUDA_R_16BF ? T_BF16 : T_F32;
    return gemm(h, type, ta, tb, m, n, k, *(const float *)alpha, A, lda, sa, B, ldb, sb, *(const float *)beta, C, ldc, sc, batch);
}
