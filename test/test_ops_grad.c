/* test/test_ops_grad.c — forward values and finite-difference gradient checks (f64) for the
 * elementwise, activation, matmul, reduction, shape, indexing, softmax and loss ops. */
#include "test_util.h"

#define TOL 1e-6
#define FN(name, expr) static dg_tensor *name(dg_tensor *const *in, void *ctx) { (void)ctx; return (expr); }
#define CHECK1(op, shape, lo, hi) do { dg_tensor *x_ = gc_input(shape, lo, hi); gradcheck(#op, op, &x_, 1, NULL, TOL); dg_tensor_free(x_); } while (0)
#define CHECK2(op, s1, s2, lo, hi) do { dg_tensor *x_[2] = { gc_input(s1, lo, hi), gc_input(s2, lo, hi) }; \
    gradcheck(#op, op, x_, 2, NULL, TOL); dg_tensor_free(x_[0]); dg_tensor_free(x_[1]); } while (0)

FN(f_add, dg_add(in[0], in[1]))
FN(f_sub, dg_sub(in[0], in[1]))
FN(f_mul, dg_mul(in[0], in[1]))
FN(f_div, dg_div(in[0], in[1]))
FN(f_maximum, dg_maximum(in[0], in[1]))
FN(f_add_relu, dg_add_relu(in[0], in[1]))
FN(f_minimum, dg_minimum(in[0], in[1]))
FN(f_pow, dg_pow(in[0], in[1]))

Test(grad, binary_broadcasting) {
    dg_manual_seed(1);
    CHECK2(f_add, DG_SHAPE(3, 4), DG_SHAPE(4), -1, 1);
    CHECK2(f_sub, DG_SHAPE(3, 1), DG_SHAPE(1, 4), -1, 1);
    CHECK2(f_mul, DG_SHAPE(2, 3, 4), DG_SHAPE(3, 1), -1, 1);
    CHECK2(f_div, DG_SHAPE(3, 4), DG_SHAPE(3, 4), 0.5, 2);
    CHECK2(f_maximum, DG_SHAPE(3, 4), DG_SHAPE(4), -1, 1);
    CHECK2(f_add_relu, DG_SHAPE(3, 4), DG_SHAPE(4), -1, 1);
    CHECK2(f_add_relu, DG_SHAPE(2, 3), DG_SHAPE(2, 3), -1, 1);
    CHECK2(f_minimum, DG_SHAPE(5), DG_SHAPE(5), -1, 1);
    CHECK2(f_pow, DG_SHAPE(2, 3), DG_SHAPE(3), 0.5, 2);
}

FN(f_add_s, dg_add_scalar(in[0], 2.5))
FN(f_sub_s, dg_sub_scalar(in[0], 2.5))
FN(f_rsub_s, dg_rsub_scalar(in[0], 2.5))
FN(f_mul_s, dg_mul_scalar(in[0], -1.5))
FN(f_div_s, dg_div_scalar(in[0], 4.0))
FN(f_rdiv_s, dg_rdiv_scalar(in[0], 3.0))
FN(f_pow_s, dg_pow_scalar(in[0], 2.5))
FN(f_neg, dg_neg(in[0]))
FN(f_exp, dg_exp(in[0]))
FN(f_log, dg_log(in[0]))
FN(f_sqrt, dg_sqrt(in[0]))
FN(f_abs, dg_abs(in[0]))
FN(f_clip, dg_clip(in[0], -0.5, 0.5))

Test(grad, unary_and_scalar) {
    dg_manual_seed(2);
    CHECK1(f_add_s, DG_SHAPE(3, 4), -1, 1);
    CHECK1(f_sub_s, DG_SHAPE(3, 4), -1, 1);
    CHECK1(f_rsub_s, DG_SHAPE(3, 4), -1, 1);
    CHECK1(f_mul_s, DG_SHAPE(3, 4), -1, 1);
    CHECK1(f_div_s, DG_SHAPE(3, 4), -1, 1);
    CHECK1(f_rdiv_s, DG_SHAPE(3, 4), 0.5, 2);
    CHECK1(f_pow_s, DG_SHAPE(3, 4), 0.5, 2);
    CHECK1(f_neg, DG_SHAPE(3, 4), -1, 1);
    CHECK1(f_exp, DG_SHAPE(3, 4), -1, 1);
    CHECK1(f_log, DG_SHAPE(3, 4), 0.5, 2);
    CHECK1(f_sqrt, DG_SHAPE(3, 4), 0.5, 2);
    CHECK1(f_abs, DG_SHAPE(3, 4), 0.1, 1);
    CHECK1(f_clip, DG_SHAPE(3, 4), -1, 1);
}

Test(forward, unary_values) {
    dg_scope *s = dg_scope_begin();
    double v[4] = {-2, -0.5, 0.5, 2};
    dg_tensor *x = dg_from_data(DG_SHAPE(4), DG_F64, v);
    cr_assert_float_eq(dg_get(dg_relu(x), (int64_t[]){0}), 0.0, 0);
    /* NaN stays NaN, as torch.relu */
    cr_assert(isnan(dg_item(dg_relu(dg_scalar(NAN, DG_F64)))));
    cr_assert(isnan(dg_item(dg_relu(dg_scalar(NAN, DG_F32)))));
    dg_tensor *ar = dg_add_relu(x, dg_scalar(1, DG_F64));
    for (int i = 0; i < 4; i++) cr_assert_float_eq(dg_get(ar, (int64_t[]){i}), fmax(v[i] + 1, 0), 0, "add_relu[%d]", i);
    cr_assert(isnan(dg_item(dg_add_relu(dg_scalar(NAN, DG_F32), dg_scalar(-5, DG_F32)))));
    cr_assert_float_eq(dg_get(dg_leaky_relu(x, 0.1), (int64_t[]){0}), -0.2, 1e-12);
    cr_assert_float_eq(dg_get(dg_sigmoid(x), (int64_t[]){3}), 1 / (1 + exp(-2.0)), 1e-12);
    cr_assert_float_eq(dg_get(dg_tanh(x), (int64_t[]){1}), tanh(-0.5), 1e-12);
    cr_assert_float_eq(dg_get(dg_gelu(x, false), (int64_t[]){2}), 0.5 * 0.5 * (1 + erf(0.5 / sqrt(2))), 1e-12);
    cr_assert_float_eq(dg_get(dg_clip(x, -1, 1), (int64_t[]){0}), -1.0, 0);
    cr_assert_float_eq(dg_get(dg_abs(x), (int64_t[]){0}), 2.0, 0);
    cr_assert_float_eq(dg_get(dg_pow_scalar(x, 2), (int64_t[]){0}), 4.0, 1e-12);
    dg_tensor *b = dg_greater(x, dg_scalar(0, DG_F64));
    cr_assert_eq(dg_dtype_of(b), DG_BOOL);
    cr_assert_eq(dg_get(b, (int64_t[]){2}), 1.0);
    dg_scope_end(s);
}

FN(f_relu, dg_relu(in[0]))
FN(f_leaky, dg_leaky_relu(in[0], 0.2))
FN(f_sigmoid, dg_sigmoid(in[0]))
FN(f_tanh, dg_tanh(in[0]))
FN(f_gelu, dg_gelu(in[0], false))
FN(f_gelu_tanh, dg_gelu(in[0], true))
FN(f_softmax, dg_softmax(in[0], -1))
FN(f_softmax0, dg_softmax(in[0], 0))
FN(f_log_softmax, dg_log_softmax(in[0], -1))
FN(f_log_softmax1, dg_log_softmax(in[0], 1))

Test(grad, activations) {
    dg_manual_seed(3);
    CHECK1(f_relu, DG_SHAPE(4, 5), -1, 1);
    CHECK1(f_leaky, DG_SHAPE(4, 5), -1, 1);
    CHECK1(f_sigmoid, DG_SHAPE(4, 5), -3, 3);
    CHECK1(f_tanh, DG_SHAPE(4, 5), -2, 2);
    CHECK1(f_gelu, DG_SHAPE(4, 5), -3, 3);
    CHECK1(f_gelu_tanh, DG_SHAPE(4, 5), -3, 3);
    CHECK1(f_softmax, DG_SHAPE(3, 5), -2, 2);
    CHECK1(f_softmax0, DG_SHAPE(3, 5), -2, 2);
    CHECK1(f_log_softmax, DG_SHAPE(3, 5), -2, 2);
    CHECK1(f_log_softmax1, DG_SHAPE(2, 4, 3), -2, 2);
}

FN(f_mm, dg_matmul(in[0], in[1]))
FN(f_mm_tt, dg_matmul_t(in[0], in[1], true, true))
FN(f_mm_ta, dg_matmul_t(in[0], in[1], true, false))
FN(f_mm_strided, dg_matmul(dg_transpose(in[0], 0, 1), in[1]))
FN(f_linear, dg_linear(in[0], in[1], in[2]))

Test(grad, matmul_variants) {
    dg_manual_seed(4);
    CHECK2(f_mm, DG_SHAPE(3, 4), DG_SHAPE(4, 5), -1, 1);
    CHECK2(f_mm, DG_SHAPE(2, 3, 4), DG_SHAPE(4, 5), -1, 1);           /* shared right operand */
    CHECK2(f_mm, DG_SHAPE(2, 1, 3, 4), DG_SHAPE(3, 4, 2), -1, 1);     /* broadcast batch dims */
    CHECK2(f_mm, DG_SHAPE(4), DG_SHAPE(4, 3), -1, 1);                 /* vector @ matrix */
    CHECK2(f_mm, DG_SHAPE(2, 3, 4), DG_SHAPE(4), -1, 1);              /* matrix @ vector */
    CHECK2(f_mm_tt, DG_SHAPE(4, 3), DG_SHAPE(5, 4), -1, 1);
    CHECK2(f_mm_ta, DG_SHAPE(2, 4, 3), DG_SHAPE(2, 4, 5), -1, 1);
    CHECK2(f_mm_strided, DG_SHAPE(4, 3), DG_SHAPE(4, 2), -1, 1);
    dg_tensor *x[3] = { gc_input(DG_SHAPE(5, 3), -1, 1), gc_input(DG_SHAPE(2, 3), -1, 1), gc_input(DG_SHAPE(2), -1, 1) };
    gradcheck("linear", f_linear, x, 3, NULL, TOL);
    for (int i = 0; i < 3; i++) dg_tensor_free(x[i]);
}

Test(forward, matmul_f32_matches_f64) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(5);
    dg_tensor *a = dg_randn(DG_SHAPE(3, 37, 65), DG_F64), *b = dg_randn(DG_SHAPE(65, 29), DG_F64);
    dg_tensor *ref = dg_matmul(a, b);
    dg_tensor *got = dg_matmul(dg_cast(a, DG_F32), dg_cast(b, DG_F32));
    cr_assert(max_rel_err(got, ref, 1.0) < 1e-5);
    dg_tensor *got_t = dg_matmul_t(dg_contiguous(dg_transpose(dg_cast(a, DG_F32), 1, 2)), dg_cast(b, DG_F32), true, false);
    cr_assert(max_rel_err(got_t, ref, 1.0) < 1e-5);
    dg_scope_end(s);
}

