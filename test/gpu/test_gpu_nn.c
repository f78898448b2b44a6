/* test/gpu/test_gpu_nn.c — every built-in layer of nn.h, the loss layers and small composite
 * networks, CPU vs gpu:0: the GPU-built layer's random initial parameters equal the CPU-built
 * one's (same Philox stream), then with identical state the output, the input gradient, every
 * parameter gradient and every buffer after the forward (running statistics,
 * num_batches_tracked) agree. Eval-mode rows first run one training forward so the running
 * statistics are not their trivial start values. */
#include "gpu_compare.h"
#include <dygraph/extension.h>

#define X(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define XC(...) { GT_CONST, GT_SHAPE(__VA_ARGS__), 0, 0 }          /* a label: no gradient */
#define PROB(...) { GT_CONST, GT_SHAPE(__VA_ARGS__), 0, 1 }
#define SOFT(...) { GT_SOFT, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define LAB(hi, ...) { GT_LABELS, GT_SHAPE(__VA_ARGS__), 0, hi }
#define NOLABEL { 0 }
#define TOL_RNG { 1e-5, 1e-6, false }
/* several layers deep: errors of the summed terms add up layer after layer, and entries that
 * cancel toward 0 keep the absolute error of the large ones */
#define TOL_NET_FWD { 1e-4, 1e-4, true }
#define TOL_NET_GRAD { 1e-3, 5e-4, true }

#define MAKE(name, expr) static dg_layer *name(void) { return (expr); }
MAKE(m_linear, dg_nn_linear(12, 7))
static dg_layer *m_linear_nobias(void) {
    dg_nn_linear_params linp = dg_nn_linear_default_params();
    linp.bias = false;
    return dg_nn_linear_ext(12, 7, linp);
}
MAKE(m_linear_3d, dg_nn_linear(8, 3))
MAKE(m_linear_big, dg_nn_linear(256, 128))
static dg_layer *m_conv(void) {
    dg_nn_conv2d_params ncp = dg_nn_conv2d_default_params();
    ncp.padding = 1;
    return dg_nn_conv2d(3, 8, 3, ncp);
}
static dg_layer *m_conv_groups(void) {
    dg_nn_conv2d_params ncp2 = dg_nn_conv2d_default_params();
    ncp2.stride = 2;
    ncp2.groups = 2;
    ncp2.bias = false;
    return dg_nn_conv2d(4, 6, 3, ncp2);
}
static dg_layer *m_conv_dil(void) {
    dg_nn_conv2d_params ncp3 = dg_nn_conv2d_default_params();
    ncp3.dilation = 2;
    ncp3.padding = 2;
    return dg_nn_conv2d(3, 4, 3, ncp3);
}
static dg_layer *m_maxpool(void) {
    dg_nn_pool2d_params npp = dg_nn_pool2d_default_params();
    npp.stride = 2;
    npp.padding = 1;
    return dg_nn_max_pool2d(3, npp);
}
static dg_layer *m_maxpool_ceil(void) {
    dg_nn_pool2d_params npp2 = dg_nn_pool2d_default_params();
    npp2.ceil_mode = true;
    return dg_nn_max_pool2d(2, npp2);
}
static dg_layer *m_avgpool(void) {
    return dg_nn_avg_pool2d(2, dg_nn_pool2d_default_params());
}
static dg_layer *m_avgpool_incl(void) {
    dg_nn_pool2d_params npp3 = dg_nn_pool2d_default_params();
    npp3.stride = 2;
    npp3.padding = 1;
    npp3.count_include_pad = true;
    return dg_nn_avg_pool2d(3, npp3);
}
static dg_layer *m_avgpool_ceil(void) {
    dg_nn_pool2d_params npp4 = dg_nn_pool2d_default_params();
    npp4.stride = 2;
    npp4.ceil_mode = true;
    return dg_nn_avg_pool2d(3, npp4);
}
MAKE(m_aap1, dg_nn_adaptive_avg_pool2d(1, 1))
MAKE(m_aap23, dg_nn_adaptive_avg_pool2d(2, 3))
static dg_layer *m_bn1d(void) {
    return dg_nn_batch_norm1d(6, dg_nn_batch_norm_default_params());
}
static dg_layer *m_bn2d(void) {
    return dg_nn_batch_norm2d(4, dg_nn_batch_norm_default_params());
}
static dg_layer *m_bn2d_m(void) {
    dg_nn_batch_norm_params nbp = dg_nn_batch_norm_default_params();
    nbp.momentum = 0.2;
    nbp.eps = 1e-3;
    return dg_nn_batch_norm2d(4, nbp);
}
static dg_layer *m_bn2d_cumulative(void) {
    dg_nn_batch_norm_params nbp2 = dg_nn_batch_norm_default_params();
    nbp2.cumulative_average = true;
    return dg_nn_batch_norm2d(4, nbp2);
}
static dg_layer *m_bn2d_noaffine(void) {
    dg_nn_batch_norm_params nbp3 = dg_nn_batch_norm_default_params();
    nbp3.affine = false;
    return dg_nn_batch_norm2d(4, nbp3);
}
static dg_layer *m_bn2d_nostats(void) {
    dg_nn_batch_norm_params nbp4 = dg_nn_batch_norm_default_params();
    nbp4.track_running_stats = false;
    return dg_nn_batch_norm2d(4, nbp4);
}
MAKE(m_dropout, dg_nn_dropout(0.5))
MAKE(m_relu, dg_nn_relu())
MAKE(m_leaky, dg_nn_leaky_relu(0.01))
MAKE(m_sigmoid, dg_nn_sigmoid())
MAKE(m_tanh, dg_nn_tanh())
MAKE(m_gelu, dg_nn_gelu(false))
MAKE(m_gelu_tanh, dg_nn_gelu(true))
MAKE(m_softmax, dg_nn_softmax(-1))
MAKE(m_softmax1, dg_nn_softmax(1))
MAKE(m_flatten, dg_nn_flatten(1, -1))
MAKE(m_identity, dg_nn_identity())
/* the tutorial's LinearNet (samples/linear_single.c) */
MAKE(m_linearnet, dg_nn_sequential(2, dg_nn_linear(10, 10), dg_nn_linear(10, 1)))
MAKE(m_mlp, dg_nn_sequential(4, dg_nn_linear(20, 32), dg_nn_relu(), dg_nn_dropout(0.2), dg_nn_linear(32, 5)))
/* the convolution before a batch norm has no bias, as such nets are built: its gradient would be
 * zero up to rounding noise, which no relative tolerance can compare */
