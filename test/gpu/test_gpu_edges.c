/* test/gpu/test_gpu_edges.c — CPU vs gpu:0 where kernels change schedule or meet special values:
 * sizes past the grid-stride cap (8192 blocks x 256 threads = 2,097,152 elements), softmax rows
 * longer than 4096 and more than 65535 rows, reductions with more outputs than 65535 blocks,
 * NaN and +-inf inputs for reductions, softmax, max pooling and maximum/minimum, f64 for the ops
 * that have it, the kernel fallbacks the cuDNN paths use (average pooling with padding, batch
 * norm), TF32 math on, out-of-range indices on the device. Kernels meant to match the CPU bit
 * for bit are compared within 2 ulp (GT_ULP2), not 1e-5. */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define G64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), -1, 1 }
#define C(...) { GT_CONST, GT_SHAPE(__VA_ARGS__), -1, 1 }
/* integers in [-2, 2): their log holds NaN (negative), -inf (0) and finite values */
#define SPECIAL(...) { GT_INTF, GT_SHAPE(__VA_ARGS__), -2, 2 }

static const int last[1] = { -1 }, first[1] = { 0 };

F(f_add, dg_add(in[0], in[1]))
F(f_mul_s, dg_mul_scalar(in[0], 1.5))
F(f_exp, dg_exp(in[0]))
F(f_relu, dg_relu(in[0]))
F(f_sum_last, dg_sum(in[0], last, 1, false))
F(f_max_last, dg_max(in[0], last, 1, false))
F(f_min_first, dg_min(in[0], first, 1, false))
F(f_argmax_last, dg_argmax(in[0], -1, false))
F(f_softmax, dg_softmax(in[0], -1))
F(f_log_softmax, dg_log_softmax(in[0], -1))
/* special values: log of {-2,-1,0,1} gives NaN, NaN, -inf, 0 */
F(f_log_sum, dg_sum(dg_log(in[0]), last, 1, false))
F(f_log_max, dg_max(dg_log(in[0]), last, 1, false))
F(f_log_min, dg_min(dg_log(in[0]), first, 1, false))
F(f_log_argmax, dg_argmax(dg_log(in[0]), -1, false))
F(f_log_softmax_special, dg_softmax(dg_log(in[0]), -1))
F(f_log_maximum, dg_maximum(dg_log(in[0]), in[1]))
F(f_log_minimum, dg_minimum(in[1], dg_log(in[0])))
F(f_neg_log_maximum, dg_maximum(dg_neg(dg_log(in[0])), in[1]))
static dg_tensor *f_log_maxpool(dg_tensor *const *in) {
    dg_pool2d_params plp = dg_pool2d_default_params();
    plp.kernel[0] = plp.kernel[1] = 2;
    return dg_max_pool2d(dg_log(in[0]), plp);
}
static dg_tensor *f_log_maxpool3(dg_tensor *const *in) {
    dg_pool2d_params plp2 = dg_pool2d_default_params();
    plp2.kernel[0] = plp2.kernel[1] = 3;
    plp2.stride[0] = plp2.stride[1] = 2;
    plp2.padding[0] = plp2.padding[1] = 1;
    return dg_max_pool2d(dg_log(in[0]), plp2);
}
static dg_tensor *f_maxpool3(dg_tensor *const *in) {
    dg_pool2d_params plp3 = dg_pool2d_default_params();
    plp3.kernel[0] = plp3.kernel[1] = 3;
    plp3.stride[0] = plp3.stride[1] = 2;
    plp3.padding[0] = plp3.padding[1] = 1;
    return dg_max_pool2d(in[0], plp3);
}
static dg_tensor *f_avgpool_pad(dg_tensor *const *in) {
    dg_pool2d_params plp4 = dg_pool2d_default_params();
    plp4.kernel[0] = plp4.kernel[1] = 3;
    plp4.stride[0] = plp4.stride[1] = 2;
    plp4.padding[0] = plp4.padding[1] = 1;
    return dg_avg_pool2d(in[0], plp4);
}
static dg_tensor *f_avgpool_pad_incl(dg_tensor *const *in) {
    dg_pool2d_params plp5 = dg_pool2d_default_params();
    plp5.kernel[0] = plp5.kernel[1] = 3;
    plp5.stride[0] = plp5.stride[1] = 2;
    plp5.padding[0] = plp5.padding[1] = 1;
    plp5.count_include_pad = true;
    return dg_avg_pool2d(in[0], plp5);
}
static dg_tensor *f_avgpool_ceil(dg_tensor *const *in) {
    dg_pool2d_params plp6 = dg_pool2d_default_params();
    plp6.kernel[0] = plp6.kernel[1] = 2;
    plp6.ceil_mode = true;
    return dg_avg_pool2d(in[0], plp6);
}
F(f_adaptive, dg_adaptive_avg_pool2d(in[0], 3, 2))
F(f_mean_last, dg_mean(in[0], last, 1, true))
F(f_where, dg_where(dg_greater(in[0], in[1]), in[0], in[1]))
F(f_sigmoid, dg_sigmoid(in[0]))
F(f_tanh, dg_tanh(in[0]))
F(f_sqrt_abs, dg_sqrt(dg_abs(in[0])))
F(f_div, dg_div(in[0], dg_add_scalar(dg_abs(in[1]), 0.5)))
F(f_clip, dg_clip(in[0], -0.5, 0.5))
F(f_transpose_add, dg_add(dg_transpose(in[0], 0, 1), in[1]))
static dg_tensor *f_matmul_tf32(dg_tensor *const *in) {
    dg_set_allow_tf32(true);
    dg_tensor *y = dg_matmul(in[0], in[1]);
    dg_set_allow_tf32(false);
    return y;
}
/* the default: cuDNN's fastest algorithm, FFT and Winograd included (3x3, stride 1 is where
 * Winograd wins); their error is a share of the largest output, not of each */
