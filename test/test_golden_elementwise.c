/* test/test_golden_elementwise.c — the elementwise ops of issue 32 (elu, softplus, silu, log1p,
 * rsqrt, sin, cos, tril, triu) against PyTorch 1.13 reference files (test/goldens/ew_*.txt,
 * written by test/goldens/make_elementwise_goldens.py): values and gradients of sum(out * gout)
 * in float32, float64 and (values only, against float32 on the same rounded inputs) bfloat16, with the tolerances of
 * test/test_golden.c. */
#include "golden_check.h"

static dg_tensor *run_kind(int kind, const dg_tensor *x, int64_t diag, double p0, double p1) {
    switch (kind) {
    case 0: return dg_elu(x, p0);
    case 1: return dg_softplus(x, p0, p1);
    case 2: return dg_silu(x);
    case 3: return dg_log1p(x);
    case 4: return dg_rsqrt(x);
    case 5: return dg_sin(x);
    case 6: return dg_cos(x);
    case 7: return dg_tril(x, diag);
    default: return dg_triu(x, diag);
    }
}

static void run_ew(const char *file) {
    golden *g = load(file);
    dg_scope *s = dg_scope_begin();
    int kind = (int)param(g, "iparams", 0);
    int64_t diag = param(g, "iparams", 1);
    dg_tensor *fp = golden_get(g, "fparams");
    double p0 = dg_get(fp, (int64_t[]){ 0 }), p1 = dg_get(fp, (int64_t[]){ 1 });
    dg_tensor *x = golden_leaf(g, "x");
    dg_tensor *out = run_kind(kind, x, diag, p0, p1);
    cr_assert(out, "%s: the op failed: %s", file, dg_last_error());
    expect_output(file, g, out);
    backward_weighted(file, g, out, false);
    expect_grad(file, g, x, "x");
    /* float64 */
    dg_tensor *x64 = dg_detach(dg_cast(x, DG_F64));
    cr_assert_eq(dg_set_requires_grad(x64, true), 0, "%s: %s", file, dg_last_error());
    dg_tensor *o64 = run_kind(kind, x64, diag, p0, p1);
    cr_assert(o64 && dg_dtype_of(o64) == DG_F64, "%s: the f64 op failed: %s", file, dg_last_error());
    expect_close(file, "out (f64)", dg_cast(o64, DG_F32), golden_get(g, "out"), TOL_VALUE);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(o64, dg_cast(golden_get(g, "gout"), DG_F64)))), 0, "%s: f64 backward: %s", file, dg_last_error());
    expect_close(file, "grad_x (f64)", dg_cast(dg_grad(x64), DG_F32), golden_get(g, "grad_x"), TOL_GRAD);
    /* bfloat16 values (8 bits of mantissa: input and output rounding) */
    dg_no_grad_begin();
    dg_tensor *ob = run_kind(kind, dg_cast(x, DG_BF16), diag, p0, p1);
    dg_no_grad_end();
    cr_assert(ob && dg_dtype_of(ob) == DG_BF16, "%s: the bf16 op failed: %s", file, dg_last_error());
    dg_tensor *ref = run_kind(kind, dg_cast(dg_cast(x, DG_BF16), DG_F32), diag, p0, p1);   /* the same rounded inputs in f32 */
    expect_close(file, "out (bf16)", dg_cast(ob, DG_F32), dg_detach(ref), 1e-2);
    dg_scope_end(s);
    golden_free(g);
}

Test(golden_ew, elu_alpha1) { run_ew("ew_elu_alpha1.txt"); }
Test(golden_ew, elu_alpha05) { run_ew("ew_elu_alpha0.5.txt"); }
Test(golden_ew, softplus_default) { run_ew("ew_softplus_default.txt"); }
Test(golden_ew, softplus_beta2_threshold1) { run_ew("ew_softplus_beta2_thr1.txt"); }
Test(golden_ew, silu) { run_ew("ew_silu.txt"); }
Test(golden_ew, log1p) { run_ew("ew_log1p.txt"); }
Test(golden_ew, rsqrt) { run_ew("ew_rsqrt.txt"); }
Test(golden_ew, sin) { run_ew("ew_sin.txt"); }
Test(golden_ew, cos) { run_ew("ew_cos.txt"); }
Test(golden_ew, tril_0) { run_ew("ew_tril_0.txt"); }
Test(golden_ew, tril_minus1) { run_ew("ew_tril_m1.txt"); }
Test(golden_ew, triu_1_batched) { run_ew("ew_triu_1.txt"); }
Test(golden_ew, triu_minus2) { run_ew("ew_triu_m2.txt"); }
Test(golden_ew, triu_past_the_end) { run_ew("ew_triu_past_end.txt"); }

/* integer inputs: the math functions give float32 (torch's), tril/triu keep the dtype; elu,
 * silu and softplus refuse them naming the op, as torch's */
Test(golden_ew, integer_inputs) {
    dg_scope *s = dg_scope_begin();
    int64_t v[6] = { 0, 1, 2, 3, 4, 5 };
    dg_tensor *xi = dg_from_data(DG_SHAPE(2, 3), DG_I64, v);
    dg_tensor *y = dg_log1p(xi);
    cr_assert(y && dg_dtype_of(y) == DG_F32, "%s", dg_last_error());
    cr_assert_float_eq(dg_get(y, (int64_t[]){ 1, 2 }), log1p(5.0), 1e-6);
    cr_assert(dg_dtype_of(dg_sin(xi)) == DG_F32 && dg_dtype_of(dg_cos(xi)) == DG_F32 && dg_dtype_of(dg_rsqrt(xi)) == DG_F32);
    dg_tensor *t = dg_triu(xi, 1);
    cr_assert(t && dg_dtype_of(t) == DG_I64);
    cr_assert_eq(dg_get(t, (int64_t[]){ 0, 2 }), 2);
    cr_assert_eq(dg_get(t, (int64_t[]){ 1, 1 }), 0);
    dg_clear_error();
    cr_assert_null(dg_elu(xi, 1.0));
    cr_assert(strstr(dg_last_error(), "elu") && strstr(dg_last_error(), "int64"), "%s", dg_last_error());
    cr_assert_null(dg_silu(xi));
    cr_assert_null(dg_softplus(xi, 1, 20));
    dg_clear_error();
    cr_assert_null(dg_tril(dg_ones(DG_SHAPE(4), DG_F32), 0));
    cr_assert(strstr(dg_last_error(), "tril") && strstr(dg_last_error(), "[4]"), "%s", dg_last_error());
    dg_clear_error();
    dg_scope_end(s);
}

/* a non-contiguous input (a transposed view) gives tril of the view, gradient to the base */
Test(golden_ew, tril_of_a_transposed_view) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_randn(DG_SHAPE(3, 4), DG_F64);
    dg_set_requires_grad(x, true);
    dg_tensor *xt = dg_transpose(x, 0, 1), *y = dg_tril(xt, 0);
    cr_assert(y, "%s", dg_last_error());
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++)
            cr_assert_eq(dg_get(y, (int64_t[]){ i, j }), j <= i ? dg_get(x, (int64_t[]){ j, i }) : 0.0);
    cr_assert_eq(dg_backward(dg_sum_all(y)), 0, "%s", dg_last_error());
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 4; j++) cr_assert_eq(dg_get(dg_grad(x), (int64_t[]){ i, j }), i <= j ? 1.0 : 0.0);
    dg_scope_end(s);
}
