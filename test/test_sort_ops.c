/* test/test_sort_ops.c — sort/argsort/topk, cumsum, prod, scatter_add and scatter: finite-
 * difference gradient checks (f64), the edge cases torch defines (NaN order, stable ties, integer
 * inputs, 0-d and empty inputs, zeros in a product) and the argument errors. The PyTorch goldens
 * are in test/test_golden_sort.c. */
#include "test_util.h"

#define TOL 1e-6
#define FN(name, expr) static dg_tensor *name(dg_tensor *const *in, void *ctx) { (void)ctx; return (expr); }

static dg_tensor *sorted_values(const dg_tensor *x, int axis, bool desc) {
    dg_tensor *v = NULL;
    return dg_sort(x, axis, desc, &v, NULL) == 0 ? v : NULL;
}
static dg_tensor *topk_values(const dg_tensor *x, int64_t k, int axis, bool largest) {
    dg_tensor *v = NULL;
    return dg_topk(x, k, axis, largest, &v, NULL) == 0 ? v : NULL;
}
static dg_tensor *ix64(dg_shape s, const int64_t *v) { return dg_from_data(s, DG_I64, v); }

static const int ax1[] = {1}, ax02[] = {0, 2};
FN(f_sort1, sorted_values(in[0], 1, false))
FN(f_sort_desc, sorted_values(in[0], -1, true))
FN(f_topk, topk_values(in[0], 2, 0, true))
FN(f_topk_small, topk_values(in[0], 3, -1, false))
FN(f_cumsum0, dg_cumsum(in[0], 0))
FN(f_cumsum_last, dg_cumsum(in[0], -1))
FN(f_prod1, dg_prod(in[0], ax1, 1, false))
FN(f_prod02k, dg_prod(in[0], ax02, 2, true))
FN(f_prod_all, dg_prod(in[0], NULL, 0, false))
/* with zeros put in: one in a line (its gradient is the product of the rest), two in another */
static dg_tensor *with_zeros(dg_tensor *x) {
    double m[3 * 5] = { 1, 0, 1, 1, 1, /**/ 0, 1, 1, 0, 1, /**/ 1, 1, 1, 1, 1 };
    return dg_mul(x, dg_from_data(DG_SHAPE(3, 5), DG_F64, m));
}
FN(f_prod_zeros, dg_prod(with_zeros(in[0]), ax1, 1, false))
FN(f_scatter_add1, dg_scatter_add(in[0], 1, ix64(DG_SHAPE(2, 3), (const int64_t[]){0, 3, 0, 2, 2, 1}), in[1]))
FN(f_scatter_add0, dg_scatter_add(in[0], 0, ix64(DG_SHAPE(3, 2), (const int64_t[]){1, 0, 1, 1, 3, 0}), in[1]))
FN(f_scatter1, dg_scatter(in[0], 1, ix64(DG_SHAPE(2, 3), (const int64_t[]){0, 3, 1, 2, 4, 1}), in[1]))

