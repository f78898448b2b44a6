/* eager/ops/sort.c — sort, argsort and topk. One backend entry does the work: a stable argsort
 * (eager/cpu/sort.c, eager/cuda/sort.cu). The sorted values are then dg_gather(x, indices), so
 * their gradient is gather's (each value's gradient goes back to the position it came from) on
 * every backend, and topk is the first k of the same order. */
#include "op_util.h"

static bool sortable(dg_dtype dt) { return dt != DG_BOOL; }

/* The checks the three share: a live input of a sortable dtype and an axis in range (a 0-d
 * tensor takes axis 0 or -1, as torch's). *a gets the axis, 0 for a 0-d tensor. */
static int check_sort_args(const char *op, const dg_tensor *x, int axis, int *a) {
    DG_CHECK_INPUT_INT(op, x);
    DG_CHECK_INT(sortable(x->dtype), "%s: expects a float or integer tensor, got %s for %s", op, dg_dtype_name(x->dtype),
                 DG_SHAPE_STR(x));
    *a = dg_norm_axis(axis, x->ndim > 0 ? x->ndim : 1);
    DG_CHECK_INT(*a >= 0, "%s: axis %d out of range for %s", op, axis, DG_SHAPE_STR(x));
    return 0;
}

/* int64 positions of the stable order along a (checked arguments); not recorded */
static dg_tensor *argsort_impl(const dg_tensor *x, int a, bool descending) {
    int64_t outer = 1, dim = x->ndim > 0 ? x->shape[a] : 1, inner = 1;
    for (int i = 0; i < a; i++) outer *= x->shape[i];
    for (int i = a + 1; i < x->ndim; i++) inner *= x->shape[i];
    dg_tensor *xc = dg_dense(x);
    if (!xc) return NULL;
    dg_tensor *idx = dg_new_on(x, x->shape, x->ndim, DG_I64);
    if (!idx) { dg_dense_free(xc, x); return NULL; }
    uint64_t errs = dg_error_count();
    int rc = DG_KCALL(x, argsort, DG_KV(xc), DG_KV(idx), outer, dim, inner, descending);
    dg_dense_free(xc, x);
    if (rc) {
        if (!dg_error_since(errs)) DG_ERR(rc, "argsort: kernel failed for %s", DG_SHAPE_STR(x));
        dg_tensor_free(idx);
        return NULL;
    }
    return idx;
}

/* x's values at positions idx along a (a 0-d x through a 1-element view, as gather wants dims) */
static dg_tensor *take_along(const dg_tensor *x, const dg_tensor *idx, int a) {
    if (x->ndim > 0) return dg_gather(x, idx, a);
    dg_tensor *v = dg_gather(dg_reshape(x, DG_SHAPE(1)), dg_reshape(idx, DG_SHAPE(1)), 0);
    return v ? dg_reshape(v, DG_SCALAR_SHAPE) : NULL;
}

/* To a trace, sort and topk are ONNX's TopK (sort: k the axis length): the indices as a value
 * (they have no node) and the values, the gather of x at them, as a composite right after it,
 * paired so that one TopK node writes both. A 0-d x (reshaped around the gather) is not described. */
static void trace_topk(dg_op_id id, dg_op_id ix_id, const dg_tensor *x, int64_t k, int a, bool largest,
                       const dg_tensor *v, const dg_tensor *ix) {
    if (!dg_tracing() || x->ndim == 0) return;
    dg_topk_trace_attr at = { .k = k, .axis = a, .largest = largest, .paired = v && v->node && ix };
    if (ix) dg_trace_value(ix_id, ix, &x, 1, &at, sizeof at);
    if (v) dg_trace_composite(id, v, &x, 1, &at, sizeof at);
}

