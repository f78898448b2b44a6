/* test/gpu/test_gpu_mixed.c — tensors on two devices: an op handed one CPU and one gpu:0 input
 * must fail with an error naming both devices (never copy silently, never crash), in either
 * argument order; and dg_to_device is differentiable both ways, so a graph that crosses devices
 * gives the CPU-only gradient. */
#include "gpu_compare.h"

/* a on the CPU, b on the GPU (or the other way round for the `swap` rows) */
typedef dg_tensor *(*mixed_fn)(dg_tensor *a, dg_tensor *b);
static dg_tensor *m_add(dg_tensor *a, dg_tensor *b) { return dg_add(a, b); }
static dg_tensor *m_sub(dg_tensor *a, dg_tensor *b) { return dg_sub(a, b); }
static dg_tensor *m_mul(dg_tensor *a, dg_tensor *b) { return dg_mul(a, b); }
static dg_tensor *m_div(dg_tensor *a, dg_tensor *b) { return dg_div(a, b); }
static dg_tensor *m_maximum(dg_tensor *a, dg_tensor *b) { return dg_maximum(a, b); }
static dg_tensor *m_greater(dg_tensor *a, dg_tensor *b) { return dg_greater(a, b); }
static dg_tensor *m_matmul(dg_tensor *a, dg_tensor *b) { return dg_matmul(a, b); }
/* x and w on one device, the bias (shaped right, so only the device is wrong) on the other */
static dg_tensor *m_linear_bias(dg_tensor *a, dg_tensor *b) { return dg_linear(b, b, dg_slice(dg_reshape(a, DG_SHAPE(-1)), 0, 0, 4, 1)); }
static dg_tensor *m_concat(dg_tensor *a, dg_tensor *b) { dg_tensor *xs[2] = { a, b }; return dg_concat(xs, 2, 0); }
static dg_tensor *m_where(dg_tensor *a, dg_tensor *b) { return dg_where(dg_greater(b, dg_scalar(0, DG_F32)), a, b); }
static dg_tensor *m_mse(dg_tensor *a, dg_tensor *b) { return dg_mse_loss(a, b); }
static dg_tensor *m_conv(dg_tensor *a, dg_tensor *b) {
    return dg_conv2d(dg_reshape(a, DG_SHAPE(1, 1, 4, 4)), dg_reshape(b, DG_SHAPE(1, 1, 4, 4)), NULL, dg_conv2d_default_params());
}
static dg_tensor *m_batch_norm(dg_tensor *a, dg_tensor *b) {
    dg_batch_norm_params bnp = dg_batch_norm_default_params();
    bnp.training = true;
    return dg_batch_norm(dg_reshape(b, DG_SHAPE(4, 4)), NULL, NULL, dg_slice(dg_reshape(a, DG_SHAPE(-1)), 0, 0, 4, 1), NULL,
                         bnp);
}

typedef struct mixed_case { const char *name; mixed_fn fn; bool swap; } mixed_case;
static const mixed_case cases[] = {
    { "add(cpu, gpu)", m_add, false },
    { "add(gpu, cpu)", m_add, true },
    { "sub", m_sub, false },
    { "mul", m_mul, true },
    { "div", m_div, false },
    { "maximum", m_maximum, false },
    { "greater", m_greater, true },
    { "matmul", m_matmul, false },
    { "matmul swapped", m_matmul, true },
    { "linear with the bias elsewhere", m_linear_bias, false },
    { "concat", m_concat, false },
    { "where", m_where, false },
    { "mse_loss", m_mse, true },
    { "conv2d", m_conv, false },
    { "batch_norm weight elsewhere", m_batch_norm, false },
};

static void run_mixed(const mixed_case *c, uint64_t seed) {
    gt_gpu_begin();
    if (gt_on_cpu_selfcheck()) { cr_log_warn("%s: nothing to mix without a GPU", c->name); return; }
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(seed);
    dg_tensor *a = dg_uniform(DG_SHAPE(4, 4), 0.5, 1.5, DG_F32);
    cr_assert(a, "%s", dg_last_error());
    dg_tensor *b = gt_to_gpu(a, false, c->name);
    if (c->swap) { dg_tensor *t = a; a = b; b = t; }
    /* with either device current: the check must not depend on it */
    const char *dev[2] = { "cpu", "gpu:0" };
    for (int d = 0; d < 2; d++) {
        gt_use(dev[d]);
        dg_clear_error();
        dg_tensor *y = c->fn(a, b);
        cr_expect_null(y, "%s with %s current: mixed devices must fail, got a result on %s", c->name, dev[d],
                       y ? dg_device_name(dg_device_of(y), (char[16]){0}, 16) : "");
        const char *m = dg_last_error();
        cr_expect(strstr(m, "cpu") && strstr(m, "gpu:0"), "%s with %s current: the error must name both devices, got '%s'",
                  c->name, dev[d], m);
        dg_clear_error();
    }
    gt_use("cpu");
    dg_scope_end(s);
}

GT_TABLE_TESTS(gpu_mixed, cases, run_mixed, 7000)

/* x (CPU) -> gpu:0 -> ops -> CPU -> loss: the gradient reaches x through both copies and equals
 * the gradient of the same ops run on the CPU alone. */
Test(gpu_mixed, to_device_is_differentiable) {
    gt_gpu_begin();
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(7100);
    dg_tensor *x = dg_uniform(DG_SHAPE(5, 6), -1, 1, DG_F32), *w = dg_uniform(DG_SHAPE(6, 3), -1, 1, DG_F32);
    cr_assert(x && w, "%s", dg_last_error());
    cr_assert_eq(dg_set_requires_grad(x, true), 0, "%s", dg_last_error());
    dg_tensor *wg = gt_to_gpu(w, false, "to_device");

    dg_tensor *ref = dg_sum_all(dg_tanh(dg_matmul(x, w)));
    cr_assert(ref && dg_backward(ref) == 0, "cpu: %s", dg_last_error());
    dg_tensor *g_ref = dg_clone(dg_grad(x));
    cr_assert(g_ref, "%s", dg_last_error());
    cr_assert_eq(dg_clear_grad(x), 0, "%s", dg_last_error());

    gt_use(gt_dut_name());
    dg_tensor *xg = dg_to_device(x, gt_dut());
    cr_assert(xg, "to gpu: %s", dg_last_error());
    cr_expect(dg_requires_grad(xg) && !dg_is_leaf(xg), "the copy of a leaf that requires grad is a recorded op");
    dg_tensor *yg = dg_tanh(dg_matmul(xg, wg));
    gt_expect_on_gpu("to_device", "tanh(x @ w)", yg);
    dg_tensor *back = dg_to_device(yg, dg_cpu());
    cr_assert(back, "to cpu: %s", dg_last_error());
    dg_tensor *loss = dg_sum_all(back);
    cr_assert(loss && dg_backward(loss) == 0, "backward across devices: %s", dg_last_error());
    cr_assert(dg_grad(x), "no gradient reached the CPU leaf through the copies");
    cr_expect_eq(dg_device_of(dg_grad(x)).type, DG_CPU, "the leaf's gradient lives on the leaf's device");
    gt_compare("to_device round trip", "grad of x", g_ref, dg_grad(x), (gt_tol)GT_RED);
    gt_compare("to_device round trip", "loss", ref, loss, (gt_tol)GT_RED);
    gt_use("cpu");
    dg_scope_end(s);
}
