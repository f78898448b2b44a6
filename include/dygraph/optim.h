/* dygraph/optim.h — optimizers (SGD, Momentum, Adagrad, Adam, AdamW), global-norm gradient
 * clipping, learning-rate schedulers, and optimizer state as named tensors for checkpoints.
 *
 * An optimizer updates an array of parameters: leaf tensors that require grad. It copies the
 * array but does not own the tensors, which must outlive it. dg_optimizer_step updates every
 * parameter that has a gradient (dg_grad) and skips the others, like PyTorch; the update runs
 * in no-grad mode with in-place ops, so it may be called inside or outside a scope. Updates
 * follow PyTorch 1.13's torch.optim.* exactly (per-parameter state and step counts, L2 weight
 * decay added to the gradient, AdamW's decoupled decay p *= 1 - lr * wd).
 *
 * Params structs are passed by value and taken literally (core.h): start from
 * dg_<name>_default_params() and set what differs, e.g. Adam with PyTorch's betas and eps and a
 * learning rate of 3e-4:
 *     dg_adam_params p = dg_adam_default_params();
 *     p.lr = 3e-4;
 * Every optimizer takes grad_clip_norm: when finite, step first clips the gradients of its
 * parameters to that global L2 norm (dg_clip_grad_norm; Paddle's grad_clip=ClipGradByGlobalNorm);
 * the default, INFINITY, never clips.
 *
 * Errors follow core.h: constructors return NULL, other calls a negative dg_status, and
 * dg_last_error() names the optimizer ("adam: parameter 1 [3, 4] is not a leaf ..."). */
#ifndef DYGRAPH_OPTIM_H
#define DYGRAPH_OPTIM_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_optimizer dg_optimizer;

/* p -= lr * (grad + weight_decay * p) */
typedef struct dg_sgd_params {
    double lr;              /* >= 0; default 1e-3 (Paddle's; PyTorch has none) */
    double weight_decay;    /* L2 coefficient added to the gradient, >= 0; default 0 */
    double grad_clip_norm;  /* >= 0: clip to this global norm before each step; default INFINITY: never */
} dg_sgd_params;
DG_API dg_sgd_params dg_sgd_default_params(void);

/* torch.optim.SGD with momentum, dampening 0 (= paddle.optimizer.Momentum):
 * buf = momentum * buf + grad (buf = grad on a parameter's first step);
 * p -= lr * (nesterov ? grad + momentum * buf : buf). State: "momentum_buffer". */
typedef struct dg_momentum_params {   /* defaults are paddle.optimizer.Momentum's */
    double lr;              /* >= 0; default 1e-3 */
    double momentum;        /* >= 0; default 0.9 */
    bool nesterov;          /* default false */
    double weight_decay;    /* L2 added to the gradient, >= 0; default 0 */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
} dg_momentum_params;
DG_API dg_momentum_params dg_momentum_default_params(void);

/* torch.optim.Adagrad: sum += g^2; p -= lr / (1 + (t-1) lr_decay) * g / (sqrt(sum) + eps).
 * State: "sum", "step" (made at construction, as PyTorch does). */
typedef struct dg_adagrad_params {   /* defaults are torch.optim.Adagrad's */
    double lr;                         /* >= 0; default 1e-2 */
    double lr_decay;                   /* >= 0; default 0 */
    double eps;                        /* >= 0; default 1e-10 */
    double initial_accumulator_value;  /* >= 0; default 0 */
    double weight_decay;               /* L2 added to the gradient, >= 0; default 0 */
    double grad_clip_norm;             /* as SGD's; default INFINITY */
} dg_adagrad_params;
DG_API dg_adagrad_params dg_adagrad_default_params(void);

/* torch.optim.Adam (no amsgrad). State: "exp_avg", "exp_avg_sq", "step". */
typedef struct dg_adam_params {      /* defaults are torch.optim.Adam's */
    double lr;              /* >= 0; default 1e-3 */
    double beta1, beta2;    /* in [0, 1); default 0.9, 0.999 */
    double eps;             /* >= 0; default 1e-8 */
    double weight_decay;    /* L2 added to the gradient (PyTorch Adam), >= 0; default 0 */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
} dg_adam_params;
DG_API dg_adam_params dg_adam_default_params(void);

