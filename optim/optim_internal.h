/* optim/optim_internal.h — the struct behind dg_optimizer, shared by the files of optim/: the
 * per-kind table (state slot names, update rule) and helpers. Not part of the public API. */
#ifndef DG_OPTIM_INTERNAL_H
#define DG_OPTIM_INTERNAL_H

#include "../eager/internal.h"   /* DG_ERR / DG_CHECK and the error slot; tensors via the public API only */

#define DG_OPT_MAX_SLOTS 2        /* buffers shaped like a parameter */

typedef enum dg_opt_kind { DG_OPT_SGD, DG_OPT_MOMENTUM, DG_OPT_ADAGRAD, DG_OPT_ADAM, DG_OPT_ADAMW } dg_opt_kind;

/* One parameter's state. buf[] exist together once the parameter has state. */
typedef struct dg_opt_state {
    bool has;
    bool fresh;                   /* buffers just made, not yet written by a step or a load
                                     (momentum's buffer starts as the first gradient, as PyTorch) */
    dg_tensor *buf[DG_OPT_MAX_SLOTS];
    dg_tensor *step_t;            /* i64 0-d CPU mirror of step, for export; NULL for kinds without steps */
    int64_t step;                 /* per parameter, as PyTorch: steps taken with a gradient */
    char name[DG_OPT_MAX_SLOTS + 1][32];   /* "<i>.<slot>": buffers, then "step" */
} dg_opt_state;

typedef struct dg_optimizer dg_optimizer;

/* Per-kind description. update(o, i, p, g) applies one step to parameter i (whose state exists
 * when the kind has slots) and runs in no-grad mode inside a scope that frees temporaries. */
typedef struct dg_opt_kind_info {
    const char *name;
    int n_slots;
    const char *slot[DG_OPT_MAX_SLOTS];
    bool has_step;
    int (*update)(dg_optimizer *o, int i, dg_tensor *p, const dg_tensor *g);
} dg_opt_kind_info;

struct dg_optimizer {
    dg_opt_kind kind;
    const dg_opt_kind_info *info;
    int n;
    dg_tensor **params;           /* borrowed */
    dg_opt_state *state;
    double lr;
    dg_tensor *lr_t;              /* f64 0-d CPU mirror of lr, for export */
    double weight_decay, grad_clip_norm;
    double momentum; bool nesterov;         /* momentum */
    double beta1, beta2, eps;               /* adam, adamw; eps also adagrad */
    double lr_decay;                        /* adagrad */
    double init_acc;                        /* initial value of new buffers (adagrad's initial_accumulator_value) */
};

/* optimizer.c: validates params (names the optimizer in errors) and builds the common part;
 * NULL on bad input. Kind-specific fields are set by the caller. */
dg_optimizer *dg_opt_new(dg_opt_kind kind, const dg_opt_kind_info *info, dg_tensor *const *params, int n,
                         double lr, double weight_decay, double grad_clip_norm);
/* Makes parameter i's state (buffers at o->init_acc, step 0) if it has none. */
int dg_opt_ensure_state(dg_optimizer *o, int i);
/* g + alpha * x as a new tensor (the gradient is never modified). */
dg_tensor *dg_opt_axpy(const dg_tensor *g, double alpha, const dg_tensor *x);
/* A caller-owned 0-d CPU tensor. */
dg_tensor *dg_opt_cpu_scalar(double v, dg_dtype dt);

/* A negative status from an in-place op or a NULL temporary: report and return it. */
#define DG_OPT_TRY(o, expr) do { int rc_ = (expr); if (rc_) {                                    \
        if (!dg_has_error()) DG_ERR(rc_, "%s: update failed in %s", (o)->info->name, __func__);   \
        return rc_; } } while (0)
#define DG_OPT_NONNULL(o, t) do { if (!(t)) {                                                      \
        if (!dg_has_error()) DG_ERR(DG_ENOMEM, "%s: temporary failed in %s", (o)->info->name, __func__); \
        return dg_last_status() ? dg_last_status() : DG_ENOMEM; } } while (0)

#endif
