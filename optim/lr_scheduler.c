/* optim/lr_scheduler.c — learning-rate schedulers: StepLR, MultiStepLR, ExponentialLR,
 * CosineAnnealingLR, LambdaLR, OneCycleLR and SequentialLR (PyTorch's closed forms), Paddle's
 * LinearWarmup, PiecewiseDecay and PolynomialDecay, all lr(epoch, group) in closed form: the
 * scheduler keeps the epoch and pushes each parameter group's lr into its optimizer. And
 * ReduceLROnPlateau, the one that is not a function of its epoch: it reads a metric, keeps the
 * best value and two counters, and lowers the optimizer's lrs in place. Each scheduler's state
 * is a list of named 0-d tensors ("epoch", plus the plateau's counters) for checkpoints. */
#include "optim_internal.h"
#include <math.h>

typedef enum {
    LR_STEP, LR_MULTI_STEP, LR_EXPONENTIAL, LR_COSINE, LR_WARMUP, LR_PIECEWISE, LR_LAMBDA, LR_POLYNOMIAL, LR_ONE_CYCLE,
    LR_SEQUENTIAL, LR_PLATEAU
} lr_kind;

/* state entries: every scheduler has "epoch"; the plateau adds its three */
enum { ST_EPOCH, ST_BEST, ST_BAD, ST_COOLDOWN, ST_MAX };
static const char *const st_names[ST_MAX] = { "epoch", "best", "num_bad_epochs", "cooldown_counter" };

struct dg_lr_scheduler {
    lr_kind kind;
    const char *name;
    dg_optimizer *opt;            /* borrowed; NULL: free-standing, or driven by the scheduler that wraps it */
    int n_groups;                 /* the optimizer's groups at construction (1 without one): the per-group arrays' length */
    int64_t epoch;
    double *lrs;                  /* lr(epoch) per group */
    double *base;                 /* per group: base_lr / max_lr (one cycle) / Paddle's learning_rate */
    double *end_lr, *const_lr;    /* warm-up, per group */
    double gamma, eta_min;
    int step_size, t_max;
    int *ints; int n_ints;        /* milestones (sorted) or boundaries */
    double *values;               /* piecewise: n_ints + 1 */
    int warmup_steps;
    double start_lr;
    dg_lr_scheduler *after;       /* warm-up: owned */
    dg_lr_scheduler **children;   /* sequential: owned, n_ints + 1 of them */
    dg_lr_lambda_fn fn;           /* lambda */
    void *user;
    int decay_steps;              /* polynomial: Paddle's */
    double power, poly_end_lr;
    bool cycle;
    dg_one_cycle_lr_params oc;    /* one cycle (max_lr resolved into base[]) */
    double momentum;              /* one cycle: the cycled momentum at epoch (NAN when not cycling) */
    dg_reduce_lr_on_plateau_params pl;   /* plateau */
    double best;
    int64_t num_bad, cooldown_counter;
    int n_state;
    dg_tensor *st[ST_MAX];        /* 0-d CPU mirrors for export: epoch, best, num_bad_epochs, cooldown_counter */
};

/* ---- lr(epoch, group) ------------------------------------------------------------------------ */

/* s's value of per-group array a for group g: a scheduler made without an optimizer has one
 * value, which every group takes. */
static double grp(const dg_lr_scheduler *s, const double *a, int g) { return a[s->n_groups == 1 ? 0 : g]; }

static double anneal(const dg_lr_scheduler *s, double start, double end, double pct) {
    if (s->oc.anneal_strategy == DG_ANNEAL_LINEAR) return (end - start) * pct + start;
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1);
}

/* OneCycleLR's phase for step e, as torch's get_lr: the lr (and momentum) at pct of the phase. */
static int one_cycle_phase(const dg_lr_scheduler *s, int64_t e, double *pct, int *phase) {
    double T = s->oc.total_steps, p = s->oc.pct_start;
    double ends[3];
    int n;
    if (s->oc.three_phase) { ends[0] = p * T - 1; ends[1] = 2 * p * T - 2; ends[2] = T - 1; n = 3; }
    else { ends[0] = p * T - 1; ends[1] = T - 1; n = 2; }
    double start = 0;
    for (int i = 0; i < n; i++) {
        if ((double)e <= ends[i] || i == n - 1) {
            *pct = ((double)e - start) / (ends[i] - start);
            *phase = i;
            return isfinite(*pct) ? 0 : -1;
        }
        start = ends[i];
    }
    return -1;
}

static double lr_at(const dg_lr_scheduler *s, int64_t e, int g);

/* Sequential: the child active at epoch e, and its own epoch (reset to 0 at its milestone). */
static const dg_lr_scheduler *seq_child(const dg_lr_scheduler *s, int64_t e, int64_t *ce) {
    int k = 0;   /* bisect_right */
    while (k < s->n_ints && s->ints[k] <= e) k++;
    *ce = k > 0 ? e - s->ints[k - 1] : e;
    return s->children[k];
}

