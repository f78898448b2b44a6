/* eager/cpu/update.c — the CPU backend's fused optimizer step: one pass over each parameter
 * applying eager/update_rule.h per element (parameter, gradient and state read and written
 * once, no temporaries), threads splitting the elements of large tensors. */
#include "../backend.h"
#include <omp.h>

/* below this many elements a tensor is updated by one thread: waking the team costs more */
#define PAR_MIN 32768

/* One kind's loop over [lo, hi) with the per-call scalars hoisted and restrict pointers, so
 * the compiler vectorises it (the rule's branches are loop-invariant). */
#define UPDATE_LOOPS(T)                                                                             \
static void update_range_##T(const dg_update_params *u, const dg_update_tensor *t, int64_t lo, int64_t hi) { \
    T *restrict p = (T *)t->p, *restrict s0 = (T *)t->s0, *restrict s1 = (T *)t->s1, *restrict s2 = (T *)t->s2; \
    const T *restrict g = (const T *)t->g;                                                          \
    const T wd = (T)u->weight_decay, ns = (T)(-t->step_size);                                       \
    switch (u->kind) {                                                                              \
    case DG_UPD_SGD:                                                                                \
        for (int64_t i = lo; i < hi; i++) dg_upd_sgd_##T(p, g, i, wd, ns);                          \
        break;                                                                                      \
    case DG_UPD_MOMENTUM: {                                                                         \
        const T mom = (T)u->momentum, damp1 = (T)(1 - u->dampening);                                \
        const bool fresh = t->fresh, nest = u->nesterov;                                            \
        for (int64_t i = lo; i < hi; i++) dg_upd_momentum_##T(p, g, s0, i, wd, mom, damp1, ns, fresh, nest); \
        break; }                                                                                    \
    case DG_UPD_ADAGRAD: {                                                                          \
        const T eps = (T)u->eps;                                                                    \
        for (int64_t i = lo; i < hi; i++) dg_upd_adagrad_##T(p, g, s0, i, wd, eps, ns);             \
        break; }                                                                                    \
    case DG_UPD_ADAM:                                                                               \
    case DG_UPD_ADAMW: {                                                                            \
        const bool adamw = u->kind == DG_UPD_ADAMW, ams = u->amsgrad;                               \
        const T decay = (T)(1 - u->lr * u->weight_decay), b1 = (T)u->beta1, c1 = (T)(1 - u->beta1); \
        const T b2 = (T)u->beta2, c2 = (T)(1 - u->beta2), bc2 = (T)t->bc2_sqrt, eps = (T)u->eps;    \
        for (int64_t i = lo; i < hi; i++)                                                           \
            dg_upd_adam_##T(p, g, s0, s1, s2, i, wd, adamw, ams, decay, b1, c1, b2, c2, bc2, eps, ns); \
        break; }                                                                                    \
    case DG_UPD_RMSPROP: {                                                                          \
        const T alpha = (T)u->alpha, c = (T)(1 - u->alpha), eps = (T)u->eps, mom = (T)u->momentum;  \
        const bool use_mom = u->momentum > 0, centered = u->centered;                               \
        for (int64_t i = lo; i < hi; i++)                                                           \
            dg_upd_rmsprop_##T(p, g, s0, s1, s2, i, wd, alpha, c, eps, mom, use_mom, centered, ns); \
        break; }                                                                                    \
    case DG_UPD_ADAMAX: {                                                                           \
        const T b1 = (T)u->beta1, c1 = (T)(1 - u->beta1), b2 = (T)u->beta2, eps = (T)u->eps;        \
        for (int64_t i = lo; i < hi; i++) dg_upd_adamax_##T(p, g, s0, s1, i, wd, b1, c1, b2, eps, ns); \
        break; }                                                                                    \
    case DG_UPD_NADAM: {                                                                            \
        const T b1 = (T)u->beta1, c1 = (T)(1 - u->beta1), b2 = (T)u->beta2, c2 = (T)(1 - u->beta2); \
        const T bc2 = (T)t->bc2_sqrt, eps = (T)u->eps, nsm = (T)(-t->step_size2);                   \
        for (int64_t i = lo; i < hi; i++)                                                           \
            dg_upd_nadam_##T(p, g, s0, s1, i, wd, b1, c1, b2, c2, bc2, eps, ns, nsm);               \
        break; }                                                                                    \
    case DG_UPD_ADADELTA: {                                                                         \
        const T rho = (T)u->rho, c = (T)(1 - u->rho), eps = (T)u->eps;                              \
        for (int64_t i = lo; i < hi; i++) dg_upd_adadelta_##T(p, g, s0, s1, i, wd, rho, c, eps, ns); \
        break; }                                                                                    \
    }                                                                                               \
}
UPDATE_LOOPS(float)
UPDATE_LOOPS(double)

int dg_cpu_fused_update(const dg_backend *be, const dg_update_params *u, dg_dtype dt, const dg_update_tensor *t, int n) {
    for (int k = 0; k < n; k++) {
        const dg_update_tensor *tk = &t[k];
        int64_t m = tk->n;
        /* a small tensor never enters an OpenMP region: even a region with if(false) costs
         * about a microsecond, more than updating a few hundred elements */
        int nt = m < PAR_MIN ? 1 : dg_threads();
        if (nt == 1) {
            if (dt == DG_F32) update_range_float(u, tk, 0, m);
            else update_range_double(u, tk, 0, m);
            continue;
        }
        #pragma omp parallel num_threads(nt)
        {
            int id = omp_get_thread_num(), cnt = omp_get_num_threads();
            int64_t chunk = (m + cnt - 1) / cnt, lo = id * chunk, hi = lo + chunk < m ? lo + chunk : m;
            if (lo < hi) {
                if (dt == DG_F32) update_range_float(u, tk, lo, hi);
                else update_range_double(u, tk, lo, hi);
            }
        }
    }
    return 0;
}
