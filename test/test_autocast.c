/* test/test_autocast.c — autocast regions (Paddle's white and black lists, custom lists, nesting,
 * errors), gradients through the recorded casts, and O2: a model in bf16 with its normalisation
 * layers in f32, stepped through f32 master weights. */
#include "test_util.h"
#include <dygraph/extension.h>
#include <unistd.h>

static dg_tensor *leaf(dg_shape s) {
    dg_tensor *t = dg_randn(s, DG_F32);
    dg_set_requires_grad(t, true);
    return t;
}

Test(autocast, white_ops_run_low_black_ops_run_f32_the_rest_follow) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 8, 8), DG_F32), *w = leaf(DG_SHAPE(4, 3, 3, 3)), *b = leaf(DG_SHAPE(4));
    dg_tensor *lw = leaf(DG_SHAPE(5, 256)), *lb = leaf(DG_SHAPE(5));
    cr_assert_eq(dg_autocast_begin(DG_BF16), 0, "%s", dg_last_error());
    cr_expect(dg_autocast_enabled() && dg_autocast_dtype() == DG_BF16);
    dg_tensor *c = dg_conv2d(x, w, b, dg_conv2d_default_params());
    cr_assert(c, "%s", dg_last_error());
    cr_expect_eq(dg_dtype_of(c), DG_BF16, "conv2d (white) runs in bf16");
    dg_tensor *r = dg_relu(c);
    cr_expect_eq(dg_dtype_of(r), DG_BF16, "relu follows its bf16 input");
    cr_expect_eq(dg_dtype_of(dg_add(r, dg_sum(c, (int[]){ 0 }, 1, true))), DG_F32,
                 "bf16 + the f32 sum (black) promotes to f32");
    dg_tensor *h = dg_linear(dg_reshape(dg_pad(r, (int64_t[]){ 1, 1, 1, 1 }, 4, DG_PAD_CONSTANT, 0), DG_SHAPE(2, 256)), lw, lb);
    cr_assert(h, "%s", dg_last_error());
    cr_expect_eq(dg_dtype_of(h), DG_BF16, "linear (white) casts input, weight and bias");
    cr_expect_eq(dg_dtype_of(dg_matmul(x, x)), DG_BF16, "matmul (white)");
    cr_expect_eq(dg_dtype_of(dg_exp(c)), DG_F32, "exp (black)");
    cr_expect_eq(dg_dtype_of(dg_softmax(h, -1)), DG_F32, "softmax (black)");
    cr_expect_eq(dg_dtype_of(dg_mean_all(h)), DG_F32, "mean (black)");
    dg_tensor *lbl = dg_from_data(DG_SHAPE(2), DG_I64, (int64_t[]){ 1, 3 });
    dg_tensor *loss = dg_cross_entropy(h, lbl);
    cr_expect_eq(dg_dtype_of(loss), DG_F32, "cross_entropy (black)");
    cr_expect_eq(dg_dtype_of(dg_matmul(dg_cast(x, DG_F64), dg_cast(x, DG_F64))), DG_F64, "float64 is never cast");
    /* backward inside the region: every gradient has its tensor's dtype; f32 leaves get f32 */
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    cr_expect(dg_grad(w) && dg_dtype_of(dg_grad(w)) == DG_F32 && dg_dtype_of(dg_grad(lw)) == DG_F32 && dg_dtype_of(dg_grad(lb)) == DG_F32);
    cr_assert_eq(dg_autocast_end(), 0);
    cr_expect(!dg_autocast_enabled() && dg_autocast_dtype() == DG_F32);
    cr_expect_eq(dg_dtype_of(dg_conv2d(x, w, b, dg_conv2d_default_params())), DG_F32, "outside the region nothing is cast");
    dg_scope_end(s);
}

/* The gradients of f32 parameters through bf16 convolutions are those of f32 within bf16 precision. */
Test(autocast, gradients_match_f32_within_bf16_precision) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(4, 16, 10, 10), DG_F32), *w = leaf(DG_SHAPE(32, 16, 3, 3));
    dg_tensor *g[2];
    for (int k = 0; k < 2; k++) {
        if (k) cr_assert_eq(dg_autocast_begin(DG_BF16), 0);
        dg_tensor *loss = dg_mean_all(dg_mul(dg_conv2d(x, w, NULL, dg_conv2d_default_params()), dg_conv2d(x, w, NULL, dg_conv2d_default_params())));
        if (k) cr_assert_eq(dg_autocast_end(), 0);
        cr_assert(loss, "%s", dg_last_error());
        dg_clear_grad(w);
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        g[k] = dg_clone(dg_grad(w));
    }
    double m = dg_item(dg_max(dg_abs(g[0]), NULL, 0, false)), e = dg_item(dg_max(dg_abs(dg_sub(g[0], g[1])), NULL, 0, false));
    cr_expect(e <= 0.03 * m, "bf16 weight gradient off by %g of the largest %g", e / m, m);
    cr_expect(e > 0, "autocast changed nothing: bf16 did not run");
    dg_scope_end(s);
}

