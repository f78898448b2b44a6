/* eager/cpu/elementwise.c — CPU kernels for unary and broadcasting binary ops (f32, f64, and
 * f16 / bf16 stored in 2 bytes and computed in f32), the integer ones, and the comparisons. The op switch sits outside the row loop so each row is a tight loop the
 * compiler vectorises when strides are 1. */
#include "../backend.h"
#include "iter.h"
#include <math.h>

#define SQRT_2_OVER_PI 0.7978845608028654
#define INV_SQRT2 0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327

/* How an element of storage type S becomes the compute type T and back: the identity for f32,
 * f64 and the integers, a conversion by bits for the 2-byte floats (eager/half.h), so one
 * kernel body serves every dtype. */
#define LD_same(v) (v)
#define ST_same(v) (v)
#define LD_bf16(v) dg_bf16_to_f32(v)
#define ST_bf16(v) dg_f32_to_bf16((float)(v))
#define LD_f16(v) dg_f16_to_f32(v)
#define ST_f16(v) dg_f32_to_f16((float)(v))

/* ROW(EXPR): y[i] = EXPR over a row, with a stride-1 fast path. X/A/B name the inputs. */
#define UN_ROW(S, T, LD, ST, EXPR) do {                                          \
        S *y = (S *)p[0]; const S *xp = (const S *)p[1];                         \
        if (st[0] == 1 && st[1] == 1) {                                          \
            for (int64_t i = 0; i < len; i++) { T X = LD(xp[i]); y[i] = ST((T)(EXPR)); } \
        } else {                                                                 \
            for (int64_t i = 0; i < len; i++) { T X = LD(xp[i * st[1]]); y[i * st[0]] = ST((T)(EXPR)); } \
        }                                                                        \
    } while (0)

/* NAME##_##SUF(op, it, r0, r1, p0, p1) over rows [r0, r1) of an iterator of NOPS operands of
 * element type T: for each row, a switch over op whose cases are the remaining arguments. */
#define ROWS_FN(NAME, OP_T, NOPS, T, SUF, ...)                                                     \
static void NAME##_##SUF(OP_T op, const dg_iter *it, int64_t r0, int64_t r1, T p0, T p1) {         \
    char *p[NOPS]; int64_t st[NOPS];                                                             \
    for (int64_t r = r0; r < r1; r++) {                                                          \
        int64_t len = dg_iter_row(it, r, p, st);                                                 \
        switch (op) { __VA_ARGS__ }                                                              \
    }                                                                                            \
}