static dg_tensor *argsort_op(const dg_tensor *x, int axis, bool descending) {
    int a = 0;
    if (check_sort_args("argsort", x, axis, &a)) return NULL;
    dg_tensor *ix = argsort_impl(x, a, descending);
    if (ix) trace_topk(DG_OP_ARGSORT, DG_OP_ARGSORT, x, x->ndim ? x->shape[a] : 1, a, descending, NULL, ix);
    return ix;
}
dg_tensor *dg_argsort(const dg_tensor *x, int axis, bool descending) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_ARGSORT, DG_OP_IN(x));
    return dg_op_leave(&f, argsort_op(f.arg[0], axis, descending));
}

/* Hands the wanted results to the caller's scope; 0, or the failure's status. */
static int deliver(dg_scope *s, dg_tensor *v, dg_tensor *ix, dg_tensor **values, dg_tensor **indices) {
    bool ok = (!values || v) && (!indices || ix);
    if (ok && values) *values = dg_keep_in_parent(v);
    if (ok && indices) *indices = dg_keep_in_parent(ix);
    dg_scope_end(s);
    return ok ? 0 : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
}

static int sort_op(const dg_tensor *x, int axis, bool descending, dg_tensor **values, dg_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    int a = 0;
    int rc = check_sort_args("sort", x, axis, &a);
    if (rc) return rc;
    DG_CHECK_INT(values || indices, "sort: both outputs are NULL (input %s)", DG_SHAPE_STR(x));
    dg_scope *s = dg_scope_begin();
    dg_tensor *ix = argsort_impl(x, a, descending);
    dg_tensor *v = ix && values ? take_along(x, ix, a) : NULL;
    if (ix) trace_topk(DG_OP_SORT, DG_OP_SORT_INDICES, x, x->ndim ? x->shape[a] : 1, a, descending, v, ix);
    return deliver(s, v, ix, values, indices);
}

static int topk_op(const dg_tensor *x, int64_t k, int axis, bool largest, dg_tensor **values, dg_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    int a = 0;
    int rc = check_sort_args("topk", x, axis, &a);
    if (rc) return rc;
    DG_CHECK_INT(values || indices, "topk: both outputs are NULL (input %s)", DG_SHAPE_STR(x));
    int64_t size = x->ndim > 0 ? x->shape[a] : 1;
    DG_CHECK_INT(k >= 0 && k <= size, "topk: k %lld out of range [0, %lld] for axis %d of %s", (long long)k, (long long)size, a,
                 DG_SHAPE_STR(x));
    DG_CHECK_INT(x->ndim > 0 || k == 1, "topk: k %lld of a 0-d tensor (must be 1)", (long long)k);
    dg_scope *s = dg_scope_begin();
    dg_tensor *ix = argsort_impl(x, a, largest);
    if (ix && x->ndim > 0 && k < size) ix = dg_contiguous(dg_slice(ix, a, 0, k, 1));
    dg_tensor *v = ix && values ? take_along(x, ix, a) : NULL;
    if (ix) trace_topk(DG_OP_TOPK, DG_OP_TOPK_INDICES, x, k, a, largest, v, ix);
    return deliver(s, v, ix, values, indices);
}

int dg_sort(const dg_tensor *x, int axis, bool descending, dg_tensor **values, dg_tensor **indices) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SORT, DG_OP_IN(x));
    int rc = sort_op(f.arg[0], axis, descending, values, indices);
    dg_tensor *outs[2] = { values ? *values : NULL, indices ? *indices : NULL };
    rc = dg_op_leave_status(&f, rc, outs, 2);
    if (values) *values = outs[0];
    if (indices) *indices = outs[1];
    return rc;
}

int dg_topk(const dg_tensor *x, int64_t k, int axis, bool largest, dg_tensor **values, dg_tensor **indices) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_TOPK, DG_OP_IN(x));
    int rc = topk_op(f.arg[0], k, axis, largest, values, indices);
    dg_tensor *outs[2] = { values ? *values : NULL, indices ? *indices : NULL };
    rc = dg_op_leave_status(&f, rc, outs, 2);
    if (values) *values = outs[0];
    if (indices) *indices = outs[1];
    return rc;
}
