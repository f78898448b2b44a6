/* test/dist/dist_amp.c — dynamic loss scaling over two ranks (fleet strategy.amp, dygraph/amp.h).
 * Paddle's quick-start LinearNet under DataParallel; on the steps of a fixed schedule rank 1 (only)
 * fills one gradient with inf AFTER dg_dp_apply_collective_grads, so only the found_inf all-reduce
 * can make rank 0 skip too. Every rank checks, step by step: the step was skipped exactly when the
 * schedule says (parameters byte-identical across it), the scale and the good/bad counters follow
 * Paddle's update_loss_scaling rule (a reference copy of the rule below), and at the end the
 * parameters are identical on all ranks. Then a train checkpoint taken mid-run is loaded into a
 * fresh model, optimizer and scaler, the rest of the schedule is replayed, and scale, counters and
 * parameters must equal the uninterrupted run's.
 *
 *   dist_amp --ckpt PREFIX      (run by dgrun --nproc_per_node 2; PREFIX.rank<r> is written) */
#include <dygraph.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist_assert.h"

#define STEPS 12
#define SAVE_AFTER 6   /* the checkpoint holds steps [0, SAVE_AFTER) */
static const int inject[STEPS] = { 0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0 };   /* on rank 1 only */

static int rank_;

/* Paddle's update_loss_scaling (float32), the reference the library must match. */
typedef struct ref { float scale; int good, bad; } ref;
static void ref_update(ref *r, bool found, const dg_amp_params *p) {
    if (found) {
        r->good = 0;
        if (++r->bad == p->decr_every_n_nan_or_inf) {
            float ns = r->scale * (float)p->decr_ratio;
            r->scale = ns < 1.0f ? 1.0f : ns;
            r->bad = 0;
        }
    } else {
        r->bad = 0;
        if (++r->good == p->incr_every_n_steps) {
            float ns = r->scale * (float)p->incr_ratio;
            if (isfinite(ns)) r->scale = ns;
            r->good = 0;
        }
    }
}

static uint64_t params_hash(dg_layer *net) {
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)dg_numel(p[i]) * sizeof(float);
        unsigned char *buf = malloc(bytes);
        dg_to_host(p[i], buf, bytes);
        for (size_t k = 0; k < bytes; k++) h = (h ^ buf[k]) * 1099511628211ull;
        free(buf);
    }
    free(p);
    return h;
}

typedef struct run { dg_layer *net, *dp; dg_optimizer *opt; dg_amp_scaler *sc; } run;

static run make_run(uint64_t seed) {
    run r;
    dg_manual_seed(seed + (uint64_t)rank_);   /* different on every rank: the broadcast fixes it */
    r.net = dg_nn_sequential(2, dg_nn_linear(10, 10), dg_nn_linear(10, 1));
    r.dp = dg_fleet_distributed_model(dg_layer_ref(r.net));
    DIST_ASSERT(!(!r.dp), "distributed_model");
    int n;
    dg_tensor **params = dg_layer_parameters(r.net, &n);
    dg_adam_params ap = dg_adam_default_params();
    ap.lr = 1e-2;
    r.opt = dg_fleet_distributed_optimizer(dg_adam(params, n, ap));
    free(params);
    DIST_ASSERT(!(!r.opt), "distributed_optimizer");
    r.sc = dg_fleet_amp_scaler();   /* made for this optimizer, over the world communicator */
    DIST_ASSERT(!(!r.sc || dg_amp_optimizer(r.sc) != r.opt), "fleet made no scaler for the optimizer");
    return r;
}

static void step(run *r, int k, ref *want, const dg_amp_params *p) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(9000 + (uint64_t)k);
    dg_tensor *x = dg_randn(DG_SHAPE(16, 10), DG_F32), *y = dg_randn(DG_SHAPE(16, 1), DG_F32);
    dg_tensor *xs = dg_slice(x, 0, rank_ * 8, rank_ * 8 + 8, 1), *ys = dg_slice(y, 0, rank_ * 8, rank_ * 8 + 8, 1);
    dg_tensor *loss = dg_dp_scale_loss(r->dp, dg_mse_loss(dg_forward(r->dp, xs), ys));
    DIST_ASSERT(!(dg_backward(dg_amp_scale_loss(r->sc, loss)) || dg_dp_apply_collective_grads(r->dp)), "step %d", k);
    if (inject[k] && rank_ == 1) {
        dg_tensor *g = dg_grad(dg_optimizer_param(r->opt, 0));
        DIST_ASSERT(!(!g || dg_fill_(g, INFINITY)), "step %d: inject", k);
    }
    DIST_ASSERT(!(dg_amp_unscale(r->sc)), "step %d: unscale", k);
    DIST_ASSERT(!(dg_amp_found_inf(r->sc) != (inject[k] && rank_ == 1)), "step %d: this rank's found_inf is wrong", k);
    int n;
    dg_tensor **params = dg_layer_parameters(r->net, &n);
    DIST_ASSERT(!(dg_clip_grad_norm(params, n, 10.0) < 0 && !inject[k]), "step %d: clip", k);
    free(params);
    uint64_t before = params_hash(r->net);
    int rc = dg_amp_step(r->sc);
    DIST_ASSERT(!(rc < 0), "step %d: amp_step", k);
    uint64_t after = params_hash(r->net);
    ref_update(want, inject[k], p);
    printf("rank %d step %2d: %s scale %g good %d bad %d\n", rank_, k, rc ? "stepped" : "skipped", dg_amp_get_scale(r->sc),
           dg_amp_good_steps(r->sc), dg_amp_bad_steps(r->sc));
    DIST_ASSERT(!(rc != !inject[k]), "step %d: amp_step returned %d, the schedule says %s", k, rc, inject[k] ? "skip" : "step");
    DIST_ASSERT(!(inject[k] ? before != after : before == after), "step %d: parameters %schanged", k, inject[k] ? "" : "un");
    DIST_ASSERT(!(dg_amp_found_inf(r->sc) != (bool)inject[k]), "step %d: agreed found_inf is wrong", k);
    DIST_ASSERT(dg_amp_get_scale(r->sc) == (double)want->scale && dg_amp_good_steps(r->sc) == want->good &&
                    dg_amp_bad_steps(r->sc) == want->bad,
                "step %d: scale %g good %d bad %d, Paddle's rule gives %g %d %d", k, dg_amp_get_scale(r->sc),
                dg_amp_good_steps(r->sc), dg_amp_bad_steps(r->sc), (double)want->scale, want->good, want->bad);
    dg_optimizer_clear_grad(r->opt);
    dg_scope_end(s);
}

