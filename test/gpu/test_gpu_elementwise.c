/* test/gpu/test_gpu_elementwise.c — CPU vs gpu:0 for the elementwise ops of ops.h: binary ops
 * with NumPy broadcasting (same shape, row/column/outer broadcasts, 0-d operands, strided
 * views), the scalar forms, unary math, clip, comparisons, where, the activations and
 * softmax/log_softmax along every kind of axis. Values and input gradients, one row per case. */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }           /* requires grad, U[-1, 1) */
#define GP(lo, hi, ...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), lo, hi } /* requires grad, U[lo, hi) */
#define G0 { GT_GRAD, GT_SCALAR, 0, 0 }

F(f_add, dg_add(in[0], in[1]))
F(f_sub, dg_sub(in[0], in[1]))
F(f_mul, dg_mul(in[0], in[1]))
F(f_div, dg_div(in[0], in[1]))
F(f_maximum, dg_maximum(in[0], in[1]))
F(f_minimum, dg_minimum(in[0], in[1]))
F(f_pow, dg_pow(in[0], in[1]))
/* a transposed (strided) left operand: the kernel must follow strides, not assume density */
F(f_add_strided, dg_add(dg_transpose(in[0], 0, 1), in[1]))
F(f_mul_sliced, dg_mul(dg_slice(in[0], 1, 1, 7, 2), in[1]))

F(f_add_s, dg_add_scalar(in[0], 2.5))
F(f_sub_s, dg_sub_scalar(in[0], 2.5))
F(f_rsub_s, dg_rsub_scalar(in[0], 2.5))
F(f_mul_s, dg_mul_scalar(in[0], -1.5))
F(f_div_s, dg_div_scalar(in[0], 4.0))
F(f_rdiv_s, dg_rdiv_scalar(in[0], 3.0))
F(f_pow_s, dg_pow_scalar(in[0], 2.5))
F(f_pow_s_int, dg_pow_scalar(in[0], 3.0))
F(f_neg, dg_neg(in[0]))
F(f_exp, dg_exp(in[0]))
F(f_log, dg_log(in[0]))
F(f_sqrt, dg_sqrt(in[0]))
F(f_abs, dg_abs(in[0]))
F(f_clip, dg_clip(in[0], -0.5, 0.5))
F(f_clip_lo, dg_clip(in[0], 0.0, 1e30))

/* comparisons give bool; a float view of them keeps the comparison exact and lets `where` use them */
F(f_greater, dg_greater(in[0], in[1]))
F(f_equal, dg_equal(in[0], in[1]))
F(f_where, dg_where(dg_greater(in[0], in[1]), in[0], in[1]))
F(f_where_mask, dg_where(in[2], in[0], in[1]))

F(f_relu, dg_relu(in[0]))
F(f_add_relu, dg_add_relu(in[0], in[1]))
F(f_leaky, dg_leaky_relu(in[0], 0.2))
F(f_sigmoid, dg_sigmoid(in[0]))
F(f_tanh, dg_tanh(in[0]))
F(f_gelu, dg_gelu(in[0], false))
F(f_gelu_tanh, dg_gelu(in[0], true))
F(f_softmax, dg_softmax(in[0], -1))
F(f_softmax0, dg_softmax(in[0], 0))
F(f_softmax_mid, dg_softmax(in[0], 1))
F(f_log_softmax, dg_log_softmax(in[0], -1))
F(f_log_softmax_mid, dg_log_softmax(in[0], 1))
/* logits up to 100: exp overflows float beyond 88, so a kernel that skips the max subtraction fails here */
F(f_softmax_big, dg_softmax(dg_mul_scalar(in[0], 100.0), -1))
F(f_log_softmax_big, dg_log_softmax(dg_mul_scalar(in[0], 100.0), -1))

