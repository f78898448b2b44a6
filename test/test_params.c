/* test/test_params.c — params structs are taken literally: a zero is a zero (AdamW without
 * decay, cross-entropy over axis 0, a batch norm that keeps its running statistics, a clip norm
 * of 0), the dg_*_default_params() functions return the documented PyTorch/Paddle defaults,
 * out-of-range fields are errors naming the field, and the positive booleans (bias, affine,
 * track_running_stats, strict) do what they say. */
#include "test_util.h"
#include <dygraph/checkpoint.h>
#include <unistd.h>

/* Two parameters trained `steps` steps by opt on a fixed quadratic loss; returns 0 or fails. */
static void train_steps(dg_optimizer *opt, dg_tensor *const *ps, int steps) {
    for (int k = 0; k < steps; k++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *loss = dg_add(dg_sum_all(dg_mul(ps[0], ps[0])), dg_sum_all(dg_mul_scalar(ps[1], 3.0)));
        cr_assert(loss && dg_backward(loss) == 0, "step %d: %s", k, dg_last_error());
        cr_assert_eq(dg_optimizer_step(opt), 0, "step %d: %s", k, dg_last_error());
        dg_optimizer_clear_grad(opt);
        dg_scope_end(s);
    }
}

static void make_pair(dg_tensor **ps, uint64_t seed) {
    dg_manual_seed(seed);
    ps[0] = dg_randn(DG_SHAPE(4, 3), DG_F32);
    ps[1] = dg_randn(DG_SHAPE(5), DG_F32);
    dg_set_requires_grad(ps[0], true);
    dg_set_requires_grad(ps[1], true);
}

static bool bit_identical(const dg_tensor *a, const dg_tensor *b) {
    return dg_numel(a) == dg_numel(b) && dg_dtype_of(a) == dg_dtype_of(b) &&
           memcmp(dg_data(a), dg_data(b), (size_t)dg_numel(a) * dg_dtype_size(dg_dtype_of(a))) == 0;
}

Test(params, adamw_weight_decay_0_is_adam_bit_for_bit) {
    dg_tensor *a[2], *w[2], *d[2];
    make_pair(a, 3);
    make_pair(w, 3);
    make_pair(d, 3);
    dg_adam_params ap = dg_adam_default_params();
    ap.lr = 0.05;
    dg_adamw_params wp = dg_adamw_default_params();
    wp.lr = 0.05;
    wp.weight_decay = 0;   /* a legal zero, not "the default" */
    dg_adamw_params dp = dg_adamw_default_params();
    dp.lr = 0.05;          /* default decay 0.01 */
    dg_optimizer *adam = dg_adam(a, 2, ap), *adamw = dg_adamw(w, 2, wp), *decayed = dg_adamw(d, 2, dp);
    cr_assert(adam && adamw && decayed, "%s", dg_last_error());
    train_steps(adam, a, 7);
    train_steps(adamw, w, 7);
    train_steps(decayed, d, 7);
    for (int i = 0; i < 2; i++) {
        cr_assert(bit_identical(a[i], w[i]), "parameter %d: AdamW with weight_decay 0 differs from Adam", i);
        cr_assert(!bit_identical(a[i], d[i]), "parameter %d: the default decay (0.01) must change the values", i);
    }
    dg_optimizer_free(adam);
    dg_optimizer_free(adamw);
    dg_optimizer_free(decayed);
    for (int i = 0; i < 2; i++) { dg_tensor_free(a[i]); dg_tensor_free(w[i]); dg_tensor_free(d[i]); }
}

