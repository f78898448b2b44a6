/* test/test_ownership.c — every public op of ops.h called with no scope open leaves exactly its
 * result to the caller: once the caller frees the result (and the inputs), the number of live
 * tensors is back where it was. Each op runs twice: on plain inputs, and on inputs that require
 * gradients (the result then carries its graph, which must die with it). A composite op (mean,
 * cross-entropy, the losses, accuracy ...) must not leave its intermediates behind. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dygraph.h>

typedef struct own_inputs { dg_tensor *x, *y, *m4, *labels, *mask, *img, *w, *b, *probs; } own_inputs;
typedef dg_tensor *(*own_fn)(const own_inputs *in);
typedef struct own_case { const char *name; own_fn fn; } own_case;

static const int ax1[1] = { 1 };
#define F(name, expr) static dg_tensor *name(const own_inputs *in) { return (expr); }
F(o_add, dg_add(in->x, in->y)) F(o_sub, dg_sub(in->x, in->y)) F(o_mul, dg_mul(in->x, in->y)) F(o_div, dg_div(in->x, in->y))
F(o_maximum, dg_maximum(in->x, in->y)) F(o_minimum, dg_minimum(in->x, in->y)) F(o_pow, dg_pow(in->probs, in->y))
F(o_add_s, dg_add_scalar(in->x, 1)) F(o_sub_s, dg_sub_scalar(in->x, 1)) F(o_rsub_s, dg_rsub_scalar(in->x, 1))
F(o_mul_s, dg_mul_scalar(in->x, 2)) F(o_div_s, dg_div_scalar(in->x, 2)) F(o_rdiv_s, dg_rdiv_scalar(in->probs, 2))
F(o_pow_s, dg_pow_scalar(in->probs, 1.5)) F(o_neg, dg_neg(in->x)) F(o_exp, dg_exp(in->x)) F(o_log, dg_log(in->probs))
F(o_sqrt, dg_sqrt(in->probs)) F(o_abs, dg_abs(in->x)) F(o_clip, dg_clip(in->x, -0.2, 0.2))
F(o_greater, dg_greater(in->x, in->y)) F(o_equal, dg_equal(in->x, in->y))
F(o_relu, dg_relu(in->x)) F(o_add_relu, dg_add_relu(in->x, in->y)) F(o_leaky, dg_leaky_relu(in->x, 0.1))
F(o_sigmoid, dg_sigmoid(in->x)) F(o_tanh, dg_tanh(in->x)) F(o_gelu, dg_gelu(in->x, false)) F(o_gelu_t, dg_gelu(in->x, true))
F(o_softmax, dg_softmax(in->x, -1)) F(o_log_softmax, dg_log_softmax(in->x, 0))
F(o_matmul, dg_matmul(in->x, in->m4)) F(o_matmul_t, dg_matmul_t(in->x, in->y, false, true))
F(o_linear, dg_linear(in->x, in->y, NULL))   /* y [3, 5] as a [out, in] weight */
F(o_sum, dg_sum(in->x, ax1, 1, false)) F(o_mean, dg_mean(in->x, ax1, 1, true)) F(o_max, dg_max(in->x, ax1, 1, false))
F(o_min, dg_min(in->x, ax1, 1, true)) F(o_sum_all, dg_sum_all(in->x)) F(o_mean_all, dg_mean_all(in->x))
F(o_argmax, dg_argmax(in->x, 1, false)) F(o_argmin, dg_argmin(in->x, 0, true))
F(o_reshape, dg_reshape(in->x, DG_SHAPE(5, -1))) F(o_flatten, dg_flatten(in->img, 1, -1)) F(o_transpose, dg_transpose(in->x, 0, 1))
F(o_unsqueeze, dg_unsqueeze(in->x, 1)) F(o_slice, dg_slice(in->x, 1, 0, 3, 2))
/* ops applied to a view the test makes: the test frees its view, the op's result keeps what it needs */
#define ON_VIEW(name, view, expr) static dg_tensor *name(const own_inputs *in) { \
        dg_tensor *v = (view), *r = (expr); dg_tensor_free(v); return r; }
