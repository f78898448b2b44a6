/* eager/ops/op_util.h — small helpers shared by op definitions: argument checks that name the
 * op, output allocation on the inputs' device, broadcasting, and reducing a gradient back to
 * the shape of a broadcast input. */
#ifndef DG_OP_UTIL_H
#define DG_OP_UTIL_H

#include "../backend.h"
#include "../trace.h"
#include "op_attrs.h"
#include "op_entry.h"

#define DG_CHECK_FLOAT(op, t) DG_CHECK(dg_dtype_is_float((t)->dtype), \
    "%s: expects a float tensor (float32/float64/float16/bfloat16), got %s for '%s' %s", op, dg_dtype_name((t)->dtype), #t, DG_SHAPE_STR(t))
#define DG_CHECK_SAME_DTYPE(op, a, b) DG_CHECK((a)->dtype == (b)->dtype, \
    "%s: dtype mismatch: '%s' is %s %s, '%s' is %s %s", op, #a, dg_dtype_name((a)->dtype), DG_SHAPE_STR(a), \
    #b, dg_dtype_name((b)->dtype), DG_SHAPE_STR(b))
#define DG_CHECK_SAME_DEVICE(op, a, b) DG_CHECK((a)->storage->device.type == (b)->storage->device.type && \
    (a)->storage->device.index == (b)->storage->device.index, \
    "%s: inputs on different devices: '%s' on %s, '%s' on %s", op, #a, \
    dg_device_name((a)->storage->device, (char[16]){0}, 16), #b, dg_device_name((b)->storage->device, (char[16]){0}, 16))
/* Propagate a backend failure: free the half-made output and return NULL. A kernel that said
 * why keeps its message; one that failed silently gets this one. */
#define DG_TRY_KERNEL(expr, out) do { uint64_t errs_ = dg_error_count(); int rc_ = (expr); if (rc_) { \
        if (!dg_error_since(errs_)) { DG_ERR(rc_, "kernel failed in %s", __func__); } \
        dg_tensor_free(out);                                                      \
        return NULL;                                                              \
    } } while (0)

static inline dg_tensor *dg_new_on(const dg_tensor *like, const int64_t *shape, int ndim, dg_dtype dt) {
    return dg_tensor_alloc(shape, ndim, dt, like->storage->device);
}
/* dg_full / dg_empty on like's device (not the current one: backward runs wherever the
 * forward ran, whatever dg_set_device says by then). */
static inline dg_tensor *dg_full_on(const dg_tensor *like, dg_shape s, double v, dg_dtype dt) {
    dg_tensor *t = dg_tensor_alloc(s.d, s.ndim, dt, like->storage->device);
    if (t && DG_KCALL(t, fill, DG_KV(t), v) != 0) { dg_tensor_free(t); return NULL; }
    return t;
}
static inline dg_tensor *dg_empty_as(const dg_tensor *like, dg_shape s, dg_dtype dt) {
    return dg_tensor_alloc(s.d, s.ndim, dt, like->storage->device);
}
static inline dg_tensor *dg_new_like(const dg_tensor *like) {
    return dg_tensor_alloc(like->shape, like->ndim, like->dtype, like->storage->device);
}

/* t itself when contiguous, else an unrecorded contiguous copy made by the backend; release
 * with dg_dense_free(c, t), which frees only a copy. For kernels that need dense inputs. */
static inline dg_tensor *dg_dense(const dg_tensor *t) {
    if (!t || dg_is_contiguous(t)) return (dg_tensor *)t;
    dg_tensor *c = dg_new_like(t);
    if (c && DG_KCALL(t, copy, DG_KV(t), DG_KV(c)) != 0) { dg_tensor_free(c); c = NULL; }
    return c;
}
static inline void dg_dense_free(dg_tensor *c, const dg_tensor *t) { if (c != t) dg_tensor_free(c); }

/* Broadcast shape of a and b (NumPy rules); false when they do not broadcast. */
bool dg_broadcast_shape(const dg_tensor *a, const dg_tensor *b, int64_t *out, int *ndim);
/* A non-recording view of t with stride 0 on broadcast dims, shaped like `shape`. */
dg_tensor *dg_broadcast_view(const dg_tensor *t, const int64_t *shape, int ndim);
/* Sum g down to `shape` (the inverse of broadcasting), for backward rules. */
dg_tensor *dg_sum_to(const dg_tensor *g, dg_shape shape);
/* Contiguous (a view when it already is). Recorded like any op. */
dg_tensor *dg_contiguous(const dg_tensor *x);

/* Ops built from other ops run inside a scope of their own, so their intermediates die when
 * they return even with no scope open; the result goes to the caller's scope, or to the caller.
 *   dg_scope *s = dg_scope_begin(); ... return dg_composite_end(s, y); */
static inline dg_tensor *dg_composite_end(dg_scope *s, dg_tensor *y) {
    if (!s) return y;
    if (y) y = dg_keep_in_parent(y);
    dg_scope_end(s);
    return y;
}

/* ---- autocast (eager/ops/autocast.c), called by the entry path (op_entry.c) ----
 * the dtype registry op `op` must run in, or -1: no region, paused, the op follows its inputs,
 * or they are there already */
int dg_autocast_pick(int op, const dg_tensor *const *in, int n);
/* regions open on this thread (no region: no op is cast, so the entry path does not ask) */
extern __thread int dg_autocast_depth;
const dg_tensor *dg_autocast_cast(const dg_tensor *t, int dtype);
dg_scope *dg_autocast_enter(void);
dg_tensor *dg_autocast_leave(dg_scope *s, dg_tensor *y);

#endif
