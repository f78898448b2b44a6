/* eager/trace.c — the tape's tracing mode (eager/trace.h): a thread-local sink that every
 * recorded node, every op's extra inputs and every composite's description go to while an
 * exporter runs a forward.
 *
 * Why a sink beside the tape rather than a walk of the tape from the output afterwards: a
 * node's edges hold only producers and leaves that need a gradient, so the batch-norm buffers,
 * embedding ids and constants an exporter has to name are not on the tape at all; and a
 * composite (linear, layer_norm) is a chain of nodes there, with nothing saying where it begins.
 * The sink sees the op's actual arguments at the moment it records. Each record holds references
 * to its node and tensors, so no handle is freed and reused (and so mistaken for another value)
 * until the exporter is done. */
#include "trace.h"

_Thread_local dg_trace *dg_trace_active;
static uint32_t next_epoch;   /* atomically bumped: traces on two threads never share an epoch */

int dg_trace_begin(dg_trace *t) {
    DG_CHECK_INT(t, "trace_begin: trace is NULL");
    DG_CHECK_INT(!dg_trace_active, "trace_begin: a trace is already running on this thread");
    memset(t, 0, sizeof *t);
    t->epoch = __atomic_add_fetch(&next_epoch, 1, __ATOMIC_RELAXED);
    if (t->epoch == 0) t->epoch = __atomic_add_fetch(&next_epoch, 1, __ATOMIC_RELAXED);   /* 0 means "no trace" */
    dg_trace_active = t;
    return 0;
}

void dg_trace_end(dg_trace *t) {
    if (dg_trace_active == t) dg_trace_active = NULL;
}

void dg_trace_free(dg_trace *t) {
    if (!t) return;
    dg_trace_end(t);
    for (int i = 0; i < t->n; i++) {
        dg_trace_rec *r = &t->recs[i];
        for (int k = 0; k < r->n_in; k++) dg_tensor_release(r->in[k]);
        for (int k = 0; k < r->n_extra; k++) dg_tensor_release(r->extra[k]);
        dg_tensor_release(r->out);
        if (r->node) dg_node_release(r->node);
    }
    free(t->recs);
    memset(t, 0, sizeof *t);
}

static dg_trace_rec *new_rec(dg_trace *t) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        dg_trace_rec *r = realloc(t->recs, sizeof *r * (size_t)cap);
        if (!r) { t->status = DG_ENOMEM; return NULL; }
        t->recs = r;
        t->cap = cap;
    }
    dg_trace_rec *r = &t->recs[t->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static void hold_inputs(dg_trace_rec *r, const dg_tensor *const *in, int n) {
    r->n_in = n;
    for (int i = 0; i < n; i++) {
        r->in[i] = (dg_tensor *)in[i];
        dg_tensor_retain(r->in[i]);
    }
}

void dg_trace_on_record(dg_node *n, dg_tensor *out, const dg_tensor *const *in, int n_in) {
    dg_trace *t = dg_trace_active;
    if (!t || t->status) return;
    dg_trace_rec *r = new_rec(t);
    if (!r) return;
    r->node = n;
    __atomic_add_fetch(&n->refcount, 1, __ATOMIC_RELAXED);
    r->name = n->name;
    r->op = n->op;
    r->out = out;
    dg_tensor_retain(out);
    hold_inputs(r, in, n_in);
}

void dg_trace_extra(dg_node *n, const dg_tensor *a, const dg_tensor *b) {
    dg_trace *t = dg_trace_active;
    if (!t || t->status || !n) return;
    for (int i = t->n - 1; i >= 0; i--) {   /* the op's own node: recorded a moment ago */
        dg_trace_rec *r = &t->recs[i];
        if (r->node != n || r->composite) continue;
        const dg_tensor *add[2] = { a, b };
        for (int k = 0; k < 2; k++) {
            if (!add[k] || r->n_extra == DG_TRACE_MAX_EXTRA) continue;
            r->extra[r->n_extra++] = (dg_tensor *)add[k];
            dg_tensor_retain((dg_tensor *)add[k]);
        }
        return;
    }
}

void dg_trace_value(dg_op_id op, const dg_tensor *y, const dg_tensor *const *in, int n_in, const void *attr,
                    size_t attr_bytes) {
    dg_trace *t = dg_trace_active;
    if (!t || t->status || !y || y->node) return;
    if (attr_bytes > DG_TRACE_ATTR_BYTES || n_in > DG_MAX_NODE_INPUTS) { t->status = DG_EINVAL; return; }
    dg_trace_rec *r = new_rec(t);
    if (!r) return;
    r->name = dg_op_name(op);
    r->op = op;
    if ((unsigned)op < DG_OP_COUNT) dg_op_seen_count[op]++;
    r->out = (dg_tensor *)y;   /* held: the handle is the value's key, so it must not be freed and reused */
    dg_tensor_retain(r->out);
    hold_inputs(r, in, n_in);
    if (attr_bytes) memcpy(r->attr, attr, attr_bytes);
}

void dg_trace_composite(dg_op_id op, const dg_tensor *y, const dg_tensor *const *in, int n_in, const void *attr,
                        size_t attr_bytes) {
    dg_trace *t = dg_trace_active;
    if (!t || t->status || !y || !y->node) return;
    if (attr_bytes > DG_TRACE_ATTR_BYTES || n_in > DG_MAX_NODE_INPUTS) { t->status = DG_EINVAL; return; }
    dg_trace_rec *r = new_rec(t);
    if (!r) return;
    r->node = y->node;
    __atomic_add_fetch(&y->node->refcount, 1, __ATOMIC_RELAXED);
    r->name = dg_op_name(op);
    r->op = op;
    r->composite = true;
    r->out = (dg_tensor *)y;
    dg_tensor_retain(r->out);
    hold_inputs(r, in, n_in);
    if (attr_bytes) memcpy(r->attr, attr, attr_bytes);
}