static int ax1[] = {1}, ax02[] = {0, 2}, axm1[] = {-1};
FN(f_sum_all, dg_sum_all(in[0]))
FN(f_sum_1, dg_sum(in[0], ax1, 1, false))
FN(f_sum_02k, dg_sum(in[0], ax02, 2, true))
FN(f_mean_m1, dg_mean(in[0], axm1, 1, false))
FN(f_mean_all, dg_mean_all(in[0]))
FN(f_max_1, dg_max(in[0], ax1, 1, false))
FN(f_min_all, dg_min(in[0], NULL, 0, false))

Test(grad, reductions) {
    dg_manual_seed(6);
    CHECK1(f_sum_all, DG_SHAPE(3, 4, 2), -1, 1);
    CHECK1(f_sum_1, DG_SHAPE(3, 4, 2), -1, 1);
    CHECK1(f_sum_02k, DG_SHAPE(3, 4, 2), -1, 1);
    CHECK1(f_mean_m1, DG_SHAPE(3, 4, 2), -1, 1);
    CHECK1(f_mean_all, DG_SHAPE(3, 4), -1, 1);
    CHECK1(f_max_1, DG_SHAPE(3, 4, 2), -1, 1);
    CHECK1(f_min_all, DG_SHAPE(3, 4), -1, 1);
}

