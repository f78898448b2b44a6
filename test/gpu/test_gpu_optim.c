/* test/gpu/test_gpu_optim.c — every optimizer of optim.h (and its settings that change the fused
 * kernel: dampening, amsgrad, centered, momentum; parameter groups with their own lr and weight
 * decay) on gpu:0 against the same optimizer on the CPU: three parameters (p0 [37, 29] with odd sizes so vectorised kernels hit their
 * tails, p1 [5] whose gradient depends on its value and which gets none on every third step,
 * p2 [3] which never gets one and must stay untouched), 10 steps, the parameters and every
 * optimizer state tensor compared after each step; plus dg_clip_grad_norm on its own. */
#include "gpu_compare.h"

#define STEPS 10
/* a step rounds a handful of times per element (and the GPU may fuse a multiply-add the CPU
 * rounds twice): ~1e-7 per step on values of size 1, accumulated over 10 steps */
#define TOL_OPT { 1e-5, 2e-6, false }

typedef dg_optimizer *(*make_fn)(dg_tensor *const *ps, int n);
/* the settings are assignments to p, which starts as ctor's default params */
#define MAKE(name, ctor, type, ...) static dg_optimizer *name(dg_tensor *const *ps, int n) { \
        type p = ctor##_default_params(); \
        __VA_ARGS__; \
        return ctor(ps, n, p); }
MAKE(o_sgd, dg_sgd, dg_sgd_params, p.lr = 0.1)
MAKE(o_sgd_wd, dg_sgd, dg_sgd_params, p.lr = 0.1, p.weight_decay = 0.01)
MAKE(o_sgd_clip, dg_sgd, dg_sgd_params, p.lr = 0.1, p.grad_clip_norm = 1.0)
MAKE(o_momentum, dg_momentum, dg_momentum_params, p.lr = 0.05, p.momentum = 0.9)
MAKE(o_nesterov_wd, dg_momentum, dg_momentum_params, p.lr = 0.05, p.momentum = 0.8, p.nesterov = true, p.weight_decay = 1e-3)
MAKE(o_momentum_clip, dg_momentum, dg_momentum_params, p.lr = 0.05, p.grad_clip_norm = 1.0)
MAKE(o_adagrad, dg_adagrad, dg_adagrad_params, (void)0)
MAKE(o_adagrad_full, dg_adagrad, dg_adagrad_params, p.lr = 0.05, p.lr_decay = 0.01, p.eps = 1e-8, p.initial_accumulator_value = 0.1, p.weight_decay = 0.01)
MAKE(o_adam, dg_adam, dg_adam_params, (void)0)
MAKE(o_adam_full, dg_adam, dg_adam_params, p.lr = 1e-2, p.beta1 = 0.8, p.beta2 = 0.99, p.eps = 1e-6, p.weight_decay = 0.01, p.grad_clip_norm = 1.0)
MAKE(o_adamw, dg_adamw, dg_adamw_params, (void)0)
MAKE(o_adamw_nowd, dg_adamw, dg_adamw_params, p.lr = 1e-2, p.weight_decay = 0)
MAKE(o_adamw_clip, dg_adamw, dg_adamw_params, p.lr = 1e-2, p.weight_decay = 0.1, p.grad_clip_norm = 0.5)
MAKE(o_momentum_damp, dg_momentum, dg_momentum_params, p.lr = 0.05, p.momentum = 0.9, p.dampening = 0.4, p.weight_decay = 1e-3)
MAKE(o_adam_ams, dg_adam, dg_adam_params, p.lr = 1e-2, p.beta2 = 0.9, p.amsgrad = true, p.weight_decay = 0.01)
MAKE(o_adamw_ams, dg_adamw, dg_adamw_params, p.lr = 1e-2, p.beta2 = 0.9, p.amsgrad = true)
MAKE(o_rmsprop, dg_rmsprop, dg_rmsprop_params, (void)0)
MAKE(o_rmsprop_full, dg_rmsprop, dg_rmsprop_params, p.lr = 5e-3, p.alpha = 0.9, p.eps = 1e-6, p.weight_decay = 0.01, p.momentum = 0.8,
     p.centered = true, p.grad_clip_norm = 1.0)
MAKE(o_rmsprop_centered, dg_rmsprop, dg_rmsprop_params, p.centered = true)
MAKE(o_adamax, dg_adamax, dg_adamax_params, (void)0)
MAKE(o_adamax_full, dg_adamax, dg_adamax_params, p.lr = 1e-2, p.beta1 = 0.8, p.beta2 = 0.99, p.eps = 1e-6, p.weight_decay = 0.01,
     p.grad_clip_norm = 1.0)
MAKE(o_nadam, dg_nadam, dg_nadam_params, (void)0)
MAKE(o_nadam_full, dg_nadam, dg_nadam_params, p.lr = 1e-2, p.beta1 = 0.8, p.beta2 = 0.99, p.weight_decay = 0.01,
     p.momentum_decay = 0.02)
