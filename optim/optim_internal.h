/* optim/optim_internal.h — the struct behind dg_optimizer, shared by the files of optim/: the
 * per-kind table (state slot names, update rule), parameter groups, and helpers; the LR
 * schedulers' state for the training checkpoint. Not part of the public API. */
#ifndef DG_OPTIM_INTERNAL_H
#define DG_OPTIM_INTERNAL_H

#include <dygraph.h>
#include <dygraph/extension.h>   /* errors, dg_tensor_ptr, the fused update */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DG_ERR DG_RAISE

#define DG_OPT_MAX_SLOTS 3        /* buffers shaped like a parameter: s0, s1, s2 of dg_update_tensor */
#define DG_OPT_MAX_ENTRIES (DG_OPT_MAX_SLOTS + 2)   /* + "step" + "mu_product" */

typedef enum dg_opt_kind {
    DG_OPT_SGD, DG_OPT_MOMENTUM, DG_OPT_ADAGRAD, DG_OPT_ADAM, DG_OPT_ADAMW, DG_OPT_RMSPROP, DG_OPT_ADAMAX, DG_OPT_NADAM,
    DG_OPT_ADADELTA, DG_OPT_LBFGS
} dg_opt_kind;

/* What one state entry of a parameter is: buffer k (slot k), the step count, NAdam's mu_product. */
typedef enum { DG_ENT_BUF, DG_ENT_STEP, DG_ENT_MU } dg_opt_entry_kind;
typedef struct dg_opt_entry { dg_opt_entry_kind kind; int slot; const char *name; } dg_opt_entry;

/* One parameter's state. buf[] exist together once the parameter has state (NULL where the
 * optimizer's settings use no such slot). */
typedef struct dg_opt_state {
    bool has;
    bool fresh;                   /* buffers just made, not yet written by a step or a load
                                     (momentum's buffer starts as the first gradient, as PyTorch) */
    dg_tensor *buf[DG_OPT_MAX_SLOTS];
    dg_tensor *step_t;            /* i64 0-d CPU mirror of step, for export; NULL for kinds without steps */
    int64_t step;                 /* per parameter, as PyTorch: steps taken with a gradient */
    dg_tensor *mu_t;              /* nadam: f32 0-d CPU mirror of mu_product */
    double mu_product;            /* nadam: mu_1 ... mu_t, kept in float32 as PyTorch's state tensor */
    dg_tensor *master;            /* float16 / bfloat16 parameter: its float32 master copy, which the
                                     rule updates (made at the first step from the parameter; the
                                     buffers are float32 too) */
    char name[DG_OPT_MAX_ENTRIES][40];   /* "<i>.<entry>", in the order of o->entry */
    char master_name[40];                /* "<i>.master_weight" */
} dg_opt_state;

typedef struct dg_optimizer dg_optimizer;

/* Per-kind description. The element rule runs on the parameters' device (dg_fused_update);
 * prepare(o, i, t) advances parameter i's step count and fills its per-step scalars in t
 * (its state exists when the kind has slots). slot[k] names buffer k (the s<k> of the rule);
 * a constructor may switch slots off for its settings (o->slot_on). */
typedef struct dg_opt_kind_info {
    const char *name;
    dg_update_kind rule;
    int n_slots;
    const char *slot[DG_OPT_MAX_SLOTS];
    bool has_step;
    bool has_mu_product;          /* nadam's per-parameter scalar "mu_product" */
    bool state_at_construction;   /* adagrad: state made for every parameter up front, as PyTorch */
    void (*prepare)(dg_optimizer *o, int i, dg_update_tensor *t);
} dg_opt_kind_info;

/* A parameter group: params [first, first + n) of the optimizer, with its own lr and weight
 * decay (torch's param_groups). */
typedef struct dg_opt_group {
    int first, n;
    double lr;                    /* current: what the next step uses (schedulers set it) */
    double base_lr;               /* the user's: constructor, group params or dg_optimizer_set_(group_)lr;
                                     what DG_LR_FROM_OPTIMIZER reads */
    double weight_decay;
    dg_tensor *lr_t;              /* f64 0-d CPU mirror of lr, for export */
    char lr_name[32];             /* "lr" for group 0, "param_groups.<g>.lr" after */
} dg_opt_group;

