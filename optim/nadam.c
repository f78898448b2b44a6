/* optim/nadam.c — NAdam, torch.optim.NAdam (Adam with Nesterov momentum and the momentum
 * schedule mu_t of Dozat 2016). Step for step as PyTorch's single-tensor path, with the
 * mu_product_next of PyTorch 2.0 (pytorch/pytorch#92699): PyTorch 1.13 multiplied mu_t into it
 * twice, a bug its authors fixed, so here NAdam follows the paper and PyTorch >= 2.0. */
#include "optim_internal.h"
#include <math.h>

/* t += 1; mu_t = b1 (1 - 0.5 * 0.96^(t psi)), mu_(t+1) likewise (psi = momentum_decay);
 * mu_product *= mu_t (a float32 state, as PyTorch's tensor); d = g + wd p; m, v as Adam's;
 * denom = sqrt(v / (1 - b2^t)) + eps;
 * p -= lr (1 - mu_t) / (1 - mu_product) * d / denom;
 * p -= lr mu_(t+1) / (1 - mu_product mu_(t+1)) * m / denom.
 * Here the per-parameter scalars; the element rule is in eager/update_rule.h. */
static void nadam_prepare(dg_optimizer *o, int i, dg_update_tensor *u) {
    dg_opt_state *s = &o->state[i];
    s->step++;
    double t = (double)s->step, lr = dg_opt_lr_of(o, i);
    double mu = o->beta1 * (1. - 0.5 * pow(0.96, t * o->momentum_decay));
    double mu_next = o->beta1 * (1. - 0.5 * pow(0.96, (t + 1) * o->momentum_decay));
    s->mu_product = (float)((float)s->mu_product * (float)mu);   /* PyTorch: float32 tensor *= mu */
    double mu_product_next = s->mu_product * mu_next;
    u->bc2_sqrt = 1 - pow(o->beta2, t);   /* nadam's field holds 1 - b2^t itself */
    u->step_size = lr * (1. - mu) / (1. - s->mu_product);
    u->step_size2 = lr * mu_next / (1. - mu_product_next);
}

static const dg_opt_kind_info nadam_info = {
    .name = "nadam", .n_slots = 2, .slot = { "exp_avg", "exp_avg_sq" }, .has_step = true, .has_mu_product = true,
    .rule = DG_UPD_NADAM, .prepare = nadam_prepare,
};

dg_nadam_params dg_nadam_default_params(void) {
    return (dg_nadam_params){ .params_tag = DG_PARAMS_TAG, .lr = 2e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0,
                              .momentum_decay = 4e-3, .grad_clip_norm = INFINITY };
}

dg_optimizer *dg_nadam(dg_tensor *const *params, int n, dg_nadam_params p) {
    DG_CHECK_PARAMS("nadam", p, dg_nadam_default_params);
    if (dg_opt_check_betas("nadam", p.beta1, p.beta2, p.eps) != 0) return NULL;
    DG_CHECK(p.momentum_decay >= 0 && isfinite(p.momentum_decay), "nadam: momentum_decay must be >= 0, got %g",
             p.momentum_decay);
    dg_optimizer *o = dg_opt_new(DG_OPT_NADAM, &nadam_info, params, n, p.lr, p.weight_decay, p.grad_clip_norm);
    if (!o) return NULL;
    o->beta1 = p.beta1;
    o->beta2 = p.beta2;
    o->eps = p.eps;
    o->momentum_decay = p.momentum_decay;
    return dg_opt_finish(o);
}
