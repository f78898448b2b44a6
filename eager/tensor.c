/* eager/tensor.c — tensor and storage lifetime, views, creation, inspection and host copies;
 * the validation every op entry runs on its tensor handles, and checked mode's quarantine.
 *
 * Handles: a tensor is DG_TENSOR_LIVE from creation until its last reference goes; then its
 * struct is marked DG_TENSOR_DEAD and returned to the block cache. The mark costs one store and
 * the check at each op entry two compares, so both are always on: a freed handle used again is
 * reported as long as its memory has not been reused. Checked mode closes that gap: dead
 * structs wait in a quarantine of QUARANTINE entries (oldest reused first) instead of going
 * straight back, so a use after free, a double free or a use after the scope ended is an error
 * naming the op for the next QUARANTINE frees. The quarantine holds only the 64 + ~300 byte
 * structs, never tensor data, and is emptied by dg_shutdown. */
#include "backend.h"
#include "profiler.h"
#include "trace.h"
#include "ops/op_entry.h"
#include <math.h>
#include <pthread.h>

size_t dg_live_tensor_count = 0;


dg_shape dg_make_shape(int ndim, const int64_t *dims) {
    dg_shape s = { .ndim = ndim };
    for (int i = 0; i < ndim && i < DG_MAX_DIMS; i++) s.d[i] = dims[i];
    return s;
}

void dg_compute_strides(const int64_t *shape, int ndim, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) { stride[i] = s; s *= shape[i]; }
}
int64_t dg_shape_numel(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}
char *dg_shape_fmt(const int64_t *shape, int ndim, char *buf, size_t len) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}
char *dg_shape_str(const dg_tensor *t, char *buf, size_t len) {
    /* text for messages: a bad handle is named, not reported (the message being built will be) */
    if (!t) { snprintf(buf, len, "(null)"); return buf; }
    if (!dg_tensor_live(t)) { snprintf(buf, len, "(not a live tensor)"); return buf; }
    return dg_shape_fmt(t->shape, t->ndim, buf, len);
}
int dg_norm_axis(int axis, int ndim) {
    if (axis < 0) axis += ndim;
    return (axis < 0 || axis >= (ndim ? ndim : 1)) ? -1 : axis;
}

