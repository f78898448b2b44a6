/* optim/lbfgs_search.c — LBFGS's strong-Wolfe line search, torch.optim.lbfgs's _strong_wolfe
 * and _cubic_interpolate of PyTorch 1.13 (after minFunc / torch7's lswolfe.lua): bracket an
 * interval holding a point that satisfies the strong Wolfe conditions (c1 1e-4, c2 0.9), then
 * zoom in by safeguarded cubic interpolation, at most 25 evaluations. Scalars are doubles,
 * compared in torch's order (Python's min/max keep the first argument on ties and NaN). */
#include "lbfgs_internal.h"
#include <math.h>

#define C1 1e-4
#define C2 0.9
#define TOLERANCE_CHANGE 1e-9   /* _strong_wolfe's own default: LBFGS does not pass its tolerance */
#define MAX_LS 25

static double py_max(double a, double b) { return b > a ? b : a; }
static double py_min(double a, double b) { return b < a ? b : a; }

/* The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to the bounds
 * (the points' own interval when has_bounds is false); the bounds' midpoint when the cubic has
 * no real minimiser. */
static double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2, bool has_bounds,
                                double lo, double hi) {
    double xmin_bound, xmax_bound;
    if (has_bounds) {
        xmin_bound = lo;
        xmax_bound = hi;
    } else if (x1 <= x2) {
        xmin_bound = x1;
        xmax_bound = x2;
    } else {
        xmin_bound = x2;
        xmax_bound = x1;
    }
    double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
    double d2_square = d1 * d1 - g1 * g2;
    if (d2_square >= 0) {
        double d2 = sqrt(d2_square), min_pos;
        if (x1 <= x2) min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2));
        else min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
        return py_min(py_max(min_pos, xmin_bound), xmax_bound);
    }
    return (xmin_bound + xmax_bound) / 2.;
}

/* A point of the search: step, loss, directional derivative, and its gradient (a vector). */
typedef struct pt { double t, f, gtd; void *g; } pt;

