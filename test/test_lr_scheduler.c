/* test/test_lr_scheduler.c — the LR schedulers against PyTorch 1.13 and Paddle's formulas
 * (test/goldens/optim_lr*.txt, optim_plateau.txt, written by test/goldens/make_optim_goldens.py):
 * the lr (and OneCycleLR's momentum) at construction and after each of 30 steps, within 1e-6
 * relative (the goldens are float32); the same for an optimizer with two parameter groups, each
 * following the schedule from its own lr; ReduceLROnPlateau's lrs and counters after each of 30
 * metrics; the schedulers' state entries. Bad input: test/test_lr_scheduler_errors.c and
 * test/test_optim_errors.c. */
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
    double w0, worst = 0;
    cr_assert(s, "%s: construction failed: %s", name, dg_last_error());
    for (int64_t e = 0; e < n; e++) {
        if (e > 0) cr_assert_eq(dg_lr_scheduler_step(s), 0, "%s: %s", name, dg_last_error());
        double lr = dg_lr_scheduler_get_lr(s);
        /* torch's linear OneCycleLR goes below 0 at epoch total_steps; lrs here are >= 0 (optim.h) */
        if (w[e] < 0) { cr_assert(strstr(name, "onecycle") && e == n - 1, "%s: a negative lr in the golden", name); w0 = 0; }
        else w0 = w[e];
        cr_assert_eq(dg_lr_scheduler_epoch(s), e);
        cr_expect(fabs(lr - w0) <= 1e-6 * fmax(fabs(w0), 1e-6), "%s epoch %lld: lr %.9g, reference %.9g", name,
                  (long long)e, lr, w0);
        worst = fmax(worst, fabs(lr - w0) / fmax(fabs(w0), 1e-6));
        cr_assert_eq(dg_optimizer_get_lr(opt), lr, "%s epoch %lld: the optimizer's lr is not the scheduler's", name,
                     (long long)e);
    }
    cr_log_info("%s: worst relative error %.3g over %lld steps\n", name, worst, (long long)(n - 1));
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

/* The schedules that both golden sets hold (one group: optim_lr.txt, two groups:
 * optim_lr_groups.txt), configured as make_optim_goldens.py configures them, written once. */
static double lambda_decay(int64_t e, void *user) { return 1.0 / (1.0 + *(const double *)user * (double)e); }   /* 1 / (1 + k e) */
static double warmup_lambda(int64_t e, void *user) { (void)user; return e < 4 ? (double)(e + 1) / 5.0 : 1.0; }
static dg_lr_scheduler *sched_step(dg_optimizer *o) {
    dg_step_lr_params p = dg_step_lr_default_params();
    p.step_size = 3;
    p.gamma = 0.5;
    return dg_step_lr(o, p);
}
static dg_lr_scheduler *sched_cosine(dg_optimizer *o) {
    dg_cosine_annealing_lr_params p = dg_cosine_annealing_lr_default_params();
    p.t_max = 10;
    p.eta_min = 0.001;
    return dg_cosine_annealing_lr(o, p);
}
static dg_lr_scheduler *sched_lambda(dg_optimizer *o) {
    static const double k = 0.3;
    dg_lambda_lr_params p = dg_lambda_lr_default_params();
    p.fn = lambda_decay;
    p.user = (void *)&k;
    return dg_lambda_lr(o, p);
}
static dg_lr_scheduler *sched_poly(dg_optimizer *o) {
    dg_polynomial_decay_lr_params p = dg_polynomial_decay_lr_default_params();
    p.decay_steps = 12;
    p.end_lr = 0.001;
    p.power = 2.0;
    return dg_polynomial_decay_lr(o, p);
}
/* LambdaLR warm-up for 4 steps, then cosine over 20; `owner` is what SequentialLR is given
 * (NULL: taken from the children) */
