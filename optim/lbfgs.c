/* optim/lbfgs.c — L-BFGS with a closure, torch.optim.LBFGS of PyTorch 1.13 iteration for
 * iteration: the two-loop recursion over a limited history of (y, s) pairs, a fixed step or the
 * strong-Wolfe line search (lbfgs_search.c), and torch's stopping rules. The parameters are one
 * flat vector (CPU, one float dtype); every element operation runs in that dtype. */
#include "lbfgs_internal.h"
#include <math.h>

/* ---- flat vectors ---- */
#define VEC_OPS(T)                                                                                 \
static double dot_##T(const T *a, const T *b, int64_t n) {                                         \
    T s = 0;                                                                                       \
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];                                              \
    return (double)s;                                                                              \
}                                                                                                  \
static void axpy_##T(T *y, T alpha, const T *x, int64_t n) {                                       \
    for (int64_t i = 0; i < n; i++) y[i] = y[i] + alpha * x[i];                                    \
}                                                                                                  \
static double abs_max_##T(const T *a, int64_t n) {                                                 \
    T m = 0;                                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T v = a[i] < 0 ? -a[i] : a[i];                                                             \
        if (v > m || v != v) m = v;                                                                \
    }                                                                                              \
    return (double)m;                                                                              \
}                                                                                                  \
static double abs_sum_##T(const T *a, int64_t n) {                                                 \
    T s = 0;                                                                                       \
    for (int64_t i = 0; i < n; i++) s += a[i] < 0 ? -a[i] : a[i];                                  \
    return (double)s;                                                                              \
}                                                                                                  \
static void scale_##T(T *out, const T *a, T s, int64_t n) {                                        \
    for (int64_t i = 0; i < n; i++) out[i] = a[i] * s;                                             \
}                                                                                                  \
static void sub_##T(T *out, const T *a, const T *b, int64_t n) {                                   \
    for (int64_t i = 0; i < n; i++) out[i] = a[i] - b[i];                                          \
}
VEC_OPS(float)
VEC_OPS(double)

#define F64(dt) ((dt) == DG_F64)
double dg_lbfgs_dot(dg_dtype dt, const void *a, const void *b, int64_t n) {
    return F64(dt) ? dot_double(a, b, n) : dot_float(a, b, n);
}
void dg_lbfgs_axpy(dg_dtype dt, void *y, double alpha, const void *x, int64_t n) {
    if (F64(dt)) axpy_double(y, alpha, x, n);
    else axpy_float(y, (float)alpha, x, n);
}
double dg_lbfgs_abs_max(dg_dtype dt, const void *a, int64_t n) { return F64(dt) ? abs_max_double(a, n) : abs_max_float(a, n); }
static double abs_sum(dg_dtype dt, const void *a, int64_t n) { return F64(dt) ? abs_sum_double(a, n) : abs_sum_float(a, n); }
static void vscale(dg_dtype dt, void *out, const void *a, double s, int64_t n) {
    if (F64(dt)) scale_double(out, a, s, n);
    else scale_float(out, a, (float)s, n);
}
static void vsub(dg_dtype dt, void *out, const void *a, const void *b, int64_t n) {
    if (F64(dt)) sub_double(out, a, b, n);
    else sub_float(out, a, b, n);
}

dg_tensor *dg_lbfgs_vec(const dg_lbfgs_st *L) {
    dg_tensor *v = dg_zeros(DG_SHAPE(L->numel), L->dt);
    if (v && dg_device_of(v).type != DG_CPU) {
        dg_tensor *c = dg_to_device(v, dg_cpu());
        dg_tensor_free(v);
        v = c;
    }
    if (!v && !dg_last_status()) DG_ERR(DG_ENOMEM, "lbfgs: out of memory for a vector of %lld elements", (long long)L->numel);
    return v;
}

#define P(t) ((char *)dg_tensor_ptr(t))

