/* eager/internal.h — the structs behind the public handles, shared by eager/ and the backends.
 * Nothing here is part of the public API. */
#ifndef DG_EAGER_INTERNAL_H
#define DG_EAGER_INTERNAL_H

#include <dygraph.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sched.h>

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
} dg_storage;

#define DG_MAX_HOOKS 4

struct dg_tensor {
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
    dg_backward_fn backward;
    int n_in;
    dg_edge in[DG_MAX_NODE_INPUTS];
    int n_saved;
    dg_tensor *saved[DG_MAX_NODE_SAVED];
    bool released;                /* saved tensors dropped after a backward without retain_graph */
    /* backward walk scratch */
    int deps;
    int visit;
    dg_tensor *grad_acc;
    union { unsigned char bytes[DG_NODE_ATTR_BYTES]; double align_; } attr;
};

/* ---- errors (eager/error.c) ---- */
void dg_set_error_at(int status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool dg_has_error(void);
/* Splits the trailing " (file:line)" off a message (in place), for re-raising it with more
 * context and one location; false when there is none. */
bool dg_error_split_location(char *msg, const char **file, int *line);
#define DG_ERR(status, ...) dg_set_error_at((status), __FILE__, __LINE__, __VA_ARGS__)
/* Fail the current function with NULL and a message unless cond holds. */
#define DG_CHECK(cond, ...) do { if (!(cond)) { DG_ERR(DG_EINVAL, __VA_ARGS__); return NULL; } } while (0)
#define DG_CHECK_INT(cond, ...) do { if (!(cond)) { DG_ERR(DG_EINVAL, __VA_ARGS__); return DG_EINVAL; } } while (0)
/* An op handed NULL keeps the first message and passes NULL on. */
#define DG_CHECK_INPUT(op, t) do { if (!(t)) { if (!dg_has_error()) DG_ERR(DG_EINVAL, "%s: input '%s' is NULL", op, #t); return NULL; } } while (0)

/* ---- tensors (eager/tensor.c) ---- */
dg_tensor *dg_tensor_alloc(const int64_t *shape, int ndim, dg_dtype dtype, dg_device device);
dg_tensor *dg_tensor_view(const dg_tensor *base, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset);
void dg_tensor_retain(dg_tensor *t);
void dg_tensor_release(dg_tensor *t);
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

void *dg_tensor_ptr(const dg_tensor *t);   /* storage data + offset, host address space of its backend */
const struct dg_backend *dg_backend_of(const dg_tensor *t);
dg_device dg_current_device(void);
char *dg_shape_fmt(const int64_t *shape, int ndim, char *buf, size_t len);
#define DG_SHAPE_STR(t) dg_shape_fmt((t)->shape, (t)->ndim, (char[96]){0}, 96)
int dg_norm_axis(int axis, int ndim);      /* -1 if out of range */
/* Refuse an in-place write that autograd would not see. */
int dg_check_inplace(const dg_tensor *t, const char *op);

/* ---- scopes (eager/scope.c) ---- */
void dg_scope_adopt(dg_tensor *t);         /* register a new tensor with the innermost scope */
void dg_scope_forget(dg_tensor *t);
extern size_t dg_live_tensor_count;

/* ---- tape (eager/tape.c) ---- */
void dg_node_release(struct dg_node *n);

/* ---- RNG (eager/rng.c): dg_generator_reserve and dg_philox4x32 are in custom_op.h ---- */

/* ---- threads (eager/core.c) ---- */
/* The thread count CPU kernels use now; also sets the calling thread's OpenMP count to it. */
int dg_threads(void);
/* The automatic count for ncpu CPUs while other processes keep `others` CPUs busy. */
int dg_threads_for_load(int ncpu, double others);
/* Busy clock ticks (user, nice, system, irq, softirq, steal) summed over the per-CPU lines of a
 * /proc/stat text for the CPUs in mask (NULL: all); false when no such line was read. */
bool dg_proc_stat_busy(FILE *f, const cpu_set_t *mask, uint64_t *busy, int *ncpu);

/* ---- CPU features (eager/cpu/conv_dnnl.c) ---- */
bool dg_cpu_has_bf16(void);   /* AVX512-BF16 or AMX: what dg_set_cpu_bf16 needs */

/* ---- fused ops for passes without gradients (eager/ops/) ---- */
/* relu(conv2d(x, w, b)) in one pass; an error when any input would record a gradient. */
dg_tensor *dg_conv2d_relu_nograd(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p);

#ifdef __cplusplus
}
#endif

#endif
