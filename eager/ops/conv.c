/* eager/ops/conv.c — 2-D convolution (NCHW): argument checks, output geometry, the backend call
 * and the backward rule (input gradient through conv2d_backward_data, filter and bias
 * gradients through conv2d_backward_filter). Semantics follow torch.nn.functional.conv2d /
 * paddle.nn.functional.conv2d: w is [OC, C/groups, KH, KW], optional bias [OC]. */
#include "op_util.h"

#define OP "conv2d"

_Static_assert(sizeof(dg_conv2d_geom) <= DG_NODE_ATTR_BYTES, "conv geometry must fit in node attributes");


static int conv_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_conv2d_geom *geo = dg_node_attr(n);
    const dg_tensor *x = dg_node_saved(n, 0), *w = dg_node_saved(n, 1);
    dg_tensor *gc = dg_dense(g);   /* upstream gradients may arrive as broadcast views */
    if (!gc) return DG_ENOMEM;
    const dg_backend *be = dg_backend_of(gc);
    if (dg_node_needs_grad(n, 0)) {
        gi[0] = dg_new_like(x);
        if (!gi[0]) return DG_ENOMEM;
        int rc = be->conv2d_backward_data(be, geo, DG_KV(gc), DG_KV(w), DG_KV(gi[0]));
        if (rc) return rc;
    }
    bool need_w = dg_node_needs_grad(n, 1), need_b = dg_node_needs_grad(n, 2);
    if (need_w || need_b) {
        int64_t oc = geo->oc;
        dg_tensor *gw = need_w ? dg_new_like(w) : NULL;
        dg_tensor *gb = need_b ? dg_new_on(gc, &oc, 1, gc->dtype) : NULL;
        if ((need_w && !gw) || (need_b && !gb)) return DG_ENOMEM;
        gi[1] = gw;
        gi[2] = gb;
        return be->conv2d_backward_filter(be, geo, DG_KV(gc), DG_KV(x), DG_KV_OPT(gw), DG_KV_OPT(gb));
    }
    return 0;
}

/* Output length of one spatial axis; <= 0 means the (dilated) kernel does not fit. */
static int64_t conv_out(int64_t in, int64_t k, int s, int p, int d) {
    int64_t span = in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
}

