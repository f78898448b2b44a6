/* test/registry_cases.h — the registry harness (ggml's test-backend-ops for dygraph): one line per
 * op of eager/ops/registry.h, and runners that take every line through every float dtype on a
 * device. Per op × dtype × device:
 *   - forward against the same op in float64 on the CPU, run on the inputs rounded to the dtype
 *     (so only the op's own arithmetic differs), within the dtype's tolerance;
 *   - the entry path: the op was entered (dg_op_enter) under its own registry id, and a node its
 *     output carries is named by the registry;
 *   - ownership: with no scope open, freeing the result leaves no tensor behind;
 *   - NULL inputs: each tensor input replaced by NULL gives NULL (or an error status) and a message;
 *   - gradients: float64 gradients on the CPU against central finite differences, and every other
 *     dtype and device against those CPU float64 gradients;
 *   - ONNX: an op with a mapper exports (a one-op model), one the registry calls not exportable is
 *     refused naming it.
 * The CPU suite (test/test_registry.c) also fails when a registry op has no line here, so a new op
 * cannot land untested; the GPU suite (test/gpu/test_gpu_registry.c) runs the same lines on gpu:0.
 * This adds breadth: the hand-written goldens against PyTorch stay the oracle for semantics. */
#ifndef DG_TEST_REGISTRY_CASES_H
#define DG_TEST_REGISTRY_CASES_H

#include <dygraph.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../eager/ops/registry.h"

/* input kinds: f float with gradient U(-1,1); p positive float with gradient U(0.5,2); q float
 * with gradient in (0.1,0.9) (probabilities); c float constant U(-1,1); k positive constant;
 * r probability constant; i int64 index in [0,range); u int64 index distinct along the last dim;
 * b bool mask */
typedef struct { char kind; int ndim; int64_t d[4]; int64_t range; } rc_in;
typedef dg_tensor *(*rc_fn)(dg_tensor *const *in);

enum {
    RC_NO_HALF = 1,      /* refuses float16/bfloat16 (or is meaningless there) */
    RC_NO_GRAD = 2,      /* no gradient to check (integer or bool result, or a constant) */
    RC_NO_FLOAT = 4,     /* no float input: runs once, with the index dtype */
    RC_LOOSE = 8,        /* half tolerance widened: a long chain of roundings (norms, losses) */
};

typedef struct {
    dg_op_id op;
    rc_fn run;
    int n_in;
    rc_in in[5];
    unsigned flags;
} rc_case;

#define RI(k, ...) { .kind = k, .ndim = DG_NARGS(__VA_ARGS__), .d = { __VA_ARGS__ } }
#define RIX(k, r, ...) { .kind = k, .ndim = DG_NARGS(__VA_ARGS__), .d = { __VA_ARGS__ }, .range = r }

/* ---- the op calls ---- */
#define A0 in[0]
#define A1 in[1]
#define A2 in[2]
#define A3 in[3]
static dg_tensor *r_add(dg_tensor *const *in) { return dg_add(A0, A1); }
static dg_tensor *r_sub(dg_tensor *const *in) { return dg_sub(A0, A1); }
static dg_tensor *r_mul(dg_tensor *const *in) { return dg_mul(A0, A1); }
static dg_tensor *r_div(dg_tensor *const *in) { return dg_div(A0, A1); }
static dg_tensor *r_maximum(dg_tensor *const *in) { return dg_maximum(A0, A1); }
static dg_tensor *r_minimum(dg_tensor *const *in) { return dg_minimum(A0, A1); }
static dg_tensor *r_pow(dg_tensor *const *in) { return dg_pow(A0, A1); }
static dg_tensor *r_add_relu(dg_tensor *const *in) { return dg_add_relu(A0, A1); }
static dg_tensor *r_greater(dg_tensor *const *in) { return dg_greater(A0, A1); }
static dg_tensor *r_equal(dg_tensor *const *in) { return dg_equal(A0, A1); }
static dg_tensor *r_where(dg_tensor *const *in) { return dg_where(A0, A1, A2); }
static dg_tensor *r_add_scalar(dg_tensor *const *in) { return dg_add_scalar(A0, 0.75); }
static dg_tensor *r_sub_scalar(dg_tensor *const *in) { return dg_sub_scalar(A0, 0.75); }
static dg_tensor *r_rsub_scalar(dg_tensor *const *in) { return dg_rsub_scalar(A0, 0.75); }
static dg_tensor *r_mul_scalar(dg_tensor *const *in) { return dg_mul_scalar(A0, -1.5); }
static dg_tensor *r_div_scalar(dg_tensor *const *in) { return dg_div_scalar(A0, 4.0); }
static dg_tensor *r_rdiv_scalar(dg_tensor *const *in) { return dg_rdiv_scalar(A0, 2.0); }
static dg_tensor *r_pow_scalar(dg_tensor *const *in) { return dg_pow_scalar(A0, 2.5); }
static dg_tensor *r_neg(dg_tensor *const *in) { return dg_neg(A0); }
static dg_tensor *r_exp(dg_tensor *const *in) { return dg_exp(A0); }
static dg_tensor *r_log(dg_tensor *const *in) { return dg_log(A0); }
static dg_tensor *r_sqrt(dg_tensor *const *in) { return dg_sqrt(A0); }
static dg_tensor *r_abs(dg_tensor *const *in) { return dg_abs(A0); }
static dg_tensor *r_clip(dg_tensor *const *in) { return dg_clip(A0, -0.4, 0.6); }
static dg_tensor *r_relu(dg_tensor *const *in) { return dg_relu(A0); }
static dg_tensor *r_leaky_relu(dg_tensor *const *in) { return dg_leaky_relu(A0, 0.1); }
static dg_tensor *r_sigmoid(dg_tensor *const *in) { return dg_sigmoid(A0); }
static dg_tensor *r_tanh(dg_tensor *const *in) { return dg_tanh(A0); }
static dg_tensor *r_gelu(dg_tensor *const *in) { return dg_gelu(A0, false); }
static dg_tensor *r_matmul(dg_tensor *const *in) { return dg_matmul(A0, A1); }
static dg_tensor *r_linear(dg_tensor *const *in) { return dg_linear(A0, A1, A2); }
static dg_tensor *r_softmax(dg_tensor *const *in) { return dg_softmax(A0, 1); }
static dg_tensor *r_log_softmax(dg_tensor *const *in) { return dg_log_softmax(A0, -1); }
static dg_tensor *r_sum(dg_tensor *const *in) { return dg_sum(A0, (int[]){ 1 }, 1, false); }
static dg_tensor *r_max(dg_tensor *const *in) { return dg_max(A0, (int[]){ 0, 2 }, 2, true); }
static dg_tensor *r_min(dg_tensor *const *in) { return dg_min(A0, (int[]){ 2 }, 1, false); }
static dg_tensor *r_mean(dg_tensor *const *in) { return dg_mean(A0, (int[]){ -1 }, 1, true); }
static dg_tensor *r_sum_all(dg_tensor *const *in) { return dg_sum_all(A0); }
static dg_tensor *r_mean_all(dg_tensor *const *in) { return dg_mean_all(A0); }
static dg_tensor *r_argmax(dg_tensor *const *in) { return dg_argmax(A0, 1, false); }
static dg_tensor *r_argmin(dg_tensor *const *in) { return dg_argmin(A0, 0, true); }
static dg_tensor *r_cumsum(dg_tensor *const *in) { return dg_cumsum(A0, 1); }
static dg_tensor *r_prod(dg_tensor *const *in) { return dg_prod(A0, (int[]){ 1 }, 1, false); }
static dg_tensor *r_contiguous(dg_tensor *const *in) {   /* of a transposed view: a real copy */
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_contiguous(dg_transpose(A0, 0, 1));
    if (y) y = dg_keep_in_parent(y);
    dg_scope_end(s);
    return y;
}
static dg_tensor *r_clone(dg_tensor *const *in) { return dg_clone(A0); }
/* half -> float32 (a real cast); float32 and float64 keep their width: float64 for the finite
 * differences (through float32 they would measure its rounding), float32 for ONNX */
