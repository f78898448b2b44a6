/* eager/ops/reduce.c — sum, mean, max, min over axes (keepdim or not), argmax/argmin. */
#include "op_util.h"
#include <math.h>

typedef dg_red_attr red_attr;   /* eager/ops/op_attrs.h */

/* Normalise axes into a mask; none given means all. */
static int axes_mask(const dg_tensor *x, const int *axes, int n, bool *mask, const char *op) {
    memset(mask, 0, sizeof(bool) * DG_MAX_DIMS);
    if (!axes || n == 0) { for (int i = 0; i < x->ndim; i++) mask[i] = true; return 0; }
    for (int i = 0; i < n; i++) {
        int a = dg_norm_axis(axes[i], x->ndim);
        if (a < 0 || x->ndim == 0) {
            DG_ERR(DG_EINVAL, "%s: axis %d out of range for %s", op, axes[i], DG_SHAPE_STR(x));
            return DG_EINVAL;
        }
        if (mask[a]) {   /* torch: "dim N appears multiple times in the list of dims" */
            DG_ERR(DG_EINVAL, "%s: axis %d of %s appears more than once in the axes", op, a, DG_SHAPE_STR(x));
            return DG_EINVAL;
        }
        mask[a] = true;
    }
    return 0;
}

/* g with the reduced axes put back as size 1 */
static dg_tensor *keepdim_grad(dg_node *n, const dg_tensor *g) {
    red_attr *a = dg_node_attr(n);
    dg_shape s = dg_node_input_shape(n, 0);
    for (int i = 0; i < a->n_axes; i++) s.d[a->axes[i]] = 1;
    return dg_reshape(g, s);
}
static int sum_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    gi[0] = dg_expand(keepdim_grad(n, g), dg_node_input_shape(n, 0));
    return 0;
}
static int maxmin_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    /* the gradient is shared equally by every element that attains the extremum */
    const dg_tensor *x = dg_node_saved(n, 0), *y = dg_node_saved(n, 1);
    red_attr *a = dg_node_attr(n);
    dg_tensor *mask = dg_cast(dg_equal(x, y), x->dtype);
    dg_tensor *cnt = dg_sum(mask, a->axes, a->n_axes, true);
    gi[0] = dg_mul(mask, dg_div(keepdim_grad(n, g), cnt));
    return 0;
}

static dg_tensor *reduce_op(dg_op_id id, dg_reduce_op op, const dg_tensor *x, const int *axes, int n, bool keepdim) {
    const char *name = dg_op_name(id);
    DG_CHECK_INPUT(name, x);
    if (x->dtype == DG_I32 || x->dtype == DG_I64) {
        /* as torch: an integer sum is int64, max/min keep the dtype; summed in float64, so exact
         * while the values and partial sums stay below 2^53 */
        dg_scope *s = dg_scope_begin();
        dg_tensor *y = reduce_op(id, op, dg_cast(x, DG_F64), axes, n, keepdim);
        return dg_composite_end(s, y ? dg_cast(y, op == DG_RED_SUM ? DG_I64 : x->dtype) : NULL);
    }
    DG_CHECK_FLOAT(name, x);
    bool mask[DG_MAX_DIMS];
    if (axes_mask(x, axes, n, mask, name)) return NULL;
    int64_t shape[DG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        shape[i] = mask[i] ? 1 : x->shape[i];
        DG_CHECK(!(mask[i] && x->shape[i] == 0 && op != DG_RED_SUM), "%s: reducing an empty axis %d of %s", name, i, DG_SHAPE_STR(x));
    }
    dg_tensor *y = dg_new_on(x, shape, x->ndim, x->dtype);
    if (!y) return NULL;
    DG_TRY_KERNEL(DG_KCALL(x, reduce, op, DG_KV(x), DG_KV(y)), y);
    dg_tensor *ykeep = y;
    if (!keepdim) {
        /* y is fresh and contiguous: dropping its size-1 axes is a relabelling, not a copy,
         * and keeps the op a single node on the tape */
        dg_no_grad_begin();
        ykeep = op == DG_RED_SUM ? NULL : dg_detach(y);
        dg_no_grad_end();
        int nd = 0;
        for (int i = 0; i < x->ndim; i++) if (!mask[i]) y->shape[nd++] = x->shape[i];
        y->ndim = nd;
        dg_compute_strides(y->shape, nd, y->stride);
        if (ykeep) { memcpy(ykeep->shape, shape, sizeof shape); ykeep->ndim = x->ndim; dg_compute_strides(shape, x->ndim, ykeep->stride); }
    }
    const dg_tensor *in[1] = { x };
    if (dg_op_records()) {
        dg_node *nd = dg_record_op(id, y, in, 1, op == DG_RED_SUM ? sum_bw : maxmin_bw);
        if (!nd || (op != DG_RED_SUM && (dg_node_save(nd, x) || dg_node_save(nd, ykeep)))) {   /* they said why */
            if (ykeep != y) dg_tensor_free(ykeep);
            dg_tensor_free(y);
            return NULL;
        }
        red_attr *a = dg_node_attr(nd);
        for (int i = 0; i < x->ndim; i++) if (mask[i]) a->axes[a->n_axes++] = i;
    }
    if (ykeep != y) dg_tensor_free(ykeep);
    return y;
}