static dg_layer *m_small_cnn(void) {
    dg_nn_conv2d_params ncp4 = dg_nn_conv2d_default_params();
    ncp4.padding = 1;
    ncp4.bias = false;
    return dg_nn_sequential(6, dg_nn_conv2d(3, 8, 3, ncp4), dg_nn_batch_norm2d(8, dg_nn_batch_norm_default_params()),
                            dg_nn_relu(), dg_nn_max_pool2d(2, dg_nn_pool2d_default_params()), dg_nn_flatten(1, -1),
                            dg_nn_linear(8 * 4 * 4, 10));
}
MAKE(m_mnist, dg_mnist_cnn())
MAKE(m_mynet, dg_cifar_mynet(10))
MAKE(m_basic_block, dg_resnet_basic_block(8, 16, 2, DG_F32))
MAKE(m_bottleneck, dg_resnet_bottleneck(16, 8, 2, DG_F32))
/* loss layers */
MAKE(m_mse_mean, dg_nn_mse_loss(DG_REDUCE_MEAN))
MAKE(m_mse_sum, dg_nn_mse_loss(DG_REDUCE_SUM))
MAKE(m_mse_none, dg_nn_mse_loss(DG_REDUCE_NONE))
MAKE(m_l1_mean, dg_nn_l1_loss(DG_REDUCE_MEAN))
MAKE(m_l1_none, dg_nn_l1_loss(DG_REDUCE_NONE))
static dg_layer *m_ce(void) {
    return dg_nn_cross_entropy_loss(dg_cross_entropy_default_params());
}
static dg_layer *m_ce_sum(void) {
    dg_cross_entropy_params cep = dg_cross_entropy_default_params();
    cep.reduction = DG_REDUCE_SUM;
    return dg_nn_cross_entropy_loss(cep);
}
static dg_layer *m_ce_soft(void) {
    dg_cross_entropy_params cep2 = dg_cross_entropy_default_params();
    cep2.soft_label = true;
    return dg_nn_cross_entropy_loss(cep2);
}
static dg_layer *m_ce_ignore(void) {
    dg_cross_entropy_params cep3 = dg_cross_entropy_default_params();
    cep3.use_ignore_index = true;
    cep3.ignore_index = 0;
    return dg_nn_cross_entropy_loss(cep3);
}
static dg_layer *m_ce_axis1(void) {
    dg_cross_entropy_params cep4 = dg_cross_entropy_default_params();
    cep4.axis = 1;
    return dg_nn_cross_entropy_loss(cep4);
}
MAKE(m_bce_mean, dg_nn_bce_with_logits_loss(DG_REDUCE_MEAN))
MAKE(m_bce_none, dg_nn_bce_with_logits_loss(DG_REDUCE_NONE))

