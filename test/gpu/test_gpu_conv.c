/* test/gpu/test_gpu_conv.c — CPU vs gpu:0 for the NCHW ops: conv2d (stride, padding,
 * dilation, groups incl. depthwise, bias or not, non-square kernels, ResNet's stem and 3x3
 * blocks, f64), max/avg pooling (padding, ceil_mode, count_include_pad), adaptive average
 * pooling (divisible and not), and batch_norm in training (with the running-statistics update,
 * compared too) and eval mode, with and without affine parameters or running statistics. */
#include "gpu_compare.h"

#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define C(lo, hi, ...) { GT_CONST, GT_SHAPE(__VA_ARGS__), lo, hi }
#define G64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define TOL_F64 { 1e-10, 1e-12, false }
/* cuDNN may pick Winograd or FFT algorithms, whose f32 error follows the size of the inputs
 * rather than of each output: an output that cancels toward 0 needs 1e-4 absolute */
#define TOL_CONV { 1e-4, 1e-4, false }

/* ---- conv2d: in[0] x, in[1] w, in[2] b (when given) ---- */
/* the settings are assignments to p, which starts as dg_conv2d_default_params() */
#define CONV(name, bias, ...) static dg_tensor *name(dg_tensor *const *in) { \
        dg_conv2d_params p = dg_conv2d_default_params(); \
        __VA_ARGS__; \
        return dg_conv2d(in[0], in[1], (bias) ? in[2] : NULL, p); }
CONV(f_conv_basic, true, (void)0)
CONV(f_conv_s2p1, true, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1)
CONV(f_conv_dil2, true, p.padding[0] = p.padding[1] = 2, p.dilation[0] = p.dilation[1] = 2)
CONV(f_conv_groups2, true, p.groups = 2, p.padding[0] = p.padding[1] = 1)
CONV(f_conv_depthwise, true, p.groups = 6, p.padding[0] = p.padding[1] = 1)
CONV(f_conv_1x1_nobias, false, (void)0)
CONV(f_conv_1x1_s2_nobias, false, p.stride[0] = p.stride[1] = 2)
CONV(f_conv_rect, true, p.stride[0] = 2, p.stride[1] = 1, p.padding[0] = 1, p.padding[1] = 2)
CONV(f_conv_block, true, p.padding[0] = p.padding[1] = 1)
CONV(f_conv_stem, false, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 3)

/* ---- pools ---- */
/* the settings are assignments to p, which starts as dg_pool2d_default_params() */
#define POOL(name, fn, ...) static dg_tensor *name(dg_tensor *const *in) { \
        dg_pool2d_params p = dg_pool2d_default_params(); \
        __VA_ARGS__; \
        return fn(in[0], p); }
POOL(f_max_k2, dg_max_pool2d, p.kernel[0] = p.kernel[1] = 2)
POOL(f_max_k3s2p1, dg_max_pool2d, p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1)
POOL(f_max_ceil, dg_max_pool2d, p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = 2, p.ceil_mode = true)
POOL(f_max_rect, dg_max_pool2d, p.kernel[0] = 2, p.kernel[1] = 3, p.stride[0] = 1, p.stride[1] = 2)
POOL(f_avg_k2, dg_avg_pool2d, p.kernel[0] = p.kernel[1] = 2)
POOL(f_avg_pad_excl, dg_avg_pool2d, p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1)
POOL(f_avg_pad_incl, dg_avg_pool2d, p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1,
     p.count_include_pad = true)
POOL(f_avg_ceil, dg_avg_pool2d, p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = 2, p.ceil_mode = true)
POOL(f_avg_ceil_pad_incl, dg_avg_pool2d, p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1,
     p.ceil_mode = true, p.count_include_pad = true)
static dg_tensor *f_aap_1(dg_tensor *const *in) { return dg_adaptive_avg_pool2d(in[0], 1, 1); }
static dg_tensor *f_aap_3(dg_tensor *const *in) { return dg_adaptive_avg_pool2d(in[0], 3, 3); }
static dg_tensor *f_aap_2x3(dg_tensor *const *in) { return dg_adaptive_avg_pool2d(in[0], 2, 3); }

/* ---- batch_norm: in[0] x, in[1] weight, in[2] bias, in[3] running_mean, in[4] running_var.
 * In training the running statistics are updated in place: they are appended to the output so
 * the update is compared along with the normalised values. ---- */
