/* eager/onnx/map_ops.c — one traced op to ONNX operators. Each mapper reads the attributes the
 * op kept in its node (eager/ops/op_attrs.h, the layout the op itself writes) or, for a
 * composite, in its trace record, asks for its inputs' value names (which emits their
 * producers first) and appends its nodes. An op with no entry in the table below is an error
 * naming it: a custom op, or a built-in one that has no ONNX form here. */
#include "onnx_internal.h"
#include <math.h>

#define G (&c->g)
#define IN(k) ox_value(c, r, r->in[k], (k))
#define FAIL_IF(cond) do { if (cond) return dg_last_status() ? dg_last_status() : DG_ENOMEM; } while (0)

typedef int (*map_fn)(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);

static const void *node_attr(const dg_trace_rec *r) { return dg_node_attr(r->node); }

static const char *node1(ox_ctx *c, const char *op, const char *a, const char *out) {
    const char *in[1] = { a };
    return ox_node(G, op, in, 1, out) ? out : NULL;
}
static const char *node2(ox_ctx *c, const char *op, const char *a, const char *b, const char *out) {
    const char *in[2] = { a, b };
    return ox_node(G, op, in, 2, out) ? out : NULL;
}

/* ---- convolution, normalisation ---- */
static void conv_attrs(ox_ctx *c, Onnx__NodeProto *n, const dg_conv2d_geom *g) {
    ox_attr_ints(G, n, "kernel_shape", (int64_t[]){ g->kh, g->kw }, 2);
    ox_attr_ints(G, n, "strides", (int64_t[]){ g->sh, g->sw }, 2);
    ox_attr_ints(G, n, "pads", (int64_t[]){ g->ph, g->pw, g->ph, g->pw }, 4);
    ox_attr_ints(G, n, "dilations", (int64_t[]){ g->dh, g->dw }, 2);
    ox_attr_i(G, n, "group", g->groups);
}

static int m_conv(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *in[3] = { IN(0), IN(1), r->in[2] ? IN(2) : NULL };
    FAIL_IF(!in[0] || !in[1] || (r->in[2] && !in[2]));
    Onnx__NodeProto *n = ox_node(G, "Conv", in, in[2] ? 3 : 2, *out);
    conv_attrs(c, n, node_attr(r));
    return 0;
}

static int m_conv_transpose(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_ct_attr *a = node_attr(r);
    const dg_conv2d_geom *g = &a->cg;
    const char *in[3] = { IN(0), IN(1), r->in[2] ? IN(2) : NULL };
    FAIL_IF(!in[0] || !in[1] || (r->in[2] && !in[2]));
    /* output_padding: what the output has beyond the transposed convolution's own size */
    int64_t oh = (a->h - 1) * g->sh - 2 * (int64_t)g->ph + (int64_t)g->dh * (g->kh - 1) + 1;
    int64_t ow = (a->w - 1) * g->sw - 2 * (int64_t)g->pw + (int64_t)g->dw * (g->kw - 1) + 1;
    Onnx__NodeProto *n = ox_node(G, "ConvTranspose", in, in[2] ? 3 : 2, *out);
    conv_attrs(c, n, g);
    ox_attr_ints(G, n, "output_padding", (int64_t[]){ r->out->shape[2] - oh, r->out->shape[3] - ow }, 2);
    return 0;
}

/* Conv -> BatchNorm as one Conv: w' = w * s, b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps),
 * computed in double from the float32 values (nn/fuse.c's fold, done once here). */