Test(forward, reductions_and_argmax) {
    dg_scope *s = dg_scope_begin();
    float v[6] = {1, 5, 3, 7, 2, 0};
    dg_tensor *x = dg_from_data(DG_SHAPE(2, 3), DG_F32, v);
    int a0 = 0, a1 = 1;
    dg_tensor *s0 = dg_sum(x, &a0, 1, false);
    cr_assert_eq(dg_ndim(s0), 1);
    cr_assert_float_eq(dg_get(s0, (int64_t[]){1}), 7.0, 0);
    dg_tensor *m1 = dg_max(x, &a1, 1, true);
    cr_assert_eq(dg_dim(m1, 1), 1);
    cr_assert_float_eq(dg_get(m1, (int64_t[]){1, 0}), 7.0, 0);
    dg_tensor *am = dg_argmax(x, 1, false);
    cr_assert_eq(dg_dtype_of(am), DG_I64);
    cr_assert_eq(dg_get(am, (int64_t[]){0}), 1.0);
    cr_assert_eq(dg_get(am, (int64_t[]){1}), 0.0);
    cr_assert_eq(dg_get(dg_argmin(x, 1, false), (int64_t[]){1}), 2.0);
    cr_assert_float_eq(dg_item(dg_mean_all(x)), 3.0, 1e-6);
    dg_scope_end(s);
}