/* NAN with an error recorded when the schedule has no value at e. */
static double lr_at(const dg_lr_scheduler *s, int64_t e, int g) {
    switch (s->kind) {
    case LR_STEP: return grp(s, s->base, g) * pow(s->gamma, (double)(e / s->step_size));
    case LR_MULTI_STEP: {
        int k = 0;   /* bisect_right: milestones <= e */
        while (k < s->n_ints && s->ints[k] <= e) k++;
        return grp(s, s->base, g) * pow(s->gamma, (double)k);
    }
    case LR_EXPONENTIAL: return grp(s, s->base, g) * pow(s->gamma, (double)e);
    case LR_COSINE:
        return s->eta_min + (grp(s, s->base, g) - s->eta_min) * (1 + cos(M_PI * (double)e / s->t_max)) / 2;
    case LR_WARMUP:
        if (e < s->warmup_steps)
            return (grp(s, s->end_lr, g) - s->start_lr) * (double)e / (double)s->warmup_steps + s->start_lr;
        if (!s->after) return grp(s, s->const_lr, g);
        return lr_at(s->after, e - s->warmup_steps, g);   /* as Paddle: after.step(epoch - warmup_steps) */
    case LR_PIECEWISE:
        for (int i = 0; i < s->n_ints; i++)
            if (e < s->ints[i]) return s->values[i];
        return s->values[s->n_ints];
    case LR_LAMBDA: {
        double f = s->fn(e, s->user);
        if (!(f >= 0 && isfinite(f))) {
            DG_ERR(DG_EINVAL, "%s: fn returned %g at epoch %lld; expects a finite factor >= 0", s->name, f, (long long)e);
            return NAN;
        }
        return grp(s, s->base, g) * f;
    }
    case LR_POLYNOMIAL: {   /* paddle.optimizer.lr.PolynomialDecay.get_lr */
        double ep = (double)e, steps = s->decay_steps;
        if (s->cycle) {
            double div = e == 0 ? 1 : ceil(ep / steps);
            steps *= div;
        } else if (ep > steps) {
            ep = steps;
        }
        return (grp(s, s->base, g) - s->poly_end_lr) * pow(1 - ep / steps, s->power) + s->poly_end_lr;
    }
    case LR_ONE_CYCLE: {
        if (e > s->oc.total_steps) {
            DG_ERR(DG_EINVAL, "%s: epoch %lld is past total_steps %d (the cycle is over)", s->name, (long long)e,
                   s->oc.total_steps);
            return NAN;
        }
        double pct, mx = grp(s, s->base, g), init = mx / s->oc.div_factor, mn = init / s->oc.final_div_factor;
        int ph;
        if (one_cycle_phase(s, e, &pct, &ph) != 0) {
            DG_ERR(DG_EINVAL, "%s: phase %d is empty at epoch %lld (total_steps %d, pct_start %g)", s->name, ph + 1,
                   (long long)e, s->oc.total_steps, s->oc.pct_start);
            return NAN;
        }
        double v;
        if (s->oc.three_phase) v = ph == 0 ? anneal(s, init, mx, pct) : ph == 1 ? anneal(s, mx, init, pct) : anneal(s, init, mn, pct);
        else v = ph == 0 ? anneal(s, init, mx, pct) : anneal(s, mx, mn, pct);
        /* At epoch total_steps (the last step() of a loop over total_steps batches) torch
         * extrapolates the last phase one step past its end: below 0 for a linear anneal to a
         * small minimum. An lr is >= 0 here, and that one is never stepped with: 0. */
        return v < 0 ? 0 : v;
    }
    case LR_SEQUENTIAL: {
        int64_t ce;
        const dg_lr_scheduler *c = seq_child(s, e, &ce);
        return lr_at(c, ce, g);
    }
    case LR_PLATEAU: break;   /* not a function of the epoch; never asked */
    }
    return NAN;
}

/* The momentum OneCycleLR cycles at epoch e (through wrappers), NAN where none is cycled. */
static double momentum_at(const dg_lr_scheduler *s, int64_t e) {
    switch (s->kind) {
    case LR_ONE_CYCLE: {
        double pct;
        int ph;
        if (!s->oc.cycle_momentum || e > s->oc.total_steps || one_cycle_phase(s, e, &pct, &ph) != 0) return NAN;
        double lo = s->oc.base_momentum, hi = s->oc.max_momentum;
        if (s->oc.three_phase) return ph == 0 ? anneal(s, hi, lo, pct) : ph == 1 ? anneal(s, lo, hi, pct) : anneal(s, hi, hi, pct);
        return ph == 0 ? anneal(s, hi, lo, pct) : anneal(s, lo, hi, pct);
    }
    case LR_WARMUP: return s->after && e >= s->warmup_steps ? momentum_at(s->after, e - s->warmup_steps) : NAN;
    case LR_SEQUENTIAL: {
        int64_t ce;
        const dg_lr_scheduler *c = seq_child(s, e, &ce);
        return momentum_at(c, ce);
    }
    default: return NAN;
    }
}

/* Whether s (or what it wraps) cycles the optimizer's momentum. */
static bool cycles_momentum(const dg_lr_scheduler *s) {
    if (!s) return false;
    if (s->kind == LR_ONE_CYCLE) return s->oc.cycle_momentum;
    if (s->kind == LR_WARMUP) return cycles_momentum(s->after);
    for (int k = 0; s->kind == LR_SEQUENTIAL && k <= s->n_ints; k++)
        if (cycles_momentum(s->children[k])) return true;
    return false;
}

/* ---- moving to an epoch ----------------------------------------------------------------------- */

static int fill_mirror(dg_lr_scheduler *s, int k, double v) { return s->st[k] ? dg_fill_(s->st[k], v) : 0; }

static int sync_mirrors(dg_lr_scheduler *s) {
    int rc = fill_mirror(s, ST_EPOCH, (double)s->epoch);
    if (!rc && s->kind == LR_PLATEAU) {
        rc = fill_mirror(s, ST_BEST, s->best);
        if (!rc) rc = fill_mirror(s, ST_BAD, (double)s->num_bad);
        if (!rc) rc = fill_mirror(s, ST_COOLDOWN, (double)s->cooldown_counter);
    }
    return rc;
}

/* The optimizer's groups must be the ones the scheduler was made for. */
static int check_groups(const dg_lr_scheduler *s) {
    if (!s->opt) return 0;
    int n = dg_optimizer_num_groups(s->opt);
    DG_CHECK_INT(n == s->n_groups, "%s: the optimizer has %d param groups but had %d when the scheduler was made "
                 "(add the groups before making schedulers)", s->name, n, s->n_groups);
    return 0;
}

/* Every group's lr at epoch e, or an error with nothing changed. */
static int lrs_at(const dg_lr_scheduler *s, int64_t e, double *out) {
    for (int g = 0; g < s->n_groups; g++) {
        double v = lr_at(s, e, g);
        if (isnan(v)) return dg_last_status() ? dg_last_status() : DG_EINVAL;
        DG_CHECK_INT(v >= 0 && isfinite(v), "%s: lr %g at epoch %lld (group %d) is not a finite lr >= 0", s->name, v,
                     (long long)e, g);
        out[g] = v;
    }
    return 0;
}

