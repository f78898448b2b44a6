/* eager/ops/scatter.c — torch's scatter_add and scatter (Tensor.scatter_add / Tensor.scatter with a
 * src tensor). One recorded primitive does the work: src's entries added into zeros at the
 * positions index names along the axis, with gather as its backward (the scatter_add and gather
 * kernels of eager/cpu/index.c and eager/cuda/index.cu). The rest is composition: torch's index
 * may be smaller than src and x on the other axes, so src is sliced to the index and the result
 * padded with zeros to x's shape; scatter_add adds x, scatter picks the scattered entries where
 * the index reached (a where, which gives x's gradient 0 there, as torch's). */
#include "op_util.h"

typedef dg_ix_attr scatter_attr;   /* op_attrs.h */

static int scatter_into_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    int a = ((scatter_attr *)dg_node_attr(n))->axis;
    const dg_tensor *ix = dg_node_saved(n, 0);
    dg_tensor *gc = dg_contiguous(g), *gs = dg_empty_as(g, dg_node_input_shape(n, 0), g->dtype);
    if (!gc || !gs) return DG_ENOMEM;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < a; i++) outer *= ix->shape[i];
    for (int i = a + 1; i < ix->ndim; i++) inner *= ix->shape[i];
    gi[0] = gs;
    return DG_KCALL(gs, gather, DG_KV(gc), DG_KV(ix), DG_KV(gs), outer, g->shape[a], ix->shape[a], inner);
}

/* zeros shaped like index but with xdim along a, plus src (index's shape, contiguous) added at
 * the indexed positions; recorded with src as the input */
static dg_tensor *scatter_into(const dg_tensor *src, const dg_tensor *ix, int a, int64_t xdim) {
    dg_shape zs = dg_shape_of(ix);
    zs.d[a] = xdim;
    dg_tensor *z = dg_full_on(src, zs, 0.0, src->dtype);
    if (!z) return NULL;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < a; i++) outer *= ix->shape[i];
    for (int i = a + 1; i < ix->ndim; i++) inner *= ix->shape[i];
    DG_TRY_KERNEL(DG_KCALL(z, scatter_add, DG_KV(src), DG_KV(ix), DG_KV(z), outer, xdim, ix->shape[a], inner), z);
    const dg_tensor *in[1] = { src };
    if (dg_needs_record(in, 1)) {   /* a helper of scatter and scatter_add: its own input decides */
        dg_node *n = dg_record_op(DG_OP_SCATTER_ADD, z, in, 1, scatter_into_bw);
        if (!n || dg_node_save(n, ix)) { dg_tensor_free(z); return NULL; }   /* record/save said why */
        ((scatter_attr *)dg_node_attr(n))->axis = a;
    }
    return z;
}

/* to a trace, both are one op (ONNX ScatterElements), not the zeros, counts and padding above */
static void trace_scatter(dg_op_id id, const dg_tensor *y, const dg_tensor *x, const dg_tensor *index, const dg_tensor *src,
                          int a) {
    dg_trace_composite(id, y, (const dg_tensor *[]){ x, index, src }, 3, &(dg_axis_trace_attr){ a, false },
                       sizeof(dg_axis_trace_attr));
}

/* torch's argument rules for both ops; *a gets the axis */
static dg_tensor *check_scatter(const char *op, const dg_tensor *x, int axis, const dg_tensor *index, const dg_tensor *src, int *a) {
    DG_CHECK_INPUT(op, x);
    DG_CHECK_INPUT(op, index);
    DG_CHECK_INPUT(op, src);
    DG_CHECK_FLOAT(op, x);
    DG_CHECK(src->dtype == x->dtype, "%s: src is %s %s but the input is %s %s", op, dg_dtype_name(src->dtype), DG_SHAPE_STR(src),
             dg_dtype_name(x->dtype), DG_SHAPE_STR(x));
    DG_CHECK(index->dtype == DG_I64 || index->dtype == DG_I32, "%s: index must be int64/int32, got %s %s", op,
             dg_dtype_name(index->dtype), DG_SHAPE_STR(index));
    DG_CHECK_SAME_DEVICE(op, x, index);
    DG_CHECK_SAME_DEVICE(op, x, src);
    *a = dg_norm_axis(axis, x->ndim);
    DG_CHECK(*a >= 0 && x->ndim > 0, "%s: axis %d out of range for %s", op, axis, DG_SHAPE_STR(x));
    DG_CHECK(index->ndim == x->ndim && src->ndim == x->ndim, "%s: index %s and src %s must have the dims of the input %s", op,
             DG_SHAPE_STR(index), DG_SHAPE_STR(src), DG_SHAPE_STR(x));
    for (int i = 0; i < x->ndim; i++) {
        DG_CHECK(index->shape[i] <= src->shape[i], "%s: index %s is larger than src %s on axis %d", op, DG_SHAPE_STR(index),
                 DG_SHAPE_STR(src), i);
        DG_CHECK(i == *a || index->shape[i] <= x->shape[i], "%s: index %s is larger than the input %s on axis %d", op,
                 DG_SHAPE_STR(index), DG_SHAPE_STR(x), i);
    }
    return (dg_tensor *)x;
}

