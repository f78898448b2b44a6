/* eager/ops/pool.c — max, average and adaptive-average 2-D pooling (NCHW): argument checks,
 * output sizes, the backend calls and the backward rules.
 *
 * Output size per axis (PyTorch/Paddle): (in + 2*pad - k) / stride + 1, rounded down, or up
 * with ceil_mode; with ceil_mode a last window that would start inside the right/bottom padding
 * is dropped, as PyTorch does, so every window covers at least one real element. Padding may
 * be at most half the kernel (PyTorch's rule; more would give windows of padding only). */
#include "op_util.h"
#include "pool_internal.h"

typedef dg_pool_attr pool_attr;   /* eager/ops/op_attrs.h */
_Static_assert(sizeof(pool_attr) <= DG_NODE_ATTR_BYTES, "pool attributes must fit in the node");


/* k: the window's extent, dilation*(kernel-1)+1 (torch's rule for max_pool2d's dilation) */
static int64_t pool_out(int64_t in, int64_t k, int s, int p, bool ceil_mode) {
    int64_t span = in + 2 * (int64_t)p - k;
    if (span < 0) return 0;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    return o;
}

/* Validates x and p and fills the geometry; false (with the error set) when they are bad.
 * Only max pooling takes a dilation (average pooling's is 1, the default) and only average
 * pooling a divisor_override, as in torch. */
bool dg_pool2d_make_geom(const char *op, bool avg, const dg_tensor *x, dg_pool2d_params p, dg_pool2d_geom *g) {
#define PCHECK(cond, ...) do { if (!(cond)) { DG_ERR(DG_EINVAL, __VA_ARGS__); return false; } } while (0)
    PCHECK(x->ndim == 4, "%s: input must be 4-D [N, C, H, W], got %s", op, DG_SHAPE_STR(x));
    PCHECK(dg_dtype_is_float(x->dtype),
           "%s: expects a float tensor, got %s for input %s", op, dg_dtype_name(x->dtype), DG_SHAPE_STR(x));
    PCHECK(p.kernel[0] > 0 && p.kernel[1] > 0, "%s: kernel must be positive, got (%d,%d)", op, p.kernel[0], p.kernel[1]);
    for (int i = 0; i < 2; i++)
        PCHECK((p.stride[i] >= 1 || p.stride[i] == DG_STRIDE_KERNEL) && p.padding[i] >= 0,
               "%s: need stride >= 1 (or DG_STRIDE_KERNEL) and padding >= 0, got stride (%d,%d), padding (%d,%d)", op,
               p.stride[0], p.stride[1], p.padding[0], p.padding[1]);
    PCHECK(p.padding[0] <= p.kernel[0] / 2 && p.padding[1] <= p.kernel[1] / 2,
           "%s: padding (%d,%d) must be at most half the kernel (%d,%d)", op, p.padding[0], p.padding[1],
           p.kernel[0], p.kernel[1]);
    int dil[2] = { p.dilation[0], p.dilation[1] };
    PCHECK(dil[0] >= 1 && dil[1] >= 1, "%s: dilation must be >= 1, got (%d,%d)", op, p.dilation[0], p.dilation[1]);
    PCHECK(!avg || (dil[0] == 1 && dil[1] == 1), "%s: average pooling has no dilation, got (%d,%d)", op, dil[0], dil[1]);
    PCHECK(p.divisor_override >= 0 && (avg || p.divisor_override == 0),
           "%s: divisor_override must be 0 (none) or positive, and only for average pooling; got %d", op, p.divisor_override);
    *g = (dg_pool2d_geom){
        .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .kh = p.kernel[0], .kw = p.kernel[1],
        .sh = p.stride[0] == DG_STRIDE_KERNEL ? p.kernel[0] : p.stride[0],
        .sw = p.stride[1] == DG_STRIDE_KERNEL ? p.kernel[1] : p.stride[1],
        .ph = p.padding[0], .pw = p.padding[1], .count_include_pad = p.count_include_pad,
        .dh = dil[0], .dw = dil[1], .divisor = p.divisor_override,
    };
    g->oh = pool_out(g->h, (int64_t)g->dh * (g->kh - 1) + 1, g->sh, g->ph, p.ceil_mode);
    g->ow = pool_out(g->w, (int64_t)g->dw * (g->kw - 1) + 1, g->sw, g->pw, p.ceil_mode);
    PCHECK(g->oh > 0 && g->ow > 0, "%s: output size %lldx%lld <= 0 for input %s, kernel (%d,%d), stride (%d,%d), padding (%d,%d), "
           "dilation (%d,%d)", op, (long long)g->oh, (long long)g->ow, DG_SHAPE_STR(x), g->kh, g->kw, g->sh, g->sw, g->ph, g->pw,
           g->dh, g->dw);
    return true;
#undef PCHECK
}

enum { K_MAX = DG_POOL_MAX, K_AVG = DG_POOL_AVG, K_ADAPT = DG_POOL_ADAPT };

static int pool_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const pool_attr *a = dg_node_attr(n);
    int kind = a->kind;
    const dg_pool2d_geom *geo = &a->g;
    dg_tensor *gc = dg_dense(g);
    dg_tensor *gx = gc ? dg_empty_as(gc, dg_node_input_shape(n, 0), gc->dtype) : NULL;
    if (!gx) return DG_ENOMEM;
    gi[0] = gx;
    const dg_backend *be = dg_backend_of(gc);
    if (kind == K_MAX) return be->max_pool2d_backward(be, geo, DG_KV(dg_node_saved(n, 0)), DG_KV(dg_node_saved(n, 1)), DG_KV(gc), DG_KV(gx));
    if (kind == K_AVG) return be->avg_pool2d_backward(be, geo, DG_KV(gc), DG_KV(gx));
    return be->adaptive_avg_pool2d_backward(be, DG_KV(gc), DG_KV(gx));
}