static dg_tensor *r_cast(dg_tensor *const *in) { return dg_cast(A0, dg_dtype_of(A0) == DG_F64 ? DG_F64 : DG_F32); }
static dg_tensor *r_to_device(dg_tensor *const *in) { return dg_to_device(A0, dg_cpu()); }
static dg_tensor *r_reshape(dg_tensor *const *in) { return dg_reshape(A0, DG_SHAPE(4, -1)); }
static dg_tensor *r_flatten(dg_tensor *const *in) { return dg_flatten(A0, 1, 2); }
static dg_tensor *r_permute(dg_tensor *const *in) { return dg_permute(A0, (int[]){ 2, 0, 1 }); }
static dg_tensor *r_transpose(dg_tensor *const *in) { return dg_transpose(A0, 0, 2); }
static dg_tensor *r_squeeze(dg_tensor *const *in) { return dg_squeeze(A0, 1); }
static dg_tensor *r_unsqueeze(dg_tensor *const *in) { return dg_unsqueeze(A0, 1); }
static dg_tensor *r_expand(dg_tensor *const *in) { return dg_expand(A0, DG_SHAPE(3, 4)); }
static dg_tensor *r_slice(dg_tensor *const *in) { return dg_slice(A0, 1, 1, 5, 2); }
static dg_tensor *r_concat(dg_tensor *const *in) { return dg_concat((dg_tensor *[]){ A0, A1 }, 2, 1); }
static dg_tensor *r_split(dg_tensor *const *in) {
    dg_tensor *out[2] = { 0 };
    if (dg_split(A0, 2, (int64_t[]){ 1, 3 }, 1, out)) return NULL;
    dg_tensor_free(out[0]);
    return out[1];
}
static dg_tensor *r_index_select(dg_tensor *const *in) { return dg_index_select(A0, A1, 0); }
static dg_tensor *r_gather(dg_tensor *const *in) { return dg_gather(A0, A1, 1); }
static dg_tensor *r_one_hot(dg_tensor *const *in) { return dg_one_hot(A0, 4); }
static dg_tensor *r_scatter_add(dg_tensor *const *in) { return dg_scatter_add(A0, 1, A1, A2); }
static dg_tensor *r_scatter(dg_tensor *const *in) { return dg_scatter(A0, 1, A1, A2); }
static dg_tensor *r_argsort(dg_tensor *const *in) { return dg_argsort(A0, 1, true); }
static dg_tensor *r_sort(dg_tensor *const *in) {
    dg_tensor *v = NULL;
    return dg_sort(A0, 1, false, &v, NULL) ? NULL : v;
}
static dg_tensor *r_sort_indices(dg_tensor *const *in) {
    dg_tensor *ix = NULL;
    return dg_sort(A0, 1, true, NULL, &ix) ? NULL : ix;
}
static dg_tensor *r_topk(dg_tensor *const *in) {
    dg_tensor *v = NULL;
    return dg_topk(A0, 2, 1, true, &v, NULL) ? NULL : v;
}
static dg_tensor *r_topk_indices(dg_tensor *const *in) {
    dg_tensor *ix = NULL;
    return dg_topk(A0, 2, 1, false, NULL, &ix) ? NULL : ix;
}
static dg_tensor *r_flip(dg_tensor *const *in) { return dg_flip(A0, (int[]){ 1 }, 1); }
static dg_tensor *r_tile(dg_tensor *const *in) { return dg_tile(A0, (int64_t[]){ 2, 1 }, 2); }
static dg_tensor *r_masked_fill(dg_tensor *const *in) { return dg_masked_fill(A0, A1, 0.25); }
static dg_tensor *r_logsumexp(dg_tensor *const *in) { return dg_logsumexp(A0, (int[]){ 1 }, 1, false); }
static dg_tensor *r_var(dg_tensor *const *in) { return dg_var(A0, (int[]){ 1 }, 1, true, false); }
static dg_tensor *r_std(dg_tensor *const *in) { return dg_std(A0, (int[]){ 0 }, 1, false, true); }
static dg_tensor *r_norm(dg_tensor *const *in) { return dg_norm(A0, 2.0, (int[]){ 1 }, 1, false); }
static dg_tensor *r_pad(dg_tensor *const *in) { return dg_pad(A0, (int64_t[]){ 1, 2 }, 2, DG_PAD_CONSTANT, 0.5); }
/* an LSTM layer, reversed (h0, c0 and both weights as inputs; no biases: five slots): the output
 * with h_n and c_n stacked under it, so every result's gradient is checked */
