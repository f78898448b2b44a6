/* eager/cpu/batchnorm.c — batch normalisation on the CPU backend, forward and backward, over x
 * viewed as [n, c, inner] (contiguous; inner = H*W for images, 1 for [N, C]), optionally with
 * the ReLU that follows it in every ResNet block fused into the same pass.
 *
 * Storage: f32 and f64, and f16 / bf16 activations loaded to f32, computed in f32 and rounded
 * once on store (eager/half.h): mixed precision keeps its activations in 2 bytes from the
 * convolution through the normalisation to the next convolution, with no f32 copy between.
 * The per-channel tensors (weight, bias, statistics, their gradients) are f32 for half x (the
 * norm layers keep f32 parameters under autocast and O2); the shared half wrappers widen the rare
 * half ones (eager/half_via_f32.c, as cpu/half.c asks).
 *
 * Training: per channel, mean and biased variance over n*inner values (two passes, summed in
 * double, so a large mean does not cancel the variance away), written to save_mean and
 * save_invstd = 1/sqrt(var + eps). Eval: save_mean/save_invstd carry the running mean and the
 * running *variance* in, as backend.h specifies; they are only read.
 * Backward: save_invstd is always an inverse standard deviation (the op turns the running
 * variance into one for eval, since this entry has no eps). In training the gradient flows
 * through the batch statistics:
 *   gx = w * invstd / M * (M*gy - sum(gy) - xhat * sum(gy*xhat)),  M = n*inner;
 * in eval the statistics are constants: gx = gy * w * invstd. With the ReLU fused, gy is first
 * masked by the saved output (y > 0), exactly what relu's own backward does, so the fused pair
 * is bit-identical to batch_norm followed by relu.
 * Threads split channels: each channel's reduction and update touch only its own slices. The
 * per-channel sums are `omp simd` reductions (vector lanes of partial sums, still in double):
 * without the pragma the compiler keeps the strict order and the loops run scalar. */
#include "../backend.h"
#include "../half.h"
#include "iter.h"
#include <math.h>
#include <string.h>

#define LD_same(v) (v)
#define ST_same(v) (v)
#define LD_bf16(v) dg_bf16_to_f32(v)
#define ST_bf16(v) dg_f32_to_bf16(v)
#define LD_f16(v) dg_f16_to_f32(v)
#define ST_f16(v) dg_f32_to_f16(v)
/* relu as the elementwise kernel computes it: -0 and negatives to +0, NaN kept */
#define RELU(v) (!((v) <= 0) ? (v) : 0)
/* relu's gradient g * (y > 0) as relu's backward gives it (+0 where masked, even for a NaN g),
 * by bits rather than a select: with ResNet's small late planes (3x3) most of the work is in
 * the scalar tail of each row, where GCC turns a select into a branch that a random mask
 * mispredicts half the time (measured: the fused backward at 4x the unfused one's time). */
static inline float relu_mask_float(float g, float y) {
    uint32_t u;
    memcpy(&u, &g, sizeof u);
    u &= -(uint32_t)(y > 0);
    memcpy(&g, &u, sizeof u);
    return g;
}
static inline double relu_mask_double(double g, double y) {
    uint64_t u;
    memcpy(&u, &g, sizeof u);
    u &= -(uint64_t)(y > 0);
    memcpy(&g, &u, sizeof u);
    return g;
}

