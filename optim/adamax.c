/* optim/adamax.c — Adamax, torch.optim.Adamax (Adam with the infinity norm): per parameter the
 * first moment and the exponentially weighted infinity norm, step for step as PyTorch 1.13's
 * single-tensor path. */
#include "optim_internal.h"
#include <math.h>

/* t += 1; d = g + wd p; m = b1 m + (1-b1) d; u = max(b2 u, |d| + eps);
 * p -= lr / (1 - b1^t) * m / u. Here the per-parameter scalar; the element rule is in
 * eager/update_rule.h. */
static void adamax_prepare(dg_optimizer *o, int i, dg_update_tensor *u) {
    dg_opt_state *s = &o->state[i];
    s->step++;
    u->step_size = dg_opt_lr_of(o, i) / (1 - pow(o->beta1, (double)s->step));
}

static const dg_opt_kind_info adamax_info = {
    .name = "adamax", .n_slots = 2, .slot = { "exp_avg", "exp_inf" }, .has_step = true, .rule = DG_UPD_ADAMAX,
    .prepare = adamax_prepare,
};

dg_adamax_params dg_adamax_default_params(void) {
    return (dg_adamax_params){ .params_tag = DG_PARAMS_TAG, .lr = 2e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0,
                               .grad_clip_norm = INFINITY };
}

dg_optimizer *dg_adamax(dg_tensor *const *params, int n, dg_adamax_params p) {
    DG_CHECK_PARAMS("adamax", p, dg_adamax_default_params);
    if (dg_opt_check_betas("adamax", p.beta1, p.beta2, p.eps) != 0) return NULL;
    dg_optimizer *o = dg_opt_new(DG_OPT_ADAMAX, &adamax_info, params, n, p.lr, p.weight_decay, p.grad_clip_norm);
    if (!o) return NULL;
    o->beta1 = p.beta1;
    o->beta2 = p.beta2;
    o->eps = p.eps;
    return dg_opt_finish(o);
}