Test(autocast, custom_lists_nesting_and_errors) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(2, 3, 8, 8), DG_F32), *w = dg_randn(DG_SHAPE(4, 3, 3, 3), DG_F32);
    dg_autocast_params p = dg_autocast_default_params();
    cr_expect_eq(p.dtype, DG_BF16);
    const char *white[] = { "relu" }, *black[] = { "conv2d" };
    p.custom_white_list = white; p.n_white = 1;
    p.custom_black_list = black; p.n_black = 1;
    cr_assert_eq(dg_autocast_begin_ext(p), 0, "%s", dg_last_error());
    cr_expect_eq(dg_dtype_of(dg_relu(x)), DG_BF16, "relu moved to the white list");
    cr_expect_eq(dg_dtype_of(dg_conv2d(dg_cast(x, DG_BF16), w, NULL, dg_conv2d_default_params())), DG_F32, "conv2d moved to the black list");
    cr_assert_eq(dg_autocast_begin(DG_F16), 0);   /* nested: the inner region's rules */
    cr_expect_eq(dg_dtype_of(dg_conv2d(x, w, NULL, dg_conv2d_default_params())), DG_F16);
    cr_expect_eq(dg_dtype_of(dg_relu(x)), DG_F32, "the inner region has the default lists");
    cr_assert_eq(dg_autocast_end(), 0);
    cr_expect_eq(dg_autocast_dtype(), DG_BF16);
    cr_assert_eq(dg_autocast_end(), 0);
    cr_expect_neq(dg_autocast_end(), 0, "end without a region");
    cr_expect(strstr(dg_last_error(), "no autocast region"), "%s", dg_last_error());
    cr_expect_neq(dg_autocast_begin(DG_F32), 0);
    cr_expect(strstr(dg_last_error(), "float16 or bfloat16"), "%s", dg_last_error());
    const char *bad[] = { "conv3d" };
    p = dg_autocast_default_params();
    p.custom_white_list = bad; p.n_white = 1;
    cr_expect_neq(dg_autocast_begin_ext(p), 0);
    cr_expect(strstr(dg_last_error(), "'conv3d'") && strstr(dg_last_error(), "conv2d"), "%s", dg_last_error());
    p.custom_white_list = white; p.custom_black_list = white; p.n_black = 1;
    cr_expect_neq(dg_autocast_begin_ext(p), 0);
    cr_expect(strstr(dg_last_error(), "both"), "%s", dg_last_error());
    cr_expect(!dg_autocast_enabled(), "a refused region is not opened");
    dg_clear_error();
    dg_scope_end(s);
}

/* O2: conv and linear parameters in bf16, batch norm's in f32, the counter an integer; Adam
 * steps f32 master copies, and the bf16 parameters are their rounding. Training follows f32. */
