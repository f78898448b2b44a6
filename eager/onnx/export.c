/* eager/onnx/export.c — dg_onnx_export: runs the layer's forward once under a trace
 * (eager/trace.h) and writes the ops it recorded as an ONNX graph.
 *
 * How the trace is taken: the example input (a view of it) and, for the duration, every float
 * parameter require a gradient and grad mode is on, so every op on the way from the input (or
 * a parameter) to the output records its node, and the trace sink sees each with its actual
 * arguments. Eval mode keeps BatchNorm on its running statistics and Dropout an identity copy;
 * grad mode keeps nn/fuse.c from folding Conv+BN behind the trace's back (the fold, when asked,
 * is done here, on the traced pair). Autocast is paused (the graph is float32) and recompute
 * runs segments plainly (dg_recompute checks dg_tracing). Afterwards every mode, flag and
 * requires_grad is put back.
 *
 * Why walk from the output: the graph is what the output depends on, so ops whose results the
 * forward dropped are not written, and a composite (linear, layer_norm) is written as one
 * operator because the output's chain reaches its last node first, which the composite's record
 * is keyed by. Where a value comes from is decided by identity: the traced input, a parameter or
 * buffer (initializer named as in the state dict), a traced op's output (a node's, or a value an op
 * reported without one: a comparison, argmax, an index; keyed by the tensor), or a constant that
 * existed before the forward; a tensor made during the forward that no traced op produced (data
 * built inside the forward, a view of an integer value) is refused, since baking it in as a
 * constant would silently give a different model. */
#include "onnx_internal.h"
#include <stdarg.h>

/* ---- pointer -> value maps (open addressing; keys are node or tensor addresses) ---- */
typedef struct { const void *key; const char *name; int bdim; int uses; } value;
typedef struct { value *v; size_t cap, n; } vmap;

