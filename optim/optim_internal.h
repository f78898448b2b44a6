/* optim/optim_internal.h — the struct behind dg_optimizer, shared by the files of optim/: the
 * per-kind table (state slot names, update rule) and helpers. Not part of the public API. */
#ifndef DG_OPTIM_INTERNAL_H
#define DG_OPTIM_INTERNAL_H

#include <dygraph.h>
#include <dygraph/extension.h>   /* errors, dg_tensor_ptr, the fused update */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DG_ERR DG_RAISE

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

/* Per-kind description. The element rule runs on the parameters' device (dg_fused_update);
 * prepare(o, i, t) advances parameter i's step count and fills its per-step scalars in t
 * (its state exists when the kind has slots). */
typedef struct dg_opt_kind_info {
    const char *name;
    dg_update_kind rule;
    int n_slots;
    const char *slot[DG_OPT_MAX_SLOTS];
    bool has_step;
    void (*prepare)(dg_optimizer *o, int i, dg_update_tensor *t);
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
/* A caller-owned 0-d CPU tensor. */
dg_tensor *dg_opt_cpu_scalar(double v, dg_dtype dt);

#endif