struct dg_optimizer {
    dg_opt_kind kind;
    const dg_opt_kind_info *info;
    bool slot_on[DG_OPT_MAX_SLOTS];         /* the kind's slots these settings use */
    dg_opt_entry entry[DG_OPT_MAX_ENTRIES]; /* each parameter's state entries, in export order */
    int n_entries;
    int n, cap;
    dg_tensor **params;           /* borrowed */
    int *group_of;                /* per parameter */
    dg_opt_state *state;
    dg_opt_group *groups;
    int n_groups;
    double default_lr, default_weight_decay;   /* the constructor's (torch's optimizer.defaults) */
    double grad_clip_norm;
    double momentum; bool nesterov;         /* momentum, rmsprop */
    double dampening;                       /* momentum */
    double beta1, beta2, eps;               /* adam, adamw, adamax, nadam; eps also adagrad, rmsprop */
    bool amsgrad;                           /* adam, adamw */
    double alpha; bool centered;            /* rmsprop */
    double momentum_decay;                  /* nadam */
    double lr_decay;                        /* adagrad */
    double rho;                             /* adadelta */
    double init_acc;                        /* initial value of new buffers (adagrad's initial_accumulator_value) */
    /* set by fleet (dist/ps/fleet_ps.c, dist/fleet.c): dg_optimizer_step calls it instead of
     * stepping here — parameter-server mode pushes the gradients to the servers, which run this
     * optimizer's rule; geo mode and Local SGD step here (dg_opt_step_here) and then exchange */
    int (*remote_step)(void *ctx);
    void *remote_ctx;
    struct dg_lbfgs *lbfgs;                 /* lbfgs: its settings and state (optim/lbfgs_internal.h); NULL otherwise */
};
/* lbfgs.c: frees an LBFGS optimizer's own part (dg_optimizer_free calls it). */
void dg_lbfgs_free(struct dg_lbfgs *L);
/* The step on this process's parameters with the optimizer's own rule, whatever remote_step says:
 * what a remote_step that also steps locally calls. */
int dg_opt_step_here(dg_optimizer *o);

/* The lr of the group parameter i belongs to (prepare's lr). */
static inline double dg_opt_lr_of(const dg_optimizer *o, int i) { return o->groups[o->group_of[i]].lr; }

/* optimizer.c: validates params (names the optimizer in errors) and builds the common part with
 * one group; NULL on bad input. Kind-specific fields are set by the caller, then dg_opt_finish. */
dg_optimizer *dg_opt_new(dg_opt_kind kind, const dg_opt_kind_info *info, dg_tensor *const *params, int n,
                         double lr, double weight_decay, double grad_clip_norm);
/* Switches slots on/off (every slot of the kind is on by default) and lays out the state
 * entries; makes the state of every parameter for kinds that make it up front. Frees o and
 * returns NULL on failure. */
dg_optimizer *dg_opt_finish(dg_optimizer *o);
/* adam.c: the beta/eps checks the Adam family shares, naming the optimizer and the field. */
int dg_opt_check_betas(const char *nm, double beta1, double beta2, double eps);
/* Makes parameter i's state (buffers at o->init_acc, step 0) if it has none. */
int dg_opt_ensure_state(dg_optimizer *o, int i);
/* A caller-owned 0-d CPU tensor. */
dg_tensor *dg_opt_cpu_scalar(double v, dg_dtype dt);
/* state.c: a state name as a group's lr (*group >= 0), parameter *param's entry o->entry[*ent],
 * or (*ent == DG_OPT_ENT_MASTER) a half parameter's master weights; DG_EINVAL with a message
 * naming what does not fit. */
#define DG_OPT_ENT_MASTER (-2)
int dg_opt_parse_state_name(const dg_optimizer *o, const char *name, int *group, int *param, int *ent);
/* The lr of group g that the next step uses, set by a scheduler or a checkpoint: unlike
 * dg_optimizer_set_group_lr, the group's base lr stays. lr >= 0 and finite. */
int dg_opt_set_current_lr(dg_optimizer *o, int g, double lr);
/* The group's base lr (what DG_LR_FROM_OPTIMIZER reads). */
double dg_opt_base_lr(const dg_optimizer *o, int g);
/* OneCycleLR's momentum cycling: whether the optimizer has a momentum to cycle (momentum,
 * rmsprop made with momentum > 0: its momentum; adam, adamw, adamax, nadam: beta1), and setting
 * it; NULL or a reason it has none. */
const char *dg_opt_momentum_missing(const dg_optimizer *o);
int dg_opt_set_cycled_momentum(dg_optimizer *o, double m);
double dg_opt_cycled_momentum(const dg_optimizer *o);

/* lr_scheduler.c, for the training checkpoint: checks every entry of d (the file's
 * "scheduler.<name>" entries, named without the prefix) against s, and that none s keeps is
 * missing, then (unless check_only) loads them. A file with only "epoch" fits every schedule
 * that is a function of its epoch, as files from before the plateau scheduler hold. */
int dg_lr_scheduler_load_dict(dg_lr_scheduler *s, const dg_tensor_dict *d, const char *path, bool check_only);

/* grad_scaler.c, for the training checkpoint: checks the loss scaler entries of d ("scale",
 * "incr_count", "decr_count", named without a prefix) against s, naming `where` in errors, then
 * (unless check_only) loads them. */
int dg_amp_load_dict_checked(dg_amp_scaler *s, const dg_tensor_dict *d, const char *where, bool check_only);

#endif
