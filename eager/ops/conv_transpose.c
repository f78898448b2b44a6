/* eager/ops/conv_transpose.c — torch.nn.functional.conv_transpose2d and conv1d.
 *
 * A transposed convolution is the input gradient of the convolution that maps its output back
 * to its input, so it runs on the conv2d entries of eager/backend.h with the roles swapped:
 * that convolution (geometry `cg`) has input [N, C_out, OH, OW], weight [C_in, C_out/groups,
 * KH, KW] (torch's transposed layout is exactly conv2d's [OC, C/groups, KH, KW] with OC = C_in)
 * and output [N, C_in, H, W]. Forward = conv2d_backward_data, input gradient = conv2d forward,
 * weight gradient = conv2d_backward_filter with x and gy swapped, bias gradient = sum of gy.
 *
 * output_padding adds rows/columns at the bottom/right. Up to stride-1 of them keep the
 * geometry one a convolution can have (floor division absorbs them); torch also allows
 * output_padding >= stride when it is below the dilation, and then the convolution over the
 * full output has floor(output_padding/stride) more output rows than x has: those are inputs
 * of the transposed convolution that are zero. So x is zero-padded at the bottom/right to that
 * size (the saved copy is the padded one) and the input gradient is the top-left block of the
 * convolution's output; every backend then sees only plain geometries.
 *
 * conv1d is conv2d on [N, C, 1, L] views (recorded ops, so gradients flow through them). */
#include "op_util.h"

#define OP "conv_transpose2d"

typedef dg_ct_attr ct_attr;   /* eager/ops/op_attrs.h */
_Static_assert(sizeof(ct_attr) <= DG_NODE_ATTR_BYTES, "conv_transpose2d attributes must fit in the node");

/* View of contiguous 4-D t's top-left [.., h, w] block (t's strides). */
static dg_kview *block_view(dg_kview *v, int64_t h, int64_t w) {
    v->shape[2] = h;
    v->shape[3] = w;
    v->numel = v->shape[0] * v->shape[1] * h * w;
    return v;
}

static int ct_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const ct_attr *a = dg_node_attr(n);
    const dg_conv2d_geom *cg = &a->cg;
    const dg_tensor *x = dg_node_saved(n, 0), *w = dg_node_saved(n, 1);   /* x: padded when cut */
    dg_tensor *gc = dg_dense(g);
    int rc = gc ? 0 : DG_ENOMEM;
    const dg_backend *be = gc ? dg_backend_of(gc) : NULL;
    bool cut = cg->oh != a->h || cg->ow != a->w;
    if (!rc && dg_node_needs_grad(n, 0)) {
        int64_t shape[4] = { cg->n, cg->oc, a->h, a->w };
        gi[0] = dg_new_on(gc, shape, 4, gc->dtype);
        dg_tensor *full = cut ? dg_new_like(x) : gi[0];
        rc = gi[0] && full ? be->conv2d(be, cg, DG_KV(gc), DG_KV(w), NULL, DG_KV(full)) : DG_ENOMEM;
        if (!rc && cut) rc = be->copy(be, block_view(DG_KV(full), a->h, a->w), DG_KV(gi[0]));
        if (cut) dg_tensor_free(full);
    }
    if (!rc && dg_node_needs_grad(n, 1)) {
        gi[1] = dg_new_like(w);
        rc = gi[1] ? be->conv2d_backward_filter(be, cg, DG_KV(x), DG_KV(gc), DG_KV(gi[1]), NULL) : DG_ENOMEM;
    }
    if (!rc && dg_node_needs_grad(n, 2)) {
        int64_t oc = cg->c;
        gi[2] = dg_new_on(gc, &oc, 1, gc->dtype);
        if (!gi[2]) rc = DG_ENOMEM;
        else {   /* sum over N, OH, OW into a [1, C_out, 1, 1] view of the [C_out] gradient */
            dg_kview *v = DG_KV(gi[2]);
            v->ndim = 4;
            v->shape[0] = 1; v->shape[1] = oc; v->shape[2] = 1; v->shape[3] = 1;
            v->stride[0] = oc; v->stride[1] = 1; v->stride[2] = 1; v->stride[3] = 1;
            rc = be->reduce(be, DG_RED_SUM, DG_KV(gc), v);
        }
    }
    dg_dense_free(gc, g);
    return rc;
}

dg_conv_transpose2d_params dg_conv_transpose2d_default_params(void) {
    return (dg_conv_transpose2d_params){ .params_tag = DG_PARAMS_TAG, .stride = { 1, 1 }, .padding = { 0, 0 }, .output_padding = { 0, 0 },
                                         .dilation = { 1, 1 }, .groups = 1 };
}

