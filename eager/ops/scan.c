/* eager/ops/scan.c — cumsum and prod, built from differentiable ops (slice, pad, add, mul), so
 * every backend runs them and their gradients come from those ops.
 *
 * cumsum is a Hillis–Steele scan: log2(n) steps of y += y shifted by 1, 2, 4, ... along the
 * axis, n log n adds and no n x n matrix. prod multiplies the two halves of the axis until one
 * entry is left (padded with ones to a power of two): the chain rule through those products gives
 * each element the product of all the others, which is torch's gradient, zeros included (no
 * division by x). Both sum or multiply in a tree order rather than left to right, which moves
 * only float rounding. */
#include "op_util.h"

/* y shifted right by k along axis a, zeros entering (k < y's size) */
static dg_tensor *shift_right(const dg_tensor *y, int a, int64_t k) {
    int64_t pads[2 * DG_MAX_DIMS] = { 0 };
    int slot = y->ndim - 1 - a;
    pads[2 * slot] = k;
    return dg_pad(dg_slice(y, a, 0, y->shape[a] - k, 1), pads, 2 * (slot + 1), DG_PAD_CONSTANT, 0.0);
}

static dg_tensor *cumsum_op(const dg_tensor *x, int axis) {
    DG_CHECK_INPUT("cumsum", x);
    DG_CHECK_FLOAT("cumsum", x);
    int a = dg_norm_axis(axis, x->ndim > 0 ? x->ndim : 1);
    DG_CHECK(a >= 0, "cumsum: axis %d out of range for %s", axis, DG_SHAPE_STR(x));
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_clone(x);   /* a new tensor even with nothing to add, as torch's */
    int64_t n = x->ndim > 0 ? x->shape[a] : 1;
    for (int64_t k = 1; k < n && y; k *= 2) y = dg_add(y, shift_right(y, a, k));
    dg_trace_composite(DG_OP_CUMSUM, y, &x, 1, &(dg_axis_trace_attr){ a, false }, sizeof(dg_axis_trace_attr));   /* ONNX CumSum */
    return dg_composite_end(s, y);
}
dg_tensor *dg_cumsum(const dg_tensor *x, int axis) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CUMSUM, DG_OP_IN(x));
    return dg_op_leave(&f, cumsum_op(f.arg[0], axis));
}

/* the product along axis a, kept as size 1 */
static dg_tensor *prod_axis(dg_tensor *y, int a) {
    int64_t n = y->shape[a];
    if (n == 0) return dg_add_scalar(dg_sum(y, &a, 1, true), 1.0);   /* the empty product; gradient 0 */
    int64_t p = 1;
    while (p < n) p *= 2;
    if (p > n) {
        int64_t pads[2 * DG_MAX_DIMS] = { 0 };
        int slot = y->ndim - 1 - a;
        pads[2 * slot + 1] = p - n;
        y = dg_pad(y, pads, 2 * (slot + 1), DG_PAD_CONSTANT, 1.0);
    }
    for (int64_t h = p / 2; h >= 1 && y; h /= 2) y = dg_mul(dg_slice(y, a, 0, h, 1), dg_slice(y, a, h, 2 * h, 1));
    return y;
}

static dg_tensor *prod_op(const dg_tensor *x, const int *axes, int n, bool keepdim) {
    DG_CHECK_INPUT("prod", x);
    DG_CHECK_FLOAT("prod", x);
    DG_CHECK(n >= 0 && (n == 0 || axes), "prod: %d axes given%s for %s", n, axes ? "" : " with a NULL array", DG_SHAPE_STR(x));
    bool mask[DG_MAX_DIMS] = { false };
    for (int i = 0; i < n; i++) {
        int a = dg_norm_axis(axes[i], x->ndim);
        DG_CHECK(a >= 0 && x->ndim > 0, "prod: axis %d out of range for %s", axes[i], DG_SHAPE_STR(x));
        DG_CHECK(!mask[a], "prod: axis %d of %s appears more than once in the axes", a, DG_SHAPE_STR(x));
        mask[a] = true;
    }
    if (n == 0) for (int i = 0; i < x->ndim; i++) mask[i] = true;
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_clone(x);
    for (int a = 0; a < x->ndim && y; a++)
        if (mask[a]) y = prod_axis(y, a);
    if (y && !keepdim) {
        dg_shape out = { 0 };
        for (int i = 0; i < x->ndim; i++) if (!mask[i]) out.d[out.ndim++] = x->shape[i];
        y = dg_reshape(y, out);
    }
    return dg_composite_end(s, y);
}
dg_tensor *dg_prod(const dg_tensor *x, const int *axes, int n, bool keepdim) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_PROD, DG_OP_IN(x));
    return dg_op_leave(&f, prod_op(f.arg[0], axes, n, keepdim));
}