/* ---- the parameters as one vector ---- */
static void add_grad(dg_optimizer *o, double t, const void *d) {   /* torch's _add_grad: p += t d */
    size_t es = dg_dtype_size(o->lbfgs->dt), off = 0;
    for (int i = 0; i < o->n; i++) {
        int64_t k = dg_numel(o->params[i]);
        dg_lbfgs_axpy(o->lbfgs->dt, dg_tensor_ptr(o->params[i]), t, (const char *)d + off, k);
        off += (size_t)k * es;
    }
}

static void set_param(dg_optimizer *o, const void *x) {
    size_t es = dg_dtype_size(o->lbfgs->dt), off = 0;
    for (int i = 0; i < o->n; i++) {
        size_t b = (size_t)dg_numel(o->params[i]) * es;
        if (b) memcpy(dg_tensor_ptr(o->params[i]), (const char *)x + off, b);
        off += b;
    }
}

static void clone_param(dg_optimizer *o, void *x) {
    size_t es = dg_dtype_size(o->lbfgs->dt), off = 0;
    for (int i = 0; i < o->n; i++) {
        size_t b = (size_t)dg_numel(o->params[i]) * es;
        if (b) memcpy((char *)x + off, dg_tensor_ptr(o->params[i]), b);
        off += b;
    }
}

/* torch's _gather_flat_grad: each parameter's gradient, zeros where it has none */
static int gather_flat_grad(dg_optimizer *o, void *flat) {
    size_t es = dg_dtype_size(o->lbfgs->dt), off = 0;
    for (int i = 0; i < o->n; i++) {
        const dg_tensor *p = o->params[i], *g = dg_grad(p);
        size_t b = (size_t)dg_numel(p) * es;
        if (!g) {
            memset((char *)flat + off, 0, b);
        } else {
            char a[96], c[96];
            DG_CHECK_INT(dg_numel(g) == dg_numel(p) && dg_dtype_of(g) == dg_dtype_of(p),
                         "lbfgs: the gradient of parameter %d is %s %s; the parameter is %s %s", i,
                         dg_dtype_name(dg_dtype_of(g)), dg_shape_str(g, a, sizeof a), dg_dtype_name(dg_dtype_of(p)),
                         dg_shape_str(p, c, sizeof c));
            int rc = dg_to_host(g, (char *)flat + off, b);
            if (rc) return rc;
        }
        off += b;
    }
    return 0;
}

/* One call of the closure, its temporaries freed after it. */
static int eval_closure(const dg_lbfgs_eval *ev, double *loss) {
    uint64_t errs = dg_error_count();
    double f = NAN;
    dg_scope *sc = dg_scope_begin();
    int rc = ev->closure(ev->user, &f);
    dg_scope_end(sc);
    if (rc != 0) {
        if (!dg_error_since(errs))
            DG_ERR(rc < 0 ? rc : DG_EINVAL, "lbfgs: the closure failed (returned %d) without a message", rc);
        return rc < 0 ? rc : DG_EINVAL;
    }
    *loss = f;
    return 0;
}

static int eval_here(const dg_lbfgs_eval *ev, double *loss, void *flat_grad) {
    int rc = eval_closure(ev, loss);
    return rc ? rc : gather_flat_grad(ev->o, flat_grad);
}

int dg_lbfgs_directional(const dg_lbfgs_eval *ev, const void *x, double t, const void *d, double *f, void *g) {
    add_grad(ev->o, t, d);
    int rc = eval_here(ev, f, g);
    set_param(ev->o, x);   /* also after a failure: the parameters are where the step left them */
    return rc;
}

/* ---- construction ---- */
static const dg_opt_kind_info lbfgs_info = { .name = "lbfgs" };

dg_lbfgs_params dg_lbfgs_default_params(void) {
    return (dg_lbfgs_params){ .params_tag = DG_PARAMS_TAG, .lr = 1, .max_iter = 20, .max_eval = DG_LBFGS_MAX_EVAL_AUTO,
                              .tolerance_grad = 1e-7, .tolerance_change = 1e-9, .history_size = 100,
                              .line_search_fn = NULL };
}