Test(autocast, o2_master_weights_follow_f32_training) {
    dg_layer *net[2];
    dg_optimizer *opt[2];
    double loss[2][8];
    for (int k = 0; k < 2; k++) {
        dg_manual_seed(3);
        dg_resnet_params rp = dg_resnet_default_params();
        rp.num_classes = 10;
        net[k] = dg_resnet18(rp);
        cr_assert(net[k], "%s", dg_last_error());
        if (k) cr_assert_eq(dg_layer_to_dtype(net[k], DG_BF16, true), 0, "%s", dg_last_error());
        int n;
        dg_tensor **ps = dg_layer_parameters(net[k], &n);
        dg_adam_params ap = dg_adam_default_params();
        ap.lr = 1e-4;   /* slow enough that the two runs stay comparable step by step */
        opt[k] = dg_adam(ps, n, ap);
        free(ps);
        cr_assert(opt[k], "%s", dg_last_error());
    }
    dg_named_tensor *st = dg_layer_state_dict(net[1], NULL);
    for (int i = 0; st[i].name; i++) {
        dg_dtype want = strstr(st[i].name, "num_batches_tracked") ? DG_I64 : strstr(st[i].name, "bn") || strstr(st[i].name, "downsample.1") ? DG_F32 : DG_BF16;
        cr_expect_eq(dg_dtype_of(st[i].tensor), want, "%s is %s", st[i].name, dg_dtype_name(dg_dtype_of(st[i].tensor)));
    }
    free(st);
    dg_manual_seed(5);
    dg_tensor *x = dg_randn(DG_SHAPE(4, 3, 32, 32), DG_F32), *y = dg_from_data(DG_SHAPE(4), DG_I64, (int64_t[]){ 1, 2, 3, 4 });
    for (int k = 0; k < 2; k++)
        for (int step = 0; step < 8; step++) {
            dg_scope *s = dg_scope_begin();
            if (k) dg_autocast_begin(DG_BF16);
            dg_tensor *l = dg_cross_entropy(dg_forward(net[k], x), y);
            if (k) dg_autocast_end();
            cr_assert(l, "%s", dg_last_error());
            loss[k][step] = dg_item(l);
            cr_assert_eq(dg_backward(l), 0, "%s", dg_last_error());
            cr_assert_eq(dg_optimizer_step(opt[k]), 0, "%s", dg_last_error());
            dg_optimizer_clear_grad(opt[k]);
            dg_scope_end(s);
        }
    /* the first loss is the same model's (weights rounded to bf16); after that a batch of 4 is
     * fitted in a few steps by both, along trajectories that rounding separates */
    cr_expect(fabs(loss[1][0] - loss[0][0]) < 0.05 * loss[0][0], "first loss: O2 %g, f32 %g", loss[1][0], loss[0][0]);
    cr_expect(loss[1][7] < loss[1][0] / 4 && loss[0][7] < loss[0][0] / 4, "both fit the batch: O2 %g -> %g, f32 %g -> %g",
              loss[1][0], loss[1][7], loss[0][0], loss[0][7]);
    for (int k = 0; k < 2; k++) { dg_optimizer_free(opt[k]); dg_layer_free(net[k]); }
}

/* The point of master weights: SGD updates far below half a bf16 step of the weight (1e-4 per
 * step on weights near 0.5, whose bf16 spacing is 2^-8) are lost on a bf16 parameter but add
 * up in the f32 master copy, so after 60 steps the bf16 parameter is the f32 run's, rounded. */
Test(autocast, master_weights_keep_updates_below_bf16_precision) {
    dg_tensor *w[2];
    dg_optimizer *opt[2];
    for (int k = 0; k < 2; k++) {
        w[k] = dg_full(DG_SHAPE(64), 0.5, k ? DG_BF16 : DG_F32);
        dg_set_requires_grad(w[k], true);
        dg_sgd_params sp = dg_sgd_default_params();
        sp.lr = 1e-4;
        opt[k] = dg_sgd(&w[k], 1, sp);
        cr_assert(opt[k], "%s", dg_last_error());
        for (int step = 0; step < 60; step++) {
            dg_scope *s = dg_scope_begin();
            cr_assert_eq(dg_backward(dg_sum_all(w[k])), 0, "%s", dg_last_error());   /* gradient 1 everywhere */
            cr_assert_eq(dg_optimizer_step(opt[k]), 0, "%s", dg_last_error());
            dg_optimizer_clear_grad(opt[k]);
            dg_scope_end(s);
        }
    }
    double f32 = dg_item(dg_max(w[0], NULL, 0, false)), bf = dg_item(dg_max(dg_cast(w[1], DG_F32), NULL, 0, false));
    cr_expect(fabs(f32 - 0.494) < 1e-6, "f32: %g", f32);
    cr_expect_eq(dg_dtype_of(w[1]), DG_BF16);
    cr_expect(bf < 0.5 && fabs(bf - f32) <= 0x1p-9, "bf16 parameter %.6f, f32 run %.6f: the updates were lost", bf, f32);
    for (int k = 0; k < 2; k++) { dg_optimizer_free(opt[k]); dg_tensor_free(w[k]); }
}

/* The master weights are state: 30 SGD steps of 1e-4 on bf16 weights near 0.5 (each far below
 * the bf16 spacing there), the optimizer saved, 30 more; a fresh parameter and optimizer loaded
 * from the files end bit for bit where the uninterrupted run ends. Without "0.master_weight" the
 * copy would restart from the rounded parameter and lose the first 30 steps' progress. */