/* Moves s to epoch e and sets its optimizer's lrs (and cycled momentum); on failure nothing
 * changes. */
static int set_epoch(dg_lr_scheduler *s, int64_t e) {
    if (s->kind == LR_PLATEAU) {   /* its lr is not a function of the epoch: only the counter moves */
        s->epoch = e;
        return sync_mirrors(s);
    }
    int rc = check_groups(s);
    if (rc) return rc;
    double stack[16], *v = s->n_groups <= 16 ? stack : malloc(sizeof *v * (size_t)s->n_groups);
    if (!v) { DG_ERR(DG_ENOMEM, "%s: out of memory", s->name); return DG_ENOMEM; }
    rc = lrs_at(s, e, v);
    if (!rc) {
        s->epoch = e;
        memcpy(s->lrs, v, sizeof *v * (size_t)s->n_groups);
        s->momentum = momentum_at(s, e);
        for (int g = 0; s->opt && g < s->n_groups && !rc; g++) rc = dg_opt_set_current_lr(s->opt, g, v[g]);
        if (!rc && s->opt && !isnan(s->momentum)) rc = dg_opt_set_cycled_momentum(s->opt, s->momentum);
        if (!rc) rc = sync_mirrors(s);
    }
    if (v != stack) free(v);
    return rc;
}

/* ---- construction ----------------------------------------------------------------------------- */

/* A learning-rate field for every group: its value, or for DG_LR_FROM_OPTIMIZER each group's
 * base lr (an error when there is no optimizer or the value is out of range). */
static int lr_field(const dg_lr_scheduler *s, const char *field, double v, double *out) {
    if (v == DG_LR_FROM_OPTIMIZER) {
        DG_CHECK_INT(s->opt, "%s: %s is DG_LR_FROM_OPTIMIZER but there is no optimizer: pass one or set %s", s->name,
                     field, field);
        for (int g = 0; g < s->n_groups; g++) out[g] = dg_opt_base_lr(s->opt, g);
        return 0;
    }
    DG_CHECK_INT(v >= 0 && isfinite(v), "%s: %s must be >= 0 or DG_LR_FROM_OPTIMIZER, got %g", s->name, field, v);
    for (int g = 0; g < s->n_groups; g++) out[g] = v;
    return 0;
}

static double *new_doubles(int n) { return calloc((size_t)n, sizeof(double)); }

/* Common construction; lr(0) is applied at once by sched_start. */
static dg_lr_scheduler *sched_new(lr_kind kind, const char *name, dg_optimizer *opt) {
    dg_lr_scheduler *s = calloc(1, sizeof *s);
    DG_CHECK(s, "%s: out of memory", name);
    s->kind = kind;
    s->name = name;
    s->opt = opt;
    s->n_groups = opt ? dg_optimizer_num_groups(opt) : 1;
    s->momentum = NAN;
    s->n_state = kind == LR_PLATEAU ? ST_MAX : 1;
    s->lrs = new_doubles(s->n_groups);
    s->base = new_doubles(s->n_groups);
    uint64_t errs = dg_error_count();
    bool ok = s->lrs && s->base;
    for (int k = 0; ok && k < s->n_state; k++)
        ok = (s->st[k] = dg_opt_cpu_scalar(0, k == ST_BEST ? DG_F64 : DG_I64)) != NULL;
    if (!ok) {
        dg_lr_scheduler_free(s);
        if (!dg_error_since(errs)) DG_ERR(DG_ENOMEM, "%s: out of memory", name);
        return NULL;
    }
    return s;
}

static dg_lr_scheduler *with_base(dg_lr_scheduler *s, double base_lr, const char *field) {
    if (s && lr_field(s, field, base_lr, s->base) != 0) { dg_lr_scheduler_free(s); return NULL; }
    return s;
}

static dg_lr_scheduler *sched_start(dg_lr_scheduler *s) {
    if (s && set_epoch(s, 0) != 0) { dg_lr_scheduler_free(s); return NULL; }
    return s;
}

static int cmp_int(const void *a, const void *b) { int x = *(const int *)a, y = *(const int *)b; return (x > y) - (x < y); }

