/* eager/internal.h — the structs behind the public handles, shared by eager/ and the backends.
 * Nothing here is part of the public API. */
#ifndef DG_EAGER_INTERNAL_H
#define DG_EAGER_INTERNAL_H

#include <dygraph.h>
#include <dygraph/extension.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sched.h>
#include "half.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dg_backend;

/* Refcounted block of device memory. Views of one storage share it. */
typedef struct dg_storage {
    int refcount;
    dg_device device;
    const struct dg_backend *backend;
    size_t nbytes;
    void *data;
    /* memory the library did not allocate (dg_from_blob): freed by this, not by the backend */
    void (*deleter)(void *data, void *user);
    void *deleter_user;
    bool borrowed;                /* dg_from_blob without a deleter: the caller keeps it */
} dg_storage;

#define DG_MAX_HOOKS 4

/* What a tensor's `magic` holds: DG_TENSOR_LIVE from creation until its last reference goes,
 * then DG_TENSOR_DEAD (with `released_by` saying who let go last), so a freed handle handed to
 * an op or to dg_tensor_free again is recognised instead of read as a tensor. In checked mode
 * (DG_CHECKED=1) the dead struct is also kept out of reuse for a while (eager/tensor.c). */
#define DG_TENSOR_LIVE 0x6474656eu    /* "dten" */
#define DG_TENSOR_DEAD 0x66726565u    /* "free" */
enum { DG_RELEASED_BY_LIBRARY = 0, DG_RELEASED_BY_FREE, DG_RELEASED_BY_SCOPE };

struct dg_tensor {
    uint32_t magic;               /* DG_TENSOR_LIVE / DG_TENSOR_DEAD (first: reuse overwrites it) */
    uint32_t session;             /* dg_session when made: one from before a dg_shutdown is stale */
    uint8_t released_by;          /* DG_RELEASED_BY_*: the last owner's release, for messages */
    uint32_t trace_epoch;         /* the trace running on its thread when it was made (eager/trace.h), else 0 */
    int refcount;                 /* owner (scope or caller) + nodes/aliases that hold it */
    int ndim;
    int64_t shape[DG_MAX_DIMS];
    int64_t stride[DG_MAX_DIMS];  /* in elements */
    int64_t offset;               /* in elements, into storage */
    int64_t numel;
    dg_dtype dtype;
    dg_storage *storage;
    bool requires_grad;
    dg_tensor *grad;              /* owned */
    /* a leaf's gradient rows from a sparse embedding (owned): ids [k] int64 sorted and unique,
     * rows [k, ...]; dg_grad folds them into `grad` (eager/ops/embedding.c) */
    dg_tensor *sparse_ids, *sparse_rows;
    struct dg_node *node;         /* the op that made it (owned reference) */
    struct dg_scope *scope;       /* owning scope, or NULL when the caller owns it */
    int64_t scope_slot;
    int bw_pending;               /* contributions still expected in the running backward */
    int n_hooks;
    dg_grad_hook hooks[DG_MAX_HOOKS];
    void *hook_user[DG_MAX_HOOKS];
};

/* An edge from a node to the producer of one of its inputs. */
typedef struct dg_edge {
    struct dg_node *node;         /* input's producer (owned ref), or NULL */
    dg_tensor *leaf;              /* input itself when it is a leaf that requires grad (owned ref) */
    dg_shape shape;
    dg_dtype dtype;
} dg_edge;

struct dg_node {
    int refcount;
    const char *name;
    int16_t op;                   /* registry id (eager/ops/registry.h), DG_OP_CUSTOM (-1) for dg_record's */
    char *anomaly_where;          /* anomaly mode: the layer the forward op ran in (malloc'd), or NULL */
    dg_backward_fn backward;
    int n_in;
    dg_edge in[DG_MAX_NODE_INPUTS];
    int n_saved;
    dg_tensor *saved[DG_MAX_NODE_SAVED];
    bool released;                /* saved tensors dropped after a backward without retain_graph */
    /* backward walk scratch */
    int deps;
    int visit;
    int bw_edges_counted;         /* edges [0, this) added to their leaves' counts by the walk */
    int bw_edges_done;            /* edges [0, this) delivered (the leaf's count taken back) */
    dg_tensor *grad_acc;
    union { unsigned char bytes[DG_NODE_ATTR_BYTES]; double align_; } attr;
};