static dg_tensor *tensor_struct(void) {
    dg_tensor *t = dg_block_alloc(sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->magic = DG_TENSOR_LIVE;
    t->session = dg_session;
    t->refcount = 1;
    if (dg_trace_active) t->trace_epoch = dg_trace_active->epoch;
    __atomic_add_fetch(&dg_live_tensor_count, 1, __ATOMIC_RELAXED);
    return t;
}

/* ---- checked mode: dead structs wait here before the block cache may hand them out again ---- */
#define QUARANTINE 16384   /* × ~384 bytes: 6 MB at most */
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static dg_tensor **q_ring;          /* q_ring[q_next] is the oldest entry once the ring is full */
static size_t q_next;

static void struct_free(dg_tensor *t) {
    if (!dg_checked() || dg_shut_down) { dg_block_free(t); return; }
    dg_tensor *oldest = t;
    pthread_mutex_lock(&q_lock);
    if (!q_ring) q_ring = calloc(QUARANTINE, sizeof *q_ring);
    if (q_ring) {
        oldest = q_ring[q_next];
        q_ring[q_next] = t;
        q_next = (q_next + 1) % QUARANTINE;
    }
    pthread_mutex_unlock(&q_lock);
    dg_block_free(oldest);
}

void dg_quarantine_release(void) {
    pthread_mutex_lock(&q_lock);
    dg_tensor **ring = q_ring;
    q_ring = NULL;
    q_next = 0;
    pthread_mutex_unlock(&q_lock);
    if (!ring) return;
    for (size_t i = 0; i < QUARANTINE; i++) dg_block_free(ring[i]);
    free(ring);
}

static const char *released_how(const dg_tensor *t) {
    switch (t->released_by) {
    case DG_RELEASED_BY_FREE: return "by dg_tensor_free";
    case DG_RELEASED_BY_SCOPE: return "when its scope ended";
    default: return "when the last reference the library held (the tape, a layer, an optimizer) went";
    }
}

int dg_tensor_check(const char *op, const char *arg, const dg_tensor *t) {
    return dg_tensor_live(t) ? 0 : dg_tensor_bad(op, arg, t);
}

int dg_tensor_bad(const char *op, const char *arg, const dg_tensor *t) {
    if (!t) {
        DG_PROPAGATE(DG_EINVAL, "%s: input '%s' is NULL", op, arg);
        return DG_EINVAL;
    }
    if (t->magic == DG_TENSOR_DEAD) {
        DG_ERR(DG_ESTATE, "%s: tensor %p ('%s') was freed (%s)", op, (const void *)t, arg, released_how(t));
    } else if (dg_shut_down) {
        DG_ERR(DG_ESTATE, "%s: called after dg_shutdown; call dg_init first", op);
    } else if (t->magic == DG_TENSOR_LIVE) {
        DG_ERR(DG_ESTATE, "%s: tensor %p ('%s') was made before dg_shutdown; tensors do not outlive it", op,
               (const void *)t, arg);
    } else {
        DG_ERR(DG_ESTATE, "%s: '%s' (%p) is not a live tensor: freed and its memory reused, or not a tensor "
               "(DG_CHECKED=1 keeps freed tensors recognisable)", op, arg, (const void *)t);
    }
    return DG_ESTATE;
}

dg_tensor *dg_tensor_alloc(const int64_t *shape, int ndim, dg_dtype dtype, dg_device device) {
    if (dg_shut_down) { DG_ERR(DG_ESTATE, "dygraph: called after dg_shutdown; call dg_init first"); return NULL; }
    dg_prof_env_once();   /* DG_PROFILE starts at the first use of the library, with or without dg_init */
    if (ndim < 0 || ndim > DG_MAX_DIMS) { DG_ERR(DG_EINVAL, "tensor: %d dims (at most %d)", ndim, DG_MAX_DIMS); return NULL; }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) { DG_ERR(DG_EINVAL, "tensor: negative dim %lld at axis %d", (long long)shape[i], i); return NULL; }
    if (dg_dtype_bytes(dtype) == 0) { DG_ERR(DG_EINVAL, "tensor: invalid dtype %d", (int)dtype); return NULL; }
    /* one count for both failures below: a message recorded after it comes from the lookup or,
     * the lookup having succeeded, from the allocator */
    uint64_t errs = dg_error_count();
    /* every op's output comes here: the CPU's instance without the registry's call */
    const dg_backend *be = device.type == DG_CPU ? &dg_cpu_backend : dg_backend_for(device);
    if (!be) {   /* the backend lookup usually says why (no GPU, too few GPUs): keep that */
        if (!dg_error_since(errs)) DG_ERR(DG_EDEVICE, "tensor: no backend for device type %d", (int)device.type);
        return NULL;
    }
    /* every op makes its output here first: the point where the calling thread's OpenMP count
     * follows the current thread setting (and the automatic one looks at the load) */
    if (device.type == DG_CPU) dg_threads();
    int64_t numel = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) overflow |= __builtin_mul_overflow(numel, shape[i], &numel);
    if (overflow || numel > INT64_MAX / 16) {   /* 16: the widest dtype's size, with room */
        DG_ERR(DG_EINVAL, "tensor: %s has more elements than memory can hold", dg_shape_fmt(shape, ndim, (char[96]){0}, 96));
        return NULL;
    }
    size_t nbytes = (size_t)numel * dg_dtype_bytes(dtype);
    dg_storage *st = dg_block_alloc(sizeof *st);
    void *data = be->alloc(be, nbytes ? nbytes : 1);
    dg_tensor *t = st && data ? tensor_struct() : NULL;
    if (!t) {
        dg_block_free(st);
        if (data) be->free(be, data);
        /* a device allocator says more (what is allocated and cached): keep its message */
        if (data || !dg_error_since(errs))
            DG_ERR(DG_ENOMEM, "tensor: out of memory allocating %zu bytes", nbytes);
        return NULL;
    }
    memset(st, 0, sizeof *st);
    st->refcount = 1; st->device = device; st->backend = be; st->nbytes = nbytes; st->data = data;
    t->storage = st;
    t->ndim = ndim;
    t->dtype = dtype;
    t->numel = numel;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    dg_compute_strides(shape, ndim, t->stride);
    dg_scope_adopt(t);
    return t;
}

