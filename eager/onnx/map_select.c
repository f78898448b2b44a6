/* eager/onnx/map_select.c — the mappers for ops that select, compare, rank and scan: comparisons
 * (Greater, Equal), where and masked_fill (Where), zeros_like / ones_like (Expand of a Shape, so
 * the fill follows the input's batch), argmax / argmin (ArgMax / ArgMin), sort, argsort and topk
 * (TopK), cumsum (CumSum), scatter and scatter_add (ScatterElements). Several of these are values
 * an op reported without a tape node (eager/trace.h's dg_trace_value): a mask or an index made
 * from the input is then an op of the graph, not a constant baked in from the example. The
 * table that dispatches to them is map_ops.c's. */
#include "onnx_internal.h"

#define G (&c->g)
#define IN(k) ox_value(c, r, r->in[k], (k))
#define FAIL_IF(cond) do { if (cond) return dg_last_status() ? dg_last_status() : DG_ENOMEM; } while (0)

static int along_batch(const dg_trace_rec *r, int axis) {
    return ox_fail(r, DG_EUNSUPPORTED, "works along axis %d, the batch axis of %s, so the model would hold only for the example's "
                   "batch size; export with dynamic_batch = false", axis, DG_SHAPE_STR(r->in[0]));
}

/* A 0-d constant of ONNX type dt holding v (float32 or int64). */
static const char *const_scalar(ox_ctx *c, const dg_trace_rec *r, dg_dtype dt, double v) {
    if (dt == DG_F32) return ox_const_f(G, (float)v);
    if (dt == DG_I64) {
        int64_t i = (int64_t)v;
        return ox_init(G, ox_fmt(G, "const_%d", G->counter++), ONNX__TENSOR_PROTO__DATA_TYPE__INT64, NULL, 0, &i, sizeof i);
    }
    ox_fail(r, DG_EUNSUPPORTED, "fills a %s tensor: export takes float32 and int64 constants", dg_dtype_name(dt));
    return NULL;
}

/* greater / equal: one node; the inputs are of one dtype, as dygraph's kernels take them */
int ox_map_compare(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    if (r->in[0]->dtype != r->in[1]->dtype)
        return ox_fail(r, DG_EUNSUPPORTED, "compares %s with %s: ONNX compares one type", dg_dtype_name(r->in[0]->dtype),
                       dg_dtype_name(r->in[1]->dtype));
    const char *in[2] = { IN(0), IN(1) };
    FAIL_IF(!in[0] || !in[1]);
    ox_node(G, r->op == DG_OP_GREATER ? "Greater" : "Equal", in, 2, *out);
    return 0;
}

/* where(cond, a, b): ONNX's condition is bool; another dtype is nonzero-tested as dygraph's kernel does */
int ox_map_where(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const char *in[3] = { IN(0), IN(1), IN(2) };
    FAIL_IF(!in[0] || !in[1] || !in[2]);
    if (r->in[0]->dtype != DG_BOOL) {
        const char *b = ox_tmp(G, "where_cond");
        ox_attr_i(G, ox_node(G, "Cast", &in[0], 1, b), "to", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL);
        in[0] = b;
    }
    ox_node(G, "Where", in, 3, *out);
    return 0;
}

/* masked_fill(x, mask, value) = Where(mask, value, x) */
int ox_map_masked_fill(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_fill_trace_attr *a = (const void *)r->attr;
    const char *in[3] = { IN(1), const_scalar(c, r, r->in[0]->dtype, a->value), IN(0) };
    FAIL_IF(!in[0] || !in[1] || !in[2]);
    ox_node(G, "Where", in, 3, *out);
    return 0;
}

/* zeros_like / ones_like: the fill expanded to the shape of its argument as the graph has it */
int ox_map_fill_like(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_fill_trace_attr *a = (const void *)r->attr;
    const char *x = IN(0), *v = const_scalar(c, r, r->out->dtype, a->value);
    FAIL_IF(!x || !v);
    const char *shape = ox_tmp(G, "shape");
    ox_node(G, "Shape", &x, 1, shape);
    ox_node(G, "Expand", (const char *[]){ v, shape }, 2, *out);
    return 0;
}

/* argmax / argmin: the first extreme wins, as dygraph's (select_last_index 0) */
int ox_map_arg(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_axis_trace_attr *a = (const void *)r->attr;
    const char *x = IN(0);
    FAIL_IF(!x);
    int bd = ox_bdim(c, r->in[0]);
    *bdim = bd < 0 || bd == a->axis ? -1 : bd - (!a->keepdim && a->axis < bd);
    Onnx__NodeProto *n = ox_node(G, r->op == DG_OP_ARGMAX ? "ArgMax" : "ArgMin", &x, 1, *out);
    ox_attr_i(G, n, "axis", a->axis);
    ox_attr_i(G, n, "keepdims", a->keepdim);
    ox_attr_i(G, n, "select_last_index", 0);
    return 0;
}

