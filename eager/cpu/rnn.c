/* eager/cpu/rnn.c — one time step of a recurrent cell on the CPU backend, forward and backward
 * (the rnn_cell entries of eager/backend.h; the op in eager/ops/rnn.c does the GEMMs around
 * them). Each step's gate nonlinearities, the cell update and the padding mask are one pass
 * over [n, h], so a step costs its recurrent GEMM and one sweep of its gates:
 *
 *   RNN   h' = act(a)                                  a = gi (x W_ih^T + b_ih + h W_hh^T + b_hh)
 *   LSTM  i, f, g, o = sig(a_i), sig(a_f), tanh(a_g), sig(a_o)
 *         c' = f c + i g,  h' = o tanh(c')
 *   GRU   r, z = sig(gi_r + gh_r + b_hr), sig(gi_z + gh_z + b_hz)
 *         hn = gh_n + b_hn,  n = tanh(gi_n + r hn),  h' = (1 - z) n + z h
 *
 * torch.nn 1.13's formulas and gate order. The arithmetic is in the storage dtype (f32 or
 * f64), as torch's CPU cells compute. Rows are split across threads when a step is large
 * enough to pay for them. */
#include "../backend.h"
#include "cpu_kernels.h"
#include "iter.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

/* float32 gates: exp without a call or a branch, so the compiler vectorises a step's gate loop
 * (the scalar libm calls were a third of an LSTM step at hidden 256). Cody-Waite reduction by
 * ln 2 and Cephes' degree-6 polynomial on [-ln2/2, ln2/2]: within 2 ulp of expf over the clamped
 * range; sigmoid and tanh built on it are within a few 1e-8 absolute of libm's. float64 keeps
 * libm (its goldens hold to 1e-10). */
static inline float exp_f(float x) {
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;   /* selects: fminf calls kept the loop scalar */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;   /* round to nearest by adding 1.5 2^23 */
    float r = x - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { int32_t i; float f; } sc = { .i = ((int32_t)n + 127) << 23 };   /* 2^n; a union, which vectorises where memcpy did not */
    return p * sc.f;
}
static inline float sig_f(float v) { return 1.0f / (1.0f + exp_f(-v)); }
static inline float tanh_f(float v) { return 2.0f / (1.0f + exp_f(-2.0f * v)) - 1.0f; }
#define SIG_float(v) sig_f(v)
#define SIG_double(v) (1.0 / (1.0 + exp(-(v))))
#define TANH_float(v) tanh_f(v)
#define TANH_double(v) tanh(v)