static dg_tensor *r_rnn(dg_tensor *const *in) {
    dg_rnn_params p = dg_rnn_default_params();
    p.reverse = true;
    dg_rnn_result r;
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = NULL;
    if (!dg_rnn(A0, A1, A2, A3, in[4], NULL, NULL, NULL, p, &r)) {
        dg_tensor *parts[3] = { r.output, dg_unsqueeze(r.h_n, 0), dg_unsqueeze(r.c_n, 0) };
        y = dg_keep_in_parent(dg_concat(parts, 3, 0));
    }
    dg_scope_end(s);
    return y;
}
static dg_tensor *r_embedding(dg_tensor *const *in) { return dg_embedding(A0, A1, dg_embedding_default_params()); }
static dg_tensor *r_layer_norm(dg_tensor *const *in) { return dg_layer_norm(A0, DG_SHAPE(4), A1, A2, 1e-5); }
static dg_tensor *r_group_norm(dg_tensor *const *in) { return dg_group_norm(A0, 2, A1, A2, 1e-5); }
/* training mode: the output does not read the running statistics (in[3], in[4]), which each call updates */
static dg_tensor *bn_run(dg_tensor *const *in, bool relu) {
    dg_batch_norm_params p = dg_batch_norm_default_params();
    return relu ? dg_batch_norm_relu(A0, in[3], in[4], A1, A2, p) : dg_batch_norm(A0, in[3], in[4], A1, A2, p);
}
static dg_tensor *r_bn(dg_tensor *const *in) { return bn_run(in, false); }
static dg_tensor *r_bn_relu(dg_tensor *const *in) { return bn_run(in, true); }
static dg_tensor *r_dropout(dg_tensor *const *in) {   /* eval mode: the identity (a mask would differ per device) */
    dg_dropout_params p = dg_dropout_default_params();
    p.training = false;
    return dg_dropout_ext(A0, p);
}
static dg_tensor *r_mse(dg_tensor *const *in) { return dg_mse_loss_ext(A0, A1, DG_REDUCE_MEAN); }
static dg_tensor *r_sec(dg_tensor *const *in) { return dg_square_error_cost(A0, A1); }
static dg_tensor *r_l1(dg_tensor *const *in) { return dg_l1_loss(A0, A1, DG_REDUCE_SUM); }
static dg_tensor *r_nll(dg_tensor *const *in) { return dg_nll_loss_ext(A0, A1, dg_nll_loss_default_params()); }
static dg_tensor *r_ce(dg_tensor *const *in) { return dg_cross_entropy_ext(A0, A1, dg_cross_entropy_default_params()); }
static dg_tensor *r_bce_logits(dg_tensor *const *in) { return dg_binary_cross_entropy_with_logits_ext(A0, A1, dg_bce_default_params()); }
static dg_tensor *r_bce(dg_tensor *const *in) { return dg_binary_cross_entropy(A0, A1, dg_bce_default_params()); }
static dg_tensor *r_smooth_l1(dg_tensor *const *in) { return dg_smooth_l1_loss(A0, A1, DG_REDUCE_MEAN, 0.5); }
static dg_tensor *r_huber(dg_tensor *const *in) { return dg_huber_loss(A0, A1, DG_REDUCE_NONE, 0.5); }
static dg_tensor *r_kl_div(dg_tensor *const *in) { return dg_kl_div(A0, A1, DG_REDUCE_SUM, false); }
static dg_tensor *r_accuracy(dg_tensor *const *in) { return dg_accuracy(A0, A1, 2); }
static dg_tensor *r_conv2d(dg_tensor *const *in) {
    dg_conv2d_params p = dg_conv2d_default_params();
    p.padding[0] = p.padding[1] = 1;
    p.stride[1] = 2;
    return dg_conv2d(A0, A1, A2, p);
}
static dg_tensor *r_conv2d_relu(dg_tensor *const *in) { return dg_conv2d_relu_nograd(A0, A1, A2, dg_conv2d_default_params()); }
static dg_tensor *r_conv_t(dg_tensor *const *in) {
    dg_conv_transpose2d_params p = dg_conv_transpose2d_default_params();
    p.stride[0] = p.stride[1] = 2;
    return dg_conv_transpose2d(A0, A1, A2, p);
}
static dg_tensor *r_conv1d(dg_tensor *const *in) {
    dg_conv1d_params p = dg_conv1d_default_params();
    p.padding = 1;
    return dg_conv1d(A0, A1, A2, p);
}
static dg_pool2d_params pool2(void) {
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = 2;
    return p;
}
static dg_pool1d_params pool1(void) {
    dg_pool1d_params p = dg_pool1d_default_params();
    p.kernel = 2;
    return p;
}
static dg_tensor *r_max_pool2d(dg_tensor *const *in) { return dg_max_pool2d(A0, pool2()); }
static dg_tensor *r_avg_pool2d(dg_tensor *const *in) { return dg_avg_pool2d(A0, pool2()); }
static dg_tensor *r_aavg_pool2d(dg_tensor *const *in) { return dg_adaptive_avg_pool2d(A0, 2, 3); }
static dg_tensor *r_max_pool2d_ix(dg_tensor *const *in) {
    dg_tensor *ix = NULL, *y = dg_max_pool2d_with_indices(A0, pool2(), &ix);
    dg_tensor_free(ix);
    return y;
}
static dg_tensor *r_amax_pool2d(dg_tensor *const *in) {
    dg_tensor *ix = NULL, *y = dg_adaptive_max_pool2d(A0, 2, 2, &ix);
    dg_tensor_free(ix);
    return y;
}
static dg_tensor *r_max_pool1d(dg_tensor *const *in) { return dg_max_pool1d(A0, pool1()); }
static dg_tensor *r_max_pool1d_ix(dg_tensor *const *in) {
    dg_tensor *ix = NULL, *y = dg_max_pool1d_with_indices(A0, pool1(), &ix);
    dg_tensor_free(ix);
    return y;
}
static dg_tensor *r_avg_pool1d(dg_tensor *const *in) { return dg_avg_pool1d(A0, pool1()); }
static dg_tensor *r_amax_pool1d(dg_tensor *const *in) {
    dg_tensor *ix = NULL, *y = dg_adaptive_max_pool1d(A0, 3, &ix);
    dg_tensor_free(ix);
    return y;
}
static dg_tensor *r_aavg_pool1d(dg_tensor *const *in) { return dg_adaptive_avg_pool1d(A0, 4); }
static dg_tensor *r_elu(dg_tensor *const *in) { return dg_elu(A0, 0.7); }
static dg_tensor *r_softplus(dg_tensor *const *in) { return dg_softplus(A0, 1.5, 1.2); }   /* x > 0.8 takes the threshold branch */
static dg_tensor *r_silu(dg_tensor *const *in) { return dg_silu(A0); }
static dg_tensor *r_log1p(dg_tensor *const *in) { return dg_log1p(A0); }
static dg_tensor *r_rsqrt(dg_tensor *const *in) { return dg_rsqrt(A0); }
static dg_tensor *r_sin(dg_tensor *const *in) { return dg_sin(A0); }
static dg_tensor *r_cos(dg_tensor *const *in) { return dg_cos(A0); }
static dg_tensor *r_tril(dg_tensor *const *in) { return dg_tril(A0, -1); }
static dg_tensor *r_triu(dg_tensor *const *in) { return dg_triu(A0, 1); }
/* random ops on a generator of their own, seeded the same for every call: the same draws for
 * every dtype and device (Philox), so the forward compares and the gradient is checked */