MAKE(o_adadelta, dg_adadelta, dg_adadelta_params, (void)0)
MAKE(o_adadelta_full, dg_adadelta, dg_adadelta_params, p.lr = 0.5, p.rho = 0.8, p.eps = 1e-4, p.weight_decay = 0.05,
     p.grad_clip_norm = 1.0)

/* p0 in group 0 (the constructor's lr and decay), p1 and p2 in group 1 (their own): one fused
 * call per group on each device */
static dg_optimizer *o_adamw_groups(dg_tensor *const *ps, int n) {
    dg_adamw_params p = dg_adamw_default_params();
    p.lr = 1e-2;
    p.weight_decay = 0.1;
    dg_optimizer *o = dg_adamw(ps, 1, p);
    dg_param_group_params g = dg_param_group_default_params();
    g.lr = 3e-2;
    g.weight_decay = 0;
    if (o && dg_optimizer_add_param_group(o, ps + 1, n - 1, g) != 0) { dg_optimizer_free(o); return NULL; }
    return o;
}
static dg_optimizer *o_momentum_groups(dg_tensor *const *ps, int n) {
    dg_momentum_params p = dg_momentum_default_params();
    p.lr = 0.05;
    p.weight_decay = 0.01;
    dg_optimizer *o = dg_momentum(ps, 1, p);
    dg_param_group_params g = dg_param_group_default_params();
    g.lr = 0.01;
    if (o && dg_optimizer_add_param_group(o, ps + 1, n - 1, g) != 0) { dg_optimizer_free(o); return NULL; }
    return o;
}

typedef struct optim_case { const char *name; make_fn make; } optim_case;
static const optim_case cases[] = {
    { "sgd", o_sgd },
    { "sgd weight_decay", o_sgd_wd },
    { "sgd grad clip", o_sgd_clip },
    { "momentum", o_momentum },
    { "momentum nesterov weight_decay", o_nesterov_wd },
    { "momentum grad clip", o_momentum_clip },
    { "adagrad defaults", o_adagrad },
    { "adagrad lr_decay, initial accumulator, weight_decay", o_adagrad_full },
    { "adam defaults", o_adam },
    { "adam betas, eps, weight_decay, grad clip", o_adam_full },
    { "adamw defaults (decay 0.01)", o_adamw },
    { "adamw no weight decay", o_adamw_nowd },
    { "adamw weight_decay, grad clip", o_adamw_clip },
    { "momentum dampening weight_decay", o_momentum_damp },
    { "adam amsgrad weight_decay", o_adam_ams },
    { "adamw amsgrad", o_adamw_ams },
    { "rmsprop defaults", o_rmsprop },
    { "rmsprop centered momentum weight_decay grad clip", o_rmsprop_full },
    { "rmsprop centered", o_rmsprop_centered },
    { "adamax defaults", o_adamax },
    { "adamax betas, eps, weight_decay, grad clip", o_adamax_full },
    { "nadam defaults", o_nadam },
    { "nadam betas, weight_decay, momentum_decay", o_nadam_full },
    { "adadelta defaults", o_adadelta },
    { "adadelta rho, eps, weight_decay, grad clip", o_adadelta_full },
    { "adamw two param groups (lr, no decay)", o_adamw_groups },
    { "momentum two param groups (lr)", o_momentum_groups },
};

/* backward of sum(p0 * g0) + 0.5 * sum(g1 * p1^2) (the second term only when has1): grad p0 = g0,
 * grad p1 = g1 * p1 */
static void feed(const char *op, const char *dev, dg_tensor *const *p, dg_tensor *g0, dg_tensor *g1, bool has1) {
    gt_use(dev);
    dg_tensor *loss = dg_sum_all(dg_mul(p[0], g0));
    if (has1) loss = dg_add(loss, dg_mul_scalar(dg_sum_all(dg_mul(g1, dg_mul(p[1], p[1]))), 0.5));
    cr_assert(loss, "%s on %s: loss: %s", op, dev, dg_last_error());
    cr_assert_eq(dg_backward(loss), 0, "%s on %s: backward: %s", op, dev, dg_last_error());
}

static bool is_buffer_slot(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && strcmp(dot, ".step") != 0 && strcmp(dot, ".mu_product") != 0 && strcmp(dot, ".lr") != 0;
}