static int fold_into_conv(ox_ctx *c, const dg_trace_rec *r, const dg_trace_rec *cr, const char *out, int *bdim) {
    const dg_bn_attr *a = node_attr(r);
    const dg_conv2d_geom *g = node_attr(cr);
    const char *wname = ox_param_name(c, cr->in[1]);
    int64_t nw, nb = 0, ng = 0, nbeta = 0, nm, nv;
    float *w = ox_host_copy(cr->in[1], &nw), *b = cr->in[2] ? ox_host_copy(cr->in[2], &nb) : NULL;
    float *gamma = r->in[1] ? ox_host_copy(r->in[1], &ng) : NULL, *beta = r->in[2] ? ox_host_copy(r->in[2], &nbeta) : NULL;
    float *mean = ox_host_copy(r->extra[0], &nm), *var = ox_host_copy(r->extra[1], &nv);
    int rc = (!w || (cr->in[2] && !b) || (r->in[1] && !gamma) || (r->in[2] && !beta) || !mean || !var) ? DG_ENOMEM : 0;
    int64_t oc = g->oc, per = oc ? nw / oc : 0;
    float *bf = rc ? NULL : malloc(sizeof *bf * (size_t)oc);
    if (!rc && !bf) rc = ox_fail(r, DG_ENOMEM, "out of memory folding into the convolution");
    for (int64_t k = 0; !rc && k < oc; k++) {
        double s = (gamma ? gamma[k] : 1.0) / sqrt((double)var[k] + a->eps);
        for (int64_t i = 0; i < per; i++) w[k * per + i] = (float)(w[k * per + i] * s);
        bf[k] = (float)(((b ? b[k] : 0.0) - mean[k]) * s + (beta ? beta[k] : 0.0));
    }
    const char *in[3] = { NULL, NULL, NULL };
    if (!rc) {
        in[0] = ox_value(c, cr, cr->in[0], 0);
        in[1] = ox_init(G, ox_fmt(G, "%s+%s", wname, "bn_folded"), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, cr->in[1]->shape, 4, w,
                        sizeof *w * (size_t)nw);
        in[2] = ox_init(G, ox_fmt(G, "%s+%s", wname, "bn_folded_bias"), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &oc, 1, bf,
                        sizeof *bf * (size_t)oc);
        if (!in[0] || !in[1] || !in[2]) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    free(w); free(b); free(gamma); free(beta); free(mean); free(var); free(bf);
    if (rc) return rc;
    *bdim = ox_bdim(c, cr->in[0]);   /* the BN's own input (the conv's output) is never emitted */
    const char *conv_out = a->relu ? ox_tmp(G, "conv_bn") : out;
    conv_attrs(c, ox_node(G, "Conv", in, 3, conv_out), g);
    if (a->relu) node1(c, "Relu", conv_out, out);
    return 0;
}

static const char *const_fill(ox_ctx *c, const dg_shape *s, float v) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    float *buf = malloc(sizeof *buf * (size_t)(n ? n : 1));
    if (!buf) return NULL;
    for (int64_t i = 0; i < n; i++) buf[i] = v;
    const char *name = ox_init(G, ox_fmt(G, "const_%d", G->counter++), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, s->d, s->ndim, buf,
                               sizeof *buf * (size_t)n);
    free(buf);
    return name;
}

static int m_batch_norm(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_bn_attr *a = node_attr(r);
    if (a->training)
        return ox_fail(r, DG_EUNSUPPORTED, "runs with batch statistics (training mode); ONNX's BatchNormalization is the "
                                           "inference form (the layer is put in eval mode: a functional call with training=true?)");
    if (r->n_extra < 2) return ox_fail(r, DG_EUNSUPPORTED, "has no running statistics to normalise with");
    const dg_trace_rec *cr = c->p.fold_batch_norm ? ox_producer(c, r->in[0]) : NULL;
    if (cr && cr->op == DG_OP_CONV2D && ox_uses(c, r->in[0]) == 1 && !ox_is_output(c, r->in[0]) &&
        ox_param_name(c, cr->in[1]) && r->in[0]->dtype == DG_F32)
        return fold_into_conv(c, r, cr, *out, bdim);
    dg_shape cs = { .ndim = 1, .d = { a->c } };
    const char *in[5] = { IN(0), r->in[1] ? IN(1) : const_fill(c, &cs, 1.0f), r->in[2] ? IN(2) : const_fill(c, &cs, 0.0f),
                          ox_value(c, r, r->extra[0], 3), ox_value(c, r, r->extra[1], 4) };
    for (int i = 0; i < 5; i++) FAIL_IF(!in[i]);
    const char *bn_out = a->relu ? ox_tmp(G, "batch_norm") : *out;
    ox_attr_f(G, ox_node(G, "BatchNormalization", in, 5, bn_out), "epsilon", (float)a->eps);
    if (a->relu) node1(c, "Relu", bn_out, *out);   /* batch_norm_relu: the fused pair, written as the two */
    return 0;
}

