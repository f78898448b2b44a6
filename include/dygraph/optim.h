/* dygraph/optim.h — optimizers (SGD, Momentum, Adagrad, Adam, AdamW, RMSprop, Adamax, NAdam,
 * Adadelta; LBFGS with a closure, dg_lbfgs_step),
 * parameter groups, global-norm gradient clipping, learning-rate schedulers, and optimizer and
 * scheduler state as named tensors for checkpoints.
 *
 * An optimizer updates an array of parameters: leaf tensors that require grad. It copies the
 * array but does not own the tensors, which must outlive it. dg_optimizer_step updates every
 * parameter that has a gradient (dg_grad) and skips the others, like PyTorch; the update runs
 * in no-grad mode with in-place ops, so it may be called inside or outside a scope. Updates
 * follow PyTorch 1.13's torch.optim.* exactly (per-parameter state and step counts, L2 weight
 * decay added to the gradient, AdamW's decoupled decay p *= 1 - lr * wd; NAdam as PyTorch 2.0,
 * see dg_nadam_params), each as one fused kernel per group, device and dtype on the CPU and on
 * CUDA devices.
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
 * Parameter groups (torch's param_groups): the constructor's parameters are group 0, with the
 * constructor's lr and weight_decay; dg_optimizer_add_param_group adds a group whose lr and
 * weight_decay override those (e.g. no decay on biases and norm weights:
 *     dg_optimizer *o = dg_adamw(weights, n_w, p);                      // decay 0.01
 *     dg_param_group_params nd = dg_param_group_default_params();
 *     nd.weight_decay = 0;
 *     dg_optimizer_add_param_group(o, biases_and_norms, n_b, nd);       // no decay, same lr
 * ). Parameters are numbered across groups in the order added (state names use these numbers,
 * as torch's state_dict). Every other hyper-parameter (momentum, betas, eps, ...) and gradient
 * clipping are the optimizer's, shared by its groups.
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
    uint32_t params_tag;     /* set by dg_sgd_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_sgd_params;
DG_API dg_sgd_params dg_sgd_default_params(void);

/* torch.optim.SGD with momentum (= paddle.optimizer.Momentum with dampening 0):
 * buf = momentum * buf + (1 - dampening) * grad (buf = grad on a parameter's first step);
 * p -= lr * (nesterov ? grad + momentum * buf : buf). State: "momentum_buffer". */