Test(sort_ops, gradients_match_finite_differences) {
    dg_manual_seed(11);
    struct { const char *name; gc_fn f; dg_shape s; } one[] = {
        { "sort axis 1", f_sort1, DG_SHAPE(3, 5, 2) },
        { "sort descending", f_sort_desc, DG_SHAPE(4, 6) },
        { "topk largest axis 0", f_topk, DG_SHAPE(5, 3) },
        { "topk smallest", f_topk_small, DG_SHAPE(2, 7) },
        { "cumsum axis 0", f_cumsum0, DG_SHAPE(9, 2) },
        { "cumsum last", f_cumsum_last, DG_SHAPE(2, 3, 5) },
        { "prod axis 1", f_prod1, DG_SHAPE(3, 5, 2) },
        { "prod axes 0,2 keepdim", f_prod02k, DG_SHAPE(3, 2, 3) },
        { "prod all", f_prod_all, DG_SHAPE(2, 3) },
        { "prod with zeros", f_prod_zeros, DG_SHAPE(3, 5) },
    };
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        dg_tensor *x = gc_input(one[i].s, 0.5, 1.5);
        gradcheck(one[i].name, one[i].f, &x, 1, NULL, TOL);
        dg_tensor_free(x);
    }
    struct { const char *name; gc_fn f; dg_shape sx, ssrc; } two[] = {
        { "scatter_add axis 1, index smaller than src", f_scatter_add1, DG_SHAPE(3, 5), DG_SHAPE(2, 4) },
        { "scatter_add axis 0 with repeats", f_scatter_add0, DG_SHAPE(4, 3), DG_SHAPE(3, 2) },
        { "scatter axis 1", f_scatter1, DG_SHAPE(3, 5), DG_SHAPE(2, 3) },
    };
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++) {
        dg_tensor *x[2] = { gc_input(two[i].sx, -1, 1), gc_input(two[i].ssrc, -1, 1) };
        gradcheck(two[i].name, two[i].f, x, 2, NULL, TOL);
        dg_tensor_free(x[0]);
        dg_tensor_free(x[1]);
    }
}

static void expect_i64(const char *what, const dg_tensor *t, const int64_t *want, int64_t n) {
    cr_assert(t && dg_dtype_of(t) == DG_I64 && dg_numel(t) == n, "%s: %s", what, dg_last_error());
    dg_tensor *c = dg_contiguous((dg_tensor *)t);
    const int64_t *p = dg_data(c);
    for (int64_t i = 0; i < n; i++) cr_expect_eq(p[i], want[i], "%s: [%lld] = %lld, want %lld", what, (long long)i, (long long)p[i], (long long)want[i]);
}

/* torch 1.13: sort(stable=True) / topk of [1, nan, 3, 1, -inf] */
Test(sort_ops, nan_is_the_largest_and_ties_keep_their_order) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_from_data(DG_SHAPE(5), DG_F32, (const float[]){1, NAN, 3, 1, -INFINITY});
    expect_i64("ascending", dg_argsort(x, 0, false), (const int64_t[]){4, 0, 3, 2, 1}, 5);
    expect_i64("descending", dg_argsort(x, 0, true), (const int64_t[]){1, 2, 0, 3, 4}, 5);
    dg_tensor *v = NULL, *ix = NULL;
    cr_assert_eq(dg_topk(x, 2, 0, true, &v, &ix), 0, "%s", dg_last_error());
    expect_i64("topk", ix, (const int64_t[]){1, 2}, 2);
    cr_expect(isnan(((const float *)dg_data(v))[0]) && ((const float *)dg_data(v))[1] == 3.0f);
    dg_scope_end(s);
}