static void same_on_all_ranks(uint64_t h, const char *what) {
    dg_tensor *mine = dg_scalar((double)(int64_t)(h >> 1), DG_I64);
    dg_tensor *all = dg_comm_all_gather(dg_fleet_comm(), mine);
    DIST_ASSERT(!(!all), "all_gather");
    int64_t hs[2];
    dg_to_host(all, hs, sizeof hs);
    DIST_ASSERT(!(hs[0] != hs[1]), "%s: parameters differ between the ranks", what);
    dg_tensor_free(mine);
    dg_tensor_free(all);
}

static void free_run(run *r) {
    dg_optimizer_free(r->opt);
    dg_layer_free(r->dp);
    dg_layer_free(r->net);
}

int main(int argc, char **argv) {
    const char *prefix = argc == 3 && strcmp(argv[1], "--ckpt") == 0 ? argv[2] : NULL;
    if (!prefix) { fprintf(stderr, "usage: dist_amp --ckpt PREFIX\n"); return 2; }
    dg_init_params ip = dg_init_default_params();
    ip.quiet = true;
    ip.num_threads = 1;
    DIST_ASSERT(!(dg_init(&ip)), "init");
    dg_fleet_strategy st = dg_fleet_default_strategy();
    st.amp = true;   /* strategy.amp = True; strategy.amp_configs = {...} */
    st.amp_configs.init_loss_scaling = 1024;
    st.amp_configs.incr_every_n_steps = 3;
    st.amp_configs.decr_every_n_nan_or_inf = 2;
    st.amp_configs.incr_ratio = 2.0;
    st.amp_configs.decr_ratio = 0.5;
    DIST_ASSERT(!(dg_fleet_init(true, &st)), "fleet_init");
    rank_ = dg_fleet_worker_index();
    DIST_ASSERT(!(dg_fleet_worker_num() != 2), "run me on 2 ranks, not %d", dg_fleet_worker_num());
    char path[512];
    snprintf(path, sizeof path, "%s.rank%d", prefix, rank_);

    run a = make_run(100);
    ref want = { 1024.0f, 0, 0 }, at_save = want;
    for (int k = 0; k < STEPS; k++) {
        if (k == SAVE_AFTER) {
            dg_train_state ts = { .model = a.net, .optimizer = a.opt, .step = k, .scaler = a.sc };
            DIST_ASSERT(!(dg_train_checkpoint_save(path, &ts)), "checkpoint save");
            at_save = want;
        }
        step(&a, k, &want, &st.amp_configs);
    }
    uint64_t end = params_hash(a.net);
    same_on_all_ranks(end, "uninterrupted run");
    float scale_end = (float)dg_amp_get_scale(a.sc);
    int good_end = dg_amp_good_steps(a.sc), bad_end = dg_amp_bad_steps(a.sc);
    free_run(&a);   /* the next distributed_optimizer replaces fleet's scaler */

    run b = make_run(700);
    dg_train_state ts = { .model = b.net, .optimizer = b.opt, .scaler = b.sc };
    DIST_ASSERT(!(dg_train_checkpoint_load(path, &ts)), "checkpoint load");
    DIST_ASSERT(ts.step == SAVE_AFTER && dg_amp_get_scale(b.sc) == (double)at_save.scale && dg_amp_good_steps(b.sc) == at_save.good &&
                    dg_amp_bad_steps(b.sc) == at_save.bad,
                "resumed at step %lld with scale %g good %d bad %d, saved %g %d %d", (long long)ts.step, dg_amp_get_scale(b.sc),
                dg_amp_good_steps(b.sc), dg_amp_bad_steps(b.sc), (double)at_save.scale, at_save.good, at_save.bad);
    for (int k = SAVE_AFTER; k < STEPS; k++) step(&b, k, &at_save, &st.amp_configs);
    DIST_ASSERT(params_hash(b.net) == end && dg_amp_get_scale(b.sc) == (double)scale_end && dg_amp_good_steps(b.sc) == good_end &&
                    dg_amp_bad_steps(b.sc) == bad_end,
                "the resumed run ends elsewhere than the uninterrupted one");
    same_on_all_ranks(params_hash(b.net), "resumed run");
    if (rank_ == 0)
        printf("dist_amp: 2 ranks, inf on rank 1 only: both ranks skipped together, scale followed Paddle's rule "
               "(final %g), resume from the checkpoint identical\n", (double)scale_end);
    free_run(&b);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
