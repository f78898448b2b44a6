/* eager/ops/op_entry.c — the registry's table (built from registry.h's one list) and the entry
 * path every built-in op passes through (op_entry.h): autocast's casts, the recording decision,
 * the backend's entries, the profiler range and anomaly mode's checks, in one place. */
#include "op_util.h"
#include "op_entry.h"
#include "../profiler.h"
#include <math.h>
#include <pthread.h>

#define DG_BE_BIT(entry) (UINT64_C(1) << DG_BE_##entry)
_Static_assert(DG_BE_COUNT <= 64, "registry.h keeps an op's backend entries in a 64-bit mask");

/* The entries backend be lacks, as a mask. Presence only: which dtype reaches a kernel is the
 * op's choice (integers promoted, halves widened), so the kernel, not the entry path, refuses a
 * dtype it does not take (naming it), as the backend's `supports` declares. */
static uint64_t backend_lacks(const dg_backend *be) {
    uint64_t m = 0;
    for (int e = 0; e < DG_BE_COUNT; e++)
        if (!dg_backend_has(be, (dg_be_entry)e)) m |= UINT64_C(1) << e;
    return m;
}

/* registry columns -> values */
#define NONE DG_AC_NONE
#define FOLLOW DG_AC_FOLLOW
#define WHITE DG_AC_WHITE
#define BLACK DG_AC_BLACK
#define PRIM DG_OPK_PRIM
#define COMPOSITE DG_OPK_COMPOSITE
#define PART DG_OPK_PART
#define ONNX(fn) DG_ONNX_MAPPED
#define PARTS DG_ONNX_PARTS
#define NO_ONNX DG_ONNX_NONE
#define BE(entry) DG_BE_BIT(entry)

const dg_op_info dg_op_table[DG_OP_COUNT] = {
#define DG_OP_ROW_(ID, nm, attr, ac, kd, ox, be) \
    [DG_OP_##ID] = { .name = nm, .attr_bytes = sizeof(attr), .autocast = ac, .kind = kd, .onnx = ox, .entries = (be) },
    DG_OPS(DG_OP_ROW_)
#undef DG_OP_ROW_
};

/* every attribute type fits where it is kept: a primitive's node, a composite's trace record */
#define DG_OP_FITS_(ID, nm, attr, ac, kd, ox, be) \
    _Static_assert(sizeof(attr) <= ((kd) == PRIM ? DG_NODE_ATTR_BYTES : DG_TRACE_ATTR_BYTES), \
                   "attributes of op " nm " do not fit its node (DG_NODE_ATTR_BYTES) or trace record (DG_TRACE_ATTR_BYTES)");
DG_OPS(DG_OP_FITS_)
#undef DG_OP_FITS_
/* every row of the table was filled: a row with no name would be an op the list lost */
_Static_assert(sizeof dg_op_table / sizeof *dg_op_table == DG_OP_COUNT, "registry table and op count differ");

int dg_op_find(const char *name) {
    if (!name) return -1;
    for (int k = 0; k < DG_OP_COUNT; k++) if (strcmp(name, dg_op_table[k].name) == 0) return k;
    return -1;
}

_Thread_local dg_op_frame *dg_op_top;
_Thread_local uint32_t dg_op_seen_count[DG_OP_COUNT];
_Thread_local uint32_t dg_op_recorded_count[DG_OP_COUNT];
_Thread_local const struct dg_backend *dg_op_last_be;
_Thread_local uint64_t dg_op_last_mask;

/* ---- anomaly mode (dygraph/autograd.h) ---- */
int dg_anomaly_state = -1;            /* -1: DG_ANOMALY not read yet; op_entry.h reads it */
#define g_anomaly dg_anomaly_state
/* the entry path's test: one load while anomaly mode is off */
static inline bool anomaly_on(void) {
    int a = __atomic_load_n(&g_anomaly, __ATOMIC_RELAXED);
    return a > 0 || (a < 0 && dg_anomaly_enabled());
}
static _Thread_local int t_checking;  /* > 0 while a check runs its own ops */

typedef struct { void (*describe)(const void *, char *, size_t); const void *obj; } ctx_frame;
#define MAX_CTX 64
static _Thread_local ctx_frame t_ctx[MAX_CTX];
static _Thread_local int t_nctx;

void dg_anomaly_ops_pause(int delta) { t_checking += delta; }

void dg_set_anomaly(bool on) { __atomic_store_n(&g_anomaly, on ? 1 : 0, __ATOMIC_RELAXED); }
bool dg_anomaly_enabled(void) {
    int a = __atomic_load_n(&g_anomaly, __ATOMIC_RELAXED);
    if (a < 0) {
        const char *e = getenv("DG_ANOMALY");
        a = e && *e && strcmp(e, "0") != 0;
        __atomic_store_n(&g_anomaly, a, __ATOMIC_RELAXED);
    }
    return a > 0;
}

void dg_op_context_push(void (*describe)(const void *obj, char *buf, size_t len), const void *obj) {
    if (t_nctx < MAX_CTX) t_ctx[t_nctx] = (ctx_frame){ describe, obj };
    t_nctx++;
}
void dg_op_context_pop(void) { if (t_nctx > 0) t_nctx--; }

/* "Linear 'fc1' (...)": the innermost layer (its full name carries its parents), or "" */
void dg_op_context_describe(char *buf, size_t len) {
    buf[0] = 0;
    int k = t_nctx < MAX_CTX ? t_nctx : MAX_CTX;
    if (k > 0 && t_ctx[k - 1].describe) t_ctx[k - 1].describe(t_ctx[k - 1].obj, buf, len);
}

/* The number of NaN and infinite elements of a float tensor (any device, any strides), or -1
 * when the check itself failed. */
int64_t dg_count_nonfinite(const dg_tensor *t, int64_t *n_nan) {
    *n_nan = 0;
    if (!dg_tensor_live(t) || !dg_dtype_is_float(t->dtype) || t->numel == 0) return 0;
    t_checking++;
    dg_no_grad_begin();
    dg_scope *s = dg_scope_begin();
    dg_tensor *h = dg_to_device(t, dg_cpu());
    dg_tensor *d = h && h->dtype != DG_F64 ? dg_cast(h, DG_F64) : h;
    d = d ? dg_contiguous(d) : NULL;
    int64_t bad = -1;
    if (d) {
        const double *p = dg_tensor_ptr(d);
        bad = 0;
        for (int64_t i = 0; i < d->numel; i++)
            if (!isfinite(p[i])) { bad++; if (isnan(p[i])) (*n_nan)++; }
    }
    dg_scope_end(s);
    dg_no_grad_end();
    t_checking--;
    return bad;
}

static void shapes_of(const dg_tensor *const *in, int n, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o + 1 < len; i++) {
        char s[96];
        if (!in[i]) snprintf(s, sizeof s, "none");
        else snprintf(s, sizeof s, "%s %s", dg_dtype_name(in[i]->dtype), DG_SHAPE_STR(in[i]));
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", s);
    }
}