/* ---- errors (eager/error.c; the model is described at the top of that file; the functions are
 * declared in dygraph/extension.h) ---- */
#define DG_ERR(status, ...) dg_set_error_at((status), __FILE__, __LINE__, __VA_ARGS__)
/* (DG_PROPAGATE, DG_CHECK, DG_CHECK_INT, DG_CHECK_HANDLE and the error save/restore calls are in
 * dygraph/extension.h, shared with the layers above eager/.) */

/* ---- library session (eager/core.c) ---- */
/* Bumped by dg_shutdown: a tensor whose `session` differs was made before it. */
extern uint32_t dg_session;
/* True from dg_shutdown until the next dg_init: tensors are neither made nor used. */
extern bool dg_shut_down;

/* ---- tensor handles (eager/tensor.c) ---- */
/* A tensor an op may read: not NULL, not freed, made in this session. Two compares, so every
 * op entry can afford it. */
static inline bool dg_tensor_live(const dg_tensor *t) {
    return t && t->magic == DG_TENSOR_LIVE && t->session == dg_session && !dg_shut_down;
}
/* Records why t is not live, naming op and the argument (NULL propagates; a freed, stale or
 * foreign handle, or a call after dg_shutdown, is a new DG_ESTATE failure). Returns the status. */
int dg_tensor_bad(const char *op, const char *arg, const dg_tensor *t);
/* (dg_tensor_check, the same test for callers outside eager/, is in dygraph/extension.h.) */
/* An op's tensor input: NULL keeps the first message and passes NULL on; a freed or stale
 * handle is an error naming the op. */
#define DG_CHECK_INPUT(op, t) do { if (!dg_tensor_live(t)) { dg_tensor_bad((op), #t, (t)); return NULL; } } while (0)
#define DG_CHECK_INPUT_INT(op, t) do { if (!dg_tensor_live(t)) return dg_tensor_bad((op), #t, (t)); } while (0)
/* An optional input (a bias): NULL is fine, anything else must be live. */
#define DG_CHECK_OPT_INPUT(op, t) do { if ((t) && !dg_tensor_live(t)) { dg_tensor_bad((op), #t, (t)); return NULL; } } while (0)
/* Checked mode (DG_CHECKED=1, dg_init_params.checked, dg_set_checked): freed tensor structs are
 * quarantined instead of reused at once. */
extern int dg_checked_mode;   /* -1 until $DG_CHECKED is read */
bool dg_checked(void);
/* Frees the quarantine (dg_shutdown). */
void dg_quarantine_release(void);

/* ---- one element as a double, whatever its dtype: the scalar paths (fill, item, casting copies,
 * mixed-dtype loops); NAN / nothing for a dtype without kernels ---- */
static inline double dg_load_as_double(const void *p, dg_dtype dt) {
    switch (dt) {
    case DG_F32: return *(const float *)p;
    case DG_F64: return *(const double *)p;
    case DG_I64: return (double)*(const int64_t *)p;
    case DG_I32: return *(const int32_t *)p;
    case DG_BOOL: return *(const uint8_t *)p;
    case DG_F16: return dg_f16_to_f32(*(const uint16_t *)p);
    case DG_BF16: return dg_bf16_to_f32(*(const uint16_t *)p);
    default: return __builtin_nan("");
    }
}
static inline void dg_store_from_double(void *p, dg_dtype dt, double v) {
    switch (dt) {
    case DG_F32: *(float *)p = (float)v; break;
    case DG_F64: *(double *)p = v; break;
    case DG_I64: *(int64_t *)p = (int64_t)v; break;
    case DG_I32: *(int32_t *)p = (int32_t)v; break;
    case DG_BOOL: *(uint8_t *)p = v != 0; break;
    case DG_F16: *(uint16_t *)p = dg_f32_to_f16((float)v); break;
    case DG_BF16: *(uint16_t *)p = dg_f32_to_bf16((float)v); break;
    default: break;
    }
}

/* An int64 stored into dt with one rounding, as torch casts: through a double it would round
 * twice (2^53 + 2^29 + 1 to float32 gave 2^53, torch 2^53 + 2^30), and a value outside int32
 * would be an undefined conversion; int32 keeps the low 32 bits, as torch's cast wraps. */