void dg_lbfgs_free(dg_lbfgs_st *L) {
    if (!L) return;
    dg_tensor_free(L->d);
    dg_tensor_free(L->prev_flat_grad);
    for (int k = 0; k < L->cap_old; k++) {
        dg_tensor_free(L->old_dirs[k]);
        dg_tensor_free(L->old_stps[k]);
        dg_tensor_free(L->ro_t[k]);
    }
    free(L->old_dirs);
    free(L->old_stps);
    free(L->ro);
    free(L->ro_t);
    free(L->hist_name);
    dg_tensor_free(L->func_evals_t);
    dg_tensor_free(L->n_iter_t);
    dg_tensor_free(L->t_t);
    dg_tensor_free(L->H_diag_t);
    dg_tensor_free(L->prev_loss_t);
    free(L);
}

/* Parameter i can be stepped here: a live contiguous CPU tensor of the optimizer's dtype. */
static int check_param(const dg_optimizer *o, int i, dg_dtype dt) {
    const dg_tensor *p = o->params[i];
    char what[32], sh[96], dv[16];
    snprintf(what, sizeof what, "parameter %d", i);
    int rc = dg_tensor_check("lbfgs", what, p);
    if (rc) return rc;
    dg_shape_str(p, sh, sizeof sh);
    DG_CHECK_INT(dg_dtype_of(p) == DG_F32 || dg_dtype_of(p) == DG_F64, "lbfgs: parameter %d %s is %s; LBFGS runs on "
                 "float32 or float64 parameters", i, sh, dg_dtype_name(dg_dtype_of(p)));
    DG_CHECK_INT(dg_dtype_of(p) == dt, "lbfgs: parameter %d %s is %s but parameter 0 is %s; every parameter must have one "
                 "dtype (the flat vector's)", i, sh, dg_dtype_name(dg_dtype_of(p)), dg_dtype_name(dt));
    if (dg_device_of(p).type != DG_CPU) {
        DG_ERR(DG_EUNSUPPORTED, "lbfgs: parameter %d %s is on %s; LBFGS runs on CPU parameters only (move the model to "
               "the CPU, or use another optimizer)", i, sh, dg_device_name(dg_device_of(p), dv, sizeof dv));
        return DG_EUNSUPPORTED;
    }
    DG_CHECK_INT(dg_is_contiguous(p), "lbfgs: parameter %d %s is a non-contiguous view; optimizers update whole tensors", i, sh);
    return 0;
}

int dg_lbfgs_reserve(dg_lbfgs_st *L, int n) {
    if (n <= L->cap_old) return 0;
    int cap = L->cap_old ? L->cap_old : 4;
    while (cap < n) cap *= 2;
    if (cap > L->history_size) cap = L->history_size;
    dg_tensor **a = realloc(L->old_dirs, sizeof *a * (size_t)cap);
    if (a) L->old_dirs = a;
    dg_tensor **b = a ? realloc(L->old_stps, sizeof *b * (size_t)cap) : NULL;
    if (b) L->old_stps = b;
    double *r = b ? realloc(L->ro, sizeof *r * (size_t)cap) : NULL;
    if (r) L->ro = r;
    dg_tensor **rt = r ? realloc(L->ro_t, sizeof *rt * (size_t)cap) : NULL;
    if (rt) L->ro_t = rt;
    char (*nm)[3][32] = rt ? realloc(L->hist_name, sizeof *nm * (size_t)cap) : NULL;
    if (!nm) { DG_ERR(DG_ENOMEM, "lbfgs: out of memory for a history of %d", cap); return DG_ENOMEM; }
    L->hist_name = nm;
    for (int k = L->cap_old; k < cap; k++) {
        L->old_dirs[k] = L->old_stps[k] = L->ro_t[k] = NULL;
        L->ro[k] = 0;
        snprintf(nm[k][0], sizeof nm[k][0], "0.old_dirs.%d", k);
        snprintf(nm[k][1], sizeof nm[k][1], "0.old_stps.%d", k);
        snprintf(nm[k][2], sizeof nm[k][2], "0.ro.%d", k);
    }
    L->cap_old = cap;
    return 0;
}

