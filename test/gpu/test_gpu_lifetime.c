/* test/gpu/test_gpu_lifetime.c — dg_shutdown with the device under test in use: a small conv +
 * batch norm + linear network trained a few steps on it (so the device pool, cuDNN descriptors
 * and stand-in buffers, library handles and streams all exist), then shutdown: the device's
 * memory is given back, work is refused until dg_init, and a new session on the same device
 * trains to the same losses. A tensor kept across shutdown stays freeable. */
#include "gpu_compare.h"

#define STEPS 4

/* losses[STEPS] of a fixed-seed run on the current device; false with the message on failure */
static bool train(double *losses) {
    dg_manual_seed(5);
    dg_nn_conv2d_params ncp = dg_nn_conv2d_default_params();
    ncp.padding = 1;
    dg_layer *net = dg_nn_sequential(6, dg_nn_conv2d(3, 4, 3, ncp),
                                     dg_nn_batch_norm2d(4, dg_nn_batch_norm_default_params()),
                                     dg_nn_relu(), dg_nn_adaptive_avg_pool2d(1, 1), dg_nn_flatten(1, -1), dg_nn_linear(4, 2));
    if (!net) return false;
    int n = 0;
    dg_tensor **ps = dg_layer_parameters(net, &n);
    dg_sgd_params sgdp = dg_sgd_default_params();
    sgdp.lr = 0.1;
    dg_optimizer *opt = ps ? dg_sgd(ps, n, sgdp) : NULL;
    free(ps);
    bool ok = opt != NULL;
    for (int step = 0; ok && step < STEPS; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *x = dg_uniform(DG_SHAPE(2, 3, 8, 8), -1, 1, DG_F32);
        dg_tensor *loss = dg_mse_loss(dg_forward(net, x), dg_zeros(DG_SHAPE(2, 2), DG_F32));
        ok = loss && dg_backward(loss) == 0 && dg_optimizer_step(opt) == 0;
        if (ok) losses[step] = dg_item(loss);
        dg_optimizer_clear_grad(opt);
        dg_scope_end(s);
    }
    dg_optimizer_free(opt);
    dg_layer_free(net);
    return ok;
}

Test(gpu_lifetime, shutdown_gives_the_device_back_and_init_starts_it_again) {
    gt_gpu_begin();
    dg_init_params ip = dg_init_default_params();
    ip.device = gt_dut_name();
    ip.quiet = true;
    cr_assert_eq(dg_init(&ip), 0, "%s", dg_last_error());
    double first[STEPS], again[STEPS];
    cr_assert(train(first), "first session: %s", dg_last_error());
    dg_memory_stats st;
    cr_assert_eq(dg_memory_stats_get(gt_dut(), &st), 0, "%s", dg_last_error());
    cr_assert_eq(st.allocated, 0, "%zu bytes still allocated after training", st.allocated);
    dg_tensor *kept = dg_full(DG_SHAPE(1000), 2.0, DG_F32);   /* on the device, held across shutdown */
    cr_assert_not_null(kept, "%s", dg_last_error());

    dg_shutdown();
    cr_assert_eq(dg_get_device().type, DG_CPU, "the device is reset");
    cr_assert_null(dg_ones(DG_SHAPE(2), DG_F32));
    cr_assert_eq(dg_last_status(), DG_ESTATE);
    cr_assert(strstr(dg_last_error(), "called after dg_shutdown"), "%s", dg_last_error());
    cr_assert_null(dg_relu(kept));
    cr_assert(strstr(dg_last_error(), "called after dg_shutdown"), "%s", dg_last_error());
    dg_clear_error();

    dg_init_params ip2 = dg_init_default_params();
    ip2.device = gt_dut_name();
    ip2.quiet = true;
    cr_assert_eq(dg_init(&ip2), 0, "%s", dg_last_error());
    cr_assert_eq(dg_get_device().type, gt_dut().type);
    cr_assert(train(again), "second session: %s", dg_last_error());
    for (int i = 0; i < STEPS; i++)
        cr_assert(fabs(again[i] - first[i]) <= 1e-5 * fmax(1.0, fabs(first[i])), "step %d: %.9g then %.9g", i, first[i],
                  again[i]);
    cr_assert_null(dg_relu(kept), "a tensor of the ended session is not used");
    cr_assert(strstr(dg_last_error(), "made before dg_shutdown"), "%s", dg_last_error());
    dg_clear_error();
    dg_tensor_free(kept);
    cr_assert_str_eq(dg_last_error(), "", "but it may be freed");
    cr_assert_eq(dg_memory_stats_get(gt_dut(), &st), 0);
    cr_assert_eq(st.allocated, 0);
    cr_assert_eq(dg_live_tensors(), 0);

    dg_shutdown();
    cr_assert_eq(dg_memory_stats_get(gt_dut(), &st), 0, "asking after shutdown: %s", dg_last_error());
    cr_assert_eq(st.allocated, 0);
    cr_assert_eq(st.reserved, 0, "the pool was given back: %zu bytes reserved", st.reserved);
}
