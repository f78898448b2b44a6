/* test/dist/sync_bn_check.c — SyncBatchNorm (dg_nn_sync_batch_norm, dg_nn_convert_sync_batch_norm)
 * against BatchNorm on the concatenated batch, run by dgrun --nproc_per_node 2. Every rank builds
 * the whole batch from a seed, computes the reference on all of it, and runs the synced layers on
 * its own rows:
 *  1. a SyncBatchNorm2d over 3 SGD steps (different inputs, weights moving): outputs, input
 *     gradients and weight/bias gradients (summed over the ranks) each step, running mean/var
 *     after; then the same layer kind on [N, C, L] input (BatchNorm1d's) for one step;
 *  2. Sequential conv-bn-relu-conv-bn converted, wrapped in DataParallel (small buckets, overlap
 *     off and on), 3 SGD steps against the unconverted model on the whole batch: outputs and input gradients each step, every
 *     parameter and buffer after, then eval mode outputs; the converted tree keeps its names;
 *  3. a converted float64 resnet18 (BatchNorms inside blocks and downsample paths), one training
 *     step: logits, input gradients and conv1's weight gradient (summed), to 1e-9 — in float32 the
 *     first conv's weight gradient, a sum of BatchNorm gradients that nearly cancel, differs from
 *     the reference by rounding alone at 2.6e-5 of its largest element.
 * Agreement is |a - b| <= tol * max(1, |b|) for every element (tol 1e-5 in float32); the measured
 * largest absolute differences are printed. Prints
 * "sync_bn_check: ok ..." on success; a failed DIST_ASSERT exits 1. */
#include <dygraph.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist_assert.h"

static int g_rank, g_world;
static dg_comm *g_comm;

/* host copy of t's values as doubles */
static double *host(const dg_tensor *t) {
    DIST_ASSERT(t != NULL, "tensor is NULL");
    int64_t n = dg_numel(t);
    double *p = malloc(sizeof(double) * (size_t)(n ? n : 1));
    DIST_ASSERT(p && dg_to_host(dg_contiguous(dg_cast(t, DG_F64)), p, sizeof(double) * (size_t)n) == 0, "to_host");
    return p;
}

/* max over elements of |a - b| / max(1, |b|), asserted <= tol; returns the max |a - b| */
static double compare(const char *what, const dg_tensor *a, const dg_tensor *b, double tol) {
    DIST_ASSERT(a && b, "%s: missing tensor", what);
    DIST_ASSERT(dg_numel(a) == dg_numel(b), "%s: %lld vs %lld elements", what, (long long)dg_numel(a), (long long)dg_numel(b));
    double *x = host(a), *y = host(b);
    double worst = 0, worst_abs = 0;
    for (int64_t i = 0; i < dg_numel(a); i++) {
        double d = fabs((double)x[i] - y[i]), r = d / fmax(1.0, fabs(y[i]));
        DIST_ASSERT(isfinite(x[i]) && isfinite(y[i]), "%s: element %lld is %g vs %g", what, (long long)i, x[i], y[i]);
        if (r > worst) worst = r;
        if (d > worst_abs) worst_abs = d;
    }
    DIST_ASSERT(worst <= tol, "%s: differs by %.3g (relative) > %g", what, worst, tol);
    free(x);
    free(y);
    return worst_abs;
}

/* this rank's rows of a whole-batch tensor */
static dg_tensor *my_rows(const dg_tensor *full) {
    int64_t n = dg_dim(full, 0) / g_world;
    return dg_contiguous(dg_slice(full, 0, g_rank * n, (g_rank + 1) * n, 1));
}

/* a fresh leaf of this rank's rows, requiring grad */
static dg_tensor *my_leaf(const dg_tensor *full) {
    dg_tensor *t = dg_detach(my_rows(full));
    t = dg_contiguous(t);
    dg_tensor *leaf = dg_clone(t);
    DIST_ASSERT(leaf && dg_set_requires_grad(leaf, true) == 0, "leaf");
    return leaf;
}

/* the gradient summed over the ranks (a copy) */
static dg_tensor *summed_grad(const dg_tensor *p) {
    dg_tensor *g = dg_clone(dg_grad(p));
    DIST_ASSERT(g && dg_comm_all_reduce(g_comm, g, DG_COMM_SUM) == 0, "all_reduce of a gradient");
    return g;
}

