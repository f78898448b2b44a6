/* eager/ops/index.c — index_select, gather and one_hot. Indices are int64 or int32 and are
 * range-checked by the kernels. */
#include "op_util.h"

typedef dg_ix_attr ix_attr;   /* eager/ops/op_attrs.h */

static bool is_index(const dg_tensor *t) { return t->dtype == DG_I64 || t->dtype == DG_I32; }

static void outer_inner(const dg_tensor *x, int a, int64_t *outer, int64_t *inner) {
    *outer = 1; *inner = 1;
    for (int i = 0; i < a; i++) *outer *= x->shape[i];
    for (int i = a + 1; i < x->ndim; i++) *inner *= x->shape[i];
}

static int index_select_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    int a = ((ix_attr *)dg_node_attr(n))->axis;
    const dg_tensor *ix = dg_node_saved(n, 0);
    dg_tensor *gx = dg_full_on(g, dg_node_input_shape(n, 0), 0.0, g->dtype), *gc = dg_contiguous(g);
    if (!gx || !gc) return DG_ENOMEM;
    int64_t outer, inner;
    outer_inner(gx, a, &outer, &inner);
    gi[0] = gx;
    return DG_KCALL(gx, index_add, DG_KV(gc), DG_KV(ix), DG_KV(gx), outer, gx->shape[a], inner);
}

static dg_tensor *index_select_op(const dg_tensor *x, const dg_tensor *index, int axis) {
    DG_CHECK_INPUT("index_select", x);
    DG_CHECK_INPUT("index_select", index);
    DG_CHECK(is_index(index) && index->ndim == 1, "index_select: index must be a 1-D int64/int32 tensor, got %s %s",
             dg_dtype_name(index->dtype), DG_SHAPE_STR(index));
    DG_CHECK_SAME_DEVICE("index_select", x, index);
    int a = dg_norm_axis(axis, x->ndim);
    DG_CHECK(a >= 0 && x->ndim > 0, "index_select: axis %d out of range for %s", axis, DG_SHAPE_STR(x));
    dg_tensor *xc = dg_is_contiguous(x) ? (dg_tensor *)x : NULL, *ic = dg_is_contiguous(index) ? (dg_tensor *)index : NULL;
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    if (!xc) xc = dg_contiguous(x);
    if (!ic) ic = dg_contiguous(index);
    dg_no_grad_end();
    int64_t shape[DG_MAX_DIMS], outer, inner;
    memcpy(shape, x->shape, sizeof shape);
    shape[a] = index->numel;
    outer_inner(x, a, &outer, &inner);
    dg_tensor *y = (xc && ic) ? dg_new_on(x, shape, x->ndim, x->dtype) : NULL;
    if (y && DG_KCALL(x, index_select, DG_KV(xc), DG_KV(ic), DG_KV(y), outer, x->shape[a], inner) != 0) y = NULL;
    y = dg_keep_in_parent(y);
    dg_tensor *keep_ix = ic == index ? NULL : dg_keep_in_parent(ic);
    dg_scope_end(s);
    if (!y) { dg_tensor_free(keep_ix); return NULL; }
    const dg_tensor *in[1] = { x };
    if (dg_dtype_is_float(x->dtype) && dg_op_records()) {
        dg_node *n = dg_record_op(DG_OP_INDEX_SELECT, y, in, 1, index_select_bw);
        if (!n || dg_node_save(n, ic)) { dg_tensor_free(y); y = NULL; }   /* record/save said why */
        else { ((ix_attr *)dg_node_attr(n))->axis = a; dg_trace_extra(n, index, NULL); }
    }
    dg_tensor_free(keep_ix);
    return y;
}
dg_tensor *dg_index_select(const dg_tensor *x, const dg_tensor *index, int axis) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_INDEX_SELECT, DG_OP_IN(x, index));
    return dg_op_leave(&f, index_select_op(f.arg[0], f.arg[1], axis));
}

static int gather_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    int a = ((ix_attr *)dg_node_attr(n))->axis;
    const dg_tensor *ix = dg_node_saved(n, 0);
    dg_tensor *gx = dg_full_on(g, dg_node_input_shape(n, 0), 0.0, g->dtype), *gc = dg_contiguous(g);
    if (!gx || !gc) return DG_ENOMEM;
    int64_t outer, inner;
    outer_inner(gx, a, &outer, &inner);
    gi[0] = gx;
    return DG_KCALL(gx, scatter_add, DG_KV(gc), DG_KV(ix), DG_KV(gx), outer, gx->shape[a], ix->shape[a], inner);
}

