/* optim/adam.c — Adam (L2 weight decay added to the gradient) and AdamW (decoupled decay), each
 * optionally AMSGrad, torch.optim.Adam / AdamW step for step as PyTorch 1.13's single-tensor path. */
#include "optim_internal.h"
#include <math.h>

/* t += 1; (AdamW: p *= 1 - lr wd) (Adam: d = g + wd p);
 * m = b1 m + (1-b1) d; v = b2 v + (1-b2) d^2; (amsgrad: vmax = max(vmax, v), used for v below)
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * Here the per-parameter scalars; the element rule is in eager/update_rule.h. */
static void adam_prepare(dg_optimizer *o, int i, dg_update_tensor *u) {
    dg_opt_state *s = &o->state[i];
    s->step++;
    double t = (double)s->step;
    u->step_size = dg_opt_lr_of(o, i) / (1 - pow(o->beta1, t));
    u->bc2_sqrt = sqrt(1 - pow(o->beta2, t));
}

/* slot 2 (max_exp_avg_sq) is switched off unless amsgrad */
static const dg_opt_kind_info adam_info = {
    .name = "adam", .n_slots = 3, .slot = { "exp_avg", "exp_avg_sq", "max_exp_avg_sq" }, .has_step = true,
    .rule = DG_UPD_ADAM, .prepare = adam_prepare,
};
static const dg_opt_kind_info adamw_info = {
    .name = "adamw", .n_slots = 3, .slot = { "exp_avg", "exp_avg_sq", "max_exp_avg_sq" }, .has_step = true,
    .rule = DG_UPD_ADAMW, .prepare = adam_prepare,
};

/* The checks every optimizer of the Adam family shares (torch's messages, the field named). */
int dg_opt_check_betas(const char *nm, double beta1, double beta2, double eps) {
    DG_CHECK_INT(beta1 >= 0 && beta1 < 1, "%s: beta1 must be in [0, 1), got %g", nm, beta1);
    DG_CHECK_INT(beta2 >= 0 && beta2 < 1, "%s: beta2 must be in [0, 1), got %g", nm, beta2);
    DG_CHECK_INT(eps >= 0 && isfinite(eps), "%s: eps must be >= 0, got %g", nm, eps);
    return 0;
}

static dg_optimizer *adam_common(dg_opt_kind kind, const dg_opt_kind_info *info, dg_tensor *const *params, int n,
                                 double lr, double beta1, double beta2, double eps, double wd, bool amsgrad, double clip) {
    if (dg_opt_check_betas(info->name, beta1, beta2, eps) != 0) return NULL;
    dg_optimizer *o = dg_opt_new(kind, info, params, n, lr, wd, clip);
    if (!o) return NULL;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->amsgrad = amsgrad;
    o->slot_on[2] = amsgrad;
    return dg_opt_finish(o);
}

dg_adam_params dg_adam_default_params(void) {
    return (dg_adam_params){ .params_tag = DG_PARAMS_TAG, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0, .amsgrad = false,
                             .grad_clip_norm = INFINITY };
}

dg_adamw_params dg_adamw_default_params(void) {
    return (dg_adamw_params){ .params_tag = DG_PARAMS_TAG, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .amsgrad = false,
                              .grad_clip_norm = INFINITY };
}

dg_optimizer *dg_adam(dg_tensor *const *params, int n, dg_adam_params p) {
    DG_CHECK_PARAMS("adam", p, dg_adam_default_params);
    return adam_common(DG_OPT_ADAM, &adam_info, params, n, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.amsgrad,
                       p.grad_clip_norm);
}

dg_optimizer *dg_adamw(dg_tensor *const *params, int n, dg_adamw_params p) {
    DG_CHECK_PARAMS("adamw", p, dg_adamw_default_params);
    return adam_common(DG_OPT_ADAMW, &adamw_info, params, n, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.amsgrad,
                       p.grad_clip_norm);
}
