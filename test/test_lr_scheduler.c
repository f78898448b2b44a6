/* test/test_lr_scheduler.c — the LR schedulers against PyTorch 1.13 (test/goldens/optim_lr.txt,
 * written by test/goldens/make_optim_goldens.py): the lr at construction and after each of 30
 * steps, within 1e-6 (the goldens are float32). */
#include "test_util.h"

static golden *load(const char *file) {
    char path[256];
    snprintf(path, sizeof path, "test/goldens/%s", file);
    return golden_load(path);
}

/* ---- learning-rate schedulers ------------------------------------------------------------- */

static void check_schedule(golden *g, const char *name, dg_optimizer *opt, dg_lr_scheduler *s) {
    char key[64];
    snprintf(key, sizeof key, "lr_%s", name);
    dg_tensor *want = golden_get(g, key);
    const float *w = dg_data(want);
    int64_t n = dg_numel(want);
    cr_assert(s, "%s: construction failed: %s", name, dg_last_error());
    for (int64_t e = 0; e < n; e++) {
        if (e > 0) cr_assert_eq(dg_lr_scheduler_step(s), 0, "%s: %s", name, dg_last_error());
        double lr = dg_lr_scheduler_get_lr(s);
        cr_assert_eq(dg_lr_scheduler_epoch(s), e);
        cr_expect(fabs(lr - w[e]) <= 1e-6 * fmax(fabs(w[e]), 1e-6), "%s epoch %lld: lr %.9g, reference %.9g", name,
                  (long long)e, lr, (double)w[e]);
        cr_assert_eq(dg_optimizer_get_lr(opt), lr, "%s epoch %lld: the optimizer's lr is not the scheduler's", name,
                     (long long)e);
    }
    /* Jumping back (resume) gives the same value as stepping there. */
    cr_assert_eq(dg_lr_scheduler_set_epoch(s, 7), 0);
    cr_expect(fabs(dg_lr_scheduler_get_lr(s) - w[7]) <= 1e-6 * fmax(fabs(w[7]), 1e-6), "%s: set_epoch(7)", name);
    cr_assert_eq(dg_optimizer_get_lr(opt), dg_lr_scheduler_get_lr(s));
    dg_lr_scheduler_free(s);
}

typedef struct lr_fixture { golden *g; dg_tensor *p; dg_optimizer *opt; } lr_fixture;
static lr_fixture lr_setup(double lr) {
    lr_fixture f = { load("optim_lr.txt"), dg_zeros(DG_SHAPE(1), DG_F32), NULL };
    dg_set_requires_grad(f.p, true);
    dg_sgd_params sgdp = dg_sgd_default_params();
    sgdp.lr = lr;
    f.opt = dg_sgd(&f.p, 1, sgdp);
    cr_assert(f.opt);
    return f;
}
static void lr_teardown(lr_fixture f) {
    dg_optimizer_free(f.opt);
    dg_tensor_free(f.p);
    golden_free(f.g);
}

