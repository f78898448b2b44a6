/* test/test_grad_parity.c — the gradient defects of test/grad_parity_cases.h on the CPU. */
#include "test_util.h"
#include "grad_parity_cases.h"

Test(grad_parity, bce_with_logits_gradient_at_a_zero_logit) {
    gp_bce_with_logits_at_zero(dg_cpu(), DG_F32, 1e-6);
    gp_bce_with_logits_at_zero(dg_cpu(), DG_F64, 1e-12);
}
Test(grad_parity, pow_gradients_where_the_formula_meets_zero_times_infinity) {
    gp_pow_masks(dg_cpu(), DG_F32, 1e-6);
    gp_pow_masks(dg_cpu(), DG_F64, 1e-12);
}
Test(grad_parity, maximum_and_minimum_split_ties) {
    gp_maxmin_ties(dg_cpu(), DG_F32, 1e-6);
    gp_maxmin_ties(dg_cpu(), DG_F64, 1e-12);
}
Test(grad_parity, maximum_and_minimum_propagate_nan_from_either_side) {
    gp_maxmin_nan(dg_cpu(), DG_F32);
    gp_maxmin_nan(dg_cpu(), DG_F64);
}

/* The ties' half-and-half is what the central difference says: f(a) = sum(max(a, b)) around a tie */
Test(grad_parity, tie_gradient_is_the_central_difference) {
    dg_scope *s = dg_scope_begin();
    double h = 1e-6, av = 1.0, bv = 1.0;
    double up = fmax(av + h, bv), down = fmax(av - h, bv);
    cr_expect_float_eq((up - down) / (2 * h), 0.5, 1e-9);
    dg_tensor *a = gp_leaf(dg_cpu(), DG_F64, &av, 1), *b = gp_leaf(dg_cpu(), DG_F64, &bv, 1);
    cr_assert_eq(dg_backward(dg_sum_all(dg_maximum(a, b))), 0);
    gp_expect("maximum tie d/da", dg_grad(a), (double[]){ (up - down) / (2 * h) }, 1, 1e-9);
    dg_scope_end(s);
}

/* The losses' options refuse what does not fit, naming the field and the shapes. */
Test(grad_parity, loss_options_refuse_what_does_not_fit) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(4, 3), DG_F32), *y = dg_from_data(DG_SHAPE(4), DG_I64, (int64_t[]){ 0, 1, 2, 1 });
    dg_cross_entropy_params cp = dg_cross_entropy_default_params();
    cp.weight = dg_ones(DG_SHAPE(4), DG_F32);
    cr_assert_null(dg_cross_entropy_ext(x, y, cp));
    cr_expect(strstr(dg_last_error(), "weight [4]") && strstr(dg_last_error(), "must be [3]"), "%s", dg_last_error());
    cp.weight = NULL;
    cp.label_smoothing = 1.5;
    cr_assert_null(dg_cross_entropy_ext(x, y, cp));
    cr_expect(strstr(dg_last_error(), "label_smoothing"), "%s", dg_last_error());
    dg_bce_params bp = dg_bce_default_params();
    dg_tensor *p = dg_full(DG_SHAPE(4, 3), 0.5, DG_F32), *t = dg_full(DG_SHAPE(4, 3), 1.0, DG_F32);
    cr_assert_null(dg_binary_cross_entropy(dg_add_scalar(p, 0.6), t, bp));
    cr_expect(strstr(dg_last_error(), "[0, 1]"), "%s", dg_last_error());
    bp.pos_weight = dg_ones(DG_SHAPE(3), DG_F32);
    cr_assert_null(dg_binary_cross_entropy(p, t, bp));
    cr_expect(strstr(dg_last_error(), "pos_weight"), "%s", dg_last_error());
    bp.pos_weight = dg_ones(DG_SHAPE(5), DG_F32);
    cr_assert_null(dg_binary_cross_entropy_with_logits_ext(p, t, bp));
    cr_expect(strstr(dg_last_error(), "pos_weight [5]"), "%s", dg_last_error());
    cr_assert_null(dg_mse_loss_ext(p, t, DG_REDUCE_BATCHMEAN));
    cr_expect(strstr(dg_last_error(), "kl_div's only"), "%s", dg_last_error());
    cr_assert_null(dg_smooth_l1_loss(p, t, DG_REDUCE_MEAN, -1));
    cr_assert_null(dg_huber_loss(p, t, DG_REDUCE_MEAN, 0));
    cr_expect(strstr(dg_last_error(), "delta"), "%s", dg_last_error());
    dg_scope_end(s);
}
