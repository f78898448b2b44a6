/* test/gpu/test_gpu_conv_pool_ext.c — CPU vs gpu:0 for the conv/pool parity ops:
 * conv_transpose2d (stride, padding, output_padding incl. past the stride, dilation, groups,
 * bias, f64), conv1d, max_pool2d with dilation and indices, avg_pool2d with divisor_override,
 * adaptive_max_pool2d and the 1-d pools. Where an op gives indices they are appended (as
 * values of the output's dtype, exact at these sizes) to the flattened output, so the
 * comparison covers them too. */
#include "gpu_compare.h"

#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define G64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), 0, 0 }
/* values on a coarse grid (integers in [-3, 3)): many tied maxima, so the tie rule is compared */
#define TIES(...) { GT_INTF, GT_SHAPE(__VA_ARGS__), -3, 3 }
#define TOL_F64 { 1e-10, 1e-12, false }
#define TOL_CONV { 1e-4, 1e-4, false }   /* test_gpu_conv.c's: cuDNN's algorithms sum in other orders */

/* y flattened, then idx (may be NULL) as y's dtype */
static dg_tensor *with_idx(dg_tensor *y, dg_tensor *idx) {
    if (!y) return NULL;
    if (!idx) return y;
    dg_tensor *parts[2] = { dg_reshape(y, DG_SHAPE(-1)), dg_reshape(dg_cast(idx, dg_dtype_of(y)), DG_SHAPE(-1)) };
    return dg_concat(parts, 2, 0);
}

#define CT(name, bias, ...) static dg_tensor *name(dg_tensor *const *in) { \
        dg_conv_transpose2d_params p = dg_conv_transpose2d_default_params(); \
        __VA_ARGS__; \
        return dg_conv_transpose2d(in[0], in[1], (bias) ? in[2] : NULL, p); }
CT(f_ct_basic, true, (void)0)
CT(f_ct_s2_op1, true, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1, p.output_padding[0] = p.output_padding[1] = 1)
CT(f_ct_groups_dil, true, p.groups = 2, p.dilation[0] = 2, p.stride[1] = 2, p.padding[1] = 1, p.output_padding[1] = 1)
CT(f_ct_op_past_stride, false, p.dilation[0] = p.dilation[1] = 3, p.padding[0] = p.padding[1] = 1,
   p.output_padding[0] = 1, p.output_padding[1] = 2)

static dg_tensor *f_conv1d(dg_tensor *const *in) {
    dg_conv1d_params p = dg_conv1d_default_params();
    p.stride = 2, p.padding = 1, p.dilation = 2, p.groups = 2;
    return dg_conv1d(in[0], in[1], in[2], p);
}

#define MP(name, ...) static dg_tensor *name(dg_tensor *const *in) { \
        dg_pool2d_params p = dg_pool2d_default_params(); \
        __VA_ARGS__; \
        dg_tensor *idx = NULL; \
        return with_idx(dg_max_pool2d_with_indices(in[0], p, &idx), idx); }
MP(f_mp_dil, p.kernel[0] = 3, p.kernel[1] = 2, p.stride[0] = 2, p.stride[1] = 1, p.padding[0] = p.padding[1] = 1,
   p.dilation[0] = p.dilation[1] = 2)
MP(f_mp_dil_ceil, p.kernel[0] = p.kernel[1] = 2, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1,
   p.dilation[0] = 2, p.dilation[1] = 3, p.ceil_mode = true)
MP(f_mp_idx, p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = 2, p.padding[0] = p.padding[1] = 1)
static dg_tensor *f_mp_dil_plain(dg_tensor *const *in) {   /* the plain entry point routes dilation too */
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = 2;
    p.stride[0] = p.stride[1] = 1;
    p.dilation[0] = p.dilation[1] = 2;
    return dg_max_pool2d(in[0], p);
}
static dg_tensor *f_avg_divisor(dg_tensor *const *in) {
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = 3; p.kernel[1] = 2;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0] = p.padding[1] = 1;
    p.ceil_mode = true;
    p.count_include_pad = true;
    p.divisor_override = 5;
    return dg_avg_pool2d(in[0], p);
}
static dg_tensor *f_amp(dg_tensor *const *in) {
    dg_tensor *idx = NULL;
    return with_idx(dg_adaptive_max_pool2d(in[0], 3, 4, &idx), idx);
}
static dg_tensor *f_mp1(dg_tensor *const *in) {
    dg_pool1d_params p = dg_pool1d_default_params();
    p.kernel = 3; p.stride = 2; p.padding = 1; p.dilation = 2; p.ceil_mode = true;
    dg_tensor *idx = NULL;
    return with_idx(dg_max_pool1d_with_indices(in[0], p, &idx), idx);
}
static dg_tensor *f_ap1(dg_tensor *const *in) {
    dg_pool1d_params p = dg_pool1d_default_params();
    p.kernel = 4; p.stride = 3; p.padding = 2; p.ceil_mode = true;
    return dg_avg_pool1d(in[0], p);
}
static dg_tensor *f_amp1(dg_tensor *const *in) {
    dg_tensor *idx = NULL;
    return with_idx(dg_adaptive_max_pool1d(in[0], 4, &idx), idx);
}
static dg_tensor *f_aap1(dg_tensor *const *in) { return dg_adaptive_avg_pool1d(in[0], 4); }

