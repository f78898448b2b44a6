/* eager/ops/pool_indices.c — the max pools that know their argmax: max_pool2d with torch's
 * return_indices (and every dilated max pool, which the plain kernels do not cover) and
 * adaptive_max_pool2d. The forward writes I64 indices flat within each input plane; the
 * backward adds the upstream gradient at those indices, so ties and NaNs send the gradient
 * where the forward's value came from (the first maximum, NaN winning), as torch does. */
#include "pool_internal.h"

typedef dg_pool_idx_attr idx_attr;   /* eager/ops/op_attrs.h */
_Static_assert(sizeof(idx_attr) <= DG_NODE_ATTR_BYTES, "pool attributes must fit in the node");

static int idx_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const idx_attr *a = dg_node_attr(n);
    dg_tensor *gc = dg_dense(g);
    dg_tensor *gx = gc ? dg_empty_as(gc, dg_node_input_shape(n, 0), gc->dtype) : NULL;
    if (!gx) { dg_dense_free(gc, g); return DG_ENOMEM; }
    gi[0] = gx;
    const dg_backend *be = dg_backend_of(gc);
    int rc = be->max_pool2d_indices_backward(be, a->adaptive ? NULL : &a->g, DG_KV(dg_node_saved(n, 0)), DG_KV(gc), DG_KV(gx));
    dg_dense_free(gc, g);
    return rc;
}

/* Runs the forward on a contiguous copy of x, records the node (saving the indices) and hands
 * the indices to *indices when asked. */
static dg_tensor *idx_run(dg_op_id id, bool adaptive, const dg_tensor *x, const dg_pool2d_geom *g, dg_tensor **indices) {
    uint64_t errs = dg_error_count();
    if (indices) *indices = NULL;
    dg_tensor *xc = dg_dense(x);
    int64_t shape[4] = { g->n, g->c, g->oh, g->ow };
    dg_tensor *y = xc ? dg_new_on(x, shape, 4, x->dtype) : NULL;
    dg_tensor *idx = y ? dg_new_on(x, shape, 4, DG_I64) : NULL;
    const dg_backend *be = dg_backend_of(x);
    int rc = !idx ? DG_ENOMEM
           : adaptive ? be->adaptive_max_pool2d(be, DG_KV(xc), DG_KV(y), DG_KV(idx))
           : be->max_pool2d_with_indices(be, g, DG_KV(xc), DG_KV(y), DG_KV(idx));
    const dg_tensor *in[1] = { x };
    if (!rc && dg_op_records()) {
        dg_node *n = dg_record_op(id, y, in, 1, idx_bw);
        if (!n) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;   /* record said why */
        else {
            idx_attr *a = dg_node_attr(n);
            a->adaptive = adaptive;
            a->g = *g;
            rc = dg_node_save(n, idx);
        }
    }
    dg_dense_free(xc, x);
    if (rc) {
        if (!dg_error_since(errs)) DG_ERR(rc, "%s: failed for input %s", dg_op_name(id), DG_SHAPE_STR(x));
        dg_tensor_free(y);
        dg_tensor_free(idx);
        return NULL;
    }
    if (indices) *indices = idx;
    else dg_tensor_free(idx);   /* the node keeps its own alias */
    return y;
}

static dg_tensor *max_pool2d_with_indices_op(const dg_tensor *x, dg_pool2d_params p, dg_tensor **indices) {
    DG_CHECK_PARAMS("max_pool2d_with_indices", p, dg_pool2d_default_params);
    if (indices) *indices = NULL;
    DG_CHECK_INPUT("max_pool2d_with_indices", x);
    dg_pool2d_geom g;
    if (!dg_pool2d_make_geom("max_pool2d_with_indices", false, x, p, &g)) return NULL;
    return idx_run(DG_OP_MAX_POOL2D_WITH_INDICES, false, x, &g, indices);
}
dg_tensor *dg_max_pool2d_with_indices(const dg_tensor *x, dg_pool2d_params p, dg_tensor **indices) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MAX_POOL2D_WITH_INDICES, DG_OP_IN(x));
    return dg_op_leave(&f, max_pool2d_with_indices_op(f.arg[0], p, indices));
}

static dg_tensor *adaptive_max_pool2d_op(const dg_tensor *x, int out_h, int out_w, dg_tensor **indices) {
    if (indices) *indices = NULL;
    DG_CHECK_INPUT("adaptive_max_pool2d", x);
    DG_CHECK(x->ndim == 4, "adaptive_max_pool2d: input must be 4-D [N, C, H, W], got %s", DG_SHAPE_STR(x));
    DG_CHECK_FLOAT("adaptive_max_pool2d", x);
    DG_CHECK(out_h > 0 && out_w > 0, "adaptive_max_pool2d: output size must be positive, got %dx%d for input %s",
             out_h, out_w, DG_SHAPE_STR(x));
    DG_CHECK(x->shape[2] > 0 && x->shape[3] > 0, "adaptive_max_pool2d: input %s has an empty spatial dim", DG_SHAPE_STR(x));
    dg_pool2d_geom g = { .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3], .oh = out_h, .ow = out_w,
                         .dh = 1, .dw = 1 };
    return idx_run(DG_OP_ADAPTIVE_MAX_POOL2D, true, x, &g, indices);
}
dg_tensor *dg_adaptive_max_pool2d(const dg_tensor *x, int out_h, int out_w, dg_tensor **indices) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_ADAPTIVE_MAX_POOL2D, DG_OP_IN(x));
    return dg_op_leave(&f, adaptive_max_pool2d_op(f.arg[0], out_h, out_w, indices));
}
