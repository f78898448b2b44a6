/* test/test_amp.c — dynamic loss scaling (dygraph/amp.h): Paddle's update_loss_scaling rule step by
 * step (counters, clamp at 1, growth only while finite), a skipped step leaving parameters and
 * optimizer state byte-identical, unscale-then-clip equal to unscaled training, the static mode,
 * bad parameters, the scaler's state alone and in the training checkpoint. */
#include "test_util.h"
#include <dygraph/checkpoint.h>
#include <unistd.h>

static dg_layer *net_seeded(uint64_t seed) {
    dg_manual_seed(seed);
    return dg_nn_sequential(3, dg_nn_linear(4, 6), dg_nn_tanh(), dg_nn_linear(6, 2));
}

static dg_optimizer *sgd_for(dg_layer *net) {
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.1;
    dg_optimizer *o = dg_sgd(p, n, sp);
    free(p);
    return o;
}

static dg_optimizer *adam_for(dg_layer *net) {
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    dg_adam_params ap = dg_adam_default_params();
    ap.lr = 0.01;
    dg_optimizer *o = dg_adam(p, n, ap);
    free(p);
    return o;
}

static dg_tensor *batch_loss(dg_layer *net, int k) {
    dg_manual_seed(500 + (uint64_t)k);
    dg_tensor *x = dg_randn(DG_SHAPE(8, 4), DG_F32), *y = dg_randn(DG_SHAPE(8, 2), DG_F32);
    return dg_mse_loss(dg_forward(net, x), y);
}

/* One scaled step; with inf, the first gradient element of the last parameter is set to inf
 * (nan: NaN) after backward. Returns what dg_amp_step returned. */
static int amp_step(dg_amp_scaler *sc, dg_layer *net, int k, double bad) {
    dg_optimizer *opt = dg_amp_optimizer(sc);
    dg_scope *s = dg_scope_begin();
    cr_assert_eq(dg_backward(dg_amp_scale_loss(sc, batch_loss(net, k))), 0, "%s", dg_last_error());
    if (bad != 0) {
        dg_tensor *g = dg_grad(dg_optimizer_param(opt, dg_optimizer_num_params(opt) - 1));
        ((float *)dg_data(g))[0] = (float)bad;
    }
    int rc = dg_amp_step(sc);
    cr_assert(rc >= 0, "%s", dg_last_error());
    dg_optimizer_clear_grad(opt);
    dg_scope_end(s);
    return rc;
}

static void expect_state(const dg_amp_scaler *sc, double scale, int good, int bad, const char *when) {
    cr_expect_eq(dg_amp_get_scale(sc), scale, "%s: scale %g, want %g", when, dg_amp_get_scale(sc), scale);
    cr_expect_eq(dg_amp_good_steps(sc), good, "%s: good %d, want %d", when, dg_amp_good_steps(sc), good);
    cr_expect_eq(dg_amp_bad_steps(sc), bad, "%s: bad %d, want %d", when, dg_amp_bad_steps(sc), bad);
}

Test(amp, defaults_are_paddles_decorate) {
    dg_amp_params p = dg_amp_default_params();
    cr_expect(p.init_loss_scaling == 32768.0 && p.use_dynamic_loss_scaling && p.incr_every_n_steps == 1000 &&
              p.decr_every_n_nan_or_inf == 2 && p.incr_ratio == 2.0 && p.decr_ratio == 0.8);
}