#define UNARY_KERNEL(S, T, LD, ST, SUF) ROWS_FN(unary_rows, dg_unary_op, 2, T, SUF,                          \
        case DG_UN_EXP: UN_ROW(S, T, LD, ST, exp(X)); break;                                            \
        case DG_UN_LOG: UN_ROW(S, T, LD, ST, log(X)); break;                                            \
        case DG_UN_SQRT: UN_ROW(S, T, LD, ST, sqrt(X)); break;                                          \
        case DG_UN_ABS: UN_ROW(S, T, LD, ST, X < 0 ? -X : X); break;                                    \
        case DG_UN_SIGN: UN_ROW(S, T, LD, ST, (X > 0) - (X < 0)); break;                                \
        case DG_UN_RELU: UN_ROW(S, T, LD, ST, !(X <= 0) ? X : 0); break;                                    \
        case DG_UN_SIGMOID: UN_ROW(S, T, LD, ST, 1 / (1 + exp(-X))); break;                             \
        case DG_UN_TANH: UN_ROW(S, T, LD, ST, tanh(X)); break;                                          \
        case DG_UN_GELU: UN_ROW(S, T, LD, ST, 0.5 * X * (1 + erf(X * INV_SQRT2))); break;               \
        case DG_UN_GELU_TANH: UN_ROW(S, T, LD, ST, 0.5 * X * (1 + tanh(SQRT_2_OVER_PI * (X + 0.044715 * X * X * X)))); break; \
        case DG_UN_LEAKY_RELU: UN_ROW(S, T, LD, ST, X > 0 ? X : p0 * X); break;                         \
        case DG_UN_CLIP: UN_ROW(S, T, LD, ST, X < p0 ? p0 : (X > p1 ? p1 : X)); break;                  \
        case DG_UN_AFFINE: UN_ROW(S, T, LD, ST, p0 * X + p1); break;                                    \
        case DG_UN_RDIV: UN_ROW(S, T, LD, ST, p0 / X); break;                                           \
        case DG_UN_POWS: UN_ROW(S, T, LD, ST, pow(X, p0)); break;                                       \
        case DG_UN_ELU: UN_ROW(S, T, LD, ST, X > 0 ? X : p0 * expm1(X)); break;                          \
        case DG_UN_SOFTPLUS: UN_ROW(S, T, LD, ST, X * p0 > p1 ? X : log1p(exp(X * p0)) / p0); break;     \
        case DG_UN_LOG1P: UN_ROW(S, T, LD, ST, log1p(X)); break;                                        \
        case DG_UN_SILU: UN_ROW(S, T, LD, ST, X / (1 + exp(-X))); break;                                \
        case DG_UN_RSQRT: UN_ROW(S, T, LD, ST, 1 / sqrt(X)); break;                                     \
        case DG_UN_SIN: UN_ROW(S, T, LD, ST, sin(X)); break;                                            \
        case DG_UN_COS: UN_ROW(S, T, LD, ST, cos(X)); break;                                            \
    )
UNARY_KERNEL(float, float, LD_same, ST_same, f32)
UNARY_KERNEL(double, double, LD_same, ST_same, f64)
UNARY_KERNEL(uint16_t, float, LD_bf16, ST_bf16, bf16)
UNARY_KERNEL(uint16_t, float, LD_f16, ST_f16, f16)

/* ROWS##_f32 or ROWS##_f64 by DT over every row of the iterator IT, P0 and P1 in the element
 * type. Tiny ops stay on the calling thread with no OpenMP region at all; the rest share out
 * the rows. A macro rather than a function taking the row function, so that every call stays
 * direct. */
#define RUN_ROWS_RANGE(ROWS, DT, OP, IT, R0, R1, P0, P1)                                       \
    ((DT) == DG_F32 ? ROWS##_f32(OP, IT, R0, R1, (float)(P0), (float)(P1)) :                  \
     (DT) == DG_F64 ? ROWS##_f64(OP, IT, R0, R1, P0, P1) :                                      \
     (DT) == DG_BF16 ? ROWS##_bf16(OP, IT, R0, R1, (float)(P0), (float)(P1)) :                 \
                       ROWS##_f16(OP, IT, R0, R1, (float)(P0), (float)(P1)))
#define RUN_ROWS(ROWS, DT, OP, IT, P0, P1) do {                                                \
        if (dg_iter_numel(IT) < DG_PAR_MIN || (IT)->rows <= 1) {                              \
            RUN_ROWS_RANGE(ROWS, DT, OP, IT, 0, (IT)->rows, P0, P1);                          \
            break;                                                                            \
        }                                                                                     \
        _Pragma("omp parallel for schedule(static)")                                          \
        for (int64_t r_ = 0; r_ < (IT)->rows; r_++) RUN_ROWS_RANGE(ROWS, DT, OP, IT, r_, r_ + 1, P0, P1); \
    } while (0)