/* torch.optim.AdamW: Adam with decoupled decay p *= 1 - lr * weight_decay before the update. */
typedef struct dg_adamw_params {     /* defaults are torch.optim.AdamW's */
    double lr;              /* >= 0; default 1e-3 */
    double beta1, beta2;    /* in [0, 1); default 0.9, 0.999 */
    double eps;             /* >= 0; default 1e-8 */
    double weight_decay;    /* >= 0; default 0.01 (0: Adam without decay, bit for bit) */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
} dg_adamw_params;
DG_API dg_adamw_params dg_adamw_default_params(void);

DG_API dg_optimizer *dg_sgd(dg_tensor *const *params, int n, dg_sgd_params p);
DG_API dg_optimizer *dg_momentum(dg_tensor *const *params, int n, dg_momentum_params p);
DG_API dg_optimizer *dg_adagrad(dg_tensor *const *params, int n, dg_adagrad_params p);
DG_API dg_optimizer *dg_adam(dg_tensor *const *params, int n, dg_adam_params p);
DG_API dg_optimizer *dg_adamw(dg_tensor *const *params, int n, dg_adamw_params p);
DG_API void dg_optimizer_free(dg_optimizer *opt);          /* frees the state, never the parameters */

DG_API int dg_optimizer_step(dg_optimizer *opt);
DG_API int dg_optimizer_clear_grad(dg_optimizer *opt);     /* drops every parameter's gradient (set_to_none) */
DG_API int dg_optimizer_set_lr(dg_optimizer *opt, double lr);   /* lr >= 0 */
DG_API double dg_optimizer_get_lr(const dg_optimizer *opt);     /* NAN for NULL */
DG_API const char *dg_optimizer_name(const dg_optimizer *opt);  /* "sgd", "momentum", "adagrad", "adam", "adamw" */
DG_API int dg_optimizer_num_params(const dg_optimizer *opt);
DG_API dg_tensor *dg_optimizer_param(const dg_optimizer *opt, int i);  /* borrowed */

/* torch.nn.utils.clip_grad_norm_ (L2): over the gradients of params that have one, total =
 * sqrt(sum of squares); every gradient is scaled by min(1, max_norm / (total + 1e-6)). Returns
 * total (0 when no parameter has a gradient), or a negative dg_status on bad input. */
DG_API double dg_clip_grad_norm(dg_tensor *const *params, int n, double max_norm);

/* ---- state for checkpoints ----
 * The state is a list of named tensors: "lr" (f64, 0-d), then per parameter i that has state,
 * in parameter order, "<i>.<slot>" with PyTorch's slot names: "momentum_buffer" (momentum);
 * "sum", "step" (adagrad); "exp_avg", "exp_avg_sq", "step" (adam, adamw). Buffers have the
 * parameter's shape, dtype and device; "step" is an i64 0-d CPU tensor. Tensors are borrowed
 * and live until the optimizer is freed; the list grows when a parameter first gets state.
 * Loading every entry of one optimizer into a fresh one of the same kind over parameters of the
 * same values makes the two continue bit-identically. */
DG_API int dg_optimizer_state_count(const dg_optimizer *opt);
DG_API const char *dg_optimizer_state_name(const dg_optimizer *opt, int i);
DG_API dg_tensor *dg_optimizer_state_tensor(const dg_optimizer *opt, int i);
/* Copies value into the state entry `name`, creating the parameter's state when it has none
 * yet. The shape must match (numel 1 for "lr" and "step"); values are cast to the state's dtype.
 * Unknown names, bad parameter indices and wrong shapes are DG_EINVAL and change nothing. */
DG_API int dg_optimizer_load_state(dg_optimizer *opt, const char *name, const dg_tensor *value);

/* ---- learning-rate schedulers ----
 * A scheduler computes lr(epoch) in closed form and, when given an optimizer, sets its lr. It
 * starts at epoch 0 (setting the optimizer's lr to lr(0) at construction, as PyTorch does);
 * dg_lr_scheduler_step advances one epoch (call it where PyTorch calls scheduler.step()).
 * opt may be NULL: a free-standing schedule read with dg_lr_scheduler_get_lr, or the schedule a
 * warm-up wraps. A learning-rate field holding DG_LR_FROM_OPTIMIZER takes the optimizer's lr at
 * construction (as PyTorch's schedulers take the group's initial_lr; an error when opt is NULL).
 * Fields without a default in PyTorch/Paddle (step_size, gamma of ExponentialLR, t_max,
 * warmup_steps, the lists) hold 0/NULL in the default params, which construction refuses. */
typedef struct dg_lr_scheduler dg_lr_scheduler;
#define DG_LR_FROM_OPTIMIZER (-1.0)