static dg_tensor *r_dropout2d(dg_tensor *const *in) {
    dg_generator *g = dg_generator_new(11);
    dg_dropout_params p = dg_dropout_default_params();
    p.p = 0.5;   /* decided by a draw's top bit: the same mask in float32 and float64 */
    p.generator = g;
    dg_tensor *y = dg_dropout2d_ext(A0, p);
    dg_generator_free(g);
    return y;
}
static dg_tensor *r_multinomial(dg_tensor *const *in) {
    dg_generator *g = dg_generator_new(12), *prev = dg_generator_use(g);
    dg_tensor *y = dg_multinomial(A0, 3, false);
    dg_generator_use(prev);
    dg_generator_free(g);
    return y;
}
static dg_tensor *r_zeros_like(dg_tensor *const *in) { return dg_zeros_like(A0); }
static dg_tensor *r_ones_like(dg_tensor *const *in) { return dg_ones_like(A0); }

#define C1(op, fn, fl, i0) { op, fn, 1, { i0 }, fl }
#define C2(op, fn, fl, i0, i1) { op, fn, 2, { i0, i1 }, fl }
#define C3(op, fn, fl, i0, i1, i2) { op, fn, 3, { i0, i1, i2 }, fl }
#define C5(op, fn, fl, i0, i1, i2, i3, i4) { op, fn, 5, { i0, i1, i2, i3, i4 }, fl }
#define NG RC_NO_GRAD
#define NH RC_NO_HALF