#define L(name, make, x, fwd, grad) { name, make, x, NOLABEL, false, false, TOL_RNG, fwd, grad }
#define LE(name, make, x, fwd, grad) { name, make, x, NOLABEL, false, true, TOL_RNG, fwd, grad }
#define LOSS(name, make, x, label) { name, make, x, label, true, false, TOL_RNG, GT_RED, GT_RED }

static const gt_layer_case cases[] = {
    L("Linear", m_linear, X(5, 12), GT_RED, GT_RED),
    L("Linear no bias", m_linear_nobias, X(5, 12), GT_RED, GT_RED),
    L("Linear on [2,4,8]", m_linear_3d, X(2, 4, 8), GT_RED, GT_RED),
    L("Linear 256->128 batch 64", m_linear_big, X(64, 256), GT_RED, GT_RED),
    L("Conv2d 3->8 k3 p1", m_conv, X(2, 3, 10, 10), GT_RED_LOOSE, GT_RED_LOOSE),
    L("Conv2d groups 2 stride 2 no bias", m_conv_groups, X(2, 4, 9, 9), GT_RED_LOOSE, GT_RED_LOOSE),
    L("Conv2d dilation 2", m_conv_dil, X(1, 3, 9, 9), GT_RED_LOOSE, GT_RED_LOOSE),
    L("MaxPool2d 3 s2 p1", m_maxpool, X(2, 3, 9, 9), GT_EXACT, GT_EW),
    L("MaxPool2d 2 ceil_mode", m_maxpool_ceil, X(2, 3, 7, 7), GT_EXACT, GT_EW),
    L("AvgPool2d 2", m_avgpool, X(2, 3, 8, 8), GT_EW, GT_EW),
    L("AvgPool2d 3 s2 p1 count_include_pad", m_avgpool_incl, X(2, 3, 9, 9), GT_EW, GT_EW),
    L("AvgPool2d 3 s2 ceil_mode", m_avgpool_ceil, X(2, 3, 8, 8), GT_EW, GT_EW),
    L("AdaptiveAvgPool2d 1x1", m_aap1, X(2, 5, 7, 7), GT_RED, GT_EW),
    L("AdaptiveAvgPool2d 2x3", m_aap23, X(2, 3, 5, 7), GT_EW, GT_EW),
    L("BatchNorm1d [N,C] train", m_bn1d, X(8, 6), GT_RED, GT_RED_LOOSE),
    L("BatchNorm1d [N,C,L] train", m_bn1d, X(4, 6, 5), GT_RED, GT_RED_LOOSE),
    LE("BatchNorm1d eval", m_bn1d, X(8, 6), GT_RED, GT_RED),
    L("BatchNorm2d train", m_bn2d, X(3, 4, 5, 5), GT_RED, GT_RED_LOOSE),
    LE("BatchNorm2d eval", m_bn2d, X(3, 4, 5, 5), GT_RED, GT_RED),
    L("BatchNorm2d momentum 0.2 eps 1e-3", m_bn2d_m, X(3, 4, 5, 5), GT_RED, GT_RED_LOOSE),
    L("BatchNorm2d cumulative average", m_bn2d_cumulative, X(3, 4, 5, 5), GT_RED, GT_RED_LOOSE),
    L("BatchNorm2d no affine", m_bn2d_noaffine, X(3, 4, 5, 5), GT_RED, GT_RED_LOOSE),
    L("BatchNorm2d no running stats", m_bn2d_nostats, X(3, 4, 5, 5), GT_RED, GT_RED_LOOSE),
    LE("BatchNorm2d no running stats eval", m_bn2d_nostats, X(3, 4, 5, 5), GT_RED, GT_RED_LOOSE),
    L("Dropout 0.5 train", m_dropout, X(16, 33), GT_EW, GT_EW),
    LE("Dropout eval", m_dropout, X(16, 33), GT_EXACT, GT_EXACT),
    L("ReLU", m_relu, X(4, 9), GT_EW, GT_EW),
    L("LeakyReLU 0.01", m_leaky, X(4, 9), GT_EW, GT_EW),
    L("Sigmoid", m_sigmoid, X(4, 9), GT_EW, GT_EW),
    L("Tanh", m_tanh, X(4, 9), GT_EW, GT_EW),
    L("GELU", m_gelu, X(4, 9), GT_EW, GT_EW),
    L("GELU tanh", m_gelu_tanh, X(4, 9), GT_EW, GT_EW),
    L("Softmax -1", m_softmax, X(4, 9), GT_RED, GT_RED),
    L("Softmax 1 on [2,5,3]", m_softmax1, X(2, 5, 3), GT_RED, GT_RED),
    L("Flatten", m_flatten, X(2, 3, 4, 5), GT_EXACT, GT_EXACT),
    L("Identity", m_identity, X(3, 4), GT_EXACT, GT_EXACT),
    L("Sequential LinearNet", m_linearnet, X(10, 10), GT_RED, GT_RED),
    L("Sequential MLP with dropout", m_mlp, X(16, 20), TOL_NET_FWD, TOL_NET_GRAD),
    L("Sequential conv-bn-relu-pool-flatten-linear", m_small_cnn, X(4, 3, 8, 8), TOL_NET_FWD, TOL_NET_GRAD),
    L("MNIST CNN", m_mnist, X(4, 1, 28, 28), TOL_NET_FWD, TOL_NET_GRAD),
    LE("MNIST CNN eval", m_mnist, X(4, 1, 28, 28), TOL_NET_FWD, TOL_NET_GRAD),
    L("CIFAR MyNet", m_mynet, X(2, 3, 32, 32), TOL_NET_FWD, TOL_NET_GRAD),
    L("ResNet BasicBlock with downsample", m_basic_block, X(2, 8, 8, 8), TOL_NET_FWD, TOL_NET_GRAD),
    LE("ResNet BasicBlock eval", m_basic_block, X(2, 8, 8, 8), TOL_NET_FWD, TOL_NET_GRAD),
    L("ResNet Bottleneck with downsample", m_bottleneck, X(2, 16, 8, 8), TOL_NET_FWD, TOL_NET_GRAD),
    LOSS("MSELoss mean", m_mse_mean, X(6, 3), XC(6, 3)),
    LOSS("MSELoss sum", m_mse_sum, X(6, 3), XC(6, 3)),
    LOSS("MSELoss none", m_mse_none, X(6, 3), XC(6, 3)),
    LOSS("L1Loss mean", m_l1_mean, X(6, 3), XC(6, 3)),
    LOSS("L1Loss none", m_l1_none, X(6, 3), XC(6, 3)),
    LOSS("CrossEntropyLoss", m_ce, X(8, 5), LAB(5, 8)),
    LOSS("CrossEntropyLoss [N,1] labels, sum", m_ce_sum, X(8, 5), LAB(5, 8, 1)),
    LOSS("CrossEntropyLoss soft labels", m_ce_soft, X(6, 4), SOFT(6, 4)),
    LOSS("CrossEntropyLoss ignore_index 0", m_ce_ignore, X(12, 3), LAB(3, 12)),
    LOSS("CrossEntropyLoss axis 1", m_ce_axis1, X(2, 4, 3, 3), LAB(4, 2, 3, 3)),
    LOSS("BCEWithLogitsLoss mean", m_bce_mean, X(5, 4), PROB(5, 4)),
    LOSS("BCEWithLogitsLoss none", m_bce_none, X(5, 4), PROB(5, 4)),
};