static int m_layer_norm(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_ln_trace_attr *a = (const void *)r->attr;
    dg_shape ns = { .ndim = a->k };
    for (int i = 0; i < a->k; i++) ns.d[i] = r->in[0]->shape[r->in[0]->ndim - a->k + i];
    const char *in[3] = { IN(0), r->in[1] ? IN(1) : const_fill(c, &ns, 1.0f), r->in[2] ? IN(2) : NULL };
    FAIL_IF(!in[0] || !in[1] || (r->in[2] && !in[2]));
    Onnx__NodeProto *n = ox_node(G, "LayerNormalization", in, in[2] ? 3 : 2, *out);
    ox_attr_i(G, n, "axis", -a->k);
    ox_attr_f(G, n, "epsilon", (float)a->eps);
    return 0;
}

/* ---- matrix products ---- */
static const char *transpose_last2(ox_ctx *c, const char *x, int ndim) {
    int64_t perm[DG_MAX_DIMS];
    for (int i = 0; i < ndim; i++) perm[i] = i;
    perm[ndim - 1] = ndim - 2;
    perm[ndim - 2] = ndim - 1;
    const char *t = ox_tmp(G, "transpose");
    ox_attr_ints(G, ox_node(G, "Transpose", &x, 1, t), "perm", perm, ndim);
    return t;
}

static int m_linear(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *x = IN(0), *w = IN(1), *b = IN(2);
    FAIL_IF(!x || !w || !b);
    if (r->in[0]->ndim == 2) {   /* torch.nn.Linear's own form: y = x w^T + b */
        const char *in[3] = { x, w, b };
        ox_attr_i(G, ox_node(G, "Gemm", in, 3, *out), "transB", 1);
        return 0;
    }
    node2(c, "Add", node2(c, "MatMul", x, transpose_last2(c, w, 2), ox_tmp(G, "matmul")), b, *out);
    return 0;
}

static int m_matmul(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_mm_attr *a = node_attr(r);
    const char *x = IN(0), *y = IN(1);
    FAIL_IF(!x || !y);
    if (a->ta) x = transpose_last2(c, x, r->in[0]->ndim);
    if (a->tb) y = transpose_last2(c, y, r->in[1]->ndim);
    node2(c, "MatMul", x, y, *out);
    return 0;
}

/* ---- elementwise ---- */
static const char *const binaries[DG_OP_COUNT] = {
    [DG_OP_ADD] = "Add", [DG_OP_SUB] = "Sub", [DG_OP_MUL] = "Mul", [DG_OP_DIV] = "Div", [DG_OP_POW] = "Pow",
    [DG_OP_MAXIMUM] = "Max", [DG_OP_MINIMUM] = "Min",
};
static int m_binary(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *a = IN(0), *b = IN(1);
    FAIL_IF(!a || !b);
    if (r->op >= 0 && binaries[r->op]) { node2(c, binaries[r->op], a, b, *out); return 0; }
    return ox_fail(r, DG_EUNSUPPORTED, "is not a binary op the exporter knows");
}
static int m_add_relu(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *a = IN(0), *b = IN(1);
    FAIL_IF(!a || !b);
    node1(c, "Relu", node2(c, "Add", a, b, ox_tmp(G, "add")), *out);   /* the fused residual join, as the two ops */
    return 0;
}