Test(autocast, master_weights_are_saved_and_resumed) {
    char op[] = "/tmp/dg_master_opt_XXXXXX";
    close(mkstemp(op));
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 1e-4;
    dg_tensor *w = dg_full(DG_SHAPE(64), 0.5, DG_BF16);
    dg_set_requires_grad(w, true);
    dg_optimizer *opt = dg_sgd(&w, 1, sp);
    cr_assert(opt, "%s", dg_last_error());
    dg_tensor *w30 = NULL;
    for (int step = 0; step < 60; step++) {
        if (step == 30) {
            cr_assert_eq(dg_optimizer_state_count(opt), 2, "lr and the master weights: %d", dg_optimizer_state_count(opt));
            cr_expect_str_eq(dg_optimizer_state_name(opt, 1), "0.master_weight");
            cr_expect_eq(dg_dtype_of(dg_optimizer_state_tensor(opt, 1)), DG_F32);
            cr_assert_eq(dg_optimizer_save(opt, op), 0, "%s", dg_last_error());
            dg_no_grad_begin();
            w30 = dg_keep(dg_clone(w));
            dg_no_grad_end();
        }
        dg_scope *s = dg_scope_begin();
        cr_assert_eq(dg_backward(dg_sum_all(w)), 0, "%s", dg_last_error());
        cr_assert_eq(dg_optimizer_step(opt), 0, "%s", dg_last_error());
        dg_optimizer_clear_grad(opt);
        dg_scope_end(s);
    }
    for (int with_master = 1; with_master >= 0; with_master--) {
        dg_tensor *v = dg_keep(dg_clone(w30));   /* w30 needs no grad: v is a leaf */
        dg_set_requires_grad(v, true);
        dg_optimizer *o2 = dg_sgd(&v, 1, sp);
        cr_assert(o2, "%s", dg_last_error());
        dg_tensor_dict *d = dg_load_safetensors(op), *e = dg_tensor_dict_new();
        cr_assert(d && e, "%s", dg_last_error());
        for (int k = 0; k < dg_tensor_dict_size(d); k++)
            if (with_master || strcmp(dg_tensor_dict_name(d, k), "0.master_weight") != 0)
                cr_assert_eq(dg_tensor_dict_set(e, dg_tensor_dict_name(d, k), dg_tensor_dict_tensor(d, k)), 0);
        cr_assert_eq(dg_optimizer_load_dict(o2, e), 0, "%s", dg_last_error());
        dg_tensor_dict_free(d);
        dg_tensor_dict_free(e);
        for (int step = 30; step < 60; step++) {
            dg_scope *s = dg_scope_begin();
            cr_assert_eq(dg_backward(dg_sum_all(v)), 0, "%s", dg_last_error());
            cr_assert_eq(dg_optimizer_step(o2), 0, "%s", dg_last_error());
            dg_optimizer_clear_grad(o2);
            dg_scope_end(s);
        }
        uint16_t a[64], b[64];
        cr_assert_eq(dg_to_host(w, a, sizeof a), 0);
        cr_assert_eq(dg_to_host(v, b, sizeof b), 0);
        if (with_master) cr_expect(memcmp(a, b, sizeof a) == 0, "the resumed run differs from the uninterrupted one");
        else cr_expect(memcmp(a, b, sizeof a) != 0, "without its master weights the resume should have lost progress");
        dg_optimizer_free(o2);
        dg_tensor_free(v);
    }
    /* a float32 parameter has no master weights to load */
    dg_tensor *f = dg_zeros(DG_SHAPE(64), DG_F32);
    dg_set_requires_grad(f, true);
    dg_optimizer *of = dg_sgd(&f, 1, sp);
    cr_expect_neq(dg_optimizer_load_state(of, "0.master_weight", w), 0);
    cr_expect(strstr(dg_last_error(), "only float16/bfloat16 parameters keep float32 master weights"), "%s", dg_last_error());
    dg_clear_error();
    dg_optimizer_free(of);
    dg_tensor_free(f);
    dg_optimizer_free(opt);
    dg_tensor_free(w);
    dg_tensor_free(w30);
    unlink(op);
}

Test(autocast, layer_to_dtype_refuses_what_is_not_a_float_type) {
    dg_layer *l = dg_nn_linear(3, 2);
    cr_expect_neq(dg_layer_to_dtype(l, DG_I32, false), 0);
    cr_expect(strstr(dg_last_error(), "int32 is not a float dtype"), "%s", dg_last_error());
    cr_assert_eq(dg_layer_to_dtype(l, DG_F16, false), 0, "%s", dg_last_error());
    dg_tensor **ps = dg_layer_parameters(l, NULL);
    cr_expect(dg_dtype_of(ps[0]) == DG_F16 && dg_dtype_of(ps[1]) == DG_F16 && dg_requires_grad(ps[0]));
    free(ps);
    dg_clear_error();
    dg_layer_free(l);
}