dg_step_lr_params dg_step_lr_default_params(void) {
    return (dg_step_lr_params){ .params_tag = DG_PARAMS_TAG, .base_lr = DG_LR_FROM_OPTIMIZER, .step_size = 0, .gamma = 0.1 };
}
dg_multi_step_lr_params dg_multi_step_lr_default_params(void) {
    return (dg_multi_step_lr_params){ .params_tag = DG_PARAMS_TAG, .base_lr = DG_LR_FROM_OPTIMIZER, .milestones = NULL, .n_milestones = 0, .gamma = 0.1 };
}
dg_exponential_lr_params dg_exponential_lr_default_params(void) {
    return (dg_exponential_lr_params){ .params_tag = DG_PARAMS_TAG, .base_lr = DG_LR_FROM_OPTIMIZER, .gamma = 0 };
}
dg_cosine_annealing_lr_params dg_cosine_annealing_lr_default_params(void) {
    return (dg_cosine_annealing_lr_params){ .params_tag = DG_PARAMS_TAG, .base_lr = DG_LR_FROM_OPTIMIZER, .t_max = 0, .eta_min = 0 };
}
dg_linear_warmup_lr_params dg_linear_warmup_lr_default_params(void) {
    return (dg_linear_warmup_lr_params){ .params_tag = DG_PARAMS_TAG, .warmup_steps = 0, .start_lr = 0, .end_lr = DG_LR_FROM_OPTIMIZER,
                                         .lr = DG_LR_FROM_OPTIMIZER };
}
dg_piecewise_lr_params dg_piecewise_lr_default_params(void) {
    return (dg_piecewise_lr_params){ .params_tag = DG_PARAMS_TAG, .boundaries = NULL, .n_boundaries = 0, .values = NULL };
}
dg_lambda_lr_params dg_lambda_lr_default_params(void) {
    return (dg_lambda_lr_params){ .params_tag = DG_PARAMS_TAG, .base_lr = DG_LR_FROM_OPTIMIZER, .fn = NULL, .user = NULL };
}
dg_polynomial_decay_lr_params dg_polynomial_decay_lr_default_params(void) {
    return (dg_polynomial_decay_lr_params){ .params_tag = DG_PARAMS_TAG, .base_lr = DG_LR_FROM_OPTIMIZER, .decay_steps = 0, .end_lr = 1e-4, .power = 1.0,
                                            .cycle = false };
}
dg_one_cycle_lr_params dg_one_cycle_lr_default_params(void) {
    return (dg_one_cycle_lr_params){ .params_tag = DG_PARAMS_TAG, .max_lr = 0, .total_steps = 0, .pct_start = 0.3, .anneal_strategy = DG_ANNEAL_COS,
                                     .cycle_momentum = true, .base_momentum = 0.85, .max_momentum = 0.95, .div_factor = 25.,
                                     .final_div_factor = 1e4, .three_phase = false };
}
dg_reduce_lr_on_plateau_params dg_reduce_lr_on_plateau_default_params(void) {
    return (dg_reduce_lr_on_plateau_params){ .params_tag = DG_PARAMS_TAG, .mode = DG_PLATEAU_MIN, .factor = 0.1, .patience = 10, .threshold = 1e-4,
                                             .threshold_mode = DG_THRESHOLD_REL, .cooldown = 0, .min_lr = 0, .eps = 1e-8 };
}
dg_sequential_lr_params dg_sequential_lr_default_params(void) {
    return (dg_sequential_lr_params){ .params_tag = DG_PARAMS_TAG, .schedulers = NULL, .n_schedulers = 0, .milestones = NULL, .n_milestones = 0 };
}

dg_lr_scheduler *dg_step_lr(dg_optimizer *opt, dg_step_lr_params p) {
    DG_CHECK_PARAMS("step_lr", p, dg_step_lr_default_params);
    DG_CHECK(p.step_size > 0, "step_lr: step_size must be > 0, got %d", p.step_size);
    DG_CHECK(p.gamma >= 0 && isfinite(p.gamma), "step_lr: gamma must be >= 0, got %g", p.gamma);
    dg_lr_scheduler *s = with_base(sched_new(LR_STEP, "step_lr", opt), p.base_lr, "base_lr");
    if (!s) return NULL;
    s->step_size = p.step_size;
    s->gamma = p.gamma;
    return sched_start(s);
}

dg_lr_scheduler *dg_multi_step_lr(dg_optimizer *opt, dg_multi_step_lr_params p) {
    DG_CHECK_PARAMS("multi_step_lr", p, dg_multi_step_lr_default_params);
    DG_CHECK(p.n_milestones >= 0 && (p.n_milestones == 0 || p.milestones), "multi_step_lr: %s",
             p.n_milestones < 0 ? "negative n_milestones" : "milestones is NULL");
    DG_CHECK(p.gamma >= 0 && isfinite(p.gamma), "multi_step_lr: gamma must be >= 0, got %g", p.gamma);
    dg_lr_scheduler *s = with_base(sched_new(LR_MULTI_STEP, "multi_step_lr", opt), p.base_lr, "base_lr");
    if (!s) return NULL;
    s->gamma = p.gamma;
    s->n_ints = p.n_milestones;
    s->ints = malloc(sizeof(int) * (size_t)(p.n_milestones ? p.n_milestones : 1));
    if (!s->ints) { dg_lr_scheduler_free(s); DG_ERR(DG_ENOMEM, "multi_step_lr: out of memory"); return NULL; }
    if (p.n_milestones) memcpy(s->ints, p.milestones, sizeof(int) * (size_t)p.n_milestones);
    qsort(s->ints, (size_t)s->n_ints, sizeof(int), cmp_int);
    return sched_start(s);
}

dg_lr_scheduler *dg_exponential_lr(dg_optimizer *opt, dg_exponential_lr_params p) {
    DG_CHECK_PARAMS("exponential_lr", p, dg_exponential_lr_default_params);
    DG_CHECK(p.gamma > 0 && isfinite(p.gamma), "exponential_lr: gamma must be > 0, got %g", p.gamma);
    dg_lr_scheduler *s = with_base(sched_new(LR_EXPONENTIAL, "exponential_lr", opt), p.base_lr, "base_lr");
    if (!s) return NULL;
    s->gamma = p.gamma;
    return sched_start(s);
}

dg_lr_scheduler *dg_cosine_annealing_lr(dg_optimizer *opt, dg_cosine_annealing_lr_params p) {
    DG_CHECK_PARAMS("cosine_annealing_lr", p, dg_cosine_annealing_lr_default_params);
    DG_CHECK(p.t_max > 0, "cosine_annealing_lr: t_max must be > 0, got %d", p.t_max);
    DG_CHECK(p.eta_min >= 0 && isfinite(p.eta_min), "cosine_annealing_lr: eta_min must be >= 0, got %g", p.eta_min);
    dg_lr_scheduler *s = with_base(sched_new(LR_COSINE, "cosine_annealing_lr", opt), p.base_lr, "base_lr");
    if (!s) return NULL;
    s->t_max = p.t_max;
    s->eta_min = p.eta_min;
    return sched_start(s);
}

/* A wrapper (warm-up, sequential) adopting child c: the optimizer it drives is the wrapper's
 * (or, when the wrapper has none, the child's); the child stops driving it. *opt is updated.
 * Errors when c drives another optimizer or cannot be chained. */
static int adopt(const char *nm, dg_optimizer **opt, dg_lr_scheduler *c, int k) {
    char which[32] = "";
    if (k >= 0) snprintf(which, sizeof which, " %d", k);
    DG_CHECK_INT(c->kind != LR_PLATEAU, "%s: scheduler%s is reduce_lr_on_plateau, which steps on a metric and cannot be "
                 "chained", nm, which);
    DG_CHECK_INT(!c->opt || !*opt || c->opt == *opt, "%s: scheduler%s drives another optimizer", nm, which);
    if (!*opt) *opt = c->opt;
    c->opt = NULL;
    return 0;
}