/* StepLR: base_lr * gamma ^ floor(epoch / step_size) */
typedef struct dg_step_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    int step_size;          /* > 0; no default */
    double gamma;           /* >= 0; default 0.1 (PyTorch's) */
} dg_step_lr_params;
DG_API dg_step_lr_params dg_step_lr_default_params(void);
/* MultiStepLR: base_lr * gamma ^ (number of milestones <= epoch); milestones are copied, any order,
 * repeats count twice (as PyTorch's Counter) */
typedef struct dg_multi_step_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    const int *milestones; int n_milestones;
    double gamma;           /* >= 0; default 0.1 (PyTorch's) */
} dg_multi_step_lr_params;
DG_API dg_multi_step_lr_params dg_multi_step_lr_default_params(void);
/* ExponentialLR: base_lr * gamma ^ epoch */
typedef struct dg_exponential_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    double gamma;           /* > 0; no default */
} dg_exponential_lr_params;
DG_API dg_exponential_lr_params dg_exponential_lr_default_params(void);
/* CosineAnnealingLR (PyTorch's closed form): eta_min + (base_lr - eta_min) (1 + cos(pi epoch / t_max)) / 2 */
typedef struct dg_cosine_annealing_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    int t_max;              /* > 0; no default */
    double eta_min;         /* >= 0; default 0 (PyTorch's) */
} dg_cosine_annealing_lr_params;
DG_API dg_cosine_annealing_lr_params dg_cosine_annealing_lr_default_params(void);
/* Paddle's LinearWarmup: for epoch < warmup_steps, start_lr + (end_lr - start_lr) epoch / warmup_steps;
 * then the wrapped schedule at epoch - warmup_steps, or the constant lr when none is wrapped. */
typedef struct dg_linear_warmup_lr_params {
    int warmup_steps;       /* > 0; no default */
    double start_lr;        /* >= 0; default 0 */
    double end_lr;          /* >= 0; default DG_LR_FROM_OPTIMIZER */
    double lr;              /* constant after warm-up when `after` is NULL, >= 0 (Paddle's learning_rate);
                               default DG_LR_FROM_OPTIMIZER */
} dg_linear_warmup_lr_params;
DG_API dg_linear_warmup_lr_params dg_linear_warmup_lr_default_params(void);
/* Paddle's PiecewiseDecay: values[i] for the first i with epoch < boundaries[i], else
 * values[n_boundaries]; boundaries ascending, n_boundaries + 1 values; both copied. */
typedef struct dg_piecewise_lr_params {
    const int *boundaries; int n_boundaries; const double *values;   /* no defaults: NULL, 0, NULL */
} dg_piecewise_lr_params;
DG_API dg_piecewise_lr_params dg_piecewise_lr_default_params(void);

DG_API dg_lr_scheduler *dg_step_lr(dg_optimizer *opt, dg_step_lr_params p);
DG_API dg_lr_scheduler *dg_multi_step_lr(dg_optimizer *opt, dg_multi_step_lr_params p);
DG_API dg_lr_scheduler *dg_exponential_lr(dg_optimizer *opt, dg_exponential_lr_params p);
DG_API dg_lr_scheduler *dg_cosine_annealing_lr(dg_optimizer *opt, dg_cosine_annealing_lr_params p);
/* Takes ownership of `after` (may be NULL), even on failure, and detaches it from its optimizer;
 * when opt is NULL the warm-up drives the optimizer `after` had. */
DG_API dg_lr_scheduler *dg_linear_warmup_lr(dg_optimizer *opt, dg_lr_scheduler *after, dg_linear_warmup_lr_params p);
DG_API dg_lr_scheduler *dg_piecewise_lr(dg_optimizer *opt, dg_piecewise_lr_params p);

DG_API int dg_lr_scheduler_step(dg_lr_scheduler *s);
DG_API double dg_lr_scheduler_get_lr(const dg_lr_scheduler *s);              /* lr at the current epoch; NAN for NULL */
DG_API int64_t dg_lr_scheduler_epoch(const dg_lr_scheduler *s);              /* -1 for NULL */
DG_API int dg_lr_scheduler_set_epoch(dg_lr_scheduler *s, int64_t epoch);     /* jump (e.g. on resume); epoch >= 0 */
DG_API void dg_lr_scheduler_free(dg_lr_scheduler *s);                        /* not the optimizer */

#ifdef __cplusplus
}
#endif
#endif