dg_tensor *dg_tensor_view(const dg_tensor *base, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset) {
    dg_tensor *t = tensor_struct();
    if (!t) { DG_ERR(DG_ENOMEM, "view: out of memory"); return NULL; }
    t->storage = base->storage;
    __atomic_add_fetch(&base->storage->refcount, 1, __ATOMIC_RELAXED);
    t->ndim = ndim;
    t->dtype = base->dtype;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(t->stride, stride, sizeof(int64_t) * (size_t)ndim);
    t->offset = offset;
    t->numel = dg_shape_numel(shape, ndim);
    dg_scope_adopt(t);
    return t;
}

void dg_tensor_retain(dg_tensor *t) { if (t) __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED); }

static void storage_release(dg_storage *st) {
    if (__atomic_sub_fetch(&st->refcount, 1, __ATOMIC_ACQ_REL) == 0) {
        if (st->deleter) st->deleter(st->data, st->deleter_user);
        else if (!st->borrowed) st->backend->free(st->backend, st->data);
        dg_block_free(st);
    }
}

void dg_tensor_release(dg_tensor *t) {
    if (!t) return;
    if (t->magic != DG_TENSOR_LIVE) {
        /* a reference the library held outlived the tensor: a dg_tensor_free too many freed it
         * while the tape or a container still pointed at it */
        DG_ERR(DG_ESTATE, "tensor %p was released after it was freed (%s): was it freed once too often?",
               (const void *)t, released_how(t));
        return;
    }
    if (__atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    storage_release(t->storage);
    dg_tensor_release(t->grad);       /* grads carry no node: no deep recursion */
    dg_tensor_release(t->sparse_ids);
    dg_tensor_release(t->sparse_rows);
    if (t->node) dg_node_release(t->node);
    __atomic_sub_fetch(&dg_live_tensor_count, 1, __ATOMIC_RELAXED);
    t->magic = DG_TENSOR_DEAD;
    struct_free(t);
}

void dg_tensor_free(dg_tensor *t) {
    if (!t) return;
    /* a tensor of an ended session may still be freed: that is how a program cleans up */
    if (t->magic != DG_TENSOR_LIVE) { dg_tensor_bad("tensor_free", "t", t); return; }
    if (t->scope) dg_scope_forget(t);
    t->released_by = DG_RELEASED_BY_FREE;
    dg_tensor_release(t);
}
dg_tensor *dg_tensor_ref(dg_tensor *t) {
    if (!t) return NULL;
    DG_CHECK_INPUT("tensor_ref", t);
    dg_tensor_retain(t);
    return t;
}
dg_tensor *dg_advance(dg_tensor *prev, dg_tensor *next) {
    if (prev != next) dg_tensor_free(prev);
    return next;
}
size_t dg_live_tensors(void) { return __atomic_load_n(&dg_live_tensor_count, __ATOMIC_RELAXED); }

dg_tensor *dg_from_blob(void *data, dg_shape shape, dg_dtype dtype, dg_device device,
                        void (*deleter)(void *data, void *user), void *user) {
    DG_CHECK(data || dg_shape_numel(shape.d, shape.ndim) == 0, "from_blob: data is NULL");
    DG_CHECK(shape.ndim >= 0 && shape.ndim <= DG_MAX_DIMS, "from_blob: %d dims (at most %d)", shape.ndim, DG_MAX_DIMS);
    for (int i = 0; i < shape.ndim; i++)
        DG_CHECK(shape.d[i] >= 0, "from_blob: negative dim %lld at axis %d", (long long)shape.d[i], i);
    DG_CHECK(dg_dtype_bytes(dtype) != 0, "from_blob: invalid dtype %d", (int)dtype);
    const dg_backend *be = dg_backend_for(device);
    if (!be) return NULL;
    dg_storage *st = dg_block_alloc(sizeof *st);
    dg_tensor *t = st ? tensor_struct() : NULL;
    if (!t) { dg_block_free(st); DG_ERR(DG_ENOMEM, "from_blob: out of memory"); return NULL; }
    memset(st, 0, sizeof *st);
    st->refcount = 1; st->device = device; st->backend = be; st->data = data;
    st->nbytes = (size_t)dg_shape_numel(shape.d, shape.ndim) * dg_dtype_bytes(dtype);
    st->deleter = deleter; st->deleter_user = user; st->borrowed = deleter == NULL;
    t->storage = st;
    t->ndim = shape.ndim;
    t->dtype = dtype;
    t->numel = dg_shape_numel(shape.d, shape.ndim);
    memcpy(t->shape, shape.d, sizeof(int64_t) * (size_t)shape.ndim);
    dg_compute_strides(t->shape, t->ndim, t->stride);
    dg_scope_adopt(t);
    return t;
}

int dg_tensor_swap_data(dg_tensor *a, dg_tensor *b) {
    DG_CHECK_INPUT_INT("tensor_swap_data", a);
    DG_CHECK_INPUT_INT("tensor_swap_data", b);
    DG_CHECK_INT(a->dtype == b->dtype && a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim),
                 "tensor_swap_data: %s %s and %s %s differ", DG_SHAPE_STR(a), dg_dtype_name(a->dtype), DG_SHAPE_STR(b),
                 dg_dtype_name(b->dtype));
    dg_storage *st = a->storage;
    a->storage = b->storage;
    b->storage = st;
    int64_t off = a->offset;
    a->offset = b->offset;
    b->offset = off;
    for (int k = 0; k < a->ndim; k++) {
        int64_t s = a->stride[k];
        a->stride[k] = b->stride[k];
        b->stride[k] = s;
    }
    return 0;
}