static const gt_op_case cases[] = {
    { "conv_transpose2d 3x3 bias", f_ct_basic, 3, IN(G(2, 3, 5, 6), G(3, 4, 3, 3), G(4)), TOL_CONV, TOL_CONV },
    { "conv_transpose2d stride 2 padding 1 output_padding 1", f_ct_s2_op1, 3, IN(G(2, 3, 5, 5), G(3, 2, 3, 3), G(2)), TOL_CONV, TOL_CONV },
    { "conv_transpose2d groups 2 dilation 2,1 stride 1,2", f_ct_groups_dil, 3, IN(G(1, 4, 4, 5), G(4, 3, 2, 3), G(6)), TOL_CONV, TOL_CONV },
    { "conv_transpose2d output_padding past the stride", f_ct_op_past_stride, 2, IN(G(2, 2, 4, 3), G(2, 3, 3, 2)), TOL_CONV, TOL_CONV },
    { "conv_transpose2d f64", f_ct_s2_op1, 3, IN(G64(2, 3, 5, 5), G64(3, 2, 3, 3), G64(2)), TOL_F64, TOL_F64 },
    { "conv1d stride 2 padding 1 dilation 2 groups 2", f_conv1d, 3, IN(G(2, 4, 11), G(6, 2, 3), G(6)), TOL_CONV, TOL_CONV },
    { "max_pool2d dilation 2 with indices (ties)", f_mp_dil, 1, IN(TIES(2, 3, 9, 8)), GT_EXACT, GT_EXACT },
    { "max_pool2d dilation 2,3 ceil_mode with indices", f_mp_dil_ceil, 1, IN(G(1, 2, 9, 10)), GT_EXACT, GT_EXACT },
    { "max_pool2d 3x3 s2 p1 with indices (ties)", f_mp_idx, 1, IN(TIES(2, 2, 7, 9)), GT_EXACT, GT_EXACT },
    { "max_pool2d dilation 2 (plain entry)", f_mp_dil_plain, 1, IN(G(2, 2, 6, 7)), GT_EXACT, GT_EXACT },
    { "max_pool2d dilation f64", f_mp_dil, 1, IN(G64(1, 2, 9, 8)), GT_EXACT, GT_EXACT },
    { "avg_pool2d divisor_override 5", f_avg_divisor, 1, IN(G(2, 2, 7, 6)), GT_EW, GT_EW },
    { "adaptive_max_pool2d 7x5 to 3x4 (ties)", f_amp, 1, IN(TIES(2, 3, 7, 5)), GT_EXACT, GT_EXACT },
    { "adaptive_max_pool2d f64", f_amp, 1, IN(G64(2, 3, 7, 5)), GT_EXACT, GT_EXACT },
    { "max_pool1d dilation 2 ceil_mode with indices", f_mp1, 1, IN(TIES(2, 3, 11)), GT_EXACT, GT_EXACT },
    { "avg_pool1d ceil_mode count_include_pad", f_ap1, 1, IN(G(2, 3, 10)), GT_EW, GT_EW },
    { "adaptive_max_pool1d 10 to 4", f_amp1, 1, IN(G(2, 3, 10)), GT_EXACT, GT_EXACT },
    { "adaptive_avg_pool1d 10 to 4", f_aap1, 1, IN(G(2, 3, 10)), GT_EW, GT_EW },
};
GT_TABLE_TESTS(gpu_conv_pool_ext, cases, gt_expect_op_matches_cpu, 14000)