static dg_tensor *f_conv_fastest(dg_tensor *const *in) {
    dg_set_exact_gpu_conv(false);
    dg_conv2d_params p = dg_conv2d_default_params();
    p.padding[0] = p.padding[1] = 1;
    dg_tensor *y = dg_conv2d(in[0], in[1], in[2], p);
    dg_set_exact_gpu_conv(true);
    return y;
}

#define BIG 2200000   /* past the grid-stride cap */
/* TF32 keeps 10 mantissa bits of each operand: products differ from f32's by ~1e-3 relative */
#define TOL_TF32 { 1e-2, 5e-3, true }
/* FFT / Winograd: within 1e-3 of the largest element (measured ~3e-4 on an H200) */
#define TOL_FASTEST_CONV { 1e-3, 1e-3, true }

static const gt_op_case cases[] = {
    { "add past the grid-stride cap", f_add, 2, IN(G(BIG), G(BIG)), GT_EXACT, GT_EXACT },
    { "mul_scalar past the grid-stride cap", f_mul_s, 1, IN(G(BIG)), GT_EXACT, GT_EXACT },
    { "exp past the grid-stride cap", f_exp, 1, IN(G(BIG)), GT_ULP2, GT_ULP2 },
    { "relu past the grid-stride cap", f_relu, 1, IN(G(BIG)), GT_EXACT, GT_EXACT },
    { "sum over 70000 rows (> 65535 blocks)", f_sum_last, 1, IN(G(70000, 64)), GT_RED, GT_ULP2 },
    { "max over 70000 rows (> 65535 blocks)", f_max_last, 1, IN(G(70000, 64)), GT_EXACT, GT_EXACT },
    { "argmax over 70000 rows", f_argmax_last, 1, IN(G(70000, 64)), GT_EXACT, GT_EXACT },
    { "min over the batch of [3000, 7]", f_min_first, 1, IN(G(3000, 7)), GT_EXACT, GT_EXACT },
    { "sum of [2, 1100000] (split rows)", f_sum_last, 1, IN(G(2, 1100000)), GT_RED, GT_ULP2 },
    { "softmax rows of 5000 columns", f_softmax, 1, IN(G(3, 5000)), GT_RED, GT_RED },
    { "softmax rows of 20000 columns", f_softmax, 1, IN(G(2, 20000)), GT_RED, GT_RED },
    { "log_softmax rows of 5000 columns", f_log_softmax, 1, IN(G(3, 5000)), GT_RED, GT_RED },
    { "softmax over 70000 rows (> 65535 blocks)", f_softmax, 1, IN(G(70000, 3)), GT_RED, GT_RED },
    { "softmax 1100 columns over 70000 rows", f_log_softmax, 1, IN(G(70000, 1100)), GT_RED, GT_RED },
    { "sum with NaN and -inf", f_log_sum, 1, IN(SPECIAL(64, 33)), GT_RED, GT_RED },
    { "max with NaN and -inf", f_log_max, 1, IN(SPECIAL(64, 33)), GT_EXACT, GT_EXACT },
    { "min with NaN and -inf over a long axis", f_log_min, 1, IN(SPECIAL(5000, 3)), GT_EXACT, GT_EXACT },
    { "argmax with NaN and -inf", f_log_argmax, 1, IN(SPECIAL(64, 700)), GT_EXACT, GT_EXACT },
    { "softmax with NaN and -inf", f_log_softmax_special, 1, IN(SPECIAL(16, 40)), GT_RED, GT_RED },
    { "maximum with NaN and -inf", f_log_maximum, 2, IN(SPECIAL(40, 30), C(40, 30)), GT_EXACT, GT_EXACT },
    { "minimum with NaN and -inf", f_log_minimum, 2, IN(SPECIAL(40, 30), C(40, 30)), GT_EXACT, GT_EXACT },
    { "maximum with NaN and +inf", f_neg_log_maximum, 2, IN(SPECIAL(40, 30), C(40, 30)), GT_EXACT, GT_EXACT },
    { "max pool 2x2 with NaN and -inf", f_log_maxpool, 1, IN(SPECIAL(2, 3, 8, 8)), GT_EXACT, GT_EXACT },
    { "max pool 3x3/2 with NaN and -inf", f_log_maxpool3, 1, IN(SPECIAL(2, 3, 9, 9)), GT_EXACT, GT_EXACT },
    { "max pool 3x3/2 gradient", f_maxpool3, 1, IN(G(2, 3, 9, 9)), GT_EXACT, GT_ULP2 },
    { "avg pool 3x3/2 pad 1 (exclusive)", f_avgpool_pad, 1, IN(G(2, 3, 9, 9)), GT_ULP2, GT_ULP2 },
    { "avg pool 3x3/2 pad 1 (include pad)", f_avgpool_pad_incl, 1, IN(G(2, 3, 9, 9)), GT_ULP2, GT_ULP2 },
    { "avg pool 2x2 ceil mode", f_avgpool_ceil, 1, IN(G(2, 3, 7, 7)), GT_ULP2, GT_ULP2 },
    { "adaptive avg pool 7x5 -> 3x2", f_adaptive, 1, IN(G(2, 3, 7, 5)), GT_ULP2, GT_ULP2 },
    /* f64 for the ops that have it */
    { "add f64", f_add, 2, IN(G64(5, 7), G64(7)), GT_EXACT, GT_EXACT },
    { "exp f64", f_exp, 1, IN(G64(5, 7)), GT_ULP2_F64, GT_ULP2_F64 },
    { "sigmoid f64", f_sigmoid, 1, IN(G64(5, 7)), GT_ULP2, GT_ULP2 },
    { "tanh f64", f_tanh, 1, IN(G64(5, 7)), GT_ULP2, GT_ULP2 },
    { "sqrt(abs) f64", f_sqrt_abs, 1, IN(G64(5, 7)), GT_ULP2, GT_ULP2 },
    { "div f64", f_div, 2, IN(G64(5, 7), G64(5, 7)), GT_ULP2, GT_ULP2 },
    { "clip f64", f_clip, 1, IN(G64(5, 7)), GT_EXACT, GT_EXACT },
    { "where f64", f_where, 2, IN(G64(5, 7), G64(5, 7)), GT_EXACT, GT_EXACT },
    { "strided add f64", f_transpose_add, 2, IN(G64(7, 5), G64(5, 7)), GT_EXACT, GT_EXACT },
    { "max f64 over 70000 rows", f_max_last, 1, IN(G64(70000, 8)), GT_EXACT, GT_EXACT },
    { "mean f64", f_mean_last, 1, IN(G64(9, 300)), GT_RED, GT_RED },
    { "softmax f64 5000 columns", f_softmax, 1, IN(G64(3, 5000)), GT_RED, GT_RED },
    { "log_softmax f64", f_log_softmax, 1, IN(G64(6, 40)), GT_RED, GT_RED },
    { "max pool f64", f_maxpool3, 1, IN(G64(2, 3, 9, 9)), GT_EXACT, GT_ULP2_F64 },
    { "avg pool f64", f_avgpool_pad, 1, IN(G64(2, 3, 9, 9)), GT_ULP2, GT_ULP2 },
    { "adaptive avg pool f64", f_adaptive, 1, IN(G64(2, 3, 7, 5)), GT_ULP2, GT_ULP2 },
    { "matmul TF32", f_matmul_tf32, 2, IN(G(33, 65), G(65, 17)), TOL_TF32, TOL_TF32 },
    { "conv2d 3x3 with FFT and Winograd allowed", f_conv_fastest, 3, IN(G(4, 16, 12, 12), G(16, 16, 3, 3), G(16)), TOL_FASTEST_CONV,
      TOL_FASTEST_CONV },
};

