/* optim/adadelta.c — Adadelta, torch.optim.Adadelta step for step as PyTorch 1.13's
 * single-tensor path: per parameter the running averages "square_avg" (of d^2) and
 * "acc_delta" (of the update's square), and the step count "step" (kept for the state, as
 * PyTorch keeps it; the rule does not read it). */
#include "optim_internal.h"
#include <math.h>

/* t += 1; the element rule (eager/update_rule.h, DG_UPD_ADADELTA) takes lr as it is:
 * d = g + wd p; sq = rho sq + (1 - rho) d^2; delta = sqrt(acc + eps) / sqrt(sq + eps) * d;
 * acc = rho acc + (1 - rho) delta^2; p -= lr delta. */
static void adadelta_prepare(dg_optimizer *o, int i, dg_update_tensor *u) {
    o->state[i].step++;
    u->step_size = dg_opt_lr_of(o, i);
}

static const dg_opt_kind_info adadelta_info = {
    .name = "adadelta", .n_slots = 2, .slot = { "square_avg", "acc_delta" }, .has_step = true,
    .rule = DG_UPD_ADADELTA, .prepare = adadelta_prepare,
};

dg_adadelta_params dg_adadelta_default_params(void) {
    return (dg_adadelta_params){ .params_tag = DG_PARAMS_TAG, .lr = 1.0, .rho = 0.9, .eps = 1e-6, .weight_decay = 0,
                                 .grad_clip_norm = INFINITY };
}

dg_optimizer *dg_adadelta(dg_tensor *const *params, int n, dg_adadelta_params p) {
    DG_CHECK_PARAMS("adadelta", p, dg_adadelta_default_params);
    DG_CHECK(p.rho >= 0 && p.rho <= 1, "adadelta: rho must be in [0, 1], got %g", p.rho);
    DG_CHECK(p.eps >= 0 && isfinite(p.eps), "adadelta: eps must be >= 0, got %g", p.eps);
    dg_optimizer *o = dg_opt_new(DG_OPT_ADADELTA, &adadelta_info, params, n, p.lr, p.weight_decay, p.grad_clip_norm);
    if (!o) return NULL;
    o->rho = p.rho;
    o->eps = p.eps;
    return dg_opt_finish(o);
}