static const rc_case rc_cases[] = {
    C2(DG_OP_ADD, r_add, 0, RI('f', 2, 3), RI('f', 3)),
    C2(DG_OP_SUB, r_sub, 0, RI('f', 2, 3), RI('f', 2, 1)),
    C2(DG_OP_MUL, r_mul, 0, RI('f', 2, 3), RI('f', 2, 3)),
    C2(DG_OP_DIV, r_div, 0, RI('f', 2, 3), RI('p', 3)),
    C2(DG_OP_MAXIMUM, r_maximum, 0, RI('f', 2, 3), RI('f', 2, 3)),
    C2(DG_OP_MINIMUM, r_minimum, 0, RI('f', 3), RI('f', 2, 3)),
    C2(DG_OP_POW, r_pow, 0, RI('p', 2, 3), RI('f', 2, 3)),
    C2(DG_OP_ADD_RELU, r_add_relu, 0, RI('f', 2, 3), RI('f', 2, 3)),
    C2(DG_OP_GREATER, r_greater, NG, RI('c', 2, 3), RI('c', 3)),
    C2(DG_OP_EQUAL, r_equal, NG | RC_NO_FLOAT, RIX('i', 3, 2, 3), RIX('i', 3, 3)),
    C3(DG_OP_WHERE, r_where, 0, RI('b', 2, 3), RI('f', 2, 3), RI('f', 3)),
    C1(DG_OP_ADD_SCALAR, r_add_scalar, 0, RI('f', 2, 3)),
    C1(DG_OP_SUB_SCALAR, r_sub_scalar, 0, RI('f', 2, 3)),
    C1(DG_OP_RSUB_SCALAR, r_rsub_scalar, 0, RI('f', 2, 3)),
    C1(DG_OP_MUL_SCALAR, r_mul_scalar, 0, RI('f', 2, 3)),
    C1(DG_OP_DIV_SCALAR, r_div_scalar, 0, RI('f', 2, 3)),
    C1(DG_OP_RDIV_SCALAR, r_rdiv_scalar, 0, RI('p', 2, 3)),
    C1(DG_OP_POW_SCALAR, r_pow_scalar, 0, RI('p', 2, 3)),
    C1(DG_OP_NEG, r_neg, 0, RI('f', 2, 3)),
    C1(DG_OP_EXP, r_exp, 0, RI('f', 2, 3)),
    C1(DG_OP_LOG, r_log, 0, RI('p', 2, 3)),
    C1(DG_OP_SQRT, r_sqrt, 0, RI('p', 2, 3)),
    C1(DG_OP_ABS, r_abs, 0, RI('f', 2, 3)),
    C1(DG_OP_CLIP, r_clip, 0, RI('f', 2, 3)),
    C1(DG_OP_RELU, r_relu, 0, RI('f', 2, 3)),
    C1(DG_OP_LEAKY_RELU, r_leaky_relu, 0, RI('f', 2, 3)),
    C1(DG_OP_SIGMOID, r_sigmoid, 0, RI('f', 2, 3)),
    C1(DG_OP_TANH, r_tanh, 0, RI('f', 2, 3)),
    C1(DG_OP_GELU, r_gelu, 0, RI('f', 2, 3)),
    C2(DG_OP_MATMUL, r_matmul, 0, RI('f', 2, 3, 4), RI('f', 4, 5)),
    C3(DG_OP_LINEAR, r_linear, 0, RI('f', 3, 4), RI('f', 5, 4), RI('f', 5)),
    C1(DG_OP_SOFTMAX, r_softmax, 0, RI('f', 3, 5)),
    C1(DG_OP_LOG_SOFTMAX, r_log_softmax, 0, RI('f', 3, 5)),
    C1(DG_OP_SUM, r_sum, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_MAX, r_max, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_MIN, r_min, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_MEAN, r_mean, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_SUM_ALL, r_sum_all, 0, RI('f', 2, 3)),
    C1(DG_OP_MEAN_ALL, r_mean_all, 0, RI('f', 2, 3)),
    C1(DG_OP_ARGMAX, r_argmax, NG, RI('c', 3, 5)),
    C1(DG_OP_ARGMIN, r_argmin, NG, RI('c', 3, 5)),
    C1(DG_OP_CUMSUM, r_cumsum, 0, RI('f', 3, 4)),
    C1(DG_OP_PROD, r_prod, 0, RI('p', 3, 4)),
    C1(DG_OP_CONTIGUOUS, r_contiguous, 0, RI('f', 3, 4)),
    C1(DG_OP_CLONE, r_clone, 0, RI('f', 3, 4)),
    C1(DG_OP_CAST, r_cast, 0, RI('f', 3, 4)),
    C1(DG_OP_TO_DEVICE, r_to_device, 0, RI('f', 3, 4)),
    C1(DG_OP_RESHAPE, r_reshape, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_FLATTEN, r_flatten, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_PERMUTE, r_permute, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_TRANSPOSE, r_transpose, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_SQUEEZE, r_squeeze, 0, RI('f', 3, 1, 4)),
    C1(DG_OP_UNSQUEEZE, r_unsqueeze, 0, RI('f', 3, 4)),
    C1(DG_OP_EXPAND, r_expand, 0, RI('f', 3, 1)),
    C1(DG_OP_SLICE, r_slice, 0, RI('f', 3, 6)),
    C2(DG_OP_CONCAT, r_concat, 0, RI('f', 3, 2), RI('f', 3, 4)),
    C1(DG_OP_SPLIT, r_split, 0, RI('f', 3, 4)),
    C2(DG_OP_INDEX_SELECT, r_index_select, 0, RI('f', 5, 3), RIX('i', 5, 4)),
    C2(DG_OP_GATHER, r_gather, 0, RI('f', 3, 4), RIX('i', 4, 3, 2)),
    C1(DG_OP_ONE_HOT, r_one_hot, NG | RC_NO_FLOAT, RIX('i', 4, 5)),
    C3(DG_OP_SCATTER_ADD, r_scatter_add, 0, RI('f', 3, 4), RIX('i', 4, 3, 2), RI('f', 3, 2)),
    C3(DG_OP_SCATTER, r_scatter, 0, RI('f', 3, 4), RIX('u', 4, 3, 2), RI('f', 3, 2)),
    C1(DG_OP_ARGSORT, r_argsort, NG, RI('c', 3, 5)),
    C1(DG_OP_SORT, r_sort, 0, RI('f', 3, 5)),
    C1(DG_OP_SORT_INDICES, r_sort_indices, NG, RI('c', 3, 5)),
    C1(DG_OP_TOPK, r_topk, 0, RI('f', 3, 5)),
    C1(DG_OP_TOPK_INDICES, r_topk_indices, NG, RI('c', 3, 5)),
    C1(DG_OP_FLIP, r_flip, 0, RI('f', 3, 4)),
    C1(DG_OP_TILE, r_tile, 0, RI('f', 3, 4)),
    C2(DG_OP_MASKED_FILL, r_masked_fill, 0, RI('f', 3, 4), RI('b', 3, 4)),
    C1(DG_OP_LOGSUMEXP, r_logsumexp, 0, RI('f', 3, 4)),
    C1(DG_OP_VAR, r_var, RC_LOOSE, RI('f', 3, 4)),
    C1(DG_OP_STD, r_std, RC_LOOSE, RI('f', 3, 4)),
    C1(DG_OP_NORM, r_norm, 0, RI('f', 3, 4)),
    C1(DG_OP_PAD, r_pad, 0, RI('f', 3, 4)),
    C5(DG_OP_RNN, r_rnn, NH, RI('f', 3, 2, 3), RI('f', 2, 2), RI('f', 2, 2), RI('f', 8, 3), RI('f', 8, 2)),
    C2(DG_OP_EMBEDDING, r_embedding, 0, RIX('i', 6, 2, 3), RI('f', 6, 4)),
    C3(DG_OP_LAYER_NORM, r_layer_norm, RC_LOOSE, RI('f', 3, 4), RI('f', 4), RI('f', 4)),
    C3(DG_OP_GROUP_NORM, r_group_norm, RC_LOOSE, RI('f', 2, 4, 3), RI('f', 4), RI('f', 4)),
    C5(DG_OP_BATCH_NORM, r_bn, RC_LOOSE, RI('f', 4, 3, 2), RI('f', 3), RI('f', 3), RI('c', 3), RI('k', 3)),
    C5(DG_OP_BATCH_NORM_RELU, r_bn_relu, RC_LOOSE, RI('f', 4, 3, 2), RI('f', 3), RI('f', 3), RI('c', 3), RI('k', 3)),
    C1(DG_OP_DROPOUT, r_dropout, 0, RI('f', 3, 4)),
    C2(DG_OP_MSE_LOSS, r_mse, 0, RI('f', 3, 4), RI('f', 3, 4)),
    C2(DG_OP_SQUARE_ERROR_COST, r_sec, 0, RI('f', 3, 4), RI('c', 3, 4)),
    C2(DG_OP_L1_LOSS, r_l1, 0, RI('f', 3, 4), RI('c', 3, 4)),
    C2(DG_OP_NLL_LOSS, r_nll, 0, RI('f', 4, 3), RIX('i', 3, 4)),
    C2(DG_OP_CROSS_ENTROPY, r_ce, 0, RI('f', 4, 3), RIX('i', 3, 4)),
    C2(DG_OP_BCE_WITH_LOGITS, r_bce_logits, 0, RI('f', 3, 4), RI('r', 3, 4)),
    C2(DG_OP_BCE, r_bce, 0, RI('q', 3, 4), RI('r', 3, 4)),
    C2(DG_OP_SMOOTH_L1_LOSS, r_smooth_l1, 0, RI('f', 3, 4), RI('c', 3, 4)),
    C2(DG_OP_HUBER_LOSS, r_huber, 0, RI('f', 3, 4), RI('c', 3, 4)),
    C2(DG_OP_KL_DIV, r_kl_div, 0, RI('f', 3, 4), RI('r', 3, 4)),
    C2(DG_OP_ACCURACY, r_accuracy, NG, RI('c', 4, 5), RIX('i', 5, 4)),
    C3(DG_OP_CONV2D, r_conv2d, RC_LOOSE, RI('f', 2, 2, 5, 5), RI('f', 3, 2, 3, 3), RI('f', 3)),
    C3(DG_OP_CONV2D_RELU, r_conv2d_relu, NG | RC_LOOSE, RI('c', 2, 2, 5, 5), RI('c', 3, 2, 3, 3), RI('c', 3)),
    C3(DG_OP_CONV_TRANSPOSE2D, r_conv_t, RC_LOOSE, RI('f', 1, 2, 3, 3), RI('f', 2, 3, 3, 3), RI('f', 3)),
    C3(DG_OP_CONV1D, r_conv1d, RC_LOOSE, RI('f', 2, 2, 6), RI('f', 3, 2, 3), RI('f', 3)),
    C1(DG_OP_MAX_POOL2D, r_max_pool2d, 0, RI('f', 1, 2, 4, 4)),
    C1(DG_OP_AVG_POOL2D, r_avg_pool2d, 0, RI('f', 1, 2, 4, 4)),
    C1(DG_OP_ADAPTIVE_AVG_POOL2D, r_aavg_pool2d, 0, RI('f', 1, 2, 4, 6)),
    C1(DG_OP_MAX_POOL2D_WITH_INDICES, r_max_pool2d_ix, 0, RI('f', 1, 2, 4, 4)),
    C1(DG_OP_ADAPTIVE_MAX_POOL2D, r_amax_pool2d, 0, RI('f', 1, 2, 4, 4)),
    C1(DG_OP_MAX_POOL1D, r_max_pool1d, 0, RI('f', 2, 2, 6)),
    C1(DG_OP_MAX_POOL1D_WITH_INDICES, r_max_pool1d_ix, 0, RI('f', 2, 2, 6)),
    C1(DG_OP_AVG_POOL1D, r_avg_pool1d, 0, RI('f', 2, 2, 6)),
    C1(DG_OP_ADAPTIVE_MAX_POOL1D, r_amax_pool1d, 0, RI('f', 2, 2, 6)),
    C1(DG_OP_ADAPTIVE_AVG_POOL1D, r_aavg_pool1d, 0, RI('f', 2, 2, 8)),
    C1(DG_OP_ELU, r_elu, 0, RI('f', 2, 3)),
    C1(DG_OP_SOFTPLUS, r_softplus, 0, RI('f', 2, 3)),
    C1(DG_OP_SILU, r_silu, 0, RI('f', 2, 3)),
    C1(DG_OP_LOG1P, r_log1p, 0, RI('p', 2, 3)),
    C1(DG_OP_RSQRT, r_rsqrt, 0, RI('p', 2, 3)),
    C1(DG_OP_SIN, r_sin, 0, RI('f', 2, 3)),
    C1(DG_OP_COS, r_cos, 0, RI('f', 2, 3)),
    C1(DG_OP_TRIL, r_tril, 0, RI('f', 2, 3, 4)),
    C1(DG_OP_TRIU, r_triu, 0, RI('f', 3, 4)),
    C1(DG_OP_DROPOUT2D, r_dropout2d, 0, RI('f', 2, 3, 2, 2)),
    C1(DG_OP_MULTINOMIAL, r_multinomial, NG, RI('r', 3, 5)),
    C1(DG_OP_ZEROS_LIKE, r_zeros_like, NG, RI('c', 3, 4)),
    C1(DG_OP_ONES_LIKE, r_ones_like, NG, RI('c', 3, 4)),
};
#define RC_N_CASES ((int)(sizeof rc_cases / sizeof *rc_cases))

