/* test/test_params_literal.c — the one rule for params structs (core.h, DG_PARAMS_TAG; issue
 * 30.3): a struct that did not start from its dg_*_default_params() — a {0} or designated
 * initialiser literal — is refused by every function that takes it, with an error naming that
 * default function, and nothing is made. Every params struct of include/ appears below
 * (tools/check_params.py, run by `make test`, checks that none is missing), each passed to each
 * function that takes it; then the literals a ported program wrote, and the same calls from the
 * defaults succeeding. */
#include "test_util.h"
#include <dygraph/checkpoint.h>
#include <dygraph/onnx.h>
#include <dygraph/extension.h>
#include <unistd.h>

static int g_checked;

/* The call returned NULL (or a negative status) and the message names the default function. */
static void refused(const char *what, bool failed, const char *default_fn) {
    cr_expect(failed, "%s: a literal was accepted", what);
    cr_expect(strstr(dg_last_error(), default_fn), "%s: the error does not name %s: '%s'", what, default_fn, dg_last_error());
    dg_clear_error();
    g_checked++;
}
#define REFUSED_INT(call, S) do { int r_ = (call); refused(#call, r_ < 0, #S "_default_params"); } while (0)
#define REFUSED_PTR(call, S) do { const void *r_ = (call); refused(#call, r_ == NULL, #S "_default_params"); } while (0)
#define LIT(S) ((S##_params){ 0 })