/* The child's per-group values must cover the wrapper's groups: one value, or one per group. */
static int check_child_groups(const dg_lr_scheduler *s, const dg_lr_scheduler *c, const char *which) {
    DG_CHECK_INT(c->n_groups == 1 || c->n_groups == s->n_groups, "%s: %s was made for %d param groups, the optimizer "
                 "has %d", s->name, which, c->n_groups, s->n_groups);
    if (s->opt && cycles_momentum(c)) {
        const char *why = dg_opt_momentum_missing(s->opt);
        DG_CHECK_INT(!why, "%s: %s cycles the momentum, but %s", s->name, which, why);
    }
    return 0;
}

dg_lr_scheduler *dg_linear_warmup_lr(dg_optimizer *opt, dg_lr_scheduler *after, dg_linear_warmup_lr_params p) {
    const char *nm = "linear_warmup_lr";
    if (dg_params_check(nm, p.params_tag, "dg_linear_warmup_lr_default_params")) { dg_lr_scheduler_free(after); return NULL; }
    if (after && adopt(nm, &opt, after, -1) != 0) { dg_lr_scheduler_free(after); return NULL; }   /* owned from here on */
    if (p.warmup_steps <= 0 || !(p.start_lr >= 0 && isfinite(p.start_lr))) {
        DG_ERR(DG_EINVAL, "%s: %s (warmup_steps %d, start_lr %g)", nm,
               p.warmup_steps <= 0 ? "warmup_steps must be > 0" : "start_lr must be >= 0", p.warmup_steps, p.start_lr);
        dg_lr_scheduler_free(after);
        return NULL;
    }
    dg_lr_scheduler *s = sched_new(LR_WARMUP, nm, opt);
    if (!s) { dg_lr_scheduler_free(after); return NULL; }
    s->after = after;   /* freed with s from here on */
    s->end_lr = new_doubles(s->n_groups);
    s->const_lr = new_doubles(s->n_groups);
    if (!s->end_lr || !s->const_lr) { dg_lr_scheduler_free(s); DG_ERR(DG_ENOMEM, "%s: out of memory", nm); return NULL; }
    /* `lr` is the constant after warm-up only when nothing is wrapped; with `after` it is never
     * read, so its default (DG_LR_FROM_OPTIMIZER) must not ask for an optimizer there is no need of */
    if (lr_field(s, "end_lr", p.end_lr, s->end_lr) != 0 || (!after && lr_field(s, "lr", p.lr, s->const_lr) != 0) ||
        (after && check_child_groups(s, after, "after") != 0)) {
        dg_lr_scheduler_free(s);
        return NULL;
    }
    s->warmup_steps = p.warmup_steps;
    s->start_lr = p.start_lr;
    return sched_start(s);
}

dg_lr_scheduler *dg_piecewise_lr(dg_optimizer *opt, dg_piecewise_lr_params p) {
    DG_CHECK_PARAMS("piecewise_lr", p, dg_piecewise_lr_default_params);
    const char *nm = "piecewise_lr";
    DG_CHECK(p.n_boundaries >= 0 && (p.n_boundaries == 0 || p.boundaries) && p.values, "%s: %s", nm,
             p.n_boundaries < 0 ? "negative n_boundaries" : !p.values ? "values is NULL" : "boundaries is NULL");
    for (int i = 1; i < p.n_boundaries; i++)
        DG_CHECK(p.boundaries[i] > p.boundaries[i - 1], "%s: boundaries must be ascending (boundaries[%d] = %d after %d)",
                 nm, i, p.boundaries[i], p.boundaries[i - 1]);
    for (int i = 0; i <= p.n_boundaries; i++)
        DG_CHECK(p.values[i] >= 0 && isfinite(p.values[i]), "%s: values[%d] must be >= 0, got %g", nm, i, p.values[i]);
    dg_lr_scheduler *s = sched_new(LR_PIECEWISE, nm, opt);
    if (!s) return NULL;
    s->n_ints = p.n_boundaries;
    s->ints = malloc(sizeof(int) * (size_t)(p.n_boundaries ? p.n_boundaries : 1));
    s->values = malloc(sizeof(double) * (size_t)(p.n_boundaries + 1));
    if (!s->ints || !s->values) { dg_lr_scheduler_free(s); DG_ERR(DG_ENOMEM, "%s: out of memory", nm); return NULL; }
    if (p.n_boundaries) memcpy(s->ints, p.boundaries, sizeof(int) * (size_t)p.n_boundaries);
    memcpy(s->values, p.values, sizeof(double) * (size_t)(p.n_boundaries + 1));
    return sched_start(s);
}

dg_lr_scheduler *dg_lambda_lr(dg_optimizer *opt, dg_lambda_lr_params p) {
    DG_CHECK_PARAMS("lambda_lr", p, dg_lambda_lr_default_params);
    DG_CHECK(p.fn, "lambda_lr: fn is NULL (a factor of the epoch: double fn(int64_t epoch, void *user))");
    dg_lr_scheduler *s = with_base(sched_new(LR_LAMBDA, "lambda_lr", opt), p.base_lr, "base_lr");
    if (!s) return NULL;
    s->fn = p.fn;
    s->user = p.user;
    return sched_start(s);
}

dg_lr_scheduler *dg_polynomial_decay_lr(dg_optimizer *opt, dg_polynomial_decay_lr_params p) {
    DG_CHECK_PARAMS("polynomial_decay_lr", p, dg_polynomial_decay_lr_default_params);
    const char *nm = "polynomial_decay_lr";
    DG_CHECK(p.decay_steps > 0, "%s: decay_steps must be > 0, got %d", nm, p.decay_steps);
    DG_CHECK(p.end_lr >= 0 && isfinite(p.end_lr), "%s: end_lr must be >= 0, got %g", nm, p.end_lr);
    DG_CHECK(p.power > 0 && isfinite(p.power), "%s: power must be > 0, got %g", nm, p.power);
    dg_lr_scheduler *s = with_base(sched_new(LR_POLYNOMIAL, nm, opt), p.base_lr, "base_lr");
    if (!s) return NULL;
    s->decay_steps = p.decay_steps;
    s->poly_end_lr = p.end_lr;
    s->power = p.power;
    s->cycle = p.cycle;
    return sched_start(s);
}