Test(sort_ops, integers_scalars_and_empty_inputs) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *xi = dg_from_data(DG_SHAPE(2, 3), DG_I32, (const int32_t[]){5, -2, 5, 0, 9, -7});
    dg_tensor *v = NULL, *ix = NULL;
    cr_assert_eq(dg_sort(xi, 1, true, &v, &ix), 0, "%s", dg_last_error());
    cr_expect_eq(dg_dtype_of(v), DG_I32);
    expect_i64("int32 descending", ix, (const int64_t[]){0, 2, 1, 1, 0, 2}, 6);
    const int32_t *pv = dg_data(v);
    cr_expect(pv[0] == 5 && pv[1] == 5 && pv[2] == -2 && pv[3] == 9 && pv[4] == 0 && pv[5] == -7);
    dg_tensor *big = dg_from_data(DG_SHAPE(3), DG_I64, (const int64_t[]){INT64_MAX, INT64_MAX - 1, 0});
    expect_i64("int64 beyond double precision", dg_argsort(big, 0, false), (const int64_t[]){2, 1, 0}, 3);
    /* 0-d: axis 0 or -1; the value itself */
    dg_tensor *x0 = dg_full(DG_SCALAR_SHAPE, 2.5, DG_F64);
    cr_assert_eq(dg_sort(x0, -1, false, &v, &ix), 0, "%s", dg_last_error());
    cr_expect(dg_ndim(v) == 0 && dg_item(v) == 2.5 && dg_item(ix) == 0);
    cr_expect_eq(dg_item(dg_cumsum(x0, 0)), 2.5);
    /* empty axis: empty results; the empty product is 1 */
    dg_tensor *e = dg_zeros(DG_SHAPE(2, 0), DG_F32);
    cr_expect_eq(dg_numel(dg_argsort(e, 1, false)), 0);
    cr_assert_eq(dg_topk(e, 0, 1, true, &v, NULL), 0, "%s", dg_last_error());
    cr_expect_eq(dg_numel(v), 0);
    /* the sum over an empty axis is 0 (it used to divide by zero in the CPU kernel) */
    dg_tensor *z = dg_sum(e, (const int[]){1}, 1, false);
    cr_assert(z && dg_numel(z) == 2, "%s", dg_last_error());
    cr_expect(((const float *)dg_data(z))[0] == 0.0f && ((const float *)dg_data(z))[1] == 0.0f);
    dg_tensor *p = dg_prod(e, (const int[]){1}, 1, false);
    cr_assert(p && dg_numel(p) == 2, "%s", dg_last_error());
    cr_expect(((const float *)dg_data(p))[0] == 1.0f && ((const float *)dg_data(p))[1] == 1.0f);
    dg_scope_end(s);
}

Test(sort_ops, values_spot_checks) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_from_data(DG_SHAPE(2, 4), DG_F64, (const double[]){1, 2, 3, 4, 0.5, -1, 2, 0});
    const double *c = dg_data(dg_cumsum(x, 1));
    const double cw[] = {1, 3, 6, 10, 0.5, -0.5, 1.5, 1.5};
    for (int i = 0; i < 8; i++) cr_expect_eq(c[i], cw[i], "cumsum [%d] = %g", i, c[i]);
    const double *p = dg_data(dg_prod(x, (const int[]){1}, 1, false));
    cr_expect(p[0] == 24 && p[1] == 0, "prod %g %g", p[0], p[1]);
    /* a transposed (non-contiguous) input sorts like its contiguous copy */
    dg_tensor *xt = dg_transpose(x, 0, 1), *v1 = NULL, *v2 = NULL, *i1 = NULL, *i2 = NULL;
    cr_assert(dg_sort(xt, 0, true, &v1, &i1) == 0 && dg_sort(dg_contiguous(xt), 0, true, &v2, &i2) == 0, "%s", dg_last_error());
    cr_expect_eq(dg_item(dg_max(dg_abs(dg_sub(v1, v2)), NULL, 0, false)), 0.0);
    cr_expect_eq(dg_item(dg_sum_all(dg_cast(dg_equal(i1, i2), DG_F32))), 8.0);
    /* scatter_add sums repeats; scatter writes; both leave x alone elsewhere */
    dg_tensor *ix = ix64(DG_SHAPE(1, 3), (const int64_t[]){2, 2, 0});
    dg_tensor *src = dg_from_data(DG_SHAPE(1, 3), DG_F64, (const double[]){10, 20, 30});
    const double *sa = dg_data(dg_scatter_add(x, 1, ix, src));
    cr_expect(sa[0] == 31 && sa[1] == 2 && sa[2] == 33 && sa[3] == 4 && sa[4] == 0.5, "scatter_add %g %g %g %g", sa[0], sa[1], sa[2], sa[3]);
    const double *sc = dg_data(dg_scatter(x, 1, ix64(DG_SHAPE(1, 2), (const int64_t[]){3, 0}), src));
    cr_expect(sc[0] == 20 && sc[1] == 2 && sc[2] == 3 && sc[3] == 10 && sc[4] == 0.5, "scatter %g %g %g %g", sc[0], sc[1], sc[2], sc[3]);
    dg_scope_end(s);
}