/* S: storage of x, y, gy, gx; T: the per-channel tensors and the per-element arithmetic. */
#define BN_KERNELS(S, T, LD, ST, SUF)                                                               \
static void bn_fwd_##SUF(const S *x, const T *w, const T *b, S *y, T *mean, T *inv, bool training,   \
                         bool relu, double eps, int64_t n, int64_t c, int64_t inner) {               \
    _Pragma("omp parallel for if(n * c * inner >= DG_PAR_MIN) schedule(static)")                   \
    for (int64_t ch = 0; ch < c; ch++) {                                                           \
        double mu, is;                                                                             \
        if (training) {                                                                            \
            double s = 0, ss = 0, m = (double)(n * inner);                                         \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const S *p = x + (i * c + ch) * inner;                                             \
                _Pragma("omp simd reduction(+:s)")                                                 \
                for (int64_t j = 0; j < inner; j++) s += LD(p[j]);                                 \
            }                                                                                      \
            mu = m > 0 ? s / m : 0;                                                                \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const S *p = x + (i * c + ch) * inner;                                             \
                _Pragma("omp simd reduction(+:ss)")                                                \
                for (int64_t j = 0; j < inner; j++) { double d = LD(p[j]) - mu; ss += d * d; }     \
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
            const S *p = x + (i * c + ch) * inner; S *q = y + (i * c + ch) * inner;                \
            if (relu) {                                                                            \
                _Pragma("omp simd")                                                                \
                for (int64_t j = 0; j < inner; j++) { T v = LD(p[j]) * sc + sh; q[j] = ST(RELU(v)); } \
            } else                                                                                 \
                for (int64_t j = 0; j < inner; j++) q[j] = ST(LD(p[j]) * sc + sh);                 \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
/* yr: the fused relu's output (its mask), or NULL */                                            \
static void bn_bwd_##SUF(const S *x, const S *yr, const S *gy, const T *w, const T *mean, const T *inv, \
                         bool training, S *gx, T *gw, T *gb, int64_t n, int64_t c, int64_t inner) { \
    _Pragma("omp parallel for if(n * c * inner >= DG_PAR_MIN) schedule(static)")                   \
    for (int64_t ch = 0; ch < c; ch++) {                                                           \
        double mu = mean[ch], is = inv[ch], sg = 0, sgx = 0, m = (double)(n * inner);              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const S *p = x + (i * c + ch) * inner, *g = gy + (i * c + ch) * inner;                 \
            if (yr) {                                                                              \
                const S *r = yr + (i * c + ch) * inner;                                            \
                _Pragma("omp simd reduction(+:sg, sgx)")                                           \
                for (int64_t j = 0; j < inner; j++) {                                              \
                    T gm = relu_mask_##T(LD(g[j]), LD(r[j]));                                      \
                    sg += gm; sgx += gm * ((LD(p[j]) - mu) * is);                                  \
                }                                                                                  \
            } else {                                                                               \
                _Pragma("omp simd reduction(+:sg, sgx)")                                           \
                for (int64_t j = 0; j < inner; j++) { T gv = LD(g[j]); sg += gv; sgx += gv * ((LD(p[j]) - mu) * is); } \
            }                                                                                      \
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
            const S *p = x + (i * c + ch) * inner, *g = gy + (i * c + ch) * inner;                 \
            S *q = gx + (i * c + ch) * inner;                                                      \
            if (yr) {                                                                              \
                const S *r = yr + (i * c + ch) * inner;                                            \
                _Pragma("omp simd")                                                                \
                for (int64_t j = 0; j < inner; j++) {                                              \
                    T gm = relu_mask_##T(LD(g[j]), LD(r[j]));                                      \
                    q[j] = ST(gm * kg + (LD(p[j]) - mt) * kx + k0);                                \
                }                                                                                  \
            } else                                                                                 \
                for (int64_t j = 0; j < inner; j++) q[j] = ST(LD(g[j]) * kg + (LD(p[j]) - mt) * kx + k0); \
        }                                                                                          \
    }                                                                                              \
}
BN_KERNELS(float, float, LD_same, ST_same, f32)
BN_KERNELS(double, double, LD_same, ST_same, f64)
BN_KERNELS(uint16_t, float, LD_bf16, ST_bf16, bf16)
BN_KERNELS(uint16_t, float, LD_f16, ST_f16, f16)

static void *ptr_or_null(const dg_kview *t) { return t ? t->data : NULL; }

static int unsupported(const char *op, dg_dtype dt) {
    DG_ERR(DG_EUNSUPPORTED, "%s: dtype %s not supported on cpu", op, dg_dtype_name(dt));
    return DG_EUNSUPPORTED;
}

/* The kernels' call for x's storage; for half x the per-channel views must be f32 here. */
#define BN_DISPATCH(dt, F, ...)                                                                    \
    switch (dt) {                                                                                  \
    case DG_F32: F##_f32(__VA_ARGS__); return 0;                                                   \
    case DG_F64: F##_f64(__VA_ARGS__); return 0;                                                   \
    case DG_BF16: F##_bf16(__VA_ARGS__); return 0;                                                 \
    case DG_F16: F##_f16(__VA_ARGS__); return 0;                                                   \
    default: return unsupported("batch_norm", dt);                                                 \
    }

static int bn_forward(const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y, dg_kview *save_mean,
                      dg_kview *save_invstd, bool training, bool relu, double eps, int64_t n, int64_t c, int64_t inner) {
    BN_DISPATCH(x->dtype, bn_fwd, x->data, ptr_or_null(w), ptr_or_null(b), y->data, save_mean->data, save_invstd->data,
                training, relu, eps, n, c, inner)
}

static int bn_backward(const dg_kview *x, const dg_kview *yr, const dg_kview *gy, const dg_kview *w, const dg_kview *save_mean,
                       const dg_kview *save_invstd, bool training, dg_kview *gx, dg_kview *gw, dg_kview *gb,
                       int64_t n, int64_t c, int64_t inner) {
    BN_DISPATCH(x->dtype, bn_bwd, x->data, ptr_or_null(yr), gy->data, ptr_or_null(w), save_mean->data, save_invstd->data,
                training, ptr_or_null(gx), ptr_or_null(gw), ptr_or_null(gb), n, c, inner)
}

int dg_cpu_batch_norm(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y, dg_kview *save_mean,
                      dg_kview *save_invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    return bn_forward(x, w, b, y, save_mean, save_invstd, training, false, eps, n, c, inner);
}

int dg_cpu_batch_norm_relu(const dg_backend *be, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y, dg_kview *save_mean,
                           dg_kview *save_invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    return bn_forward(x, w, b, y, save_mean, save_invstd, training, true, eps, n, c, inner);
}

int dg_cpu_batch_norm_backward(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *w, const dg_kview *save_mean,
                               const dg_kview *save_invstd, bool training, dg_kview *gx, dg_kview *gw, dg_kview *gb,
                               int64_t n, int64_t c, int64_t inner) {
    return bn_backward(x, NULL, gy, w, save_mean, save_invstd, training, gx, gw, gb, n, c, inner);
}

int dg_cpu_batch_norm_relu_backward(const dg_backend *be, const dg_kview *x, const dg_kview *y, const dg_kview *gy, const dg_kview *w,
                                    const dg_kview *save_mean, const dg_kview *save_invstd, bool training, dg_kview *gx, dg_kview *gw,
                                    dg_kview *gb, int64_t n, int64_t c, int64_t inner) {
    return bn_backward(x, y, gy, w, save_mean, save_invstd, training, gx, gw, gb, n, c, inner);
}