Test(params, grad_clip_norm_0_clips_to_0_and_infinity_never_clips) {
    dg_tensor *z[2], *n[2], *r[2];
    make_pair(z, 4);
    make_pair(n, 4);
    make_pair(r, 4);
    dg_sgd_params zp = dg_sgd_default_params(), np = dg_sgd_default_params(), rp = dg_sgd_default_params();
    zp.lr = np.lr = rp.lr = 0.1;
    zp.grad_clip_norm = 0;           /* every gradient scaled to 0: nothing moves */
    np.grad_clip_norm = INFINITY;    /* the default: no clipping */
    dg_optimizer *oz = dg_sgd(z, 2, zp), *on = dg_sgd(n, 2, np), *orf = dg_sgd(r, 2, rp);
    cr_assert(oz && on && orf, "%s", dg_last_error());
    dg_tensor *z0 = dg_clone(z[0]);
    train_steps(oz, z, 2);
    train_steps(on, n, 2);
    train_steps(orf, r, 2);
    cr_assert(bit_identical(z[0], z0), "grad_clip_norm 0 must leave the parameter as it was");
    cr_assert(!bit_identical(n[0], z0), "without clipping the parameter moves");
    cr_assert(bit_identical(n[0], r[0]) && bit_identical(n[1], r[1]), "INFINITY is the default");
    dg_tensor_free(z0);
    dg_optimizer_free(oz);
    dg_optimizer_free(on);
    dg_optimizer_free(orf);
    for (int i = 0; i < 2; i++) { dg_tensor_free(z[i]); dg_tensor_free(n[i]); dg_tensor_free(r[i]); }
}

Test(params, momentum_0_is_plain_sgd) {
    dg_tensor *m[2], *s[2];
    make_pair(m, 5);
    make_pair(s, 5);
    dg_momentum_params mp = dg_momentum_default_params();
    mp.lr = 0.1;
    mp.momentum = 0;   /* buf = grad every step: SGD */
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.1;
    dg_optimizer *om = dg_momentum(m, 2, mp), *os = dg_sgd(s, 2, sp);
    cr_assert(om && os, "%s", dg_last_error());
    train_steps(om, m, 4);
    train_steps(os, s, 4);
    for (int i = 0; i < 2; i++) cr_assert(bit_identical(m[i], s[i]), "parameter %d: momentum 0 differs from SGD", i);
    dg_optimizer_free(om);
    dg_optimizer_free(os);
    for (int i = 0; i < 2; i++) { dg_tensor_free(m[i]); dg_tensor_free(s[i]); }
}

Test(params, cross_entropy_axis_0_on_class_major_input) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(6);
    dg_tensor *logits = dg_randn(DG_SHAPE(5, 3), DG_F64);   /* [C = 5, N = 3]: classes first */
    dg_tensor *label = dg_from_data(DG_SHAPE(3), DG_I64, (int64_t[]){ 4, 0, 2 });
    dg_cross_entropy_params p = dg_cross_entropy_default_params();
    p.axis = 0;
    dg_tensor *got = dg_cross_entropy_ext(logits, label, p);
    cr_assert(got, "axis 0: %s", dg_last_error());
    /* the same loss over the [N, C] transpose with the default axis (-1) */
    dg_tensor *want = dg_cross_entropy(dg_contiguous(dg_transpose(logits, 0, 1)), label);
    cr_assert(want, "%s", dg_last_error());
    cr_assert(fabs(dg_item(got) - dg_item(want)) < 1e-12, "axis 0 %.17g, transposed %.17g", dg_item(got), dg_item(want));
    /* by hand: mean over columns n of logsumexp(x[:, n]) - x[label[n], n] */
    const double *x = dg_data(logits);
    const int64_t lab[3] = { 4, 0, 2 };
    double ref = 0;
    for (int n = 0; n < 3; n++) {
        double mx = -INFINITY, se = 0;
        for (int c = 0; c < 5; c++) mx = fmax(mx, x[c * 3 + n]);
        for (int c = 0; c < 5; c++) se += exp(x[c * 3 + n] - mx);
        ref += mx + log(se) - x[lab[n] * 3 + n];
    }
    cr_assert(fabs(dg_item(got) - ref / 3) < 1e-12, "axis 0 %.17g, by hand %.17g", dg_item(got), ref / 3);
    /* the loss layer takes the same params */
    dg_layer *ce = dg_nn_cross_entropy_loss(p);
    cr_assert(fabs(dg_item(dg_loss_forward(ce, logits, label)) - ref / 3) < 1e-12, "%s", dg_last_error());
    dg_layer_free(ce);
    dg_scope_end(s);
}

