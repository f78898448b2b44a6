/* optim/sgd.c — plain SGD and SGD with momentum (optionally Nesterov or dampened),
 * torch.optim.SGD (= paddle.optimizer.SGD / Momentum with dampening 0). */
#include "optim_internal.h"
#include <math.h>

/* d = g + wd p; p -= lr d (sgd). Momentum: buf = d on the first step, else
 * momentum buf + (1 - dampening) d; p -= lr * (nesterov ? d + momentum buf : buf).
 * The element rules are in eager/update_rule.h. */
static void sgd_prepare(dg_optimizer *o, int i, dg_update_tensor *t) {
    t->step_size = dg_opt_lr_of(o, i);
    t->fresh = o->state[i].has && o->state[i].fresh;
}

static const dg_opt_kind_info sgd_info = { .name = "sgd", .rule = DG_UPD_SGD, .prepare = sgd_prepare };
static const dg_opt_kind_info momentum_info = {
    .name = "momentum", .rule = DG_UPD_MOMENTUM, .n_slots = 1, .slot = { "momentum_buffer" }, .prepare = sgd_prepare,
};

dg_sgd_params dg_sgd_default_params(void) {
    return (dg_sgd_params){ .params_tag = DG_PARAMS_TAG, .lr = 1e-3, .weight_decay = 0, .grad_clip_norm = INFINITY };
}

dg_momentum_params dg_momentum_default_params(void) {
    return (dg_momentum_params){ .params_tag = DG_PARAMS_TAG, .lr = 1e-3, .momentum = 0.9, .dampening = 0, .nesterov = false, .weight_decay = 0,
                                 .grad_clip_norm = INFINITY };
}

dg_optimizer *dg_sgd(dg_tensor *const *params, int n, dg_sgd_params p) {
    DG_CHECK_PARAMS("sgd", p, dg_sgd_default_params);
    return dg_opt_finish(dg_opt_new(DG_OPT_SGD, &sgd_info, params, n, p.lr, p.weight_decay, p.grad_clip_norm));
}

dg_optimizer *dg_momentum(dg_tensor *const *params, int n, dg_momentum_params p) {
    DG_CHECK_PARAMS("momentum", p, dg_momentum_default_params);
    DG_CHECK(p.momentum >= 0 && isfinite(p.momentum), "momentum: momentum must be >= 0, got %g", p.momentum);
    DG_CHECK(p.dampening >= 0 && p.dampening <= 1, "momentum: dampening must be in [0, 1], got %g", p.dampening);
    /* as torch.optim.SGD: Nesterov's look-ahead is defined for the undampened buffer */
    DG_CHECK(!p.nesterov || p.dampening == 0, "momentum: nesterov requires dampening 0, got dampening %g", p.dampening);
    dg_optimizer *o = dg_opt_new(DG_OPT_MOMENTUM, &momentum_info, params, n, p.lr, p.weight_decay, p.grad_clip_norm);
    if (!o) return NULL;
    o->momentum = p.momentum;
    o->dampening = p.dampening;
    o->nesterov = p.nesterov;
    return dg_opt_finish(o);
}