#define RNN_CELL_KERNELS(T)                                                                          \
static void cell_fwd_##T(const dg_rnn_cell_args *a) {                                                \
    const int64_t n = a->n, h = a->h;                                                                \
    const int G = a->mode == DG_RNN_LSTM ? 4 : a->mode == DG_RNN_GRU ? 3 : 1;                         \
    const T *gi = a->gi, *gh = a->gh, *bhh = a->b_hh, *hp = a->h_prev, *cp = a->c_prev;              \
    T *hn = a->h_next, *cn = a->c_next, *y = a->y, *ws = a->ws;                                      \
    _Pragma("omp parallel for if(n * h * G >= DG_PAR_MIN) schedule(static)")                         \
    for (int64_t b = 0; b < n; b++) {                                                                \
        const T *ar = gi + b * G * h, *hr = hp + b * h;                                              \
        T *hnr = hn + b * h, *yr = y + b * h;                                                        \
        if (a->len && a->t >= a->len[b]) {   /* padding: the state passes through, y is 0 */         \
            memmove(hnr, hr, (size_t)h * sizeof(T));                                                 \
            if (cn) memmove(cn + b * h, cp + b * h, (size_t)h * sizeof(T));                          \
            memset(yr, 0, (size_t)h * sizeof(T));                                                    \
            continue;                                                                                \
        }                                                                                            \
        switch (a->mode) {                                                                           \
        case DG_RNN_TANH: case DG_RNN_RELU: {                                                        \
            T *w = ws + b * h;                                                                       \
            _Pragma("omp simd")                                                                      \
            for (int64_t j = 0; j < h; j++) {                                                        \
                T v = ar[j];                                                                         \
                v = a->mode == DG_RNN_TANH ? TANH_##T(v) : (v > 0 ? v : (T)0);                       \
                hnr[j] = v; yr[j] = v; w[j] = v;                                                     \
            }                                                                                        \
            break;                                                                                   \
        }                                                                                            \
        case DG_RNN_LSTM: {                                                                          \
            const T *cr = cp + b * h;                                                                \
            T *cnr = cn + b * h, *w = ws + b * 5 * h;                                                \
            _Pragma("omp simd")   /* the rows of one step never overlap: vectorise the gates */     \
            for (int64_t j = 0; j < h; j++) {                                                        \
                T ig = SIG_##T(ar[j]), fg = SIG_##T(ar[h + j]);                                      \
                T gg = TANH_##T(ar[2 * h + j]), og = SIG_##T(ar[3 * h + j]);                         \
                T c = fg * cr[j] + ig * gg, tc = TANH_##T(c), hv = og * tc;                          \
                cnr[j] = c; hnr[j] = hv; yr[j] = hv;                                                 \
                w[j] = ig; w[h + j] = fg; w[2 * h + j] = gg; w[3 * h + j] = og; w[4 * h + j] = tc;   \
            }                                                                                        \
            break;                                                                                   \
        }                                                                                            \
        default: {   /* GRU */                                                                       \
            const T *gr = gh + b * 3 * h;                                                            \
            T *w = ws + b * 4 * h;                                                                   \
            _Pragma("omp simd")                                                                      \
            for (int64_t j = 0; j < h; j++) {                                                        \
                T br = bhh ? bhh[j] : 0, bz = bhh ? bhh[h + j] : 0, bn = bhh ? bhh[2 * h + j] : 0;   \
                T r = SIG_##T(ar[j] + gr[j] + br), z = SIG_##T(ar[h + j] + gr[h + j] + bz);          \
                T hnv = gr[2 * h + j] + bn, nv = TANH_##T(ar[2 * h + j] + r * hnv);                  \
                T hv = (1 - z) * nv + z * hr[j];                                                     \
                hnr[j] = hv; yr[j] = hv;                                                             \
                w[j] = r; w[h + j] = z; w[2 * h + j] = nv; w[3 * h + j] = hnv;                       \
            }                                                                                        \
        }                                                                                            \
        }                                                                                            \
    }                                                                                                \
}                                                                                                    \
                                                                                                     \