dg_optimizer *dg_lbfgs(dg_tensor *const *params, int n, dg_lbfgs_params p) {
    DG_CHECK_PARAMS("lbfgs", p, dg_lbfgs_default_params);
    DG_CHECK(p.max_iter >= 1, "lbfgs: max_iter must be >= 1, got %d", p.max_iter);
    int max_eval = p.max_eval == DG_LBFGS_MAX_EVAL_AUTO ? p.max_iter * 5 / 4 : p.max_eval;
    DG_CHECK(p.max_eval == DG_LBFGS_MAX_EVAL_AUTO || p.max_eval >= 1,
             "lbfgs: max_eval must be >= 1 or DG_LBFGS_MAX_EVAL_AUTO, got %d", p.max_eval);
    DG_CHECK(p.history_size >= 1, "lbfgs: history_size must be >= 1, got %d", p.history_size);
    DG_CHECK(p.tolerance_grad >= 0 && !isnan(p.tolerance_grad), "lbfgs: tolerance_grad must be >= 0, got %g", p.tolerance_grad);
    DG_CHECK(p.tolerance_change >= 0 && !isnan(p.tolerance_change), "lbfgs: tolerance_change must be >= 0, got %g",
             p.tolerance_change);
    DG_CHECK(!p.line_search_fn || strcmp(p.line_search_fn, "strong_wolfe") == 0,
             "lbfgs: line_search_fn '%s': only \"strong_wolfe\" (or NULL, a fixed step) is supported", p.line_search_fn);
    dg_optimizer *o = dg_opt_new(DG_OPT_LBFGS, &lbfgs_info, params, n, p.lr, 0, INFINITY);
    if (!o) return NULL;
    dg_dtype dt = dg_dtype_of(params[0]);
    int64_t numel = 0;
    for (int i = 0; i < n; i++) {
        if (check_param(o, i, dt) != 0) { dg_optimizer_free(o); return NULL; }
        numel += dg_numel(params[i]);
    }
    dg_lbfgs_st *L = calloc(1, sizeof *L);
    if (!L) { dg_optimizer_free(o); DG_ERR(DG_ENOMEM, "lbfgs: out of memory"); return NULL; }
    o->lbfgs = L;
    L->max_iter = p.max_iter;
    L->max_eval = max_eval;
    L->history_size = p.history_size;
    L->tolerance_grad = p.tolerance_grad;
    L->tolerance_change = p.tolerance_change;
    L->strong_wolfe = p.line_search_fn != NULL;
    L->dt = dt;
    L->numel = numel;
    L->H_diag = 1;
    L->func_evals_t = dg_opt_cpu_scalar(0, DG_I64);
    L->n_iter_t = dg_opt_cpu_scalar(0, DG_I64);
    L->t_t = dg_opt_cpu_scalar(0, DG_F64);
    L->H_diag_t = dg_opt_cpu_scalar(1, DG_F64);
    L->prev_loss_t = dg_opt_cpu_scalar(0, DG_F64);
    if (!L->func_evals_t || !L->n_iter_t || !L->t_t || !L->H_diag_t || !L->prev_loss_t) {
        dg_optimizer_free(o);
        if (!dg_last_status()) DG_ERR(DG_ENOMEM, "lbfgs: out of memory");
        return NULL;
    }
    return dg_opt_finish(o);
}

/* ---- the step ---- */
static void push_history(dg_lbfgs_st *L, dg_tensor *y, dg_tensor *s, double ro) {
    if (L->n_old == L->history_size) {   /* shift by one (limited memory) */
        dg_tensor_free(L->old_dirs[0]);
        dg_tensor_free(L->old_stps[0]);
        dg_tensor *rt0 = L->ro_t[0];
        memmove(L->old_dirs, L->old_dirs + 1, sizeof *L->old_dirs * (size_t)(L->n_old - 1));
        memmove(L->old_stps, L->old_stps + 1, sizeof *L->old_stps * (size_t)(L->n_old - 1));
        memmove(L->ro, L->ro + 1, sizeof *L->ro * (size_t)(L->n_old - 1));
        memmove(L->ro_t, L->ro_t + 1, sizeof *L->ro_t * (size_t)(L->n_old - 1));
        L->ro_t[L->n_old - 1] = rt0;   /* reused for the new entry */
        L->n_old--;
    }
    L->old_dirs[L->n_old] = y;
    L->old_stps[L->n_old] = s;
    L->ro[L->n_old] = ro;
    L->n_old++;
}