int dg_tensor_cast_(dg_tensor *t, dg_dtype dt) {
    DG_CHECK_INPUT_INT("tensor_cast_", t);
    DG_CHECK_INT(dg_dtype_bytes(dt), "tensor_cast_: invalid dtype %d", (int)dt);
    DG_CHECK_INT(!t->node, "tensor_cast_: %s %s was made by an op; only leaves (parameters, buffers) change dtype in place",
                 DG_SHAPE_STR(t), dg_dtype_name(t->dtype));
    if (t->dtype == dt) return 0;
    DG_CHECK_INT(!t->requires_grad || dg_dtype_is_float(dt), "tensor_cast_: %s requires grad; %s cannot hold a gradient",
                 DG_SHAPE_STR(t), dg_dtype_name(dt));
    dg_no_grad_begin();
    dg_tensor *c = dg_cast(t, dt);
    dg_no_grad_end();
    if (!c) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    /* t takes the copy's storage, layout and dtype; the copy leaves with the old storage */
    dg_storage *st = t->storage;
    t->storage = c->storage;
    c->storage = st;
    c->dtype = t->dtype;
    t->dtype = dt;
    t->offset = c->offset;
    memcpy(t->stride, c->stride, sizeof t->stride);
    dg_tensor_free(c);
    dg_clear_grad(t);   /* of the old dtype */
    return 0;
}

int64_t dg_stride(const dg_tensor *t, int axis) {
    if (!t) { if (!dg_has_error()) DG_ERR(DG_EINVAL, "stride: tensor is NULL"); return 0; }
    int a = dg_norm_axis(axis, t->ndim);
    if (a < 0) { DG_ERR(DG_EINVAL, "stride: axis %d out of range for %d dims", axis, t->ndim); return 0; }
    return t->stride[a];
}

void *dg_tensor_ptr(const dg_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)dg_dtype_bytes(t->dtype);
}

/* ---- inspection ----
 * NULL gives the documented "none" value without a message, as it always has; a freed or stale
 * handle gives the same value and an error naming the function. */
static bool inspectable(const dg_tensor *t, const char *fn) {
    if (dg_tensor_live(t)) return true;
    if (t) dg_tensor_bad(fn, "t", t);
    return false;
}
int dg_ndim(const dg_tensor *t) { return inspectable(t, "ndim") ? t->ndim : -1; }
int64_t dg_dim(const dg_tensor *t, int axis) {
    if (!inspectable(t, "dim")) return -1;
    int a = dg_norm_axis(axis, t->ndim);
    if (a < 0 || t->ndim == 0) {
        DG_ERR(DG_EINVAL, "dim: axis %d out of range for %s (%d dims)", axis, DG_SHAPE_STR(t), t->ndim);
        return -1;
    }
    return t->shape[a];
}
dg_shape dg_shape_of(const dg_tensor *t) {
    dg_shape s = {0};
    if (inspectable(t, "shape_of")) { s.ndim = t->ndim; memcpy(s.d, t->shape, sizeof(int64_t) * (size_t)t->ndim); }
    return s;
}
int64_t dg_numel(const dg_tensor *t) { return inspectable(t, "numel") ? t->numel : -1; }
dg_dtype dg_dtype_of(const dg_tensor *t) { return inspectable(t, "dtype_of") ? t->dtype : DG_F32; }
dg_device dg_device_of(const dg_tensor *t) { return inspectable(t, "device_of") ? t->storage->device : dg_cpu(); }
bool dg_is_contiguous(const dg_tensor *t) {
    if (!inspectable(t, "is_contiguous")) return false;
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}
void *dg_data(const dg_tensor *t) {
    if (!inspectable(t, "data") || t->storage->device.type != DG_CPU) return NULL;
    return dg_tensor_ptr(t);
}

