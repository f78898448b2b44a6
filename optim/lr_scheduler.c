/* optim/lr_scheduler.c — learning-rate schedulers: StepLR, MultiStepLR, ExponentialLR,
 * CosineAnnealingLR (PyTorch's closed forms), Paddle's LinearWarmup and PiecewiseDecay. Each is
 * lr(epoch) in closed form; the scheduler keeps the epoch and pushes lr into its optimizer. */
#include "optim_internal.h"
#include <math.h>

typedef enum { LR_STEP, LR_MULTI_STEP, LR_EXPONENTIAL, LR_COSINE, LR_WARMUP, LR_PIECEWISE } lr_kind;

struct dg_lr_scheduler {
    lr_kind kind;
    const char *name;
    dg_optimizer *opt;            /* borrowed; NULL: free-standing */
    int64_t epoch;
    double lr;                    /* lr(epoch) */
    double base_lr, gamma, eta_min;
    int step_size, t_max;
    int *ints; int n_ints;        /* milestones (sorted) or boundaries */
    double *values;               /* piecewise: n_ints + 1 */
    int warmup_steps;
    double start_lr, end_lr, const_lr;
    dg_lr_scheduler *after;       /* owned */
};

static double lr_at(dg_lr_scheduler *s, int64_t e);

/* Moves s (and what it wraps) to epoch e and sets the optimizer's lr. */
static int set_epoch(dg_lr_scheduler *s, int64_t e) {
    s->epoch = e;
    s->lr = lr_at(s, e);
    return s->opt ? dg_optimizer_set_lr(s->opt, s->lr) : 0;
}

static double lr_at(dg_lr_scheduler *s, int64_t e) {
    switch (s->kind) {
    case LR_STEP: return s->base_lr * pow(s->gamma, (double)(e / s->step_size));
    case LR_MULTI_STEP: {
        int k = 0;   /* bisect_right: milestones <= e */
        while (k < s->n_ints && s->ints[k] <= e) k++;
        return s->base_lr * pow(s->gamma, (double)k);
    }
    case LR_EXPONENTIAL: return s->base_lr * pow(s->gamma, (double)e);
    case LR_COSINE:
        return s->eta_min + (s->base_lr - s->eta_min) * (1 + cos(M_PI * (double)e / s->t_max)) / 2;
    case LR_WARMUP:
        if (e < s->warmup_steps) return (s->end_lr - s->start_lr) * (double)e / (double)s->warmup_steps + s->start_lr;
        if (!s->after) return s->const_lr;
        set_epoch(s->after, e - s->warmup_steps);   /* as Paddle: after.step(epoch - warmup_steps) */
        return s->after->lr;
    case LR_PIECEWISE:
        for (int i = 0; i < s->n_ints; i++)
            if (e < s->ints[i]) return s->values[i];
        return s->values[s->n_ints];
    }
    return NAN;
}

/* A learning-rate field: itself, or for DG_LR_FROM_OPTIMIZER the optimizer's lr (NAN with an
 * error when there is none or the value is out of range). */
static double lr_field(const char *name, const char *field, double v, const dg_optimizer *opt) {
    if (v == DG_LR_FROM_OPTIMIZER) {
        if (opt) return dg_optimizer_get_lr(opt);
        DG_ERR(DG_EINVAL, "%s: %s is DG_LR_FROM_OPTIMIZER but there is no optimizer: pass one or set %s", name, field, field);
        return NAN;
    }
    if (!(v >= 0 && isfinite(v))) {
        DG_ERR(DG_EINVAL, "%s: %s must be >= 0 or DG_LR_FROM_OPTIMIZER, got %g", name, field, v);
        return NAN;
    }
    return v;
}

/* Common construction; lr(0) is applied at once by sched_start. */
static dg_lr_scheduler *sched_new(lr_kind kind, const char *name, dg_optimizer *opt, double base_lr, bool needs_base) {
    if (needs_base && isnan(base_lr = lr_field(name, "base_lr", base_lr, opt))) return NULL;
    dg_lr_scheduler *s = calloc(1, sizeof *s);
    DG_CHECK(s, "%s: out of memory", name);
    s->kind = kind;
    s->name = name;
    s->opt = opt;
    s->base_lr = base_lr;
    return s;
}