static dg_tensor *conv_transpose2d_op(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv_transpose2d_params p) {
    DG_CHECK_PARAMS("conv_transpose2d", p, dg_conv_transpose2d_default_params);
    DG_CHECK_INPUT(OP, x);
    DG_CHECK_INPUT(OP, w);
    DG_CHECK(x->ndim == 4, OP ": input must be 4-D [N, C_in, H, W], got %s", DG_SHAPE_STR(x));
    DG_CHECK(w->ndim == 4, OP ": weight must be 4-D [C_in, C_out/groups, KH, KW], got %s", DG_SHAPE_STR(w));
    DG_CHECK_FLOAT(OP, x);
    DG_CHECK_SAME_DTYPE(OP, x, w);
    DG_CHECK_SAME_DEVICE(OP, x, w);
    DG_CHECK_OPT_INPUT(OP, b);
    uint64_t errs = dg_error_count();
    if (b) {
        DG_CHECK_SAME_DTYPE(OP, x, b);
        DG_CHECK_SAME_DEVICE(OP, x, b);
    }
    for (int i = 0; i < 2; i++) {
        DG_CHECK(p.stride[i] >= 1 && p.padding[i] >= 0 && p.dilation[i] >= 1 && p.output_padding[i] >= 0,
                 OP ": need stride >= 1, padding >= 0, output_padding >= 0 and dilation >= 1, got stride (%d,%d), "
                 "padding (%d,%d), output_padding (%d,%d), dilation (%d,%d)", p.stride[0], p.stride[1], p.padding[0],
                 p.padding[1], p.output_padding[0], p.output_padding[1], p.dilation[0], p.dilation[1]);
        DG_CHECK(p.output_padding[i] < p.stride[i] || p.output_padding[i] < p.dilation[i],
                 OP ": output_padding (%d,%d) must be smaller than either stride (%d,%d) or dilation (%d,%d)",
                 p.output_padding[0], p.output_padding[1], p.stride[0], p.stride[1], p.dilation[0], p.dilation[1]);
    }
    DG_CHECK(p.groups >= 1, OP ": groups must be >= 1, got %d", p.groups);
    int64_t cin = w->shape[0], kh = w->shape[2], kw = w->shape[3];
    DG_CHECK(cin > 0 && w->shape[1] > 0 && kh > 0 && kw > 0, OP ": weight %s has an empty dim", DG_SHAPE_STR(w));
    DG_CHECK(x->shape[1] == cin, OP ": input %s has %lld channels but weight %s expects %lld", DG_SHAPE_STR(x),
             (long long)x->shape[1], DG_SHAPE_STR(w), (long long)cin);
    DG_CHECK(cin % p.groups == 0, OP ": in channels %lld of weight %s not divisible by groups=%d", (long long)cin,
             DG_SHAPE_STR(w), p.groups);
    int64_t cout = w->shape[1] * p.groups;
    if (b) DG_CHECK(b->ndim == 1 && b->shape[0] == cout, OP ": bias must be [%lld], got %s", (long long)cout, DG_SHAPE_STR(b));
    int64_t oh = (x->shape[2] - 1) * p.stride[0] - 2 * (int64_t)p.padding[0] + (int64_t)p.dilation[0] * (kh - 1) + p.output_padding[0] + 1;
    int64_t ow = (x->shape[3] - 1) * p.stride[1] - 2 * (int64_t)p.padding[1] + (int64_t)p.dilation[1] * (kw - 1) + p.output_padding[1] + 1;
    DG_CHECK(x->shape[2] > 0 && x->shape[3] > 0 && oh > 0 && ow > 0,
             OP ": output size %lldx%lld <= 0 for input %s, weight %s, stride (%d,%d), padding (%d,%d), output_padding (%d,%d), "
             "dilation (%d,%d)", (long long)oh, (long long)ow, DG_SHAPE_STR(x), DG_SHAPE_STR(w), p.stride[0], p.stride[1],
             p.padding[0], p.padding[1], p.output_padding[0], p.output_padding[1], p.dilation[0], p.dilation[1]);
    ct_attr at = {
        .cg = {
            .n = x->shape[0], .c = cout, .h = oh, .w = ow,
            .oc = cin, .kh = kh, .kw = kw,
            .oh = x->shape[2] + p.output_padding[0] / p.stride[0], .ow = x->shape[3] + p.output_padding[1] / p.stride[1],
            .sh = p.stride[0], .sw = p.stride[1], .ph = p.padding[0], .pw = p.padding[1],
            .dh = p.dilation[0], .dw = p.dilation[1], .groups = p.groups,
        },
        .h = x->shape[2], .w = x->shape[3],
    };
    const dg_conv2d_geom *cg = &at.cg;
    bool cut = cg->oh != at.h || cg->ow != at.w;

    dg_tensor *xc = dg_dense(x), *wc = dg_dense(w), *bc = dg_dense(b), *xs = xc;
    int64_t shape[4] = { cg->n, cout, oh, ow };
    dg_tensor *y = (xc && wc && (!b || bc)) ? dg_new_on(x, shape, 4, x->dtype) : NULL;
    const dg_backend *be = dg_backend_of(x);
    int rc = y ? 0 : DG_ENOMEM;
    if (!rc && cut) {   /* x zero-padded to the rows/columns the convolution has (see the top comment) */
        int64_t ps[4] = { cg->n, cin, cg->oh, cg->ow };
        xs = dg_new_on(x, ps, 4, x->dtype);
        rc = xs ? be->fill(be, DG_KV(xs), 0.0) : DG_ENOMEM;
        if (!rc) rc = be->copy(be, DG_KV(xc), block_view(DG_KV(xs), at.h, at.w));
    }
    if (!rc) rc = be->conv2d_backward_data(be, cg, DG_KV(xs), DG_KV(wc), DG_KV(y));
    if (!rc && bc) {   /* y += b over [N, C_out, OH, OW] */
        dg_kview *bv = DG_KV(bc);
        bv->ndim = 4;
        bv->numel = y->numel;
        for (int i = 0; i < 4; i++) { bv->shape[i] = shape[i]; bv->stride[i] = i == 1 ? bc->stride[0] : 0; }
        rc = be->binary(be, DG_BIN_ADD, DG_KV(y), bv, DG_KV(y), 0, 0);
    }
    const dg_tensor *in[3] = { x, w, b };
    if (!rc && dg_op_records()) {
        dg_node *n = dg_record_op(DG_OP_CONV_TRANSPOSE2D, y, in, 3, ct_bw);
        if (!n) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;   /* record said why */
        else {
            *(ct_attr *)dg_node_attr(n) = at;
            rc = dg_node_save(n, xs);
            if (!rc) rc = dg_node_save(n, wc);
        }
    }
    if (xs != xc) dg_tensor_free(xs);
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
dg_tensor *dg_conv_transpose2d(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv_transpose2d_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CONV_TRANSPOSE2D, DG_OP_IN(x, w, b));
    return dg_op_leave(&f, conv_transpose2d_op(f.arg[0], f.arg[1], f.arg[2], p));
}