static int perm[] = {2, 0, 1};
FN(f_reshape, dg_reshape(in[0], DG_SHAPE(4, -1)))
FN(f_flatten, dg_flatten(in[0], 1, -1))
FN(f_transpose, dg_transpose(in[0], 0, 2))
FN(f_permute, dg_permute(in[0], perm))
FN(f_reshape_strided, dg_reshape(dg_transpose(in[0], 0, 1), DG_SHAPE(-1)))
FN(f_squeeze, dg_squeeze(dg_unsqueeze(in[0], 1), 1))
FN(f_expand, dg_expand(in[0], DG_SHAPE(3, 2, -1, 2)))
FN(f_slice, dg_slice(in[0], 1, 1, 4, 2))
FN(f_concat, dg_concat(in, 2, 1))
FN(f_clone, dg_clone(in[0]))
static dg_tensor *f_split(dg_tensor *const *in, void *ctx) {
    dg_tensor *p[3];
    if (dg_split(in[0], 3, (int64_t[]){1, 2, 1}, 1, p)) return NULL;
    return dg_add(dg_mul_scalar(p[0], 2.0), dg_sum(p[1], ax1, 1, true));
}

Test(grad, shape_ops) {
    dg_manual_seed(7);
    CHECK1(f_reshape, DG_SHAPE(2, 3, 4), -1, 1);
    CHECK1(f_flatten, DG_SHAPE(2, 3, 4), -1, 1);
    CHECK1(f_transpose, DG_SHAPE(2, 3, 4), -1, 1);
    CHECK1(f_permute, DG_SHAPE(2, 3, 4), -1, 1);
    CHECK1(f_reshape_strided, DG_SHAPE(2, 3), -1, 1);
    CHECK1(f_squeeze, DG_SHAPE(2, 3), -1, 1);
    CHECK1(f_expand, DG_SHAPE(2, 1, 2), -1, 1);
    CHECK1(f_slice, DG_SHAPE(3, 5), -1, 1);
    CHECK2(f_concat, DG_SHAPE(2, 3), DG_SHAPE(2, 4), -1, 1);
    CHECK1(f_clone, DG_SHAPE(3, 2), -1, 1);
    { /* through float32 finite differences carry too few digits: check the rule directly */
        dg_scope *s = dg_scope_begin();
        dg_tensor *x = gc_input(DG_SHAPE(3, 2), -1, 1);
        dg_tensor *y = dg_sum_all(dg_mul_scalar(dg_cast(x, DG_F32), 3.0));
        cr_assert_eq(dg_dtype_of(y), DG_F32);
        cr_assert_eq(dg_backward(y), 0);
        cr_assert_eq(dg_dtype_of(dg_grad(x)), DG_F64, "the gradient has the input's dtype");
        cr_assert_float_eq(dg_get(dg_grad(x), (int64_t[]){2, 1}), 3.0, 0);
        dg_tensor_free(x);
        dg_scope_end(s);
    }
    CHECK1(f_split, DG_SHAPE(2, 4), -1, 1);
}