static dg_tensor *with_stats(dg_tensor *y, dg_tensor *rm, dg_tensor *rv) {
    if (!y) return NULL;
    dg_tensor *parts[3] = { dg_reshape(y, DG_SHAPE(-1)), rm, rv };
    return dg_concat(parts, rm ? 3 : 1, 0);
}
static dg_tensor *f_bn_train(dg_tensor *const *in) {
    dg_batch_norm_params bnp = dg_batch_norm_default_params();
    bnp.training = true;
    return with_stats(dg_batch_norm(in[0], in[3], in[4], in[1], in[2], bnp), in[3], in[4]);
}
static dg_tensor *f_bn_train_m3(dg_tensor *const *in) {
    dg_batch_norm_params p = dg_batch_norm_default_params();
    p.training = true;
    p.momentum = 0.3;
    p.eps = 1e-3;
    return with_stats(dg_batch_norm(in[0], in[3], in[4], in[1], in[2], p), in[3], in[4]);
}
static dg_tensor *f_bn_train_noaffine(dg_tensor *const *in) {
    dg_batch_norm_params bnp2 = dg_batch_norm_default_params();
    bnp2.training = true;
    return with_stats(dg_batch_norm(in[0], in[3], in[4], NULL, NULL, bnp2), in[3], in[4]);
}
static dg_tensor *f_bn_train_nostats(dg_tensor *const *in) {
    dg_batch_norm_params bnp3 = dg_batch_norm_default_params();
    bnp3.training = true;
    return dg_batch_norm(in[0], NULL, NULL, in[1], in[2], bnp3);
}
/* the fused op: the CUDA backend has no fused entry, so this checks the op's own composition */
static dg_tensor *f_bn_relu_train(dg_tensor *const *in) {
    dg_batch_norm_params bnp = dg_batch_norm_default_params();
    bnp.training = true;
    return with_stats(dg_batch_norm_relu(in[0], in[3], in[4], in[1], in[2], bnp), in[3], in[4]);
}
static dg_tensor *f_bn_relu_eval(dg_tensor *const *in) {
    return dg_batch_norm_relu(in[0], in[3], in[4], in[1], in[2], dg_batch_norm_default_params());
}
static dg_tensor *f_bn_eval(dg_tensor *const *in) {
    return dg_batch_norm(in[0], in[3], in[4], in[1], in[2], dg_batch_norm_default_params());   /* eval */
}

/* x, weight, bias, running_mean, running_var for C channels */
#define BN_IN(c, ...) IN(G(__VA_ARGS__), { GT_GRAD, GT_SHAPE(c), 0.5, 1.5 }, G(c), C(-0.5, 0.5, c), C(0.5, 2, c))

