/* test/gpu/test_gpu_models.c — whole-model checks on gpu:0: one ResNet18 training step
 * (f32, 2x3x64x64, cross-entropy, SGD with momentum) against the same step on the CPU — the
 * initial weights, logits, loss, every parameter gradient, the running statistics and the
 * weights after the step — and the caching allocator's statistics over 100 steps of small
 * training loops: after the first step no more cudaMalloc calls and live bytes back to the same
 * value at the end of every step, and nothing left allocated once everything is freed. */
#include "gpu_compare.h"

/* Twenty layers of convolutions and batch norms over a batch of 2 (layer4's batch statistics
 * come from 8 values per channel): the per-layer f32 differences of cuDNN and oneDNN grow
 * through the chain, so the tolerances are relative to each tensor's largest entry. A wrong
 * kernel still shows: it is off by the size of the values themselves. The weights after the
 * step (and the running statistics) carry lr times the gradients' difference. */
#define TOL_INIT { 1e-5, 1e-6, false }
#define TOL_LOGITS { 1e-3, 1e-3, true }
#define TOL_GRADS { 1e-2, 2e-3, true }
#define TOL_AFTER_STEP { 1e-3, 1e-3, true }

Test(gpu_models, resnet18_training_step) {
    gt_gpu_begin();
    const uint64_t seed = 10000;
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = 10;
    gt_use("cpu");
    dg_manual_seed(seed);
    dg_layer *mc = dg_resnet18(rp);
    cr_assert(mc, "cpu resnet18: %s", dg_last_error());
    gt_use(gt_dut_name());
    dg_manual_seed(seed);
    dg_layer *mg = dg_resnet18(rp);
    cr_assert(mg, "gpu resnet18: %s", dg_last_error());
    gt_compare_state("resnet18", "initial", mc, mg, (gt_tol)TOL_INIT);
    gt_copy_state("resnet18", mc, mg);

    int nc, ng;
    dg_tensor **pc = dg_layer_parameters(mc, &nc), **pg = dg_layer_parameters(mg, &ng);
    cr_assert(pc && pg && nc == ng && nc == 62, "resnet18 parameters: %d and %d (%s)", nc, ng, dg_last_error());
    gt_use("cpu");
    dg_momentum_params momp = dg_momentum_default_params();
    momp.lr = 0.1;
    momp.momentum = 0.9;
    momp.weight_decay = 1e-4;
    dg_optimizer *oc = dg_momentum(pc, nc, momp);
    gt_use(gt_dut_name());
    dg_momentum_params momp2 = dg_momentum_default_params();
    momp2.lr = 0.1;
    momp2.momentum = 0.9;
    momp2.weight_decay = 1e-4;
    dg_optimizer *og = dg_momentum(pg, ng, momp2);
    free(pc);
    free(pg);
    cr_assert(oc && og, "momentum: %s", dg_last_error());

    gt_use("cpu");
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(seed + 1);
    dg_tensor *xc = dg_randn(DG_SHAPE(2, 3, 64, 64), DG_F32);
    dg_tensor *yc = dg_cast(dg_mul_scalar(dg_rand(DG_SHAPE(2), DG_F32), 9.99), DG_I64);
    cr_assert(xc && yc, "%s", dg_last_error());
    dg_tensor *xg = gt_to_gpu(xc, false, "resnet18"), *yg = gt_to_gpu(yc, false, "resnet18");

    dg_tensor *logits[2], *loss[2];
    dg_layer *m[2] = { mc, mg };
    dg_optimizer *o[2] = { oc, og };
    dg_tensor *x[2] = { xc, xg }, *y[2] = { yc, yg };
    const char *dev[2] = { "cpu", gt_dut_name() };
    for (int d = 0; d < 2; d++) {
        gt_use(dev[d]);
        logits[d] = dg_forward(m[d], x[d]);
        loss[d] = dg_cross_entropy(logits[d], y[d]);
        cr_assert(loss[d], "resnet18 forward on %s: %s", dev[d], dg_last_error());
        cr_assert_eq(dg_backward(loss[d]), 0, "resnet18 backward on %s: %s", dev[d], dg_last_error());
    }
    gt_use("cpu");
    gt_expect_on_gpu("resnet18", "logits", logits[1]);
    gt_compare("resnet18", "logits", logits[0], logits[1], (gt_tol)TOL_LOGITS);
    gt_compare("resnet18", "loss", loss[0], loss[1], (gt_tol)TOL_LOGITS);
    gt_compare_param_grads("resnet18", mc, mg, (gt_tol)TOL_GRADS);
    gt_compare_state("resnet18", "after forward:", mc, mg, (gt_tol)TOL_AFTER_STEP);

    for (int d = 0; d < 2; d++) {
        gt_use(dev[d]);
        cr_assert_eq(dg_optimizer_step(o[d]), 0, "momentum step on %s: %s", dev[d], dg_last_error());
        cr_assert_eq(dg_optimizer_clear_grad(o[d]), 0, "%s", dg_last_error());
    }
    gt_use("cpu");
    gt_compare_state("resnet18", "after the step:", mc, mg, (gt_tol)TOL_AFTER_STEP);

    /* a second forward on the updated weights (eval mode: running statistics, no batch stats) */
    for (int d = 0; d < 2; d++) {
        gt_use(dev[d]);
        cr_assert_eq(dg_layer_eval(m[d]), 0, "%s", dg_last_error());
        dg_no_grad_begin();
        logits[d] = dg_forward(m[d], x[d]);
        dg_no_grad_end();
        cr_assert(logits[d], "resnet18 eval forward on %s: %s", dev[d], dg_last_error());
    }
    gt_use("cpu");
    gt_compare("resnet18", "eval logits after the step", logits[0], logits[1], (gt_tol)TOL_LOGITS);
    dg_scope_end(s);
    dg_optimizer_free(oc);
    dg_optimizer_free(og);
    dg_layer_free(mc);
    dg_layer_free(mg);
}

