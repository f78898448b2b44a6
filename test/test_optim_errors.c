/* test/test_optim_errors.c — the optimizers' parameters: out-of-range fields of every
 * optimizer (SGD, Momentum, Adagrad, Adam, AdamW, RMSprop, Adamax, NAdam) and of parameter
 * groups are refused naming the field, and each default is the documented torch/Paddle one. */
#include "test_util.h"

/* ---- bad input to the optimizers ---------------------------------------------------------- */

typedef dg_optimizer *(*ctor_fn)(dg_tensor *const *ps, int n, double lr);
static dg_optimizer *c_sgd(dg_tensor *const *ps, int n, double lr) {
    dg_sgd_params sgdp4 = dg_sgd_default_params();
    sgdp4.lr = lr;
    return dg_sgd(ps, n, sgdp4);
}
static dg_optimizer *c_mom(dg_tensor *const *ps, int n, double lr) {
    dg_momentum_params momp = dg_momentum_default_params();
    momp.lr = lr;
    return dg_momentum(ps, n, momp);
}
static dg_optimizer *c_ada(dg_tensor *const *ps, int n, double lr) {
    dg_adagrad_params agp = dg_adagrad_default_params();
    agp.lr = lr;
    return dg_adagrad(ps, n, agp);
}
static dg_optimizer *c_adam(dg_tensor *const *ps, int n, double lr) {
    dg_adam_params adp2 = dg_adam_default_params();
    adp2.lr = lr;
    return dg_adam(ps, n, adp2);
}
static dg_optimizer *c_adamw(dg_tensor *const *ps, int n, double lr) {
    dg_adamw_params adwp = dg_adamw_default_params();
    adwp.lr = lr;
    return dg_adamw(ps, n, adwp);
}
static dg_optimizer *c_rmsprop(dg_tensor *const *ps, int n, double lr) {
    dg_rmsprop_params rp = dg_rmsprop_default_params();
    rp.lr = lr;
    return dg_rmsprop(ps, n, rp);
}
static dg_optimizer *c_adamax(dg_tensor *const *ps, int n, double lr) {
    dg_adamax_params xp = dg_adamax_default_params();
    xp.lr = lr;
    return dg_adamax(ps, n, xp);
}
static dg_optimizer *c_nadam(dg_tensor *const *ps, int n, double lr) {
    dg_nadam_params np = dg_nadam_default_params();
    np.lr = lr;
    return dg_nadam(ps, n, np);
}
static dg_optimizer *c_lbfgs(dg_tensor *const *ps, int n, double lr) {
    dg_lbfgs_params lp = dg_lbfgs_default_params();
    lp.lr = lr;
    return dg_lbfgs(ps, n, lp);
}
static dg_optimizer *c_adadelta(dg_tensor *const *ps, int n, double lr) {
    dg_adadelta_params dp = dg_adadelta_default_params();
    dp.lr = lr;
    return dg_adadelta(ps, n, dp);
}