int dg_cpu_unary(const dg_backend *be, dg_unary_op op, const dg_kview *x, dg_kview *y, double p0, double p1) {
    if (x->dtype != y->dtype || !dg_dtype_is_float(x->dtype)) {
        DG_ERR(DG_EUNSUPPORTED, "cpu unary op %d: dtype %s not supported", (int)op, dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    dg_iter it;
    const dg_kview *ops[2] = { y, x };
    dg_iter_init(&it, ops, 2);
    RUN_ROWS(unary_rows, x->dtype, op, &it, p0, p1);
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

static inline double softplus_grad(double g, double x, double beta, double threshold) {
    if (x * beta > threshold) return g;
    double z = exp(x * beta);
    return g * z / (z + 1);
}
static inline double silu_grad(double x) {
    double s = 1 / (1 + exp(-x));
    return s * (1 + x * (1 - s));
}

#define BIN_ROW_S(S, T, LD, ST, EXPR) do {                                             \
        S *y = (S *)p[0]; const S *ap = (const S *)p[1]; const S *bp = (const S *)p[2]; \
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {                                  \
            for (int64_t i = 0; i < len; i++) { T A = LD(ap[i]), B = LD(bp[i]); y[i] = ST((T)(EXPR)); } \
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {                           \
            T B = LD(bp[0]);                                                           \
            for (int64_t i = 0; i < len; i++) { T A = LD(ap[i]); y[i] = ST((T)(EXPR)); } \
        } else {                                                                       \
            for (int64_t i = 0; i < len; i++) {                                        \
                T A = LD(ap[i * st[1]]), B = LD(bp[i * st[2]]); y[i * st[0]] = ST((T)(EXPR)); \
            }                                                                          \
        }                                                                              \
    } while (0)
#define BIN_ROW(T, EXPR) BIN_ROW_S(T, T, LD_same, ST_same, EXPR)

#define BINARY_KERNEL(S, T, LD, ST, SUF) ROWS_FN(binary_rows, dg_binary_op, 3, T, SUF,                      \
        case DG_BIN_ADD: BIN_ROW_S(S, T, LD, ST, A + B); break;                                           \
        case DG_BIN_ADD_RELU: BIN_ROW_S(S, T, LD, ST, !(A + B <= 0) ? A + B : 0); break;                  \
        case DG_BIN_SUB: BIN_ROW_S(S, T, LD, ST, A - B); break;                                           \
        case DG_BIN_MUL: BIN_ROW_S(S, T, LD, ST, A * B); break;                                           \
        case DG_BIN_DIV: BIN_ROW_S(S, T, LD, ST, A / B); break;                                           \
        case DG_BIN_MAX: BIN_ROW_S(S, T, LD, ST, A >= B || A != A ? A : B); break;  /* NaN from either */ \
        case DG_BIN_MIN: BIN_ROW_S(S, T, LD, ST, A <= B || A != A ? A : B); break;                        \
        case DG_BIN_POW: BIN_ROW_S(S, T, LD, ST, pow(A, B)); break;                                       \
        case DG_BIN_AXPBY: BIN_ROW_S(S, T, LD, ST, p0 * A + p1 * B); break;                               \
        case DG_BIN_RELU_GRAD: BIN_ROW_S(S, T, LD, ST, B > 0 ? A : 0); break;                             \
        case DG_BIN_LEAKY_RELU_GRAD: BIN_ROW_S(S, T, LD, ST, B > 0 ? A : p0 * A); break;                  \
        case DG_BIN_SIGMOID_GRAD: BIN_ROW_S(S, T, LD, ST, A * B * (1 - B)); break;                        \
        case DG_BIN_TANH_GRAD: BIN_ROW_S(S, T, LD, ST, A * (1 - B * B)); break;                           \
        case DG_BIN_GELU_GRAD: BIN_ROW_S(S, T, LD, ST, A * gelu_grad(B)); break;                          \
        case DG_BIN_GELU_TANH_GRAD: BIN_ROW_S(S, T, LD, ST, A * gelu_tanh_grad(B)); break;                \
        case DG_BIN_CLIP_GRAD: BIN_ROW_S(S, T, LD, ST, (B >= p0 && B <= p1) ? A : 0); break;              \
        case DG_BIN_ELU_GRAD: BIN_ROW_S(S, T, LD, ST, B > 0 ? A : A * p0 * exp(B)); break;                 \
        case DG_BIN_SOFTPLUS_GRAD: BIN_ROW_S(S, T, LD, ST, softplus_grad(A, B, p0, p1)); break;            \
        case DG_BIN_SILU_GRAD: BIN_ROW_S(S, T, LD, ST, A * silu_grad(B)); break;                          \
        default: break;                                                                      \
    )
BINARY_KERNEL(float, float, LD_same, ST_same, f32)
BINARY_KERNEL(double, double, LD_same, ST_same, f64)
BINARY_KERNEL(uint16_t, float, LD_bf16, ST_bf16, bf16)
BINARY_KERNEL(uint16_t, float, LD_f16, ST_f16, f16)

/* Integer arithmetic (the ops eager/ops/elementwise.c sends for i32/i64): wrapping like torch's,
 * done on the unsigned type because signed overflow is undefined in C. */
#define INT_BINARY_KERNEL(T, U, SUF) ROWS_FN(int_binary_rows, dg_binary_op, 3, T, SUF,          \
        case DG_BIN_ADD: BIN_ROW(T, (U)A + (U)B); break;                                     \
        case DG_BIN_SUB: BIN_ROW(T, (U)A - (U)B); break;                                     \
        case DG_BIN_MUL: BIN_ROW(T, (U)A * (U)B); break;                                     \
        case DG_BIN_MAX: BIN_ROW(T, A >= B ? A : B); break;                                  \
        case DG_BIN_MIN: BIN_ROW(T, A <= B ? A : B); break;                                  \
        default: break;                                                                      \
    )
INT_BINARY_KERNEL(int32_t, uint32_t, i32)
INT_BINARY_KERNEL(int64_t, uint64_t, i64)

static int int_binary(dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y) {
    if (op != DG_BIN_ADD && op != DG_BIN_SUB && op != DG_BIN_MUL && op != DG_BIN_MAX && op != DG_BIN_MIN) {
        DG_ERR(DG_EUNSUPPORTED, "cpu binary op %d: not defined on %s", (int)op, dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    dg_iter it;
    const dg_kview *ops[3] = { y, a, b };
    dg_iter_init(&it, ops, 3);
    if (y->dtype == DG_I32) int_binary_rows_i32(op, &it, 0, it.rows, 0, 0);
    else int_binary_rows_i64(op, &it, 0, it.rows, 0, 0);
    return 0;
}


/* greater / equal into bool. eager/ops/elementwise.c sends operands of one dtype (promoted first):
 * int64 pairs are compared as int64, since a double cannot tell values past 2^53 apart; every
 * other dtype is exact in double, which also serves operands of mixed dtypes. */
static int compare(dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y) {
    dg_iter it;
    const dg_kview *ops[3] = { y, a, b };
    dg_iter_init(&it, ops, 3);
    bool i64 = a->dtype == DG_I64 && b->dtype == DG_I64;
    for (int64_t r = 0; r < it.rows; r++) {
        char *p[3]; int64_t st[3];
        int64_t len = dg_iter_row(&it, r, p, st);
        if (i64) {
            const int64_t *ap = (const int64_t *)p[1], *bp = (const int64_t *)p[2];
            for (int64_t i = 0; i < len; i++) {
                int64_t av = ap[i * st[1]], bv = bp[i * st[2]];
                ((uint8_t *)p[0])[i * st[0]] = op == DG_BIN_GT ? av > bv : av == bv;
            }
            continue;
        }
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
    if (a->dtype == y->dtype && b->dtype == y->dtype && (y->dtype == DG_I32 || y->dtype == DG_I64)) return int_binary(op, a, b, y);
    if (a->dtype != y->dtype || b->dtype != y->dtype || !dg_dtype_is_float(y->dtype)) {
        DG_ERR(DG_EUNSUPPORTED, "cpu binary op %d: dtypes %s, %s -> %s not supported", (int)op,
               dg_dtype_name(a->dtype), dg_dtype_name(b->dtype), dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    dg_iter it;
    const dg_kview *ops[3] = { y, a, b };
    dg_iter_init(&it, ops, 3);
    RUN_ROWS(binary_rows, y->dtype, op, &it, p0, p1);
    return 0;
}
