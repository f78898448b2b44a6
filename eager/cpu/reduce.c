/* eager/cpu/reduce.c — sum/max/min/argmax/argmin over any set of axes. The kept axes become
 * the outer loop (one output element per iteration, split across threads) and the reduced
 * axes the inner walk; sums of f32 accumulate in double. */
#include "../backend.h"
#include "iter.h"
#include <math.h>

typedef struct red_plan {
    int nk, nr;                         /* kept dims, reduced dims */
    int64_t kshape[DG_MAX_DIMS], kstride[DG_MAX_DIMS], ystride[DG_MAX_DIMS];
    int64_t rshape[DG_MAX_DIMS], rstride[DG_MAX_DIMS];
    int64_t nout, nred;
} red_plan;

static void plan(const dg_kview *x, const dg_kview *y, red_plan *p) {
    memset(p, 0, sizeof *p);
    p->nout = p->nred = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        if (y->shape[d] == 1) {
            p->rshape[p->nr] = x->shape[d]; p->rstride[p->nr++] = x->stride[d]; p->nred *= x->shape[d];
        } else {
            p->kshape[p->nk] = x->shape[d]; p->kstride[p->nk] = x->stride[d]; p->ystride[p->nk++] = y->stride[d];
            p->nout *= x->shape[d];
        }
    }
}

#define REDUCE_KERNEL(T, SUF)                                                                   \
static void reduce_range_##SUF(dg_reduce_op op, const T *xb, char *yb, const red_plan *p, int64_t lo, int64_t hi) { \
    for (int64_t o = lo; o < hi; o++) {                                                         \
        int64_t xo = 0, yo = 0, rem = o;                                                        \
        for (int d = p->nk - 1; d >= 0; d--) {                                                  \
            int64_t i = rem % p->kshape[d]; rem /= p->kshape[d];                                \
            xo += i * p->kstride[d]; yo += i * p->ystride[d];                                   \
        }                                                                                       \
        double acc = op == DG_RED_SUM ? 0.0 : (op == DG_RED_MAX || op == DG_RED_ARGMAX ? -INFINITY : INFINITY); \
        int64_t best = 0; bool nan_seen = false;                                                \
        int64_t inner = p->nr ? p->rshape[p->nr - 1] : 1, ist = p->nr ? p->rstride[p->nr - 1] : 0; \
        int64_t outer = inner ? p->nred / inner : 0;   /* an empty reduced axis: nothing to read */ \
        for (int64_t r = 0; r < outer; r++) {                                                   \
            int64_t xr = xo, q = r;                                                             \
            for (int d = p->nr - 2; d >= 0; d--) { xr += (q % p->rshape[d]) * p->rstride[d]; q /= p->rshape[d]; } \
            const T *xp = xb + xr;                                                              \
            if (op == DG_RED_SUM) {                                                             \
                double s = 0;                                                                   \
                if (ist == 1) for (int64_t i = 0; i < inner; i++) s += xp[i];                   \
                else for (int64_t i = 0; i < inner; i++) s += xp[i * ist];                      \
                acc += s;                                                                       \
            } else {                                                                            \
                for (int64_t i = 0; i < inner; i++) {                                           \
                    double v = xp[i * ist];                                                     \
                    bool better = (op == DG_RED_MAX || op == DG_RED_ARGMAX) ? v > acc : v < acc; \
                    if (isnan(v)) { if (!nan_seen) { nan_seen = true; acc = v; best = r * inner + i; } } \
                    else if (!nan_seen && better) { acc = v; best = r * inner + i; }            \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
        if (op == DG_RED_ARGMAX || op == DG_RED_ARGMIN) ((int64_t *)yb)[yo] = best;             \
        else ((T *)yb)[yo] = (T)acc;                                                            \
    }                                                                                           \
}                                                                                               \
/* small reductions never enter an OpenMP region (about a microsecond even with if(false)) */ \
static void reduce_##SUF(dg_reduce_op op, const dg_kview *x, dg_kview *y, const red_plan *p) { \
    const T *xb = (const T *)x->data;                                                  \
    char *yb = (char *)y->data;                                                        \
    if (!(p->nout > 1 && p->nout * p->nred >= DG_PAR_MIN)) { reduce_range_##SUF(op, xb, yb, p, 0, p->nout); return; } \
    _Pragma("omp parallel for schedule(static)")                                                \
    for (int64_t o = 0; o < p->nout; o++) reduce_range_##SUF(op, xb, yb, p, o, o + 1);          \
}
REDUCE_KERNEL(float, f32)
REDUCE_KERNEL(double, f64)

int dg_cpu_reduce(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y) {
    red_plan p;
    plan(x, y, &p);
    if (x->dtype == DG_F32) reduce_f32(op, x, y, &p);
    else if (x->dtype == DG_F64) reduce_f64(op, x, y, &p);
    else {
        DG_ERR(DG_EUNSUPPORTED, "cpu reduce: dtype %s not supported", dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    return 0;
}