static double dmax(double a, double b) { return a > b ? a : b; }

/* ---- 1. the layer alone ---- */
static void layer_alone(double *d_out, double *d_gx, double *d_gw, double *d_run) {
    const int64_t N = 8, C = 3;
    dg_nn_batch_norm_params p = dg_nn_batch_norm_default_params();
    dg_layer *ref = dg_nn_batch_norm2d(C, p), *sync = dg_nn_sync_batch_norm(C, p, g_comm);
    DIST_ASSERT(ref && sync, "layers");
    DIST_ASSERT(!strcmp(dg_layer_type(sync), "SyncBatchNorm"), "type %s", dg_layer_type(sync));
    /* the same non-trivial affine start in both */
    float w0[3] = { 1.2f, 0.7f, -0.9f }, b0[3] = { 0.1f, -0.3f, 0.5f };
    dg_no_grad_begin();
    DIST_ASSERT(!dg_copy_from_host(dg_layer_parameter(ref, "weight"), w0, sizeof w0) &&
                !dg_copy_from_host(dg_layer_parameter(sync, "weight"), w0, sizeof w0) &&
                !dg_copy_from_host(dg_layer_parameter(ref, "bias"), b0, sizeof b0) &&
                !dg_copy_from_host(dg_layer_parameter(sync, "bias"), b0, sizeof b0), "set weights");
    dg_no_grad_end();
    dg_tensor *rp[2] = { dg_layer_parameter(ref, "weight"), dg_layer_parameter(ref, "bias") };
    dg_tensor *sp[2] = { dg_layer_parameter(sync, "weight"), dg_layer_parameter(sync, "bias") };
    dg_sgd_params op = dg_sgd_default_params();
    op.lr = 0.1;
    dg_optimizer *ro = dg_sgd(rp, 2, op), *so = dg_sgd(sp, 2, op);
    DIST_ASSERT(ro && so, "optimizers");
    for (int step = 0; step < 3; step++) {
        dg_scope *sc = dg_scope_begin();
        dg_manual_seed(100 + step);   /* the same whole batch on every rank, another each step */
        dg_tensor *xf = dg_add_scalar(dg_mul_scalar(dg_randn(DG_SHAPE(N, C, 5, 4), DG_F32), 1.5 + step), 0.5 * step - 0.3);
        dg_tensor *r = dg_randn(DG_SHAPE(N, C, 5, 4), DG_F32);   /* loss = sum(y * r): dy = r, a different one per element */
        dg_tensor *xr = dg_clone(xf), *xs = my_leaf(xf);
        DIST_ASSERT(xr && !dg_set_requires_grad(xr, true), "reference input");
        dg_tensor *yr = dg_forward(ref, xr), *ys = dg_forward(sync, xs);
        DIST_ASSERT(yr && ys, "step %d forward", step);
        *d_out = dmax(*d_out, compare("SyncBatchNorm output", ys, my_rows(yr), 1e-5));
        DIST_ASSERT(!dg_backward(dg_sum_all(dg_mul(yr, r))) && !dg_backward(dg_sum_all(dg_mul(ys, my_rows(r)))), "backward");
        *d_gx = dmax(*d_gx, compare("SyncBatchNorm input gradient", dg_grad(xs), my_rows(dg_grad(xr)), 1e-5));
        for (int i = 0; i < 2; i++) {
            dg_tensor *g = summed_grad(sp[i]);
            *d_gw = dmax(*d_gw, compare(i ? "bias gradient" : "weight gradient", g, dg_grad(rp[i]), 1e-5));
            DIST_ASSERT(!dg_set_grad(sp[i], g), "set the summed gradient");   /* the step DataParallel would take */
        }
        DIST_ASSERT(!dg_optimizer_step(ro) && !dg_optimizer_step(so), "step");
        dg_optimizer_clear_grad(ro);
        dg_optimizer_clear_grad(so);
        dg_scope_end(sc);
    }
    const char *bufs[2] = { "running_mean", "running_var" };
    for (int i = 0; i < 2; i++) *d_run = dmax(*d_run, compare(bufs[i], dg_layer_buffer(sync, bufs[i]), dg_layer_buffer(ref, bufs[i]), 1e-5));
    DIST_ASSERT(dg_item(dg_layer_buffer(sync, "num_batches_tracked")) == 3, "num_batches_tracked %g",
                dg_item(dg_layer_buffer(sync, "num_batches_tracked")));
    /* the running statistics moved away from their start (0, 1), so the comparison saw them */
    float rm[3];
    DIST_ASSERT(!dg_to_host(dg_layer_buffer(sync, "running_mean"), rm, sizeof rm) && fabsf(rm[0]) > 1e-3f, "running_mean did not move");
    dg_optimizer_free(ro);
    dg_optimizer_free(so);
    dg_layer_free(ref);
    dg_layer_free(sync);

    /* [N, C, L]: BatchNorm1d's input to the same layer kind, with cumulative averaging */
    p.cumulative_average = true;
    dg_layer *ref1 = dg_nn_batch_norm1d(4, p), *sync1 = dg_nn_sync_batch_norm(4, p, g_comm);
    DIST_ASSERT(ref1 && sync1, "1d layers");
    dg_scope *sc = dg_scope_begin();
    dg_manual_seed(7);
    dg_tensor *xf = dg_add_scalar(dg_randn(DG_SHAPE(6, 4, 3), DG_F32), 2.0), *r = dg_randn(DG_SHAPE(6, 4, 3), DG_F32);
    dg_tensor *xr = dg_clone(xf), *xs = my_leaf(xf);
    DIST_ASSERT(xr && !dg_set_requires_grad(xr, true), "1d input");
    dg_tensor *yr = dg_forward(ref1, xr), *ys = dg_forward(sync1, xs);
    *d_out = dmax(*d_out, compare("SyncBatchNorm [N, C, L] output", ys, my_rows(yr), 1e-5));
    DIST_ASSERT(!dg_backward(dg_sum_all(dg_mul(yr, r))) && !dg_backward(dg_sum_all(dg_mul(ys, my_rows(r)))), "1d backward");
    *d_gx = dmax(*d_gx, compare("SyncBatchNorm [N, C, L] input gradient", dg_grad(xs), my_rows(dg_grad(xr)), 1e-5));
    *d_gw = dmax(*d_gw, compare("[N, C, L] weight gradient", summed_grad(dg_layer_parameter(sync1, "weight")),
                                dg_grad(dg_layer_parameter(ref1, "weight")), 1e-5));
    *d_run = dmax(*d_run, compare("[N, C, L] running_var", dg_layer_buffer(sync1, "running_var"), dg_layer_buffer(ref1, "running_var"), 1e-5));
    dg_scope_end(sc);
    dg_layer_free(ref1);
    dg_layer_free(sync1);
}

