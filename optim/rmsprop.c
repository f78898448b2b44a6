/* optim/rmsprop.c — RMSprop, torch.optim.RMSprop (optionally centered, optionally with
 * momentum), step for step as PyTorch 1.13's single-tensor path. Its buffers follow its
 * settings, as PyTorch's state: "square_avg" always, "momentum_buffer" when momentum > 0,
 * "grad_avg" when centered. */
#include "optim_internal.h"
#include <math.h>

/* t += 1 (kept for the state, as PyTorch); the element rule (eager/update_rule.h) takes lr as it is. */
static void rmsprop_prepare(dg_optimizer *o, int i, dg_update_tensor *u) {
    o->state[i].step++;
    u->step_size = dg_opt_lr_of(o, i);
}

/* slot 1 is on when momentum > 0, slot 2 when centered: the rule's s1 and s2 */
static const dg_opt_kind_info rmsprop_info = {
    .name = "rmsprop", .n_slots = 3, .slot = { "square_avg", "momentum_buffer", "grad_avg" }, .has_step = true,
    .rule = DG_UPD_RMSPROP, .prepare = rmsprop_prepare,
};

dg_rmsprop_params dg_rmsprop_default_params(void) {
    return (dg_rmsprop_params){ .params_tag = DG_PARAMS_TAG, .lr = 1e-2, .alpha = 0.99, .eps = 1e-8, .weight_decay = 0, .momentum = 0,
                                .centered = false, .grad_clip_norm = INFINITY };
}

dg_optimizer *dg_rmsprop(dg_tensor *const *params, int n, dg_rmsprop_params p) {
    DG_CHECK_PARAMS("rmsprop", p, dg_rmsprop_default_params);
    DG_CHECK(p.alpha >= 0 && p.alpha <= 1, "rmsprop: alpha must be in [0, 1], got %g", p.alpha);
    DG_CHECK(p.eps >= 0 && isfinite(p.eps), "rmsprop: eps must be >= 0, got %g", p.eps);
    DG_CHECK(p.momentum >= 0 && isfinite(p.momentum), "rmsprop: momentum must be >= 0, got %g", p.momentum);
    dg_optimizer *o = dg_opt_new(DG_OPT_RMSPROP, &rmsprop_info, params, n, p.lr, p.weight_decay, p.grad_clip_norm);
    if (!o) return NULL;
    o->alpha = p.alpha;
    o->eps = p.eps;
    o->momentum = p.momentum;
    o->centered = p.centered;
    o->slot_on[1] = p.momentum > 0;
    o->slot_on[2] = p.centered;
    return dg_opt_finish(o);
}