/* running stats of a training batch-norm step, through the layer and through the op */
Test(params, batch_norm_momentum_0_keeps_running_stats) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(7);
    dg_tensor *x = dg_add_scalar(dg_mul_scalar(dg_randn(DG_SHAPE(8, 3, 2, 2), DG_F32), 3.0), 1.5);
    dg_nn_batch_norm_params p = dg_nn_batch_norm_default_params();
    p.momentum = 0;
    dg_layer *bn = dg_nn_batch_norm2d(3, p);
    cr_assert(bn, "%s", dg_last_error());
    dg_tensor *rm = dg_layer_buffer(bn, "running_mean"), *rv = dg_layer_buffer(bn, "running_var");
    dg_tensor *rm0 = dg_clone(rm), *rv0 = dg_clone(rv);
    for (int k = 0; k < 3; k++) cr_assert(dg_forward(bn, x), "%s", dg_last_error());
    cr_assert(bit_identical(rm, rm0) && bit_identical(rv, rv0), "momentum 0 must keep the running statistics");
    cr_assert_eq(dg_item(dg_layer_buffer(bn, "num_batches_tracked")), 3, "the batch count still advances");
    char *repr = dg_layer_to_string(bn);
    cr_assert(strstr(repr, "momentum=0,"), "%s", repr);
    free(repr);
    /* the default (0.1) moves them */
    dg_layer *bn_default = dg_nn_batch_norm2d(3, dg_nn_batch_norm_default_params());
    cr_assert(dg_forward(bn_default, x));
    cr_assert(!bit_identical(dg_layer_buffer(bn_default, "running_mean"), rm0), "momentum 0.1 updates the mean");
    /* the functional op, too */
    dg_tensor *m = dg_zeros(DG_SHAPE(3), DG_F32), *v = dg_ones(DG_SHAPE(3), DG_F32);
    dg_batch_norm_params bp = dg_batch_norm_default_params();
    bp.training = true;
    bp.momentum = 0;
    cr_assert(dg_batch_norm(x, m, v, NULL, NULL, bp), "%s", dg_last_error());
    cr_assert(bit_identical(m, rm0) && bit_identical(v, rv0), "dg_batch_norm with momentum 0 changed the stats");
    dg_layer_free(bn);
    dg_layer_free(bn_default);
    dg_scope_end(s);
}

/* strict = false loads what matches and reports the rest; the default (strict) loads nothing */
Test(params, load_strict_false_loads_a_partial_state) {
    char path[] = "/tmp/dg_params_partialXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    dg_manual_seed(8);
    dg_layer *small = dg_nn_sequential(1, dg_nn_linear(4, 3));            /* 0.weight, 0.bias */
    cr_assert_eq(dg_layer_save(small, path), 0, "%s", dg_last_error());
    dg_manual_seed(9);
    dg_layer *big = dg_nn_sequential(2, dg_nn_linear(4, 3), dg_nn_linear(3, 2));   /* + 1.weight, 1.bias */
    dg_tensor *w1 = dg_clone(dg_layer_parameter(big, "1.weight"));
    dg_load_report r;
    cr_assert_neq(dg_layer_load(big, path, dg_load_default_params(), &r), 0, "the default is strict");
    cr_assert(strstr(dg_last_error(), "1.weight") && strstr(dg_last_error(), "strict = false"), "%s", dg_last_error());
    cr_assert(!bit_identical(dg_layer_parameter(big, "0.weight"), dg_layer_parameter(small, "0.weight")),
              "a failed strict load changes nothing");
    dg_clear_error();
    dg_load_params lp = dg_load_default_params();
    cr_assert(lp.strict, "strict by default");
    lp.strict = false;
    cr_assert_eq(dg_layer_load(big, path, lp, &r), 0, "%s", dg_last_error());
    cr_assert_eq(r.loaded, 2);
    cr_assert_eq(r.missing, 2);
    cr_assert_eq(r.unexpected, 0);
    cr_assert(bit_identical(dg_layer_parameter(big, "0.weight"), dg_layer_parameter(small, "0.weight")));
    cr_assert(bit_identical(dg_layer_parameter(big, "0.bias"), dg_layer_parameter(small, "0.bias")));
    cr_assert(bit_identical(dg_layer_parameter(big, "1.weight"), w1), "a missing entry keeps its value");
    dg_tensor_free(w1);
    dg_layer_free(small);
    dg_layer_free(big);
    unlink(path);
}

