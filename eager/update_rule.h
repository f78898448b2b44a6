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
#include <dygraph/extension.h>

#ifndef DG_HOSTDEV
#define DG_HOSTDEV
#endif

/* dg_update_kind, dg_update_params and dg_update_tensor are public (dygraph/extension.h). */

/* Per kind, element i, in T (float or double; SQRT and FABS are T's). Branches depend only on
 * per-call scalars, so a CPU loop over i vectorises once they are hoisted. NaN propagates
 * through the maxima as through torch.maximum / torch.amax. */
#define DG_UPDATE_RULE(T, SQRT, FABS)                                                              \
static DG_HOSTDEV inline void dg_upd_sgd_##T(T *p, const T *g, int64_t i, T wd, T neg_step) {    \
    T w = p[i], d = g[i];                                                                         \
    if (wd != 0) d = d + wd * w;                                                                  \
    p[i] = w + neg_step * d;                                                                      \
}                                                                                                 \
/* damp1 = 1 - dampening (exactly 1 without dampening, so that case rounds as before) */          \
static DG_HOSTDEV inline void dg_upd_momentum_##T(T *p, const T *g, T *buf, int64_t i, T wd, T mom, \
                                                  T damp1, T neg_step, bool fresh, bool nesterov) { \
    T w = p[i], d = g[i];                                                                         \
    if (wd != 0) d = d + wd * w;                                                                  \
    T b = fresh ? d : buf[i] * mom + damp1 * d;                                                   \
    buf[i] = b;                                                                                   \
    T step = nesterov ? d + mom * b : b;                                                          \
    p[i] = w + neg_step * step;                                                                   \
}                                                                                                 \
static DG_HOSTDEV inline void dg_upd_adagrad_##T(T *p, const T *g, T *sum, int64_t i, T wd, T eps, T neg_step) { \
    T w = p[i], d = g[i];                                                                         \
    if (wd != 0) d = d + wd * w;                                                                  \
    T s = sum[i] + d * d;                                                                         \
    sum[i] = s;                                                                                   \
    p[i] = w + neg_step * (d / (SQRT(s) + eps));                                                  \
}                                                                                                 \
/* adamw: decoupled decay p *= decay (= 1 - lr wd); else L2 decay d += wd p.                      \
 * amsgrad: vmax = max(vmax, v) and the denominator uses vmax. */                                 \
static DG_HOSTDEV inline void dg_upd_adam_##T(T *p, const T *g, T *m, T *v, T *vmax, int64_t i, T wd, bool adamw, \
                                              bool amsgrad, T decay, T b1, T c1, T b2, T c2, T bc2_sqrt, T eps, \
                                              T neg_step) {                                      \
    T w = p[i], d = g[i];                                                                         \
    if (wd != 0) { if (adamw) w = w * decay; else d = d + wd * w; }                               \
    T mi = m[i] * b1 + c1 * d;                                                                    \
    T vi = v[i] * b2 + c2 * (d * d);                                                              \
    m[i] = mi;                                                                                    \
    v[i] = vi;                                                                                    \
    if (amsgrad) {                                                                                \
        T mx = vmax[i];                                                                           \
        if (vi > mx || vi != vi) mx = vi;                                                         \
        vmax[i] = mx;                                                                             \
        vi = mx;                                                                                  \
    }                                                                                             \
    T denom = SQRT(vi) / bc2_sqrt + eps;                                                          \
    p[i] = w + neg_step * (mi / denom);                                                           \
}                                                                                                 \
/* torch.optim.RMSprop: sq = alpha sq + (1-alpha) d^2; centered: ga = alpha ga + (1-alpha) d and  \
 * avg = sqrt(sq - ga^2), else sqrt(sq); avg += eps; momentum: buf = mom buf + d / avg, p -= lr buf; \
 * else p -= lr d / avg. */                                                                       \
static DG_HOSTDEV inline void dg_upd_rmsprop_##T(T *p, const T *g, T *sq, T *buf, T *ga, int64_t i, T wd, T alpha, \
                                                 T c, T eps, T mom, bool use_mom, bool centered, T neg_step) { \
    T w = p[i], d = g[i];                                                                         \
    if (wd != 0) d = d + wd * w;                                                                  \
    T s = sq[i] * alpha + c * (d * d);                                                            \
    sq[i] = s;                                                                                    \
    T avg;                                                                                        \
    if (centered) {                                                                               \
        T a = ga[i] * alpha + c * d;                                                              \
        ga[i] = a;                                                                                \
        avg = SQRT(s - a * a);                                                                    \
    } else {                                                                                      \
        avg = SQRT(s);                                                                            \
    }                                                                                             \
    avg = avg + eps;                                                                              \
    if (use_mom) {                                                                                \
        T b = buf[i] * mom + d / avg;                                                             \
        buf[i] = b;                                                                               \
        p[i] = w + neg_step * b;                                                                  \
    } else {                                                                                      \
        p[i] = w + neg_step * (d / avg);                                                          \
    }                                                                                             \
}                                                                                                 \
/* torch.optim.Adamax: m = b1 m + (1-b1) d; u = max(b2 u, |d| + eps); p -= lr / (1 - b1^t) m / u */ \
static DG_HOSTDEV inline void dg_upd_adamax_##T(T *p, const T *g, T *m, T *u, int64_t i, T wd, T b1, T c1, T b2, \
                                                T eps, T neg_step) {                             \
    T w = p[i], d = g[i];                                                                         \
    if (wd != 0) d = d + wd * w;                                                                  \
    T mi = m[i] * b1 + c1 * d;                                                                    \
    m[i] = mi;                                                                                    \
    T ui = u[i] * b2, bound = FABS(d) + eps;                                                      \
    if (bound > ui || bound != bound) ui = bound;                                                 \
    u[i] = ui;                                                                                    \
    p[i] = w + neg_step * (mi / ui);                                                              \
}                                                                                                 \
/* torch.optim.NAdam: m, v as Adam's; denom = sqrt(v / bc2) + eps;                                \
 * p -= step_g d / denom, then p -= step_m m / denom (two roundings, as PyTorch's two addcdiv_) */ \
