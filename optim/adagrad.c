/* optim/adagrad.c — Adagrad, torch.optim.Adagrad (dense gradients): per parameter a running sum
 * of squared gradients, made at construction as PyTorch does (and for a group when it is added). */
#include "optim_internal.h"
#include <math.h>

/* t += 1; d = g + wd p; sum += d^2; p -= lr / (1 + (t-1) lr_decay) * d / (sqrt(sum) + eps)
 * Here the per-parameter scalars; the element rule is in eager/update_rule.h. */
static void adagrad_prepare(dg_optimizer *o, int i, dg_update_tensor *u) {
    dg_opt_state *s = &o->state[i];
    s->step++;
    u->step_size = dg_opt_lr_of(o, i) / (1 + (double)(s->step - 1) * o->lr_decay);
}

static const dg_opt_kind_info adagrad_info = {
    .name = "adagrad", .n_slots = 1, .slot = { "sum" }, .has_step = true, .state_at_construction = true,
    .rule = DG_UPD_ADAGRAD, .prepare = adagrad_prepare,
};

dg_adagrad_params dg_adagrad_default_params(void) {
    return (dg_adagrad_params){ .params_tag = DG_PARAMS_TAG, .lr = 1e-2, .lr_decay = 0, .eps = 1e-10, .initial_accumulator_value = 0, .weight_decay = 0,
                                .grad_clip_norm = INFINITY };
}

dg_optimizer *dg_adagrad(dg_tensor *const *params, int n, dg_adagrad_params p) {
    DG_CHECK_PARAMS("adagrad", p, dg_adagrad_default_params);
    DG_CHECK(p.lr_decay >= 0 && isfinite(p.lr_decay), "adagrad: lr_decay must be >= 0, got %g", p.lr_decay);
    DG_CHECK(p.eps >= 0 && isfinite(p.eps), "adagrad: eps must be >= 0, got %g", p.eps);
    DG_CHECK(p.initial_accumulator_value >= 0 && isfinite(p.initial_accumulator_value),
             "adagrad: initial_accumulator_value must be >= 0, got %g", p.initial_accumulator_value);
    dg_optimizer *o = dg_opt_new(DG_OPT_ADAGRAD, &adagrad_info, params, n, p.lr, p.weight_decay, p.grad_clip_norm);
    if (!o) return NULL;
    o->lr_decay = p.lr_decay;
    o->eps = p.eps;
    o->init_acc = p.initial_accumulator_value;
    return dg_opt_finish(o);
}