/* the entries of src the index covers (src's leading block of index's shape) */
static dg_tensor *src_block(const dg_tensor *src, const dg_tensor *index) {
    dg_tensor *s = (dg_tensor *)src;
    for (int i = 0; i < src->ndim && s; i++)
        if (index->shape[i] < src->shape[i]) s = dg_slice(s, i, 0, index->shape[i], 1);
    return s ? dg_contiguous(s) : NULL;
}

/* z (index's shape except along the axis) padded with zeros at the end of each axis to x's */
static dg_tensor *pad_to(const dg_tensor *z, const dg_tensor *x) {
    if (!z) return NULL;
    int64_t pads[2 * DG_MAX_DIMS] = { 0 };
    bool any = false;
    for (int i = 0; i < x->ndim; i++) {
        int slot = x->ndim - 1 - i;
        pads[2 * slot + 1] = x->shape[i] - z->shape[i];
        any = any || pads[2 * slot + 1] != 0;
    }
    return any ? dg_pad(z, pads, 2 * x->ndim, DG_PAD_CONSTANT, 0.0) : (dg_tensor *)z;
}

static dg_tensor *scatter_add_op(const dg_tensor *x, int axis, const dg_tensor *index, const dg_tensor *src) {
    int a = 0;
    if (!check_scatter("scatter_add", x, axis, index, src, &a)) return NULL;
    if (index->numel == 0) return dg_clone(x);
    dg_scope *s = dg_scope_begin();
    dg_tensor *ic = dg_contiguous(index), *sb = src_block(src, index);
    dg_tensor *z = ic && sb ? pad_to(scatter_into(sb, ic, a, x->shape[a]), x) : NULL;
    dg_tensor *y = z ? dg_add(x, z) : NULL;
    trace_scatter(DG_OP_SCATTER_ADD, y, x, index, src, a);
    return dg_composite_end(s, y);
}
dg_tensor *dg_scatter_add(const dg_tensor *x, int axis, const dg_tensor *index, const dg_tensor *src) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SCATTER_ADD, DG_OP_IN(x, index, src));
    return dg_op_leave(&f, scatter_add_op(f.arg[0], axis, f.arg[1], f.arg[2]));
}

static dg_tensor *scatter_op(const dg_tensor *x, int axis, const dg_tensor *index, const dg_tensor *src) {
    int a = 0;
    if (!check_scatter("scatter", x, axis, index, src, &a)) return NULL;
    if (index->numel == 0) return dg_clone(x);
    dg_scope *s = dg_scope_begin();
    dg_tensor *ic = dg_contiguous(index), *sb = src_block(src, index), *y = NULL;
    /* how many times each position is written: torch leaves the winner of a repeated position
     * undefined, so a repeat is refused rather than given some arbitrary answer */
    dg_no_grad_begin();
    dg_tensor *ones = ic ? dg_full_on(x, dg_shape_of(ic), 1.0, x->dtype) : NULL;
    dg_tensor *count = ones ? pad_to(scatter_into(ones, ic, a, x->shape[a]), x) : NULL;
    dg_tensor *most = count ? dg_max(count, NULL, 0, false) : NULL;
    dg_no_grad_end();
    double m = most ? dg_item(most) : 0.0;
    if (most && m > 1.0)
        DG_ERR(DG_EINVAL, "scatter: index %s names one position of the input %s %.0f times along axis %d (the result would be "
               "undefined; use scatter_add to sum)", DG_SHAPE_STR(index), DG_SHAPE_STR(x), m, a);
    else if (count && sb) {
        dg_tensor *zero = dg_full_on(x, DG_SCALAR_SHAPE, 0.0, x->dtype);
        dg_tensor *vals = pad_to(scatter_into(sb, ic, a, x->shape[a]), x);
        y = zero && vals ? dg_where(dg_greater(count, zero), vals, x) : NULL;
        trace_scatter(DG_OP_SCATTER, y, x, index, src, a);
    }
    return dg_composite_end(s, y);
}
dg_tensor *dg_scatter(const dg_tensor *x, int axis, const dg_tensor *index, const dg_tensor *src) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SCATTER, DG_OP_IN(x, index, src));
    return dg_op_leave(&f, scatter_op(f.arg[0], axis, f.arg[1], f.arg[2]));
}
