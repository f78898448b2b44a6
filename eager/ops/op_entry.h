/* eager/ops/op_entry.h — the one entry path every built-in op passes through. A public op is
 * three statements:
 *
 *     dg_tensor *dg_softmax(const dg_tensor *x, int axis) {
 *         dg_op_frame f;
 *         dg_op_enter(&f, DG_OP_SOFTMAX, DG_OP_IN(x));
 *         return dg_op_leave(&f, softmax_op(f.arg[0], axis, false));
 *     }
 *
 * dg_op_enter reads the op's registry line (registry.h): under an autocast region it casts the
 * inputs the policy names into f.arg (inside a scope that keeps only the result), decides whether
 * the op records a tape node (grad mode, inputs needing a gradient: dg_op_records), checks that
 * the input's backend has the entries the op calls, and opens the op's profiler range.
 * dg_op_leave closes them in reverse: anomaly mode's NaN/Inf check of the output (naming the op,
 * its inputs' shapes and the layer that called it), the profiler range, autocast's scope. The op
 * itself (f.arg in, a tensor out) does its checks, its kernel call and its tape record, with its
 * backward rule beside it in its file. Nothing returns early between enter and leave, so every
 * check the op makes happens inside, where a failure is still closed by leave. */
#ifndef DG_OPS_OP_ENTRY_H
#define DG_OPS_OP_ENTRY_H

#include "registry.h"

#define DG_OP_MAX_IN 8

typedef struct dg_op_frame {
    dg_op_id op;
    int n;
    bool record;                          /* the op records a node (PRIM ops; see dg_op_records) */
    bool failed;                          /* enter failed (a backend lacks an entry): leave returns NULL */
    const dg_tensor *in[DG_OP_MAX_IN];    /* as the caller gave them */
    const dg_tensor *arg[DG_OP_MAX_IN];   /* what the op computes on: in, or its autocast casts */
    dg_scope *ac_scope;                   /* open while the op runs on cast inputs */
    uint64_t t0;                          /* profiler start, 0 when not profiling */
    struct dg_op_frame *parent;
} dg_op_frame;

/* in[], n for dg_op_enter: DG_OP_IN(x, w, b) */
#define DG_OP_IN(...) (const dg_tensor *const[]){ __VA_ARGS__ }, \
    (int)(sizeof((const dg_tensor *const[]){ __VA_ARGS__ }) / sizeof(const dg_tensor *))

void dg_op_enter(dg_op_frame *f, dg_op_id op, const dg_tensor *const *in, int n);
/* y, the op's result (NULL when it failed), handed to the caller's scope; NULL when enter failed
 * or anomaly mode finds a NaN/Inf in y. */
dg_tensor *dg_op_leave(dg_op_frame *f, dg_tensor *y);
/* For ops that report a status (sort, topk, split): rc, or a failure of enter/anomaly. outs[k]
 * are the op's results (kept in the caller's scope). */
int dg_op_leave_status(dg_op_frame *f, int rc, dg_tensor **outs, int n_outs);

/* The innermost op of this thread (NULL outside every op), and whether it records a node: the
 * recording decision made once at enter, for the inputs it was entered with. Only the function
 * that computes the entered op asks it; a helper shared by several ops (nll's rows, scatter's
 * block) records on inputs of its own and asks dg_needs_record about them. */
extern _Thread_local dg_op_frame *dg_op_top;
static inline bool dg_op_records(void) { return dg_op_top && dg_op_top->record; }

/* Record the tape node of the innermost op (its registry name and id; see dg_record). */
DG_NODISCARD dg_node *dg_record_op(dg_op_id op, dg_tensor *out, const dg_tensor *const *in, int n, dg_backward_fn bw);

#endif