dg_lr_scheduler *dg_one_cycle_lr(dg_optimizer *opt, dg_one_cycle_lr_params p) {
    DG_CHECK_PARAMS("one_cycle_lr", p, dg_one_cycle_lr_default_params);
    const char *nm = "one_cycle_lr";
    DG_CHECK(p.max_lr == DG_LR_FROM_OPTIMIZER || (p.max_lr > 0 && isfinite(p.max_lr)),
             "%s: max_lr must be > 0 or DG_LR_FROM_OPTIMIZER, got %g", nm, p.max_lr);
    DG_CHECK(p.total_steps > 0, "%s: total_steps must be > 0, got %d", nm, p.total_steps);
    DG_CHECK(p.pct_start >= 0 && p.pct_start <= 1, "%s: pct_start must be in [0, 1], got %g", nm, p.pct_start);
    DG_CHECK(p.anneal_strategy == DG_ANNEAL_COS || p.anneal_strategy == DG_ANNEAL_LINEAR,
             "%s: anneal_strategy must be DG_ANNEAL_COS or DG_ANNEAL_LINEAR, got %d", nm, (int)p.anneal_strategy);
    DG_CHECK(p.div_factor > 0 && isfinite(p.div_factor), "%s: div_factor must be > 0, got %g", nm, p.div_factor);
    DG_CHECK(p.final_div_factor > 0 && isfinite(p.final_div_factor), "%s: final_div_factor must be > 0, got %g", nm,
             p.final_div_factor);
    if (p.cycle_momentum) {
        DG_CHECK(p.base_momentum >= 0 && p.base_momentum < 1, "%s: base_momentum must be in [0, 1), got %g", nm,
                 p.base_momentum);
        DG_CHECK(p.max_momentum >= 0 && p.max_momentum < 1, "%s: max_momentum must be in [0, 1), got %g", nm,
                 p.max_momentum);
        const char *why = opt ? dg_opt_momentum_missing(opt) : NULL;
        DG_CHECK(!why, "%s: cycle_momentum is set but %s", nm, why);
    }
    dg_lr_scheduler *s = with_base(sched_new(LR_ONE_CYCLE, nm, opt), p.max_lr, "max_lr");
    if (!s) return NULL;
    s->oc = p;
    return sched_start(s);
}

dg_lr_scheduler *dg_sequential_lr(dg_optimizer *opt, dg_sequential_lr_params p) {
    const char *nm = "sequential_lr";
    int n = p.n_schedulers;
    int rc = 0;
    /* owned from here on, also on failure: each child is freed once, by s or here */
    if ((rc = dg_params_check(nm, p.params_tag, "dg_sequential_lr_default_params"))) {
        n = p.schedulers && n > 0 ? n : 0;   /* the children named are still freed below */
    } else if (n < 1 || !p.schedulers) {
        DG_ERR(DG_EINVAL, "%s: %s", nm, !p.schedulers ? "schedulers is NULL" : "no schedulers (n_schedulers < 1)");
        rc = DG_EINVAL;
    }
    for (int k = 0; !rc && k < n; k++)
        if (!p.schedulers[k]) { DG_PROPAGATE(DG_EINVAL, "%s: scheduler %d is NULL", nm, k); rc = DG_EINVAL; }
    for (int k = 0; !rc && k < n; k++)
        for (int j = 0; !rc && j < k; j++)
            if (p.schedulers[j] == p.schedulers[k]) {
                DG_ERR(DG_EINVAL, "%s: scheduler %d is scheduler %d again", nm, k, j);
                rc = DG_EINVAL;
            }
    if (!rc && (p.n_milestones != n - 1 || (n > 1 && !p.milestones))) {
        DG_ERR(DG_EINVAL, "%s: %s: expects one milestone fewer than schedulers, got %d schedulers and %d milestones", nm,
               p.n_milestones != n - 1 ? "n_milestones" : "milestones is NULL", n, p.n_milestones);
        rc = DG_EINVAL;
    }
    for (int k = 0; !rc && k < p.n_milestones; k++)
        if (p.milestones[k] <= (k ? p.milestones[k - 1] : 0)) {
            DG_ERR(DG_EINVAL, "%s: milestones must be > 0 and ascending (milestones[%d] = %d)", nm, k, p.milestones[k]);
            rc = DG_EINVAL;
        }
    for (int k = 0; !rc && k < n; k++) rc = adopt(nm, &opt, p.schedulers[k], k);
    dg_lr_scheduler *s = rc ? NULL : sched_new(LR_SEQUENTIAL, nm, opt);
    if (s) {
        s->children = calloc((size_t)n, sizeof *s->children);
        s->ints = malloc(sizeof(int) * (size_t)n);
        if (!s->children || !s->ints) { dg_lr_scheduler_free(s); s = NULL; DG_ERR(DG_ENOMEM, "%s: out of memory", nm); }
    }
    if (!s) {
        for (int k = 0; p.schedulers && k < n; k++) {
            bool dup = false;   /* a repeated child is freed once */
            for (int j = 0; j < k; j++) dup |= p.schedulers[j] == p.schedulers[k];
            if (!dup) dg_lr_scheduler_free(p.schedulers[k]);
        }
        return NULL;
    }
    memcpy(s->children, p.schedulers, sizeof *s->children * (size_t)n);
    s->n_ints = n - 1;
    if (n > 1) memcpy(s->ints, p.milestones, sizeof(int) * (size_t)(n - 1));
    for (int k = 0; k < n; k++) {
        char which[32];
        snprintf(which, sizeof which, "scheduler %d", k);
        if (check_child_groups(s, s->children[k], which) != 0) { dg_lr_scheduler_free(s); return NULL; }
    }
    return sched_start(s);
}

