/* eager/ops/softmax.c — softmax and log_softmax over any axis. The kernel works on the last
 * axis of a contiguous [rows, cols] view; another axis is moved last first and back after. */
#include "op_util.h"

typedef dg_sm_attr sm_attr;   /* eager/ops/op_attrs.h */

/* Run the softmax kernel (or its backward when gy != NULL) along `axis`, no recording. */
static dg_tensor *along_axis(const dg_tensor *x, const dg_tensor *gy, int axis, bool lg) {
    bool last = axis == x->ndim - 1;
    dg_tensor *xt = last ? dg_contiguous(x) : dg_contiguous(dg_transpose(x, axis, -1));
    dg_tensor *gt = !gy ? NULL : last ? dg_contiguous(gy) : dg_contiguous(dg_transpose(gy, axis, -1));
    if (!xt || (gy && !gt)) return NULL;
    int64_t cols = xt->ndim ? xt->shape[xt->ndim - 1] : 1, rows = cols ? xt->numel / cols : 0;
    dg_tensor *yt = dg_new_like(xt);
    if (!yt) return NULL;
    int rc = gy ? DG_KCALL(x, softmax_backward, DG_KV(xt), DG_KV(gt), DG_KV(yt), rows, cols, lg)
                : DG_KCALL(x, softmax, DG_KV(xt), DG_KV(yt), rows, cols, lg);
    DG_TRY_KERNEL(rc, yt);
    return last ? yt : dg_contiguous(dg_transpose(yt, axis, -1));
}

static int softmax_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    sm_attr *a = dg_node_attr(n);
    gi[0] = along_axis(dg_node_saved(n, 0), g, a->axis, a->log);
    return gi[0] ? 0 : DG_EINVAL;
}

static dg_tensor *softmax_op(dg_op_id id, const dg_tensor *x, int axis, bool lg) {
    const char *name = dg_op_name(id);
    DG_CHECK_INPUT(name, x);
    DG_CHECK_FLOAT(name, x);
    int a = x->ndim == 0 ? 0 : dg_norm_axis(axis, x->ndim);
    DG_CHECK(a >= 0, "%s: axis %d out of range for %s", name, axis, DG_SHAPE_STR(x));
    if (x->ndim == 0) return lg ? dg_mul_scalar(x, 0.0) : dg_add_scalar(dg_mul_scalar(x, 0.0), 1.0);
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *y = along_axis(x, NULL, a, lg);
    dg_no_grad_end();
    y = dg_keep_in_parent(y);
    dg_scope_end(s);
    if (!y) return NULL;
    const dg_tensor *in[1] = { x };
    if (dg_op_records()) {
        dg_node *n = dg_record_op(id, y, in, 1, softmax_bw);
        if (!n || dg_node_save(n, y)) { dg_tensor_free(y); return NULL; }   /* record/save said why */
        sm_attr *at = dg_node_attr(n);
        at->axis = a;
        at->log = lg;
    }
    return y;
}

static dg_tensor *softmax_entry(dg_op_id id, const dg_tensor *x, int axis, bool lg) {
    dg_op_frame f;
    dg_op_enter(&f, id, DG_OP_IN(x));
    return dg_op_leave(&f, softmax_op(id, f.arg[0], axis, lg));
}
dg_tensor *dg_softmax(const dg_tensor *x, int axis) { return softmax_entry(DG_OP_SOFTMAX, x, axis, false); }
dg_tensor *dg_log_softmax(const dg_tensor *x, int axis) { return softmax_entry(DG_OP_LOG_SOFTMAX, x, axis, true); }