int dg_check_inplace(const dg_tensor *t, const char *op) {
    if (!dg_tensor_live(t)) return dg_tensor_bad(op, "t", t);
    if ((t->requires_grad || t->node) && dg_is_grad_enabled()) {
        DG_ERR(DG_ESTATE, "%s: in-place write to a tensor that requires grad; wrap it in dg_no_grad_begin/end", op);
        return DG_ESTATE;
    }
    return 0;
}

/* ---- creation ---- */
dg_tensor *dg_empty(dg_shape s, dg_dtype dt) { return dg_tensor_alloc(s.d, s.ndim, dt, dg_current_device()); }
dg_tensor *dg_empty_on(dg_shape s, dg_dtype dt, dg_device d) { return dg_tensor_alloc(s.d, s.ndim, dt, d); }

dg_tensor *dg_full(dg_shape s, double v, dg_dtype dt) {
    dg_tensor *t = dg_empty(s, dt);
    if (t && DG_KCALL(t, fill, DG_KV(t), v) != 0) { dg_tensor_free(t); return NULL; }
    return t;
}
dg_tensor *dg_zeros(dg_shape s, dg_dtype dt) { return dg_full(s, 0.0, dt); }
dg_tensor *dg_ones(dg_shape s, dg_dtype dt) { return dg_full(s, 1.0, dt); }
dg_tensor *dg_scalar(double v, dg_dtype dt) { return dg_full(DG_SCALAR_SHAPE, v, dt); }
static dg_tensor *full_on(const dg_tensor *like, double v) {
    dg_tensor *t = dg_tensor_alloc(like->shape, like->ndim, like->dtype, like->storage->device);
    if (t && DG_KCALL(t, fill, DG_KV(t), v) != 0) { dg_tensor_free(t); return NULL; }
    return t;
}
/* zeros_like / ones_like: a trace sees them as a fill of the shape of t (ONNX Expand of t's Shape),
 * since t may be a value from the input whose batch the constant must follow; the attribute is
 * op_attrs.h's dg_fill_trace_attr, a single double */
static dg_tensor *full_like(dg_op_id id, const dg_tensor *like, double v) {
    dg_tensor *t = full_on(like, v);
    if (t && dg_trace_wants_value(t)) dg_trace_value(id, t, &like, 1, &v, sizeof v);
    return t;
}
static dg_tensor *full_like_entry(dg_op_id id, const dg_tensor *like, double v) {
    dg_op_frame f;
    dg_op_enter(&f, id, DG_OP_IN(like));
    dg_tensor *t = dg_tensor_live(like) ? full_like(id, like, v) : NULL;
    if (!t && !dg_tensor_live(like)) dg_tensor_bad(dg_op_name(id), "t", like);
    return dg_op_leave(&f, t);
}
dg_tensor *dg_zeros_like(const dg_tensor *t) { return full_like_entry(DG_OP_ZEROS_LIKE, t, 0.0); }
dg_tensor *dg_ones_like(const dg_tensor *t) { return full_like_entry(DG_OP_ONES_LIKE, t, 1.0); }