dg_lr_scheduler *dg_reduce_lr_on_plateau(dg_optimizer *opt, dg_reduce_lr_on_plateau_params p) {
    DG_CHECK_PARAMS("reduce_lr_on_plateau", p, dg_reduce_lr_on_plateau_default_params);
    const char *nm = "reduce_lr_on_plateau";
    DG_CHECK_HANDLE(opt, "%s: opt is NULL (the scheduler lowers an optimizer's lrs)", nm);
    DG_CHECK(p.mode == DG_PLATEAU_MIN || p.mode == DG_PLATEAU_MAX, "%s: mode must be DG_PLATEAU_MIN or DG_PLATEAU_MAX, "
             "got %d", nm, (int)p.mode);
    DG_CHECK(p.factor >= 0 && p.factor < 1, "%s: factor must be in [0, 1), got %g", nm, p.factor);
    DG_CHECK(p.patience >= 0, "%s: patience must be >= 0, got %d", nm, p.patience);
    DG_CHECK(p.threshold >= 0 && isfinite(p.threshold), "%s: threshold must be >= 0, got %g", nm, p.threshold);
    DG_CHECK(p.threshold_mode == DG_THRESHOLD_REL || p.threshold_mode == DG_THRESHOLD_ABS,
             "%s: threshold_mode must be DG_THRESHOLD_REL or DG_THRESHOLD_ABS, got %d", nm, (int)p.threshold_mode);
    DG_CHECK(p.cooldown >= 0, "%s: cooldown must be >= 0, got %d", nm, p.cooldown);
    DG_CHECK(p.min_lr >= 0 && isfinite(p.min_lr), "%s: min_lr must be >= 0, got %g", nm, p.min_lr);
    DG_CHECK(p.eps >= 0 && isfinite(p.eps), "%s: eps must be >= 0, got %g", nm, p.eps);
    dg_lr_scheduler *s = sched_new(LR_PLATEAU, nm, opt);
    if (!s) return NULL;
    s->pl = p;
    s->best = p.mode == DG_PLATEAU_MIN ? INFINITY : -INFINITY;   /* torch's mode_worse */
    if (sync_mirrors(s) != 0) { dg_lr_scheduler_free(s); return NULL; }
    return s;
}

/* ---- stepping --------------------------------------------------------------------------------- */

int dg_lr_scheduler_step(dg_lr_scheduler *s) {
    DG_CHECK_HANDLE_INT(s, "lr_scheduler_step: scheduler is NULL");
    DG_CHECK_INT(s->kind != LR_PLATEAU, "%s: steps on a metric: call dg_lr_scheduler_step_metric", s->name);
    return set_epoch(s, s->epoch + 1);
}

/* torch's ReduceLROnPlateau.is_better */
static bool is_better(const dg_lr_scheduler *s, double a, double best) {
    const dg_reduce_lr_on_plateau_params *p = &s->pl;
    if (p->mode == DG_PLATEAU_MIN)
        return p->threshold_mode == DG_THRESHOLD_REL ? a < best * (1. - p->threshold) : a < best - p->threshold;
    return p->threshold_mode == DG_THRESHOLD_REL ? a > best * (p->threshold + 1.) : a > best + p->threshold;
}

int dg_lr_scheduler_step_metric(dg_lr_scheduler *s, double metric) {
    DG_CHECK_HANDLE_INT(s, "lr_scheduler_step_metric: scheduler is NULL");
    DG_CHECK_INT(s->kind == LR_PLATEAU, "%s: takes no metric: call dg_lr_scheduler_step (only reduce_lr_on_plateau reads "
                 "one)", s->name);
    const dg_reduce_lr_on_plateau_params *p = &s->pl;
    int n = dg_optimizer_num_groups(s->opt);
    if (n < 1) return dg_last_status() ? dg_last_status() : DG_EINVAL;
    /* as torch's step(metrics): the counters first, then a reduction past the patience */
    s->epoch++;
    if (is_better(s, metric, s->best)) {
        s->best = metric;
        s->num_bad = 0;
    } else {
        s->num_bad++;
    }
    if (s->cooldown_counter > 0) {
        s->cooldown_counter--;
        s->num_bad = 0;   /* bad epochs in cooldown do not count */
    }
    int rc = 0;
    if (s->num_bad > p->patience) {
        for (int g = 0; g < n && !rc; g++) {
            double old = dg_optimizer_get_group_lr(s->opt, g), nw = fmax(old * p->factor, p->min_lr);
            if (old - nw > p->eps) rc = dg_opt_set_current_lr(s->opt, g, nw);
        }
        s->cooldown_counter = p->cooldown;
        s->num_bad = 0;
    }
    if (!rc) rc = sync_mirrors(s);
    return rc;
}

int dg_lr_scheduler_set_epoch(dg_lr_scheduler *s, int64_t epoch) {
    DG_CHECK_HANDLE_INT(s, "lr_scheduler_set_epoch: scheduler is NULL");
    DG_CHECK_INT(epoch >= 0, "%s: epoch must be >= 0, got %lld", s->name, (long long)epoch);
    return set_epoch(s, epoch);
}

double dg_lr_scheduler_get_lr(const dg_lr_scheduler *s) {
    if (!s) { DG_PROPAGATE(DG_EINVAL, "lr_scheduler_get_lr: scheduler is NULL"); return NAN; }
    return s->kind == LR_PLATEAU ? dg_optimizer_get_lr(s->opt) : s->lrs[0];
}

double dg_lr_scheduler_get_momentum(const dg_lr_scheduler *s) {
    if (!s) { DG_PROPAGATE(DG_EINVAL, "lr_scheduler_get_momentum: scheduler is NULL"); return NAN; }
    return s->momentum;
}

int64_t dg_lr_scheduler_epoch(const dg_lr_scheduler *s) { return s ? s->epoch : -1; }