/* ---- allocator statistics ---- */

typedef struct loop_case {
    const char *name;
    dg_layer *(*make)(void);
    dg_shape x;
    int64_t classes;
} loop_case;
static dg_layer *mlp(void) {
    return dg_nn_sequential(4, dg_nn_linear(64, 128), dg_nn_relu(), dg_nn_dropout(0.1), dg_nn_linear(128, 10));
}
static const loop_case loops[] = {
    { "MLP + dropout, Adam with grad clip", mlp, GT_SHAPE(32, 64), 10 },
    { "MNIST CNN, Adam with grad clip", dg_mnist_cnn, GT_SHAPE(16, 1, 28, 28), 10 },
};

static dg_memory_stats stats(const char *what) {
    dg_memory_stats m;
    cr_assert_eq(dg_memory_stats_get(gt_dut(), &m), 0, "memory_stats (%s): %s", what, dg_last_error());
    return m;
}

static void run_loop(const loop_case *c, uint64_t seed) {
    gt_gpu_begin();
    if (gt_on_cpu_selfcheck()) cr_log_warn("%s: the CPU keeps no allocator statistics: the counts below are all 0", c->name);
    gt_use(gt_dut_name());
    dg_memory_stats start = stats("start");
    dg_manual_seed(seed);
    dg_layer *net = c->make();
    cr_assert(net, "%s: %s", c->name, dg_last_error());
    int n;
    dg_tensor **ps = dg_layer_parameters(net, &n);
    cr_assert(ps, "%s", dg_last_error());
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = 1e-3;
    adp.grad_clip_norm = 5.0;
    dg_optimizer *opt = dg_adam(ps, n, adp);
    free(ps);
    cr_assert(opt, "%s: %s", c->name, dg_last_error());

    dg_memory_stats first = {0};
    for (int step = 0; step <= 100; step++) {
        dg_scope *s = dg_scope_begin();
        /* a fresh batch each step, made on the device as a data pipeline's upload would be */
        dg_tensor *x = dg_randn(c->x, DG_F32);
        dg_tensor *y = dg_cast(dg_mul_scalar(dg_rand(DG_SHAPE(c->x.d[0]), DG_F32), (double)c->classes - 0.01), DG_I64);
        dg_tensor *loss = dg_cross_entropy(dg_forward(net, x), y);
        cr_assert(loss, "%s step %d: %s", c->name, step, dg_last_error());
        cr_assert_eq(dg_backward(loss), 0, "%s step %d: %s", c->name, step, dg_last_error());
        cr_assert_eq(dg_optimizer_step(opt), 0, "%s step %d: %s", c->name, step, dg_last_error());
        cr_assert_eq(dg_optimizer_clear_grad(opt), 0, "%s step %d: %s", c->name, step, dg_last_error());
        double l = dg_item(loss);   /* a host read each step, as a training loop's logging does */
        cr_assert(isfinite(l), "%s step %d: loss %g (%s)", c->name, step, l, dg_last_error());
        dg_scope_end(s);
        cr_assert_eq(dg_synchronize(gt_dut()), 0, "%s: %s", c->name, dg_last_error());
        dg_memory_stats now = stats("step");
        if (step == 0) {
            first = now;
            cr_expect(gt_on_cpu_selfcheck() || now.allocated > start.allocated,
                      "%s: parameters and optimizer state must be allocated after step 1", c->name);
            cr_expect(now.reserved >= now.allocated && now.peak_allocated >= now.allocated,
                      "%s: reserved %zu, peak %zu must be >= allocated %zu", c->name, now.reserved, now.peak_allocated,
                      now.allocated);
            continue;
        }
        cr_assert_eq(now.device_mallocs, first.device_mallocs,
                     "%s: step %d called the device's malloc: %llu calls after step 1, %llu now (the cache must "
                     "serve a steady loop)", c->name, step + 1, (unsigned long long)first.device_mallocs,
                     (unsigned long long)now.device_mallocs);
        cr_assert_eq(now.allocated, first.allocated, "%s: step %d ends with %zu bytes live, step 1 ended with %zu",
                     c->name, step + 1, now.allocated, first.allocated);
        cr_assert_eq(now.reserved, first.reserved, "%s: step %d: reserved %zu, after step 1 %zu", c->name, step + 1,
                     now.reserved, first.reserved);
    }
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_memory_stats end = stats("end");
    cr_expect_eq(end.allocated, start.allocated, "%s: %zu bytes still allocated after freeing the model and optimizer "
                 "(%zu at the start)", c->name, end.allocated, start.allocated);
    gt_use("cpu");
}

GT_TABLE_TESTS(gpu_models, loops, run_loop, 11000)