/* ---- inputs ---- */
static bool rc_is_float_kind(char k) { return k == 'f' || k == 'p' || k == 'q' || k == 'c' || k == 'k' || k == 'r'; }
static bool rc_grad_kind(char k) { return k == 'f' || k == 'p' || k == 'q'; }

/* The case's inputs in float64 (floats) or their own dtype, on the CPU, from a fixed seed. */
static void rc_make_inputs(const rc_case *c, dg_tensor **in) {
    dg_manual_seed(1234 + (uint64_t)c->op);
    for (int i = 0; i < c->n_in; i++) {
        const rc_in *s = &c->in[i];
        dg_shape sh = dg_make_shape(s->ndim, s->d);
        int64_t n = 1;
        for (int j = 0; j < sh.ndim; j++) n *= sh.d[j];
        char k = s->kind;
        if (rc_is_float_kind(k)) {
            double lo = k == 'p' ? 0.5 : k == 'q' || k == 'r' ? 0.1 : k == 'k' ? 0.5 : -1.0;
            double hi = k == 'p' ? 2.0 : k == 'q' || k == 'r' ? 0.9 : k == 'k' ? 2.0 : 1.0;
            in[i] = dg_uniform(sh, lo, hi, DG_F64);
        } else if (k == 'b') {
            in[i] = dg_greater(dg_uniform(sh, 0, 1, DG_F64), dg_full(DG_SCALAR_SHAPE, 0.5, DG_F64));
        } else {
            int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
            int64_t last = s->ndim ? s->d[s->ndim - 1] : 1;
            for (int64_t j = 0; j < n; j++)
                v[j] = k == 'u' ? (j % last) * (s->range / (last > 0 ? last : 1)) % s->range
                                : (int64_t)(dg_item(dg_uniform(DG_SCALAR_SHAPE, 0, 1, DG_F64)) * (double)s->range) % s->range;
            in[i] = dg_from_data(sh, DG_I64, v);
            free(v);
        }
        cr_assert(in[i], "op %s: making input %d failed: %s", dg_op_name(c->op), i, dg_last_error());
    }
}

/* in (CPU, float64) as dtype dt on device dev, leaves that require grad where the kind says so */
static dg_tensor *rc_place(const rc_in *s, const dg_tensor *t, dg_dtype dt, dg_device dev, bool grad) {
    dg_tensor *x = rc_is_float_kind(s->kind) ? dg_cast(t, dt) : dg_clone(t);
    if (dev.type != DG_CPU) {
        dg_tensor *m = dg_to_device(x, dev);
        dg_tensor_free(x);
        x = m;
    }
    if (x && grad && rc_grad_kind(s->kind)) dg_set_requires_grad(x, true);
    return x;
}

static double rc_tol(dg_dtype dt, unsigned flags) {
    switch (dt) {
    case DG_F64: return 1e-10;
    case DG_F32: return flags & RC_LOOSE ? 2e-4 : 2e-5;
    case DG_F16: return flags & RC_LOOSE ? 3e-2 : 4e-3;
    default: return flags & RC_LOOSE ? 1e-1 : 2e-2;   /* bfloat16: 8 bits of mantissa */
    }
}

/* worst |a - b| / max(|b|, 1) over the elements; a and b any dtype and device */
static double rc_err(const dg_tensor *a, const dg_tensor *b, char *why, size_t len) {
    if (dg_numel(a) != dg_numel(b)) { snprintf(why, len, "element count %lld vs %lld", (long long)dg_numel(a), (long long)dg_numel(b)); return INFINITY; }
    if (dg_ndim(a) != dg_ndim(b)) { snprintf(why, len, "ndim %d vs %d", dg_ndim(a), dg_ndim(b)); return INFINITY; }
    int64_t n = dg_numel(a);
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1)), *y = malloc(sizeof(double) * (size_t)(n ? n : 1));
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    int rc = dg_to_host(dg_cast(dg_to_device(a, dg_cpu()), DG_F64), x, sizeof(double) * (size_t)n);
    rc |= dg_to_host(dg_cast(dg_to_device(b, dg_cpu()), DG_F64), y, sizeof(double) * (size_t)n);
    dg_no_grad_end();
    dg_scope_end(s);
    double worst = rc ? INFINITY : 0;
    for (int64_t i = 0; i < n && !rc; i++) {
        double e = fabs(x[i] - y[i]) / fmax(fabs(y[i]), 1.0);
        if (isnan(x[i]) != isnan(y[i])) e = INFINITY;
        else if (isnan(x[i])) e = 0;
        if (e > worst) { worst = e; snprintf(why, len, "element %lld: %.9g vs %.9g", (long long)i, x[i], y[i]); }
    }
    free(x);
    free(y);
    return worst;
}