GT_TABLE_TESTS(gpu_edges, cases, gt_expect_op_matches_cpu, 12000)

/* Indices out of range are an error on the device as on the CPU, never a wild read. */
Test(gpu_edges, out_of_range_indices_are_errors) {
    gt_gpu_begin();
    gt_use(gt_dut_name());
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(4, 3), DG_F32);
    dg_tensor *bad = dg_cast(dg_full(DG_SHAPE(2), 7, DG_F32), DG_I64);
    dg_tensor *neg = dg_cast(dg_full(DG_SHAPE(2), -9, DG_F32), DG_I64);
    cr_assert(x && bad && neg, "%s", dg_last_error());
    dg_clear_error();
    cr_expect_null(dg_index_select(x, bad, 0), "index_select with index 7 of 4 rows must fail");
    cr_expect(strstr(dg_last_error(), "7") || strstr(dg_last_error(), "range"), "message: %s", dg_last_error());
    dg_clear_error();
    cr_expect_null(dg_index_select(x, neg, 0), "index_select with index -9 must fail");
    dg_tensor *idx = dg_cast(dg_full(DG_SHAPE(4, 3), 5, DG_F32), DG_I64);
    dg_clear_error();
    cr_expect_null(dg_gather(x, idx, 1), "gather with index 5 of 3 columns must fail");
    dg_tensor *labels = dg_cast(dg_full(DG_SHAPE(4), 3, DG_F32), DG_I64);
    dg_clear_error();
    cr_expect_null(dg_cross_entropy(x, labels), "label 3 of 3 classes must fail");
    /* the device is still usable afterwards */
    dg_clear_error();
    dg_tensor *ok = dg_sum_all(x);
    cr_expect(ok && isfinite(dg_item(ok)), "%s", dg_last_error());
    dg_scope_end(s);
    gt_use("cpu");
}

/* The four gradient defects (test/grad_parity_cases.h) on gpu:0, against PyTorch's values. */
#include "../grad_parity_cases.h"
Test(gpu_edges, gradient_parity_cases_on_the_device, .init = gt_gpu_begin) { gp_all_cases(gt_dut()); }

/* Integer arithmetic (the i32/i64 kernels) and type promotion on gpu:0 (test/int_promotion_cases.h). */
#include "../int_promotion_cases.h"
Test(gpu_edges, integer_arithmetic_and_promotion_on_the_device, .init = gt_gpu_begin) { ip_all_cases(gt_dut()); }