GT_TABLE_TESTS(gpu_nn, cases, gt_expect_layer_matches_cpu, 8000)

/* dg_layer_to: a network built on the CPU and moved to the device keeps its parameter handles,
 * computes what an identical CPU copy computes, an SGD made before the move steps it there,
 * and it moves back; a second move to the same device copies nothing. */
Test(gpu_nn, layer_to_device_and_back) {
    gt_gpu_begin();
    dg_layer *net[2];
    for (int k = 0; k < 2; k++) {
        dg_manual_seed(21);
        net[k] = dg_nn_sequential(4, dg_nn_linear(6, 8), dg_nn_batch_norm1d(8, dg_nn_batch_norm_default_params()),
                                  dg_nn_relu(), dg_nn_linear(8, 3));
        cr_assert(net[k], "%s", dg_last_error());
    }
    dg_layer *cpu = net[0], *dev = net[1];
    dg_optimizer *opt[2];
    for (int k = 0; k < 2; k++) {
        int n;
        dg_tensor **ps = dg_layer_parameters(net[k], &n);
        dg_sgd_params sp = dg_sgd_default_params();
        sp.lr = 0.1;
        opt[k] = dg_sgd(ps, n, sp);   /* before the move: it holds the handles */
        free(ps);
    }
    dg_tensor *w = dg_layer_parameter(dev, "0.weight");
    cr_assert_eq(dg_layer_to(dev, gt_dut()), 0, "%s", dg_last_error());
    cr_assert_eq(dg_layer_parameter(dev, "0.weight"), w, "the handle stays");
    int n;
    dg_named_tensor *sd = dg_layer_state_dict(dev, &n);
    for (int i = 0; i < n; i++)
        cr_assert(dg_device_of(sd[i].tensor).type == gt_dut().type, "%s did not move", sd[i].name);
    free(sd);
    void *where = dg_tensor_ptr(w);
    cr_assert_eq(dg_layer_to(dev, gt_dut()), 0);
    cr_assert_eq(dg_tensor_ptr(w), where, "already there: nothing copied");
    gt_compare_state("layer_to", "moved", cpu, dev, (gt_tol)GT_EXACT);

    dg_manual_seed(22);
    dg_tensor *x = dg_randn(DG_SHAPE(5, 6), DG_F32), *xd = gt_to_gpu(x, false, "layer_to");
    for (int step = 0; step < 3; step++) {
        dg_scope *s = dg_scope_begin();
        gt_use("cpu");
        dg_tensor *lc = dg_mean_all(dg_forward(cpu, x));
        cr_assert(lc && dg_backward(lc) == 0 && dg_optimizer_step(opt[0]) == 0, "cpu: %s", dg_last_error());
        gt_use(gt_dut_name());
        dg_tensor *ld = dg_mean_all(dg_forward(dev, xd));
        cr_assert(ld && dg_backward(ld) == 0 && dg_optimizer_step(opt[1]) == 0, "device: %s", dg_last_error());
        gt_use("cpu");
        gt_compare("layer_to", "loss", lc, ld, (gt_tol)TOL_NET_FWD);
        for (int k = 0; k < 2; k++) dg_optimizer_clear_grad(opt[k]);
        dg_scope_end(s);
    }
    gt_compare_state("layer_to", "after 3 SGD steps", cpu, dev, (gt_tol)TOL_NET_GRAD);
    cr_assert_eq(dg_layer_to(dev, dg_cpu()), 0, "%s", dg_last_error());
    cr_assert_eq(dg_device_of(w).type, DG_CPU);
    gt_compare_state("layer_to", "back on the CPU", cpu, dev, (gt_tol)TOL_NET_GRAD);
    dg_tensor_free(x);
    dg_tensor_free(xd);
    for (int k = 0; k < 2; k++) { dg_optimizer_free(opt[k]); dg_layer_free(net[k]); }
}