Test(lr_scheduler, step) {
    lr_fixture f = lr_setup(0.1);
    dg_step_lr_params slp = dg_step_lr_default_params();
    slp.step_size = 3;
    slp.gamma = 0.5;
    check_schedule(f.g, "step", f.opt, dg_step_lr(f.opt, slp));
    lr_teardown(f);
}
Test(lr_scheduler, step_default_gamma_and_base_lr) {
    lr_fixture f = lr_setup(0.01);
    dg_step_lr_params slp2 = dg_step_lr_default_params();
    slp2.base_lr = 0.5;
    slp2.step_size = 7;
    check_schedule(f.g, "step_default_gamma", f.opt, dg_step_lr(f.opt, slp2));
    lr_teardown(f);
}
Test(lr_scheduler, multi_step_unsorted_repeated_milestones) {
    lr_fixture f = lr_setup(0.2);
    int ms[] = { 12, 5, 12, 20 };
    dg_multi_step_lr_params mslp = dg_multi_step_lr_default_params();
    mslp.milestones = ms;
    mslp.n_milestones = 4;
    mslp.gamma = 0.3;
    check_schedule(f.g, "multi_step", f.opt,
                   dg_multi_step_lr(f.opt, mslp));
    lr_teardown(f);
}
Test(lr_scheduler, exponential) {
    lr_fixture f = lr_setup(0.1);
    dg_exponential_lr_params elp = dg_exponential_lr_default_params();
    elp.gamma = 0.9;
    check_schedule(f.g, "exponential", f.opt, dg_exponential_lr(f.opt, elp));
    lr_teardown(f);
}
Test(lr_scheduler, cosine_annealing_past_t_max) {
    lr_fixture f = lr_setup(0.1);
    dg_cosine_annealing_lr_params calp = dg_cosine_annealing_lr_default_params();
    calp.t_max = 10;
    calp.eta_min = 0.001;
    check_schedule(f.g, "cosine", f.opt,
                   dg_cosine_annealing_lr(f.opt, calp));
    lr_teardown(f);
}
Test(lr_scheduler, cosine_annealing_eta_min_0) {
    lr_fixture f = lr_setup(0.05);
    dg_cosine_annealing_lr_params calp2 = dg_cosine_annealing_lr_default_params();
    calp2.t_max = 7;
    check_schedule(f.g, "cosine_eta0", f.opt, dg_cosine_annealing_lr(f.opt, calp2));
    lr_teardown(f);
}
Test(lr_scheduler, linear_warmup_to_constant) {
    lr_fixture f = lr_setup(0.1);   /* end_lr and the constant after warm-up default to the optimizer's lr */
    dg_linear_warmup_lr_params wlp = dg_linear_warmup_lr_default_params();
    wlp.warmup_steps = 5;
    check_schedule(f.g, "warmup_const", f.opt, dg_linear_warmup_lr(f.opt, NULL, wlp));
    lr_teardown(f);
}
Test(lr_scheduler, linear_warmup_wrapping_cosine) {
    lr_fixture f = lr_setup(0.1);
    /* The inner schedule takes its base lr from the optimizer; the warm-up takes over driving it. */
    dg_cosine_annealing_lr_params calp3 = dg_cosine_annealing_lr_default_params();
    calp3.t_max = 15;
    dg_lr_scheduler *inner = dg_cosine_annealing_lr(f.opt, calp3);
    cr_assert(inner);
    dg_linear_warmup_lr_params wlp2 = dg_linear_warmup_lr_default_params();
    wlp2.warmup_steps = 8;
    wlp2.start_lr = 0.01;
    check_schedule(f.g, "warmup_cosine", f.opt,
                   dg_linear_warmup_lr(NULL, inner, wlp2));
    lr_teardown(f);
}
Test(lr_scheduler, linear_warmup_wrapping_step) {
    lr_fixture f = lr_setup(1.0);
    dg_step_lr_params slp3 = dg_step_lr_default_params();
    slp3.base_lr = 0.2;
    slp3.step_size = 5;
    slp3.gamma = 0.5;
    dg_lr_scheduler *inner = dg_step_lr(NULL, slp3);
    cr_assert(inner);
    dg_linear_warmup_lr_params wlp3 = dg_linear_warmup_lr_default_params();
    wlp3.warmup_steps = 4;
    wlp3.end_lr = 0.2;
    check_schedule(f.g, "warmup_step", f.opt,
                   dg_linear_warmup_lr(f.opt, inner, wlp3));
    lr_teardown(f);
}
Test(lr_scheduler, piecewise) {
    lr_fixture f = lr_setup(1.0);
    int b[] = { 3, 10, 20 };
    double v[] = { 0.1, 0.05, 0.01, 0.001 };
    dg_piecewise_lr_params pwp = dg_piecewise_lr_default_params();
    pwp.boundaries = b;
    pwp.n_boundaries = 3;
    pwp.values = v;
    check_schedule(f.g, "piecewise", f.opt,
                   dg_piecewise_lr(f.opt, pwp));
    lr_teardown(f);
}

/* The scheduler's lr is the one the optimizer steps with: p = 0, grad 1, SGD: p = -sum(lr). */
Test(lr_scheduler, drives_the_update) {
    dg_tensor *p = dg_zeros(DG_SHAPE(1), DG_F64);
    dg_set_requires_grad(p, true);
    dg_sgd_params sgdp2 = dg_sgd_default_params();
    sgdp2.lr = 1.0;
    dg_optimizer *o = dg_sgd(&p, 1, sgdp2);
    dg_step_lr_params slp4 = dg_step_lr_default_params();
    slp4.step_size = 2;
    slp4.gamma = 0.5;
    dg_lr_scheduler *s = dg_step_lr(o, slp4);
    double want = 0;
    for (int k = 0; k < 6; k++) {
        dg_scope *sc = dg_scope_begin();
        cr_assert_eq(dg_backward(dg_sum_all(p)), 0);
        want -= dg_lr_scheduler_get_lr(s);
        cr_assert_eq(dg_optimizer_step(o), 0);
        dg_optimizer_clear_grad(o);
        dg_lr_scheduler_step(s);
        dg_scope_end(sc);
    }
    cr_assert_eq(want, -(1 + 1 + 0.5 + 0.5 + 0.25 + 0.25));
    cr_assert_eq(dg_item(p), want, "p = %g, want %g", dg_item(p), want);
    dg_lr_scheduler_free(s);
    dg_optimizer_free(o);
    dg_tensor_free(p);
}