dg_tensor *dg_arange(double start, double end, double step, dg_dtype dt) {
    DG_CHECK(step != 0 && isfinite(start) && isfinite(end), "arange: bad range start=%g end=%g step=%g", start, end, step);
    double span = ceil((end - start) / step);
    int64_t n = span > 0 ? (int64_t)span : 0;
    DG_CHECK(dt == DG_F32 || dt == DG_F64 || dt == DG_I64 || dt == DG_I32, "arange: unsupported dtype %s", dg_dtype_name(dt));
    /* the values are made and converted on the CPU, then uploaded: a device's copy kernel cannot
     * read a host tensor (and the host one is freed before queued device work runs) */
    dg_tensor *d = dg_tensor_alloc(&n, 1, DG_F64, dg_cpu());
    if (!d) return NULL;
    double *host = dg_tensor_ptr(d);
    for (int64_t i = 0; i < n; i++) host[i] = start + (double)i * step;
    dg_tensor *c = dg_tensor_alloc(&n, 1, dt, dg_cpu());
    if (c && DG_KCALL(c, copy, DG_KV(d), DG_KV(c)) != 0) { dg_tensor_free(c); c = NULL; }
    dg_tensor_free(d);
    if (!c) return NULL;
    dg_device dev = dg_current_device();
    if (dev.type == DG_CPU) return c;
    dg_tensor *t = dg_tensor_alloc(&n, 1, dt, dev);
    if (t && DG_KCALL(t, upload, dg_tensor_ptr(t), dg_tensor_ptr(c), (size_t)n * dg_dtype_bytes(dt)) != 0) {
        dg_tensor_free(t);
        t = NULL;
    }
    dg_tensor_free(c);
    return t;
}

static dg_tensor *random_tensor(dg_generator *g, dg_shape s, dg_dtype dt, dg_random_kind kind, double a, double b, const char *op) {
    DG_CHECK(dg_dtype_is_float(dt), "%s: dtype must be a float type, got %s", op, dg_dtype_name(dt));
    dg_tensor *t = dg_empty(s, dt);
    if (!t) return NULL;
    uint64_t seed, ctr = dg_generator_reserve(g, (uint64_t)t->numel * 2, &seed);
    if (DG_KCALL(t, random, kind, DG_KV(t), a, b, seed, ctr) != 0) { dg_tensor_free(t); return NULL; }
    return t;
}
dg_tensor *dg_rand(dg_shape s, dg_dtype dt) { return random_tensor(NULL, s, dt, DG_RAND_UNIFORM, 0.0, 1.0, "rand"); }
dg_tensor *dg_randn(dg_shape s, dg_dtype dt) { return random_tensor(NULL, s, dt, DG_RAND_NORMAL, 0.0, 1.0, "randn"); }
dg_tensor *dg_uniform(dg_shape s, double lo, double hi, dg_dtype dt) { return random_tensor(NULL, s, dt, DG_RAND_UNIFORM, lo, hi, "uniform"); }
dg_tensor *dg_normal(dg_shape s, double mean, double std, dg_dtype dt) { return random_tensor(NULL, s, dt, DG_RAND_NORMAL, mean, std, "normal"); }
dg_tensor *dg_generator_rand(dg_generator *g, dg_shape s, dg_dtype dt) {
    return random_tensor(g, s, dt, DG_RAND_UNIFORM, 0.0, 1.0, "generator_rand");
}
dg_tensor *dg_generator_randn(dg_generator *g, dg_shape s, dg_dtype dt) {
    return random_tensor(g, s, dt, DG_RAND_NORMAL, 0.0, 1.0, "generator_randn");
}
dg_tensor *dg_generator_uniform(dg_generator *g, dg_shape s, double lo, double hi, dg_dtype dt) {
    return random_tensor(g, s, dt, DG_RAND_UNIFORM, lo, hi, "generator_uniform");
}
dg_tensor *dg_generator_normal(dg_generator *g, dg_shape s, double mean, double std, dg_dtype dt) {
    return random_tensor(g, s, dt, DG_RAND_NORMAL, mean, std, "generator_normal");
}

static int random_fill_(dg_generator *g, dg_tensor *t, dg_random_kind kind, double a, double b, const char *op) {
    int rc = dg_check_inplace(t, op);
    if (rc) return rc;
    DG_CHECK_INT(dg_is_contiguous(t) && dg_dtype_is_float(t->dtype),
                 "%s: needs a contiguous float tensor, got %s", op, dg_dtype_name(t->dtype));
    uint64_t seed, ctr = dg_generator_reserve(g, (uint64_t)t->numel * 2, &seed);
    return DG_KCALL(t, random, kind, DG_KV(t), a, b, seed, ctr);
}
int dg_uniform_(dg_tensor *t, double lo, double hi) { return random_fill_(NULL, t, DG_RAND_UNIFORM, lo, hi, "uniform_"); }
int dg_normal_(dg_tensor *t, double mean, double std) { return random_fill_(NULL, t, DG_RAND_NORMAL, mean, std, "normal_"); }
int dg_generator_uniform_(dg_generator *g, dg_tensor *t, double lo, double hi) {
    return random_fill_(g, t, DG_RAND_UNIFORM, lo, hi, "generator_uniform_");
}
int dg_generator_normal_(dg_generator *g, dg_tensor *t, double mean, double std) {
    return random_fill_(g, t, DG_RAND_NORMAL, mean, std, "generator_normal_");
}

