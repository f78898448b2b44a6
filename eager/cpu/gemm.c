/* eager/cpu/gemm.c — matrix products. f32 goes to oneDNN's sgemm: it picks its AVX-512/AMX
 * kernels from the CPU it runs on (≈180 GFLOP/s per core here with no environment setting,
 * where Debian's OpenBLAS misdetects the CPU and gives ≈36). f64 exists for gradient checks
 * and uses a plain cache-friendly loop. */
#include "../backend.h"
#include <oneapi/dnnl/dnnl.h>

static void dgemm_plain(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                        const double *a, int64_t lda, const double *b, int64_t ldb,
                        double beta, double *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        double *ci = c + i * ldc;
        if (beta == 0) for (int64_t j = 0; j < n; j++) ci[j] = 0;
        else if (beta != 1) for (int64_t j = 0; j < n; j++) ci[j] *= beta;
        for (int64_t p = 0; p < k; p++) {
            double av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
            if (av == 0) continue;
            if (!tb) { const double *bp = b + p * ldb; for (int64_t j = 0; j < n; j++) ci[j] += av * bp[j]; }
            else for (int64_t j = 0; j < n; j++) ci[j] += av * b[j * ldb + p];
        }
    }
}

/* Products this small (LinearNet's 10x10 layers) finish in less time than oneDNN's sgemm
 * takes to set up: it allocates packing buffers on every call. A plain loop in f32 instead. */
#define SMALL_GEMM_FLOPS 32768
static void sgemm_small(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        if (beta == 0) for (int64_t j = 0; j < n; j++) ci[j] = 0;
        else if (beta != 1) for (int64_t j = 0; j < n; j++) ci[j] *= beta;
        for (int64_t p = 0; p < k; p++) {
            float av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
            if (!tb) { const float *bp = b + p * ldb; for (int64_t j = 0; j < n; j++) ci[j] += av * bp[j]; }
            else for (int64_t j = 0; j < n; j++) ci[j] += av * b[j * ldb + p];
        }
    }
}

int dg_cpu_gemm(const dg_backend *be, dg_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb, int64_t sb,
                double beta, void *c, int64_t ldc, int64_t sc, int64_t batch) {
    if (m == 0 || n == 0) return 0;
    for (int64_t i = 0; i < batch; i++) {
        if (dt == DG_F32) {
            const float *ap = (const float *)a + i * sa, *bp = (const float *)b + i * sb;
            float *cp = (float *)c + i * sc;
            if (k == 0) {  /* oneDNN rejects k == 0; the product is empty */
                for (int64_t r = 0; r < m; r++) for (int64_t j = 0; j < n; j++) cp[r * ldc + j] = beta == 0 ? 0 : (float)beta * cp[r * ldc + j];
                continue;
            }
            if (m * n * k <= SMALL_GEMM_FLOPS) {
                sgemm_small(ta, tb, m, n, k, (float)alpha, ap, lda, bp, ldb, (float)beta, cp, ldc);
                continue;
            }
            dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, (float)alpha, ap, lda, bp, ldb,
                                          (float)beta, cp, ldc);
            if (st != dnnl_success) {
                DG_ERR(DG_EINVAL, "gemm: oneDNN sgemm failed (status %d) for m=%lld n=%lld k=%lld", (int)st,
                       (long long)m, (long long)n, (long long)k);
                return DG_EINVAL;
            }
        } else if (dt == DG_F64) {
            dgemm_plain(ta, tb, m, n, k, alpha, (const double *)a + i * sa, lda, (const double *)b + i * sb, ldb,
                        beta, (double *)c + i * sc, ldc);
        } else {
            DG_ERR(DG_EUNSUPPORTED, "gemm: dtype %s not supported", dg_dtype_name(dt));
            return DG_EUNSUPPORTED;
        }
    }
    return 0;
}
