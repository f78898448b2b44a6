/* test/test_mlp_train.c — a short training run against PyTorch (test/goldens/mlp_train.txt,
 * written by test/goldens/make_goldens.py).
 *
 * Paddle's dynamic-graph distributed quick start's LinearNet (Linear(10,10) -> Linear(10,1), no activation) with the stored initial
 * weights (Paddle layout [in, out]), MSE loss, plain SGD p -= lr * grad, 200 steps over 20
 * stored batches cycled (step k uses batch k % 20). Checks every step's loss and the final
 * weights against PyTorch's float32 run, that memory stays flat (RSS after step 200 equals RSS
 * after step 20 within 1 MB), and that no tensor outlives the run. */
#include "test_util.h"
#include <unistd.h>

#define N_PARAMS 4

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert(f, "cannot open /proc/self/statm");
    long size = 0, resident = 0;
    cr_assert_eq(fscanf(f, "%ld %ld", &size, &resident), 2);
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

Test(mlp, matches_pytorch_and_flat_rss) {
    golden *g = golden_load("test/goldens/mlp_train.txt");
    const int steps = (int)dg_item(golden_get(g, "steps"));
    const double lr = (float)dg_item(golden_get(g, "lr"));
    dg_tensor *xs = golden_get(g, "xs"), *ys = golden_get(g, "ys"), *want = golden_get(g, "losses");
    const int64_t nbatch = dg_dim(xs, 0), bs = dg_dim(xs, 1);
    cr_assert_eq(dg_numel(want), steps);
    cr_assert(steps >= 20);
    const float *want_loss = dg_data(want);

    size_t live_before = dg_live_tensors();
    static const char *names[N_PARAMS] = { "w1", "b1", "w2", "b2" };
    dg_tensor *p[N_PARAMS];
    for (int i = 0; i < N_PARAMS; i++) {
        p[i] = dg_clone(golden_get(g, names[i]));  /* no scope open: owned here */
        cr_assert(p[i]);
        cr_assert_eq(dg_set_requires_grad(p[i], true), 0);
    }

    double worst = 0;
    int worst_step = -1;
    long rss20 = 0, rss_end = 0;
    double last = NAN, worst_got = NAN;
    for (int step = 0; step < steps; step++) {
        dg_scope *s = dg_scope_begin();
        int64_t k = step % nbatch;
        dg_tensor *x = dg_reshape(dg_slice(xs, 0, k, k + 1, 1), DG_SHAPE(bs, dg_dim(xs, 2)));
        dg_tensor *y = dg_reshape(dg_slice(ys, 0, k, k + 1, 1), DG_SHAPE(bs, dg_dim(ys, 2)));
        dg_tensor *loss = dg_mse_loss(dg_linear(dg_linear(x, dg_transpose(p[0], 0, 1), p[1]), dg_transpose(p[2], 0, 1), p[3]), y);
        cr_assert(loss, "step %d: forward failed: %s", step, dg_last_error());
        last = dg_item(loss);
        double e = fabs(last - want_loss[step]) / fabs(want_loss[step]);
        if (!(e <= worst)) { worst = isnan(e) ? INFINITY : e; worst_step = step; worst_got = last; }
        cr_assert_eq(dg_backward(loss), 0, "step %d: backward failed: %s", step, dg_last_error());
        dg_no_grad_begin();
        for (int i = 0; i < N_PARAMS; i++) {
            cr_assert(dg_grad(p[i]), "step %d: no gradient for %s", step, names[i]);
            cr_assert_eq(dg_axpy_(p[i], -lr, dg_grad(p[i])), 0, "step %d: update of %s: %s", step, names[i], dg_last_error());
        }
        dg_no_grad_end();
        for (int i = 0; i < N_PARAMS; i++) dg_clear_grad(p[i]);
        dg_scope_end(s);
        if (step + 1 == 20) rss20 = rss_bytes();
        if (step + 1 == steps) rss_end = rss_bytes();
    }

    cr_expect(worst <= 1e-4, "loss differs from PyTorch by %.3g (relative) at step %d: %.9g vs %.9g", worst, worst_step,
              worst_got, worst_step >= 0 ? (double)want_loss[worst_step] : 0.0);
    cr_expect(fabs(last - want_loss[steps - 1]) <= 1e-4 * fabs(want_loss[steps - 1]),
              "final loss %.9g, PyTorch reached %.9g", last, (double)want_loss[steps - 1]);
    cr_expect(want_loss[steps - 1] < 0.01 * want_loss[0], "the run should train: loss %.4g -> %.4g",
              (double)want_loss[0], (double)want_loss[steps - 1]);
    static const char *final_names[N_PARAMS] = { "w1_final", "b1_final", "w2_final", "b2_final" };
    for (int i = 0; i < N_PARAMS; i++) {
        double e = max_rel_err(p[i], golden_get(g, final_names[i]), 1e-2);
        cr_expect(e <= 1e-4, "final %s differs from PyTorch by %.3g", names[i], e);
    }
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's quarantine holds freed blocks, so RSS grows by design; LeakSanitizer checks leaks */
    (void)rss20; (void)rss_end;
#else
    cr_expect(labs(rss_end - rss20) <= (1L << 20), "RSS grew from %ld kB after step 20 to %ld kB after step %d",
              rss20 >> 10, rss_end >> 10, steps);
#endif

    for (int i = 0; i < N_PARAMS; i++) dg_tensor_free(p[i]);
    cr_expect_eq(dg_live_tensors(), live_before, "%zu tensors alive after the run, %zu before",
                 dg_live_tensors(), live_before);
    golden_free(g);
}
