/* test/test_lr_scheduler_errors.c — bad input to every LR scheduler (step, multi-step,
 * exponential, cosine, warm-up, piecewise, lambda, polynomial decay, one-cycle, sequential,
 * plateau): each is refused naming the field, and nothing is made. */
#include "test_util.h"

#define EXPECT_NULL(expr, needle) do { dg_clear_error(); dg_lr_scheduler *s_ = (expr);                        \
        cr_assert_null(s_, "%s should fail", #expr); dg_lr_scheduler_free(s_);                              \
        cr_assert(strstr(dg_last_error(), needle), "%s: message '%s' lacks '%s'", #expr, dg_last_error(), needle); } while (0)

Test(lr_scheduler, bad_input) {
    dg_tensor *p = dg_zeros(DG_SHAPE(1), DG_F32);
    dg_set_requires_grad(p, true);
    dg_sgd_params sgdp3 = dg_sgd_default_params();
    sgdp3.lr = 0.1;
    dg_optimizer *o = dg_sgd(&p, 1, sgdp3);
    int ms[] = { 3 }, bad_b[] = { 5, 3 }, good_b[] = { 3, 8 };
    double v[] = { 0.1, -0.2, 0.3 };
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
    dg_optimizer_free(o);
    dg_tensor_free(p);
}

/* ---- bad input to the new schedulers -------------------------------------------------------- */

static double bad_lambda(int64_t e, void *user) { (void)user; return e < 3 ? 1.0 : NAN; }

Test(lr_scheduler, bad_input_new_schedulers) {
    dg_tensor *p = dg_zeros(DG_SHAPE(1), DG_F32);
    dg_set_requires_grad(p, true);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.1;
    dg_optimizer *o = dg_sgd(&p, 1, sp), *o2 = dg_sgd(&p, 1, sp);
    dg_momentum_params mp = dg_momentum_default_params();
    dg_optimizer *om = dg_momentum(&p, 1, mp);
    EXPECT_NULL(dg_lambda_lr(o, dg_lambda_lr_default_params()), "fn is NULL");
    dg_polynomial_decay_lr_params pd = dg_polynomial_decay_lr_default_params();
    EXPECT_NULL(dg_polynomial_decay_lr(o, pd), "decay_steps");
    pd.decay_steps = 5;
    pd.power = 0;
    EXPECT_NULL(dg_polynomial_decay_lr(o, pd), "power");
    pd.power = 1;
    pd.end_lr = -1;
    EXPECT_NULL(dg_polynomial_decay_lr(o, pd), "end_lr");
    pd.end_lr = 0;
    EXPECT_NULL(dg_polynomial_decay_lr(NULL, pd), "base_lr");
    dg_one_cycle_lr_params oc = dg_one_cycle_lr_default_params();
    oc.total_steps = 10;
    EXPECT_NULL(dg_one_cycle_lr(om, oc), "max_lr");
    oc.max_lr = 0.1;
    oc.total_steps = 0;
    EXPECT_NULL(dg_one_cycle_lr(om, oc), "total_steps");
    oc.total_steps = 10;
    oc.pct_start = 1.5;
    EXPECT_NULL(dg_one_cycle_lr(om, oc), "pct_start");
    oc.pct_start = 0.3;
    oc.div_factor = 0;
    EXPECT_NULL(dg_one_cycle_lr(om, oc), "div_factor");
    oc.div_factor = 25;
    oc.final_div_factor = -1;
    EXPECT_NULL(dg_one_cycle_lr(om, oc), "final_div_factor");
    oc.final_div_factor = 1e4;
    oc.anneal_strategy = (dg_anneal_strategy)7;
    EXPECT_NULL(dg_one_cycle_lr(om, oc), "anneal_strategy");
    oc.anneal_strategy = DG_ANNEAL_COS;
    oc.max_momentum = 1.0;
    EXPECT_NULL(dg_one_cycle_lr(om, oc), "max_momentum");
    oc.max_momentum = 0.95;
    EXPECT_NULL(dg_one_cycle_lr(o, oc), "sgd has no momentum");
    dg_reduce_lr_on_plateau_params rp = dg_reduce_lr_on_plateau_default_params();
    EXPECT_NULL(dg_reduce_lr_on_plateau(NULL, rp), "opt is NULL");
    rp.factor = 1.0;
    EXPECT_NULL(dg_reduce_lr_on_plateau(o, rp), "factor");
    rp = dg_reduce_lr_on_plateau_default_params();
    rp.patience = -1;
    EXPECT_NULL(dg_reduce_lr_on_plateau(o, rp), "patience");
    rp = dg_reduce_lr_on_plateau_default_params();
    rp.threshold_mode = (dg_threshold_mode)5;
    EXPECT_NULL(dg_reduce_lr_on_plateau(o, rp), "threshold_mode");
    rp = dg_reduce_lr_on_plateau_default_params();
    rp.mode = (dg_plateau_mode)3;
    EXPECT_NULL(dg_reduce_lr_on_plateau(o, rp), "mode");
    rp = dg_reduce_lr_on_plateau_default_params();
    rp.cooldown = -2;
    EXPECT_NULL(dg_reduce_lr_on_plateau(o, rp), "cooldown");
    rp = dg_reduce_lr_on_plateau_default_params();
    rp.min_lr = -1;
    EXPECT_NULL(dg_reduce_lr_on_plateau(o, rp), "min_lr");
    rp = dg_reduce_lr_on_plateau_default_params();
    rp.eps = NAN;
    EXPECT_NULL(dg_reduce_lr_on_plateau(o, rp), "eps");

    /* SequentialLR: counts, order, chaining a plateau, two optimizers; the children are freed
     * on every failure (LeakSanitizer checks) */
    dg_step_lr_params stp = dg_step_lr_default_params();
    stp.step_size = 2;
    dg_sequential_lr_params q = dg_sequential_lr_default_params();
    EXPECT_NULL(dg_sequential_lr(o, q), "schedulers is NULL");
    q.schedulers = (dg_lr_scheduler *[]){ dg_step_lr(o, stp), dg_step_lr(o, stp) };
    q.n_schedulers = 2;
    EXPECT_NULL(dg_sequential_lr(o, q), "n_milestones");
    q.schedulers = (dg_lr_scheduler *[]){ dg_step_lr(o, stp), dg_step_lr(o, stp), dg_step_lr(o, stp) };
    q.n_schedulers = 3;
    q.milestones = (int[]){ 5, 5 };
    q.n_milestones = 2;
    EXPECT_NULL(dg_sequential_lr(o, q), "ascending");
    q.schedulers = (dg_lr_scheduler *[]){ dg_step_lr(o, stp), dg_reduce_lr_on_plateau(o, dg_reduce_lr_on_plateau_default_params()) };
    q.n_schedulers = 2;
    q.milestones = (int[]){ 5 };
    q.n_milestones = 1;
    EXPECT_NULL(dg_sequential_lr(o, q), "cannot be chained");
    q.schedulers = (dg_lr_scheduler *[]){ dg_step_lr(o, stp), dg_step_lr(o2, stp) };
    EXPECT_NULL(dg_sequential_lr(NULL, q), "another optimizer");
    dg_lr_scheduler *same = dg_step_lr(o, stp);
    q.schedulers = (dg_lr_scheduler *[]){ same, same };
    EXPECT_NULL(dg_sequential_lr(o, q), "again");
    q.schedulers = (dg_lr_scheduler *[]){ dg_step_lr(o, stp), NULL };
    EXPECT_NULL(dg_sequential_lr(o, q), "scheduler 1 is NULL");
    /* a warm-up cannot wrap a plateau either */
    dg_linear_warmup_lr_params wp = dg_linear_warmup_lr_default_params();
    wp.warmup_steps = 3;
    EXPECT_NULL(dg_linear_warmup_lr(o, dg_reduce_lr_on_plateau(o, dg_reduce_lr_on_plateau_default_params()), wp),
                "cannot be chained");
    /* a one-cycle child of a sequence over an optimizer without momentum */
    dg_one_cycle_lr_params ocf = dg_one_cycle_lr_default_params();
    ocf.max_lr = 0.1;
    ocf.total_steps = 10;
    q.schedulers = (dg_lr_scheduler *[]){ dg_step_lr(o, stp), dg_one_cycle_lr(NULL, ocf) };
    EXPECT_NULL(dg_sequential_lr(o, q), "cycles the momentum");

    /* a lambda that refuses an epoch: the step fails and changes nothing */
    dg_lambda_lr_params lp = dg_lambda_lr_default_params();
    lp.fn = bad_lambda;
    dg_lr_scheduler *s = dg_lambda_lr(o, lp);
    cr_assert(s);
    for (int k = 0; k < 2; k++) cr_assert_eq(dg_lr_scheduler_step(s), 0);
    double lr = dg_optimizer_get_lr(o);
    dg_clear_error();
    cr_assert_eq(dg_lr_scheduler_step(s), DG_EINVAL);
    cr_assert(strstr(dg_last_error(), "lambda_lr") && strstr(dg_last_error(), "epoch 3"), "%s", dg_last_error());
    cr_assert_eq(dg_lr_scheduler_epoch(s), 2);
    cr_assert_eq(dg_optimizer_get_lr(o), lr);
    cr_assert_eq(dg_lr_scheduler_step_metric(s, 1.0), DG_EINVAL, "only a plateau scheduler takes a metric");
    cr_assert(strstr(dg_last_error(), "takes no metric"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert_lt(dg_lr_scheduler_step_metric(NULL, 1.0), 0);
    cr_assert(isnan(dg_lr_scheduler_get_momentum(NULL)));
    cr_assert_lt(dg_lr_scheduler_state_count(NULL), 0);
    dg_clear_error();
    dg_lr_scheduler_free(s);
    dg_optimizer_free(o);
    dg_optimizer_free(o2);
    dg_optimizer_free(om);
    dg_tensor_free(p);
}