static dg_lr_scheduler *sched_start(dg_lr_scheduler *s) {
    if (set_epoch(s, 0) != 0) { dg_lr_scheduler_free(s); return NULL; }
    return s;
}

static int cmp_int(const void *a, const void *b) { int x = *(const int *)a, y = *(const int *)b; return (x > y) - (x < y); }

dg_step_lr_params dg_step_lr_default_params(void) {
    return (dg_step_lr_params){ .base_lr = DG_LR_FROM_OPTIMIZER, .step_size = 0, .gamma = 0.1 };
}
dg_multi_step_lr_params dg_multi_step_lr_default_params(void) {
    return (dg_multi_step_lr_params){ .base_lr = DG_LR_FROM_OPTIMIZER, .milestones = NULL, .n_milestones = 0, .gamma = 0.1 };
}
dg_exponential_lr_params dg_exponential_lr_default_params(void) {
    return (dg_exponential_lr_params){ .base_lr = DG_LR_FROM_OPTIMIZER, .gamma = 0 };
}
dg_cosine_annealing_lr_params dg_cosine_annealing_lr_default_params(void) {
    return (dg_cosine_annealing_lr_params){ .base_lr = DG_LR_FROM_OPTIMIZER, .t_max = 0, .eta_min = 0 };
}
dg_linear_warmup_lr_params dg_linear_warmup_lr_default_params(void) {
    return (dg_linear_warmup_lr_params){ .warmup_steps = 0, .start_lr = 0, .end_lr = DG_LR_FROM_OPTIMIZER,
                                         .lr = DG_LR_FROM_OPTIMIZER };
}
dg_piecewise_lr_params dg_piecewise_lr_default_params(void) {
    return (dg_piecewise_lr_params){ .boundaries = NULL, .n_boundaries = 0, .values = NULL };
}

dg_lr_scheduler *dg_step_lr(dg_optimizer *opt, dg_step_lr_params p) {
    DG_CHECK(p.step_size > 0, "step_lr: step_size must be > 0, got %d", p.step_size);
    DG_CHECK(p.gamma >= 0 && isfinite(p.gamma), "step_lr: gamma must be >= 0, got %g", p.gamma);
    dg_lr_scheduler *s = sched_new(LR_STEP, "step_lr", opt, p.base_lr, true);
    if (!s) return NULL;
    s->step_size = p.step_size;
    s->gamma = p.gamma;
    return sched_start(s);
}

dg_lr_scheduler *dg_multi_step_lr(dg_optimizer *opt, dg_multi_step_lr_params p) {
    DG_CHECK(p.n_milestones >= 0 && (p.n_milestones == 0 || p.milestones), "multi_step_lr: %s",
             p.n_milestones < 0 ? "negative n_milestones" : "milestones is NULL");
    DG_CHECK(p.gamma >= 0 && isfinite(p.gamma), "multi_step_lr: gamma must be >= 0, got %g", p.gamma);
    dg_lr_scheduler *s = sched_new(LR_MULTI_STEP, "multi_step_lr", opt, p.base_lr, true);
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
    DG_CHECK(p.gamma > 0 && isfinite(p.gamma), "exponential_lr: gamma must be > 0, got %g", p.gamma);
    dg_lr_scheduler *s = sched_new(LR_EXPONENTIAL, "exponential_lr", opt, p.base_lr, true);
    if (!s) return NULL;
    s->gamma = p.gamma;
    return sched_start(s);
}

dg_lr_scheduler *dg_cosine_annealing_lr(dg_optimizer *opt, dg_cosine_annealing_lr_params p) {
    DG_CHECK(p.t_max > 0, "cosine_annealing_lr: t_max must be > 0, got %d", p.t_max);
    DG_CHECK(p.eta_min >= 0 && isfinite(p.eta_min), "cosine_annealing_lr: eta_min must be >= 0, got %g", p.eta_min);
    dg_lr_scheduler *s = sched_new(LR_COSINE, "cosine_annealing_lr", opt, p.base_lr, true);
    if (!s) return NULL;
    s->t_max = p.t_max;
    s->eta_min = p.eta_min;
    return sched_start(s);
}