/* ---- 2. the converter on conv-bn-relu-conv-bn under DataParallel ---- */
static dg_layer *small_net(void) {
    dg_manual_seed(11);
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    cp.padding = 1;
    dg_nn_batch_norm_params bp = dg_nn_batch_norm_default_params();
    return dg_nn_sequential(5, dg_nn_conv2d(2, 4, 3, cp), dg_nn_batch_norm2d(4, bp), dg_nn_relu(), dg_nn_conv2d(4, 3, 3, cp),
                            dg_nn_batch_norm2d(3, bp));
}

static dg_optimizer *sgd_of(dg_layer *net) {
    int n;
    dg_tensor **ps = dg_layer_parameters(net, &n);
    dg_sgd_params op = dg_sgd_default_params();
    op.lr = 0.2;
    dg_optimizer *o = dg_sgd(ps, n, op);
    free(ps);
    DIST_ASSERT(o, "optimizer");
    return o;
}

static void converted_model(bool overlap, double *d_out, double *d_gx, double *d_state, double *d_eval) {
    const int64_t N = 8;
    dg_layer *ref = small_net(), *net = small_net();
    DIST_ASSERT(ref && net, "models");
    /* an optimizer made before the conversion keeps stepping the same tensors */
    dg_optimizer *so = sgd_of(net), *ro = sgd_of(ref);
    net = dg_nn_convert_sync_batch_norm(net, g_comm);
    DIST_ASSERT(net, "convert");
    DIST_ASSERT(!strcmp(dg_layer_type(dg_layer_child(net, 1)), "SyncBatchNorm") &&
                !strcmp(dg_layer_type(dg_layer_child(net, 4)), "SyncBatchNorm") &&
                !strcmp(dg_layer_type(dg_layer_child(net, 0)), "Conv2d"), "converted tree: %s %s %s",
                dg_layer_type(dg_layer_child(net, 0)), dg_layer_type(dg_layer_child(net, 1)), dg_layer_type(dg_layer_child(net, 4)));
    int nr, ns;
    dg_named_tensor *sr = dg_layer_state_dict(ref, &nr), *ss = dg_layer_state_dict(net, &ns);
    DIST_ASSERT(nr == ns, "state dict of %d entries, the unconverted one has %d", ns, nr);
    for (int i = 0; i < nr; i++) DIST_ASSERT(!strcmp(sr[i].name, ss[i].name), "entry %d is '%s', was '%s'", i, ss[i].name, sr[i].name);
    free(ss);
    dg_dp_params dpp = dg_dp_default_params();
    dpp.overlap = overlap;   /* buckets all-reduced during backward, between SyncBatchNorm's own collectives */
    dpp.bucket_mb = 1e-4;    /* several buckets, so they interleave with them */
    dpp.first_bucket_mb = 1e-4;
    dg_layer *dp = dg_data_parallel(net, g_comm, dpp);
    DIST_ASSERT(dp, "data_parallel");
    for (int step = 0; step < 3; step++) {
        dg_scope *sc = dg_scope_begin();
        dg_manual_seed(200 + step);
        dg_tensor *xf = dg_add_scalar(dg_randn(DG_SHAPE(N, 2, 6, 6), DG_F32), 0.4), *tf = dg_randn(DG_SHAPE(N, 3, 6, 6), DG_F32);
        dg_tensor *xr = dg_clone(xf), *xs = my_leaf(xf);
        DIST_ASSERT(xr && !dg_set_requires_grad(xr, true), "input");
        dg_tensor *yr = dg_forward(ref, xr), *ys = dg_forward(dp, xs);
        DIST_ASSERT(yr && ys, "step %d forward", step);
        *d_out = dmax(*d_out, compare("converted model output", ys, my_rows(yr), 1e-5));
        /* mean over the whole batch = the ranks' mean of their halves' means */
        DIST_ASSERT(!dg_backward(dg_mse_loss(yr, tf)), "reference backward");
        DIST_ASSERT(!dg_backward(dg_dp_scale_loss(dp, dg_mse_loss(ys, my_rows(tf)))), "backward");
        DIST_ASSERT(!dg_dp_apply_collective_grads(dp), "apply_collective_grads");
        *d_gx = dmax(*d_gx, compare("converted model input gradient", dg_grad(xs), my_rows(dg_grad(xr)), 1e-5));
        DIST_ASSERT(!dg_optimizer_step(ro) && !dg_optimizer_step(so), "step");
        dg_optimizer_clear_grad(ro);
        dg_optimizer_clear_grad(so);
        dg_scope_end(sc);
    }
    ss = dg_layer_state_dict(net, &ns);
    for (int i = 0; i < nr; i++) {
        if (dg_dtype_of(sr[i].tensor) != DG_F32) {
            DIST_ASSERT(dg_item(sr[i].tensor) == dg_item(ss[i].tensor), "%s: %g vs %g", sr[i].name, dg_item(ss[i].tensor), dg_item(sr[i].tensor));
            continue;
        }
        *d_state = dmax(*d_state, compare(sr[i].name, ss[i].tensor, sr[i].tensor, 1e-5));
    }
    free(sr);
    free(ss);
    /* eval: running statistics, no communication */
    DIST_ASSERT(!dg_layer_eval(ref) && !dg_layer_eval(dp), "eval");
    DIST_ASSERT(!dg_layer_is_training(dg_layer_child(net, 1)), "SyncBatchNorm still training after eval");
    dg_scope *sc = dg_scope_begin();
    dg_manual_seed(300);
    dg_tensor *xf = dg_mul_scalar(dg_randn(DG_SHAPE(N, 2, 6, 6), DG_F32), 2.0);
    *d_eval = compare("eval output", dg_forward(dp, my_rows(xf)), my_rows(dg_forward(ref, xf)), 1e-5);
    /* a batch of one row per rank works in eval, where nothing is synchronised */
    DIST_ASSERT(dg_forward(dp, dg_slice(xf, 0, g_rank, g_rank + 1, 1)), "eval on one row");
    dg_scope_end(sc);
    dg_optimizer_free(ro);
    dg_optimizer_free(so);
    dg_layer_free(ref);
    dg_layer_free(dp);
}