ON_VIEW(o_squeeze, dg_unsqueeze(in->x, 0), dg_squeeze(v, 0))
ON_VIEW(o_expand, dg_unsqueeze(in->x, 0), dg_expand(v, DG_SHAPE(3, -1, -1)))
ON_VIEW(o_contiguous, dg_transpose(in->x, 0, 1), dg_contiguous(v))
F(o_index_select, dg_index_select(in->x, in->labels, 1)) F(o_one_hot, dg_one_hot(in->labels, 5))
F(o_where, dg_where(in->mask, in->x, in->y))
F(o_mse, dg_mse_loss(in->x, in->y)) F(o_mse_none, dg_mse_loss_ext(in->x, in->y, DG_REDUCE_NONE))
F(o_l1, dg_l1_loss(in->x, in->y, DG_REDUCE_SUM)) F(o_sq, dg_square_error_cost(in->x, in->y))
F(o_ce, dg_cross_entropy(in->x, in->labels)) F(o_nll, dg_nll_loss(in->x, in->labels, DG_REDUCE_MEAN, -100))
static dg_tensor *o_ce_soft(const own_inputs *in) {
    dg_cross_entropy_params cep = dg_cross_entropy_default_params();
    cep.soft_label = true;
    return dg_cross_entropy_ext(in->x, in->probs, cep);
}
F(o_bce, dg_binary_cross_entropy_with_logits(in->x, in->probs, DG_REDUCE_MEAN))
F(o_accuracy, dg_accuracy(in->x, in->labels, 2))
static dg_tensor *o_conv(const own_inputs *in) {
    dg_conv2d_params cvp = dg_conv2d_default_params();
    cvp.padding[0] = cvp.padding[1] = 1;
    return dg_conv2d(in->img, in->w, in->b, cvp);
}
static dg_tensor *o_maxpool(const own_inputs *in) {
    dg_pool2d_params plp = dg_pool2d_default_params();
    plp.kernel[0] = plp.kernel[1] = 2;
    return dg_max_pool2d(in->img, plp);
}
static dg_tensor *o_avgpool(const own_inputs *in) {
    dg_pool2d_params plp2 = dg_pool2d_default_params();
    plp2.kernel[0] = plp2.kernel[1] = 2;
    return dg_avg_pool2d(in->img, plp2);
}
F(o_adaptive, dg_adaptive_avg_pool2d(in->img, 1, 1))
static dg_tensor *o_bn(const own_inputs *in) {
    dg_batch_norm_params bnp = dg_batch_norm_default_params();
    bnp.training = true;
    return dg_batch_norm(in->img, NULL, NULL, in->b, in->b, bnp);
}
F(o_dropout, dg_dropout(in->x, 0.5, true))
static dg_tensor *o_concat(const own_inputs *in) { dg_tensor *xs[2] = { in->x, in->y }; return dg_concat(xs, 2, 0); }
ON_VIEW(o_gather, dg_unsqueeze(in->labels, 1), dg_gather(in->x, v, 1))   /* index shaped like the output */

static const own_case cases[] = {
#define C(f) { #f, f }
    C(o_add), C(o_sub), C(o_mul), C(o_div), C(o_maximum), C(o_minimum), C(o_pow), C(o_add_s), C(o_sub_s), C(o_rsub_s),
    C(o_mul_s), C(o_div_s), C(o_rdiv_s), C(o_pow_s), C(o_neg), C(o_exp), C(o_log), C(o_sqrt), C(o_abs), C(o_clip),
    C(o_greater), C(o_equal), C(o_relu), C(o_add_relu), C(o_leaky), C(o_sigmoid), C(o_tanh), C(o_gelu), C(o_gelu_t),
    C(o_softmax), C(o_log_softmax), C(o_matmul), C(o_matmul_t), C(o_linear), C(o_sum), C(o_mean), C(o_max), C(o_min),
    C(o_sum_all), C(o_mean_all), C(o_argmax), C(o_argmin), C(o_reshape), C(o_flatten), C(o_transpose), C(o_squeeze),
    C(o_unsqueeze), C(o_expand), C(o_slice), C(o_contiguous), C(o_index_select), C(o_one_hot), C(o_where), C(o_mse),
    C(o_mse_none), C(o_l1), C(o_sq), C(o_ce), C(o_nll), C(o_ce_soft), C(o_bce), C(o_accuracy), C(o_conv), C(o_maxpool),
    C(o_avgpool), C(o_adaptive), C(o_bn), C(o_dropout), C(o_concat), C(o_gather),
};

static void make_inputs(own_inputs *in, bool grad) {
    dg_manual_seed(3);
    in->x = dg_randn(DG_SHAPE(3, 5), DG_F32);
    in->y = dg_randn(DG_SHAPE(3, 5), DG_F32);
    in->m4 = dg_randn(DG_SHAPE(5, 4), DG_F32);
    in->probs = dg_uniform(DG_SHAPE(3, 5), 0.1, 0.9, DG_F32);
    in->img = dg_randn(DG_SHAPE(2, 3, 4, 4), DG_F32);
    in->w = dg_randn(DG_SHAPE(3, 3, 3, 3), DG_F32);
    in->b = dg_randn(DG_SHAPE(3), DG_F32);
    int64_t lab[3] = { 0, 4, 2 };
    in->labels = dg_from_data(DG_SHAPE(3), DG_I64, lab);
    in->mask = dg_greater(in->x, in->y);
    dg_tensor *g[] = { in->x, in->y, in->m4, in->probs, in->img, in->w, in->b };
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
        cr_assert(g[i], "%s", dg_last_error());
        if (grad) cr_assert_eq(dg_set_requires_grad(g[i], true), 0, "%s", dg_last_error());
    }
    cr_assert(in->labels && in->mask, "%s", dg_last_error());
}
static void free_inputs(own_inputs *in) {
    dg_tensor *all[] = { in->x, in->y, in->m4, in->labels, in->mask, in->img, in->w, in->b, in->probs };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) dg_tensor_free(all[i]);
}

static void run(const own_case *c, bool grad) {
    size_t before = dg_live_tensors();
    own_inputs in;
    make_inputs(&in, grad);
    dg_tensor *r = c->fn(&in);
    cr_assert(r, "%s: %s", c->name, dg_last_error());
    dg_tensor_free(r);
    free_inputs(&in);
    cr_expect_eq(dg_live_tensors(), before, "%s (%s): %zu tensor(s) left behind with no scope open", c->name,
                 grad ? "inputs require grad" : "plain inputs", dg_live_tensors() - before);
}

ParameterizedTestParameters(ownership, no_scope) {
    static int idx[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) idx[i] = (int)i;
    return cr_make_param_array(int, idx, sizeof cases / sizeof cases[0]);
}
ParameterizedTest(int *i, ownership, no_scope) {
    run(&cases[*i], false);
    run(&cases[*i], true);
}