Test(params_literal, every_params_struct_is_refused_as_a_literal) {
    dg_tensor *p = dg_ones(DG_SHAPE(3), DG_F32), *p2 = dg_ones(DG_SHAPE(3), DG_F32);
    dg_set_requires_grad(p, true);
    dg_set_requires_grad(p2, true);
    dg_tensor *x4 = dg_ones(DG_SHAPE(1, 2, 4, 4), DG_F32), *w4 = dg_ones(DG_SHAPE(2, 2, 3, 3), DG_F32);
    dg_tensor *x3 = dg_ones(DG_SHAPE(1, 2, 8), DG_F32), *w3 = dg_ones(DG_SHAPE(2, 2, 3), DG_F32);
    dg_tensor *logits = dg_ones(DG_SHAPE(2, 3), DG_F32), *label = dg_zeros(DG_SHAPE(2), DG_I64);
    dg_tensor *probs = dg_full(DG_SHAPE(2, 3), 0.5, DG_F32), *target = dg_zeros(DG_SHAPE(2, 3), DG_F32);
    dg_tensor *rm = dg_zeros(DG_SHAPE(2), DG_F32), *rv = dg_ones(DG_SHAPE(2), DG_F32);
    dg_tensor *ids = dg_zeros(DG_SHAPE(2), DG_I64), *table = dg_ones(DG_SHAPE(5, 3), DG_F32);
    dg_sgd_params sp = dg_sgd_default_params();
    dg_optimizer *opt = dg_sgd(&p, 1, sp);
    cr_assert(opt);
    dg_layer *lin = dg_nn_linear(3, 2);
    cr_assert(lin);

    /* optimizers */
    REFUSED_PTR(dg_sgd(&p2, 1, LIT(dg_sgd)), dg_sgd);
    REFUSED_PTR(dg_momentum(&p2, 1, LIT(dg_momentum)), dg_momentum);
    REFUSED_PTR(dg_adagrad(&p2, 1, LIT(dg_adagrad)), dg_adagrad);
    REFUSED_PTR(dg_adam(&p2, 1, LIT(dg_adam)), dg_adam);
    REFUSED_PTR(dg_adamw(&p2, 1, LIT(dg_adamw)), dg_adamw);
    REFUSED_PTR(dg_rmsprop(&p2, 1, LIT(dg_rmsprop)), dg_rmsprop);
    REFUSED_PTR(dg_adamax(&p2, 1, LIT(dg_adamax)), dg_adamax);
    REFUSED_PTR(dg_nadam(&p2, 1, LIT(dg_nadam)), dg_nadam);
    REFUSED_PTR(dg_adadelta(&p2, 1, LIT(dg_adadelta)), dg_adadelta);
    REFUSED_PTR(dg_lbfgs(&p2, 1, LIT(dg_lbfgs)), dg_lbfgs);
    REFUSED_INT(dg_optimizer_add_param_group(opt, &p2, 1, LIT(dg_param_group)), dg_param_group);
    cr_expect_eq(dg_optimizer_num_groups(opt), 1, "a refused group was added");
    REFUSED_INT(dg_amp_params_check("amp", LIT(dg_amp)), dg_amp);
    REFUSED_PTR(dg_amp_decorate(opt, LIT(dg_amp)), dg_amp);

    /* schedulers (the warm-up and SequentialLR own their children even when refused) */
    REFUSED_PTR(dg_step_lr(opt, LIT(dg_step_lr)), dg_step_lr);
    REFUSED_PTR(dg_multi_step_lr(opt, LIT(dg_multi_step_lr)), dg_multi_step_lr);
    REFUSED_PTR(dg_exponential_lr(opt, LIT(dg_exponential_lr)), dg_exponential_lr);
    REFUSED_PTR(dg_cosine_annealing_lr(opt, LIT(dg_cosine_annealing_lr)), dg_cosine_annealing_lr);
    REFUSED_PTR(dg_piecewise_lr(opt, LIT(dg_piecewise_lr)), dg_piecewise_lr);
    REFUSED_PTR(dg_lambda_lr(opt, LIT(dg_lambda_lr)), dg_lambda_lr);
    REFUSED_PTR(dg_polynomial_decay_lr(opt, LIT(dg_polynomial_decay_lr)), dg_polynomial_decay_lr);
    REFUSED_PTR(dg_one_cycle_lr(opt, LIT(dg_one_cycle_lr)), dg_one_cycle_lr);
    REFUSED_PTR(dg_reduce_lr_on_plateau(opt, LIT(dg_reduce_lr_on_plateau)), dg_reduce_lr_on_plateau);
    dg_exponential_lr_params ep = dg_exponential_lr_default_params();
    ep.gamma = 0.9;
    REFUSED_PTR(dg_linear_warmup_lr(NULL, dg_exponential_lr(opt, ep), LIT(dg_linear_warmup_lr)), dg_linear_warmup_lr);
    dg_lr_scheduler *kids[2] = { dg_exponential_lr(opt, ep), dg_exponential_lr(opt, ep) };
    dg_sequential_lr_params seq = LIT(dg_sequential_lr);
    seq.schedulers = kids, seq.n_schedulers = 2, seq.milestones = (int[]){ 3 }, seq.n_milestones = 1;
    REFUSED_PTR(dg_sequential_lr(opt, seq), dg_sequential_lr);

    /* autograd, autocast, init */
    dg_tensor *loss = dg_sum_all(dg_mul(p, p));
    REFUSED_INT(dg_backward_ext(loss, LIT(dg_backward)), dg_backward);
    cr_expect_null(dg_grad(p), "a refused backward left a gradient");
    REFUSED_INT(dg_autocast_begin_ext(LIT(dg_autocast)), dg_autocast);
    dg_init_params ip = LIT(dg_init);
    REFUSED_INT(dg_init(&ip), dg_init);
    REFUSED_INT(dg_profiler_start(LIT(dg_profiler)), dg_profiler);
    cr_assert(!dg_profiler_enabled(), "a refused profiler_start records");

    /* ops */
    REFUSED_PTR(dg_conv2d(x4, w4, NULL, LIT(dg_conv2d)), dg_conv2d);
    REFUSED_PTR(dg_conv2d_relu_nograd(x4, w4, NULL, LIT(dg_conv2d)), dg_conv2d);
    REFUSED_PTR(dg_conv_transpose2d(x4, w4, NULL, LIT(dg_conv_transpose2d)), dg_conv_transpose2d);
    REFUSED_PTR(dg_conv1d(x3, w3, NULL, LIT(dg_conv1d)), dg_conv1d);
    REFUSED_PTR(dg_max_pool2d(x4, LIT(dg_pool2d)), dg_pool2d);
    REFUSED_PTR(dg_avg_pool2d(x4, LIT(dg_pool2d)), dg_pool2d);
    dg_tensor *idx = NULL;
    REFUSED_PTR(dg_max_pool2d_with_indices(x4, LIT(dg_pool2d), &idx), dg_pool2d);
    REFUSED_PTR(dg_max_pool1d(x3, LIT(dg_pool1d)), dg_pool1d);
    REFUSED_PTR(dg_avg_pool1d(x3, LIT(dg_pool1d)), dg_pool1d);
    REFUSED_PTR(dg_max_pool1d_with_indices(x3, LIT(dg_pool1d), &idx), dg_pool1d);
    REFUSED_PTR(dg_batch_norm(x4, rm, rv, NULL, NULL, LIT(dg_batch_norm)), dg_batch_norm);
    REFUSED_PTR(dg_batch_norm_relu(x4, rm, rv, NULL, NULL, LIT(dg_batch_norm)), dg_batch_norm);
    REFUSED_PTR(dg_dropout_ext(x4, LIT(dg_dropout)), dg_dropout);
    REFUSED_PTR(dg_dropout2d_ext(x4, LIT(dg_dropout)), dg_dropout);
    REFUSED_PTR(dg_embedding(ids, table, LIT(dg_embedding)), dg_embedding);
    REFUSED_PTR(dg_cross_entropy_ext(logits, label, LIT(dg_cross_entropy)), dg_cross_entropy);
    REFUSED_PTR(dg_nll_loss_ext(logits, label, LIT(dg_nll_loss)), dg_nll_loss);
    REFUSED_PTR(dg_binary_cross_entropy(probs, target, LIT(dg_bce)), dg_bce);
    REFUSED_PTR(dg_binary_cross_entropy_with_logits_ext(probs, target, LIT(dg_bce)), dg_bce);

    /* layers, init, models */
    REFUSED_PTR(dg_nn_linear_ext(3, 2, LIT(dg_nn_linear)), dg_nn_linear);
    REFUSED_PTR(dg_nn_conv2d(2, 2, 3, LIT(dg_nn_conv2d)), dg_nn_conv2d);
    REFUSED_PTR(dg_nn_conv1d(2, 2, 3, LIT(dg_nn_conv2d)), dg_nn_conv2d);
    REFUSED_PTR(dg_nn_conv_transpose2d(2, 2, 3, LIT(dg_nn_conv_transpose2d)), dg_nn_conv_transpose2d);
    REFUSED_PTR(dg_nn_max_pool2d(2, LIT(dg_nn_pool2d)), dg_nn_pool2d);
    REFUSED_PTR(dg_nn_avg_pool2d(2, LIT(dg_nn_pool2d)), dg_nn_pool2d);
    REFUSED_PTR(dg_nn_max_pool1d(LIT(dg_pool1d)), dg_pool1d);
    REFUSED_PTR(dg_nn_avg_pool1d(LIT(dg_pool1d)), dg_pool1d);
    REFUSED_PTR(dg_nn_batch_norm1d(2, LIT(dg_nn_batch_norm)), dg_nn_batch_norm);
    REFUSED_PTR(dg_nn_batch_norm2d(2, LIT(dg_nn_batch_norm)), dg_nn_batch_norm);
    REFUSED_PTR(dg_nn_sync_batch_norm(2, LIT(dg_nn_batch_norm), NULL), dg_nn_batch_norm);
    REFUSED_PTR(dg_nn_embedding(5, 3, LIT(dg_nn_embedding)), dg_nn_embedding);
    REFUSED_PTR(dg_nn_layer_norm(DG_SHAPE(3), LIT(dg_nn_layer_norm)), dg_nn_layer_norm);
    REFUSED_PTR(dg_nn_group_norm(1, 2, LIT(dg_nn_layer_norm)), dg_nn_layer_norm);
    REFUSED_PTR(dg_nn_dropout_ext(LIT(dg_nn_dropout)), dg_nn_dropout);
    REFUSED_PTR(dg_nn_dropout2d_ext(LIT(dg_nn_dropout)), dg_nn_dropout);
    REFUSED_PTR(dg_nn_cross_entropy_loss(LIT(dg_cross_entropy)), dg_cross_entropy);
    REFUSED_PTR(dg_nn_rnn(DG_RNN_LSTM, 3, 2, LIT(dg_nn_rnn)), dg_nn_rnn);
    REFUSED_PTR(dg_nn_rnn_cell(DG_RNN_GRU, 3, 2, LIT(dg_nn_rnn)), dg_nn_rnn);
    {
        dg_rnn_result rr;
        dg_tensor *xs = dg_ones(DG_SHAPE(2, 1, 3), DG_F32), *wi = dg_ones(DG_SHAPE(8, 3), DG_F32), *wh = dg_ones(DG_SHAPE(8, 2), DG_F32);
        REFUSED_INT(dg_rnn(xs, NULL, NULL, wi, wh, NULL, NULL, NULL, LIT(dg_rnn), &rr), dg_rnn);
        dg_tensor_free(xs);
        dg_tensor_free(wi);
        dg_tensor_free(wh);
    }
    REFUSED_INT(dg_nn_init_kaiming_uniform_(w4, LIT(dg_nn_kaiming)), dg_nn_kaiming);
    REFUSED_INT(dg_nn_init_kaiming_normal_(w4, LIT(dg_nn_kaiming)), dg_nn_kaiming);
    REFUSED_PTR(dg_resnet18(LIT(dg_resnet)), dg_resnet);
    REFUSED_PTR(dg_resnet34(LIT(dg_resnet)), dg_resnet);
    REFUSED_PTR(dg_resnet50(LIT(dg_resnet)), dg_resnet);
    REFUSED_PTR(dg_resnet(DG_RESNET_BASIC, (const int[4]){ 1, 1, 1, 1 }, LIT(dg_resnet)), dg_resnet);

    /* checkpoints, export */
    dg_tensor_dict *d = dg_tensor_dict_new();
    REFUSED_INT(dg_layer_load_dict(lin, d, LIT(dg_load), NULL), dg_load);
    REFUSED_INT(dg_layer_load(lin, "/nonexistent.safetensors", LIT(dg_load), NULL), dg_load);
    char path[] = "/tmp/dg_params_literal_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    unlink(path);
    REFUSED_INT(dg_onnx_export(lin, logits, path, LIT(dg_onnx_export)), dg_onnx_export);
    cr_expect_neq(access(path, F_OK), 0, "a refused export wrote %s", path);

    /* data, dist */
    REFUSED_PTR(dg_batch_sampler_new(10, LIT(dg_batch_sampler)), dg_batch_sampler);
    REFUSED_PTR(dg_distributed_batch_sampler_new(10, LIT(dg_distributed_batch_sampler)), dg_distributed_batch_sampler);
    REFUSED_PTR(dg_dataloader_new(NULL, LIT(dg_dataloader)), dg_dataloader);
    REFUSED_PTR(dg_store_new(LIT(dg_store)), dg_store);
    REFUSED_PTR(dg_comm_new(LIT(dg_comm)), dg_comm);
    REFUSED_PTR(dg_data_parallel(lin, NULL, LIT(dg_dp)), dg_dp);
    REFUSED_PTR(dg_fleet_sparse_embedding(3, LIT(dg_fleet_sparse)), dg_fleet_sparse);

    cr_log_info("params_literal: %d calls refused a literal\n", g_checked);
    dg_tensor_dict_free(d);
    dg_layer_free(lin);
    dg_optimizer_free(opt);
    dg_tensor *all[] = { p, p2, x4, w4, x3, w3, logits, label, probs, target, rm, rv, ids, table };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) dg_tensor_free(all[i]);
    dg_tensor_free(loss);
}