static inline void dg_store_from_i64(void *p, dg_dtype dt, int64_t v) {
    switch (dt) {
    case DG_F32: *(float *)p = (float)v; break;
    case DG_I32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v; break;
    case DG_F16: *(uint16_t *)p = dg_f32_to_f16((float)v); break;
    case DG_BF16: *(uint16_t *)p = dg_f32_to_bf16((float)v); break;
    default: dg_store_from_double(p, dt, (double)v); break;
    }
}

/* ---- dtypes (eager/dtype.c) ---- */
/* dg_dtype_size for the per-call paths (kernel views), inlined: one table load */
static inline size_t dg_dtype_bytes(dg_dtype dt) {
    static const unsigned char bytes[] = { [DG_F32] = 4, [DG_F64] = 8, [DG_I64] = 8, [DG_I32] = 4, [DG_F16] = 2, [DG_BF16] = 2, [DG_BOOL] = 1 };
    return (unsigned)dt < sizeof bytes ? bytes[dt] : 0;
}
/* float16 / bfloat16: stored in 2 bytes, computed in float32 (eager/half.h) */
static inline bool dg_dtype_is_half(dg_dtype dt) { return dt == DG_F16 || dt == DG_BF16; }

/* ---- tensors (eager/tensor.c) ---- */
dg_tensor *dg_tensor_alloc(const int64_t *shape, int ndim, dg_dtype dtype, dg_device device);
dg_tensor *dg_tensor_view(const dg_tensor *base, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset);
void dg_tensor_retain(dg_tensor *t);
void dg_tensor_release(dg_tensor *t);
/* Adds t's sparse gradient rows into its dense gradient and drops them (eager/ops/embedding.c). */
int dg_sparse_grad_fold(dg_tensor *t);
void dg_compute_strides(const int64_t *shape, int ndim, int64_t *stride);
int64_t dg_shape_numel(const int64_t *shape, int ndim);
/* Small-block cache (eager/block_cache.c): 64-byte aligned, freed from any thread. */
void *dg_block_alloc(size_t n);
void dg_block_free(void *p);
/* Blocks above 256 KB (eager/large_blocks.c), behind dg_block_alloc; the CPU's memory stats. */
void *dg_large_alloc(size_t total, size_t *size_out);
void dg_large_free(void *p, size_t size);
int dg_large_stats(dg_memory_stats *out);
int dg_large_release_free(void);
/* dg_shutdown: every thread's cached small blocks go back to the system; the large-block
 * reservation is unmapped when no block of it is live (else its free pages are returned). */
void dg_block_cache_release_all(void);
void dg_large_release_all(void);

/* The backend instance holding t's storage (inline: every kernel call asks it). */
static inline const struct dg_backend *dg_backend_of(const dg_tensor *t) { return t->storage->backend; }
dg_device dg_current_device(void);
char *dg_shape_fmt(const int64_t *shape, int ndim, char *buf, size_t len);
#define DG_SHAPE_STR(t) dg_shape_fmt((t)->shape, (t)->ndim, (char[96]){0}, 96)
int dg_norm_axis(int axis, int ndim);      /* -1 if out of range */
/* Refuse an in-place write that autograd would not see. */
int dg_check_inplace(const dg_tensor *t, const char *op);

/* ---- scopes (eager/scope.c) ---- */
void dg_scope_adopt(dg_tensor *t);         /* register a new tensor with the innermost scope */
void dg_scope_forget(dg_tensor *t);
/* dg_shutdown: ends this thread's open scopes (their tensors are released) and frees its spare
 * slot array. */
void dg_scope_release_thread(void);
extern size_t dg_live_tensor_count;

/* ---- tape (eager/tape.c) ---- */
void dg_node_release(struct dg_node *n);
void dg_grad_mode_reset(void);   /* this thread's no_grad depth back to 0 (dg_shutdown) */
void dg_autocast_pause(int delta);   /* +1 / -1: ops do not autocast while paused (backward) */
void dg_autocast_reset(void);    /* this thread's autocast regions closed (dg_shutdown; eager/ops/autocast.c) */
/* What recompute (eager/recompute.c) needs to run a forward again as it first ran: */
int dg_grad_mode_swap(int depth);  /* sets this thread's no_grad depth, returns the old one */
/* Probing: a forward run without recording (as under no_grad) that notes whether any op would
 * have recorded a node had grad mode been on. begin returns the token end takes back. */