typedef struct { int ran, failed, onnx; char first[4][512]; } rc_report;

static void rc_fail(rc_report *r, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "registry harness: %s\n", msg);
    if (r->failed < 4) snprintf(r->first[r->failed], sizeof r->first[0], "%s", msg);
    r->failed++;
}

/* d(sum(y * w))/d(in) of the case run on leaves `in` (the ones needing a gradient get one) */
static int rc_grads(const rc_case *c, dg_tensor *const *in, const dg_tensor *w, dg_tensor **g) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = c->run(in);
    const dg_tensor *wy = y && dg_device_of(y).type != dg_device_of(w).type ? dg_to_device(w, dg_device_of(y)) : w;   /* to_device */
    dg_tensor *loss = y ? dg_sum_all(dg_mul(dg_cast(y, dg_dtype_of(w)), wy)) : NULL;
    int rc = loss ? dg_backward(loss) : -1;
    dg_scope_end(s);
    for (int i = 0; i < c->n_in; i++) {
        dg_tensor *gi = in[i] && dg_requires_grad(in[i]) ? dg_grad(in[i]) : NULL;
        g[i] = gi ? dg_to_device(gi, dg_cpu()) : NULL;
    }
    return rc;
}

/* The float64 CPU gradients against central differences of sum(y * w). */
static void rc_finite_differences(const rc_case *c, dg_tensor *const *in, const dg_tensor *w, dg_tensor *const *g, rc_report *r) {
    for (int i = 0; i < c->n_in; i++) {
        if (!g[i]) continue;
        double *x = dg_data(in[i]);
        const double *ga = dg_data(g[i]);
        for (int64_t k = 0; k < dg_numel(in[i]); k++) {
            double old = x[k], h = 1e-6 * fmax(1.0, fabs(old)), l[2];
            for (int side = 0; side < 2; side++) {
                x[k] = old + (side ? -h : h);
                dg_scope *s = dg_scope_begin();
                dg_no_grad_begin();
                l[side] = dg_item(dg_sum_all(dg_mul(c->run(in), w)));
                dg_no_grad_end();
                dg_scope_end(s);
            }
            x[k] = old;
            double num = (l[0] - l[1]) / (2 * h), err = fabs(num - ga[k]) / fmax(1.0, fabs(num));
            if (!(err <= 1e-5)) {
                rc_fail(r, "%s: float64 gradient of input %d element %lld is %.10g, finite differences say %.10g", dg_op_name(c->op), i,
                        (long long)k, ga[k], num);
                return;
            }
        }
    }
}

/* One case on one device in one dtype; float64 CPU results (ref, ref_g) are the reference. */
static void rc_run_dtype(const rc_case *c, dg_tensor *const *base, dg_dtype dt, dg_device dev, bool fd, rc_report *r) {
    char why[160] = "";
    const char *on = dev.type == DG_CPU ? "cpu" : "gpu:0";
    const char *dn = dg_dtype_name(dt);
    dg_tensor *x[5] = { 0 }, *ref_in[5] = { 0 };
    for (int i = 0; i < c->n_in; i++) {
        x[i] = rc_place(&c->in[i], base[i], dt, dev, !(c->flags & RC_NO_GRAD));
        /* the reference sees the inputs rounded to dt, in float64 on the CPU */
        ref_in[i] = rc_is_float_kind(c->in[i].kind) ? dg_cast(dg_cast(base[i], dt), DG_F64) : dg_clone(base[i]);
        if (!(c->flags & RC_NO_GRAD) && rc_grad_kind(c->in[i].kind)) dg_set_requires_grad(ref_in[i], true);
    }
    r->ran++;
    /* forward, the entry path, the node's name */
    size_t live0 = dg_live_tensors();
    uint32_t seen0 = dg_op_seen_count[c->op], rec0 = dg_op_recorded_count[c->op];
    dg_tensor *y = c->run(x);
    dg_tensor *ref = c->run(ref_in);
    if (!y || !ref) {
        rc_fail(r, "%s %s on %s: forward failed: %s", dg_op_name(c->op), dn, on, dg_last_error());
        goto done;
    }
    bool part = dg_op_table[c->op].kind == DG_OPK_PART;   /* seen only by a trace: checked by the ONNX run */
    if (!part && dg_op_seen_count[c->op] == seen0)
        rc_fail(r, "%s %s on %s: the op did not pass the entry path under its registry id", dg_op_name(c->op), dn, on);
    bool wants_grad = false;
    for (int i = 0; i < c->n_in; i++) wants_grad |= x[i] && dg_requires_grad(x[i]);
    if (wants_grad && dg_op_table[c->op].kind == DG_OPK_PRIM && dg_op_recorded_count[c->op] == rec0)
        rc_fail(r, "%s %s on %s: inputs need a gradient but no node was recorded under its id (its output's node: '%s')",
                dg_op_name(c->op), dn, on, dg_grad_fn_name(y) ? dg_grad_fn_name(y) : "none");
    double e = rc_err(y, ref, why, sizeof why), tol = rc_tol(dt, c->flags);
    if (!(e <= tol)) rc_fail(r, "%s %s on %s: forward error %.3g > %.3g (%s)", dg_op_name(c->op), dn, on, e, tol, why);
    dg_tensor_free(y);
    dg_tensor_free(ref);
    if (dg_live_tensors() != live0)
        rc_fail(r, "%s %s on %s: %lld tensors left alive by the call (ownership)", dg_op_name(c->op), dn, on,
                (long long)dg_live_tensors() - (long long)live0);
    /* gradients: float64 on the CPU against finite differences, the rest against those */
    if (!(c->flags & RC_NO_GRAD) && !dg_dtype_is_half(dt)) {
        dg_tensor *w = dg_uniform(dg_shape_of(c->run(ref_in)), 0.5, 1.5, DG_F64);   /* the call's tensor dies below */
        dg_tensor *g[5] = { 0 }, *gr[5] = { 0 };
        dg_tensor *wd = dg_cast(w, dt), *wdev = dev.type == DG_CPU ? dg_clone(wd) : dg_to_device(wd, dev);
        int rc1 = rc_grads(c, x, wdev, g), rc2 = rc_grads(c, ref_in, w, gr);
        if (rc1 || rc2) rc_fail(r, "%s %s on %s: backward failed: %s", dg_op_name(c->op), dn, on, dg_last_error());
        for (int i = 0; i < c->n_in && !rc1 && !rc2; i++) {
            if (!gr[i] != !g[i]) { rc_fail(r, "%s %s on %s: input %d %s a gradient", dg_op_name(c->op), dn, on, i, g[i] ? "got" : "lacks"); continue; }
            if (!g[i]) continue;
            double ge = rc_err(g[i], gr[i], why, sizeof why);
            if (!(ge <= tol * 10)) rc_fail(r, "%s %s on %s: gradient of input %d error %.3g (%s)", dg_op_name(c->op), dn, on, i, ge, why);
        }
        if (fd && dt == DG_F64 && !rc2) rc_finite_differences(c, ref_in, w, gr, r);
        for (int i = 0; i < c->n_in; i++) { dg_tensor_free(g[i]); dg_tensor_free(gr[i]); }
        dg_tensor_free(wdev);
        dg_tensor_free(wd);
        dg_tensor_free(w);
    }
done:
    for (int i = 0; i < c->n_in; i++) { dg_tensor_free(x[i]); dg_tensor_free(ref_in[i]); }
}