/* The literals a ported program wrote first (issue 30.3): Adam and SGD given only the learning
 * rate. Refused, so no step runs with betas, eps and the clip norm 0 (NaN) or every gradient
 * scaled by 0 (no learning); from the defaults they train. */
Test(params_literal, the_ported_programs_literals_are_refused_and_the_defaults_train) {
    dg_tensor *w = dg_full(DG_SHAPE(4), 2.0, DG_F32);
    dg_set_requires_grad(w, true);
    cr_assert_null(dg_adam(&w, 1, (dg_adam_params){ .lr = 1e-2 }));
    cr_expect(strstr(dg_last_error(), "adam: the params were not made by dg_adam_default_params()"), "%s", dg_last_error());
    cr_assert_null(dg_sgd(&w, 1, (dg_sgd_params){ .lr = 0.1 }));
    cr_expect(strstr(dg_last_error(), "dg_sgd_default_params()"), "%s", dg_last_error());
    dg_clear_error();

    dg_adam_params ap = dg_adam_default_params();
    ap.lr = 1e-2;
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.1;
    dg_optimizer *opts[2] = { dg_adam(&w, 1, ap), NULL };
    cr_assert(opts[0], "%s", dg_last_error());
    for (int k = 0; k < 2; k++) {
        if (k == 1) {
            dg_optimizer_free(opts[0]);
            opts[1] = dg_sgd(&w, 1, sp);
            cr_assert(opts[1], "%s", dg_last_error());
        }
        double first = 0, last = 0;
        for (int step = 0; step < 20; step++) {
            dg_scope *s = dg_scope_begin();
            dg_tensor *loss = dg_sum_all(dg_mul(w, w));
            if (step == 0) first = dg_item(loss);
            last = dg_item(loss);
            cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
            cr_assert_eq(dg_optimizer_step(opts[k]), 0, "%s", dg_last_error());
            dg_optimizer_clear_grad(opts[k]);
            dg_scope_end(s);
        }
        cr_expect(isfinite(last) && last < first, "%s: loss %g -> %g", k ? "sgd" : "adam", first, last);
    }
    dg_optimizer_free(opts[1]);
    dg_tensor_free(w);
}