Test(sort_ops, argument_errors_name_the_op_and_shapes) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_zeros(DG_SHAPE(2, 3), DG_F32), *v = NULL;
    cr_expect_null(dg_argsort(x, 2, false));
    expect_error_contains("argsort axis", "argsort: axis 2 out of range for [2, 3]", NULL);
    cr_expect_neq(dg_sort(dg_zeros(DG_SHAPE(2), DG_BOOL), 0, false, &v, NULL), 0);
    expect_error_contains("sort dtype", "sort: expects a float or integer tensor, got bool", NULL);
    cr_expect_neq(dg_sort(x, 0, false, NULL, NULL), 0);
    expect_error_contains("sort outputs", "sort: both outputs are NULL", NULL);
    cr_expect_neq(dg_topk(x, 4, 1, true, &v, NULL), 0);
    cr_expect_null(v);
    expect_error_contains("topk k", "topk: k 4 out of range [0, 3] for axis 1 of [2, 3]", NULL);
    cr_expect_neq(dg_topk(x, -1, 0, true, &v, NULL), 0);
    expect_error_contains("topk negative k", "topk: k -1", NULL);
    cr_expect_null(dg_cumsum(x, -3));
    expect_error_contains("cumsum axis", "cumsum: axis -3 out of range for [2, 3]", NULL);
    cr_expect_null(dg_cumsum(dg_zeros(DG_SHAPE(3), DG_I64), 0));
    expect_error_contains("cumsum dtype", "cumsum: expects a float tensor", NULL);
    cr_expect_null(dg_prod(x, (const int[]){1, -1}, 2, false));
    expect_error_contains("prod repeated axis", "prod: axis 1 of [2, 3] appears more than once", NULL);
    dg_tensor *ix = ix64(DG_SHAPE(2, 2), (const int64_t[]){0, 1, 2, 0});
    dg_tensor *src = dg_zeros(DG_SHAPE(2, 3), DG_F32);
    cr_expect_null(dg_scatter_add(x, 1, ix, dg_zeros(DG_SHAPE(2, 1), DG_F32)));
    expect_error_contains("scatter_add src", "scatter_add: index [2, 2] is larger than src [2, 1] on axis 1", NULL);
    cr_expect_null(dg_scatter_add(x, 0, ix64(DG_SHAPE(1, 4), (const int64_t[]){0, 0, 0, 0}), dg_zeros(DG_SHAPE(1, 4), DG_F32)));
    expect_error_contains("scatter_add index", "scatter_add: index [1, 4] is larger than the input [2, 3] on axis 1", NULL);
    cr_expect_null(dg_scatter_add(x, 1, ix, dg_zeros(DG_SHAPE(2, 3), DG_F64)));
    expect_error_contains("scatter_add dtype", "scatter_add: src is float64 [2, 3] but the input is float32 [2, 3]", NULL);
    cr_expect_null(dg_scatter_add(x, 1, dg_zeros(DG_SHAPE(2, 2), DG_F32), src));
    expect_error_contains("scatter_add index dtype", "scatter_add: index must be int64/int32, got float32", NULL);
    cr_expect_null(dg_scatter_add(x, 1, ix64(DG_SHAPE(1, 1), (const int64_t[]){3}), src));
    expect_error_contains("scatter_add range", "index 3", "out of range [0, 3)");
    cr_expect_null(dg_scatter(x, 1, ix64(DG_SHAPE(1, 2), (const int64_t[]){1, 1}), src));
    expect_error_contains("scatter repeat", "scatter: index [1, 2] names one position of the input [2, 3] 2 times", NULL);
    cr_expect_null(dg_scatter(x, 2, ix, src));
    expect_error_contains("scatter axis", "scatter: axis 2 out of range for [2, 3]", NULL);
    dg_scope_end(s);
}