Test(params, positive_booleans) {
    dg_nn_linear_params lp = dg_nn_linear_default_params();
    cr_assert(lp.bias && lp.dtype == DG_F32);
    lp.bias = false;
    dg_layer *l = dg_nn_linear_ext(3, 2, lp);
    cr_assert(l && !dg_layer_parameter(l, "bias") && dg_layer_parameter(l, "weight"));
    dg_layer_free(l);
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    cp.bias = false;
    dg_layer *c = dg_nn_conv2d(2, 4, 3, cp);
    cr_assert(c && !dg_layer_parameter(c, "bias"));
    dg_layer_free(c);
    dg_nn_batch_norm_params bp = dg_nn_batch_norm_default_params();
    cr_assert(bp.affine && bp.track_running_stats);
    bp.affine = false;
    bp.track_running_stats = false;
    dg_layer *bn = dg_nn_batch_norm1d(4, bp);
    int n = -1;
    dg_named_tensor *sd = dg_layer_state_dict(bn, &n);
    cr_assert(bn && sd && n == 0, "no affine parameters and no running statistics: %d entries", n);
    free(sd);
    dg_layer_free(bn);
}

/* The values the headers document. */
Test(params, defaults_are_documented_values) {
    dg_adam_params a = dg_adam_default_params();
    cr_assert(a.lr == 1e-3 && a.beta1 == 0.9 && a.beta2 == 0.999 && a.eps == 1e-8 && a.weight_decay == 0 &&
              isinf(a.grad_clip_norm));
    dg_adamw_params w = dg_adamw_default_params();
    cr_assert(w.lr == 1e-3 && w.beta1 == 0.9 && w.beta2 == 0.999 && w.eps == 1e-8 && w.weight_decay == 0.01);
    dg_sgd_params s = dg_sgd_default_params();
    cr_assert(s.lr == 1e-3 && s.weight_decay == 0 && isinf(s.grad_clip_norm));
    dg_momentum_params m = dg_momentum_default_params();
    cr_assert(m.lr == 1e-3 && m.momentum == 0.9 && !m.nesterov);
    dg_adagrad_params g = dg_adagrad_default_params();
    cr_assert(g.lr == 1e-2 && g.eps == 1e-10 && g.lr_decay == 0 && g.initial_accumulator_value == 0);
    dg_cross_entropy_params ce = dg_cross_entropy_default_params();
    cr_assert(ce.axis == -1 && ce.ignore_index == -100 && ce.reduction == DG_REDUCE_MEAN && !ce.use_ignore_index);
    dg_conv2d_params cv = dg_conv2d_default_params();
    cr_assert(cv.stride[0] == 1 && cv.stride[1] == 1 && cv.dilation[0] == 1 && cv.dilation[1] == 1 && cv.groups == 1 &&
              cv.padding[0] == 0 && cv.padding[1] == 0);
    dg_pool2d_params pl = dg_pool2d_default_params();
    cr_assert(pl.stride[0] == DG_STRIDE_KERNEL && pl.stride[1] == DG_STRIDE_KERNEL && !pl.count_include_pad);
    dg_batch_norm_params b = dg_batch_norm_default_params();
    cr_assert(!b.training && b.momentum == 0.1 && b.eps == 1e-5);
    dg_nn_batch_norm_params nb = dg_nn_batch_norm_default_params();
    cr_assert(nb.momentum == 0.1 && nb.eps == 1e-5 && nb.affine && nb.track_running_stats && !nb.cumulative_average);
    dg_nn_conv2d_params nc = dg_nn_conv2d_default_params();
    cr_assert(nc.stride == 1 && nc.dilation == 1 && nc.groups == 1 && nc.padding == 0 && nc.bias);
    cr_assert_eq(dg_nn_pool2d_default_params().stride, DG_STRIDE_KERNEL);
    dg_nn_kaiming_params k = dg_nn_kaiming_default_params();
    cr_assert(k.a == 0 && k.mode == DG_FAN_IN && k.nonlinearity == DG_NONLIN_LEAKY_RELU);
    cr_assert_eq(dg_resnet_default_params().num_classes, 1000);
    dg_init_params ip = dg_init_default_params();
    cr_assert(!ip.device && ip.num_threads == DG_FROM_ENV && ip.seed == DG_DEFAULT_SEED);
    cr_assert(dg_load_default_params().strict);
    dg_backward_params bw = dg_backward_default_params();
    cr_assert(!bw.grad_output && !bw.retain_graph);
    dg_batch_sampler_params bs = dg_batch_sampler_default_params();
    cr_assert(bs.batch_size == 1 && !bs.shuffle && !bs.drop_last);
    dg_distributed_batch_sampler_params ds = dg_distributed_batch_sampler_default_params();
    cr_assert(ds.batch_size == 1 && ds.num_replicas == DG_FROM_ENV && ds.rank == DG_FROM_ENV && ds.seed == 0);
    dg_dataloader_params dl = dg_dataloader_default_params();
    cr_assert(dl.batch_size == 1 && dl.num_workers == 0 && dl.prefetch_factor == 2 && !dl.sampler);
    cr_assert(dg_store_default_params().timeout_s == DG_FROM_ENV && dg_comm_default_params().timeout_s == DG_FROM_ENV);
    cr_assert_eq(dg_comm_default_params().kind, DG_COMM_AUTO);
    dg_dp_params dp = dg_dp_default_params();
    cr_assert(dp.bucket_mb == 25 && dp.first_bucket_mb == 1 && !dp.overlap && !dp.find_unused_parameters);
    dg_fleet_strategy fs = dg_fleet_default_strategy();
    cr_assert(fs.fuse_grad_size_in_MB == 25 && fs.first_bucket_mb == 1 && !fs.overlap);
    cr_assert(dg_step_lr_default_params().gamma == 0.1 && dg_step_lr_default_params().base_lr == DG_LR_FROM_OPTIMIZER);
    cr_assert(dg_multi_step_lr_default_params().gamma == 0.1);
    cr_assert(dg_cosine_annealing_lr_default_params().eta_min == 0);
    dg_linear_warmup_lr_params wu = dg_linear_warmup_lr_default_params();
    cr_assert(wu.start_lr == 0 && wu.end_lr == DG_LR_FROM_OPTIMIZER && wu.lr == DG_LR_FROM_OPTIMIZER);
    cr_assert(dg_exponential_lr_default_params().base_lr == DG_LR_FROM_OPTIMIZER);
    cr_assert(!dg_piecewise_lr_default_params().values);
    /* torch's defaults for the later optimizers and schedulers, Paddle's for PolynomialDecay */
    cr_assert(m.dampening == 0 && !a.amsgrad && !w.amsgrad);
    dg_rmsprop_params r = dg_rmsprop_default_params();
    cr_assert(r.lr == 1e-2 && r.alpha == 0.99 && r.eps == 1e-8 && r.weight_decay == 0 && r.momentum == 0 && !r.centered &&
              isinf(r.grad_clip_norm));
    dg_adamax_params x = dg_adamax_default_params();
    cr_assert(x.lr == 2e-3 && x.beta1 == 0.9 && x.beta2 == 0.999 && x.eps == 1e-8 && x.weight_decay == 0 &&
              isinf(x.grad_clip_norm));
    dg_nadam_params n = dg_nadam_default_params();
    cr_assert(n.lr == 2e-3 && n.beta1 == 0.9 && n.beta2 == 0.999 && n.eps == 1e-8 && n.weight_decay == 0 &&
              n.momentum_decay == 4e-3 && isinf(n.grad_clip_norm));
    dg_param_group_params pg = dg_param_group_default_params();
    cr_assert(pg.lr == DG_OPTIMIZER_DEFAULT && pg.weight_decay == DG_OPTIMIZER_DEFAULT);
    dg_lambda_lr_params la = dg_lambda_lr_default_params();
    cr_assert(la.base_lr == DG_LR_FROM_OPTIMIZER && !la.fn && !la.user);
    dg_polynomial_decay_lr_params po = dg_polynomial_decay_lr_default_params();
    cr_assert(po.base_lr == DG_LR_FROM_OPTIMIZER && po.decay_steps == 0 && po.end_lr == 1e-4 && po.power == 1.0 && !po.cycle);
    dg_one_cycle_lr_params oc = dg_one_cycle_lr_default_params();
    cr_assert(oc.max_lr == 0 && oc.total_steps == 0 && oc.pct_start == 0.3 && oc.anneal_strategy == DG_ANNEAL_COS &&
              oc.cycle_momentum && oc.base_momentum == 0.85 && oc.max_momentum == 0.95 && oc.div_factor == 25 &&
              oc.final_div_factor == 1e4 && !oc.three_phase);
    dg_reduce_lr_on_plateau_params rp = dg_reduce_lr_on_plateau_default_params();
    cr_assert(rp.mode == DG_PLATEAU_MIN && rp.factor == 0.1 && rp.patience == 10 && rp.threshold == 1e-4 &&
              rp.threshold_mode == DG_THRESHOLD_REL && rp.cooldown == 0 && rp.min_lr == 0 && rp.eps == 1e-8);
    dg_sequential_lr_params sq = dg_sequential_lr_default_params();
    cr_assert(!sq.schedulers && sq.n_schedulers == 0 && !sq.milestones && sq.n_milestones == 0);
}

