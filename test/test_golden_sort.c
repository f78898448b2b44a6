/* test/test_golden_sort.c — sort, topk, cumsum, prod, scatter_add and scatter against PyTorch
 * reference files (test/goldens/sort_*.txt, written by test/goldens/make_sort_goldens.py). Same
 * method and tolerances as test/test_golden.c: values within 1e-5 and gradients of sum(out *
 * gout) within 1e-4, relative to max(|want|, floor); sort's and topk's indices exactly. Each file
 * runs in f32 and again in f64 from the same inputs. */
#include "golden_check.h"

static int64_t iparam(golden *g, int64_t i) { return param(g, "iparams", i); }

/* the shared comparison, with the error logged */
static void expect_logged(const char *file, const char *what, const dg_tensor *got, const dg_tensor *want, double tol) {
    cr_log_info("%s: %s %.2e (max relative error)", file, what, expect_close(file, what, got, want, tol));
}

typedef struct sort_case {
    int kind, axis, n;
    bool flag;
    int64_t k;
    int axes[DG_MAX_DIMS];
} sort_case;

/* the op of the file on x (and index, src); *ix gets sort's / topk's indices */
static dg_tensor *run_kind(const sort_case *c, dg_tensor *x, dg_tensor *index, dg_tensor *src, dg_tensor **ix) {
    dg_tensor *out = NULL;
    switch (c->kind) {
    case 0: cr_assert_eq(dg_sort(x, c->axis, c->flag, &out, ix), 0, "sort: %s", dg_last_error()); break;
    case 1: cr_assert_eq(dg_topk(x, c->k, c->axis, c->flag, &out, ix), 0, "topk: %s", dg_last_error()); break;
    case 2: out = dg_cumsum(x, c->axis); break;
    case 3: out = dg_prod(x, c->axes, c->n, c->flag); break;
    case 4: out = dg_scatter_add(x, c->axis, index, src); break;
    default: out = dg_scatter(x, c->axis, index, src); break;
    }
    cr_assert(out, "the op failed: %s", dg_last_error());
    return out;
}

static void run_file(const char *file, dg_dtype dt) {
    char path[256];
    snprintf(path, sizeof path, "test/goldens/%s", file);
    golden *g = golden_load(path);
    dg_scope *s = dg_scope_begin();
    sort_case c = { .kind = (int)iparam(g, 0), .axis = (int)iparam(g, 1), .flag = iparam(g, 2) != 0, .k = iparam(g, 3),
                    .n = (int)iparam(g, 4) };
    for (int i = 0; i < c.n; i++) c.axes[i] = (int)iparam(g, 5 + i);
    bool scatters = c.kind >= 4;
    dg_tensor *x = dg_detach(dg_cast(golden_get(g, "x"), dt));
    dg_tensor *src = scatters ? dg_detach(dg_cast(golden_get(g, "src"), dt)) : NULL;
    dg_tensor *index = scatters ? golden_get(g, "index") : NULL;
    cr_assert_eq(dg_set_requires_grad(x, true), 0);
    if (src) cr_assert_eq(dg_set_requires_grad(src, true), 0);
    dg_tensor *ix = NULL;
    dg_tensor *out = run_kind(&c, x, index, src, c.kind <= 1 ? &ix : NULL);
    cr_assert_eq(dg_dtype_of(out), dt, "%s: output dtype", file);
    const char *tag = dt == DG_F64 ? " (f64)" : "";
    char what[64];
    snprintf(what, sizeof what, "out%s", tag);
    expect_logged(file, what, out, golden_get(g, "out"), TOL_VALUE);
    if (ix) {
        dg_tensor *want = golden_get(g, "indices");
        cr_assert_eq(dg_dtype_of(ix), DG_I64, "%s: indices dtype", file);
        cr_expect(dg_item(dg_sum_all(dg_cast(dg_equal(ix, want), DG_F32))) == (double)dg_numel(want), "%s: indices differ from torch's", file);
    }
    dg_tensor *gout = dg_cast(golden_get(g, "gout"), dt);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(out, gout))), 0, "%s: backward: %s", file, dg_last_error());
    snprintf(what, sizeof what, "grad_x%s", tag);
    expect_logged(file, what, dg_grad(x), golden_get(g, "grad_x"), TOL_GRAD);
    if (src) {
        snprintf(what, sizeof what, "grad_src%s", tag);
        expect_logged(file, what, dg_grad(src), golden_get(g, "grad_src"), TOL_GRAD);
    }
    dg_scope_end(s);
    golden_free(g);
}

static void run(const char *file) {
    run_file(file, DG_F32);
    run_file(file, DG_F64);
}

Test(golden_sort, sort_axis1_stable_ties) { run("sort_axis1_ties.txt"); }
Test(golden_sort, sort_descending_last_axis) { run("sort_desc_last.txt"); }
Test(golden_sort, topk_largest) { run("sort_topk_largest.txt"); }
Test(golden_sort, topk_smallest_axis0) { run("sort_topk_smallest_axis0.txt"); }
Test(golden_sort, cumsum_axis1) { run("sort_cumsum_axis1.txt"); }
Test(golden_sort, cumsum_last_axis) { run("sort_cumsum_last.txt"); }
Test(golden_sort, prod_axis1_with_zeros) { run("sort_prod_axis1_zeros.txt"); }
Test(golden_sort, prod_two_axes_keepdim) { run("sort_prod_0_2_keepdim.txt"); }
Test(golden_sort, prod_all) { run("sort_prod_all.txt"); }
Test(golden_sort, scatter_add_axis1_smaller_index) { run("sort_scatter_add_axis1.txt"); }
Test(golden_sort, scatter_add_axis0_repeats) { run("sort_scatter_add_axis0.txt"); }
Test(golden_sort, scatter_axis1) { run("sort_scatter_axis1.txt"); }
Test(golden_sort, scatter_axis0) { run("sort_scatter_axis0.txt"); }