Test(optim, bad_input) {
    static const struct { const char *name; ctor_fn make; } ctors[] = {
        { "sgd", c_sgd }, { "momentum", c_mom }, { "adagrad", c_ada }, { "adam", c_adam }, { "adamw", c_adamw },
        { "rmsprop", c_rmsprop }, { "adamax", c_adamax }, { "nadam", c_nadam },
        { "adadelta", c_adadelta }, { "lbfgs", c_lbfgs },
    };
    dg_scope *outer = dg_scope_begin();
    dg_tensor *p = dg_ones(DG_SHAPE(2, 3), DG_F32), *frozen = dg_ones(DG_SHAPE(2), DG_F32);
    dg_tensor *ints = dg_zeros(DG_SHAPE(2), DG_I64);
    dg_set_requires_grad(p, true);
    dg_tensor *nonleaf = dg_mul_scalar(p, 2.0);
    for (size_t c = 0; c < sizeof ctors / sizeof ctors[0]; c++) {
        const char *nm = ctors[c].name;
        struct { dg_tensor *const *ps; int n; double lr; const char *needle; } bad[] = {
            { NULL, 1, 0.1, "NULL" },
            { (dg_tensor *[]){ p }, 0, 0.1, "no parameters" },
            { (dg_tensor *[]){ p, NULL }, 2, 0.1, "parameter 1 is NULL" },
            { (dg_tensor *[]){ nonleaf }, 1, 0.1, "not a leaf" },
            { (dg_tensor *[]){ frozen }, 1, 0.1, "does not require grad" },
            { (dg_tensor *[]){ ints }, 1, 0.1, "int64" },
            { (dg_tensor *[]){ p, p }, 2, 0.1, "again" },
            { (dg_tensor *[]){ p }, 1, -0.1, "lr" },
            { (dg_tensor *[]){ p }, 1, NAN, "lr" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            dg_clear_error();
            dg_optimizer *o = ctors[c].make(bad[i].ps, bad[i].n, bad[i].lr);
            cr_assert_null(o, "%s: bad case %zu accepted", nm, i);
            cr_assert_eq(dg_last_status(), DG_EINVAL);
            cr_assert(strstr(dg_last_error(), nm) && strstr(dg_last_error(), bad[i].needle),
                      "%s: bad case %zu: message '%s' should name the optimizer and say '%s'", nm, i, dg_last_error(),
                      bad[i].needle);
        }
        dg_clear_error();
        dg_optimizer *o = ctors[c].make((dg_tensor *[]){ p }, 1, 0.1);
        cr_assert(o, "%s: %s", nm, dg_last_error());
        cr_assert_str_eq(dg_optimizer_name(o), nm);
        cr_assert_eq(dg_optimizer_num_params(o), 1);
        cr_assert_eq(dg_optimizer_param(o, 0), p);
        cr_assert_eq(dg_optimizer_set_lr(o, -1), DG_EINVAL);
        cr_assert(strstr(dg_last_error(), nm), "%s", dg_last_error());
        cr_assert_eq(dg_optimizer_get_lr(o), 0.1, "a refused lr leaves the old one");
        cr_assert_eq(dg_optimizer_set_lr(o, 0.2), 0);
        cr_assert_eq(dg_optimizer_get_lr(o), 0.2);
        dg_clear_error();
        cr_assert_null(dg_optimizer_param(o, 1));
        dg_clear_error();
        if (strcmp(nm, "lbfgs") == 0) cr_assert_eq(dg_optimizer_step(o), DG_EINVAL, "lbfgs steps with its closure only");
        else cr_assert_eq(dg_optimizer_step(o), 0, "a step with no gradients does nothing");
        dg_optimizer_free(o);
    }
    dg_clear_error();
    dg_adam_params adp3 = dg_adam_default_params();
    adp3.beta1 = 1.0;
    cr_assert_null(dg_adam((dg_tensor *[]){ p }, 1, adp3));
    cr_assert(strstr(dg_last_error(), "adam: beta1"), "%s", dg_last_error());
    dg_clear_error();
    dg_adamw_params adwp2 = dg_adamw_default_params();
    adwp2.beta2 = -0.5;
    cr_assert_null(dg_adamw((dg_tensor *[]){ p }, 1, adwp2));
    cr_assert(strstr(dg_last_error(), "adamw: beta2"), "%s", dg_last_error());
    dg_clear_error();
    dg_momentum_params momp2 = dg_momentum_default_params();
    momp2.momentum = -0.9;
    cr_assert_null(dg_momentum((dg_tensor *[]){ p }, 1, momp2));
    cr_assert(strstr(dg_last_error(), "momentum"), "%s", dg_last_error());
    dg_clear_error();
    dg_sgd_params sgdp5 = dg_sgd_default_params();
    sgdp5.weight_decay = -1;
    cr_assert_null(dg_sgd((dg_tensor *[]){ p }, 1, sgdp5));
    cr_assert(strstr(dg_last_error(), "sgd: weight_decay"), "%s", dg_last_error());
    dg_clear_error();
    dg_adagrad_params agp2 = dg_adagrad_default_params();
    agp2.grad_clip_norm = -1;
    cr_assert_null(dg_adagrad((dg_tensor *[]){ p }, 1, agp2));
    cr_assert(strstr(dg_last_error(), "adagrad: grad_clip_norm"), "%s", dg_last_error());
    dg_clear_error();
    /* the new optimizers' fields, each error naming its field */
#define EXPECT_OPT_NULL(expr, needle) do { dg_clear_error(); dg_optimizer *o_ = (expr);                      \
        cr_assert_null(o_, "%s should fail", #expr); dg_optimizer_free(o_);                                \
        cr_assert(strstr(dg_last_error(), needle), "%s: message '%s' lacks '%s'", #expr, dg_last_error(), needle); } while (0)
    dg_momentum_params mdp = dg_momentum_default_params();
    mdp.dampening = 1.5;
    EXPECT_OPT_NULL(dg_momentum((dg_tensor *[]){ p }, 1, mdp), "momentum: dampening");
    mdp.dampening = 0.5;
    mdp.nesterov = true;
    EXPECT_OPT_NULL(dg_momentum((dg_tensor *[]){ p }, 1, mdp), "nesterov requires dampening 0");
    dg_rmsprop_params rp = dg_rmsprop_default_params();
    rp.alpha = -0.1;
    EXPECT_OPT_NULL(dg_rmsprop((dg_tensor *[]){ p }, 1, rp), "rmsprop: alpha");
    rp = dg_rmsprop_default_params();
    rp.momentum = -1;
    EXPECT_OPT_NULL(dg_rmsprop((dg_tensor *[]){ p }, 1, rp), "rmsprop: momentum");
    rp = dg_rmsprop_default_params();
    rp.eps = -1;
    EXPECT_OPT_NULL(dg_rmsprop((dg_tensor *[]){ p }, 1, rp), "rmsprop: eps");
    rp = dg_rmsprop_default_params();
    rp.weight_decay = -1;
    EXPECT_OPT_NULL(dg_rmsprop((dg_tensor *[]){ p }, 1, rp), "rmsprop: weight_decay");
    dg_adadelta_params dp = dg_adadelta_default_params();
    dp.rho = 1.5;
    EXPECT_OPT_NULL(dg_adadelta((dg_tensor *[]){ p }, 1, dp), "adadelta: rho must be in [0, 1], got 1.5");
    dp = dg_adadelta_default_params();
    dp.eps = -1;
    EXPECT_OPT_NULL(dg_adadelta((dg_tensor *[]){ p }, 1, dp), "adadelta: eps");
    dg_adamax_params xp = dg_adamax_default_params();
    xp.beta1 = 1;
    EXPECT_OPT_NULL(dg_adamax((dg_tensor *[]){ p }, 1, xp), "adamax: beta1");
    xp = dg_adamax_default_params();
    xp.eps = NAN;
    EXPECT_OPT_NULL(dg_adamax((dg_tensor *[]){ p }, 1, xp), "adamax: eps");
    dg_nadam_params np = dg_nadam_default_params();
    np.momentum_decay = -0.1;
    EXPECT_OPT_NULL(dg_nadam((dg_tensor *[]){ p }, 1, np), "nadam: momentum_decay");
    np = dg_nadam_default_params();
    np.beta2 = 1.5;
    EXPECT_OPT_NULL(dg_nadam((dg_tensor *[]){ p }, 1, np), "nadam: beta2");
    np = dg_nadam_default_params();
    np.grad_clip_norm = -1;
    EXPECT_OPT_NULL(dg_nadam((dg_tensor *[]){ p }, 1, np), "nadam: grad_clip_norm");
#undef EXPECT_OPT_NULL
    dg_clear_error();
    dg_rmsprop_params rmsp = dg_rmsprop_default_params();
    rmsp.lr = 0.1, rmsp.alpha = 2;
    cr_assert_null(dg_rmsprop((dg_tensor *[]){ p }, 1, rmsp));
    cr_assert(strstr(dg_last_error(), "rmsprop: alpha must be in [0, 1]"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert_lt(dg_optimizer_step(NULL), 0);
    cr_assert_lt(dg_optimizer_clear_grad(NULL), 0);
    cr_assert_lt(dg_optimizer_set_lr(NULL, 0.1), 0);
    cr_assert(isnan(dg_optimizer_get_lr(NULL)));
    cr_assert_lt(dg_optimizer_state_count(NULL), 0);
    cr_assert_lt(dg_optimizer_load_state(NULL, "lr", p), 0);
    dg_optimizer_free(NULL);
    dg_clear_error();
    dg_scope_end(outer);
}

/* Defaults documented in optim.h, read back through a step: SGD/Momentum lr 1e-3 (Paddle's). */
Test(optim, documented_defaults) {
    dg_tensor *p = dg_zeros(DG_SHAPE(1), DG_F64);
    dg_set_requires_grad(p, true);
    dg_optimizer *o[8] = {
        dg_sgd(&p, 1, dg_sgd_default_params()), dg_momentum(&p, 1, dg_momentum_default_params()),
        dg_adagrad(&p, 1, dg_adagrad_default_params()), dg_adam(&p, 1, dg_adam_default_params()),
        dg_adamw(&p, 1, dg_adamw_default_params()), dg_rmsprop(&p, 1, dg_rmsprop_default_params()),
        dg_adamax(&p, 1, dg_adamax_default_params()), dg_nadam(&p, 1, dg_nadam_default_params()),
    };
    const double lr[8] = { 1e-3, 1e-3, 1e-2, 1e-3, 1e-3, 1e-2, 2e-3, 2e-3 };
    for (int i = 0; i < 8; i++) {
        cr_assert(o[i]);
        cr_assert_eq(dg_optimizer_get_lr(o[i]), lr[i], "%s default lr", dg_optimizer_name(o[i]));
    }
    /* Momentum 0.9 by default: two steps with gradient 1 move p by lr * (1 + 1.9). */
    for (int k = 0; k < 2; k++) {
        dg_scope *s = dg_scope_begin();
        cr_assert_eq(dg_backward(dg_sum_all(p)), 0);
        cr_assert_eq(dg_optimizer_step(o[1]), 0);
        dg_optimizer_clear_grad(o[1]);
        dg_scope_end(s);
    }
    cr_assert(fabs(dg_item(p) + 1e-3 * 2.9) < 1e-15, "p = %.17g", dg_item(p));
    /* the default settings keep torch's default state: rmsprop square_avg and step only, adam no
     * max_exp_avg_sq */
    for (int i = 5; i < 8; i++) {
        dg_scope *s = dg_scope_begin();
        cr_assert_eq(dg_backward(dg_sum_all(p)), 0);
        cr_assert_eq(dg_optimizer_step(o[i]), 0);
        dg_optimizer_clear_grad(o[i]);
        dg_scope_end(s);
    }
    cr_assert_eq(dg_optimizer_state_count(o[5]), 3);
    cr_assert_str_eq(dg_optimizer_state_name(o[5], 1), "0.square_avg");
    cr_assert_str_eq(dg_optimizer_state_name(o[6], 2), "0.exp_inf");
    cr_assert_str_eq(dg_optimizer_state_name(o[7], 4), "0.mu_product");
    cr_assert_eq(dg_dtype_of(dg_optimizer_state_tensor(o[7], 4)), DG_F32);
    for (int i = 0; i < 8; i++) dg_optimizer_free(o[i]);
    dg_tensor_free(p);
}