/* Zeros that make no sense are refused with the field's name, not taken as "the default". */
Test(params, out_of_range_fields_are_errors) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *p = dg_ones(DG_SHAPE(2), DG_F32);
    dg_set_requires_grad(p, true);
    dg_adam_params a = dg_adam_default_params();
    a.lr = -1e-3;
    cr_assert_null(dg_adam(&p, 1, a));
    expect_error_contains("adam lr < 0", "adam", "lr");
    a = dg_adam_default_params();
    a.eps = -1;
    cr_assert_null(dg_adam(&p, 1, a));
    expect_error_contains("adam eps < 0", "adam", "eps");
    dg_sgd_params sg = dg_sgd_default_params();
    sg.grad_clip_norm = NAN;
    cr_assert_null(dg_sgd(&p, 1, sg));
    expect_error_contains("sgd clip NaN", "sgd", "grad_clip_norm");
    dg_rmsprop_params rm = dg_rmsprop_default_params();
    rm.alpha = 1.5;
    cr_assert_null(dg_rmsprop(&p, 1, rm));
    expect_error_contains("rmsprop alpha 1.5", "rmsprop", "alpha");
    dg_nadam_params na = dg_nadam_default_params();
    na.momentum_decay = NAN;
    cr_assert_null(dg_nadam(&p, 1, na));
    expect_error_contains("nadam momentum_decay NaN", "nadam", "momentum_decay");
    dg_momentum_params mo = dg_momentum_default_params();
    mo.dampening = -0.5;
    cr_assert_null(dg_momentum(&p, 1, mo));
    expect_error_contains("momentum dampening < 0", "momentum", "dampening");
    /* a zero that is a value: a group's lr 0 is 0, not "the optimizer's" (DG_OPTIMIZER_DEFAULT is) */
    dg_optimizer *o = dg_sgd(&p, 1, dg_sgd_default_params());
    dg_tensor *q = dg_ones(DG_SHAPE(2), DG_F32);
    dg_set_requires_grad(q, true);
    dg_param_group_params gp = dg_param_group_default_params();
    gp.lr = 0;
    cr_assert_eq(dg_optimizer_add_param_group(o, &q, 1, gp), 0);
    cr_assert_eq(dg_optimizer_get_group_lr(o, 1), 0, "lr 0 is 0, not the optimizer's default");
    gp.lr = -1e-3;
    cr_assert_eq(dg_optimizer_add_param_group(o, &q, 1, gp), DG_EINVAL);
    expect_error_contains("group lr < 0", "sgd", "lr");
    dg_optimizer_free(o);
    dg_one_cycle_lr_params oc = dg_one_cycle_lr_default_params();
    oc.total_steps = 100;
    cr_assert_null(dg_one_cycle_lr(NULL, oc));
    expect_error_contains("one cycle max_lr 0", "one_cycle_lr", "max_lr");

    dg_nn_batch_norm_params b = dg_nn_batch_norm_default_params();
    b.eps = 0;
    cr_assert_null(dg_nn_batch_norm2d(3, b));
    expect_error_contains("bn eps 0", "BatchNorm2d", "eps > 0");
    b = dg_nn_batch_norm_default_params();
    b.momentum = 1.5;
    cr_assert_null(dg_nn_batch_norm1d(3, b));
    expect_error_contains("bn momentum 1.5", "BatchNorm1d", "momentum in [0, 1]");
    b.momentum = -0.1;
    cr_assert_null(dg_nn_batch_norm1d(3, b));
    expect_error_contains("bn momentum -0.1", "BatchNorm1d", "momentum in [0, 1]");

    dg_tensor *x = dg_ones(DG_SHAPE(1, 2, 5, 5), DG_F32), *w = dg_ones(DG_SHAPE(3, 2, 3, 3), DG_F32);
    dg_conv2d_params cv = dg_conv2d_default_params();
    cv.stride[1] = 0;
    cr_assert_null(dg_conv2d(x, w, NULL, cv));
    expect_error_contains("conv stride 0", "conv2d", "stride >= 1");
    cv = dg_conv2d_default_params();
    cv.groups = 0;
    cr_assert_null(dg_conv2d(x, w, NULL, cv));
    expect_error_contains("conv groups 0", "conv2d", "groups");
    dg_nn_conv2d_params nc = dg_nn_conv2d_default_params();
    nc.dilation = 0;
    cr_assert_null(dg_nn_conv2d(2, 3, 3, nc));
    expect_error_contains("Conv2d dilation 0", "Conv2d", "dilation 0");
    dg_pool2d_params pl = dg_pool2d_default_params();
    pl.kernel[0] = pl.kernel[1] = 2;
    pl.stride[0] = 0;
    cr_assert_null(dg_max_pool2d(x, pl));
    expect_error_contains("pool stride 0", "max_pool2d", "stride");
    pl.stride[0] = DG_STRIDE_KERNEL;
    cr_assert_eq(dg_dim(dg_max_pool2d(x, pl), 2), 2, "DG_STRIDE_KERNEL strides by the kernel: %s", dg_last_error());
    dg_nn_pool2d_params np = dg_nn_pool2d_default_params();
    np.stride = 0;
    cr_assert_null(dg_nn_avg_pool2d(2, np));
    expect_error_contains("AvgPool2d stride 0", "AvgPool2d", "stride");

    dg_batch_sampler_params bs = dg_batch_sampler_default_params();
    bs.batch_size = 0;
    cr_assert_null(dg_batch_sampler_new(10, bs));
    expect_error_contains("batch_size 0", "batch_sampler_new", "batch_size");
    dg_distributed_batch_sampler_params ds = dg_distributed_batch_sampler_default_params();
    ds.num_replicas = 0;
    cr_assert_null(dg_distributed_batch_sampler_new(10, ds));
    expect_error_contains("num_replicas 0", "distributed_batch_sampler_new", "num_replicas");
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = 0;
    cr_assert_null(dg_resnet18(rp));
    expect_error_contains("resnet num_classes 0", "ResNet", "num_classes >= 1");
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = 0;
    cr_assert_eq(dg_init(&ip), DG_EINVAL);
    expect_error_contains("init num_threads 0", "init", "num_threads");
    dg_dp_params dp = dg_dp_default_params();
    dp.bucket_mb = 0;
    cr_assert_null(dg_data_parallel(dg_nn_linear(2, 2), NULL, dp));   /* the params are checked first */
    expect_error_contains("dp bucket_mb 0", "data_parallel", "bucket_mb");
    dg_fleet_strategy fs = dg_fleet_default_strategy();
    fs.fuse_grad_size_in_MB = 0;
    cr_assert_lt(dg_fleet_init(true, &fs), 0);
    expect_error_contains("fleet bucket 0", "fleet_init", "fuse_grad_size_in_MB");
    fs = dg_fleet_default_strategy();
    cr_assert_eq(fs.timeout_s, DG_FROM_ENV);
    fs.timeout_s = 0;
    cr_assert_lt(dg_fleet_init(true, &fs), 0);
    expect_error_contains("fleet timeout 0", "fleet_init", "timeout_s");
    dg_step_lr_params sl = dg_step_lr_default_params();
    sl.step_size = 2;
    sl.base_lr = -0.5;
    cr_assert_null(dg_step_lr(NULL, sl));
    expect_error_contains("step_lr base_lr", "step_lr", "base_lr");
    cr_assert_eq(dg_nn_init_xavier_uniform_(dg_ones(DG_SHAPE(3, 3), DG_F32), -1), DG_EINVAL);
    expect_error_contains("xavier gain", "xavier", "gain");
    dg_scope_end(s);
}

/* gain 0 is a gain of 0 (the old API read it as 1) */
Test(params, xavier_gain_0_is_zero) {
    dg_tensor *w = dg_ones(DG_SHAPE(4, 5), DG_F32);
    cr_assert_eq(dg_nn_init_xavier_uniform_(w, 0), 0, "%s", dg_last_error());
    const float *v = dg_data(w);
    for (int i = 0; i < 20; i++) cr_assert_eq(v[i], 0.0f);
    dg_tensor_free(w);
}