/* dg_nn_batch_norm_settings gives params that make the same layer again: they carry the tag. */
Test(params_literal, settings_read_back_are_params_of_their_own) {
    dg_layer *bn = dg_nn_batch_norm2d(3, dg_nn_batch_norm_default_params());
    dg_nn_batch_norm_params got;
    int64_t c = 0;
    cr_assert_eq(dg_nn_batch_norm_settings(bn, &got, &c), 0);
    dg_layer *again = dg_nn_batch_norm2d(c, got);
    cr_assert(again, "%s", dg_last_error());
    dg_layer_free(again);
    dg_layer_free(bn);
}

/* A zero that is wrong for a field, set on params from the defaults: the constructor's error
 * names the default function, as dg_init's does. */
Test(params_literal, constructor_errors_name_their_default_function) {
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    cp.stride = 0;
    cr_expect_null(dg_nn_conv2d(2, 2, 3, cp));
    cr_expect(strstr(dg_last_error(), "dg_nn_conv2d_default_params()"), "%s", dg_last_error());
    cr_expect_null(dg_nn_conv1d(2, 2, 3, cp));
    cr_expect(strstr(dg_last_error(), "dg_nn_conv2d_default_params()"), "%s", dg_last_error());
    dg_nn_conv_transpose2d_params tp = dg_nn_conv_transpose2d_default_params();
    tp.dilation = 0;
    cr_expect_null(dg_nn_conv_transpose2d(2, 2, 3, tp));
    cr_expect(strstr(dg_last_error(), "dg_nn_conv_transpose2d_default_params()"), "%s", dg_last_error());
    dg_nn_batch_norm_params bp = dg_nn_batch_norm_default_params();
    bp.eps = 0;
    cr_expect_null(dg_nn_batch_norm2d(4, bp));
    cr_expect(strstr(dg_last_error(), "dg_nn_batch_norm_default_params()"), "%s", dg_last_error());
    dg_nn_pool2d_params pp = dg_nn_pool2d_default_params();
    pp.dilation = 0;   /* no longer read as 1: fields are taken literally */
    cr_expect_null(dg_nn_max_pool2d(2, pp));
    cr_expect(strstr(dg_last_error(), "dg_nn_pool2d_default_params()"), "%s", dg_last_error());
    dg_pool1d_params p1 = dg_pool1d_default_params();
    p1.kernel = 0;
    cr_expect_null(dg_nn_max_pool1d(p1));
    cr_expect(strstr(dg_last_error(), "dg_pool1d_default_params()"), "%s", dg_last_error());
    dg_pool2d_params op = dg_pool2d_default_params();
    op.kernel[0] = op.kernel[1] = 2;
    op.dilation[0] = 0;
    dg_tensor *x = dg_ones(DG_SHAPE(1, 1, 4, 4), DG_F32);
    cr_expect_null(dg_max_pool2d(x, op));
    cr_expect(strstr(dg_last_error(), "dilation must be >= 1"), "%s", dg_last_error());
    dg_tensor_free(x);
}