Test(lr_scheduler, bad_input) {
    dg_tensor *p = dg_zeros(DG_SHAPE(1), DG_F32);
    dg_set_requires_grad(p, true);
    dg_sgd_params sgdp3 = dg_sgd_default_params();
    sgdp3.lr = 0.1;
    dg_optimizer *o = dg_sgd(&p, 1, sgdp3);
    int ms[] = { 3 }, bad_b[] = { 5, 3 }, good_b[] = { 3, 8 };
    double v[] = { 0.1, -0.2, 0.3 };
#define EXPECT_NULL(expr, needle) do { dg_clear_error(); dg_lr_scheduler *s_ = (expr);                        \
        cr_assert_null(s_, "%s should fail", #expr); dg_lr_scheduler_free(s_);                              \
        cr_assert(strstr(dg_last_error(), needle), "%s: message '%s' lacks '%s'", #expr, dg_last_error(), needle); } while (0)
    EXPECT_NULL(dg_step_lr(o, dg_step_lr_default_params()), "step_size");
    dg_step_lr_params slp5 = dg_step_lr_default_params();
    slp5.step_size = 2;
    EXPECT_NULL(dg_step_lr(NULL, slp5), "base_lr");
    dg_step_lr_params slp6 = dg_step_lr_default_params();
    slp6.step_size = 2;
    slp6.base_lr = -0.5;   /* negative and not DG_LR_FROM_OPTIMIZER */
    EXPECT_NULL(dg_step_lr(o, slp6), "base_lr");
    dg_multi_step_lr_params mslp2 = dg_multi_step_lr_default_params();
    mslp2.n_milestones = 1;
    EXPECT_NULL(dg_multi_step_lr(o, mslp2), "milestones");
    dg_multi_step_lr_params mslp3 = dg_multi_step_lr_default_params();
    mslp3.milestones = ms;
    mslp3.n_milestones = 1;
    mslp3.gamma = -1;
    EXPECT_NULL(dg_multi_step_lr(o, mslp3), "gamma");
    EXPECT_NULL(dg_exponential_lr(o, dg_exponential_lr_default_params()), "gamma");
    EXPECT_NULL(dg_cosine_annealing_lr(o, dg_cosine_annealing_lr_default_params()), "t_max");
    dg_piecewise_lr_params pwp2 = dg_piecewise_lr_default_params();
    pwp2.boundaries = bad_b;
    pwp2.n_boundaries = 2;
    pwp2.values = v;
    EXPECT_NULL(dg_piecewise_lr(o, pwp2), "ascending");
    dg_piecewise_lr_params pwp3 = dg_piecewise_lr_default_params();
    pwp3.boundaries = ms;
    pwp3.n_boundaries = 1;
    EXPECT_NULL(dg_piecewise_lr(o, pwp3), "values");
    dg_piecewise_lr_params pwp4 = dg_piecewise_lr_default_params();
    pwp4.boundaries = good_b;
    pwp4.n_boundaries = 2;
    pwp4.values = v;
    EXPECT_NULL(dg_piecewise_lr(o, pwp4), "values[1]");
    dg_linear_warmup_lr_params wlp4 = dg_linear_warmup_lr_default_params();
    wlp4.warmup_steps = 3;
    EXPECT_NULL(dg_linear_warmup_lr(NULL, NULL, wlp4), "end_lr");
    /* the wrapped schedule is freed on failure (LeakSanitizer checks) */
    dg_step_lr_params slp7 = dg_step_lr_default_params();
    slp7.step_size = 2;
    EXPECT_NULL(dg_linear_warmup_lr(o, dg_step_lr(o, slp7),
                                    dg_linear_warmup_lr_default_params()), "warmup_steps");
    dg_clear_error();
    cr_assert_lt(dg_lr_scheduler_step(NULL), 0);
    cr_assert(isnan(dg_lr_scheduler_get_lr(NULL)));
    dg_step_lr_params slp8 = dg_step_lr_default_params();
    slp8.step_size = 2;
    dg_lr_scheduler *s = dg_step_lr(o, slp8);
    cr_assert_lt(dg_lr_scheduler_set_epoch(s, -1), 0);
    dg_lr_scheduler_free(s);
    dg_lr_scheduler_free(NULL);
    dg_clear_error();
#undef EXPECT_NULL
    dg_optimizer_free(o);
    dg_tensor_free(p);
}

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

Test(optim, bad_input) {
    static const struct { const char *name; ctor_fn make; } ctors[] = {
        { "sgd", c_sgd }, { "momentum", c_mom }, { "adagrad", c_ada }, { "adam", c_adam }, { "adamw", c_adamw },
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
        cr_assert_eq(dg_optimizer_step(o), 0, "a step with no gradients does nothing");
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
    dg_optimizer *o[5] = {
        dg_sgd(&p, 1, dg_sgd_default_params()), dg_momentum(&p, 1, dg_momentum_default_params()),
        dg_adagrad(&p, 1, dg_adagrad_default_params()), dg_adam(&p, 1, dg_adam_default_params()),
        dg_adamw(&p, 1, dg_adamw_default_params()),
    };
    const double lr[5] = { 1e-3, 1e-3, 1e-2, 1e-3, 1e-3 };
    for (int i = 0; i < 5; i++) {
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
    for (int i = 0; i < 5; i++) dg_optimizer_free(o[i]);
    dg_tensor_free(p);
}
