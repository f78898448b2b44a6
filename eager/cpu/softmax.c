/* eager/cpu/softmax.c — softmax / log-softmax over the last axis of [rows, cols], and their
 * backward rules, computed stably (max subtracted). */
#include "../backend.h"
#include "iter.h"
#include <math.h>

#define SOFTMAX_KERNELS(T, SUF)                                                              \
static void softmax_##SUF(const T *x, T *y, int64_t rows, int64_t cols, bool lg) {           \
    _Pragma("omp parallel for if(rows * cols >= DG_PAR_MIN) schedule(static)")               \
    for (int64_t r = 0; r < rows; r++) {                                                     \
        const T *xr = x + r * cols; T *yr = y + r * cols;                                    \
        T mx = xr[0];                                                                        \
        for (int64_t j = 1; j < cols; j++) if (xr[j] > mx) mx = xr[j];                       \
        double s = 0;                                                                        \
        for (int64_t j = 0; j < cols; j++) { T e = (T)exp(xr[j] - mx); s += e; if (!lg) yr[j] = e; } \
        if (lg) { T ls = (T)log(s); for (int64_t j = 0; j < cols; j++) yr[j] = xr[j] - mx - ls; } \
        else { T inv = (T)(1.0 / s); for (int64_t j = 0; j < cols; j++) yr[j] *= inv; }       \
    }                                                                                        \
}                                                                                            \
static void softmax_bw_##SUF(const T *y, const T *gy, T *gx, int64_t rows, int64_t cols, bool lg) { \
    _Pragma("omp parallel for if(rows * cols >= DG_PAR_MIN) schedule(static)")               \
    for (int64_t r = 0; r < rows; r++) {                                                     \
        const T *yr = y + r * cols, *gr = gy + r * cols; T *xr = gx + r * cols;              \
        double s = 0;                                                                        \
        if (lg) {                                                                            \
            for (int64_t j = 0; j < cols; j++) s += gr[j];                                   \
            for (int64_t j = 0; j < cols; j++) xr[j] = (T)(gr[j] - exp(yr[j]) * s);          \
        } else {                                                                             \
            for (int64_t j = 0; j < cols; j++) s += (double)gr[j] * yr[j];                   \
            for (int64_t j = 0; j < cols; j++) xr[j] = (T)(yr[j] * (gr[j] - s));             \
        }                                                                                    \
    }                                                                                        \
}
SOFTMAX_KERNELS(float, f32)
SOFTMAX_KERNELS(double, f64)

int dg_cpu_softmax(const dg_backend *be, const dg_kview *x, dg_kview *y, int64_t rows, int64_t cols, bool lg) {
    if (x->dtype == DG_F32) softmax_f32(x->data, y->data, rows, cols, lg);
    else softmax_f64(x->data, y->data, rows, cols, lg);
    return 0;
}

int dg_cpu_softmax_backward(const dg_backend *be, const dg_kview *y, const dg_kview *gy, dg_kview *gx, int64_t rows, int64_t cols, bool lg) {
    if (y->dtype == DG_F32) softmax_bw_f32(y->data, gy->data, gx->data, rows, cols, lg);
    else softmax_bw_f64(y->data, gy->data, gx->data, rows, cols, lg);
    return 0;
}