static const char *const unaries[DG_OP_COUNT] = {
    [DG_OP_NEG] = "Neg", [DG_OP_EXP] = "Exp", [DG_OP_LOG] = "Log", [DG_OP_SQRT] = "Sqrt", [DG_OP_ABS] = "Abs",
    [DG_OP_RELU] = "Relu", [DG_OP_SIGMOID] = "Sigmoid", [DG_OP_TANH] = "Tanh", [DG_OP_SIN] = "Sin", [DG_OP_COS] = "Cos",
};

/* softplus: ONNX Softplus is torch's with beta 1 and no threshold; torch's default threshold 20
 * changes the value by less than float32 resolves (log1p(exp(x)) - x < 3e-9 past 20), so that
 * case is one Softplus; any other beta or threshold is written as torch computes it:
 * Where(x * beta > threshold, x, Softplus(x * beta) / beta). */
static void softplus_parts(ox_ctx *c, const char *x, double beta, double threshold, const char *out) {
    if (beta == 1 && threshold == 20) { node1(c, "Softplus", x, out); return; }
    const char *xb = node2(c, "Mul", x, ox_const_f(G, (float)beta), ox_tmp(G, "softplus"));
    const char *sp = node2(c, "Div", node1(c, "Softplus", xb, ox_tmp(G, "softplus")), ox_const_f(G, (float)beta), ox_tmp(G, "softplus"));
    const char *in[3] = { node2(c, "Greater", xb, ox_const_f(G, (float)threshold), ox_tmp(G, "softplus")), x, sp };
    ox_node(G, "Where", in, 3, out);
}
static int m_unary(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_scal_attr *s = node_attr(r);
    const char *x = IN(0);
    FAIL_IF(!x);
    int n = r->op;
    if (n >= 0 && unaries[n]) { node1(c, unaries[n], x, *out); return 0; }
    if (n == DG_OP_ADD_SCALAR || n == DG_OP_SUB_SCALAR) node2(c, "Add", x, ox_const_f(G, (float)s->p1), *out);
    else if (n == DG_OP_RSUB_SCALAR) node2(c, "Sub", ox_const_f(G, (float)s->p1), x, *out);
    else if (n == DG_OP_MUL_SCALAR || n == DG_OP_DIV_SCALAR) node2(c, "Mul", x, ox_const_f(G, (float)s->p0), *out);
    else if (n == DG_OP_RDIV_SCALAR) node2(c, "Div", ox_const_f(G, (float)s->p0), x, *out);
    else if (n == DG_OP_POW_SCALAR) node2(c, "Pow", x, ox_const_f(G, (float)s->p0), *out);
    else if (n == DG_OP_CLIP) {
        const char *in[3] = { x, ox_const_f(G, (float)s->p0), ox_const_f(G, (float)s->p1) };
        ox_node(G, "Clip", in, 3, *out);
    } else if (n == DG_OP_LEAKY_RELU) ox_attr_f(G, ox_node(G, "LeakyRelu", &x, 1, *out), "alpha", (float)s->p0);
    else if (n == DG_OP_GELU) {
        /* opset 17 has no Gelu: x/2 (1 + erf(x/sqrt 2)), or with tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        const char *inner;
        if (s->p1 == 0) inner = node1(c, "Erf", node2(c, "Mul", x, ox_const_f(G, (float)M_SQRT1_2), ox_tmp(G, "gelu")), ox_tmp(G, "gelu"));
        else {
            const char *x3 = node2(c, "Mul", node2(c, "Mul", x, x, ox_tmp(G, "gelu")), x, ox_tmp(G, "gelu"));
            const char *sum = node2(c, "Add", x, node2(c, "Mul", x3, ox_const_f(G, 0.044715f), ox_tmp(G, "gelu")), ox_tmp(G, "gelu"));
            inner = node1(c, "Tanh", node2(c, "Mul", sum, ox_const_f(G, (float)sqrt(2.0 / M_PI)), ox_tmp(G, "gelu")), ox_tmp(G, "gelu"));
        }
        const char *half_x = node2(c, "Mul", x, ox_const_f(G, 0.5f), ox_tmp(G, "gelu"));
        node2(c, "Mul", half_x, node2(c, "Add", inner, ox_const_f(G, 1.0f), ox_tmp(G, "gelu")), *out);
    } else if (n == DG_OP_ELU) ox_attr_f(G, ox_node(G, "Elu", &x, 1, *out), "alpha", (float)s->p0);
    else if (n == DG_OP_SOFTPLUS) softplus_parts(c, x, s->p0, s->p1, *out);
    else if (n == DG_OP_SILU) node2(c, "Mul", x, node1(c, "Sigmoid", x, ox_tmp(G, "silu")), *out);   /* opset 17 has no SiLU */
    else if (n == DG_OP_LOG1P) node1(c, "Log", node2(c, "Add", x, ox_const_f(G, 1.0f), ox_tmp(G, "log1p")), *out);
    else if (n == DG_OP_RSQRT) node1(c, "Reciprocal", node1(c, "Sqrt", x, ox_tmp(G, "rsqrt")), *out);
    else return ox_fail(r, DG_EUNSUPPORTED, "is not a unary op the exporter knows");
    return 0;
}

static int m_softmax(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_sm_attr *a = node_attr(r);
    const char *x = IN(0);
    FAIL_IF(!x);
    ox_attr_i(G, ox_node(G, a->log ? "LogSoftmax" : "Softmax", &x, 1, *out), "axis", a->axis);
    return 0;
}

/* ---- pooling ---- */
static int64_t floor_out(int64_t in, int64_t k, int s, int p, int d) { return (in + 2 * (int64_t)p - ((int64_t)d * (k - 1) + 1)) / s + 1; }

static void window_attrs(ox_ctx *c, Onnx__NodeProto *n, const dg_pool2d_geom *g, bool max) {
    int dh = g->dh ? g->dh : 1, dw = g->dw ? g->dw : 1;
    ox_attr_ints(G, n, "kernel_shape", (int64_t[]){ g->kh, g->kw }, 2);
    ox_attr_ints(G, n, "strides", (int64_t[]){ g->sh, g->sw }, 2);
    ox_attr_ints(G, n, "pads", (int64_t[]){ g->ph, g->pw, g->ph, g->pw }, 4);
    /* ceil_mode is not kept: it is what makes the output larger than the floor formula's */
    bool ceil = g->oh != floor_out(g->h, g->kh, g->sh, g->ph, dh) || g->ow != floor_out(g->w, g->kw, g->sw, g->pw, dw);
    if (ceil) ox_attr_i(G, n, "ceil_mode", 1);
    if (max && (dh != 1 || dw != 1)) ox_attr_ints(G, n, "dilations", (int64_t[]){ dh, dw }, 2);
    if (!max) ox_attr_i(G, n, "count_include_pad", g->count_include_pad);
}

/* adaptive pooling: global when the output is 1x1, a plain window when the sizes divide */
static int adaptive(ox_ctx *c, const dg_trace_rec *r, const char *x, const dg_pool2d_geom *g, bool max, const char *out) {
    if (g->oh == 1 && g->ow == 1) { node1(c, max ? "GlobalMaxPool" : "GlobalAveragePool", x, out); return 0; }
    if (g->h % g->oh || g->w % g->ow)
        return ox_fail(r, DG_EUNSUPPORTED, "from %lldx%lld to %lldx%lld: windows of unequal sizes have no ONNX pooling operator",
                       (long long)g->h, (long long)g->w, (long long)g->oh, (long long)g->ow);
    dg_pool2d_geom w = *g;
    w.kh = w.sh = (int)(g->h / g->oh);
    w.kw = w.sw = (int)(g->w / g->ow);
    w.ph = w.pw = 0;
    w.dh = w.dw = 1;
    window_attrs(c, ox_node(G, max ? "MaxPool" : "AveragePool", &x, 1, out), &w, max);
    return 0;
}

static int m_pool(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_pool_attr *a = node_attr(r);
    const char *x = IN(0);
    FAIL_IF(!x);
    if (a->kind == DG_POOL_ADAPT) return adaptive(c, r, x, &a->g, false, *out);
    if (a->kind == DG_POOL_AVG && a->g.divisor)
        return ox_fail(r, DG_EUNSUPPORTED, "with divisor_override %lld has no ONNX form", (long long)a->g.divisor);
    window_attrs(c, ox_node(G, a->kind == DG_POOL_MAX ? "MaxPool" : "AveragePool", &x, 1, *out), &a->g, a->kind == DG_POOL_MAX);
    return 0;
}

static int m_pool_idx(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_pool_idx_attr *a = node_attr(r);
    const char *x = IN(0);
    FAIL_IF(!x);
    if (a->adaptive) return adaptive(c, r, x, &a->g, true, *out);
    window_attrs(c, ox_node(G, "MaxPool", &x, 1, *out), &a->g, true);
    return 0;
}

/* ---- shapes ---- */
static int batch_error(const dg_trace_rec *r, const char *what) {
    return ox_fail(r, DG_EUNSUPPORTED, "%s the batch axis of %s, so the model would hold only for the example's batch size; export "
                   "with dynamic_batch = false", what, DG_SHAPE_STR(r->in[0]));
}

static int m_reshape(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *x = IN(0);
    FAIL_IF(!x);
    const dg_tensor *xt = r->in[0], *yt = r->out;
    int bd = ox_bdim(c, xt);
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, yt->shape, sizeof(int64_t) * (size_t)yt->ndim);
    *bdim = -1;
    if (bd >= 0) {
        if (bd != 0 || yt->ndim < 1 || yt->shape[0] != xt->shape[0]) return batch_error(r, "reshapes");
        *bdim = 0;
        if (yt->ndim == 2 && xt->ndim >= 2) {   /* flatten(x, 1, -1): the batch stays as it comes */
            ox_attr_i(G, ox_node(G, "Flatten", &x, 1, *out), "axis", 1);
            return 0;
        }
        shape[0] = 0;   /* Reshape's 0: this axis as it is in the input */
    }
    node2(c, "Reshape", x, ox_const_i64(G, shape, yt->ndim), *out);
    return 0;
}