dg_tensor *dg_from_data(dg_shape s, dg_dtype dt, const void *data) {
    DG_CHECK(data, "from_data: data is NULL");
    dg_tensor *t = dg_empty(s, dt);
    if (t && DG_KCALL(t, upload, dg_tensor_ptr(t), data, (size_t)t->numel * dg_dtype_bytes(dt)) != 0) {
        dg_tensor_free(t);
        return NULL;
    }
    return t;
}

/* ---- host copies ---- */
int dg_to_host(const dg_tensor *t, void *dst, size_t nbytes) {
    DG_CHECK_INPUT_INT("to_host", t);
    DG_CHECK_INT(dst, "to_host: dst is NULL");
    size_t need = (size_t)t->numel * dg_dtype_bytes(t->dtype);
    DG_CHECK_INT(nbytes >= need, "to_host: buffer of %zu bytes, tensor %s %s needs %zu", nbytes, DG_SHAPE_STR(t), dg_dtype_name(t->dtype), need);
    if (dg_is_contiguous(t)) return DG_KCALL(t, download, dst, dg_tensor_ptr(t), need);
    dg_tensor *c = dg_tensor_alloc(t->shape, t->ndim, t->dtype, t->storage->device);
    if (!c) return DG_ENOMEM;
    int rc = DG_KCALL(t, copy, DG_KV(t), DG_KV(c));
    if (!rc) rc = DG_KCALL(c, download, dst, dg_tensor_ptr(c), need);
    dg_tensor_free(c);
    return rc;
}

int dg_copy_from_host(dg_tensor *t, const void *src, size_t nbytes) {
    int rc = dg_check_inplace(t, "copy_from_host");
    if (rc) return rc;
    size_t need = (size_t)t->numel * dg_dtype_bytes(t->dtype);
    DG_CHECK_INT(src || need == 0, "copy_from_host: src is NULL (tensor %s %s holds %zu bytes)", DG_SHAPE_STR(t), dg_dtype_name(t->dtype), need);
    DG_CHECK_INT(nbytes == need, "copy_from_host: %zu bytes given, tensor %s %s holds %zu", nbytes, DG_SHAPE_STR(t), dg_dtype_name(t->dtype), need);
    DG_CHECK_INT(dg_is_contiguous(t), "copy_from_host: tensor %s is not contiguous", DG_SHAPE_STR(t));
    return DG_KCALL(t, upload, dg_tensor_ptr(t), src, need);
}


double dg_get(const dg_tensor *t, const int64_t *index) {
    if (!dg_tensor_live(t)) { dg_tensor_bad("get", "t", t); return NAN; }
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        if (index[i] < 0 || index[i] >= t->shape[i]) {
            DG_ERR(DG_EINVAL, "get: index %lld out of range for axis %d of %s", (long long)index[i], i, DG_SHAPE_STR(t));
            return NAN;
        }
        off += index[i] * t->stride[i];
    }
    unsigned char buf[8];
    size_t es = dg_dtype_bytes(t->dtype);
    if (DG_KCALL(t, download, buf, (char *)t->storage->data + off * (int64_t)es, es) != 0) return NAN;
    return dg_load_as_double(buf, t->dtype);
}

double dg_item(const dg_tensor *t) {
    if (!dg_tensor_live(t)) { dg_tensor_bad("item", "t", t); return NAN; }
    if (t->numel != 1) { DG_ERR(DG_EINVAL, "item: tensor %s has %lld elements, needs 1", DG_SHAPE_STR(t), (long long)t->numel); return NAN; }
    int64_t zeros[DG_MAX_DIMS] = {0};
    return dg_get(t, zeros);
}