/* The other record of a topk / sort pair (eager/ops/sort.c records the indices, then the values'
 * composite), or NULL when the op wanted only one of them. */
static const dg_trace_rec *topk_sibling(ox_ctx *c, const dg_trace_rec *r) {
    const dg_topk_trace_attr *a = (const void *)r->attr;
    if (!a->paired) return NULL;
    const dg_trace_rec *s = r->composite ? r - 1 : r + 1;
    if (s < c->tr->recs || s >= c->tr->recs + c->tr->n || s->composite == r->composite || s->in[0] != r->in[0]) return NULL;
    return s;
}

/* topk, sort (values) and topk_indices, sort_indices, argsort: one TopK with K an int64
 * initializer (the axis length for a sort) writes both; the other output is named for the
 * pair's other record, so a model reading both has one node. ONNX's TopK puts equal values in
 * index order, as dygraph's stable order does. */
int ox_map_topk(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_topk_trace_attr *a = (const void *)r->attr;
    const char *x = IN(0);
    FAIL_IF(!x);
    int bd = ox_bdim(c, r->in[0]);
    if (bd == a->axis) return along_batch(r, a->axis);
    *bdim = bd;
    const dg_trace_rec *sib = topk_sibling(c, r);
    const char *other = sib && ox_is_output(c, sib->out) ? c->p.output_name : ox_tmp(G, r->composite ? "topk_indices" : "topk_values");
    const char *outs[2] = { r->composite ? *out : other, r->composite ? other : *out };
    Onnx__NodeProto *n = ox_node_outs(G, "TopK", (const char *[]){ x, ox_const_i64(G, &a->k, 1) }, 2, outs, 2);
    ox_attr_i(G, n, "axis", a->axis);
    ox_attr_i(G, n, "largest", a->largest);
    ox_attr_i(G, n, "sorted", 1);
    if (sib) ox_bind(c, sib->out, other, bd);
    return 0;
}

/* cumsum: CumSum with the axis a 0-d int64 input */
int ox_map_cumsum(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_axis_trace_attr *a = (const void *)r->attr;
    const char *x = IN(0);
    FAIL_IF(!x);
    int64_t ax = a->axis;
    const char *axis = ox_init(G, ox_fmt(G, "const_%d", G->counter++), ONNX__TENSOR_PROTO__DATA_TYPE__INT64, NULL, 0, &ax, sizeof ax);
    ox_node(G, "CumSum", (const char *[]){ x, axis }, 2, *out);
    return 0;
}

/* scatter / scatter_add(x, axis, index, src): ScatterElements(x, index, src) (reduction "add",
 * opset 16's, for scatter_add). dygraph reads only src's leading block of index's shape; ONNX's
 * updates are index-shaped, so a larger src is sliced to it. */
int ox_map_scatter(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    const dg_axis_trace_attr *a = (const void *)r->attr;
    bool add = r->op == DG_OP_SCATTER_ADD;
    if (add && c->p.opset < 16)
        return ox_fail(r, DG_EUNSUPPORTED, "needs ScatterElements' reduction \"add\", which is opset 16's (export asked opset %d)",
                       c->p.opset);
    const dg_tensor *ix = r->in[1], *src = r->in[2];
    const char *in[3] = { IN(0), IN(1), IN(2) };
    FAIL_IF(!in[0] || !in[1] || !in[2]);
    int64_t starts[DG_MAX_DIMS], ends[DG_MAX_DIMS], axes[DG_MAX_DIMS];
    int n = 0, sbd = ox_bdim(c, src);
    for (int i = 0; i < src->ndim; i++)
        if (ix->shape[i] < src->shape[i]) {
            if (i == sbd) return along_batch(r, i);
            starts[n] = 0, ends[n] = ix->shape[i], axes[n++] = i;
        }
    if (n) {
        const char *s = ox_tmp(G, "scatter_src");
        const char *sin[4] = { in[2], ox_const_i64(G, starts, n), ox_const_i64(G, ends, n), ox_const_i64(G, axes, n) };
        ox_node(G, "Slice", sin, 4, s);
        in[2] = s;
    }
    Onnx__NodeProto *node = ox_node(G, "ScatterElements", in, 3, *out);
    ox_attr_i(G, node, "axis", a->axis);
    if (add) ox_attr_s(G, node, "reduction", "add");
    return 0;
}
