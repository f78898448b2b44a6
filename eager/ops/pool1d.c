/* eager/ops/pool1d.c — 1-d pooling on [N, C, L] (torch's max_pool1d, avg_pool1d and the
 * adaptive forms), run as the 2-d pools on a [N, C, 1, L] view: the height axis has kernel 1,
 * stride 1 and no padding, so windows, divisors, indices (flat over 1*L = L) and gradients are
 * exactly the 1-d ones. The views are recorded ops, so gradients flow through them. */
#include "op_util.h"

dg_pool1d_params dg_pool1d_default_params(void) {
    return (dg_pool1d_params){ .params_tag = DG_PARAMS_TAG, .kernel = 0, .stride = DG_STRIDE_KERNEL, .padding = 0, .dilation = 1, .ceil_mode = false,
                               .count_include_pad = true };
}

static bool check_ncl(const char *op, const dg_tensor *x) {
    if (!x) { DG_ERR(DG_EINVAL, "%s: input is NULL", op); return false; }
    if (dg_ndim(x) != 3) {
        char sh[96];
        DG_ERR(DG_EINVAL, "%s: input must be 3-D [N, C, L], got %s", op, dg_shape_str(x, sh, sizeof sh));
        return false;
    }
    return true;
}

static dg_pool2d_params to_2d(dg_pool1d_params p) {
    dg_pool2d_params q = dg_pool2d_default_params();
    q.kernel[0] = 1; q.kernel[1] = p.kernel;
    q.stride[0] = 1; q.stride[1] = p.stride;
    q.padding[0] = 0; q.padding[1] = p.padding;
    q.dilation[0] = 1; q.dilation[1] = p.dilation;
    q.ceil_mode = p.ceil_mode;
    q.count_include_pad = p.count_include_pad;
    return q;
}

/* kind: 0 max, 1 avg, 2 adaptive max, 3 adaptive avg */
static dg_tensor *pool1d(const char *op, int kind, const dg_tensor *x, dg_pool1d_params p, int out_l, dg_tensor **indices) {
    if (indices) *indices = NULL;
    DG_CHECK_PARAMS(op, p, dg_pool1d_default_params);
    if (!check_ncl(op, x)) return NULL;
    if (kind < 2 && p.kernel <= 0) {   /* named here: the 2-d op would report a (1,k) kernel */
        DG_ERR(DG_EINVAL, "%s: kernel must be positive, got %d", op, p.kernel);
        return NULL;
    }
    dg_scope *s = dg_scope_begin();
    dg_tensor *x4 = dg_unsqueeze(x, 2), *y4 = NULL, *i4 = NULL;
    if (x4) {
        switch (kind) {
        case 0: y4 = indices ? dg_max_pool2d_with_indices(x4, to_2d(p), &i4) : dg_max_pool2d(x4, to_2d(p)); break;
        case 1: y4 = dg_avg_pool2d(x4, to_2d(p)); break;
        case 2: y4 = dg_adaptive_max_pool2d(x4, 1, out_l, indices ? &i4 : NULL); break;
        default: y4 = dg_adaptive_avg_pool2d(x4, 1, out_l); break;
        }
    }
    dg_tensor *y = y4 ? dg_squeeze(y4, 2) : NULL;
    dg_tensor *idx = (y && i4) ? dg_squeeze(i4, 2) : NULL;
    if (y && indices) {
        if (idx) idx = dg_keep_in_parent(idx);
        if (!idx) y = NULL;   /* the scope frees y */
    }
    y = dg_composite_end(s, y);
    if (indices) {
        if (y) *indices = idx;
        else dg_tensor_free(idx);
    }
    return y;
}

static dg_tensor *max_pool1d_op(const dg_tensor *x, dg_pool1d_params p) { return pool1d("max_pool1d", 0, x, p, 0, NULL); }
dg_tensor *dg_max_pool1d(const dg_tensor *x, dg_pool1d_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MAX_POOL1D, DG_OP_IN(x));
    return dg_op_leave(&f, max_pool1d_op(f.arg[0], p));
}
static dg_tensor *max_pool1d_with_indices_op(const dg_tensor *x, dg_pool1d_params p, dg_tensor **indices) {
    DG_CHECK_PARAMS("max_pool1d_with_indices", p, dg_pool1d_default_params);
    return pool1d("max_pool1d_with_indices", 0, x, p, 0, indices);
}
dg_tensor *dg_max_pool1d_with_indices(const dg_tensor *x, dg_pool1d_params p, dg_tensor **indices) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MAX_POOL1D_WITH_INDICES, DG_OP_IN(x));
    return dg_op_leave(&f, max_pool1d_with_indices_op(f.arg[0], p, indices));
}
static dg_tensor *avg_pool1d_op(const dg_tensor *x, dg_pool1d_params p) { return pool1d("avg_pool1d", 1, x, p, 0, NULL); }
dg_tensor *dg_avg_pool1d(const dg_tensor *x, dg_pool1d_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_AVG_POOL1D, DG_OP_IN(x));
    return dg_op_leave(&f, avg_pool1d_op(f.arg[0], p));
}
static dg_tensor *adaptive_max_pool1d_op(const dg_tensor *x, int out_l, dg_tensor **indices) {
    return pool1d("adaptive_max_pool1d", 2, x, dg_pool1d_default_params(), out_l, indices);
}
dg_tensor *dg_adaptive_max_pool1d(const dg_tensor *x, int out_l, dg_tensor **indices) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_ADAPTIVE_MAX_POOL1D, DG_OP_IN(x));
    return dg_op_leave(&f, adaptive_max_pool1d_op(f.arg[0], out_l, indices));
}
static dg_tensor *adaptive_avg_pool1d_op(const dg_tensor *x, int out_l) {
    return pool1d("adaptive_avg_pool1d", 3, x, dg_pool1d_default_params(), out_l, NULL);
}
dg_tensor *dg_adaptive_avg_pool1d(const dg_tensor *x, int out_l) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_ADAPTIVE_AVG_POOL1D, DG_OP_IN(x));
    return dg_op_leave(&f, adaptive_avg_pool1d_op(f.arg[0], out_l));
}