/* anomaly mode: y must be finite; otherwise an error naming the op, its inputs and the layer */
static bool anomaly_ok(const dg_op_frame *f, const dg_tensor *y) {
    int64_t nan;
    int64_t bad = dg_count_nonfinite(y, &nan);
    if (bad == 0) return true;
    if (bad < 0) return false;   /* the check said why */
    char ins[384], where[320];
    shapes_of(dg_op_inputs(f), f->n, ins, sizeof ins);
    dg_op_context_describe(where, sizeof where);
    DG_ERR(DG_EINVAL, "anomaly: op '%s' made %lld NaN and %lld infinite values in its output %s %s (inputs: %s)%s%s",
           dg_op_name(f->op), (long long)nan, (long long)(bad - nan), dg_dtype_name(y->dtype), DG_SHAPE_STR(y), ins,
           where[0] ? ", called from " : ", called outside any layer", where);
    return false;
}

/* backend_lacks, computed once per instance (its table is fixed once it is handed out) */
static uint64_t missing_entries(const dg_backend *be) {
    enum { N = 64 };
    static struct { const dg_backend *be; uint64_t mask; } seen[N];
    static int n_seen;
    int k = __atomic_load_n(&n_seen, __ATOMIC_ACQUIRE);
    for (int i = 0; i < k; i++)
        if (seen[i].be == be) return seen[i].mask;
    uint64_t m = backend_lacks(be);
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    int j = n_seen;
    if (j < N) {
        seen[j].be = be;
        seen[j].mask = m;
        __atomic_store_n(&n_seen, j + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mu);
    return m;
}

static bool entries_ok(dg_op_frame *f) {
    uint64_t need = dg_op_table[f->op].entries;
    const dg_tensor *t = NULL;
    for (int i = 0; i < f->n && !t; i++) if (dg_tensor_live(f->arg[i])) t = f->arg[i];
    if (!need || !t) return true;   /* nothing to check, or the op reports its bad input itself */
    const dg_backend *be = dg_backend_of(t);
    if (be != dg_op_last_be) { dg_op_last_mask = missing_entries(be); dg_op_last_be = be; }
    uint64_t lack = dg_op_last_mask & need;
    if (!lack) return true;
    dg_be_entry e = (dg_be_entry)__builtin_ctzll(lack);
    if (dg_backend_require(dg_backend_of(t), &e, 1, t->dtype, dg_op_name(f->op)) == 0)   /* it says why */
        DG_ERR(DG_EUNSUPPORTED, "%s: backend %s lacks entry '%s'", dg_op_name(f->op), dg_backend_of(t)->name, dg_backend_entry_name(e));
    return false;
}

/* enter's rare work: the profiler range and autocast's casts */
void dg_op_enter_slow(dg_op_frame *f) {
    if (dg_profiling()) f->t0 = dg_prof_op_begin(f->arg, f->n);   /* with device time where a GPU runs the op */
    if (dg_autocast_depth && dg_op_table[f->op].autocast != DG_AC_NONE) {
        int dt = dg_autocast_pick(f->op, f->arg, f->n);
        if (dt >= 0) {
            f->ac_scope = dg_autocast_enter();
            for (int i = 0; i < f->n; i++) f->in[i] = f->arg[i];   /* the caller's, kept for messages and the profiler */
            f->cast = true;
            for (int i = 0; i < f->n; i++) f->arg[i] = dg_autocast_cast(f->in[i], dt);
        }
    }
}

/* The input's backend lacks an entry the op calls (the per-thread cache in op_entry.h said so,
 * or has not seen this backend yet): fail with the entry named, or refresh the cache. */
bool dg_op_entries_ok_slow(dg_op_frame *f) {
    return entries_ok(f);
}

/* An op called by a layer's forward failed: its message gets the layer, so "matmul: dtype
 * mismatch" says which Linear it was. Only the outermost op adds it (an op inside a composite
 * fails inside its caller's frame). */
static void name_the_layer(const dg_op_frame *f) {
    if (f->parent || t_nctx == 0 || !dg_has_error() || strstr(dg_last_error(), " [in ")) return;   /* named once */
    char where[320], text[340];
    dg_op_context_describe(where, sizeof where);
    if (!where[0] || strstr(dg_last_error(), where)) return;   /* anomaly mode's message names it already */
    snprintf(text, sizeof text, " [in %s]", where);
    dg_error_append(text);
}

/* closes what enter opened; y is the op's result, already checked */
static dg_tensor *leave(dg_op_frame *f, dg_tensor *y) {
    if (!y) name_the_layer(f);
    dg_op_top = f->parent;
    if (f->ac_scope) y = dg_autocast_leave(f->ac_scope, y);
    if (f->t0) dg_prof_op(dg_op_name(f->op), DG_PROF_FORWARD, f->t0, dg_op_inputs(f), f->n, y);
    return y;
}

dg_tensor *dg_op_leave_slow(dg_op_frame *f, dg_tensor *y) {
    if (f->failed && y) { dg_tensor_free(y); y = NULL; }
    if (y && anomaly_on() && !t_checking && !anomaly_ok(f, y)) { dg_tensor_free(y); y = NULL; }
    return leave(f, y);
}

int dg_op_leave_status(dg_op_frame *f, int rc, dg_tensor **outs, int n_outs) {
    if (f->failed && !rc) rc = dg_last_status() ? dg_last_status() : DG_EUNSUPPORTED;
    for (int k = 0; k < n_outs && !rc; k++)
        if (outs[k] && anomaly_on() && !t_checking && !anomaly_ok(f, outs[k])) rc = dg_last_status();
    if (rc) for (int k = 0; k < n_outs; k++) { dg_tensor_free(outs[k]); outs[k] = NULL; }
    if (rc) name_the_layer(f);
    dg_op_top = f->parent;
    if (f->ac_scope) {   /* keep every output, not just one, out of the cast scope */
        for (int k = 0; k < n_outs; k++) if (outs[k]) outs[k] = dg_keep_in_parent(outs[k]);
        dg_autocast_leave(f->ac_scope, NULL);
    }
    if (f->t0) dg_prof_op(dg_op_name(f->op), DG_PROF_FORWARD, f->t0, dg_op_inputs(f), f->n, n_outs ? outs[0] : NULL);
    return rc;
}

/* eager/tape.c's record with the registry's name and id */
dg_node *dg_record_op(dg_op_id op, dg_tensor *out, const dg_tensor *const *in, int n, dg_backward_fn bw) {
    dg_node *node = dg_record_as(op, dg_op_name(op), out, in, n, bw);
    if (node) dg_op_recorded_count[op]++;
    return node;
}