typedef struct dg_momentum_params {   /* defaults are paddle.optimizer.Momentum's */
    double lr;              /* >= 0; default 1e-3 */
    double momentum;        /* >= 0; default 0.9 */
    double dampening;       /* in [0, 1]; default 0 (torch's) */
    bool nesterov;          /* requires dampening 0 (as torch); default false */
    double weight_decay;    /* L2 added to the gradient, >= 0; default 0 */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
    uint32_t params_tag;     /* set by dg_momentum_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
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
    uint32_t params_tag;     /* set by dg_adagrad_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_adagrad_params;
DG_API dg_adagrad_params dg_adagrad_default_params(void);

/* torch.optim.Adam. State: "exp_avg", "exp_avg_sq", (amsgrad) "max_exp_avg_sq", "step". */
typedef struct dg_adam_params {      /* defaults are torch.optim.Adam's */
    double lr;              /* >= 0; default 1e-3 */
    double beta1, beta2;    /* in [0, 1); default 0.9, 0.999 */
    double eps;             /* >= 0; default 1e-8 */
    double weight_decay;    /* L2 added to the gradient (PyTorch Adam), >= 0; default 0 */
    bool amsgrad;           /* AMSGrad: the denominator uses the running maximum of exp_avg_sq; default false */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
    uint32_t params_tag;     /* set by dg_adam_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_adam_params;
DG_API dg_adam_params dg_adam_default_params(void);

/* torch.optim.AdamW: Adam with decoupled decay p *= 1 - lr * weight_decay before the update. */
typedef struct dg_adamw_params {     /* defaults are torch.optim.AdamW's */
    double lr;              /* >= 0; default 1e-3 */
    double beta1, beta2;    /* in [0, 1); default 0.9, 0.999 */
    double eps;             /* >= 0; default 1e-8 */
    double weight_decay;    /* >= 0; default 0.01 (0: Adam without decay, bit for bit) */
    bool amsgrad;           /* as Adam's; default false */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
    uint32_t params_tag;     /* set by dg_adamw_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_adamw_params;
DG_API dg_adamw_params dg_adamw_default_params(void);

/* torch.optim.RMSprop: d = grad + wd p; square_avg = alpha square_avg + (1 - alpha) d^2;
 * centered: grad_avg = alpha grad_avg + (1 - alpha) d, avg = sqrt(square_avg - grad_avg^2),
 * else avg = sqrt(square_avg); avg += eps; momentum > 0: buf = momentum buf + d / avg,
 * p -= lr buf; else p -= lr d / avg. State: "square_avg", "momentum_buffer" (momentum > 0),
 * "grad_avg" (centered), "step". */
typedef struct dg_rmsprop_params {   /* defaults are torch.optim.RMSprop's */
    double lr;              /* >= 0; default 1e-2 */
    double alpha;           /* smoothing constant, in [0, 1]; default 0.99 */
    double eps;             /* >= 0; default 1e-8 */
    double weight_decay;    /* L2 added to the gradient, >= 0; default 0 */
    double momentum;        /* >= 0; default 0 (no momentum buffer) */
    bool centered;          /* normalise by the estimated variance; default false */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
    uint32_t params_tag;     /* set by dg_rmsprop_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_rmsprop_params;
DG_API dg_rmsprop_params dg_rmsprop_default_params(void);

/* torch.optim.Adamax: d = grad + wd p; exp_avg = b1 exp_avg + (1 - b1) d;
 * exp_inf = max(b2 exp_inf, |d| + eps); p -= lr / (1 - b1^t) * exp_avg / exp_inf.
 * State: "exp_avg", "exp_inf", "step". */
typedef struct dg_adamax_params {    /* defaults are torch.optim.Adamax's */
    double lr;              /* >= 0; default 2e-3 */
    double beta1, beta2;    /* in [0, 1); default 0.9, 0.999 */
    double eps;             /* >= 0; default 1e-8 */
    double weight_decay;    /* L2 added to the gradient, >= 0; default 0 */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
    uint32_t params_tag;     /* set by dg_adamax_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_adamax_params;
DG_API dg_adamax_params dg_adamax_default_params(void);

/* torch.optim.NAdam (Adam with Nesterov momentum): mu_t = b1 (1 - 0.5 * 0.96^(t momentum_decay)),
 * mu_product = mu_1 ... mu_t; exp_avg, exp_avg_sq as Adam's; denom = sqrt(exp_avg_sq / (1 - b2^t)) + eps;
 * p -= lr (1 - mu_t) / (1 - mu_product) * d / denom + lr mu_(t+1) / (1 - mu_product mu_(t+1)) * exp_avg / denom.
 * That last factor is PyTorch >= 2.0's (pytorch/pytorch#92699): 1.13 multiplied mu_t in twice, a
 * bug. State: "exp_avg", "exp_avg_sq", "step", "mu_product" (float32 0-d CPU tensor, as torch's). */
typedef struct dg_nadam_params {     /* defaults are torch.optim.NAdam's */
    double lr;              /* >= 0; default 2e-3 */
    double beta1, beta2;    /* in [0, 1); default 0.9, 0.999 */
    double eps;             /* >= 0; default 1e-8 */
    double weight_decay;    /* L2 added to the gradient, >= 0; default 0 */
    double momentum_decay;  /* >= 0; default 4e-3 */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
    uint32_t params_tag;     /* set by dg_nadam_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nadam_params;
DG_API dg_nadam_params dg_nadam_default_params(void);

/* torch.optim.Adadelta: d = grad + wd p; square_avg = rho square_avg + (1 - rho) d^2;
 * delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * d;
 * acc_delta = rho acc_delta + (1 - rho) delta^2; p -= lr delta.
 * State: "square_avg", "acc_delta", "step". */
typedef struct dg_adadelta_params {  /* defaults are torch.optim.Adadelta's */
    double lr;              /* >= 0; default 1.0 */
    double rho;             /* decay of both running averages, in [0, 1]; default 0.9 */
    double eps;             /* >= 0; default 1e-6 */
    double weight_decay;    /* L2 added to the gradient, >= 0; default 0 */
    double grad_clip_norm;  /* as SGD's; default INFINITY */
    uint32_t params_tag;     /* set by dg_adadelta_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_adadelta_params;
DG_API dg_adadelta_params dg_adadelta_default_params(void);

DG_API dg_optimizer *dg_sgd(dg_tensor *const *params, int n, dg_sgd_params p);
DG_API dg_optimizer *dg_momentum(dg_tensor *const *params, int n, dg_momentum_params p);
DG_API dg_optimizer *dg_adagrad(dg_tensor *const *params, int n, dg_adagrad_params p);
DG_API dg_optimizer *dg_adam(dg_tensor *const *params, int n, dg_adam_params p);
DG_API dg_optimizer *dg_adamw(dg_tensor *const *params, int n, dg_adamw_params p);
DG_API dg_optimizer *dg_rmsprop(dg_tensor *const *params, int n, dg_rmsprop_params p);
DG_API dg_optimizer *dg_adamax(dg_tensor *const *params, int n, dg_adamax_params p);
DG_API dg_optimizer *dg_nadam(dg_tensor *const *params, int n, dg_nadam_params p);
DG_API dg_optimizer *dg_adadelta(dg_tensor *const *params, int n, dg_adadelta_params p);

/* ---- LBFGS ----
 * torch.optim.LBFGS of PyTorch 1.13, iteration for iteration: each dg_lbfgs_step runs up to
 * max_iter L-BFGS iterations (two-loop recursion over the last history_size (y, s) pairs, kept
 * only where y.s > 1e-10; the first iteration ever is steepest descent with step
 * min(1, 1 / |g|_1) * lr), each a fixed step of lr or, with line_search_fn "strong_wolfe",
 * torch's strong-Wolfe line search (c1 1e-4, c2 0.9, at most 25 evaluations), and stops on
 * torch's rules: max|g| <= tolerance_grad, g.d > -tolerance_change, max|t d| <=
 * tolerance_change, |loss - previous loss| < tolerance_change, or max_eval evaluations.
 * The loss is re-evaluated through a closure: a C function that zeroes the gradients
 * (dg_optimizer_clear_grad), computes the loss, calls dg_backward on it, stores its value in
 * *loss and returns 0 (or a negative dg_status after setting a message, which ends the step
 * with that status). Each call runs in a scope of its own that ends when it returns, so its
 * temporaries need no freeing. A parameter without a gradient counts as zeros, as torch's.
 * One parameter group (add_param_group refuses, as torch); the parameters are CPU tensors of
 * one dtype, float32 or float64, flattened into one vector in which every element operation
 * runs (dot products accumulate in that dtype; the scalars — step, loss, ro, H_diag — are
 * doubles, which for float32 parameters may differ from torch's float32 0-d tensors in the
 * last bits). No weight decay and no clipping, as torch's. LR schedulers set its lr like any
 * optimizer's. dg_optimizer_step refuses it (a step needs the closure).
 * State (dg_optimizer_state_*, dg_optimizer_save/load): "lr", then torch's keys as the first
 * parameter's state: "0.func_evals", "0.n_iter" (i64 0-d), "0.d", "0.t", "0.old_dirs.<k>",
 * "0.old_stps.<k>", "0.ro.<k>" (oldest first), "0.H_diag", "0.prev_flat_grad", "0.prev_loss";
 * vectors 1-D [total numel] of the parameters' dtype, the rest f64 0-d. */
#define DG_LBFGS_MAX_EVAL_AUTO (-1)
typedef struct dg_lbfgs_params {     /* defaults are torch.optim.LBFGS's */
    double lr;                  /* >= 0; default 1 */
    int max_iter;               /* iterations per step, >= 1; default 20 */
    int max_eval;               /* evaluations per step, >= 1; default DG_LBFGS_MAX_EVAL_AUTO: max_iter * 5 / 4 */
    double tolerance_grad;      /* >= 0; default 1e-7 */
    double tolerance_change;    /* >= 0; default 1e-9 */
    int history_size;           /* >= 1; default 100 */
    const char *line_search_fn; /* NULL (default): fixed step; "strong_wolfe"; read at construction only */
    uint32_t params_tag;     /* set by dg_lbfgs_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_lbfgs_params;
DG_API dg_lbfgs_params dg_lbfgs_default_params(void);
DG_API dg_optimizer *dg_lbfgs(dg_tensor *const *params, int n, dg_lbfgs_params p);
/* The closure: 0 with the loss in *loss after dg_backward, or a negative dg_status. */
typedef int (*dg_closure_fn)(void *user, double *loss);
/* One torch LBFGS step(closure): 0 and the loss of the closure's first call (torch's return
 * value, before any update) in *loss (may be NULL), or a negative dg_status: the closure's, or
 * an error naming lbfgs. Must be called with gradients enabled (not inside dg_no_grad). */
DG_API int dg_lbfgs_step(dg_optimizer *opt, dg_closure_fn closure, void *user, double *loss);
DG_API void dg_optimizer_free(dg_optimizer *opt);          /* frees the state, never the parameters */

/* ---- parameter groups ----
 * A field holding DG_OPTIMIZER_DEFAULT takes the value the optimizer's constructor was given
 * (torch's optimizer.defaults), whatever dg_optimizer_set_lr did since. */
#define DG_OPTIMIZER_DEFAULT (-1.0)
typedef struct dg_param_group_params {
    double lr;              /* >= 0; default DG_OPTIMIZER_DEFAULT */
    double weight_decay;    /* >= 0 (AdamW's decoupled decay for adamw); default DG_OPTIMIZER_DEFAULT */
    uint32_t params_tag;     /* set by dg_param_group_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_param_group_params;
DG_API dg_param_group_params dg_param_group_default_params(void);
/* Adds params (leaves that require grad, none already in the optimizer) as the next group;
 * they take the indices num_params() .. num_params() + n - 1. Adagrad makes their state at
 * once, as at construction. Schedulers made before the group was added refuse to step (a
 * schedule covers the groups it was made for): add the groups first. */
DG_API int dg_optimizer_add_param_group(dg_optimizer *opt, dg_tensor *const *params, int n, dg_param_group_params p);
DG_API int dg_optimizer_num_groups(const dg_optimizer *opt);
DG_API int dg_optimizer_param_group(const dg_optimizer *opt, int i);   /* the group of parameter i */

DG_API int dg_optimizer_step(dg_optimizer *opt);
DG_API int dg_optimizer_clear_grad(dg_optimizer *opt);     /* drops every parameter's gradient (set_to_none) */
/* Learning rates. Each group has the lr its next step uses and a base lr, the user's: the one
 * its constructor or group params gave, or the last set_lr / set_group_lr. Schedulers set the
 * lr a step uses and leave the base, which DG_LR_FROM_OPTIMIZER reads when a scheduler is made
 * (so a scheduler made after a checkpoint's lrs were loaded still starts from the user's lr).
 * set_lr sets every group's lr and base lr to one value (use set_group_lr to keep per-group
 * lrs); get_lr reads group 0's current lr. */
DG_API int dg_optimizer_set_lr(dg_optimizer *opt, double lr);   /* lr >= 0 */
DG_API double dg_optimizer_get_lr(const dg_optimizer *opt);     /* NAN for NULL */
DG_API int dg_optimizer_set_group_lr(dg_optimizer *opt, int group, double lr);
DG_API double dg_optimizer_get_group_lr(const dg_optimizer *opt, int group);            /* NAN on error */
DG_API double dg_optimizer_get_group_weight_decay(const dg_optimizer *opt, int group);  /* NAN on error */
/* "sgd", "momentum", "adagrad", "adam", "adamw", "rmsprop", "adamax", "nadam", "adadelta", "lbfgs" */
DG_API const char *dg_optimizer_name(const dg_optimizer *opt);
DG_API int dg_optimizer_num_params(const dg_optimizer *opt);
DG_API dg_tensor *dg_optimizer_param(const dg_optimizer *opt, int i);  /* borrowed */

/* torch.nn.utils.clip_grad_norm_ (L2): over the gradients of params that have one, total =
 * sqrt(sum of squares); every gradient is scaled by min(1, max_norm / (total + 1e-6)). Returns
 * total (0 when no parameter has a gradient), or a negative dg_status on bad input. */
DG_API double dg_clip_grad_norm(dg_tensor *const *params, int n, double max_norm);
/* torch.nn.utils.clip_grad_value_: every gradient of params that has one is clamped in place to
 * [-clip_value, clip_value] (NaN stays NaN, as torch's clamp). clip_value >= 0 (INFINITY: no
 * change); torch accepts a negative one (every element becomes -|clip_value|'s clamp), dygraph
 * refuses it. Returns 0, or a negative dg_status on bad input (nothing clipped then). */
DG_API int dg_clip_grad_value(dg_tensor *const *params, int n, double clip_value);

/* ---- state for checkpoints ----
 * The state is a list of named tensors: "lr" (group 0's current lr, f64 0-d), then
 * "param_groups.<g>.lr" for every further group g, then per parameter i that has state, in
 * parameter order, "<i>.<slot>" with PyTorch's slot names: "momentum_buffer" (momentum);
 * "sum", "step" (adagrad); "exp_avg", "exp_avg_sq", ("max_exp_avg_sq" with amsgrad), "step"
 * (adam, adamw); "square_avg", ("momentum_buffer" with momentum > 0), ("grad_avg" centered),
 * "step" (rmsprop); "exp_avg", "exp_inf", "step" (adamax); "exp_avg", "exp_avg_sq", "step",
 * "mu_product" (nadam); "square_avg", "acc_delta", "step" (adadelta); LBFGS's, see
 * dg_lbfgs_params. Buffers have the parameter's shape and device and its dtype (float32
 * for a float16/bfloat16 parameter); "step" is an i64 0-d CPU tensor, "mu_product" an f32 one.
 * Last, "<i>.master_weight" for every float16/bfloat16 parameter i that has its float32 master
 * copy (made at its first step: the value the rule updates, of which the parameter is the
 * rounding); loading a set without it drops the copy, which the next step makes again from the
 * parameter. Tensors are borrowed and live until the optimizer is
 * freed; the list grows when a parameter first gets state. Loading a group's lr sets the lr its
 * next step uses, not its base lr. dg_optimizer_save / dg_optimizer_load (checkpoint.h) write and
 * read this list.
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
 * opt may be NULL: a free-standing schedule read with dg_lr_scheduler_get_lr, or one that a
 * warm-up or SequentialLR wraps. A learning-rate field holding DG_LR_FROM_OPTIMIZER takes the
 * optimizer's base lr at construction (as PyTorch's schedulers take the group's initial_lr; an
 * error when opt is NULL). Fields without a default in PyTorch/Paddle (step_size, gamma of
 * ExponentialLR, t_max, warmup_steps, decay_steps, max_lr, total_steps, fn, the lists) hold
 * 0/NULL in the default params, which construction refuses.
 *
 * Parameter groups: as PyTorch, every group follows the schedule from its own lr. A field
 * holding DG_LR_FROM_OPTIMIZER takes each group's own base lr; a field holding a value applies
 * to every group (as torch's scalar max_lr / eta_min / min_lr), as do Piecewise's values. The
 * scheduler covers the groups the optimizer had when it was made; dg_lr_scheduler_get_lr reads
 * group 0's lr (dg_optimizer_get_group_lr the others).
 *
 * ReduceLROnPlateau is not a function of its epoch: it steps on a metric
 * (dg_lr_scheduler_step_metric) and lowers the optimizer's current lrs. Its extra state
 * ("best", "num_bad_epochs", "cooldown_counter") travels with "epoch" in the scheduler's state
 * list, which dg_train_checkpoint_save stores under "scheduler.*". */
typedef struct dg_lr_scheduler dg_lr_scheduler;
#define DG_LR_FROM_OPTIMIZER (-1.0)

/* StepLR: base_lr * gamma ^ floor(epoch / step_size) */
typedef struct dg_step_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    int step_size;          /* > 0; no default */
    double gamma;           /* >= 0; default 0.1 (PyTorch's) */
    uint32_t params_tag;     /* set by dg_step_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_step_lr_params;
DG_API dg_step_lr_params dg_step_lr_default_params(void);
/* MultiStepLR: base_lr * gamma ^ (number of milestones <= epoch); milestones are copied, any order,
 * repeats count twice (as PyTorch's Counter) */
typedef struct dg_multi_step_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    const int *milestones; int n_milestones;
    double gamma;           /* >= 0; default 0.1 (PyTorch's) */
    uint32_t params_tag;     /* set by dg_multi_step_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_multi_step_lr_params;
DG_API dg_multi_step_lr_params dg_multi_step_lr_default_params(void);
/* ExponentialLR: base_lr * gamma ^ epoch */
typedef struct dg_exponential_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    double gamma;           /* > 0; no default */
    uint32_t params_tag;     /* set by dg_exponential_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_exponential_lr_params;
DG_API dg_exponential_lr_params dg_exponential_lr_default_params(void);
/* CosineAnnealingLR (PyTorch's closed form): eta_min + (base_lr - eta_min) (1 + cos(pi epoch / t_max)) / 2 */
typedef struct dg_cosine_annealing_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    int t_max;              /* > 0; no default */
    double eta_min;         /* >= 0; default 0 (PyTorch's) */
    uint32_t params_tag;     /* set by dg_cosine_annealing_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
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
    uint32_t params_tag;     /* set by dg_linear_warmup_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_linear_warmup_lr_params;
DG_API dg_linear_warmup_lr_params dg_linear_warmup_lr_default_params(void);
/* Paddle's PiecewiseDecay: values[i] for the first i with epoch < boundaries[i], else
 * values[n_boundaries]; boundaries ascending, n_boundaries + 1 values; both copied. */
typedef struct dg_piecewise_lr_params {
    const int *boundaries; int n_boundaries; const double *values;   /* no defaults: NULL, 0, NULL */
    uint32_t params_tag;     /* set by dg_piecewise_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_piecewise_lr_params;
DG_API dg_piecewise_lr_params dg_piecewise_lr_default_params(void);

DG_API dg_lr_scheduler *dg_step_lr(dg_optimizer *opt, dg_step_lr_params p);
DG_API dg_lr_scheduler *dg_multi_step_lr(dg_optimizer *opt, dg_multi_step_lr_params p);
DG_API dg_lr_scheduler *dg_exponential_lr(dg_optimizer *opt, dg_exponential_lr_params p);
DG_API dg_lr_scheduler *dg_cosine_annealing_lr(dg_optimizer *opt, dg_cosine_annealing_lr_params p);
/* Takes ownership of `after` (may be NULL), even on failure, and detaches it from its optimizer
 * (which must be opt, or none); when opt is NULL the warm-up drives the optimizer `after` had.
 * ReduceLROnPlateau cannot be wrapped. With parameter groups, start_lr applies to every group and
 * end_lr / lr holding DG_LR_FROM_OPTIMIZER take each group's own. */
DG_API dg_lr_scheduler *dg_linear_warmup_lr(dg_optimizer *opt, dg_lr_scheduler *after, dg_linear_warmup_lr_params p);
DG_API dg_lr_scheduler *dg_piecewise_lr(dg_optimizer *opt, dg_piecewise_lr_params p);

/* LambdaLR: base_lr * fn(epoch, user). fn is called at construction and at every step or jump;
 * a factor that is not finite and >= 0 is an error of that call, which then changes nothing.
 * (torch's list of lambdas, one per group, is not offered: one fn serves every group.) */
typedef double (*dg_lr_lambda_fn)(int64_t epoch, void *user);
typedef struct dg_lambda_lr_params {
    double base_lr;         /* >= 0; default DG_LR_FROM_OPTIMIZER */
    dg_lr_lambda_fn fn;     /* no default (NULL) */
    void *user;             /* handed to fn; default NULL */
    uint32_t params_tag;     /* set by dg_lambda_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_lambda_lr_params;
DG_API dg_lambda_lr_params dg_lambda_lr_default_params(void);
DG_API dg_lr_scheduler *dg_lambda_lr(dg_optimizer *opt, dg_lambda_lr_params p);

/* Paddle's PolynomialDecay (paddle.optimizer.lr.PolynomialDecay.get_lr):
 * (base_lr - end_lr) * (1 - e / d)^power + end_lr, where without cycle e = min(epoch, decay_steps)
 * and d = decay_steps; with cycle e = epoch and d = decay_steps * ceil(epoch / decay_steps)
 * (decay_steps at epoch 0). */
typedef struct dg_polynomial_decay_lr_params {   /* defaults are Paddle's */
    double base_lr;         /* Paddle's learning_rate, >= 0; default DG_LR_FROM_OPTIMIZER */
    int decay_steps;        /* > 0; no default */
    double end_lr;          /* >= 0, every group's; default 1e-4 */
    double power;           /* > 0; default 1.0 */
    bool cycle;             /* rise again after each decay_steps; default false */
    uint32_t params_tag;     /* set by dg_polynomial_decay_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_polynomial_decay_lr_params;
DG_API dg_polynomial_decay_lr_params dg_polynomial_decay_lr_default_params(void);
DG_API dg_lr_scheduler *dg_polynomial_decay_lr(dg_optimizer *opt, dg_polynomial_decay_lr_params p);

/* torch.optim.lr_scheduler.OneCycleLR: from max_lr / div_factor up to max_lr over the first
 * pct_start * total_steps steps, then down to max_lr / (div_factor * final_div_factor) at step
 * total_steps - 1 (three_phase: up, back down to the initial lr, then down to the minimum),
 * each phase annealed by cosine or linearly. With cycle_momentum the optimizer's momentum (SGD
 * momentum, RMSprop's momentum; beta1 of Adam, AdamW, Adamax, NAdam) goes the other way,
 * max_momentum -> base_momentum -> max_momentum, as torch's; one value for every group (the
 * optimizer's momentum is shared by its groups). Stepping past epoch total_steps is an error, as
 * in torch. At epoch total_steps itself (the last step() of a loop over total_steps batches,
 * whose lr is never stepped with) torch extrapolates the last phase one step past its end, which
 * a linear anneal can take below 0; the lr is 0 there instead. Unlike torch, the optimizer's
 * base lrs are left as they were (torch overwrites the groups' initial_lr with max_lr /
 * div_factor). */
typedef enum dg_anneal_strategy { DG_ANNEAL_COS, DG_ANNEAL_LINEAR } dg_anneal_strategy;
typedef struct dg_one_cycle_lr_params {   /* defaults are torch's */
    double max_lr;          /* > 0, or DG_LR_FROM_OPTIMIZER: each group's own base lr; no default (0) */
    int total_steps;        /* > 0 (torch's total_steps, or epochs * steps_per_epoch); no default */
    double pct_start;       /* in [0, 1]; default 0.3 */
    dg_anneal_strategy anneal_strategy;   /* default DG_ANNEAL_COS */
    bool cycle_momentum;    /* default true; the optimizer must have a momentum (not sgd, adagrad, rmsprop
                               made with momentum 0) */
    double base_momentum, max_momentum;   /* in [0, 1); default 0.85, 0.95 */
    double div_factor;      /* > 0; default 25 */
    double final_div_factor;   /* > 0; default 1e4 */
    bool three_phase;       /* default false */
    uint32_t params_tag;     /* set by dg_one_cycle_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_one_cycle_lr_params;
DG_API dg_one_cycle_lr_params dg_one_cycle_lr_default_params(void);
DG_API dg_lr_scheduler *dg_one_cycle_lr(dg_optimizer *opt, dg_one_cycle_lr_params p);

/* torch.optim.lr_scheduler.SequentialLR: schedulers[k] drives the lr from milestones[k - 1]
 * (epoch 0 for k = 0) on, restarted at its own epoch 0 there. Takes ownership of the schedulers,
 * even on failure, and detaches them from their optimizer: each must have been made with opt or
 * with NULL (opt NULL: the one they were made with is driven). ReduceLROnPlateau cannot be one. */
typedef struct dg_sequential_lr_params {
    dg_lr_scheduler *const *schedulers; int n_schedulers;   /* >= 1; no default (NULL, 0) */
    const int *milestones; int n_milestones;                /* n_schedulers - 1, > 0 and ascending; copied */
    uint32_t params_tag;     /* set by dg_sequential_lr_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_sequential_lr_params;
DG_API dg_sequential_lr_params dg_sequential_lr_default_params(void);
DG_API dg_lr_scheduler *dg_sequential_lr(dg_optimizer *opt, dg_sequential_lr_params p);

/* torch.optim.lr_scheduler.ReduceLROnPlateau: after each dg_lr_scheduler_step_metric(s, metric),
 * a metric better than best (mode MIN: below best * (1 - threshold) in REL threshold_mode, below
 * best - threshold in ABS; MAX mirrored) becomes best; otherwise it is a bad epoch. Bad epochs in
 * cooldown do not count; after more than `patience` of them every group's lr becomes
 * max(lr * factor, min_lr) where that lowers it by more than eps, and `cooldown` epochs follow.
 * Needs an optimizer (its current lrs are the ones lowered); does not change them at
 * construction. */
typedef enum dg_plateau_mode { DG_PLATEAU_MIN, DG_PLATEAU_MAX } dg_plateau_mode;
typedef enum dg_threshold_mode { DG_THRESHOLD_REL, DG_THRESHOLD_ABS } dg_threshold_mode;
typedef struct dg_reduce_lr_on_plateau_params {   /* defaults are torch's */
    dg_plateau_mode mode;   /* default DG_PLATEAU_MIN */
    double factor;          /* in [0, 1); default 0.1 */
    int patience;           /* >= 0; default 10 */
    double threshold;       /* >= 0; default 1e-4 */
    dg_threshold_mode threshold_mode;   /* default DG_THRESHOLD_REL */
    int cooldown;           /* >= 0; default 0 */
    double min_lr;          /* >= 0, every group's; default 0 */
    double eps;             /* >= 0: smaller reductions are skipped; default 1e-8 */
    uint32_t params_tag;     /* set by dg_reduce_lr_on_plateau_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_reduce_lr_on_plateau_params;
DG_API dg_reduce_lr_on_plateau_params dg_reduce_lr_on_plateau_default_params(void);
DG_API dg_lr_scheduler *dg_reduce_lr_on_plateau(dg_optimizer *opt, dg_reduce_lr_on_plateau_params p);

/* One epoch on: every scheduler but ReduceLROnPlateau (an error naming step_metric for it). */
DG_API int dg_lr_scheduler_step(dg_lr_scheduler *s);
/* One epoch on with the monitored metric: ReduceLROnPlateau only (an error for the others). */
DG_API int dg_lr_scheduler_step_metric(dg_lr_scheduler *s, double metric);
DG_API double dg_lr_scheduler_get_lr(const dg_lr_scheduler *s);              /* group 0's lr at the current epoch; NAN for NULL */
/* The momentum a OneCycleLR (or a schedule wrapping one) sets at the current epoch; NAN when
 * none is cycled. */
DG_API double dg_lr_scheduler_get_momentum(const dg_lr_scheduler *s);
DG_API int64_t dg_lr_scheduler_epoch(const dg_lr_scheduler *s);              /* -1 for NULL */
/* Jump (e.g. on resume); epoch >= 0. ReduceLROnPlateau moves its epoch counter only. An epoch
 * the schedule has no lr for (past a OneCycleLR's total_steps; a lambda's refusal) is an error
 * that changes nothing. */
DG_API int dg_lr_scheduler_set_epoch(dg_lr_scheduler *s, int64_t epoch);
DG_API void dg_lr_scheduler_free(dg_lr_scheduler *s);                        /* not the optimizer */

/* ---- scheduler state for checkpoints ----
 * "epoch" (i64 0-d CPU tensor) for every scheduler (the others' lr is a function of it, and of
 * the schedulers they wrap, which have no state of their own); ReduceLROnPlateau adds "best"
 * (f64), "num_bad_epochs" and "cooldown_counter" (i64). Its lrs are the optimizer's (its "lr"
 * entries). Tensors are borrowed and live until the scheduler is freed. Loading "epoch" jumps
 * there (dg_lr_scheduler_set_epoch); a bad name or value is DG_EINVAL and changes nothing. */
DG_API int dg_lr_scheduler_state_count(const dg_lr_scheduler *s);
DG_API const char *dg_lr_scheduler_state_name(const dg_lr_scheduler *s, int i);
DG_API dg_tensor *dg_lr_scheduler_state_tensor(const dg_lr_scheduler *s, int i);
DG_API int dg_lr_scheduler_load_state(dg_lr_scheduler *s, const char *name, const dg_tensor *value);

#ifdef __cplusplus
}
#endif
#endif