/* The body of dg_lbfgs_step once everything is checked; tmp: three scratch vectors. */
static int lbfgs_run(dg_optimizer *o, const dg_lbfgs_eval *ev, double *orig_loss, void *flat_grad, void *q, void *x) {
    dg_lbfgs_st *L = o->lbfgs;
    const dg_dtype dt = L->dt;
    const int64_t N = L->numel;
    const double lr = o->groups[0].lr;
    double loss;
    int rc = eval_here(ev, &loss, flat_grad);
    if (rc) return rc;
    *orig_loss = loss;
    int current_evals = 1;
    L->func_evals++;
    bool opt_cond = dg_lbfgs_abs_max(dt, flat_grad, N) <= L->tolerance_grad;
    if (opt_cond) return 0;
    if (!L->d && !(L->d = dg_lbfgs_vec(L))) return dg_last_status();
    if (!L->prev_flat_grad && !(L->prev_flat_grad = dg_lbfgs_vec(L))) return dg_last_status();
    double *al = malloc(sizeof *al * (size_t)(L->history_size < 1024 ? L->history_size : 1024) + sizeof *al);
    size_t al_cap = (size_t)(L->history_size < 1024 ? L->history_size : 1024);
    if (!al) { DG_ERR(DG_ENOMEM, "lbfgs: out of memory"); return DG_ENOMEM; }
    void *d = P(L->d);
    int n_iter = 0;
    while (n_iter < L->max_iter) {
        n_iter++;
        L->n_iter++;
        /* direction */
        if (L->n_iter == 1) {
            vscale(dt, d, flat_grad, -1.0, N);
            for (int k = 0; k < L->n_old; k++) {
                dg_tensor_free(L->old_dirs[k]);
                dg_tensor_free(L->old_stps[k]);
                L->old_dirs[k] = L->old_stps[k] = NULL;
            }
            L->n_old = 0;
            L->H_diag = 1;
        } else {
            dg_tensor *y = dg_lbfgs_vec(L), *s = y ? dg_lbfgs_vec(L) : NULL;
            if (!s) { dg_tensor_free(y); rc = dg_last_status() ? dg_last_status() : DG_ENOMEM; break; }
            vsub(dt, P(y), flat_grad, P(L->prev_flat_grad), N);
            vscale(dt, P(s), d, L->t, N);
            double ys = dg_lbfgs_dot(dt, P(y), P(s), N);
            if (ys > 1e-10) {
                if ((rc = dg_lbfgs_reserve(L, L->n_old + 1)) != 0) { dg_tensor_free(y); dg_tensor_free(s); break; }
                push_history(L, y, s, 1. / ys);
                L->H_diag = ys / dg_lbfgs_dot(dt, P(y), P(y), N);
            } else {
                dg_tensor_free(y);
                dg_tensor_free(s);
            }
            int num_old = L->n_old;
            if ((size_t)num_old > al_cap) {
                double *a2 = realloc(al, sizeof *al * (size_t)num_old);
                if (!a2) { DG_ERR(DG_ENOMEM, "lbfgs: out of memory"); rc = DG_ENOMEM; break; }
                al = a2;
                al_cap = (size_t)num_old;
            }
            vscale(dt, q, flat_grad, -1.0, N);
            for (int i = num_old - 1; i >= 0; i--) {
                al[i] = dg_lbfgs_dot(dt, P(L->old_stps[i]), q, N) * L->ro[i];
                dg_lbfgs_axpy(dt, q, -al[i], P(L->old_dirs[i]), N);
            }
            vscale(dt, d, q, L->H_diag, N);
            for (int i = 0; i < num_old; i++) {
                double be_i = dg_lbfgs_dot(dt, P(L->old_dirs[i]), d, N) * L->ro[i];
                dg_lbfgs_axpy(dt, d, al[i] - be_i, P(L->old_stps[i]), N);
            }
        }
        memcpy(P(L->prev_flat_grad), flat_grad, (size_t)N * dg_dtype_size(dt));
        L->prev_loss = loss;
        /* step length */
        if (L->n_iter == 1) {
            double inv = 1. / abs_sum(dt, flat_grad, N);
            L->t = (inv < 1. ? inv : 1.) * lr;   /* Python's min(1., x): x only when smaller */
        } else {
            L->t = lr;
        }
        double gtd = dg_lbfgs_dot(dt, flat_grad, d, N);
        if (gtd > -L->tolerance_change) break;
        int ls_func_evals = 0;
        if (L->strong_wolfe) {
            clone_param(o, x);
            double t_new;
            rc = dg_lbfgs_strong_wolfe(ev, x, L->t, d, loss, flat_grad, gtd, &loss, flat_grad, &t_new, &ls_func_evals);
            if (rc) break;
            L->t = t_new;
            add_grad(o, L->t, d);
            opt_cond = dg_lbfgs_abs_max(dt, flat_grad, N) <= L->tolerance_grad;
        } else {
            add_grad(o, L->t, d);
            if (n_iter != L->max_iter) {
                if ((rc = eval_here(ev, &loss, flat_grad)) != 0) break;
                opt_cond = dg_lbfgs_abs_max(dt, flat_grad, N) <= L->tolerance_grad;
                ls_func_evals = 1;
            }
        }
        current_evals += ls_func_evals;
        L->func_evals += ls_func_evals;
        /* stopping rules */
        if (n_iter == L->max_iter) break;
        if (current_evals >= L->max_eval) break;
        if (opt_cond) break;
        if (fabs(L->t) * dg_lbfgs_abs_max(dt, d, N) <= L->tolerance_change) break;
        if (fabs(loss - L->prev_loss) < L->tolerance_change) break;
    }
    free(al);
    return rc;
}