static dg_tensor *reduce_entry(dg_op_id id, dg_reduce_op op, const dg_tensor *x, const int *axes, int n, bool keepdim) {
    dg_op_frame f;
    dg_op_enter(&f, id, DG_OP_IN(x));
    return dg_op_leave(&f, reduce_op(id, op, f.arg[0], axes, n, keepdim));
}
dg_tensor *dg_sum(const dg_tensor *x, const int *axes, int n, bool keepdim) { return reduce_entry(DG_OP_SUM, DG_RED_SUM, x, axes, n, keepdim); }
dg_tensor *dg_max(const dg_tensor *x, const int *axes, int n, bool keepdim) { return reduce_entry(DG_OP_MAX, DG_RED_MAX, x, axes, n, keepdim); }
dg_tensor *dg_min(const dg_tensor *x, const int *axes, int n, bool keepdim) { return reduce_entry(DG_OP_MIN, DG_RED_MIN, x, axes, n, keepdim); }
static dg_tensor *mean_op(const dg_tensor *x, const int *axes, int n, bool keepdim) {
    DG_CHECK_INPUT("mean", x);
    DG_CHECK_FLOAT("mean", x);   /* torch refuses an integer mean too: no dtype to infer */
    bool mask[DG_MAX_DIMS];
    if (axes_mask(x, axes, n, mask, "mean")) return NULL;
    int64_t cnt = 1;
    for (int i = 0; i < x->ndim; i++) if (mask[i]) cnt *= x->shape[i];
    dg_scope *s = dg_scope_begin();
    /* over no elements the sum is 0 and the mean 0 / 0 = NaN, as torch's */
    dg_tensor *y = dg_mul_scalar(dg_sum(x, axes, n, keepdim), cnt > 0 ? 1.0 / (double)cnt : NAN);
    if (dg_tracing()) {   /* an exporter's ReduceMean */
        dg_mean_trace_attr at = { .keepdim = keepdim };
        memcpy(at.mask, mask, sizeof mask);
        dg_trace_composite(DG_OP_MEAN, y, &x, 1, &at, sizeof at);
    }
    return dg_composite_end(s, y);
}
dg_tensor *dg_mean(const dg_tensor *x, const int *axes, int n, bool keepdim) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MEAN, DG_OP_IN(x));
    return dg_op_leave(&f, mean_op(f.arg[0], axes, n, keepdim));
}
/* checked here too, so that a bad handle is reported under the name the caller used */
static dg_tensor *sum_all_op(const dg_tensor *x) { DG_CHECK_INPUT("sum_all", x); return dg_sum(x, NULL, 0, false); }
dg_tensor *dg_sum_all(const dg_tensor *x) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SUM_ALL, DG_OP_IN(x));
    return dg_op_leave(&f, sum_all_op(f.arg[0]));
}
static dg_tensor *mean_all_op(const dg_tensor *x) { DG_CHECK_INPUT("mean_all", x); return dg_mean(x, NULL, 0, false); }
dg_tensor *dg_mean_all(const dg_tensor *x) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MEAN_ALL, DG_OP_IN(x));
    return dg_op_leave(&f, mean_all_op(f.arg[0]));
}

static dg_tensor *arg_op(dg_op_id id, dg_reduce_op op, const dg_tensor *x, int axis, bool keepdim) {
    const char *name = dg_op_name(id);
    DG_CHECK_INPUT(name, x);
    DG_CHECK_FLOAT(name, x);
    int a = dg_norm_axis(axis, x->ndim);
    DG_CHECK(a >= 0 && x->ndim > 0, "%s: axis %d out of range for %s", name, axis, DG_SHAPE_STR(x));
    DG_CHECK(x->shape[a] > 0, "%s: axis %d of %s is empty", name, axis, DG_SHAPE_STR(x));
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[a] = 1;
    dg_tensor *y = dg_new_on(x, shape, x->ndim, DG_I64);
    if (!y) return NULL;
    DG_TRY_KERNEL(DG_KCALL(x, reduce, op, DG_KV(x), DG_KV(y)), y);
    if (!keepdim) {   /* y is fresh, contiguous and has no graph: drop the axis in place */
        for (int i = a; i < x->ndim - 1; i++) y->shape[i] = y->shape[i + 1];
        y->ndim = x->ndim - 1;
        dg_compute_strides(y->shape, y->ndim, y->stride);
    }
    dg_trace_value(id, y, &x, 1, &(dg_axis_trace_attr){ a, keepdim }, sizeof(dg_axis_trace_attr));
    return y;
}
static dg_tensor *arg_entry(dg_op_id id, dg_reduce_op op, const dg_tensor *x, int axis, bool keepdim) {
    dg_op_frame f;
    dg_op_enter(&f, id, DG_OP_IN(x));
    return dg_op_leave(&f, arg_op(id, op, f.arg[0], axis, keepdim));
}
dg_tensor *dg_argmax(const dg_tensor *x, int axis, bool keepdim) { return arg_entry(DG_OP_ARGMAX, DG_RED_ARGMAX, x, axis, keepdim); }
dg_tensor *dg_argmin(const dg_tensor *x, int axis, bool keepdim) { return arg_entry(DG_OP_ARGMIN, DG_RED_ARGMIN, x, axis, keepdim); }