static dg_tensor *conv2d(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p, bool relu) {
    DG_CHECK_INPUT(OP, x);
    DG_CHECK_INPUT(OP, w);
    DG_CHECK(x->ndim == 4, OP ": input must be 4-D [N, C, H, W], got %s", DG_SHAPE_STR(x));
    DG_CHECK(w->ndim == 4, OP ": weight must be 4-D [OC, C/groups, KH, KW], got %s", DG_SHAPE_STR(w));
    DG_CHECK_FLOAT(OP, x);
    DG_CHECK_SAME_DTYPE(OP, x, w);
    DG_CHECK_SAME_DEVICE(OP, x, w);
    DG_CHECK_OPT_INPUT(OP, b);
    uint64_t errs = dg_error_count();
    if (b) {
        DG_CHECK_SAME_DTYPE(OP, x, b);
        DG_CHECK_SAME_DEVICE(OP, x, b);
    }
    for (int i = 0; i < 2; i++)
        DG_CHECK(p.stride[i] >= 1 && p.padding[i] >= 0 && p.dilation[i] >= 1,
                 OP ": need stride >= 1, padding >= 0 and dilation >= 1, got stride (%d,%d), padding (%d,%d), "
                 "dilation (%d,%d) (dg_conv2d_default_params() has (1,1), (0,0), (1,1))", p.stride[0], p.stride[1],
                 p.padding[0], p.padding[1], p.dilation[0], p.dilation[1]);
    DG_CHECK(p.groups >= 1, OP ": groups must be >= 1, got %d", p.groups);
    dg_conv2d_geom g = {
        .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .oc = w->shape[0], .kh = w->shape[2], .kw = w->shape[3],
        .sh = p.stride[0], .sw = p.stride[1],
        .ph = p.padding[0], .pw = p.padding[1],
        .dh = p.dilation[0], .dw = p.dilation[1],
        .groups = p.groups,
        .relu = relu,
    };
    DG_CHECK(g.oc > 0 && w->shape[1] > 0 && g.kh > 0 && g.kw > 0, OP ": weight %s has an empty dim", DG_SHAPE_STR(w));
    DG_CHECK(g.c == w->shape[1] * g.groups,
             OP ": input %s has %lld channels but weight %s with groups=%d expects %lld", DG_SHAPE_STR(x),
             (long long)g.c, DG_SHAPE_STR(w), g.groups, (long long)(w->shape[1] * g.groups));
    DG_CHECK(g.oc % g.groups == 0, OP ": out channels %lld of weight %s not divisible by groups=%d",
             (long long)g.oc, DG_SHAPE_STR(w), g.groups);
    if (b) DG_CHECK(b->ndim == 1 && b->shape[0] == g.oc, OP ": bias must be [%lld], got %s", (long long)g.oc, DG_SHAPE_STR(b));
    g.oh = conv_out(g.h, g.kh, g.sh, g.ph, g.dh);
    g.ow = conv_out(g.w, g.kw, g.sw, g.pw, g.dw);
    DG_CHECK(g.oh > 0 && g.ow > 0,
             OP ": output size %lldx%lld <= 0 for input %s, weight %s, stride (%d,%d), padding (%d,%d), dilation (%d,%d)",
             (long long)g.oh, (long long)g.ow, DG_SHAPE_STR(x), DG_SHAPE_STR(w), g.sh, g.sw, g.ph, g.pw, g.dh, g.dw);

    dg_tensor *xc = dg_dense(x), *wc = dg_dense(w), *bc = dg_dense(b);
    int64_t shape[4] = { g.n, g.oc, g.oh, g.ow };
    dg_tensor *y = (xc && wc && (!b || bc)) ? dg_new_on(x, shape, 4, x->dtype) : NULL;
    int rc = y ? DG_KCALL(x, conv2d, &g, DG_KV(xc), DG_KV(wc), DG_KV_OPT(bc), DG_KV(y)) : DG_ENOMEM;
    const dg_tensor *in[3] = { x, w, b };
    if (!rc && !relu && dg_op_records()) {
        dg_node *n = dg_record_op(DG_OP_CONV2D, y, in, 3, conv_bw);
        if (!n) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;   /* record said why */
        else {
            *(dg_conv2d_geom *)dg_node_attr(n) = g;
            rc = dg_node_save(n, xc);
            if (!rc) rc = dg_node_save(n, wc);
        }
    }
    dg_dense_free(xc, x);
    dg_dense_free(wc, w);
    dg_dense_free(bc, b);
    if (rc) {
        if (!dg_error_since(errs)) DG_ERR(rc, OP ": failed for input %s, weight %s", DG_SHAPE_STR(x), DG_SHAPE_STR(w));
        dg_tensor_free(y);
        return NULL;
    }
    return y;
}

dg_conv2d_params dg_conv2d_default_params(void) {
    return (dg_conv2d_params){ .params_tag = DG_PARAMS_TAG, .stride = { 1, 1 }, .padding = { 0, 0 }, .dilation = { 1, 1 }, .groups = 1 };
}

static dg_tensor *conv2d_op(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p) {
    DG_CHECK_PARAMS("conv2d", p, dg_conv2d_default_params);
    return conv2d(x, w, b, p, false);
}
dg_tensor *dg_conv2d(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CONV2D, DG_OP_IN(x, w, b));
    return dg_op_leave(&f, conv2d_op(f.arg[0], f.arg[1], f.arg[2], p));
}

/* The backend applies the ReLU to the convolution's output in place, so inference never holds
 * the convolution's output and the ReLU's at once. It records no gradient: callers use it only
 * where none is wanted. */
static dg_tensor *conv2d_relu_nograd_op(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p) {
    DG_CHECK_PARAMS("conv2d_relu_nograd", p, dg_conv2d_default_params);
    DG_CHECK(x && w && !dg_op_records(), OP "+relu: for passes without gradients only (inputs %s, %s)",
             x ? DG_SHAPE_STR(x) : "NULL", w ? DG_SHAPE_STR(w) : "NULL");
    return conv2d(x, w, b, p, true);
}
dg_tensor *dg_conv2d_relu_nograd(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CONV2D_RELU, DG_OP_IN(x, w, b));
    return dg_op_leave(&f, conv2d_relu_nograd_op(f.arg[0], f.arg[1], f.arg[2], p));
}