static size_t slot_of(const vmap *m, const void *key) {
    size_t h = ((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull;
    size_t i = h & (m->cap - 1);
    while (m->v[i].key && m->v[i].key != key) i = (i + 1) & (m->cap - 1);
    return i;
}
static value *vmap_get(const vmap *m, const void *key) {
    if (!m->cap) return NULL;
    value *v = &m->v[slot_of(m, key)];
    return v->key ? v : NULL;
}
static value *vmap_put(vmap *m, const void *key) {
    if (2 * (m->n + 1) > m->cap) {
        vmap bigger = { calloc(m->cap ? 2 * m->cap : 256, sizeof(value)), m->cap ? 2 * m->cap : 256, 0 };
        if (!bigger.v) return NULL;
        for (size_t i = 0; i < m->cap; i++)
            if (m->v[i].key) { bigger.v[slot_of(&bigger, m->v[i].key)] = m->v[i]; bigger.n++; }
        free(m->v);
        *m = bigger;
    }
    value *v = &m->v[slot_of(m, key)];
    if (!v->key) { v->key = key; v->bdim = -1; m->n++; }
    return v;
}

typedef struct exporter {
    ox_ctx c;                      /* first: mappers get &c */
    const dg_tensor *x, *y;        /* the traced input and the forward's output */
    const char *in_name, *out_name;
    vmap values;                   /* emitted values: producer node (or leaf tensor) -> name, batch axis */
    vmap params;                   /* parameter / buffer tensor -> state-dict name */
    vmap plain;                    /* node -> index + 1 of its plain record */
    vmap nodeless;                 /* tensor -> index + 1 of its dg_trace_value record */
    vmap uses;                     /* node (or leaf) -> how many traced ops read it */
    int depth;
} exporter;

static const void *key_of(const dg_tensor *t) { return t->node ? (const void *)t->node : (const void *)t; }

int ox_fail(const dg_trace_rec *r, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    DG_ERR(status, "onnx_export: op '%s' (output %s) %s", r->name, DG_SHAPE_STR(r->out), msg);
    return status;
}

void *ox_host_copy(const dg_tensor *t, int64_t *n) {
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_dtype want = dg_dtype_is_float(t->dtype) ? DG_F32 : DG_I64;
    dg_tensor *h = dg_to_device(t, (dg_device){ DG_CPU, 0 });
    if (h && h->dtype != want) h = dg_cast(h, want);
    if (h) h = dg_contiguous(h);
    size_t nb = h ? (size_t)h->numel * dg_dtype_bytes(want) : 0;
    void *buf = h ? malloc(nb ? nb : 1) : NULL;
    if (buf) { memcpy(buf, dg_tensor_ptr(h), nb); *n = h->numel; }
    else if (h) DG_ERR(DG_ENOMEM, "onnx_export: out of memory copying a %s tensor", DG_SHAPE_STR(t));
    dg_no_grad_end();
    dg_scope_end(s);
    return buf;
}

const char *ox_param_name(ox_ctx *c, const dg_tensor *t) {
    value *v = vmap_get(&((exporter *)c)->params, t);
    return v ? v->name : NULL;
}
bool ox_is_output(ox_ctx *c, const dg_tensor *t) { return key_of(t) == key_of(((exporter *)c)->y); }
int ox_uses(ox_ctx *c, const dg_tensor *t) {
    value *v = vmap_get(&((exporter *)c)->uses, key_of(t));
    return v ? v->uses : 0;
}
const dg_trace_rec *ox_producer(ox_ctx *c, const dg_tensor *t) {
    exporter *e = (exporter *)c;
    value *v = t->node ? vmap_get(&e->plain, t->node) : NULL;
    return v ? &e->c.tr->recs[v->uses - 1] : NULL;
}
int ox_bdim(ox_ctx *c, const dg_tensor *t) {
    exporter *e = (exporter *)c;
    if (t == e->x) return c->p.dynamic_batch && t->ndim > 0 ? 0 : -1;
    value *v = vmap_get(&e->values, key_of(t));
    return v ? v->bdim : -1;
}

/* A leaf: a parameter or buffer (by handle, or a view of one's whole storage), or a constant
 * from before the forward. */
static const char *leaf(exporter *e, const dg_trace_rec *r, const dg_tensor *t, int pos) {
    ox_ctx *c = &e->c;
    const char *pname = ox_param_name(c, t);
    if (!pname && dg_trace_made_during(c->tr, t)) {
        ox_fail(r, DG_EUNSUPPORTED, "reads as input %d a %s %s tensor made during the forward by something the trace cannot "
                "follow (a tensor built inside the forward from data or by a constructor such as arange or full, "
                "or a view of an integer value); baking it in as a constant could give a different model", pos, dg_dtype_name(t->dtype), DG_SHAPE_STR(t));
        return NULL;
    }
    int dt = ox_onnx_dtype(dg_dtype_is_float(t->dtype) ? DG_F32 : DG_I64);
    if (dg_dtype_is_float(t->dtype) && t->dtype != DG_F32) {
        ox_fail(r, DG_EUNSUPPORTED, "reads a %s tensor %s (input %d): export is float32 only (dg_layer_to_dtype(layer, DG_F32))",
                dg_dtype_name(t->dtype), pname ? pname : DG_SHAPE_STR(t), pos);
        return NULL;
    }
    int64_t n;
    void *data = ox_host_copy(t, &n);
    if (!data) return NULL;
    const char *name = pname ? pname : ox_fmt(&c->g, "const_%d", c->g.counter++);
    name = name ? ox_init(&c->g, name, dt, t->shape, t->ndim, data, (size_t)n * 8 / (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? 2 : 1)) : NULL;
    free(data);
    value *v = name ? vmap_put(&e->values, t) : NULL;
    if (!v) { DG_ERR(DG_ENOMEM, "onnx_export: out of memory"); return NULL; }
    v->name = name;
    return name;
}

/* The record that stands for node n: the latest composite keyed by it that this export writes
 * as one operator, else the op's own. */
static const dg_trace_rec *record_for(exporter *e, const dg_node *n) {
    const dg_trace *tr = e->c.tr;
    for (int i = tr->n - 1; i >= 0; i--)
        if (tr->recs[i].composite && tr->recs[i].node == n && ox_composite_accepted(&e->c, &tr->recs[i])) return &tr->recs[i];
    value *v = vmap_get(&e->plain, n);
    return v ? &tr->recs[v->uses - 1] : NULL;
}

static const char *emit_rec(exporter *e, const dg_trace_rec *r);
static const char *emit(exporter *e, const dg_trace_rec *by, const dg_tensor *t, int pos) {
    const dg_trace_rec *r = record_for(e, t->node);
    if (!r) {
        ox_fail(by, DG_EUNSUPPORTED, "reads as input %d a value made by '%s' outside the traced forward (a tensor with history "
                "from before the export)", pos, t->node->name);
        return NULL;
    }
    return emit_rec(e, r);
}

/* r's nodes, and its value's name and batch axis noted under key_of(r->out) */
static const char *emit_rec(exporter *e, const dg_trace_rec *r) {
    ox_ctx *c = &e->c;
    if (!ox_onnx_dtype(r->out->dtype) || (dg_dtype_is_float(r->out->dtype) && r->out->dtype != DG_F32)) {
        ox_fail(r, DG_EUNSUPPORTED, "makes a %s value: export is float32 only", dg_dtype_name(r->out->dtype));
        return NULL;
    }
    if (++e->depth > 20000) { ox_fail(r, DG_EUNSUPPORTED, "lies deeper than 20000 ops from the output"); return NULL; }
    const char *out = ox_is_output(c, r->out) ? e->out_name : ox_tmp(&c->g, r->name);
    int bdim = -2;
    int rc = out ? ox_map(c, r, &out, &bdim) : DG_ENOMEM;
    e->depth--;
    if (rc) return NULL;
    if (bdim == -2) {   /* the first batched input's batch axis, aligned to the output's rank */
        bdim = -1;
        for (int i = 0; i < r->n_in && bdim < 0; i++) {
            int b = r->in[i] ? ox_bdim(c, r->in[i]) : -1;
            if (b >= 0 && b + r->out->ndim - r->in[i]->ndim >= 0) bdim = b + r->out->ndim - r->in[i]->ndim;
        }
    }
    value *v = vmap_put(&e->values, key_of(r->out));
    if (!v) { DG_ERR(DG_ENOMEM, "onnx_export: out of memory"); return NULL; }
    v->name = out;
    v->bdim = bdim;
    return out;
}

void ox_bind(ox_ctx *c, const dg_tensor *t, const char *name, int bdim) {
    value *v = name ? vmap_put(&((exporter *)c)->values, key_of(t)) : NULL;
    if (!v) { c->g.oom = true; return; }
    v->name = name;
    v->bdim = bdim;
}

const char *ox_value(ox_ctx *c, const dg_trace_rec *r, const dg_tensor *t, int pos) {
    exporter *e = (exporter *)c;
    if (t == e->x) return e->in_name;
    value *v = vmap_get(&e->values, key_of(t));
    if (v) return v->name;
    if (t->node) return emit(e, r, t, pos);
    value *n = vmap_get(&e->nodeless, t);
    return n ? emit_rec(e, &e->c.tr->recs[n->uses - 1]) : leaf(e, r, t, pos);
}

/* ---- the entry ---- */
dg_onnx_export_params dg_onnx_export_default_params(void) {
    return (dg_onnx_export_params){ .params_tag = DG_PARAMS_TAG, .opset = 17, .dynamic_batch = true, .input_name = "input", .output_name = "output",
                                    .fold_batch_norm = false, .producer = "dygraph" };
}

typedef struct { dg_layer **l; bool *training; int n, cap; } modes;
static int note_mode(dg_layer *l, void *user) {
    modes *m = user;
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 32;
        dg_layer **ls = realloc(m->l, sizeof *ls * (size_t)cap);
        if (ls) m->l = ls;
        bool *tr = realloc(m->training, sizeof *tr * (size_t)cap);
        if (tr) m->training = tr;
        if (!ls || !tr) return DG_ENOMEM;
        m->cap = cap;
    }
    m->l[m->n] = l;
    m->training[m->n++] = dg_layer_is_training(l);
    return 0;
}
/* dg_layer_apply lists children before parents; setting parents first (each recursively) and
 * letting each child's own setting override restores any mix of modes. */
static void restore_modes(modes *m) {
    for (int i = m->n - 1; i >= 0; i--) (m->training[i] ? dg_layer_train : dg_layer_eval)(m->l[i]);
    free(m->l);
    free(m->training);
}

static bool name_ok(const char *s) { return s && *s; }

static int build(exporter *e, const char *path) {
    ox_ctx *c = &e->c;
    const dg_trace *tr = c->tr;
    /* index the records: node -> its plain record, and how often each value is read */
    for (int i = 0; i < tr->n; i++) {
        const dg_trace_rec *r = &tr->recs[i];
        if (!r->node) {
            value *v = vmap_put(&e->nodeless, r->out);
            if (!v) return DG_ENOMEM;
            v->uses = i + 1;
        } else if (!r->composite) {
            value *v = vmap_put(&e->plain, r->node);
            if (!v) return DG_ENOMEM;
            v->uses = i + 1;
        }
        for (int k = 0; k < r->n_in + r->n_extra; k++) {
            const dg_tensor *t = k < r->n_in ? r->in[k] : r->extra[k - r->n_in];
            if (!t) continue;
            value *u = vmap_put(&e->uses, key_of(t));
            if (!u) return DG_ENOMEM;
            u->uses++;
        }
    }
    const dg_tensor *y = e->y;
    const char *name;
    if (y == e->x || (!y->node && !vmap_get(&e->nodeless, y))) {   /* the layer returned its input, or something no op made */
        if (y != e->x) {
            DG_ERR(DG_EUNSUPPORTED, "onnx_export: the forward's output %s was not made by a traced op", DG_SHAPE_STR(y));
            return DG_EUNSUPPORTED;
        }
        name = ox_node(&c->g, "Identity", &e->in_name, 1, e->out_name) ? e->out_name : NULL;
    } else {
        dg_trace_rec top = { .name = "(output)", .out = (dg_tensor *)y };
        name = ox_value(c, &top, y, 0);
    }
    if (!name) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    int ydim = y == e->x ? ox_bdim(c, y) : ox_bdim(c, y);
    int in_dyn = c->p.dynamic_batch && e->x->ndim > 0 ? 0 : -1;
    Onnx__ValueInfoProto *vin = ox_value_info(&c->g, e->in_name, ox_onnx_dtype(e->x->dtype), e->x->shape, e->x->ndim, in_dyn);
    Onnx__ValueInfoProto *vout = ox_value_info(&c->g, e->out_name, ox_onnx_dtype(y->dtype), y->shape, y->ndim, ydim);
    return ox_write_model(&c->g, path, c->p.opset, c->p.producer, vin, vout);
}

int dg_onnx_export(dg_layer *layer, const dg_tensor *example_input, const char *path, dg_onnx_export_params p) {
    DG_CHECK_PARAMS_INT("onnx_export", p, dg_onnx_export_default_params);
    DG_CHECK_HANDLE_INT(layer, "onnx_export: layer is NULL");
    DG_CHECK_INPUT_INT("onnx_export", example_input);
    DG_CHECK_INT(path && *path, "onnx_export: path is %s", path ? "empty" : "NULL");
    DG_CHECK_INT(p.opset >= DG_ONNX_OPSET_MIN && p.opset <= DG_ONNX_OPSET_MAX,
                 "onnx_export: opset %d is not supported (%d..%d; dg_onnx_export_default_params() has 17)", p.opset,
                 DG_ONNX_OPSET_MIN, DG_ONNX_OPSET_MAX);
    DG_CHECK_INT(name_ok(p.input_name) && name_ok(p.output_name) && strcmp(p.input_name, p.output_name),
                 "onnx_export: input_name and output_name must be distinct non-empty names (got '%s', '%s')",
                 p.input_name ? p.input_name : "(null)", p.output_name ? p.output_name : "(null)");
    if (!p.producer || !*p.producer) p.producer = "dygraph";
    dg_dtype xdt = example_input->dtype;
    DG_CHECK_INT(xdt == DG_F32 || xdt == DG_I64 || xdt == DG_I32,
                 "onnx_export: the example input is %s %s; export takes float32 (or int64/int32 ids)", dg_dtype_name(xdt),
                 DG_SHAPE_STR(example_input));
    DG_CHECK_INT(dg_layer_num_inputs(layer) == 1, "onnx_export: layer %s takes %d inputs; export takes one-input layers",
                 dg_layer_type(layer), dg_layer_num_inputs(layer));
    DG_CHECK_INT(!dg_tracing(), "onnx_export: called inside another export's forward");

    modes m = { 0 };
    int rc = dg_layer_apply(layer, note_mode, &m);
    int np = 0, nb = 0;
    dg_named_tensor *params = rc ? NULL : dg_layer_named_parameters(layer, &np);
    dg_named_tensor *bufs = params ? dg_layer_named_buffers(layer, &nb) : NULL;
    bool *frozen = bufs ? calloc((size_t)np + 1, sizeof *frozen) : NULL;
    if (!rc && !frozen) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    if (rc) { free(params); free(bufs); free(m.l); free(m.training); return rc; }

    exporter e = { .c = { .p = p }, .in_name = p.input_name, .out_name = p.output_name };
    for (int i = 0; i < np + nb && !rc; i++) {
        dg_named_tensor *nt = i < np ? &params[i] : &bufs[i - np];
        value *v = vmap_put(&e.params, nt->tensor);
        if (!v) rc = DG_ENOMEM;
        else if (!v->name) v->name = nt->name;   /* a tied tensor keeps its first name */
    }
    /* every float parameter requires grad while tracing, so ops on frozen ones record too */
    for (int i = 0; i < np && !rc; i++)
        if (!dg_requires_grad(params[i].tensor)) { frozen[i] = true; dg_set_requires_grad(params[i].tensor, true); }

    dg_scope *s = dg_scope_begin();
    dg_tensor *x = rc ? NULL : dg_detach(example_input);
    if (x && xdt == DG_F32) dg_set_requires_grad(x, true);
    dg_layer_eval(layer);
    int old_depth = dg_grad_mode_swap(0);
    dg_autocast_pause(1);
    dg_trace tr;
    dg_tensor *y = NULL;
    if (x && dg_trace_begin(&tr) == 0) {
        y = dg_forward(layer, x);
        dg_trace_end(&tr);
        e.c.tr = &tr;
        e.x = x;
        e.y = y;
        if (!y) rc = dg_last_status() ? dg_last_status() : DG_EINVAL;
        else if (tr.status) { DG_ERR(tr.status, "onnx_export: out of memory recording the trace"); rc = tr.status; }
        else if (y->dtype != DG_F32 && y->dtype != DG_I64) {
            DG_ERR(DG_EUNSUPPORTED, "onnx_export: the forward's output is %s %s; export is float32 (or int64 indices) only",
                   dg_dtype_name(y->dtype), DG_SHAPE_STR(y));
            rc = DG_EUNSUPPORTED;
        } else rc = build(&e, path);
        dg_trace_free(&tr);
    } else if (!rc) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    dg_autocast_pause(-1);
    dg_grad_mode_swap(old_depth);
    dg_scope_end(s);
    for (int i = 0; i < np; i++) if (frozen[i]) dg_set_requires_grad(params[i].tensor, false);
    restore_modes(&m);
    ox_free(&e.c.g);
    free(e.values.v);
    free(e.params.v);
    free(e.plain.v);
    free(e.nodeless.v);
    free(e.uses.v);
    free(frozen);
    free(params);
    free(bufs);
    return rc;
}
