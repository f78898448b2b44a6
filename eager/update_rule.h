/* eager/update_rule.h — the optimizers' per-element update rules, written once and compiled by
 * every backend: the CPU loop (eager/cpu/update.c) and the CUDA multi-tensor kernel
 * (eager/cuda/update.cu, which defines DG_HOSTDEV as __device__ before including this file).
 * The arithmetic follows PyTorch 1.13's single-tensor optimizers operation by operation, in the
 * parameter's dtype, so a step rounds the same on every device. */
#ifndef DG_EAGER_UPDATE_RULE_H
#define DG_EAGER_UPDATE_RULE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifndef DG_HOSTDEV
#define DG_HOSTDEV
#endif

typedef enum dg_update_kind {
    DG_UPD_SGD, DG_UPD_MOMENTUM, DG_UPD_ADAGRAD, DG_UPD_ADAM, DG_UPD_ADAMW
} dg_update_kind;

/* What is the same for every tensor of one step. */
typedef struct dg_update_params {
    dg_update_kind kind;
    double lr, weight_decay;
    double momentum; bool nesterov;     /* momentum */
    double beta1, beta2, eps;           /* adam/adamw; eps also adagrad */
} dg_update_params;

/* One parameter: contiguous p, g and state buffers of n elements, and its per-step scalars. */
typedef struct dg_update_tensor {
    void *p;
    const void *g;
    void *s0, *s1;            /* momentum buffer | adagrad sum | adam exp_avg, exp_avg_sq */
    int64_t n;
    double step_size;         /* sgd/momentum: lr; adagrad: lr / (1 + (t-1) lr_decay); adam: lr / (1 - b1^t) */
    double bc2_sqrt;          /* adam: sqrt(1 - b2^t) */
    bool fresh;               /* momentum: the buffer starts as the first d */
} dg_update_tensor;

/* One element i of one tensor, in T (float or double; SQRT is T's square root). */
#define DG_UPDATE_RULE(T, SQRT)                                                                        \
static DG_HOSTDEV inline void dg_update_elem_##T(const dg_update_params *u, const dg_update_tensor *t, int64_t i) { \
    T *p = (T *)t->p, *s0 = (T *)t->s0, *s1 = (T *)t->s1;                                           \
    const T *g = (const T *)t->g;                                                                   \
    T w = p[i], d = g[i];                                                                           \
    const T wd = (T)u->weight_decay;                                                                \
    if (u->kind == DG_UPD_ADAMW) { if (wd != 0) w = w * (T)(1 - u->lr * u->weight_decay); }        \
    else if (wd != 0) d = d + wd * w;                                                               \
    switch (u->kind) {                                                                              \
    case DG_UPD_SGD:                                                                                \
        w = w + (T)(-t->step_size) * d;                                                             \
        break;                                                                                      \
    case DG_UPD_MOMENTUM: {                                                                         \
        T b = t->fresh ? d : s0[i] * (T)u->momentum + d;                                            \
        s0[i] = b;                                                                                  \
        T step = u->nesterov ? d + (T)u->momentum * b : b;                                          \
        w = w + (T)(-t->step_size) * step;                                                          \
        break; }                                                                                    \
    case DG_UPD_ADAGRAD: {                                                                          \
        T sum = s0[i] + d * d;                                                                      \
        s0[i] = sum;                                                                                \
        w = w + (T)(-t->step_size) * (d / (SQRT(sum) + (T)u->eps));                                 \
        break; }                                                                                    \
    case DG_UPD_ADAM:                                                                               \
    case DG_UPD_ADAMW: {                                                                            \
        T m = s0[i] * (T)u->beta1 + (T)(1 - u->beta1) * d;                                          \
        T v = s1[i] * (T)u->beta2 + (T)(1 - u->beta2) * (d * d);                                    \
        s0[i] = m;                                                                                  \
        s1[i] = v;                                                                                  \
        T denom = SQRT(v) / (T)t->bc2_sqrt + (T)u->eps;                                             \
        w = w + (T)(-t->step_size) * (m / denom);                                                   \
        break; }                                                                                    \
    }                                                                                               \
    p[i] = w;                                                                                       \
}

DG_UPDATE_RULE(float, sqrtf)
DG_UPDATE_RULE(double, sqrt)

#endif
