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
    bool cast;                            /* arg holds autocast's casts; in the caller's tensors */
    const dg_tensor *arg[DG_OP_MAX_IN];   /* what the op computes on: the caller's inputs, or their casts */
    const dg_tensor *in[DG_OP_MAX_IN];    /* the caller's inputs, kept only when cast (see dg_op_inputs) */
    dg_scope *ac_scope;                   /* open while the op runs on cast inputs */
    uint64_t t0;                          /* profiler start, 0 when not profiling */
    struct dg_op_frame *parent;
} dg_op_frame;

/* in[], n for dg_op_enter: DG_OP_IN(x, w, b) */
#define DG_OP_IN(...) (const dg_tensor *const[]){ __VA_ARGS__ }, \
    (int)(sizeof((const dg_tensor *const[]){ __VA_ARGS__ }) / sizeof(const dg_tensor *))

/* (The entry path is inline: its common case, no profiler, no autocast region, anomaly mode off,
 * is a few loads and stores; op_entry.c has the rest.) */
extern _Thread_local dg_op_frame *dg_op_top;
extern _Thread_local const struct dg_backend *dg_op_last_be;   /* the backend the thread last checked */
extern _Thread_local uint64_t dg_op_last_mask;                 /* and the entries it lacks */
extern int dg_anomaly_state;                                   /* -1 unread, 0 off, 1 on */
extern __thread int dg_autocast_depth;
extern int dg_prof_active;
void dg_op_enter_slow(dg_op_frame *f);
bool dg_op_entries_ok_slow(dg_op_frame *f);
dg_tensor *dg_op_leave_slow(dg_op_frame *f, dg_tensor *y);
bool dg_needs_record(const dg_tensor *const *in, int n);

static inline void dg_op_enter(dg_op_frame *f, dg_op_id op, const dg_tensor *const *in, int n) {
    const dg_op_info *info = &dg_op_table[op];
    f->op = op;
    dg_op_seen_count[op]++;
    f->n = n < DG_OP_MAX_IN ? n : DG_OP_MAX_IN;
    f->failed = false;
    f->cast = false;
    f->ac_scope = NULL;
    f->t0 = 0;
    for (int i = 0; i < f->n; i++) f->arg[i] = in[i];
    f->parent = dg_op_top;
    dg_op_top = f;
    if (__builtin_expect(__atomic_load_n(&dg_prof_active, __ATOMIC_RELAXED) != 0 || dg_autocast_depth != 0, 0)) dg_op_enter_slow(f);
    f->record = info->kind == DG_OPK_PRIM && dg_needs_record(f->arg, f->n);
    if (info->entries) {
        /* the first input's backend, when it is the one this thread checked last: its mask */
        const dg_tensor *t = f->n ? f->arg[0] : NULL;
        bool known = t && dg_tensor_live(t) && t->storage->backend == dg_op_last_be;
        if (!(known && !(dg_op_last_mask & info->entries)) && !dg_op_entries_ok_slow(f)) f->failed = true;
    }
}

/* y, the op's result (NULL when it failed), handed to the caller's scope; NULL when enter failed
 * or anomaly mode finds a NaN/Inf in y. */
static inline dg_tensor *dg_op_leave(dg_op_frame *f, dg_tensor *y) {
    if (__builtin_expect(!y || f->failed || f->ac_scope || f->t0 || __atomic_load_n(&dg_anomaly_state, __ATOMIC_RELAXED) != 0, 0))
        return dg_op_leave_slow(f, y);
    dg_op_top = f->parent;
    return y;
}
/* For ops that report a status (sort, topk, split): rc, or a failure of enter/anomaly. outs[k]
 * are the op's results (kept in the caller's scope). */
int dg_op_leave_status(dg_op_frame *f, int rc, dg_tensor **outs, int n_outs);

/* The innermost op of this thread (NULL outside every op; declared above), and whether it records a node: the
 * recording decision made once at enter, for the inputs it was entered with. Only the function
 * that computes the entered op asks it; a helper shared by several ops (nll's rows, scatter's
 * block) records on inputs of its own and asks dg_needs_record about them. */
/* the inputs as the caller gave them */
static inline const dg_tensor *const *dg_op_inputs(const dg_op_frame *f) { return f->cast ? f->in : f->arg; }
static inline bool dg_op_records(void) { return dg_op_top && dg_op_top->record; }

/* Record the tape node of the innermost op (its registry name and id; see dg_record). */
DG_NODISCARD dg_node *dg_record_op(dg_op_id op, dg_tensor *out, const dg_tensor *const *in, int n, dg_backward_fn bw);

#endif