dg_lr_scheduler *dg_linear_warmup_lr(dg_optimizer *opt, dg_lr_scheduler *after, dg_linear_warmup_lr_params p) {
    if (after) {   /* owned from here on, also on failure */
        if (!opt) opt = after->opt;
        after->opt = NULL;
    }
    const char *nm = "linear_warmup_lr";
    if (p.warmup_steps <= 0 || !(p.start_lr >= 0 && isfinite(p.start_lr))) {
        DG_ERR(DG_EINVAL, "%s: %s (warmup_steps %d, start_lr %g)", nm,
               p.warmup_steps <= 0 ? "warmup_steps must be > 0" : "start_lr must be >= 0", p.warmup_steps, p.start_lr);
        dg_lr_scheduler_free(after);
        return NULL;
    }
    double end_lr = lr_field(nm, "end_lr", p.end_lr, opt);
    double const_lr = isnan(end_lr) ? NAN : lr_field(nm, "lr", p.lr, opt);
    dg_lr_scheduler *s = isnan(const_lr) ? NULL : sched_new(LR_WARMUP, nm, opt, 0, false);
    if (!s) { dg_lr_scheduler_free(after); return NULL; }
    s->warmup_steps = p.warmup_steps;
    s->start_lr = p.start_lr;
    s->end_lr = end_lr;
    s->const_lr = const_lr;
    s->after = after;
    return sched_start(s);
}

dg_lr_scheduler *dg_piecewise_lr(dg_optimizer *opt, dg_piecewise_lr_params p) {
    const char *nm = "piecewise_lr";
    DG_CHECK(p.n_boundaries >= 0 && (p.n_boundaries == 0 || p.boundaries) && p.values, "%s: %s", nm,
             p.n_boundaries < 0 ? "negative n_boundaries" : !p.values ? "values is NULL" : "boundaries is NULL");
    for (int i = 1; i < p.n_boundaries; i++)
        DG_CHECK(p.boundaries[i] > p.boundaries[i - 1], "%s: boundaries must be ascending (boundaries[%d] = %d after %d)",
                 nm, i, p.boundaries[i], p.boundaries[i - 1]);
    for (int i = 0; i <= p.n_boundaries; i++)
        DG_CHECK(p.values[i] >= 0 && isfinite(p.values[i]), "%s: values[%d] must be >= 0, got %g", nm, i, p.values[i]);
    dg_lr_scheduler *s = sched_new(LR_PIECEWISE, nm, opt, 0, false);
    if (!s) return NULL;
    s->n_ints = p.n_boundaries;
    s->ints = malloc(sizeof(int) * (size_t)(p.n_boundaries ? p.n_boundaries : 1));
    s->values = malloc(sizeof(double) * (size_t)(p.n_boundaries + 1));
    if (!s->ints || !s->values) { dg_lr_scheduler_free(s); DG_ERR(DG_ENOMEM, "%s: out of memory", nm); return NULL; }
    if (p.n_boundaries) memcpy(s->ints, p.boundaries, sizeof(int) * (size_t)p.n_boundaries);
    memcpy(s->values, p.values, sizeof(double) * (size_t)(p.n_boundaries + 1));
    return sched_start(s);
}

int dg_lr_scheduler_step(dg_lr_scheduler *s) {
    DG_CHECK_HANDLE_INT(s, "lr_scheduler_step: scheduler is NULL");
    return set_epoch(s, s->epoch + 1);
}

int dg_lr_scheduler_set_epoch(dg_lr_scheduler *s, int64_t epoch) {
    DG_CHECK_HANDLE_INT(s, "lr_scheduler_set_epoch: scheduler is NULL");
    DG_CHECK_INT(epoch >= 0, "%s: epoch must be >= 0, got %lld", s->name, (long long)epoch);
    return set_epoch(s, epoch);
}

double dg_lr_scheduler_get_lr(const dg_lr_scheduler *s) {
    if (!s) { DG_PROPAGATE(DG_EINVAL, "lr_scheduler_get_lr: scheduler is NULL"); return NAN; }
    return s->lr;
}

int64_t dg_lr_scheduler_epoch(const dg_lr_scheduler *s) { return s ? s->epoch : -1; }

void dg_lr_scheduler_free(dg_lr_scheduler *s) {
    if (!s) return;
    dg_lr_scheduler_free(s->after);
    free(s->ints);
    free(s->values);
    free(s);
}
