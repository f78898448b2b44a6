/* eager/cuda/gemm.cu — the row-major batched GEMM entry (C[b] = alpha op(A[b]) op(B[b]) +
 * beta C[b]) on cuBLAS. cuBLAS is column-major, and a row-major matrix is its transpose seen
 * column-major, so C^T = op(B)^T op(A)^T is one cuBLAS call with A and B swapped and the same
 * transpose flags. The 64-bit strided-batched API takes the caller's int64 sizes as they are
 * (matmul folds batches into m, which can pass 2^31). The handle is dg_cuda_cublas(), bound
 * to the compute stream; f32 runs in the default math mode (products round like the CPU's sgemm
 * up to summation order) unless dg_set_allow_tf32(true) asked for TF32 tensor cores.
 * float16 / bfloat16 go to cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F: tensor cores
 * (on GPUs that have them), products and sums in f32, C rounded once on store, as the CPU's
 * widened sgemm does up to summation order. */
#include "kernel_util.cuh"

/* k == 0: the product is empty, C = beta * C (beta == 0 writes zeros, NaNs in C included),
 * as dg_cpu_gemm does without asking the GEMM library */
template <typename T>
__global__ void scale_kernel(T *c, int64_t m, int64_t n, int64_t ldc, int64_t sc, int64_t batch, T beta, bool zero) {
    DGK_FOR(t, m * n * batch) {
        int64_t j = t % n, r = t / n, i = r % m, b = r / m;
        T *p = c + b * sc + i * ldc + j;
        *p = zero ? (T)0 : beta * *p;
    }
}
/* the 2-byte floats: beta * c in f32, rounded once */
template <typename T>
__global__ void half_scale_kernel(T *c, int64_t m, int64_t n, int64_t ldc, int64_t sc, int64_t batch, float beta, bool zero) {
    DGK_FOR(t, m * n * batch) {
        int64_t j = t % n, r = t / n, i = r % m, b = r / m;
        T *p = c + b * sc + i * ldc + j;
        *p = dgk_from_double<T>(zero ? 0.0 : (double)dgk_mul(beta, (float)dgk_to_double<T>(*p)));
    }
}

/* cuBLAS wants ld >= rows of the column-major stored matrix even when only one column is
 * read; the ops pass any ld for a matrix with a single row or column, so raise it there.
 * Anything else is passed as is, and cuBLAS reports a bad one. */
static int64_t fix_ld(int64_t ld, int64_t rows, int64_t cols) {
    int64_t need = rows > 1 ? rows : 1;
    return (ld < need && cols <= 1) ? need : ld;
}

extern "C" int dg_cuda_gemm(const dg_backend *be, dg_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                            const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb, int64_t sb,
                            double beta, void *c, int64_t ldc, int64_t sc, int64_t batch) {
    DG_CUDA_ENTER(be);
    if (dt != DG_F32 && dt != DG_F64 && !dg_dtype_is_half(dt)) {
        DG_ERR(DG_EUNSUPPORTED, "cuda gemm: dtype %s not supported", dg_dtype_name(dt));
        return DG_EUNSUPPORTED;
    }
    if (m <= 0 || n <= 0 || batch <= 0) return 0;
    cudaStream_t st = dg_cuda_stream();
    if (k <= 0) {
        int64_t total = m * n * batch;
        if (dt == DG_F32)
            DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, st, scale_kernel<float>)((float *)c, m, n, ldc, sc, batch, (float)beta, beta == 0);
        else if (dt == DG_F16)
            DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, st, half_scale_kernel<dgk_f16>)((dgk_f16 *)c, m, n, ldc, sc, batch, (float)beta, beta == 0);
        else if (dt == DG_BF16)
            DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, st, half_scale_kernel<dgk_bf16>)((dgk_bf16 *)c, m, n, ldc, sc, batch, (float)beta, beta == 0);
        else
            DGK_LAUNCH(dgk_blocks(total), DGK_THREADS, 0, st, scale_kernel<double>)((double *)c, m, n, ldc, sc, batch, beta, beta == 0);
        return DG_CUDA(cudaGetLastError());
    }
    /* column-major operands: first = B as stored (tb ? k x n : n x k), second = A as stored
     * (ta ? m x k : k x m), result C^T n x m */
    cublasOperation_t op1 = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op2 = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    int64_t ld1 = tb ? fix_ld(ldb, k, n) : fix_ld(ldb, n, k);
    int64_t ld2 = ta ? fix_ld(lda, m, k) : fix_ld(lda, k, m);
    int64_t ldo = fix_ld(ldc, n, m);
    cublasHandle_t h = dg_cuda_cublas();
    if (dt == DG_F32) {
        int rc = DG_CUBLAS(dg_cublas.set_math_mode(h, dg_get_allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        if (rc) return rc;
        float al = (float)alpha, be = (float)beta;
        return DG_CUBLAS(dg_cublas.sgemm_strided_batched(h, op1, op2, n, m, k, &al, (const float *)b, ld1, sb,
                                                      (const float *)a, ld2, sa, &be, (float *)c, ldo, sc, batch));
    }
    if (dg_dtype_is_half(dt)) {
        cudaDataType t = dt == DG_F16 ? CUDA_R_16F : CUDA_R_16BF;
        float al = (float)alpha, be = (float)beta;
        return DG_CUBLAS(dg_cublas.gemm_strided_batched_ex(h, op1, op2, n, m, k, &al, b, t, ld1, sb, a, t, ld2, sa, &be, c, t, ldo,
                                                           sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    return DG_CUBLAS(dg_cublas.dgemm_strided_batched(h, op1, op2, n, m, k, &alpha, (const double *)b, ld1, sb,
                                                  (const double *)a, ld2, sa, &beta, (double *)c, ldo, sc, batch));
}