/* decr_every 2, incr_every 3: inf, ok, inf, inf, ok, ok, ok, NaN, NaN */
Test(amp, paddle_update_loss_scaling_sequence) {
    dg_layer *net = net_seeded(1);
    dg_optimizer *opt = sgd_for(net);
    dg_amp_params p = dg_amp_default_params();
    p.init_loss_scaling = 1024;
    p.incr_every_n_steps = 3;
    p.decr_every_n_nan_or_inf = 2;
    p.incr_ratio = 2.0;
    p.decr_ratio = 0.5;
    dg_amp_scaler *sc = dg_amp_decorate(opt, p);
    cr_assert(sc, "%s", dg_last_error());
    expect_state(sc, 1024, 0, 0, "new");
    cr_expect_eq(amp_step(sc, net, 0, INFINITY), 0, "an inf step is skipped");
    cr_expect(dg_amp_found_inf(sc));
    expect_state(sc, 1024, 0, 1, "inf 1");
    cr_expect_eq(amp_step(sc, net, 1, 0), 1);
    cr_expect(!dg_amp_found_inf(sc));
    expect_state(sc, 1024, 1, 0, "ok after one inf: bad resets, no decrease");
    cr_expect_eq(amp_step(sc, net, 2, INFINITY), 0);
    expect_state(sc, 1024, 0, 1, "inf after ok: good resets");
    cr_expect_eq(amp_step(sc, net, 3, -INFINITY), 0);
    expect_state(sc, 512, 0, 0, "two consecutive bad steps: scale * decr_ratio, bad resets");
    cr_expect_eq(amp_step(sc, net, 4, 0), 1);
    cr_expect_eq(amp_step(sc, net, 5, 0), 1);
    expect_state(sc, 512, 2, 0, "two good");
    cr_expect_eq(amp_step(sc, net, 6, 0), 1);
    expect_state(sc, 1024, 0, 0, "three good: scale * incr_ratio, good resets");
    cr_expect_eq(amp_step(sc, net, 7, NAN), 0, "NaN counts as inf");
    cr_expect_eq(amp_step(sc, net, 8, NAN), 0);
    expect_state(sc, 512, 0, 0, "two NaN steps");
    dg_amp_scaler_free(sc);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* decrease clamps at 1 (Paddle); an increase that is not finite in float32 keeps the scale, and
 * the good counter still resets */
Test(amp, clamps_at_one_and_never_grows_to_inf) {
    dg_layer *net = net_seeded(2);
    dg_optimizer *opt = sgd_for(net);
    dg_amp_params p = dg_amp_default_params();
    p.init_loss_scaling = 1.5;
    p.decr_every_n_nan_or_inf = 1;
    p.decr_ratio = 0.5;
    dg_amp_scaler *sc = dg_amp_decorate(opt, p);
    amp_step(sc, net, 0, INFINITY);
    expect_state(sc, 1.0, 0, 0, "1.5 * 0.5 clamps to 1");
    amp_step(sc, net, 1, INFINITY);
    expect_state(sc, 1.0, 0, 0, "stays 1");
    dg_amp_scaler_free(sc);

    p = dg_amp_default_params();
    p.init_loss_scaling = 3e38;
    p.incr_every_n_steps = 1;
    sc = dg_amp_decorate(opt, p);
    /* a tiny model: 3e38 * loss overflows the forward, so look at the rule on a zero loss */
    dg_scope *s = dg_scope_begin();
    dg_tensor *l = dg_mul_scalar(batch_loss(net, 0), 0.0);
    cr_assert_eq(dg_backward(dg_amp_scale_loss(sc, l)), 0, "%s", dg_last_error());
    cr_expect_eq(dg_amp_step(sc), 1, "%s", dg_last_error());
    dg_scope_end(s);
    expect_state(sc, (double)3e38f, 0, 0, "3e38 * 2 is not finite in float32: unchanged, good resets");
    dg_optimizer_clear_grad(opt);
    dg_amp_scaler_free(sc);
    dg_optimizer_free(opt);
    dg_layer_free(net);
}

static size_t state_bytes(dg_layer *net, dg_optimizer *opt, unsigned char **out) {
    size_t cap = 0, len = 0;
    unsigned char *buf = NULL;
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    int m = dg_optimizer_state_count(opt);
    for (int i = 0; i < n + m; i++) {
        dg_tensor *t = i < n ? p[i] : dg_optimizer_state_tensor(opt, i - n);
        size_t nb = (size_t)dg_numel(t) * dg_dtype_size(dg_dtype_of(t));
        if (len + nb > cap) buf = realloc(buf, cap = 2 * (len + nb));
        cr_assert_eq(dg_to_host(t, buf + len, nb), 0);
        len += nb;
    }
    free(p);
    *out = buf;
    return len;
}

Test(amp, skipped_step_leaves_parameters_and_adam_state_untouched) {
    dg_layer *net = net_seeded(3);
    dg_optimizer *opt = adam_for(net);
    dg_amp_scaler *sc = dg_amp_decorate(opt, dg_amp_default_params());
    cr_expect_eq(amp_step(sc, net, 0, 0), 1);   /* Adam has moments and a step count now */
    unsigned char *before, *after;
    size_t nb = state_bytes(net, opt, &before);
    cr_expect_eq(amp_step(sc, net, 1, INFINITY), 0);
    size_t na = state_bytes(net, opt, &after);
    cr_assert_eq(na, nb);
    cr_expect(memcmp(before, after, nb) == 0, "a skipped step changed parameters or optimizer state");
    cr_expect_eq(amp_step(sc, net, 2, 0), 1);
    free(after);
    state_bytes(net, opt, &after);
    cr_expect(memcmp(before, after, nb) != 0, "a good step after the skip steps");
    free(before);
    free(after);
    dg_amp_scaler_free(sc);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* Scale 128: gradients after unscale equal the unscaled run's (rel 1e-6), clipping sees the same
 * norm, and the steps agree. */
Test(amp, unscale_then_clip_matches_unscaled_training) {
    dg_layer *a = net_seeded(4), *b = net_seeded(4);
    dg_optimizer *oa = sgd_for(a), *ob = sgd_for(b);
    dg_amp_params p = dg_amp_default_params();
    p.init_loss_scaling = 128;
    dg_amp_scaler *sc = dg_amp_decorate(ob, p);
    for (int k = 0; k < 5; k++) {
        dg_scope *s = dg_scope_begin();
        cr_assert_eq(dg_backward(batch_loss(a, k)), 0);
        cr_assert_eq(dg_backward(dg_amp_scale_loss(sc, batch_loss(b, k))), 0);
        cr_assert_eq(dg_amp_unscale(sc), 0, "%s", dg_last_error());
        cr_assert_eq(dg_amp_unscale(sc), 0, "a second unscale is a no-op");
        int n = dg_optimizer_num_params(oa);
        for (int i = 0; i < n; i++) {
            dg_tensor *ga = dg_grad(dg_optimizer_param(oa, i)), *gb = dg_grad(dg_optimizer_param(ob, i));
            const float *x = dg_data(ga), *y = dg_data(gb);
            for (int64_t j = 0; j < dg_numel(ga); j++)
                cr_assert(fabsf(x[j] - y[j]) <= 1e-6f * fmaxf(fabsf(x[j]), 1e-30f) + 1e-12f,
                          "step %d param %d elem %lld: %.9g vs %.9g", k, i, (long long)j, x[j], y[j]);
        }
        dg_tensor **pa = malloc(sizeof *pa * (size_t)n), **pb = malloc(sizeof *pb * (size_t)n);
        for (int i = 0; i < n; i++) { pa[i] = dg_optimizer_param(oa, i); pb[i] = dg_optimizer_param(ob, i); }
        double na = dg_clip_grad_norm(pa, n, 0.05), nb = dg_clip_grad_norm(pb, n, 0.05);
        cr_expect(fabs(na - nb) <= 1e-6 * na, "norms %.9g vs %.9g", na, nb);
        free(pa);
        free(pb);
        cr_assert_eq(dg_optimizer_step(oa), 0);
        cr_assert_eq(dg_amp_step(sc), 1, "%s", dg_last_error());
        dg_optimizer_clear_grad(oa);
        dg_optimizer_clear_grad(ob);
        dg_scope_end(s);
    }
    for (int i = 0; i < dg_optimizer_num_params(oa); i++) {
        dg_tensor *x = dg_optimizer_param(oa, i), *y = dg_optimizer_param(ob, i);
        for (int64_t j = 0; j < dg_numel(x); j++) {
            float u = ((float *)dg_data(x))[j], v = ((float *)dg_data(y))[j];
            cr_expect(fabsf(u - v) <= 1e-5f * fmaxf(fabsf(u), 1.0f), "param %d elem %lld: %.9g vs %.9g", i, (long long)j, u, v);
        }
    }
    dg_amp_scaler_free(sc);
    dg_optimizer_free(oa); dg_optimizer_free(ob);
    dg_layer_free(a); dg_layer_free(b);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(amp, static_scale_still_skips_inf_steps) {
    dg_layer *net = net_seeded(5);
    dg_optimizer *opt = sgd_for(net);
    dg_amp_params p = dg_amp_default_params();
    p.use_dynamic_loss_scaling = false;
    p.init_loss_scaling = 64;
    p.incr_every_n_steps = 1;
    p.decr_every_n_nan_or_inf = 1;
    dg_amp_scaler *sc = dg_amp_decorate(opt, p);
    cr_expect_eq(amp_step(sc, net, 0, INFINITY), 0);
    expect_state(sc, 64, 0, 0, "inf, static");
    cr_expect_eq(amp_step(sc, net, 1, 0), 1);
    cr_expect_eq(amp_step(sc, net, 2, 0), 1);
    expect_state(sc, 64, 0, 0, "ok, static");
    dg_amp_scaler_free(sc);
    dg_optimizer_free(opt);
    dg_layer_free(net);
}

/* A world-of-one communicator: the flag all-reduce runs and changes nothing. */
Test(amp, flag_agreement_over_a_local_communicator) {
    dg_comm *c = dg_comm_new(dg_comm_default_params());
    cr_assert(c, "%s", dg_last_error());
    dg_layer *net = net_seeded(6);
    dg_optimizer *opt = sgd_for(net);
    dg_amp_scaler *sc = dg_amp_decorate(opt, dg_amp_default_params());
    cr_assert_eq(dg_amp_set_comm(sc, c), 0);
    cr_expect_eq(amp_step(sc, net, 0, INFINITY), 0);
    cr_expect_eq(amp_step(sc, net, 1, 0), 1);
    dg_amp_scaler_free(sc);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_comm_free(c);
}

Test(amp, bad_parameters_and_null_handles) {
    dg_layer *net = net_seeded(7);
    dg_optimizer *opt = sgd_for(net);
    struct { const char *field; dg_amp_params p; } bad[8];
    for (int i = 0; i < 8; i++) bad[i].p = dg_amp_default_params();
    bad[0].field = "init_loss_scaling"; bad[0].p.init_loss_scaling = 0;
    bad[1].field = "init_loss_scaling"; bad[1].p.init_loss_scaling = INFINITY;
    bad[2].field = "init_loss_scaling"; bad[2].p.init_loss_scaling = 1e300;   /* not a float32 */
    bad[3].field = "incr_every_n_steps"; bad[3].p.incr_every_n_steps = 0;
    bad[4].field = "decr_every_n_nan_or_inf"; bad[4].p.decr_every_n_nan_or_inf = -1;
    bad[5].field = "incr_ratio"; bad[5].p.incr_ratio = 1.0;
    bad[6].field = "decr_ratio"; bad[6].p.decr_ratio = 1.0;
    bad[7].field = "decr_ratio"; bad[7].p.decr_ratio = NAN;
    for (int i = 0; i < 8; i++) {
        dg_clear_error();
        cr_expect_null(dg_amp_decorate(opt, bad[i].p), "case %d accepted", i);
        cr_expect_eq(dg_last_status(), DG_EINVAL);
        cr_expect(strstr(dg_last_error(), bad[i].field) && strstr(dg_last_error(), "amp_decorate"), "case %d: %s", i,
                  dg_last_error());
    }
    dg_clear_error();
    cr_expect_null(dg_amp_decorate(NULL, dg_amp_default_params()));
    cr_expect(strstr(dg_last_error(), "optimizer is NULL"), "%s", dg_last_error());
    dg_clear_error();
    cr_expect_eq(dg_amp_step(NULL), DG_EINVAL);
    cr_expect_eq(dg_amp_unscale(NULL), DG_EINVAL);
    cr_expect_eq(dg_amp_set_comm(NULL, NULL), DG_EINVAL);
    cr_expect_null(dg_amp_scale_loss(NULL, NULL));
    cr_expect(isnan(dg_amp_get_scale(NULL)) && dg_amp_good_steps(NULL) == -1 && dg_amp_bad_steps(NULL) == -1);
    cr_expect_null(dg_amp_state_dict(NULL));
    dg_amp_scaler *sc = dg_amp_decorate(opt, dg_amp_default_params());
    cr_expect_null(dg_amp_scale_loss(sc, NULL));
    dg_tensor *i64 = dg_zeros(DG_SHAPE(1), DG_I64);
    dg_clear_error();
    cr_expect_null(dg_amp_scale_loss(sc, i64));
    cr_expect(strstr(dg_last_error(), "float"), "%s", dg_last_error());
    cr_expect_eq(dg_amp_load_state_dict(sc, NULL), DG_EINVAL);
    dg_tensor_free(i64);
    dg_amp_scaler_free(sc);
    dg_amp_scaler_free(NULL);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_clear_error();
}

static dg_tensor_dict *scaler_dict(float scale, int64_t incr, int64_t decr, bool extra) {
    dg_tensor_dict *d = dg_tensor_dict_new();
    dg_tensor *t[4] = { dg_from_data(DG_SHAPE(1), DG_F32, &scale), dg_from_data(DG_SHAPE(1), DG_I64, &incr),
                        dg_from_data(DG_SHAPE(1), DG_I64, &decr), dg_zeros(DG_SHAPE(1), DG_F32) };
    const char *names[4] = { "scale", "incr_count", "decr_count", "extra" };
    for (int i = 0; i < 4; i++) {
        if (i < 3 || extra) cr_assert_eq(dg_tensor_dict_set(d, names[i], t[i]), 0);
        dg_tensor_free(t[i]);
    }
    return d;
}

Test(amp, state_dict_round_trip_and_refusals) {
    dg_layer *net = net_seeded(8);
    dg_optimizer *opt = sgd_for(net);
    dg_amp_params p = dg_amp_default_params();
    p.init_loss_scaling = 256;
    p.incr_every_n_steps = 4;
    dg_amp_scaler *a = dg_amp_decorate(opt, p), *b = dg_amp_decorate(opt, p);
    amp_step(a, net, 0, INFINITY);
    amp_step(a, net, 1, INFINITY);
    amp_step(a, net, 2, 0);
    amp_step(a, net, 3, 0);
    expect_state(a, 256 * 0.8f, 2, 0, "before save");
    dg_tensor_dict *d = dg_amp_state_dict(a);
    cr_assert(d, "%s", dg_last_error());
    cr_expect(dg_tensor_dict_get(d, "scale") && dg_tensor_dict_get(d, "incr_count") && dg_tensor_dict_get(d, "decr_count"));
    cr_assert_eq(dg_amp_load_state_dict(b, d), 0, "%s", dg_last_error());
    expect_state(b, dg_amp_get_scale(a), 2, 0, "loaded");

    dg_tensor_dict_free(d);
    dg_amp_scaler *c = dg_amp_decorate(opt, p);
    d = scaler_dict(256, 4, 0, false);   /* incr_count == incr_every_n_steps: Paddle's == test would never fire */
    cr_expect_eq(dg_amp_load_state_dict(c, d), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "incr_count 4"), "%s", dg_last_error());
    expect_state(c, 256, 0, 0, "a refused load changes nothing");
    dg_tensor_dict_free(d);
    d = scaler_dict(-1, 0, 0, false);
    cr_expect_eq(dg_amp_load_state_dict(c, d), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "loss scale"), "%s", dg_last_error());
    dg_tensor_dict_free(d);
    d = scaler_dict(8, 1, 1, true);
    cr_expect_eq(dg_amp_load_state_dict(c, d), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "'extra'"), "%s", dg_last_error());
    expect_state(c, 256, 0, 0, "a refused load changes nothing");
    dg_tensor_dict_free(d);
    dg_amp_scaler_free(a); dg_amp_scaler_free(b); dg_amp_scaler_free(c);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_clear_error();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* The training checkpoint carries the scaler: a resumed run continues with the same scale and
 * counters and ends bit-identical; a scaler on one side only is refused and nothing changes. */
Test(amp, train_checkpoint_resumes_scale_and_counters) {
    char path[] = "/tmp/dg_amp_ck_XXXXXX", plain[] = "/tmp/dg_amp_plain_XXXXXX";
    close(mkstemp(path)); close(mkstemp(plain));
    dg_amp_params p = dg_amp_default_params();
    p.init_loss_scaling = 4096;
    p.incr_every_n_steps = 3;
    const double inj[10] = { INFINITY, 0, INFINITY, INFINITY, 0, 0, 0, 0, NAN, 0 };
    dg_layer *a = net_seeded(9);
    dg_optimizer *oa = adam_for(a);
    dg_amp_scaler *sa = dg_amp_decorate(oa, p);
    for (int k = 0; k < 6; k++) amp_step(sa, a, k, inj[k]);
    expect_state(sa, 4096 * 0.8f, 2, 0, "at save");
    dg_train_state st = { .model = a, .optimizer = oa, .step = 6, .scaler = sa };
    cr_assert_eq(dg_train_checkpoint_save(path, &st), 0, "%s", dg_last_error());
    dg_train_state st2 = { .model = a, .optimizer = oa, .step = 6 };
    cr_assert_eq(dg_train_checkpoint_save(plain, &st2), 0, "%s", dg_last_error());
    for (int k = 6; k < 10; k++) amp_step(sa, a, k, inj[k]);

    dg_layer *b = net_seeded(77);
    dg_optimizer *ob = adam_for(b);
    dg_amp_scaler *sb = dg_amp_decorate(ob, p);
    dg_train_state lb = { .model = b, .optimizer = ob, .scaler = sb };
    cr_assert_eq(dg_train_checkpoint_load(path, &lb), 0, "%s", dg_last_error());
    expect_state(sb, 4096 * 0.8f, 2, 0, "resumed");
    for (int k = 6; k < 10; k++) amp_step(sb, b, k, inj[k]);
    expect_state(sb, dg_amp_get_scale(sa), dg_amp_good_steps(sa), dg_amp_bad_steps(sa), "after the same steps");
    for (int i = 0; i < dg_optimizer_num_params(oa); i++) {
        dg_tensor *x = dg_optimizer_param(oa, i), *y = dg_optimizer_param(ob, i);
        cr_expect(memcmp(dg_data(x), dg_data(y), (size_t)dg_numel(x) * 4) == 0, "param %d differs after resume", i);
    }

    dg_amp_scaler *sc = dg_amp_decorate(ob, p);
    dg_train_state lc = { .model = b, .optimizer = ob, .scaler = sc };
    cr_expect_eq(dg_train_checkpoint_load(plain, &lc), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "no loss scaler state"), "%s", dg_last_error());
    expect_state(sc, 4096, 0, 0, "refused");
    dg_train_state ld = { .model = b, .optimizer = ob };
    cr_expect_eq(dg_train_checkpoint_load(path, &ld), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "no scaler was given"), "%s", dg_last_error());
    dg_amp_params q = p;
    q.incr_every_n_steps = 2;   /* the saved incr_count 2 does not fit */
    dg_amp_scaler *sd = dg_amp_decorate(ob, q);
    dg_train_state le = { .model = b, .optimizer = ob, .scaler = sd };
    cr_expect_eq(dg_train_checkpoint_load(path, &le), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), path) && strstr(dg_last_error(), "incr_count 2"), "%s", dg_last_error());

    dg_amp_scaler_free(sa); dg_amp_scaler_free(sb); dg_amp_scaler_free(sc); dg_amp_scaler_free(sd);
    dg_optimizer_free(oa); dg_optimizer_free(ob);
    dg_layer_free(a); dg_layer_free(b);
    unlink(path); unlink(plain);
    dg_clear_error();
    cr_assert_eq(dg_live_tensors(), 0);
}