/* An optimizer whose state was made before the move (Adagrad's sum exists from construction)
 * refuses to step instead of mixing devices, and leaves the parameters as they were. */
Test(gpu_nn, layer_to_after_optimizer_state_is_an_error) {
    gt_gpu_begin();
    if (gt_on_cpu_selfcheck()) return;   /* nothing moves when the CPU stands in */
    dg_layer *lin = dg_nn_linear(4, 2);
    int n;
    dg_tensor **ps = dg_layer_parameters(lin, &n);
    dg_optimizer *opt = dg_adagrad(ps, n, dg_adagrad_default_params());
    free(ps);
    cr_assert(opt, "%s", dg_last_error());
    cr_assert_eq(dg_layer_to(lin, gt_dut()), 0, "%s", dg_last_error());
    gt_use(gt_dut_name());
    dg_scope *s = dg_scope_begin();
    dg_tensor *loss = dg_sum_all(dg_forward(lin, dg_ones(DG_SHAPE(3, 4), DG_F32)));
    cr_assert(loss && dg_backward(loss) == 0, "%s", dg_last_error());
    dg_tensor *w = dg_layer_parameter(lin, "weight");
    dg_tensor *before = dg_to_device(w, dg_cpu());
    cr_assert_eq(dg_optimizer_step(opt), DG_EDEVICE);
    cr_assert(strstr(dg_last_error(), "adagrad") && strstr(dg_last_error(), "state 'sum' is on cpu") &&
              strstr(dg_last_error(), "after moving the layer"), "%s", dg_last_error());
    dg_clear_error();
    gt_compare("layer_to", "weight after the refused step", before, w, (gt_tol)GT_EXACT);
    dg_scope_end(s);
    gt_use("cpu");
    dg_optimizer_free(opt);
    dg_layer_free(lin);
}
