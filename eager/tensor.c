/* eager/tensor.c — tensor and storage lifetime, views, creation, inspection and host copies. */
#include "backend.h"
#include <math.h>

size_t dg_live_tensor_count = 0;

size_t dg_dtype_size(dg_dtype dt) {
    switch (dt) {
    case DG_F32: case DG_I32: return 4;
    case DG_F64: case DG_I64: return 8;
    case DG_F16: case DG_BF16: return 2;
    case DG_BOOL: return 1;
    }
    return 0;
}
const char *dg_dtype_name(dg_dtype dt) {
    static const char *names[] = {"float32", "float64", "int64", "int32", "float16", "bfloat16", "bool"};
    return (unsigned)dt < sizeof names / sizeof *names ? names[dt] : "invalid";
}
bool dg_dtype_is_float(dg_dtype dt) { return dt == DG_F32 || dt == DG_F64 || dt == DG_F16 || dt == DG_BF16; }

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
    if (!t) { snprintf(buf, len, "(null)"); return buf; }
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
    t->refcount = 1;
    __atomic_add_fetch(&dg_live_tensor_count, 1, __ATOMIC_RELAXED);
    return t;
}

dg_tensor *dg_tensor_alloc(const int64_t *shape, int ndim, dg_dtype dtype, dg_device device) {
    if (ndim < 0 || ndim > DG_MAX_DIMS) { DG_ERR(DG_EINVAL, "tensor: %d dims (at most %d)", ndim, DG_MAX_DIMS); return NULL; }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) { DG_ERR(DG_EINVAL, "tensor: negative dim %lld at axis %d", (long long)shape[i], i); return NULL; }
    if (dg_dtype_size(dtype) == 0) { DG_ERR(DG_EINVAL, "tensor: invalid dtype %d", (int)dtype); return NULL; }
    const dg_backend *be = dg_backend_for(device);
    if (!be) { DG_ERR(DG_EDEVICE, "tensor: no backend for device type %d", (int)device.type); return NULL; }
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
    size_t nbytes = (size_t)numel * dg_dtype_size(dtype);
    dg_storage *st = dg_block_alloc(sizeof *st);
    void *data = be->alloc(nbytes ? nbytes : 1);
    dg_tensor *t = st && data ? tensor_struct() : NULL;
    if (!t) {
        dg_block_free(st);
        if (data) be->free(data);
        DG_ERR(DG_ENOMEM, "tensor: out of memory allocating %zu bytes", nbytes);
        return NULL;
    }
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
        st->backend->free(st->data);
        dg_block_free(st);
    }
}

void dg_tensor_release(dg_tensor *t) {
    if (!t) return;
    if (__atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    storage_release(t->storage);
    dg_tensor_release(t->grad);       /* grads carry no node: no deep recursion */
    if (t->node) dg_node_release(t->node);
    __atomic_sub_fetch(&dg_live_tensor_count, 1, __ATOMIC_RELAXED);
    dg_block_free(t);
}

void dg_tensor_free(dg_tensor *t) {
    if (!t) return;
    if (t->scope) dg_scope_forget(t);
    dg_tensor_release(t);
}
dg_tensor *dg_tensor_ref(dg_tensor *t) { dg_tensor_retain(t); return t; }
dg_tensor *dg_advance(dg_tensor *prev, dg_tensor *next) {
    if (prev != next) dg_tensor_free(prev);
    return next;
}
size_t dg_live_tensors(void) { return __atomic_load_n(&dg_live_tensor_count, __ATOMIC_RELAXED); }

void *dg_tensor_ptr(const dg_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)dg_dtype_size(t->dtype);
}
const dg_backend *dg_backend_of(const dg_tensor *t) { return t->storage->backend; }