static int m_permute(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_shape_attr *a = node_attr(r);
    const char *x = IN(0);
    FAIL_IF(!x);
    int nd = r->in[0]->ndim, bd = ox_bdim(c, r->in[0]);
    int64_t perm[DG_MAX_DIMS];
    *bdim = -1;
    for (int i = 0; i < nd; i++) {
        perm[i] = a->perm[i];
        if (a->perm[i] == bd) *bdim = i;
    }
    ox_attr_ints(G, ox_node(G, "Transpose", &x, 1, *out), "perm", perm, nd);
    return 0;
}

static int m_concat(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_shape_attr *a = node_attr(r);
    const char *in[DG_MAX_NODE_INPUTS];
    for (int i = 0; i < r->n_in; i++) { in[i] = IN(i); FAIL_IF(!in[i]); }
    ox_attr_i(G, ox_node(G, "Concat", in, r->n_in, *out), "axis", a->a);
    return 0;
}

static int m_slice(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_shape_attr *a = node_attr(r);
    const char *x = IN(0);
    FAIL_IF(!x);
    int64_t ax = a->a, start = a->b, step = a->c, len = r->out->shape[ax];
    int64_t end = len > 0 ? start + (len - 1) * step + 1 : start;
    if (ox_bdim(c, r->in[0]) == ax) {
        if (start != 0 || step != 1 || len != r->in[0]->shape[ax]) return batch_error(r, "slices");
        end = INT64_MAX;   /* the whole batch, whatever its size */
    }
    const char *in[5] = { x, ox_const_i64(G, &start, 1), ox_const_i64(G, &end, 1), ox_const_i64(G, &ax, 1), ox_const_i64(G, &step, 1) };
    ox_node(G, "Slice", in, 5, *out);
    return 0;
}