static const gt_op_case cases[] = {
    /* binary, broadcasting */
    { "add [3,4]+[3,4]", f_add, 2, IN(G(3, 4), G(3, 4)), GT_ULP2, GT_ULP2 },
    { "add [3,4]+[4]", f_add, 2, IN(G(3, 4), G(4)), GT_ULP2, GT_RED },
    { "add [3,1]+[1,4]", f_add, 2, IN(G(3, 1), G(1, 4)), GT_ULP2, GT_RED },
    { "add [2,3,4]+0-d", f_add, 2, IN(G(2, 3, 4), G0), GT_ULP2, GT_RED },
    { "add [1000,33]+[33] (many blocks)", f_add, 2, IN(G(1000, 33), G(33)), GT_ULP2, GT_RED_LOOSE },
    { "add transposed view", f_add_strided, 2, IN(G(5, 3), G(3, 5)), GT_ULP2, GT_ULP2 },
    { "sub [3,1]+[1,4]", f_sub, 2, IN(G(3, 1), G(1, 4)), GT_ULP2, GT_RED },
    { "sub [4]-[2,3,4]", f_sub, 2, IN(G(4), G(2, 3, 4)), GT_ULP2, GT_RED },
    { "mul [2,3,4]*[3,1]", f_mul, 2, IN(G(2, 3, 4), G(3, 1)), GT_ULP2, GT_RED },
    { "mul strided slice", f_mul_sliced, 2, IN(G(4, 8), G(4, 3)), GT_ULP2, GT_ULP2 },
    { "mul [2,1,4,1]*[3,1,5]", f_mul, 2, IN(G(2, 1, 4, 1), G(3, 1, 5)), GT_ULP2, GT_RED },
    { "div [3,4]/[3,4]", f_div, 2, IN(G(3, 4), GP(0.5, 2, 3, 4)), GT_ULP2, GT_ULP2 },
    { "div [3,4]/[4]", f_div, 2, IN(G(3, 4), GP(0.5, 2, 4)), GT_ULP2, GT_RED },
    { "maximum [3,4],[4]", f_maximum, 2, IN(G(3, 4), G(4)), GT_ULP2, GT_RED },
    { "minimum [5],[5]", f_minimum, 2, IN(G(5), G(5)), GT_ULP2, GT_ULP2 },
    { "minimum [2,3],0-d", f_minimum, 2, IN(G(2, 3), G0), GT_ULP2, GT_RED },
    { "pow [2,3]^[3]", f_pow, 2, IN(GP(0.5, 2, 2, 3), GP(0.5, 2, 3)), GT_ULP2, GT_RED },
    /* scalar forms */
    { "add_scalar", f_add_s, 1, IN(G(3, 4)), GT_ULP2, GT_ULP2 },
    { "sub_scalar", f_sub_s, 1, IN(G(3, 4)), GT_ULP2, GT_ULP2 },
    { "rsub_scalar", f_rsub_s, 1, IN(G(3, 4)), GT_ULP2, GT_ULP2 },
    { "mul_scalar", f_mul_s, 1, IN(G(3, 4)), GT_ULP2, GT_ULP2 },
    { "div_scalar", f_div_s, 1, IN(G(3, 4)), GT_ULP2, GT_ULP2 },
    { "rdiv_scalar", f_rdiv_s, 1, IN(GP(0.5, 2, 3, 4)), GT_ULP2, GT_ULP2 },
    { "pow_scalar 2.5", f_pow_s, 1, IN(GP(0.5, 2, 3, 4)), GT_ULP2, GT_ULP2 },
    { "pow_scalar 3 (negative base)", f_pow_s_int, 1, IN(G(3, 4)), GT_ULP2, GT_ULP2 },
    /* unary */
    { "neg", f_neg, 1, IN(G(3, 4)), GT_ULP2, GT_ULP2 },
    { "exp", f_exp, 1, IN(GP(-3, 3, 3, 4)), GT_ULP2, GT_ULP2 },
    { "log", f_log, 1, IN(GP(0.1, 5, 3, 4)), GT_ULP2, GT_ULP2 },
    { "sqrt", f_sqrt, 1, IN(GP(0.1, 5, 3, 4)), GT_ULP2, GT_ULP2 },
    { "abs", f_abs, 1, IN(G(3, 4)), GT_ULP2, GT_ULP2 },
    { "clip [-0.5, 0.5]", f_clip, 1, IN(G(4, 5)), GT_ULP2, GT_ULP2 },
    { "clip [0, 1e30]", f_clip_lo, 1, IN(G(4, 5)), GT_ULP2, GT_ULP2 },
    { "exp [4097] (tail block)", f_exp, 1, IN(G(4097)), GT_ULP2, GT_ULP2 },
    /* comparisons and where (comparisons: exact) */
    { "greater [3,4]>[4]", f_greater, 2, IN(G(3, 4), G(4)), GT_EXACT, GT_EXACT },
    { "equal on integers", f_equal, 2, IN({ GT_INTF, GT_SHAPE(4, 6), 0, 3 }, { GT_INTF, GT_SHAPE(6), 0, 3 }), GT_EXACT, GT_EXACT },
    { "where(a>b, a, b)", f_where, 2, IN(G(3, 4), G(4)), GT_ULP2, GT_RED },
    { "where(mask, a, b) broadcast", f_where_mask, 3,
      IN(G(2, 3, 4), G(3, 1), { GT_MASK, GT_SHAPE(2, 1, 4), 0, 0 }), GT_ULP2, GT_RED },
    /* activations */
    { "relu", f_relu, 1, IN(G(4, 5)), GT_ULP2, GT_ULP2 },
    { "add_relu [3,4]+[4]", f_add_relu, 2, IN(G(3, 4), G(4)), GT_ULP2, GT_RED },
    { "leaky_relu 0.2", f_leaky, 1, IN(G(4, 5)), GT_ULP2, GT_ULP2 },
    { "sigmoid", f_sigmoid, 1, IN(GP(-6, 6, 4, 5)), GT_ULP2, GT_ULP2 },
    { "tanh", f_tanh, 1, IN(GP(-3, 3, 4, 5)), GT_ULP2, GT_ULP2 },
    { "gelu (erf)", f_gelu, 1, IN(GP(-4, 4, 4, 5)), GT_ULP2, GT_ULP2 },
    { "gelu (tanh)", f_gelu_tanh, 1, IN(GP(-4, 4, 4, 5)), GT_ULP2, GT_ULP2 },
    { "relu [3,1025]", f_relu, 1, IN(G(3, 1025)), GT_ULP2, GT_ULP2 },
    /* softmax family: rows short and long (one warp, many warps), every axis position */
    { "softmax last axis [3,5]", f_softmax, 1, IN(GP(-2, 2, 3, 5)), GT_RED, GT_RED },
    { "softmax last axis [7,1000]", f_softmax, 1, IN(GP(-4, 4, 7, 1000)), GT_RED, GT_RED },
    { "softmax axis 0 [3,5]", f_softmax0, 1, IN(GP(-2, 2, 3, 5)), GT_RED, GT_RED },
    { "softmax middle axis [2,6,3]", f_softmax_mid, 1, IN(GP(-2, 2, 2, 6, 3)), GT_RED, GT_RED },
    { "softmax large logits", f_softmax_big, 1, IN(G(4, 33)), GT_RED, GT_RED },
    { "log_softmax last axis [4,10]", f_log_softmax, 1, IN(GP(-3, 3, 4, 10)), GT_RED, GT_RED },
    { "log_softmax last axis [5,3000]", f_log_softmax, 1, IN(GP(-3, 3, 5, 3000)), GT_RED, GT_RED },
    { "log_softmax middle axis [2,4,3]", f_log_softmax_mid, 1, IN(GP(-2, 2, 2, 4, 3)), GT_RED, GT_RED },
    { "log_softmax large logits", f_log_softmax_big, 1, IN(G(4, 33)), GT_RED, GT_RED },
};

GT_TABLE_TESTS(gpu_elementwise, cases, gt_expect_op_matches_cpu, 1000)