/* ---- 3. resnet18 (float64): BatchNorms in the blocks and their downsample paths ---- */
static void converted_resnet(double *d_logits, double *d_gx, double *d_gw) {
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = 5;
    rp.dtype = DG_F64;
    dg_manual_seed(21);
    dg_layer *ref = dg_resnet18(rp);
    dg_manual_seed(21);
    dg_layer *net = dg_nn_convert_sync_batch_norm(dg_resnet18(rp), g_comm);
    DIST_ASSERT(ref && net, "resnet18");
    DIST_ASSERT(!strcmp(dg_layer_type(dg_layer_sublayer(net, "layer2.0.downsample.1")), "SyncBatchNorm") &&
                !strcmp(dg_layer_type(dg_layer_sublayer(net, "layer4.1.bn2")), "SyncBatchNorm") &&
                !strcmp(dg_layer_type(dg_layer_sublayer(net, "bn1")), "SyncBatchNorm"), "resnet18 not converted");
    dg_scope *sc = dg_scope_begin();
    dg_manual_seed(400);
    dg_tensor *xf = dg_randn(DG_SHAPE(4, 3, 32, 32), DG_F64);
    dg_tensor *xr = dg_clone(xf), *xs = my_leaf(xf);
    DIST_ASSERT(xr && !dg_set_requires_grad(xr, true), "input");
    dg_tensor *yr = dg_forward(ref, xr), *ys = dg_forward(net, xs);
    DIST_ASSERT(yr && ys, "resnet18 forward");
    *d_logits = compare("resnet18 logits", ys, my_rows(yr), 1e-9);
    dg_tensor *r = dg_randn(dg_shape_of(yr), DG_F64);
    DIST_ASSERT(!dg_backward(dg_sum_all(dg_mul(yr, r))) && !dg_backward(dg_sum_all(dg_mul(ys, my_rows(r)))), "resnet18 backward");
    *d_gx = compare("resnet18 input gradient", dg_grad(xs), my_rows(dg_grad(xr)), 1e-9);
    *d_gw = compare("resnet18 conv1.weight gradient", summed_grad(dg_layer_parameter(net, "conv1.weight")),
                    dg_grad(dg_layer_parameter(ref, "conv1.weight")), 1e-9);
    dg_scope_end(sc);
    dg_layer_free(ref);
    dg_layer_free(net);
}

