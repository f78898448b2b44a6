/* eager/cpu/elementwise.c — CPU kernels for unary and broadcasting binary ops (f32, f64), and
 * the comparisons. The op switch sits outside the row loop so each row is a tight loop the
 * compiler vectorises when strides are 1. */
#include "../backend.h"
#include "iter.h"
#include <math.h>

#define SQRT_2_OVER_PI 0.7978845608028654
#define INV_SQRT2 0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327

/* ROW(EXPR): y[i] = EXPR over a row, with a stride-1 fast path. X/A/B name the inputs. */
#define UN_ROW(T, EXPR) do {                                                     \
        T *y = (T *)p[0]; const T *xp = (const T *)p[1];                         \
        if (st[0] == 1 && st[1] == 1) {                                          \
            for (int64_t i = 0; i < len; i++) { T X = xp[i]; y[i] = (T)(EXPR); } \
        } else {                                                                 \
            for (int64_t i = 0; i < len; i++) { T X = xp[i * st[1]]; y[i * st[0]] = (T)(EXPR); } \
        }                                                                        \
    } while (0)

#define UNARY_KERNEL(T, SUF)                                                                 \
static void unary_rows_##SUF(dg_unary_op op, const dg_iter *it, int64_t r0, int64_t r1, T p0, T p1) { \
    char *p[2]; int64_t st[2];                                                               \
    for (int64_t r = r0; r < r1; r++) {                                                      \
        int64_t len = dg_iter_row(it, r, p, st);                                             \
        switch (op) {                                                                        \
        case DG_UN_EXP: UN_ROW(T, exp(X)); break;                                            \
        case DG_UN_LOG: UN_ROW(T, log(X)); break;                                            \
        case DG_UN_SQRT: UN_ROW(T, sqrt(X)); break;                                          \
        case DG_UN_ABS: UN_ROW(T, X < 0 ? -X : X); break;                                    \
        case DG_UN_SIGN: UN_ROW(T, (X > 0) - (X < 0)); break;                                \
        case DG_UN_RELU: UN_ROW(T, !(X <= 0) ? X : 0); break;                                    \
        case DG_UN_SIGMOID: UN_ROW(T, 1 / (1 + exp(-X))); break;                             \
        case DG_UN_TANH: UN_ROW(T, tanh(X)); break;                                          \
        case DG_UN_GELU: UN_ROW(T, 0.5 * X * (1 + erf(X * INV_SQRT2))); break;               \
        case DG_UN_GELU_TANH: UN_ROW(T, 0.5 * X * (1 + tanh(SQRT_2_OVER_PI * (X + 0.044715 * X * X * X)))); break; \
        case DG_UN_LEAKY_RELU: UN_ROW(T, X > 0 ? X : p0 * X); break;                         \
        case DG_UN_CLIP: UN_ROW(T, X < p0 ? p0 : (X > p1 ? p1 : X)); break;                  \
        case DG_UN_AFFINE: UN_ROW(T, p0 * X + p1); break;                                    \
        case DG_UN_RDIV: UN_ROW(T, p0 / X); break;                                           \
        case DG_UN_POWS: UN_ROW(T, pow(X, p0)); break;                                       \
        }                                                                                    \
    }                                                                                        \
}
UNARY_KERNEL(float, f32)
UNARY_KERNEL(double, f64)