void dg_lr_scheduler_free(dg_lr_scheduler *s) {
    if (!s) return;
    dg_lr_scheduler_free(s->after);
    for (int k = 0; s->children && k <= s->n_ints; k++) dg_lr_scheduler_free(s->children[k]);
    for (int k = 0; k < ST_MAX; k++) dg_tensor_free(s->st[k]);
    free(s->children);
    free(s->ints);
    free(s->values);
    free(s->lrs);
    free(s->base);
    free(s->end_lr);
    free(s->const_lr);
    free(s);
}

/* ---- state for checkpoints -------------------------------------------------------------------- */

int dg_lr_scheduler_state_count(const dg_lr_scheduler *s) {
    DG_CHECK_HANDLE_INT(s, "lr_scheduler_state_count: scheduler is NULL");
    return s->n_state;
}

const char *dg_lr_scheduler_state_name(const dg_lr_scheduler *s, int i) {
    DG_CHECK_HANDLE(s, "lr_scheduler_state_name: scheduler is NULL");
    DG_CHECK(i >= 0 && i < s->n_state, "%s: state index %d out of range [0, %d)", s->name, i, s->n_state);
    return st_names[i];
}

dg_tensor *dg_lr_scheduler_state_tensor(const dg_lr_scheduler *s, int i) {
    DG_CHECK_HANDLE(s, "lr_scheduler_state_tensor: scheduler is NULL");
    DG_CHECK(i >= 0 && i < s->n_state, "%s: state index %d out of range [0, %d)", s->name, i, s->n_state);
    return s->st[i];
}

/* Entry `name`'s index, or an error naming the scheduler's entries. */
static int state_index(const dg_lr_scheduler *s, const char *name, char *why, size_t cap) {
    for (int k = 0; k < s->n_state; k++)
        if (strcmp(name, st_names[k]) == 0) return k;
    snprintf(why, cap, "%s keeps %s", s->name, s->kind == LR_PLATEAU ? "'epoch', 'best', 'num_bad_epochs' and "
             "'cooldown_counter'" : "only 'epoch' (its lr is a function of the epoch)");
    return -1;
}

/* Why value cannot be entry k of s, or NULL. The epoch is checked by computing the schedule
 * there (a one-cycle schedule ends at total_steps; a lambda may refuse an epoch). */
static const char *check_value(const dg_lr_scheduler *s, int k, const dg_tensor *v, char *why, size_t cap) {
    if (dg_numel(v) != 1) return "must hold one value";
    double x = dg_item(v);
    if (k == ST_BEST) return isnan(x) ? "is NaN" : NULL;
    if (!(x >= 0 && x == floor(x) && x < 9.0e15)) {
        snprintf(why, cap, "= %g is not a count >= 0", x);
        return why;
    }
    if (k == ST_EPOCH && s->kind != LR_PLATEAU) {
        dg_error_saved before;
        dg_error_save(&before);
        double *tmp = new_doubles(s->n_groups);
        int rc = check_groups(s);
        if (!rc) rc = tmp ? lrs_at(s, (int64_t)x, tmp) : DG_ENOMEM;
        free(tmp);
        if (rc) {
            snprintf(why, cap, "%.0f has no lr: %s", x, rc == DG_ENOMEM ? "out of memory" : dg_last_error());
            dg_error_restore(&before);
            return why;
        }
    }
    return NULL;
}

static int apply_value(dg_lr_scheduler *s, int k, double x) {
    switch (k) {
    case ST_EPOCH: return set_epoch(s, (int64_t)x);
    case ST_BEST: s->best = x; break;
    case ST_BAD: s->num_bad = (int64_t)x; break;
    case ST_COOLDOWN: s->cooldown_counter = (int64_t)x; break;
    }
    return sync_mirrors(s);
}

int dg_lr_scheduler_load_state(dg_lr_scheduler *s, const char *name, const dg_tensor *value) {
    DG_CHECK_HANDLE_INT(s, "lr_scheduler_load_state: scheduler is NULL");
    DG_CHECK_INT(name, "%s: load_state: name is NULL", s->name);
    char what[96], why[256];
    snprintf(what, sizeof what, "tensor for '%s'", name);
    int rc = dg_tensor_check(s->name, what, value);
    if (rc) return rc;
    int k = state_index(s, name, why, sizeof why);
    DG_CHECK_INT(k >= 0, "%s: load_state: unknown state name '%s': %s", s->name, name, why);
    const char *bad = check_value(s, k, value, why, sizeof why);
    DG_CHECK_INT(!bad, "%s: load_state: '%s' %s", s->name, name, bad);
    return apply_value(s, k, dg_item(value));
}

int dg_lr_scheduler_load_dict(dg_lr_scheduler *s, const dg_tensor_dict *d, const char *path, bool check_only) {
    char why[256];
    for (int i = 0; i < dg_tensor_dict_size(d); i++) {
        const char *n = dg_tensor_dict_name(d, i);
        int k = state_index(s, n, why, sizeof why);
        const char *bad = k < 0 ? why : check_value(s, k, dg_tensor_dict_tensor(d, i), why, sizeof why);
        if (bad) {
            DG_ERR(DG_EFORMAT, "train checkpoint %s: entry 'scheduler.%s' does not fit the %s: %s", path, n, s->name, bad);
            return DG_EFORMAT;
        }
    }
    for (int k = 0; k < s->n_state; k++)
        if (!dg_tensor_dict_get(d, st_names[k])) {
            DG_ERR(DG_EFORMAT, "train checkpoint %s: the %s's state needs 'scheduler.%s', which the file lacks", path,
                   s->name, st_names[k]);
            return DG_EFORMAT;
        }
    if (check_only) return 0;
    /* the counters before the epoch: set_epoch of a plateau only moves the counter, and the
     * others have no counters */
    for (int k = s->n_state - 1; k >= 0; k--) {
        int rc = apply_value(s, k, dg_item(dg_tensor_dict_get(d, st_names[k])));
        if (rc) return rc;
    }
    return 0;
}