static dg_tensor *f_index_select(dg_tensor *const *in, void *ctx) {
    dg_tensor *ix = dg_from_data(DG_SHAPE(4), DG_I64, (int64_t[]){2, 0, 2, 1});
    return dg_index_select(in[0], ix, 1);
}
static dg_tensor *f_gather(dg_tensor *const *in, void *ctx) {
    dg_tensor *ix = dg_from_data(DG_SHAPE(3, 2), DG_I64, (int64_t[]){0, 3, 1, 1, 2, 0});
    return dg_gather(in[0], ix, 1);
}
static dg_tensor *f_where(dg_tensor *const *in, void *ctx) {
    return dg_where(dg_greater(in[0], in[1]), in[0], in[1]);
}

Test(grad, indexing) {
    dg_manual_seed(8);
    CHECK1(f_index_select, DG_SHAPE(2, 3, 2), -1, 1);
    CHECK1(f_gather, DG_SHAPE(3, 4), -1, 1);
    CHECK2(f_where, DG_SHAPE(3, 4), DG_SHAPE(4), -1, 1);
    dg_scope *s = dg_scope_begin();
    dg_tensor *oh = dg_one_hot(dg_from_data(DG_SHAPE(3), DG_I64, (int64_t[]){2, 0, 1}), 4);
    cr_assert_eq(dg_dim(oh, 1), 4);
    cr_assert_eq(dg_get(oh, (int64_t[]){0, 2}), 1.0);
    cr_assert_eq(dg_item(dg_sum_all(oh)), 3.0);
    dg_scope_end(s);
}