static int m_expand(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *x = IN(0);
    FAIL_IF(!x);
    const dg_tensor *xt = r->in[0], *yt = r->out;
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, yt->shape, sizeof(int64_t) * (size_t)yt->ndim);
    int bd = ox_bdim(c, xt);
    *bdim = -1;
    if (bd >= 0) {
        int ob = bd + yt->ndim - xt->ndim;
        if (yt->shape[ob] != xt->shape[bd]) return batch_error(r, "expands");
        shape[ob] = 1;   /* Expand broadcasts: 1 keeps the input's batch */
        *bdim = ob;
    }
    node2(c, "Expand", x, ox_const_i64(G, shape, yt->ndim), *out);
    return 0;
}

/* tril / triu: Trilu (opset 14 and later) with k as a 0-d int64 constant */
static int m_trilu(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_tri_attr *a = r->node ? node_attr(r) : (const void *)r->attr;   /* a node, or a value with no gradient */
    const char *x = IN(0);
    FAIL_IF(!x);
    if (c->p.opset < 14) return ox_fail(r, DG_EUNSUPPORTED, "needs ONNX Trilu, which opset %d lacks (opset 14 or later)", c->p.opset);
    int64_t k = a->diagonal;
    const char *in[2] = { x, ox_init(G, ox_tmp(G, "trilu_k"), ONNX__TENSOR_PROTO__DATA_TYPE__INT64, NULL, 0, &k, sizeof k) };
    ox_attr_i(G, ox_node(G, "Trilu", in, 2, *out), "upper", a->upper);
    return 0;
}