int dg_lbfgs_step(dg_optimizer *o, dg_closure_fn closure, void *user, double *loss) {
    DG_CHECK_HANDLE_INT(o, "lbfgs_step: optimizer is NULL");
    DG_CHECK_INT(o->lbfgs, "lbfgs_step: the optimizer is %s, not lbfgs (it steps with dg_optimizer_step)", o->info->name);
    DG_CHECK_INT(closure, "lbfgs_step: closure is NULL; it must zero the gradients, compute the loss, call dg_backward "
                 "and store the loss");
    dg_lbfgs_st *L = o->lbfgs;
    for (int i = 0; i < o->n; i++) {
        int rc = check_param(o, i, L->dt);
        if (rc) return rc;
    }
    DG_CHECK_INT(dg_is_grad_enabled(), "lbfgs_step: called in no-grad mode; the closure's backward needs gradients "
                 "(torch enables them for the closure)");
    for (int k = 0; k < L->n_old; k++)
        DG_CHECK_INT(L->old_dirs[k] && L->old_stps[k], "lbfgs_step: the loaded state has %d history entries but "
                     "'0.%s.%d' is missing", L->n_old, L->old_dirs[k] ? "old_stps" : "old_dirs", k);
    DG_CHECK_INT(L->n_iter == 0 || (L->d && L->prev_flat_grad), "lbfgs_step: the loaded state has n_iter %lld but no "
                 "'0.%s'", (long long)L->n_iter, L->d ? "prev_flat_grad" : "d");
    uint64_t t0 = dg_profiler_span_begin();
    dg_lbfgs_eval ev = { o, closure, user };
    dg_tensor *g = dg_lbfgs_vec(L), *q = g ? dg_lbfgs_vec(L) : NULL, *x = q ? dg_lbfgs_vec(L) : NULL;
    double orig = NAN;
    int rc = x ? lbfgs_run(o, &ev, &orig, P(g), P(q), P(x)) : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
    dg_tensor_free(g);
    dg_tensor_free(q);
    dg_tensor_free(x);
    int rc2 = dg_lbfgs_sync_scalars(L);
    if (!rc) rc = rc2;
    if (loss) *loss = orig;
    if (t0) dg_profiler_span_end(t0, DG_PROFILER_OPTIMIZER, "lbfgs.step", -1, -1);
    return rc;
}