static DG_HOSTDEV inline void dg_upd_nadam_##T(T *p, const T *g, T *m, T *v, int64_t i, T wd, T b1, T c1, T b2, \
                                               T c2, T bc2, T eps, T neg_step_g, T neg_step_m) { \
    T w = p[i], d = g[i];                                                                         \
    if (wd != 0) d = d + wd * w;                                                                  \
    T mi = m[i] * b1 + c1 * d;                                                                    \
    T vi = v[i] * b2 + c2 * (d * d);                                                              \
    m[i] = mi;                                                                                    \
    v[i] = vi;                                                                                    \
    T denom = SQRT(vi / bc2) + eps;                                                               \
    w = w + neg_step_g * (d / denom);                                                             \
    p[i] = w + neg_step_m * (mi / denom);                                                         \
}                                                                                                 \
/* torch.optim.Adadelta: sq = rho sq + (1-rho) d^2; std = sqrt(sq + eps);                        \
 * delta = sqrt(acc + eps) / std * d; acc = rho acc + (1-rho) delta^2; p -= lr delta */           \
static DG_HOSTDEV inline void dg_upd_adadelta_##T(T *p, const T *g, T *sq, T *acc, int64_t i, T wd, T rho, T c, \
                                                  T eps, T neg_step) {                           \
    T w = p[i], d = g[i];                                                                         \
    if (wd != 0) d = d + wd * w;                                                                  \
    T s = sq[i] * rho + c * (d * d);                                                              \
    sq[i] = s;                                                                                    \
    T std_ = SQRT(s + eps);                                                                       \
    T delta = SQRT(acc[i] + eps) / std_ * d;                                                      \
    acc[i] = acc[i] * rho + c * (delta * delta);                                                  \
    p[i] = w + neg_step * delta;                                                                  \
}                                                                                                 \
/* One element of one tensor, dispatching on the kind (the CUDA kernel's entry). */               \
static DG_HOSTDEV inline void dg_update_elem_##T(const dg_update_params *u, const dg_update_tensor *t, int64_t i) { \
    T *p = (T *)t->p, *s0 = (T *)t->s0, *s1 = (T *)t->s1, *s2 = (T *)t->s2;                         \
    const T *g = (const T *)t->g;                                                                   \
    T wd = (T)u->weight_decay, ns = (T)(-t->step_size);                                             \
    switch (u->kind) {                                                                              \
    case DG_UPD_SGD: dg_upd_sgd_##T(p, g, i, wd, ns); break;                                        \
    case DG_UPD_MOMENTUM:                                                                           \
        dg_upd_momentum_##T(p, g, s0, i, wd, (T)u->momentum, (T)(1 - u->dampening), ns, t->fresh, u->nesterov); \
        break;                                                                                      \
    case DG_UPD_ADAGRAD: dg_upd_adagrad_##T(p, g, s0, i, wd, (T)u->eps, ns); break;                 \
    case DG_UPD_ADAM:                                                                               \
    case DG_UPD_ADAMW:                                                                              \
        dg_upd_adam_##T(p, g, s0, s1, s2, i, wd, u->kind == DG_UPD_ADAMW, u->amsgrad, (T)(1 - u->lr * u->weight_decay), \
                        (T)u->beta1, (T)(1 - u->beta1), (T)u->beta2, (T)(1 - u->beta2), (T)t->bc2_sqrt, (T)u->eps, ns); \
        break;                                                                                      \
    case DG_UPD_RMSPROP:                                                                            \
        dg_upd_rmsprop_##T(p, g, s0, s1, s2, i, wd, (T)u->alpha, (T)(1 - u->alpha), (T)u->eps, (T)u->momentum, \
                           u->momentum > 0, u->centered, ns);                                       \
        break;                                                                                      \
    case DG_UPD_ADAMAX:                                                                             \
        dg_upd_adamax_##T(p, g, s0, s1, i, wd, (T)u->beta1, (T)(1 - u->beta1), (T)u->beta2, (T)u->eps, ns); \
        break;                                                                                      \
    case DG_UPD_NADAM:                                                                              \
        dg_upd_nadam_##T(p, g, s0, s1, i, wd, (T)u->beta1, (T)(1 - u->beta1), (T)u->beta2, (T)(1 - u->beta2), \
                         (T)t->bc2_sqrt, (T)u->eps, ns, (T)(-t->step_size2));                       \
        break;                                                                                      \
    case DG_UPD_ADADELTA:                                                                           \
        dg_upd_adadelta_##T(p, g, s0, s1, i, wd, (T)u->rho, (T)(1 - u->rho), (T)u->eps, ns);        \
        break;                                                                                      \
    }                                                                                               \
}

DG_UPDATE_RULE(float, sqrtf, fabsf)
DG_UPDATE_RULE(double, sqrt, fabs)

#endif