/* dropout in eval, contiguous, clone, to_device: the value itself (an Identity only where it is
 * the graph's output, which must be a node's) */
static int m_identity(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *x = IN(0);
    FAIL_IF(!x);
    if (ox_is_output(c, r->out)) node1(c, "Identity", x, *out);
    else *out = x;
    return 0;
}

static int m_cast(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *x = IN(0);
    FAIL_IF(!x);
    int to = ox_onnx_dtype(r->out->dtype);
    if (!to) return ox_fail(r, DG_EUNSUPPORTED, "to %s: export is float32 only", dg_dtype_name(r->out->dtype));
    ox_attr_i(G, ox_node(G, "Cast", &x, 1, *out), "to", to);
    return 0;
}

/* ---- reductions ---- */
static int reduce(ox_ctx *c, const dg_trace_rec *r, const char *op, const bool *mask, bool keep, const char *out, int *bdim) {
    const char *x = IN(0);
    FAIL_IF(!x);
    int nd = r->in[0]->ndim, bd = ox_bdim(c, r->in[0]), n = 0, before = 0;
    int64_t axes[DG_MAX_DIMS];
    for (int i = 0; i < nd; i++) if (mask[i]) { axes[n++] = i; if (i < bd) before++; }
    *bdim = bd < 0 || mask[bd] ? -1 : keep ? bd : bd - before;
    Onnx__NodeProto *node;
    if (!strcmp(op, "ReduceSum")) node = node2(c, op, x, ox_const_i64(G, axes, n), out) ? G->nodes[G->n_nodes - 1] : NULL;
    else { node = ox_node(G, op, &x, 1, out); ox_attr_ints(G, node, "axes", axes, n); }
    ox_attr_i(G, node, "keepdims", keep);
    return 0;
}
static int m_reduce(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_red_attr *a = node_attr(r);
    bool mask[DG_MAX_DIMS] = { false };
    for (int i = 0; i < a->n_axes; i++) mask[a->axes[i]] = true;
    const char *op = r->op == DG_OP_SUM ? "ReduceSum" : r->op == DG_OP_MAX ? "ReduceMax" : "ReduceMin";
    return reduce(c, r, op, mask, r->out->ndim == r->in[0]->ndim, *out, bdim);
}
static int m_mean(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_mean_trace_attr *a = (const void *)r->attr;
    return reduce(c, r, "ReduceMean", a->mask, a->keepdim, *out, bdim);
}