static dg_lr_scheduler *sched_warmup_then_cosine(dg_optimizer *o, dg_optimizer *owner) {
    dg_lambda_lr_params lp = dg_lambda_lr_default_params();
    lp.fn = warmup_lambda;
    dg_cosine_annealing_lr_params cp = dg_cosine_annealing_lr_default_params();
    cp.t_max = 20;
    dg_lr_scheduler *ch[2] = { dg_lambda_lr(o, lp), dg_cosine_annealing_lr(o, cp) };
    dg_sequential_lr_params q = dg_sequential_lr_default_params();
    q.schedulers = ch;
    q.n_schedulers = 2;
    q.milestones = (int[]){ 4 };
    q.n_milestones = 1;
    return dg_sequential_lr(owner, q);
}

Test(lr_scheduler, step) {
    lr_fixture f = lr_setup(0.1);
    check_schedule(f.g, "step", f.opt, sched_step(f.opt));
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
    check_schedule(f.g, "cosine", f.opt, sched_cosine(f.opt));
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
/* Issue 30.5: the warm-up wrapping a schedule, both built from their defaults with no optimizer
 * anywhere (the header's "lr is used only when after is NULL"), equals torch's SequentialLR of
 * LinearLR(start_factor 0.2, 5 iterations) and CosineAnnealingLR(T_max 10) at milestone 5; then
 * the same two driving an optimizer. */
Test(lr_scheduler, linear_warmup_wrapping_cosine_from_defaults) {
    for (int with_opt = 0; with_opt < 2; with_opt++) {
        lr_fixture f = lr_setup(0.1);
        dg_tensor *want = golden_get(f.g, "lr_warmup_seq_linear_cosine");
        const float *w = dg_data(want);
        dg_cosine_annealing_lr_params c = dg_cosine_annealing_lr_default_params();
        c.base_lr = 0.1;
        c.t_max = 10;
        dg_linear_warmup_lr_params wp = dg_linear_warmup_lr_default_params();
        wp.warmup_steps = 5;
        wp.start_lr = 0.02;
        wp.end_lr = 0.1;
        dg_lr_scheduler *s = dg_linear_warmup_lr(with_opt ? f.opt : NULL, dg_cosine_annealing_lr(NULL, c), wp);
        cr_assert(s, "with_opt %d: %s", with_opt, dg_last_error());
        for (int64_t e = 0; e < dg_numel(want); e++) {
            if (e > 0) cr_assert_eq(dg_lr_scheduler_step(s), 0, "%s", dg_last_error());
            double lr = dg_lr_scheduler_get_lr(s);
            cr_expect(fabs(lr - w[e]) <= 1e-6 * fmax(fabs(w[e]), 1e-6), "with_opt %d epoch %lld: lr %.9g, torch %.9g",
                      with_opt, (long long)e, lr, (double)w[e]);
            if (with_opt) cr_assert_eq(dg_optimizer_get_lr(f.opt), lr);
            else cr_assert_eq(dg_optimizer_get_lr(f.opt), 0.1, "a scheduler without an optimizer changed one");
        }
        dg_lr_scheduler_free(s);
        lr_teardown(f);
    }
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

/* ---- LambdaLR, PolynomialDecay, OneCycleLR, SequentialLR -------------------------------------- */

Test(lr_scheduler, lambda_with_user_pointer) {
    lr_fixture f = lr_setup(0.1);
    check_schedule(f.g, "lambda", f.opt, sched_lambda(f.opt));
    lr_teardown(f);
}
Test(lr_scheduler, polynomial_decay) {
    lr_fixture f = lr_setup(0.1);
    check_schedule(f.g, "poly", f.opt, sched_poly(f.opt));
    lr_teardown(f);
}
Test(lr_scheduler, polynomial_decay_defaults_and_base_lr) {
    lr_fixture f = lr_setup(1.0);
    dg_polynomial_decay_lr_params pp = dg_polynomial_decay_lr_default_params();   /* end_lr 1e-4, power 1 */
    pp.base_lr = 0.05;
    pp.decay_steps = 20;
    check_schedule(f.g, "poly_default", f.opt, dg_polynomial_decay_lr(f.opt, pp));
    lr_teardown(f);
}
Test(lr_scheduler, polynomial_decay_cycle) {
    lr_fixture f = lr_setup(0.1);
    dg_polynomial_decay_lr_params pp = dg_polynomial_decay_lr_default_params();
    pp.decay_steps = 7;
    pp.end_lr = 0.01;
    pp.power = 1.5;
    pp.cycle = true;
    check_schedule(f.g, "poly_cycle", f.opt, dg_polynomial_decay_lr(f.opt, pp));
    lr_teardown(f);
}

/* lr and the cycled momentum against the golden, then the error past total_steps */
static void check_one_cycle(golden *g, const char *name, dg_optimizer *opt, dg_lr_scheduler *s, int total_steps) {
    char key[64];
    snprintf(key, sizeof key, "mom_%s", name);
    const float *m = dg_data(golden_get(g, key));
    double worst = 0;
    for (int e = 0; e <= 30; e++) {
        if (e > 0) cr_assert_eq(dg_lr_scheduler_step(s), 0, "%s: %s", name, dg_last_error());
        double mo = dg_lr_scheduler_get_momentum(s);
        cr_expect(fabs(mo - m[e]) <= 1e-6 * fabs(m[e]), "%s epoch %d: momentum %.9g, PyTorch %.9g", name, e, mo, (double)m[e]);
        worst = fmax(worst, fabs(mo - m[e]) / fabs(m[e]));
    }
    cr_log_info("%s momentum: worst relative error %.3g over 30 steps\n", name, worst);
    cr_assert_eq(dg_lr_scheduler_set_epoch(s, 0), 0);
    check_schedule(g, name, opt, s);   /* frees s */
    (void)total_steps;
}

Test(lr_scheduler, one_cycle_sgd_momentum) {
    golden *g = load("optim_lr.txt");
    dg_tensor *p = dg_zeros(DG_SHAPE(1), DG_F32);
    dg_set_requires_grad(p, true);
    dg_momentum_params mp = dg_momentum_default_params();
    mp.lr = 0.01;
    dg_optimizer *o = dg_momentum(&p, 1, mp);
    dg_one_cycle_lr_params op = dg_one_cycle_lr_default_params();   /* torch's defaults */
    op.max_lr = 0.1;
    op.total_steps = 30;
    dg_lr_scheduler *s = dg_one_cycle_lr(o, op);
    cr_assert(s, "%s", dg_last_error());
    check_one_cycle(g, "onecycle", o, s, 30);
    /* past total_steps: an error that changes nothing, as torch's "Tried to step 32 times" */
    s = dg_one_cycle_lr(o, op);
    for (int e = 0; e < 30; e++) cr_assert_eq(dg_lr_scheduler_step(s), 0);
    double lr = dg_optimizer_get_lr(o);
    dg_clear_error();
    cr_assert_eq(dg_lr_scheduler_step(s), DG_EINVAL);
    cr_assert(strstr(dg_last_error(), "one_cycle_lr") && strstr(dg_last_error(), "total_steps"), "%s", dg_last_error());
    cr_assert_eq(dg_lr_scheduler_epoch(s), 30);
    cr_assert_eq(dg_optimizer_get_lr(o), lr);
    cr_assert_eq(dg_lr_scheduler_set_epoch(s, 31), DG_EINVAL);
    cr_assert_eq(dg_lr_scheduler_epoch(s), 30);
    dg_clear_error();
    dg_lr_scheduler_free(s);
    dg_optimizer_free(o);
    dg_tensor_free(p);
    golden_free(g);
}

Test(lr_scheduler, one_cycle_three_phase_linear_adam_beta1) {
    golden *g = load("optim_lr.txt");
    dg_tensor *p = dg_zeros(DG_SHAPE(1), DG_F32);
    dg_set_requires_grad(p, true);
    dg_adam_params ap = dg_adam_default_params();
    ap.lr = 0.01;
    dg_optimizer *o = dg_adam(&p, 1, ap);
    dg_one_cycle_lr_params op = dg_one_cycle_lr_default_params();
    op.max_lr = 0.05;
    op.total_steps = 30;
    op.pct_start = 0.25;
    op.anneal_strategy = DG_ANNEAL_LINEAR;
    op.div_factor = 10;
    op.final_div_factor = 100;
    op.three_phase = true;
    op.base_momentum = 0.8;
    op.max_momentum = 0.9;
    check_one_cycle(g, "onecycle_3phase_linear", o, dg_one_cycle_lr(o, op), 30);
    dg_optimizer_free(o);
    dg_tensor_free(p);
    golden_free(g);
}

Test(lr_scheduler, one_cycle_without_momentum) {
    lr_fixture f = lr_setup(0.01);   /* plain SGD: refused with cycle_momentum, fine without */
    dg_one_cycle_lr_params op = dg_one_cycle_lr_default_params();
    op.max_lr = 0.2;
    op.total_steps = 35;
    dg_clear_error();
    cr_assert_null(dg_one_cycle_lr(f.opt, op));
    cr_assert(strstr(dg_last_error(), "cycle_momentum") && strstr(dg_last_error(), "sgd"), "%s", dg_last_error());
    op.cycle_momentum = false;
    dg_lr_scheduler *s = dg_one_cycle_lr(f.opt, op);
    cr_assert(s && isnan(dg_lr_scheduler_get_momentum(s)));
    check_schedule(f.g, "onecycle_no_momentum", f.opt, s);
    lr_teardown(f);
}

/* The momentum OneCycleLR sets is the one the optimizer steps with: p = 0, gradient 1, SGD
 * momentum: the second step moves p by lr(1) * (m(1) + 1), m(1) the golden's. */
Test(lr_scheduler, one_cycle_drives_the_momentum) {
    golden *g = load("optim_lr.txt");
    const float *lr = dg_data(golden_get(g, "lr_onecycle")), *m = dg_data(golden_get(g, "mom_onecycle"));
    dg_tensor *p = dg_zeros(DG_SHAPE(1), DG_F64);
    dg_set_requires_grad(p, true);
    dg_optimizer *o = dg_momentum(&p, 1, dg_momentum_default_params());
    dg_one_cycle_lr_params op = dg_one_cycle_lr_default_params();
    op.max_lr = 0.1;
    op.total_steps = 30;
    dg_lr_scheduler *s = dg_one_cycle_lr(o, op);
    double before = 0;
    for (int k = 0; k < 2; k++) {
        dg_scope *sc = dg_scope_begin();
        before = dg_item(p);
        cr_assert_eq(dg_backward(dg_sum_all(p)), 0);
        cr_assert_eq(dg_optimizer_step(o), 0);
        dg_optimizer_clear_grad(o);
        if (k == 0) cr_assert_eq(dg_lr_scheduler_step(s), 0);
        dg_scope_end(sc);
    }
    double moved = before - dg_item(p), want = (double)lr[1] * ((double)m[1] + 1);
    cr_assert(fabs(moved - want) <= 1e-6 * want, "second step moved p by %.9g, lr(1) (m(1) + 1) = %.9g", moved, want);
    dg_lr_scheduler_free(s);
    dg_optimizer_free(o);
    dg_tensor_free(p);
    golden_free(g);
}

Test(lr_scheduler, sequential_exponential_cosine_step) {
    lr_fixture f = lr_setup(0.1);
    dg_exponential_lr_params ep = dg_exponential_lr_default_params();
    ep.gamma = 0.8;
    dg_cosine_annealing_lr_params cp = dg_cosine_annealing_lr_default_params();
    cp.t_max = 10;
    cp.eta_min = 0.001;
    dg_step_lr_params sp = dg_step_lr_default_params();
    sp.step_size = 4;
    sp.gamma = 0.5;
    /* made with the optimizer, as torch's: each sets its lr(0), which SequentialLR replaces */
    dg_lr_scheduler *ch[3] = { dg_exponential_lr(f.opt, ep), dg_cosine_annealing_lr(f.opt, cp), dg_step_lr(f.opt, sp) };
    int ms[2] = { 6, 16 };
    dg_sequential_lr_params q = dg_sequential_lr_default_params();
    q.schedulers = ch;
    q.n_schedulers = 3;
    q.milestones = ms;
    q.n_milestones = 2;
    check_schedule(f.g, "sequential", f.opt, dg_sequential_lr(f.opt, q));
    lr_teardown(f);
}
Test(lr_scheduler, sequential_lambda_warmup_then_cosine) {
    lr_fixture f = lr_setup(0.1);
    check_schedule(f.g, "sequential_warmup", f.opt, sched_warmup_then_cosine(f.opt, NULL));   /* opt taken from the children */
    lr_teardown(f);
}

/* ---- two parameter groups: each follows the schedule from its own lr -------------------------- */

typedef struct groups_fixture { golden *g; dg_tensor *p[2]; dg_optimizer *opt; } groups_fixture;
static groups_fixture groups_setup(bool momentum) {
    groups_fixture f = { load("optim_lr_groups.txt"), { dg_zeros(DG_SHAPE(1), DG_F32), dg_zeros(DG_SHAPE(1), DG_F32) }, NULL };
    dg_set_requires_grad(f.p[0], true);
    dg_set_requires_grad(f.p[1], true);
    if (momentum) {
        dg_momentum_params mp = dg_momentum_default_params();
        mp.lr = 0.1;
        f.opt = dg_momentum(f.p, 1, mp);
    } else {
        dg_sgd_params sp = dg_sgd_default_params();
        sp.lr = 0.1;
        f.opt = dg_sgd(f.p, 1, sp);
    }
    dg_param_group_params gp = dg_param_group_default_params();
    gp.lr = 0.02;
    cr_assert(f.opt && dg_optimizer_add_param_group(f.opt, f.p + 1, 1, gp) == 0, "%s", dg_last_error());
    return f;
}
static void groups_teardown(groups_fixture f) {
    dg_optimizer_free(f.opt);
    dg_tensor_free(f.p[0]);
    dg_tensor_free(f.p[1]);
    golden_free(f.g);
}

static void check_groups_schedule(groups_fixture *f, const char *name, dg_lr_scheduler *s) {
    char key[64];
    snprintf(key, sizeof key, "lr_%s", name);
    const float *w = dg_data(golden_get(f->g, key));   /* [2, 31] */
    double worst = 0;
    cr_assert(s, "%s: construction failed: %s", name, dg_last_error());
    for (int e = 0; e <= 30; e++) {
        if (e > 0) cr_assert_eq(dg_lr_scheduler_step(s), 0, "%s: %s", name, dg_last_error());
        for (int gi = 0; gi < 2; gi++) {
            double lr = dg_optimizer_get_group_lr(f->opt, gi), want = w[gi * 31 + e];
            cr_expect(fabs(lr - want) <= 1e-6 * fmax(fabs(want), 1e-6), "%s epoch %d group %d: lr %.9g, reference %.9g",
                      name, e, gi, lr, want);
            worst = fmax(worst, fabs(lr - want) / fmax(fabs(want), 1e-6));
        }
        cr_assert_eq(dg_lr_scheduler_get_lr(s), dg_optimizer_get_group_lr(f->opt, 0));
    }
    cr_assert(w[0] != w[30] && w[31] != w[61], "%s: the schedule must move", name);
    cr_log_info("groups %s: worst relative error %.3g over 30 steps\n", name, worst);
    dg_lr_scheduler_free(s);
}

Test(lr_scheduler_groups, step) {
    groups_fixture f = groups_setup(false);
    check_groups_schedule(&f, "step", sched_step(f.opt));
    groups_teardown(f);
}
Test(lr_scheduler_groups, cosine_absolute_eta_min) {
    groups_fixture f = groups_setup(false);
    check_groups_schedule(&f, "cosine", sched_cosine(f.opt));
    groups_teardown(f);
}
Test(lr_scheduler_groups, lambda) {
    groups_fixture f = groups_setup(false);
    check_groups_schedule(&f, "lambda", sched_lambda(f.opt));
    groups_teardown(f);
}
Test(lr_scheduler_groups, one_cycle_max_lr_from_each_group) {
    groups_fixture f = groups_setup(true);
    dg_one_cycle_lr_params p = dg_one_cycle_lr_default_params();
    p.max_lr = DG_LR_FROM_OPTIMIZER;   /* torch's max_lr=[0.1, 0.02] */
    p.total_steps = 30;
    check_groups_schedule(&f, "onecycle", dg_one_cycle_lr(f.opt, p));
    groups_teardown(f);
}
Test(lr_scheduler_groups, sequential) {
    groups_fixture f = groups_setup(false);
    check_groups_schedule(&f, "sequential", sched_warmup_then_cosine(f.opt, f.opt));
    groups_teardown(f);
}
Test(lr_scheduler_groups, polynomial_decay) {
    groups_fixture f = groups_setup(false);
    check_groups_schedule(&f, "poly", sched_poly(f.opt));
    groups_teardown(f);
}
Test(lr_scheduler_groups, linear_warmup_wrapping_cosine) {
    groups_fixture f = groups_setup(false);
    dg_cosine_annealing_lr_params cp = dg_cosine_annealing_lr_default_params();
    cp.t_max = 15;
    cp.eta_min = 0.001;
    dg_linear_warmup_lr_params wp = dg_linear_warmup_lr_default_params();
    wp.warmup_steps = 8;
    check_groups_schedule(&f, "warmup_cosine", dg_linear_warmup_lr(f.opt, dg_cosine_annealing_lr(f.opt, cp), wp));
    groups_teardown(f);
}

/* A schedule covers the groups the optimizer had when it was made. */
Test(lr_scheduler_groups, group_added_after_the_scheduler) {
    groups_fixture f = groups_setup(false);
    dg_step_lr_params p = dg_step_lr_default_params();
    p.step_size = 2;
    dg_lr_scheduler *s = dg_step_lr(f.opt, p);
    dg_tensor *x = dg_zeros(DG_SHAPE(1), DG_F32);
    dg_set_requires_grad(x, true);
    cr_assert_eq(dg_optimizer_add_param_group(f.opt, &x, 1, dg_param_group_default_params()), 0);
    dg_clear_error();
    cr_assert_eq(dg_lr_scheduler_step(s), DG_EINVAL);
    cr_assert(strstr(dg_last_error(), "3 param groups") && strstr(dg_last_error(), "had 2"), "%s", dg_last_error());
    cr_assert_eq(dg_lr_scheduler_epoch(s), 0);
    dg_clear_error();
    dg_lr_scheduler_free(s);
    dg_tensor_free(x);
    groups_teardown(f);
}

/* ---- ReduceLROnPlateau ------------------------------------------------------------------------ */

/* The configurations of the script's plateau_file, in its hp order: mode (1: max), factor,
 * patience, threshold, threshold_mode (1: abs), cooldown, min_lr, eps. */
typedef struct plateau_cfg { const char *name; double hp[8]; } plateau_cfg;
static const plateau_cfg plateau_cfgs[] = {
    { "min_rel", { 0, 0.5, 2, 1e-4, 0, 0, 0.0, 1e-8 } },
    { "min_abs_cooldown", { 0, 0.3, 1, 0.02, 1, 2, 0.005, 1e-8 } },
    { "max_rel", { 1, 0.5, 1, 0.01, 0, 1, 0.0, 1e-8 } },
    { "min_eps", { 0, 0.5, 0, 1e-4, 0, 0, 0.0, 0.004 } },
};

static void run_plateau(const plateau_cfg *c) {
    const char *name = c->name;
    golden *g = load("optim_plateau.txt");
    char key[64];
    snprintf(key, sizeof key, "hp_%s", name);
    const float *hp = dg_data(golden_get(g, key));
    for (int i = 0; i < 8; i++)
        cr_assert_eq((float)c->hp[i], hp[i], "%s: hyper-parameter %d is %g here, %g in the golden", name, i, c->hp[i],
                     (double)hp[i]);
    dg_tensor *ps[2] = { dg_zeros(DG_SHAPE(1), DG_F32), dg_zeros(DG_SHAPE(1), DG_F32) };
    dg_set_requires_grad(ps[0], true);
    dg_set_requires_grad(ps[1], true);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.1;
    dg_optimizer *o = dg_sgd(ps, 1, sp);
    dg_param_group_params gp = dg_param_group_default_params();
    gp.lr = 0.02;
    cr_assert_eq(dg_optimizer_add_param_group(o, ps + 1, 1, gp), 0);
    dg_reduce_lr_on_plateau_params p = dg_reduce_lr_on_plateau_default_params();
    p.mode = c->hp[0] != 0 ? DG_PLATEAU_MAX : DG_PLATEAU_MIN;
    p.factor = c->hp[1];
    p.patience = (int)c->hp[2];
    p.threshold = c->hp[3];
    p.threshold_mode = c->hp[4] != 0 ? DG_THRESHOLD_ABS : DG_THRESHOLD_REL;
    p.cooldown = (int)c->hp[5];
    p.min_lr = c->hp[6];
    p.eps = c->hp[7];
    dg_lr_scheduler *s = dg_reduce_lr_on_plateau(o, p);
    cr_assert(s, "%s: %s", name, dg_last_error());
    cr_assert_eq(dg_optimizer_get_lr(o), 0.1, "the plateau scheduler leaves the lr at construction");
    cr_assert_eq(dg_lr_scheduler_state_count(s), 4);
    snprintf(key, sizeof key, "lr_%s", name);
    const float *w = dg_data(golden_get(g, key));
    snprintf(key, sizeof key, "bad_%s", name);
    const int64_t *bad = dg_data(golden_get(g, key));
    snprintf(key, sizeof key, "cool_%s", name);
    const int64_t *cool = dg_data(golden_get(g, key));
    const float *metric = dg_data(golden_get(g, "metric"));
    double worst = 0;
    for (int e = 0; e <= 30; e++) {
        if (e > 0) {
            double m = p.mode == DG_PLATEAU_MAX ? -(double)metric[e - 1] : (double)metric[e - 1];
            cr_assert_eq(dg_lr_scheduler_step_metric(s, m), 0, "%s: %s", name, dg_last_error());
            cr_expect_eq(dg_item(dg_lr_scheduler_state_tensor(s, 2)), bad[e - 1], "%s epoch %d: num_bad_epochs %g, torch %lld",
                         name, e, dg_item(dg_lr_scheduler_state_tensor(s, 2)), (long long)bad[e - 1]);
            cr_expect_eq(dg_item(dg_lr_scheduler_state_tensor(s, 3)), cool[e - 1], "%s epoch %d: cooldown_counter", name, e);
        }
        cr_assert_eq(dg_lr_scheduler_epoch(s), e);
        for (int gi = 0; gi < 2; gi++) {
            double lr = dg_optimizer_get_group_lr(o, gi), want = w[gi * 31 + e];
            cr_expect(fabs(lr - want) <= 1e-6 * want, "%s epoch %d group %d: lr %.9g, torch %.9g", name, e, gi, lr, want);
            worst = fmax(worst, fabs(lr - want) / want);
        }
        cr_assert_eq(dg_lr_scheduler_get_lr(s), dg_optimizer_get_lr(o));
    }
    cr_log_info("plateau %s: worst relative error %.3g over 30 metrics\n", name, worst);
    dg_clear_error();
    cr_assert_eq(dg_lr_scheduler_step(s), DG_EINVAL, "a plateau scheduler needs its metric");
    cr_assert(strstr(dg_last_error(), "step_metric"), "%s", dg_last_error());
    dg_clear_error();
    dg_lr_scheduler_free(s);
    dg_optimizer_free(o);
    dg_tensor_free(ps[0]);
    dg_tensor_free(ps[1]);
    golden_free(g);
}
Test(lr_scheduler_plateau, min_rel) { run_plateau(&plateau_cfgs[0]); }
Test(lr_scheduler_plateau, min_abs_cooldown_min_lr) { run_plateau(&plateau_cfgs[1]); }
Test(lr_scheduler_plateau, max_rel_cooldown) { run_plateau(&plateau_cfgs[2]); }
Test(lr_scheduler_plateau, min_eps_skips_small_reductions) { run_plateau(&plateau_cfgs[3]); }

/* ---- scheduler state ---------------------------------------------------------------------------- */

Test(lr_scheduler_state, names_load_and_errors) {
    lr_fixture f = lr_setup(0.1);
    dg_scope *sc = dg_scope_begin();   /* the values handed to load_state */
    dg_cosine_annealing_lr_params cp = dg_cosine_annealing_lr_default_params();
    cp.t_max = 10;
    dg_lr_scheduler *c = dg_cosine_annealing_lr(f.opt, cp);
    for (int k = 0; k < 3; k++) dg_lr_scheduler_step(c);
    cr_assert_eq(dg_lr_scheduler_state_count(c), 1);
    cr_assert_str_eq(dg_lr_scheduler_state_name(c, 0), "epoch");
    cr_assert_eq(dg_dtype_of(dg_lr_scheduler_state_tensor(c, 0)), DG_I64);
    cr_assert_eq(dg_item(dg_lr_scheduler_state_tensor(c, 0)), 3);
    cr_assert_eq(dg_lr_scheduler_load_state(c, "epoch", dg_scalar(7, DG_I64)), 0);
    cr_assert_eq(dg_lr_scheduler_epoch(c), 7);
    cr_assert_eq(dg_optimizer_get_lr(f.opt), dg_lr_scheduler_get_lr(c));
    struct { const char *name; dg_tensor *v; const char *needle; } bad[] = {
        { "best", dg_scalar(1, DG_F64), "only 'epoch'" }, { "epoch", dg_scalar(-1, DG_I64), "count" },
        { "epoch", dg_scalar(2.5, DG_F64), "count" },     { "epoch", dg_ones(DG_SHAPE(2), DG_I64), "one value" },
        { "epoch", NULL, "NULL" },                          { NULL, dg_scalar(1, DG_I64), "NULL" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dg_clear_error();
        cr_assert_eq(dg_lr_scheduler_load_state(c, bad[i].name, bad[i].v), DG_EINVAL, "bad load %zu", i);
        cr_assert(strstr(dg_last_error(), "cosine_annealing_lr") && strstr(dg_last_error(), bad[i].needle), "bad load %zu: %s",
                  i, dg_last_error());
        cr_assert_eq(dg_lr_scheduler_epoch(c), 7);
    }
    dg_clear_error();
    cr_assert_null(dg_lr_scheduler_state_name(c, 1));
    cr_assert_null(dg_lr_scheduler_state_tensor(c, -1));
    dg_clear_error();
    dg_lr_scheduler_free(c);

    /* the plateau's counters load, and the next metric continues from them */
    dg_lr_scheduler *a = dg_reduce_lr_on_plateau(f.opt, dg_reduce_lr_on_plateau_default_params());
    dg_reduce_lr_on_plateau_params pp = dg_reduce_lr_on_plateau_default_params();
    dg_lr_scheduler *b = dg_reduce_lr_on_plateau(f.opt, pp);
    static const char *want[] = { "epoch", "best", "num_bad_epochs", "cooldown_counter" };
    for (int i = 0; i < 4; i++) cr_assert_str_eq(dg_lr_scheduler_state_name(a, i), want[i]);
    cr_assert(isinf(dg_item(dg_lr_scheduler_state_tensor(a, 1))), "best starts at +inf in min mode");
    cr_assert_eq(dg_dtype_of(dg_lr_scheduler_state_tensor(a, 1)), DG_F64);
    for (int k = 0; k < 5; k++) cr_assert_eq(dg_lr_scheduler_step_metric(a, k == 0 ? 1.0 : 2.0), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(dg_lr_scheduler_load_state(b, want[i], dg_lr_scheduler_state_tensor(a, i)), 0, "%s", dg_last_error());
    cr_assert_eq(dg_item(dg_lr_scheduler_state_tensor(b, 1)), 1.0);
    cr_assert_eq(dg_item(dg_lr_scheduler_state_tensor(b, 2)), 4);
    cr_assert_eq(dg_lr_scheduler_epoch(b), 5);
    cr_assert_eq(dg_lr_scheduler_load_state(b, "best", dg_scalar(NAN, DG_F64)), DG_EINVAL);
    dg_clear_error();
    dg_lr_scheduler_free(a);
    dg_lr_scheduler_free(b);
    dg_scope_end(sc);
    lr_teardown(f);
}
