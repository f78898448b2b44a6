/* eager/cpu/gemm.c — matrix products. f32 goes to oneDNN's sgemm: it picks its AVX-512/AMX
 * kernels from the CPU it runs on (≈180 GFLOP/s per core here with no environment setting,
 * where Debian's OpenBLAS misdetects the CPU and gives ≈36). f64 exists for gradient checks
 * and uses a plain cache-friendly loop; f16 / bf16 are widened to f32 around the sgemm. */
#include "cpu_kernels.h"
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

/* f16 / bf16: each product's operands are widened into f32 buffers (the span a matrix covers
 * with its leading dimension), multiplied by the f32 path and the result rounded back once, so
 * the sums accumulate in f32. */
static void widen(const uint16_t *h, float *f, int64_t n, dg_dtype dt) {
    if (dt == DG_BF16) for (int64_t i = 0; i < n; i++) f[i] = dg_bf16_to_f32(h[i]);
    else for (int64_t i = 0; i < n; i++) f[i] = dg_f16_to_f32(h[i]);
}
static int gemm_half(const dg_backend *be, dg_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                     const uint16_t *a, int64_t lda, int64_t sa, const uint16_t *b, int64_t ldb, int64_t sb,
                     double beta, uint16_t *c, int64_t ldc, int64_t sc, int64_t batch) {
    int64_t span_a = k && m ? ((ta ? k : m) - 1) * lda + (ta ? m : k) : 0;
    int64_t span_b = k && n ? ((tb ? n : k) - 1) * ldb + (tb ? k : n) : 0;
    int64_t span_c = (m - 1) * ldc + n;
    float *fa = dg_block_alloc((size_t)(span_a + 1) * sizeof(float)), *fb = dg_block_alloc((size_t)(span_b + 1) * sizeof(float));
    float *fc = dg_block_alloc((size_t)span_c * sizeof(float));
    int rc = 0;
    if (!fa || !fb || !fc) { DG_ERR(DG_ENOMEM, "gemm: no memory for the f32 copies of %s operands", dg_dtype_name(dt)); rc = DG_ENOMEM; }
    for (int64_t i = 0; i < batch && rc == 0; i++) {
        widen(a + i * sa, fa, span_a, dt);
        widen(b + i * sb, fb, span_b, dt);
        uint16_t *cp = c + i * sc;
        if (beta != 0) widen(cp, fc, span_c, dt);
        rc = dg_cpu_gemm(be, DG_F32, ta, tb, m, n, k, alpha, fa, lda, 0, fb, ldb, 0, beta, fc, ldc, 0, 1);
        for (int64_t r = 0; r < m && rc == 0; r++)
            for (int64_t j = 0; j < n; j++)
                cp[r * ldc + j] = dt == DG_BF16 ? dg_f32_to_bf16(fc[r * ldc + j]) : dg_f32_to_f16(fc[r * ldc + j]);
    }
    dg_block_free(fa); dg_block_free(fb); dg_block_free(fc);
    return rc;
}

int dg_cpu_gemm(const dg_backend *be, dg_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb, int64_t sb,
                double beta, void *c, int64_t ldc, int64_t sc, int64_t batch) {
    if (m == 0 || n == 0) return 0;
    if (dg_dtype_is_half(dt)) return gemm_half(be, dt, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
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