/* ---- indexing ---- */
static int m_embedding(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    if (r->n_extra < 1) return ox_fail(r, DG_EUNSUPPORTED, "has no ids in the trace");
    const char *w = IN(0), *ids = ox_value(c, r, r->extra[0], 1);
    FAIL_IF(!w || !ids);
    ox_attr_i(G, ox_node(G, "Gather", (const char *[]){ w, ids }, 2, *out), "axis", 0);
    *bdim = ox_bdim(c, r->extra[0]);   /* the ids' axes come first in the output */
    return 0;
}
static int m_index(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_ix_attr *a = node_attr(r);
    if (r->n_extra < 1) return ox_fail(r, DG_EUNSUPPORTED, "has no index in the trace");
    const char *x = IN(0), *ix = ox_value(c, r, r->extra[0], 1);
    FAIL_IF(!x || !ix);
    bool elements = r->op == DG_OP_GATHER;
    if (!elements && ox_bdim(c, r->in[0]) == a->axis) return batch_error(r, "selects along");
    ox_attr_i(G, ox_node(G, elements ? "GatherElements" : "Gather", (const char *[]){ x, ix }, 2, *out), "axis", a->axis);
    return 0;
}

static int m_pad(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_pad_trace_attr *a = (const void *)r->attr;
    const char *x = IN(0);
    FAIL_IF(!x);
    int nd = r->in[0]->ndim;
    int64_t pads[2 * DG_MAX_DIMS] = { 0 };
    for (int k = 0; k < a->npads / 2; k++) {   /* dg_pad: (left, right) from the last axis; ONNX: all begins, then all ends */
        pads[nd - 1 - k] = a->pads[2 * k];
        pads[2 * nd - 1 - k] = a->pads[2 * k + 1];
    }
    static const char *const modes[] = { "constant", "reflect", "edge" };
    const char *in[3] = { x, ox_const_i64(G, pads, 2 * nd), ox_const_f(G, (float)a->value) };
    ox_attr_s(G, ox_node(G, "Pad", in, a->mode == DG_PAD_CONSTANT ? 3 : 2, *out), "mode", modes[a->mode]);
    return 0;
}

/* The mapper of each op: registry.h's ONNX column (ONNX(mapper); PARTS and NO_ONNX have none, so
 * a record of theirs reaching the exporter is "not exportable"). A mapper named there and not
 * defined above fails the build. */
#define ONNX(fn) fn
#define PARTS NULL
#define NO_ONNX NULL
static const map_fn table[DG_OP_COUNT] = {
#define DG_OP_MAP_(ID, nm, attr, ac, kd, ox, be) [DG_OP_##ID] = ox,
    DG_OPS(DG_OP_MAP_)
#undef DG_OP_MAP_
};
#undef ONNX
#undef PARTS
#undef NO_ONNX

static map_fn mapper(const dg_trace_rec *r) { return r->op >= 0 && r->op < DG_OP_COUNT ? table[r->op] : NULL; }

/* A composite record stands for the nodes it was made of when its op has a mapper (layer_norm's
 * LayerNormalization only from opset 17: before that its parts are written). */
bool ox_composite_accepted(ox_ctx *c, const dg_trace_rec *r) {
    if (r->op == DG_OP_LAYER_NORM) return c->p.opset >= 17;
    return r->composite && mapper(r) != NULL;
}

int ox_map(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    map_fn fn = mapper(r);
    if (fn) {
        int rc = fn(c, r, out, bdim);
        if (!rc && G->oom) rc = ox_fail(r, DG_ENOMEM, "out of memory building the model");
        return rc;
    }
    if (r->op >= 0 && r->op < DG_OP_COUNT && dg_op_table[r->op].onnx == DG_ONNX_NONE)
        return ox_fail(r, DG_EUNSUPPORTED, "is not exportable to ONNX (eager/ops/registry.h says so); the model was not written");
    return ox_fail(r, DG_EUNSUPPORTED, "has no ONNX mapping (a custom op recorded with dg_record, or a built-in op the "
                                       "exporter does not cover); the model was not written");
}