int dg_cpu_unary(const dg_backend *be, dg_unary_op op, const dg_kview *x, dg_kview *y, double p0, double p1) {
    if (x->dtype != y->dtype || (x->dtype != DG_F32 && x->dtype != DG_F64)) {
        DG_ERR(DG_EUNSUPPORTED, "cpu unary op %d: dtype %s not supported", (int)op, dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    dg_iter it;
    const dg_kview *ops[2] = { y, x };
    dg_iter_init(&it, ops, 2);
    bool par = dg_iter_numel(&it) >= DG_PAR_MIN && it.rows > 1;
    if (!par) {
        if (x->dtype == DG_F32) unary_rows_f32(op, &it, 0, it.rows, (float)p0, (float)p1);
        else unary_rows_f64(op, &it, 0, it.rows, p0, p1);
        return 0;
    }
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < it.rows; r++) {
        if (x->dtype == DG_F32) unary_rows_f32(op, &it, r, r + 1, (float)p0, (float)p1);
        else unary_rows_f64(op, &it, r, r + 1, p0, p1);
    }
    return 0;
}

static inline double gelu_grad(double x) {
    double cdf = 0.5 * (1 + erf(x * INV_SQRT2));
    return cdf + x * INV_SQRT_2PI * exp(-0.5 * x * x);
}
static inline double gelu_tanh_grad(double x) {
    double u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
    double t = tanh(u);
    double du = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du;
}

#define BIN_ROW(T, EXPR) do {                                                          \
        T *y = (T *)p[0]; const T *ap = (const T *)p[1]; const T *bp = (const T *)p[2]; \
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {                                  \
            for (int64_t i = 0; i < len; i++) { T A = ap[i], B = bp[i]; y[i] = (T)(EXPR); } \
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {                           \
            T B = bp[0];                                                               \
            for (int64_t i = 0; i < len; i++) { T A = ap[i]; y[i] = (T)(EXPR); }       \
        } else {                                                                       \
            for (int64_t i = 0; i < len; i++) {                                        \
                T A = ap[i * st[1]], B = bp[i * st[2]]; y[i * st[0]] = (T)(EXPR);      \
            }                                                                          \
        }                                                                              \
    } while (0)

#define BINARY_KERNEL(T, SUF)                                                                \
static void binary_rows_##SUF(dg_binary_op op, const dg_iter *it, int64_t r0, int64_t r1, T p0, T p1) { \
    char *p[3]; int64_t st[3];                                                               \
    for (int64_t r = r0; r < r1; r++) {                                                      \
        int64_t len = dg_iter_row(it, r, p, st);                                             \
        switch (op) {                                                                        \
        case DG_BIN_ADD: BIN_ROW(T, A + B); break;                                           \
        case DG_BIN_ADD_RELU: BIN_ROW(T, !(A + B <= 0) ? A + B : 0); break;                  \
        case DG_BIN_SUB: BIN_ROW(T, A - B); break;                                           \
        case DG_BIN_MUL: BIN_ROW(T, A * B); break;                                           \
        case DG_BIN_DIV: BIN_ROW(T, A / B); break;                                           \
        case DG_BIN_MAX: BIN_ROW(T, A >= B ? A : B); break;                                  \
        case DG_BIN_MIN: BIN_ROW(T, A <= B ? A : B); break;                                  \
        case DG_BIN_POW: BIN_ROW(T, pow(A, B)); break;                                       \
        case DG_BIN_AXPBY: BIN_ROW(T, p0 * A + p1 * B); break;                               \
        case DG_BIN_RELU_GRAD: BIN_ROW(T, B > 0 ? A : 0); break;                             \
        case DG_BIN_LEAKY_RELU_GRAD: BIN_ROW(T, B > 0 ? A : p0 * A); break;                  \
        case DG_BIN_SIGMOID_GRAD: BIN_ROW(T, A * B * (1 - B)); break;                        \
        case DG_BIN_TANH_GRAD: BIN_ROW(T, A * (1 - B * B)); break;                           \
        case DG_BIN_GELU_GRAD: BIN_ROW(T, A * gelu_grad(B)); break;                          \
        case DG_BIN_GELU_TANH_GRAD: BIN_ROW(T, A * gelu_tanh_grad(B)); break;                \
        case DG_BIN_CLIP_GRAD: BIN_ROW(T, (B >= p0 && B <= p1) ? A : 0); break;              \
        default: break;                                                                      \
        }                                                                                    \
    }                                                                                        \
}
BINARY_KERNEL(float, f32)
BINARY_KERNEL(double, f64)


static int compare(dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y) {
    dg_iter it;
    const dg_kview *ops[3] = { y, a, b };
    dg_iter_init(&it, ops, 3);
    for (int64_t r = 0; r < it.rows; r++) {
        char *p[3]; int64_t st[3];
        int64_t len = dg_iter_row(&it, r, p, st);
        for (int64_t i = 0; i < len; i++) {
            double av = dg_load_as_double(p[1] + i * st[1] * (int64_t)it.esize[1], a->dtype);
            double bv = dg_load_as_double(p[2] + i * st[2] * (int64_t)it.esize[2], b->dtype);
            ((uint8_t *)p[0])[i * st[0]] = op == DG_BIN_GT ? av > bv : av == bv;
        }
    }
    return 0;
}

int dg_cpu_binary(const dg_backend *be, dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, double p0, double p1) {
    if (op == DG_BIN_GT || op == DG_BIN_EQ) return compare(op, a, b, y);
    if (a->dtype != y->dtype || b->dtype != y->dtype || (y->dtype != DG_F32 && y->dtype != DG_F64)) {
        DG_ERR(DG_EUNSUPPORTED, "cpu binary op %d: dtypes %s, %s -> %s not supported", (int)op,
               dg_dtype_name(a->dtype), dg_dtype_name(b->dtype), dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    dg_iter it;
    const dg_kview *ops[3] = { y, a, b };
    dg_iter_init(&it, ops, 3);
    bool par = dg_iter_numel(&it) >= DG_PAR_MIN && it.rows > 1;
    if (!par) {  /* the tiny-op path: no OpenMP region at all */
        if (y->dtype == DG_F32) binary_rows_f32(op, &it, 0, it.rows, (float)p0, (float)p1);
        else binary_rows_f64(op, &it, 0, it.rows, p0, p1);
        return 0;
    }
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < it.rows; r++) {
        if (y->dtype == DG_F32) binary_rows_f32(op, &it, r, r + 1, (float)p0, (float)p1);
        else binary_rows_f64(op, &it, r, r + 1, p0, p1);
    }
    return 0;
}