static dg_tensor *labels4(void) { return dg_from_data(DG_SHAPE(4), DG_I64, (int64_t[]){1, 0, 3, 2}); }
static dg_tensor *f_ce(dg_tensor *const *in, void *ctx) { return dg_cross_entropy(in[0], labels4()); }
static dg_tensor *f_ce_n1(dg_tensor *const *in, void *ctx) {
    return dg_cross_entropy(in[0], dg_from_data(DG_SHAPE(4, 1), DG_I64, (int64_t[]){1, 0, 3, 2}));
}
static dg_tensor *f_ce_ignore_sum(dg_tensor *const *in, void *ctx) {
    dg_cross_entropy_params cep = dg_cross_entropy_default_params();
    cep.use_ignore_index = true;
    cep.ignore_index = 3;
    cep.reduction = DG_REDUCE_SUM;
    return dg_cross_entropy_ext(in[0], labels4(), cep);
}
static dg_tensor *f_ce_none_axis1(dg_tensor *const *in, void *ctx) {
    dg_tensor *lab = dg_from_data(DG_SHAPE(2, 3), DG_I64, (int64_t[]){0, 1, 3, 2, 2, 1});
    dg_cross_entropy_params cep2 = dg_cross_entropy_default_params();
    cep2.axis = 1;
    cep2.reduction = DG_REDUCE_NONE;
    return dg_cross_entropy_ext(in[0], lab, cep2);
}
static dg_tensor *f_ce_soft(dg_tensor *const *in, void *ctx) {
    dg_cross_entropy_params cep3 = dg_cross_entropy_default_params();
    cep3.soft_label = true;
    return dg_cross_entropy_ext(in[0], dg_softmax(in[1], -1), cep3);
}
static dg_tensor *f_nll(dg_tensor *const *in, void *ctx) { return dg_nll_loss(dg_log_softmax(in[0], -1), labels4(), DG_REDUCE_MEAN, -100); }
FN(f_mse, dg_mse_loss(in[0], in[1]))
FN(f_l1, dg_l1_loss(in[0], in[1], DG_REDUCE_SUM))
FN(f_sq, dg_square_error_cost(in[0], in[1]))
FN(f_bce, dg_binary_cross_entropy_with_logits(in[0], in[1], DG_REDUCE_MEAN))

Test(grad, losses) {
    dg_manual_seed(9);
    CHECK1(f_ce, DG_SHAPE(4, 5), -2, 2);
    CHECK1(f_ce_n1, DG_SHAPE(4, 5), -2, 2);
    CHECK1(f_ce_ignore_sum, DG_SHAPE(4, 5), -2, 2);
    CHECK1(f_ce_none_axis1, DG_SHAPE(2, 4, 3), -2, 2);
    CHECK2(f_ce_soft, DG_SHAPE(3, 4), DG_SHAPE(3, 4), -2, 2);
    CHECK1(f_nll, DG_SHAPE(4, 5), -2, 2);
    CHECK2(f_mse, DG_SHAPE(4, 3), DG_SHAPE(4, 3), -1, 1);
    CHECK2(f_l1, DG_SHAPE(4, 3), DG_SHAPE(4, 3), -1, 1);
    CHECK2(f_sq, DG_SHAPE(4, 3), DG_SHAPE(4, 3), -1, 1);
    CHECK2(f_bce, DG_SHAPE(4, 3), DG_SHAPE(4, 3), 0.1, 0.9);
}

Test(forward, cross_entropy_and_accuracy_values) {
    dg_scope *s = dg_scope_begin();
    float v[6] = {2, 1, 0, 0, 0, 3};
    dg_tensor *x = dg_from_data(DG_SHAPE(2, 3), DG_F32, v);
    dg_tensor *lab = dg_from_data(DG_SHAPE(2, 1), DG_I64, (int64_t[]){0, 1});
    double l0 = -(2 - log(exp(2) + exp(1) + 1)), l1 = -(0 - log(2 + exp(3)));
    cr_assert_float_eq(dg_item(dg_cross_entropy(x, lab)), (l0 + l1) / 2, 1e-6);
    cr_assert_float_eq(dg_item(dg_accuracy(x, lab, 1)), 0.5, 0);
    cr_assert_float_eq(dg_item(dg_accuracy(x, lab, 2)), 1.0, 0, "row 1's label ties for second place: counted right");
    cr_assert_float_eq(dg_item(dg_accuracy(x, lab, 3)), 1.0, 0);
    dg_cross_entropy_params cep4 = dg_cross_entropy_default_params();
    cep4.use_ignore_index = true;
    cep4.ignore_index = 1;
    dg_tensor *ig = dg_cross_entropy_ext(x, lab, cep4);
    cr_assert_float_eq(dg_item(ig), l0, 1e-6, "mean over the rows not ignored");
    dg_scope_end(s);
}