int main(void) {
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = 1;
    if (dg_init(&ip) || dg_fleet_init(true, NULL)) { fprintf(stderr, "init: %s\n", dg_last_error()); return 1; }
    g_rank = dg_fleet_worker_index(), g_world = dg_fleet_worker_num();
    g_comm = dg_fleet_comm();
    DIST_ASSERT(g_world == 2, "run with 2 ranks, got %d", g_world);
    double out = 0, gx = 0, gw = 0, run = 0, mout = 0, mgx = 0, mstate = 0, meval = 0, rl, rgx, rgw;
    layer_alone(&out, &gx, &gw, &run);
    converted_model(false, &mout, &mgx, &mstate, &meval);
    converted_model(true, &mout, &mgx, &mstate, &meval);
    converted_resnet(&rl, &rgx, &rgw);
    printf("sync_bn_check: ok (rank %d; max abs diff vs BatchNorm on the concatenated batch: layer output %.2g, input grad %.2g, "
           "weight/bias grad %.2g, running stats %.2g; converted conv-bn net (DataParallel, overlap off/on, 3 SGD steps) output %.2g, input grad "
           "%.2g, parameters+buffers %.2g, eval output %.2g; converted resnet18 logits %.2g, input grad %.2g, conv1 grad %.2g)\n",
           g_rank, out, gx, gw, run, mout, mgx, mstate, meval, rl, rgx, rgw);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
