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
