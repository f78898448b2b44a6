/* optim/sgd.c — plain SGD and SGD with momentum (optionally Nesterov), torch.optim.SGD with
 * dampening 0 (= paddle.optimizer.SGD / Momentum). */
#include "optim_internal.h"
#include <math.h>

/* p -= lr * (g + wd p) */
static int sgd_update(dg_optimizer *o, int i, dg_tensor *p, const dg_tensor *g) {
    const dg_tensor *d = g;
    if (o->weight_decay != 0) { d = dg_opt_axpy(g, o->weight_decay, p); DG_OPT_NONNULL(o, d); }
    DG_OPT_TRY(o, dg_axpy_(p, -o->lr, d));
    return 0;
}

/* d = g + wd p; buf = d on the first step, else momentum buf + d;
 * p -= lr * (nesterov ? d + momentum buf : buf) */
static int momentum_update(dg_optimizer *o, int i, dg_tensor *p, const dg_tensor *g) {
    dg_opt_state *s = &o->state[i];
    dg_tensor *buf = s->buf[0];
    const dg_tensor *d = g;
    if (o->weight_decay != 0) { d = dg_opt_axpy(g, o->weight_decay, p); DG_OPT_NONNULL(o, d); }
    if (s->fresh) {
        DG_OPT_TRY(o, dg_copy_(buf, d));
    } else {
        DG_OPT_TRY(o, dg_scale_(buf, o->momentum));
        DG_OPT_TRY(o, dg_add_(buf, d));
    }
    if (o->nesterov) {
        d = dg_opt_axpy(d, o->momentum, buf);
        DG_OPT_NONNULL(o, d);
    } else {
        d = buf;
    }
    DG_OPT_TRY(o, dg_axpy_(p, -o->lr, d));
    return 0;
}

static const dg_opt_kind_info sgd_info = { .name = "sgd", .update = sgd_update };
static const dg_opt_kind_info momentum_info = {
    .name = "momentum", .n_slots = 1, .slot = { "momentum_buffer" }, .update = momentum_update,
};

dg_optimizer *dg_sgd(dg_tensor *const *params, int n, dg_sgd_params p) {
    return dg_opt_new(DG_OPT_SGD, &sgd_info, params, n, p.lr == 0 ? 1e-3 : p.lr, p.weight_decay, p.grad_clip_norm);
}

dg_optimizer *dg_momentum(dg_tensor *const *params, int n, dg_momentum_params p) {
    DG_CHECK(p.momentum >= 0 && isfinite(p.momentum), "momentum: momentum must be >= 0, got %g", p.momentum);
    dg_optimizer *o = dg_opt_new(DG_OPT_MOMENTUM, &momentum_info, params, n, p.lr == 0 ? 1e-3 : p.lr,
                                 p.weight_decay, p.grad_clip_norm);
    if (!o) return NULL;
    o->momentum = p.momentum == 0 ? 0.9 : p.momentum;
    o->nesterov = p.nesterov;
    return o;
}