/* ---- inspection ---- */
int dg_ndim(const dg_tensor *t) { return t ? t->ndim : -1; }
int64_t dg_dim(const dg_tensor *t, int axis) {
    if (!t) return -1;
    int a = dg_norm_axis(axis, t->ndim);
    return (a < 0 || t->ndim == 0) ? -1 : t->shape[a];
}
dg_shape dg_shape_of(const dg_tensor *t) {
    dg_shape s = {0};
    if (t) { s.ndim = t->ndim; memcpy(s.d, t->shape, sizeof(int64_t) * (size_t)t->ndim); }
    return s;
}
int64_t dg_numel(const dg_tensor *t) { return t ? t->numel : -1; }
dg_dtype dg_dtype_of(const dg_tensor *t) { return t ? t->dtype : DG_F32; }
dg_device dg_device_of(const dg_tensor *t) { return t ? t->storage->device : dg_cpu(); }
bool dg_is_contiguous(const dg_tensor *t) {
    if (!t) return false;
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}
void *dg_data(const dg_tensor *t) {
    if (!t || t->storage->device.type != DG_CPU) return NULL;
    return dg_tensor_ptr(t);
}

int dg_check_inplace(const dg_tensor *t, const char *op) {
    if (!t) { if (!dg_has_error()) DG_ERR(DG_EINVAL, "%s: tensor is NULL", op); return DG_EINVAL; }
    if ((t->requires_grad || t->node) && dg_is_grad_enabled()) {
        DG_ERR(DG_ESTATE, "%s: in-place write to a tensor that requires grad; wrap it in dg_no_grad_begin/end", op);
        return DG_ESTATE;
    }
    return 0;
}

/* ---- creation ---- */
dg_tensor *dg_empty(dg_shape s, dg_dtype dt) { return dg_tensor_alloc(s.d, s.ndim, dt, dg_current_device()); }

dg_tensor *dg_full(dg_shape s, double v, dg_dtype dt) {
    dg_tensor *t = dg_empty(s, dt);
    if (t && dg_backend_of(t)->fill(t, v) != 0) { dg_tensor_free(t); return NULL; }
    return t;
}
dg_tensor *dg_zeros(dg_shape s, dg_dtype dt) { return dg_full(s, 0.0, dt); }
dg_tensor *dg_ones(dg_shape s, dg_dtype dt) { return dg_full(s, 1.0, dt); }
dg_tensor *dg_scalar(double v, dg_dtype dt) { return dg_full(DG_SCALAR_SHAPE, v, dt); }
static dg_tensor *full_on(const dg_tensor *like, double v) {
    dg_tensor *t = dg_tensor_alloc(like->shape, like->ndim, like->dtype, like->storage->device);
    if (t && dg_backend_of(t)->fill(t, v) != 0) { dg_tensor_free(t); return NULL; }
    return t;
}
dg_tensor *dg_zeros_like(const dg_tensor *t) { DG_CHECK_INPUT("zeros_like", t); return full_on(t, 0.0); }
dg_tensor *dg_ones_like(const dg_tensor *t) { DG_CHECK_INPUT("ones_like", t); return full_on(t, 1.0); }

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
    if (c && dg_backend_of(c)->copy(d, c) != 0) { dg_tensor_free(c); c = NULL; }
    dg_tensor_free(d);
    if (!c) return NULL;
    dg_device dev = dg_current_device();
    if (dev.type == DG_CPU) return c;
    dg_tensor *t = dg_tensor_alloc(&n, 1, dt, dev);
    if (t && dg_backend_of(t)->upload(dg_tensor_ptr(t), dg_tensor_ptr(c), (size_t)n * dg_dtype_size(dt)) != 0) {
        dg_tensor_free(t);
        t = NULL;
    }
    dg_tensor_free(c);
    return t;
}

static dg_tensor *random_tensor(dg_generator *g, dg_shape s, dg_dtype dt, dg_random_kind kind, double a, double b, const char *op) {
    DG_CHECK(dt == DG_F32 || dt == DG_F64, "%s: dtype must be float32 or float64, got %s", op, dg_dtype_name(dt));
    dg_tensor *t = dg_empty(s, dt);
    if (!t) return NULL;
    uint64_t seed, ctr = dg_generator_reserve(g, (uint64_t)t->numel * 2, &seed);
    if (dg_backend_of(t)->random(kind, t, a, b, seed, ctr) != 0) { dg_tensor_free(t); return NULL; }
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
    DG_CHECK_INT(dg_is_contiguous(t) && (t->dtype == DG_F32 || t->dtype == DG_F64),
                 "%s: needs a contiguous float tensor, got %s", op, dg_dtype_name(t->dtype));
    uint64_t seed, ctr = dg_generator_reserve(g, (uint64_t)t->numel * 2, &seed);
    return dg_backend_of(t)->random(kind, t, a, b, seed, ctr);
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
    if (t && dg_backend_of(t)->upload(dg_tensor_ptr(t), data, (size_t)t->numel * dg_dtype_size(dt)) != 0) {
        dg_tensor_free(t);
        return NULL;
    }
    return t;
}