/* ---- conv1d ---- */

dg_conv1d_params dg_conv1d_default_params(void) {
    return (dg_conv1d_params){ .params_tag = DG_PARAMS_TAG, .stride = 1, .padding = 0, .dilation = 1, .groups = 1 };
}

static dg_tensor *conv1d_op(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv1d_params p) {
    DG_CHECK_PARAMS("conv1d", p, dg_conv1d_default_params);
    DG_CHECK_INPUT("conv1d", x);
    DG_CHECK_INPUT("conv1d", w);
    DG_CHECK(x->ndim == 3, "conv1d: input must be 3-D [N, C, L], got %s", DG_SHAPE_STR(x));
    DG_CHECK(w->ndim == 3, "conv1d: weight must be 3-D [OC, C/groups, K], got %s", DG_SHAPE_STR(w));
    DG_CHECK(p.stride >= 1 && p.padding >= 0 && p.dilation >= 1 && p.groups >= 1,
             "conv1d: need stride >= 1, padding >= 0, dilation >= 1 and groups >= 1, got %d, %d, %d, %d (input %s, weight %s)",
             p.stride, p.padding, p.dilation, p.groups, DG_SHAPE_STR(x), DG_SHAPE_STR(w));
    dg_conv2d_params q = dg_conv2d_default_params();
    q.stride[1] = p.stride;
    q.padding[1] = p.padding;
    q.dilation[1] = p.dilation;
    q.groups = p.groups;
    dg_scope *s = dg_scope_begin();
    dg_tensor *x4 = dg_unsqueeze(x, 2), *w4 = dg_unsqueeze(w, 2);
    dg_tensor *y4 = (x4 && w4) ? dg_conv2d(x4, w4, b, q) : NULL;
    return dg_composite_end(s, y4 ? dg_squeeze(y4, 2) : NULL);
}
dg_tensor *dg_conv1d(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv1d_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CONV1D, DG_OP_IN(x, w, b));
    return dg_op_leave(&f, conv1d_op(f.arg[0], f.arg[1], f.arg[2], p));
}