/* Runs the forward kernel on a contiguous copy of x and records the node. */
static dg_tensor *pool_run(dg_op_id id, int kind, const dg_tensor *x, const dg_pool2d_geom *g) {
    uint64_t errs = dg_error_count();
    dg_tensor *xc = dg_dense(x);
    int64_t shape[4] = { g->n, g->c, g->oh, g->ow };
    dg_tensor *y = xc ? dg_new_on(x, shape, 4, x->dtype) : NULL;
    const dg_backend *be = dg_backend_of(x);
    int rc = !y ? DG_ENOMEM
           : kind == K_MAX ? be->max_pool2d(be, g, DG_KV(xc), DG_KV(y))
           : kind == K_AVG ? be->avg_pool2d(be, g, DG_KV(xc), DG_KV(y))
           : be->adaptive_avg_pool2d(be, DG_KV(xc), DG_KV(y));
    const dg_tensor *in[1] = { x };
    if (!rc && dg_op_records()) {
        dg_node *n = dg_record_op(id, y, in, 1, pool_bw);
        if (!n) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;   /* record said why */
        else {
            pool_attr *a = dg_node_attr(n);
            a->kind = kind;
            a->g = *g;
            if (kind == K_MAX) {   /* max backward finds the argmax again in x */
                rc = dg_node_save(n, xc);
                if (!rc) rc = dg_node_save(n, y);
            }
        }
    }
    dg_dense_free(xc, x);
    if (rc) {
        if (!dg_error_since(errs)) DG_ERR(rc, "%s: failed for input %s", dg_op_name(id), DG_SHAPE_STR(x));
        dg_tensor_free(y);
        return NULL;
    }
    return y;
}

dg_pool2d_params dg_pool2d_default_params(void) {
    return (dg_pool2d_params){ .params_tag = DG_PARAMS_TAG, .kernel = { 0, 0 }, .stride = { DG_STRIDE_KERNEL, DG_STRIDE_KERNEL }, .padding = { 0, 0 },
                               .ceil_mode = false, .count_include_pad = false, .dilation = { 1, 1 }, .divisor_override = 0 };
}

static dg_tensor *max_pool2d_op(const dg_tensor *x, dg_pool2d_params p) {
    DG_CHECK_PARAMS("max_pool2d", p, dg_pool2d_default_params);
    DG_CHECK_INPUT("max_pool2d", x);
    dg_pool2d_geom g;
    if (!dg_pool2d_make_geom("max_pool2d", false, x, p, &g)) return NULL;
    /* the plain kernels have no dilation: dilated windows take the indices path */
    if (g.dh != 1 || g.dw != 1) return dg_max_pool2d_with_indices(x, p, NULL);
    return pool_run(DG_OP_MAX_POOL2D, K_MAX, x, &g);
}
dg_tensor *dg_max_pool2d(const dg_tensor *x, dg_pool2d_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MAX_POOL2D, DG_OP_IN(x));
    return dg_op_leave(&f, max_pool2d_op(f.arg[0], p));
}

static dg_tensor *avg_pool2d_op(const dg_tensor *x, dg_pool2d_params p) {
    DG_CHECK_PARAMS("avg_pool2d", p, dg_pool2d_default_params);
    DG_CHECK_INPUT("avg_pool2d", x);
    dg_pool2d_geom g;
    if (!dg_pool2d_make_geom("avg_pool2d", true, x, p, &g)) return NULL;
    return pool_run(DG_OP_AVG_POOL2D, K_AVG, x, &g);
}
dg_tensor *dg_avg_pool2d(const dg_tensor *x, dg_pool2d_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_AVG_POOL2D, DG_OP_IN(x));
    return dg_op_leave(&f, avg_pool2d_op(f.arg[0], p));
}

static dg_tensor *adaptive_avg_pool2d_op(const dg_tensor *x, int out_h, int out_w) {
    DG_CHECK_INPUT("adaptive_avg_pool2d", x);
    DG_CHECK(x->ndim == 4, "adaptive_avg_pool2d: input must be 4-D [N, C, H, W], got %s", DG_SHAPE_STR(x));
    DG_CHECK_FLOAT("adaptive_avg_pool2d", x);
    DG_CHECK(out_h > 0 && out_w > 0, "adaptive_avg_pool2d: output size must be positive, got %dx%d for input %s",
             out_h, out_w, DG_SHAPE_STR(x));
    DG_CHECK(x->shape[2] > 0 && x->shape[3] > 0, "adaptive_avg_pool2d: input %s has an empty spatial dim", DG_SHAPE_STR(x));
    dg_pool2d_geom g = { .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3], .oh = out_h, .ow = out_w };
    return pool_run(DG_OP_ADAPTIVE_AVG_POOL2D, K_ADAPT, x, &g);
}
dg_tensor *dg_adaptive_avg_pool2d(const dg_tensor *x, int out_h, int out_w) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_ADAPTIVE_AVG_POOL2D, DG_OP_IN(x));
    return dg_op_leave(&f, adaptive_avg_pool2d_op(f.arg[0], out_h, out_w));
}