int dg_lbfgs_strong_wolfe(const dg_lbfgs_eval *ev, const void *x, double t, const void *d, double f, const void *g_in,
                          double gtd, double *f_out, void *g_out, double *t_out, int *evals) {
    const dg_lbfgs_st *L = ev->o->lbfgs;
    const dg_dtype dt = L->dt;
    const int64_t N = L->numel;
    const size_t bytes = (size_t)N * dg_dtype_size(dt);
    /* five gradient vectors: the start (torch's g clone), the newest, the previous, the bracket's two */
    dg_tensor *v[5] = { 0 };
    int rc = 0;
    for (int k = 0; k < 5 && !rc; k++)
        if (!(v[k] = dg_lbfgs_vec(L))) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    if (rc) {
        for (int k = 0; k < 5; k++) dg_tensor_free(v[k]);
        return rc;
    }
    void *g = dg_tensor_ptr(v[0]), *g_new = dg_tensor_ptr(v[1]), *g_prev = dg_tensor_ptr(v[2]);
    memcpy(g, g_in, bytes);
    double d_norm = dg_lbfgs_abs_max(dt, d, N);
    double f_new;
    int ls_func_evals = 0, ls_iter = 0;
    if ((rc = dg_lbfgs_directional(ev, x, t, d, &f_new, g_new)) != 0) goto done;
    ls_func_evals = 1;
    double gtd_new = dg_lbfgs_dot(dt, g_new, d, N);
    /* bracket: br[0..nb) with their gradients in v[3], v[4]; the previous point shares g_prev */
    pt br[2] = { { 0, 0, 0, dg_tensor_ptr(v[3]) }, { 0, 0, 0, dg_tensor_ptr(v[4]) } };
    int nb = 0;
    bool done = false;
    double t_prev = 0, f_prev = f, gtd_prev = gtd;
    const void *gp = g;   /* the previous point's gradient: g at first, then g_prev */
    while (ls_iter < MAX_LS) {
        /* torch's three checks, in its order: no sufficient decrease (or no lower than the
         * previous point): bracket [prev, t]; strong Wolfe holds: done at t; the slope turned
         * upward: bracket [prev, t] */
        bool armijo_fails = f_new > (f + C1 * t * gtd) || (ls_iter > 1 && f_new >= f_prev);
        if (!armijo_fails && fabs(gtd_new) <= -C2 * gtd) {
            br[0].t = t, br[0].f = f_new, br[0].gtd = gtd_new;
            memcpy(br[0].g, g_new, bytes);
            nb = 1;
            done = true;
            break;
        }
        if (armijo_fails || gtd_new >= 0) {
            br[0].t = t_prev, br[0].f = f_prev, br[0].gtd = gtd_prev;
            memcpy(br[0].g, gp, bytes);
            br[1].t = t, br[1].f = f_new, br[1].gtd = gtd_new;
            memcpy(br[1].g, g_new, bytes);
            nb = 2;
            break;
        }
        /* interpolate */
        double min_step = t + 0.01 * (t - t_prev), max_step = t * 10, tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, true, min_step, max_step);
        t_prev = tmp;
        f_prev = f_new;
        memcpy(g_prev, g_new, bytes);
        gp = g_prev;
        gtd_prev = gtd_new;
        if ((rc = dg_lbfgs_directional(ev, x, t, d, &f_new, g_new)) != 0) goto done;
        ls_func_evals++;
        gtd_new = dg_lbfgs_dot(dt, g_new, d, N);
        ls_iter++;
    }
    if (ls_iter == MAX_LS) {   /* no bracket found: [0, t] (their gtd is never read: no zoom follows) */
        br[0].t = 0, br[0].f = f;
        memcpy(br[0].g, g, bytes);
        br[1].t = t, br[1].f = f_new;
        memcpy(br[1].g, g_new, bytes);
        nb = 2;
    }
    /* zoom */
    bool insuf_progress = false;
    int low = br[0].f <= br[nb - 1].f ? 0 : 1, high = 1 - low;
    if (nb == 1) low = 0;
    while (!done && ls_iter < MAX_LS) {
        if (fabs(br[1].t - br[0].t) * d_norm < TOLERANCE_CHANGE) break;
        t = cubic_interpolate(br[0].t, br[0].f, br[0].gtd, br[1].t, br[1].f, br[1].gtd, false, 0, 0);
        double bmax = py_max(br[0].t, br[1].t), bmin = py_min(br[0].t, br[1].t);
        double eps = 0.1 * (bmax - bmin);
        if (py_min(bmax - t, t - bmin) < eps) {
            if (insuf_progress || t >= bmax || t <= bmin) {
                if (fabs(t - bmax) < fabs(t - bmin)) t = bmax - eps;
                else t = bmin + eps;
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        if ((rc = dg_lbfgs_directional(ev, x, t, d, &f_new, g_new)) != 0) goto done;
        ls_func_evals++;
        gtd_new = dg_lbfgs_dot(dt, g_new, d, N);
        ls_iter++;
        if (f_new > (f + C1 * t * gtd) || f_new >= br[low].f) {
            br[high].t = t, br[high].f = f_new, br[high].gtd = gtd_new;
            memcpy(br[high].g, g_new, bytes);
            low = br[0].f <= br[1].f ? 0 : 1;
            high = 1 - low;
        } else {
            if (fabs(gtd_new) <= -C2 * gtd) {
                done = true;
            } else if (gtd_new * (br[high].t - br[low].t) >= 0) {   /* the old high becomes the new low */
                br[high].t = br[low].t, br[high].f = br[low].f, br[high].gtd = br[low].gtd;
                memcpy(br[high].g, br[low].g, bytes);
            }
            br[low].t = t, br[low].f = f_new, br[low].gtd = gtd_new;
            memcpy(br[low].g, g_new, bytes);
        }
    }
    *t_out = br[low].t;
    *f_out = br[low].f;
    memcpy(g_out, br[low].g, bytes);
    *evals = ls_func_evals;
done:
    for (int k = 0; k < 5; k++) dg_tensor_free(v[k]);
    return rc;
}