/* fleet: strategy.amp makes a scaler for the distributed optimizer over the world communicator;
 * bad amp_configs are refused by fleet_init naming the field; off, there is none. */
Test(amp, fleet_strategy_switch) {
    const char *vars[] = { "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT",
                           "FLAGS_selected_gpus", "DG_JOB_TOKEN", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
    dg_fleet_strategy st = dg_fleet_default_strategy();
    cr_expect(!st.amp && st.amp_configs.init_loss_scaling == 32768.0 && st.amp_configs.decr_ratio == 0.8);
    st.amp = true;
    st.amp_configs.incr_ratio = 0.5;
    cr_expect_eq(dg_fleet_init(true, &st), DG_EINVAL);
    cr_expect(strstr(dg_last_error(), "amp_configs") && strstr(dg_last_error(), "incr_ratio"), "%s", dg_last_error());
    cr_expect_null(dg_fleet_comm(), "a refused strategy made a communicator");
    st.amp_configs = dg_amp_default_params();
    st.amp_configs.init_loss_scaling = 128;   /* the tutorial's */
    cr_assert_eq(dg_fleet_init(true, &st), 0, "%s", dg_last_error());
    dg_layer *net = net_seeded(10);
    dg_layer *dp = dg_fleet_distributed_model(dg_layer_ref(net));
    cr_assert(dp, "%s", dg_last_error());
    cr_expect_null(dg_fleet_amp_scaler(), "no scaler before distributed_optimizer");
    dg_optimizer *opt = dg_fleet_distributed_optimizer(sgd_for(net));
    dg_amp_scaler *sc = dg_fleet_amp_scaler();
    cr_assert(sc && dg_amp_optimizer(sc) == opt);
    cr_expect_eq(dg_amp_get_scale(sc), 128);
    for (int k = 0; k < 3; k++) {
        dg_scope *s = dg_scope_begin();
        dg_manual_seed(40 + (uint64_t)k);
        dg_tensor *x = dg_randn(DG_SHAPE(8, 4), DG_F32), *y = dg_randn(DG_SHAPE(8, 2), DG_F32);
        dg_tensor *loss = dg_dp_scale_loss(dp, dg_mse_loss(dg_forward(dp, x), y));
        cr_assert_eq(dg_backward(dg_amp_scale_loss(sc, loss)), 0, "%s", dg_last_error());
        cr_assert_eq(dg_dp_apply_collective_grads(dp), 0, "%s", dg_last_error());
        if (k == 1) dg_fill_(dg_grad(dg_optimizer_param(opt, 0)), NAN);
        cr_expect_eq(dg_amp_step(sc), k == 1 ? 0 : 1, "%s", dg_last_error());
        dg_optimizer_clear_grad(opt);
        dg_scope_end(s);
    }
    expect_state(sc, 128, 1, 0, "fleet scaler");
    dg_optimizer_free(opt);
    dg_layer_free(dp);
    dg_layer_free(net);
    dg_fleet_shutdown();
    cr_expect_null(dg_fleet_amp_scaler(), "shutdown frees fleet's scaler");
    dg_clear_error();
}
