/* eager/trace.h — the tape's tracing mode: while a trace is active on a thread, every node
 * dg_record puts on the tape is also offered to it, with the actual tensors the op was given
 * (the tape's edges keep only producers and leaves that need a gradient, not the buffers and
 * integer ids an exporter must name). Ops add what the node itself does not hold
 * (dg_trace_extra: batch norm's running statistics, an embedding's ids), and composite ops
 * (made of other ops) describe themselves as one unit (dg_trace_composite: linear, layer_norm,
 * mean, pad, topk, cumsum, scatter), so an exporter can write them as one operator. Ops that make
 * a value without recording a node (a comparison, argmax, an integer index, a cast to bool:
 * nothing there has a gradient) report it with dg_trace_value, so a mask or an index computed
 * from the input is an op of the graph rather than an unknown constant. Used by eager/onnx/;
 * when no trace is active every hook is one thread-local load. */
#ifndef DG_EAGER_TRACE_H
#define DG_EAGER_TRACE_H

#include "internal.h"
#include "ops/registry.h"

#define DG_TRACE_MAX_EXTRA 4
#define DG_TRACE_ATTR_BYTES 160

typedef struct dg_trace_rec {
    struct dg_node *node;          /* the node (held): key of the value it made; NULL for a
                                    * dg_trace_value record, keyed by out itself */
    const char *name;              /* the op's name (the node's, or the composite's) */
    int op;                        /* its registry id (eager/ops/registry.h), DG_OP_CUSTOM for a custom node */
    bool composite;                /* made of the recorded nodes before it, which it stands for */
    dg_tensor *out;                /* held */
    int n_in;
    dg_tensor *in[DG_MAX_NODE_INPUTS];        /* held; NULL where the op had none (no bias) */
    int n_extra;
    dg_tensor *extra[DG_TRACE_MAX_EXTRA];     /* held */
    unsigned char attr[DG_TRACE_ATTR_BYTES];  /* a composite's or value's attributes (op_attrs.h) */
} dg_trace_rec;

typedef struct dg_trace {
    uint32_t epoch;                /* tensors made while this trace ran carry it (dg_tensor.trace_epoch) */
    dg_trace_rec *recs;
    int n, cap;
    int status;                    /* a failure while recording (out of memory): the trace is unusable */
} dg_trace;

/* The calling thread's active trace, or NULL. */
extern _Thread_local dg_trace *dg_trace_active;
static inline bool dg_tracing(void) { return dg_trace_active != NULL; }

/* Starts tracing into t (zeroed by the call) on this thread; a second trace inside one is refused. */
int dg_trace_begin(dg_trace *t);
/* Stops tracing; the records stay until dg_trace_free. */
void dg_trace_end(dg_trace *t);
void dg_trace_free(dg_trace *t);
/* Whether t was made by an op while trace t ran (and so may be a value computed from the input). */
static inline bool dg_trace_made_during(const dg_trace *tr, const dg_tensor *t) { return t->trace_epoch == tr->epoch; }

/* eager/tape.c: the node just recorded */
void dg_trace_on_record(struct dg_node *n, dg_tensor *out, const dg_tensor *const *in, int n_in);
/* The op that recorded node n also read these (NULL entries skipped). */
void dg_trace_extra(struct dg_node *n, const dg_tensor *a, const dg_tensor *b);
/* y, made from in[] by the ops recorded just before, is op `op` with attributes attr. Nothing
 * when y has no node (nothing needed recording). */
void dg_trace_composite(dg_op_id op, const dg_tensor *y, const dg_tensor *const *in, int n_in, const void *attr,
                        size_t attr_bytes);

/* y, made from in[] by an op that recorded no node (its inputs need no gradient, or it has none:
 * comparisons, argmax, argsort, integer and bool casts), is op `op` with attributes attr.
 * Nothing when y has a node (the tape's record already describes it). */
void dg_trace_value(dg_op_id op, const dg_tensor *y, const dg_tensor *const *in, int n_in, const void *attr,
                    size_t attr_bytes);
/* Whether a trace on this thread wants dg_trace_value's reports (an op can skip building attr). */
static inline bool dg_trace_wants_value(const dg_tensor *y) { return dg_trace_active && y && !y->node; }

#endif