static void run_optim(const optim_case *c, uint64_t seed) {
    gt_gpu_begin();
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(seed);
    dg_shape shapes[3] = { DG_SHAPE(37, 29), DG_SHAPE(5), DG_SHAPE(3) };
    dg_tensor *pc[3], *pg[3];
    for (int i = 0; i < 3; i++) {
        pc[i] = dg_uniform(shapes[i], -1, 1, DG_F32);
        cr_assert(pc[i] && dg_set_requires_grad(pc[i], true) == 0, "%s: %s", c->name, dg_last_error());
        pg[i] = gt_to_gpu(pc[i], true, c->name);
    }
    gt_use("cpu");
    dg_optimizer *oc = c->make(pc, 3);
    gt_use(gt_dut_name());
    dg_optimizer *og = c->make(pg, 3);
    cr_assert(oc && og, "%s: constructor: %s", c->name, dg_last_error());
    const gt_tol tol = TOL_OPT;

    for (int k = 0; k < STEPS; k++) {
        dg_scope *st = dg_scope_begin();
        gt_use("cpu");
        dg_manual_seed(seed + 100 + (uint64_t)k);
        dg_tensor *g0c = dg_uniform(shapes[0], -1, 1, DG_F32), *g1c = dg_uniform(shapes[1], -2, 2, DG_F32);
        cr_assert(g0c && g1c, "%s: %s", c->name, dg_last_error());
        dg_tensor *g0g = gt_to_gpu(g0c, false, c->name), *g1g = gt_to_gpu(g1c, false, c->name);
        bool has1 = k % 3 != 2;   /* a parameter without a gradient is skipped, its step count lags */

        char op[160];
        snprintf(op, sizeof op, "%s step %d", c->name, k + 1);
        feed(op, "cpu", pc, g0c, g1c, has1);
        cr_assert_eq(dg_optimizer_step(oc), 0, "%s on cpu: %s", op, dg_last_error());
        cr_assert_eq(dg_optimizer_clear_grad(oc), 0, "%s: %s", op, dg_last_error());
        feed(op, gt_dut_name(), pg, g0g, g1g, has1);
        cr_assert_eq(dg_optimizer_step(og), 0, "%s on %s: %s", op, gt_dut_name(), dg_last_error());
        cr_assert_eq(dg_optimizer_clear_grad(og), 0, "%s: %s", op, dg_last_error());
        gt_use("cpu");

        const char *pname[3] = { "p0", "p1", "p2 (never has a gradient)" };
        for (int i = 0; i < 3; i++) {
            gt_expect_on_gpu(op, pname[i], pg[i]);
            gt_compare(op, pname[i], pc[i], pg[i], tol);
        }
        cr_assert_eq(dg_optimizer_get_lr(oc), dg_optimizer_get_lr(og), "%s: lr", op);
        int nc = dg_optimizer_state_count(oc), ng = dg_optimizer_state_count(og);
        cr_assert_eq(nc, ng, "%s: %d state entries on the CPU, %d on the GPU", op, nc, ng);
        for (int i = 0; i < nc; i++) {
            const char *name = dg_optimizer_state_name(oc, i);
            cr_assert(name && dg_optimizer_state_name(og, i), "%s: state name %d: %s", op, i, dg_last_error());
            cr_assert_str_eq(name, dg_optimizer_state_name(og, i), "%s: state entry %d", op, i);
            dg_tensor *sg = dg_optimizer_state_tensor(og, i);
            if (is_buffer_slot(name)) gt_expect_on_gpu(op, name, sg);
            gt_compare(op, name, dg_optimizer_state_tensor(oc, i), sg, tol);
        }
        dg_scope_end(st);
    }
    dg_optimizer_free(oc);
    dg_optimizer_free(og);
    dg_scope_end(s);
}

GT_TABLE_TESTS(gpu_optim, cases, run_optim, 9000)

/* The global norm is one reduction over every gradient: the total and the scaled gradients must
 * agree, and a parameter set without gradients gives 0. */
Test(gpu_optim, clip_grad_norm) {
    gt_gpu_begin();
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(9900);
    dg_tensor *pc[2] = { dg_uniform(DG_SHAPE(300, 7), -1, 1, DG_F32), dg_uniform(DG_SHAPE(11), -1, 1, DG_F32) }, *pg[2];
    for (int i = 0; i < 2; i++) {
        cr_assert(pc[i] && dg_set_requires_grad(pc[i], true) == 0, "%s", dg_last_error());
        pg[i] = gt_to_gpu(pc[i], true, "clip_grad_norm");
    }
    gt_use("cpu");
    cr_expect_eq(dg_clip_grad_norm(pg, 2, 1.0), 0.0, "no gradients yet: total 0");
    for (int d = 0; d < 2; d++) {
        dg_tensor **p = d ? pg : pc;
        gt_use(d ? gt_dut_name() : "cpu");
        dg_tensor *loss = dg_add(dg_sum_all(dg_mul(p[0], p[0])), dg_sum_all(dg_exp(p[1])));
        cr_assert(loss && dg_backward(loss) == 0, "%s", dg_last_error());
    }
    gt_use("cpu");
    double tc = dg_clip_grad_norm(pc, 2, 1.0);
    gt_use(gt_dut_name());
    double tg = dg_clip_grad_norm(pg, 2, 1.0);
    gt_use("cpu");
    cr_assert(tc > 1.0, "the total (%g) must exceed max_norm for the clip to act", tc);
    cr_expect(fabs(tg - tc) <= 1e-5 * tc, "clip_grad_norm total: cpu %.9g, %s %.9g", tc, gt_dut_name(), tg);
    for (int i = 0; i < 2; i++) {
        gt_expect_on_gpu("clip_grad_norm", "gradient", dg_grad(pg[i]));
        gt_compare("clip_grad_norm", i ? "clipped grad of p1" : "clipped grad of p0", dg_grad(pc[i]), dg_grad(pg[i]),
                   (gt_tol)GT_RED);
    }
    dg_scope_end(s);
}