/* ---- host copies ---- */
int dg_to_host(const dg_tensor *t, void *dst, size_t nbytes) {
    if (!t || !dst) { if (!dg_has_error()) DG_ERR(DG_EINVAL, "to_host: %s is NULL", t ? "dst" : "tensor"); return DG_EINVAL; }
    size_t need = (size_t)t->numel * dg_dtype_size(t->dtype);
    DG_CHECK_INT(nbytes >= need, "to_host: buffer of %zu bytes, tensor %s %s needs %zu", nbytes, DG_SHAPE_STR(t), dg_dtype_name(t->dtype), need);
    if (dg_is_contiguous(t)) return dg_backend_of(t)->download(dst, dg_tensor_ptr(t), need);
    dg_tensor *c = dg_tensor_alloc(t->shape, t->ndim, t->dtype, t->storage->device);
    if (!c) return DG_ENOMEM;
    int rc = dg_backend_of(t)->copy(t, c);
    if (!rc) rc = dg_backend_of(c)->download(dst, dg_tensor_ptr(c), need);
    dg_tensor_free(c);
    return rc;
}

int dg_copy_from_host(dg_tensor *t, const void *src, size_t nbytes) {
    int rc = dg_check_inplace(t, "copy_from_host");
    if (rc) return rc;
    size_t need = (size_t)t->numel * dg_dtype_size(t->dtype);
    DG_CHECK_INT(src && nbytes == need, "copy_from_host: %zu bytes given, tensor %s %s holds %zu", nbytes, DG_SHAPE_STR(t), dg_dtype_name(t->dtype), need);
    DG_CHECK_INT(dg_is_contiguous(t), "copy_from_host: tensor %s is not contiguous", DG_SHAPE_STR(t));
    return dg_backend_of(t)->upload(dg_tensor_ptr(t), src, need);
}

static double load_as_double(const void *p, dg_dtype dt) {
    switch (dt) {
    case DG_F32: return *(const float *)p;
    case DG_F64: return *(const double *)p;
    case DG_I64: return (double)*(const int64_t *)p;
    case DG_I32: return *(const int32_t *)p;
    case DG_BOOL: return *(const uint8_t *)p;
    default: return NAN;
    }
}

double dg_get(const dg_tensor *t, const int64_t *index) {
    if (!t) { if (!dg_has_error()) DG_ERR(DG_EINVAL, "get: tensor is NULL"); return NAN; }
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        if (index[i] < 0 || index[i] >= t->shape[i]) {
            DG_ERR(DG_EINVAL, "get: index %lld out of range for axis %d of %s", (long long)index[i], i, DG_SHAPE_STR(t));
            return NAN;
        }
        off += index[i] * t->stride[i];
    }
    unsigned char buf[8];
    size_t es = dg_dtype_size(t->dtype);
    if (dg_backend_of(t)->download(buf, (char *)t->storage->data + off * (int64_t)es, es) != 0) return NAN;
    return load_as_double(buf, t->dtype);
}

double dg_item(const dg_tensor *t) {
    if (!t) { if (!dg_has_error()) DG_ERR(DG_EINVAL, "item: tensor is NULL"); return NAN; }
    if (t->numel != 1) { DG_ERR(DG_EINVAL, "item: tensor %s has %lld elements, needs 1", DG_SHAPE_STR(t), (long long)t->numel); return NAN; }
    int64_t zeros[DG_MAX_DIMS] = {0};
    return dg_get(t, zeros);
}
