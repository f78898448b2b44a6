/* test/gpu/test_gpu_recompute.c — recompute on the GPU: a conv net with dropout and batch norm
 * inside a recomputed segment (and the whole net recomputed around it) gives the gradients and
 * running statistics of the same step without recompute, and the dropout masks drawn again in
 * backward are the first run's (a different mask would change the gradients entirely). */
#include "gpu_compare.h"

static dg_layer *make_net(void) {
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    cp.padding = 1;
    dg_layer *seg = dg_nn_sequential(5, dg_nn_conv2d(3, 8, 3, cp), dg_nn_relu(), dg_nn_dropout(0.3),
                                     dg_nn_conv2d(8, 8, 3, cp), dg_nn_batch_norm2d(8, dg_nn_batch_norm_default_params()));
    return dg_nn_sequential(4, seg, dg_nn_flatten(1, -1), dg_nn_dropout(0.2), dg_nn_linear(8 * 8 * 8, 5));
}

Test(gpu_recompute, gradients_and_running_stats_equal_the_plain_step) {
    gt_gpu_begin();
    gt_use(gt_dut_name());
    dg_layer *nets[2];
    for (int k = 0; k < 2; k++) {
        dg_manual_seed(21);
        nets[k] = make_net();
        cr_assert(nets[k], "%s", dg_last_error());
    }
    cr_assert_eq(dg_layer_set_recompute(dg_layer_child(nets[1], 0), true), 0);
    dg_manual_seed(5);
    dg_tensor *x = dg_randn((dg_shape){ 4, { 4, 3, 8, 8 } }, DG_F32);
    int64_t lab_v[4] = { 0, 3, 1, 4 };
    dg_tensor *lab = dg_from_data((dg_shape){ 1, { 4 } }, DG_I64, lab_v);
    dg_tensor *lab_dev = dg_to_device(lab, dg_device_of(x));
    for (int k = 0; k < 2; k++) {
        dg_manual_seed(77);
        dg_scope *s = dg_scope_begin();
        dg_tensor *loss = dg_cross_entropy(dg_forward(nets[k], x), lab_dev);
        cr_assert(loss && dg_backward(loss) == 0, "%s", dg_last_error());
        dg_scope_end(s);
    }
    /* the same kernels on the same inputs: equal up to what a nondeterministic cuDNN backward
     * algorithm could reorder */
    gt_compare_param_grads("recompute", nets[0], nets[1], (gt_tol){ 1e-5, 1e-6, true });
    gt_compare_state("recompute", "running statistics", nets[0], nets[1], (gt_tol){ 1e-6, 1e-7, true });
    dg_tensor_free(x);
    dg_tensor_free(lab);
    dg_tensor_free(lab_dev);
    dg_layer_free(nets[0]);
    dg_layer_free(nets[1]);
}