static const gt_op_case cases[] = {
    { "conv2d 3x3 bias", f_conv_basic, 3, IN(G(2, 3, 8, 8), G(4, 3, 3, 3), G(4)), TOL_CONV, TOL_CONV },
    { "conv2d stride 2 padding 1", f_conv_s2p1, 3, IN(G(2, 3, 9, 9), G(5, 3, 3, 3), G(5)), TOL_CONV, TOL_CONV },
    { "conv2d dilation 2 padding 2", f_conv_dil2, 3, IN(G(1, 2, 10, 10), G(3, 2, 3, 3), G(3)), TOL_CONV, TOL_CONV },
    { "conv2d groups 2", f_conv_groups2, 3, IN(G(2, 4, 7, 7), G(6, 2, 3, 3), G(6)), TOL_CONV, TOL_CONV },
    { "conv2d depthwise (groups = C)", f_conv_depthwise, 3, IN(G(2, 6, 8, 8), G(6, 1, 3, 3), G(6)), TOL_CONV, TOL_CONV },
    { "conv2d 1x1 no bias", f_conv_1x1_nobias, 2, IN(G(2, 8, 5, 5), G(16, 8, 1, 1)), TOL_CONV, TOL_CONV },
    { "conv2d 1x1 stride 2 no bias (downsample)", f_conv_1x1_s2_nobias, 2, IN(G(2, 8, 6, 6), G(16, 8, 1, 1)), TOL_CONV, TOL_CONV },
    { "conv2d 3x5 kernel stride 2,1 padding 1,2", f_conv_rect, 3, IN(G(1, 3, 9, 11), G(4, 3, 3, 5), G(4)), TOL_CONV, TOL_CONV },
    { "conv2d ResNet block 16->32 3x3", f_conv_block, 3, IN(G(4, 16, 16, 16), G(32, 16, 3, 3), G(32)), TOL_CONV, TOL_CONV },
    { "conv2d ResNet stem 7x7 stride 2", f_conv_stem, 2, IN(G(2, 3, 32, 32), G(8, 3, 7, 7)), TOL_CONV, TOL_CONV },
    { "conv2d f64", f_conv_s2p1, 3, IN(G64(2, 3, 9, 9), G64(5, 3, 3, 3), G64(5)), TOL_F64, TOL_F64 },
    { "max_pool2d 2x2", f_max_k2, 1, IN(G(2, 3, 8, 8)), GT_EXACT, GT_EW },
    { "max_pool2d 3x3 stride 2 padding 1", f_max_k3s2p1, 1, IN(G(2, 4, 9, 9)), GT_EXACT, GT_EW },
    { "max_pool2d ceil_mode", f_max_ceil, 1, IN(G(1, 2, 8, 8)), GT_EXACT, GT_EW },
    { "max_pool2d 2x3 kernel stride 1,2", f_max_rect, 1, IN(G(2, 2, 5, 9)), GT_EXACT, GT_RED },
    { "avg_pool2d 2x2", f_avg_k2, 1, IN(G(2, 3, 8, 8)), GT_EW, GT_EW },
    { "avg_pool2d padding, exclude pad", f_avg_pad_excl, 1, IN(G(2, 3, 9, 9)), GT_EW, GT_EW },
    { "avg_pool2d padding, count_include_pad", f_avg_pad_incl, 1, IN(G(2, 3, 9, 9)), GT_EW, GT_EW },
    { "avg_pool2d ceil_mode", f_avg_ceil, 1, IN(G(1, 2, 8, 8)), GT_EW, GT_EW },
    { "avg_pool2d ceil_mode, padding, count_include_pad", f_avg_ceil_pad_incl, 1, IN(G(1, 2, 8, 8)), GT_EW, GT_EW },
    { "adaptive_avg_pool2d to 1x1", f_aap_1, 1, IN(G(2, 8, 7, 7)), GT_RED, GT_EW },
    { "adaptive_avg_pool2d 7x7 to 3x3", f_aap_3, 1, IN(G(2, 3, 7, 7)), GT_EW, GT_EW },
    { "adaptive_avg_pool2d 5x8 to 2x3", f_aap_2x3, 1, IN(G(1, 2, 5, 8)), GT_EW, GT_EW },
    { "batch_norm train [N,C]", f_bn_train, 5, BN_IN(6, 8, 6), GT_RED, GT_RED_LOOSE },
    { "batch_norm train [N,C,L]", f_bn_train, 5, BN_IN(4, 3, 4, 5), GT_RED, GT_RED_LOOSE },
    { "batch_norm train [N,C,H,W]", f_bn_train, 5, BN_IN(3, 2, 3, 4, 5), GT_RED, GT_RED_LOOSE },
    { "batch_norm train [8,64,16,16]", f_bn_train, 5, BN_IN(64, 8, 64, 16, 16), GT_RED, GT_RED_LOOSE },
    { "batch_norm train momentum 0.3 eps 1e-3", f_bn_train_m3, 5, BN_IN(3, 2, 3, 4, 4), GT_RED, GT_RED_LOOSE },
    { "batch_norm train no affine", f_bn_train_noaffine, 5, BN_IN(3, 2, 3, 4, 4), GT_RED, GT_RED_LOOSE },
    { "batch_norm train no running stats", f_bn_train_nostats, 3, BN_IN(3, 2, 3, 4, 4), GT_RED, GT_RED_LOOSE },
    { "batch_norm eval [N,C,H,W]", f_bn_eval, 5, BN_IN(3, 2, 3, 4, 5), GT_EW, GT_RED },
    { "batch_norm eval [N,C]", f_bn_eval, 5, BN_IN(6, 8, 6), GT_EW, GT_RED },
    { "batch_norm_relu train [N,C,H,W]", f_bn_relu_train, 5, BN_IN(3, 2, 3, 4, 5), GT_RED, GT_RED_LOOSE },
    { "batch_norm_relu eval [N,C,H,W]", f_bn_relu_eval, 5, BN_IN(3, 2, 3, 4, 5), GT_EW, GT_RED },
};

GT_TABLE_TESTS(gpu_conv, cases, gt_expect_op_matches_cpu, 5000)