static dg_tensor *gather_op(const dg_tensor *x, const dg_tensor *index, int axis) {
    DG_CHECK_INPUT("gather", x);
    DG_CHECK_INPUT("gather", index);
    DG_CHECK(is_index(index), "gather: index must be int64/int32, got %s", dg_dtype_name(index->dtype));
    DG_CHECK_SAME_DEVICE("gather", x, index);
    int a = dg_norm_axis(axis, x->ndim);
    DG_CHECK(a >= 0 && x->ndim > 0 && index->ndim == x->ndim, "gather: index %s must have the dims of input %s (axis %d)",
             DG_SHAPE_STR(index), DG_SHAPE_STR(x), axis);
    bool smaller = false;
    for (int i = 0; i < x->ndim; i++) {
        DG_CHECK(i == a || index->shape[i] <= x->shape[i], "gather: index %s is larger than input %s on axis %d (only axis %d may be)",
                 DG_SHAPE_STR(index), DG_SHAPE_STR(x), i, a);
        smaller |= i != a && index->shape[i] < x->shape[i];
    }
    if (smaller) {   /* torch reads the leading part of the other axes: gather from that view */
        dg_scope *s = dg_scope_begin();
        const dg_tensor *xs = x;
        for (int i = 0; i < x->ndim && xs; i++)
            if (i != a && index->shape[i] < x->shape[i]) xs = dg_slice(xs, i, 0, index->shape[i], 1);
        return dg_composite_end(s, xs ? dg_gather(xs, index, a) : NULL);
    }
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *xc = dg_contiguous(x), *ic = dg_contiguous(index);
    dg_no_grad_end();
    int64_t outer, inner;
    outer_inner(x, a, &outer, &inner);
    dg_tensor *y = (xc && ic) ? dg_new_on(x, index->shape, x->ndim, x->dtype) : NULL;
    if (y && DG_KCALL(x, gather, DG_KV(xc), DG_KV(ic), DG_KV(y), outer, x->shape[a], index->shape[a], inner) != 0) y = NULL;
    y = dg_keep_in_parent(y);
    dg_tensor *keep_ix = dg_keep_in_parent(ic);
    dg_scope_end(s);
    if (!y) { dg_tensor_free(keep_ix); return NULL; }
    const dg_tensor *in[1] = { x };
    if (dg_dtype_is_float(x->dtype) && dg_op_records()) {
        dg_node *n = dg_record_op(DG_OP_GATHER, y, in, 1, gather_bw);
        if (!n || dg_node_save(n, keep_ix)) { dg_tensor_free(y); y = NULL; }   /* record/save said why */
        else { ((ix_attr *)dg_node_attr(n))->axis = a; dg_trace_extra(n, index, NULL); }
    }
    dg_tensor_free(keep_ix);
    return y;
}
dg_tensor *dg_gather(const dg_tensor *x, const dg_tensor *index, int axis) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_GATHER, DG_OP_IN(x, index));
    return dg_op_leave(&f, gather_op(f.arg[0], f.arg[1], axis));
}

static dg_tensor *one_hot_op(const dg_tensor *labels, int64_t num_classes) {
    DG_CHECK_INPUT("one_hot", labels);
    DG_CHECK(is_index(labels) && num_classes > 0 && labels->ndim < DG_MAX_DIMS, "one_hot: labels must be int64/int32, got %s, classes %lld",
             dg_dtype_name(labels->dtype), (long long)num_classes);
    dg_scope *s = dg_scope_begin();
    dg_tensor *eye = dg_full_on(labels, DG_SHAPE(num_classes, num_classes), 0.0, DG_F32);
    dg_tensor *flat = dg_reshape(labels, DG_SHAPE(-1));
    if (eye) for (int64_t i = 0; i < num_classes; i++) { dg_tensor *d = dg_slice(dg_slice(eye, 0, i, i + 1, 1), 1, i, i + 1, 1); dg_no_grad_begin(); dg_fill_(d, 1.0); dg_no_grad_end(); }
    dg_tensor *rows = dg_index_select(eye, flat, 0);
    dg_shape shp = dg_shape_of(labels);
    shp.d[shp.ndim++] = num_classes;
    dg_tensor *y = dg_keep_in_parent(dg_reshape(rows, shp));
    dg_scope_end(s);
    return y;
}
dg_tensor *dg_one_hot(const dg_tensor *labels, int64_t num_classes) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_ONE_HOT, DG_OP_IN(labels));
    return dg_op_leave(&f, one_hot_op(f.arg[0], num_classes));
}