static void cell_bwd_##T(const dg_rnn_cell_args *a) {                                                \
    const int64_t n = a->n, h = a->h;                                                                \
    const int G = a->mode == DG_RNN_LSTM ? 4 : a->mode == DG_RNN_GRU ? 3 : 1;                         \
    const T *ws = a->ws, *hp = a->h_prev, *cp = a->c_prev, *dy = a->dy;                              \
    T *dh = a->dh, *dc = a->dc, *dgi = a->dgi, *dgh = a->dgh;                                        \
    _Pragma("omp parallel for if(n * h * G >= DG_PAR_MIN) schedule(static)")                         \
    for (int64_t b = 0; b < n; b++) {                                                                \
        T *dhr = dh + b * h, *dgr = dgi + b * G * h;                                                 \
        if (a->len && a->t >= a->len[b]) {   /* padding: dh, dc pass through; y was a constant 0 */  \
            memset(dgr, 0, (size_t)(G * h) * sizeof(T));                                             \
            if (dgh) memset(dgh + b * G * h, 0, (size_t)(G * h) * sizeof(T));                        \
            continue;                                                                                \
        }                                                                                            \
        const T *dyr = dy ? dy + b * h : NULL;                                                       \
        switch (a->mode) {                                                                           \
        case DG_RNN_TANH: case DG_RNN_RELU: {                                                        \
            const T *w = ws + b * h;                                                                 \
            for (int64_t j = 0; j < h; j++) {                                                        \
                T g = dhr[j] + (dyr ? dyr[j] : 0), v = w[j];                                         \
                dgr[j] = a->mode == DG_RNN_TANH ? g * (1 - v * v) : (v > 0 ? g : (T)0);              \
                dhr[j] = 0;                                                                          \
            }                                                                                        \
            break;                                                                                   \
        }                                                                                            \
        case DG_RNN_LSTM: {                                                                          \
            const T *w = ws + b * 5 * h, *cr = cp + b * h;                                           \
            T *dcr = dc + b * h;                                                                     \
            for (int64_t j = 0; j < h; j++) {                                                        \
                T g = dhr[j] + (dyr ? dyr[j] : 0);                                                   \
                T ig = w[j], fg = w[h + j], gg = w[2 * h + j], og = w[3 * h + j], tc = w[4 * h + j]; \
                T dcv = dcr[j] + g * og * (1 - tc * tc);                                             \
                dgr[j] = dcv * gg * ig * (1 - ig);                                                   \
                dgr[h + j] = dcv * cr[j] * fg * (1 - fg);                                            \
                dgr[2 * h + j] = dcv * ig * (1 - gg * gg);                                           \
                dgr[3 * h + j] = g * tc * og * (1 - og);                                             \
                dcr[j] = dcv * fg;                                                                   \
                dhr[j] = 0;                                                                          \
            }                                                                                        \
            break;                                                                                   \
        }                                                                                            \
        default: {   /* GRU */                                                                       \
            const T *w = ws + b * 4 * h, *hr = hp + b * h;                                           \
            T *dghr = dgh + b * 3 * h;                                                               \
            for (int64_t j = 0; j < h; j++) {                                                        \
                T g = dhr[j] + (dyr ? dyr[j] : 0);                                                   \
                T r = w[j], z = w[h + j], nv = w[2 * h + j], hnv = w[3 * h + j];                     \
                T dn = g * (1 - z) * (1 - nv * nv);                                                  \
                T dz = g * (hr[j] - nv) * z * (1 - z);                                               \
                T dr = dn * hnv * r * (1 - r);                                                       \
                dgr[j] = dr; dgr[h + j] = dz; dgr[2 * h + j] = dn;                                   \
                dghr[j] = dr; dghr[h + j] = dz; dghr[2 * h + j] = dn * r;                            \
                dhr[j] = g * z;                                                                      \
            }                                                                                        \
        }                                                                                            \
        }                                                                                            \
    }                                                                                                \
}

RNN_CELL_KERNELS(float)
RNN_CELL_KERNELS(double)

static int check_args(const dg_rnn_cell_args *a, const char *what) {
    if (a->dt != DG_F32 && a->dt != DG_F64) {
        DG_RAISE(DG_EUNSUPPORTED, "%s: the CPU cells take float32 and float64, got %s", what, dg_dtype_name(a->dt));
        return DG_EUNSUPPORTED;
    }
    if ((unsigned)a->mode > DG_RNN_GRU) {
        DG_RAISE(DG_EINVAL, "%s: bad mode %d", what, a->mode);
        return DG_EINVAL;
    }
    return 0;
}

int dg_cpu_rnn_cell(const dg_backend *be, const dg_rnn_cell_args *a) {
    (void)be;
    int rc = check_args(a, "rnn_cell");
    if (rc) return rc;
    if (a->dt == DG_F32) cell_fwd_float(a);
    else cell_fwd_double(a);
    return 0;
}

int dg_cpu_rnn_cell_backward(const dg_backend *be, const dg_rnn_cell_args *a) {
    (void)be;
    int rc = check_args(a, "rnn_cell_backward");
    if (rc) return rc;
    if (a->dt == DG_F32) cell_bwd_float(a);
    else cell_bwd_double(a);
    return 0;
}
