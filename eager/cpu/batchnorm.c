/* eager/cpu/batchnorm.c — batch normalisation on the CPU backend (f32 and f64), forward and
 * backward, over x viewed as [n, c, inner] (contiguous; inner = H*W for images, 1 for [N, C]).
 *
 * Training: per channel, mean and biased variance over n*inner values (two passes, summed in
 * double, so a large mean does not cancel the variance away), written to save_mean and
 * save_invstd = 1/sqrt(var + eps). Eval: save_mean/save_invstd carry the running mean and the
 * running *variance* in, as backend.h specifies; they are only read.
 * Backward: save_invstd is always an inverse standard deviation (the op turns the running
 * variance into one for eval, since this entry has no eps). In training the gradient flows
 * through the batch statistics:
 *   gx = w * invstd / M * (M*gy - sum(gy) - xhat * sum(gy*xhat)),  M = n*inner;
 * in eval the statistics are constants: gx = gy * w * invstd.
 * Threads split channels: each channel's reduction and update touch only its own slices. The
 * per-channel sums are `omp simd` reductions (vector lanes of partial sums, still in double):
 * without the pragma the compiler keeps the strict order and the loops run scalar. */
#include "../backend.h"
#include "iter.h"
#include <math.h>

#define BN_KERNELS(T, SUF)                                                                          \
static void bn_fwd_##SUF(const T *x, const T *w, const T *b, T *y, T *mean, T *inv, bool training,   \
                         double eps, int64_t n, int64_t c, int64_t inner) {                          \
    _Pragma("omp parallel for if(n * c * inner >= DG_PAR_MIN) schedule(static)")                   \
    for (int64_t ch = 0; ch < c; ch++) {                                                           \
        double mu, is;                                                                             \
        if (training) {                                                                            \
            double s = 0, ss = 0, m = (double)(n * inner);                                         \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const T *p = x + (i * c + ch) * inner;                                             \
                _Pragma("omp simd reduction(+:s)")                                                 \
                for (int64_t j = 0; j < inner; j++) s += p[j];                                     \
            }                                                                                      \
            mu = m > 0 ? s / m : 0;                                                                \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const T *p = x + (i * c + ch) * inner;                                             \
                _Pragma("omp simd reduction(+:ss)")                                                \
                for (int64_t j = 0; j < inner; j++) { double d = p[j] - mu; ss += d * d; }         \
            }                                                                                      \
            is = 1.0 / sqrt((m > 0 ? ss / m : 0) + eps);                                           \
            mean[ch] = (T)mu;                                                                      \
            inv[ch] = (T)is;                                                                       \
        } else {                                                                                   \
            mu = mean[ch];                                                                         \
            is = 1.0 / sqrt((double)inv[ch] + eps);                                                \
        }                                                                                          \
        /* y = x * scale + shift, with the affine parameters folded in */                        \
        double scale = (w ? (double)w[ch] : 1.0) * is, shift = (b ? (double)b[ch] : 0.0) - mu * scale; \
        T sc = (T)scale, sh = (T)shift;                                                            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T *p = x + (i * c + ch) * inner; T *q = y + (i * c + ch) * inner;                \
            for (int64_t j = 0; j < inner; j++) q[j] = p[j] * sc + sh;                             \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
static void bn_bwd_##SUF(const T *x, const T *gy, const T *w, const T *mean, const T *inv, bool training, \
                         T *gx, T *gw, T *gb, int64_t n, int64_t c, int64_t inner) {                \
    _Pragma("omp parallel for if(n * c * inner >= DG_PAR_MIN) schedule(static)")                   \
    for (int64_t ch = 0; ch < c; ch++) {                                                           \
        double mu = mean[ch], is = inv[ch], sg = 0, sgx = 0, m = (double)(n * inner);              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T *p = x + (i * c + ch) * inner, *g = gy + (i * c + ch) * inner;                 \
            _Pragma("omp simd reduction(+:sg, sgx)")                                               \
            for (int64_t j = 0; j < inner; j++) { sg += g[j]; sgx += g[j] * ((p[j] - mu) * is); }  \
        }                                                                                          \
        if (gw) gw[ch] = (T)sgx;                                                                   \
        if (gb) gb[ch] = (T)sg;                                                                    \
        if (!gx) continue;                                                                         \
        double k = (w ? (double)w[ch] : 1.0) * is;                                                 \
        /* training: gx = k * (gy - mean(gy) - xhat * mean(gy*xhat)); eval: gx = k * gy */        \
        double a = training && m > 0 ? sg / m : 0, bq = training && m > 0 ? sgx / m : 0;           \
        /* gx = gy * k + (x - mu) * kx + k0: per-channel constants in double, the pass in T      \
         * (x - mu first, so a mean large against the spread does not cancel the term away) */    \
        T kg = (T)k, kx = (T)(-k * is * bq), k0 = (T)(-k * a), mt = (T)mu;                         \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T *p = x + (i * c + ch) * inner, *g = gy + (i * c + ch) * inner;                 \
            T *q = gx + (i * c + ch) * inner;                                                      \
            for (int64_t j = 0; j < inner; j++) q[j] = g[j] * kg + (p[j] - mt) * kx + k0;          \
        }                                                                                          \
    }                                                                                              \
}
BN_KERNELS(float, f32)
BN_KERNELS(double, f64)

static void *ptr_or_null(const dg_kview *t) { return t ? t->data : NULL; }

int dg_cpu_batch_norm(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y, dg_kview *save_mean,
                      dg_kview *save_invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    if (x->dtype == DG_F32)
        bn_fwd_f32(x->data, ptr_or_null(w), ptr_or_null(b), y->data, save_mean->data,
                   save_invstd->data, training, eps, n, c, inner);
    else if (x->dtype == DG_F64)
        bn_fwd_f64(x->data, ptr_or_null(w), ptr_or_null(b), y->data, save_mean->data,
                   save_invstd->data, training, eps, n, c, inner);
    else {
        DG_ERR(DG_EUNSUPPORTED, "batch_norm: dtype %s not supported on cpu", dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    return 0;
}

int dg_cpu_batch_norm_backward(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *w, const dg_kview *save_mean,
                               const dg_kview *save_invstd, bool training, dg_kview *gx, dg_kview *gw, dg_kview *gb,
                               int64_t n, int64_t c, int64_t inner) {
    if (x->dtype == DG_F32)
        bn_bwd_f32(x->data, gy->data, ptr_or_null(w), save_mean->data, save_invstd->data,
                   training, ptr_or_null(gx), ptr_or_null(gw), ptr_or_null(gb), n, c, inner);
    else if (x->dtype == DG_F64)
        bn_bwd_f64(x->data, gy->data, ptr_or_null(w), save_mean->data, save_invstd->data,
                   training, ptr_or_null(gx), ptr_or_null(gw), ptr_or_null(gb), n, c, inner);
    else {
        DG_ERR(DG_EUNSUPPORTED, "batch_norm: dtype %s not supported on cpu", dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    return 0;
}