/* Each tensor input NULL in turn: NULL out (the op reports it), never a crash. */
static void rc_null_inputs(const rc_case *c, dg_tensor *const *base, rc_report *r) {
    for (int i = 0; i < c->n_in; i++) {
        dg_tensor *in[5];
        for (int j = 0; j < c->n_in; j++) in[j] = j == i ? NULL : base[j];
        if (c->op == DG_OP_LINEAR && i == 2) continue;   /* linear's bias is optional */
        if ((c->op == DG_OP_CONV2D || c->op == DG_OP_CONV_TRANSPOSE2D || c->op == DG_OP_CONV1D || c->op == DG_OP_CONV2D_RELU) && i == 2)
            continue;   /* a convolution's bias may be absent */
        if ((c->op == DG_OP_LAYER_NORM || c->op == DG_OP_GROUP_NORM || c->op == DG_OP_BATCH_NORM || c->op == DG_OP_BATCH_NORM_RELU) && i > 0)
            continue;   /* a norm's weight, bias and running statistics may be absent */
        if (c->op == DG_OP_RNN && (i == 1 || i == 2)) continue;   /* h0 and c0 may be absent (zeros) */
        dg_clear_error();
        dg_tensor *y = c->run(in);
        if (y) { rc_fail(r, "%s: input %d NULL gave a result", dg_op_name(c->op), i); dg_tensor_free(y); }
        else if (!dg_last_error()[0]) rc_fail(r, "%s: input %d NULL gave NULL without a message", dg_op_name(c->op), i);
        dg_clear_error();
    }
}

/* ---- ONNX: the op as a one-op model (its first float input the model's input, the others
 * constants made before the export) ---- */
typedef struct { const rc_case *c; dg_tensor *in[5]; int x; } rc_model;
static dg_tensor *rc_model_fw(dg_layer *self, const dg_tensor *x) {
    rc_model *m = dg_layer_user(self);
    dg_tensor *in[5];
    for (int i = 0; i < m->c->n_in; i++) in[i] = i == m->x ? (dg_tensor *)x : m->in[i];
    dg_tensor *y = m->c->run(in);
    /* a model's output is float32 or int64: a mask or a float64 result is cast (a traced op too) */
    dg_dtype dt = y ? dg_dtype_of(y) : DG_F32;
    return dt == DG_F32 || dt == DG_I64 ? y : dg_cast(y, DG_F32);
}

static void rc_onnx(const rc_case *c, dg_tensor *const *base, rc_report *r) {
    static const dg_layer_class cls = DG_LAYER_CLASS("RegistryOp");
    int onnx = dg_op_table[c->op].onnx;
    rc_model m = { .c = c, .x = -1 };
    for (int i = 0; i < c->n_in && m.x < 0; i++) if (rc_is_float_kind(c->in[i].kind)) m.x = i;
    if (m.x < 0) m.x = 0;
    for (int i = 0; i < c->n_in; i++)
        m.in[i] = rc_is_float_kind(c->in[i].kind) ? dg_cast(base[i], DG_F32) : dg_clone(base[i]);
    dg_layer *l = dg_layer_new(&cls, rc_model_fw, &m, NULL);
    char path[64];
    snprintf(path, sizeof path, "/tmp/dg_registry_%d_%d.onnx", (int)getpid(), (int)c->op);
    uint32_t seen0 = dg_op_seen_count[c->op];
    dg_clear_error();
    dg_onnx_export_params ep = dg_onnx_export_default_params();
    ep.dynamic_batch = false;   /* a one-op model: whether its batch axis may vary is not the point */
    int rc = l ? dg_onnx_export(l, m.in[m.x], path, ep) : -1;
    if (onnx == DG_ONNX_NONE && rc == 0)
        rc_fail(r, "%s: the registry says it is not exportable, yet ONNX export wrote it", dg_op_name(c->op));
    if (onnx != DG_ONNX_NONE && rc != 0)
        rc_fail(r, "%s: ONNX export failed: %s", dg_op_name(c->op), dg_last_error());
    if (dg_op_table[c->op].kind == DG_OPK_PART && dg_op_seen_count[c->op] == seen0)
        rc_fail(r, "%s: its trace record never appeared while its op was exported", dg_op_name(c->op));
    dg_clear_error();
    unlink(path);
    dg_layer_free(l);
    for (int i = 0; i < c->n_in; i++) dg_tensor_free(m.in[i]);
    r->onnx++;
}

/* Runs every case on dev in every float dtype (an index-only op once); fd: float64 finite
 * differences (the CPU suite). Returns how many op × dtype runs were made; failures go to r. */
static int rc_run_device(dg_device dev, bool fd, rc_report *r) {
    static const dg_dtype dts[] = { DG_F32, DG_F64, DG_BF16, DG_F16 };
    for (int k = 0; k < RC_N_CASES; k++) {
        const rc_case *c = &rc_cases[k];
        dg_tensor *base[5] = { 0 };
        rc_make_inputs(c, base);
        for (int d = 0; d < 4; d++) {
            if (c->flags & RC_NO_FLOAT && d > 0) break;
            if (c->flags & RC_NO_HALF && dg_dtype_is_half(dts[d])) continue;
            rc_run_dtype(c, base, dts[d], dev, fd, r);
        }
        if (dev.type == DG_CPU) rc_null_inputs(c, base, r);
        if (fd && !(c->flags & RC_NO_FLOAT) && c->op != DG_OP_TO_DEVICE) rc_onnx(c, base, r);
        for (int i = 0; i < c->n_in; i++) dg_tensor_free(base[i]);
    }
    return r->ran;
}

#endif