int dg_record_probe_begin(void);
bool dg_record_probe_end(int token); /* true: some op saw an input that needs a gradient */
/* The calling thread's autocast state: the innermost region (its dtype and op policies) and the
 * pause count, copied so that a later forward can run under the same casts. */
/* Adds text to the end of this thread's last error message (eager/error.c). */
void dg_error_append(const char *text);

/* dg_record for a node whose registry id is op (-1: a custom op's) */
dg_node *dg_record_as(int op, const char *name, dg_tensor *out, const dg_tensor *const *in, int n, dg_backward_fn bw);

/* ---- anomaly mode (eager/ops/op_entry.c) ---- */
/* NaN and infinite elements of a float tensor on any device (NaNs in *n_nan); -1 when the check
 * itself failed (it said why) */
int64_t dg_count_nonfinite(const dg_tensor *t, int64_t *n_nan);
/* +1 / -1: ops stop / resume checking their own outputs (a backward rule's ops: the walk checks
 * the rule's gradients as a whole and names the forward op) */
void dg_anomaly_ops_pause(int delta);
/* the innermost layer the calling thread runs in (dg_op_context_push), or "" */
void dg_op_context_describe(char *buf, size_t len);

typedef struct dg_autocast_snapshot { int active; int paused; unsigned char region[64]; } dg_autocast_snapshot;
void dg_autocast_save(dg_autocast_snapshot *s);
/* Runs under s (pushes its region, sets its pause count): the old pause count, or a negative
 * status when the region stack is full; unapply undoes it given what apply returned. */
int dg_autocast_apply(const dg_autocast_snapshot *s);
void dg_autocast_unapply(const dg_autocast_snapshot *s, int old_paused);

/* ---- RNG (eager/rng.c): dg_generator_reserve and dg_philox4x32 are in custom_op.h ---- */
void dg_rng_reset(void);      /* the default generator back to its first seed, counter 0 (dg_shutdown) */
dg_generator *dg_generator_current(void);   /* the calling thread's generator for ops given none */
/* While a log is set on a thread, each generator's first reservation there is noted (the
 * generator, its seed and the counter the reservation started at): where a recomputed forward
 * must put every generator back to draw the same numbers again. */
#define DG_RNG_LOG_MAX 8
typedef struct dg_rng_log {
    int n;
    bool overflow;    /* more generators than DG_RNG_LOG_MAX drew */
    struct { dg_generator *g; uint64_t seed, counter; } e[DG_RNG_LOG_MAX];
} dg_rng_log;
dg_rng_log *dg_rng_log_swap(dg_rng_log *log);   /* sets this thread's log (NULL: none), returns the old */

/* ---- fault injection for tests (eager/cpu/cpu_backend.c) ----
 * The nth tensor allocation the CPU backend makes on the calling thread from now on fails (once;
 * 0 disarms); the count of its allocations so far on this thread. */
void dg_cpu_alloc_fault(int64_t nth);
int64_t dg_cpu_alloc_count(void);

/* ---- threads (eager/threads.c) ---- */
/* dg_set_num_threads, with `who` (a flag, an environment variable) named in the notice a count
 * above 4 per CPU gets when it is cut. */
void dg_set_num_threads_from(int n, const char *who);
/* DG_NUM_THREADS as a count: > 0 named, 0 unset or malformed (a notice on stderr says which) */
int dg_env_num_threads(void);
/* The thread count CPU kernels use now; also sets the calling thread's OpenMP count to it. */
int dg_threads(void);
/* The automatic count for ncpu CPUs while other processes keep `others` CPUs busy. */
int dg_threads_for_load(int ncpu, double others);
/* Busy clock ticks (user, nice, system, irq, softirq, steal) summed over the per-CPU lines of a
 * /proc/stat text for the CPUs in mask (NULL: all); false when no such line was read. */
bool dg_proc_stat_busy(FILE *f, const cpu_set_t *mask, uint64_t *busy, int *ncpu);

/* ---- CPU features (eager/cpu_features.c) ---- */
bool dg_cpu_has_bf16(void);   /* AVX512-BF16 or AMX: what dg_set_cpu_bf16 needs */
void dg_cpu_bf16_reset(void); /* the switch back off (dg_shutdown) */

/* (dg_conv2d_relu_nograd, the fused op for passes without gradients, is in dygraph/extension.h.) */

#ifdef __cplusplus
}
#endif

#endif
