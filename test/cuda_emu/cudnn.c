/* test/cuda_emu/cudnn.c — cuDNN 9's legacy API (the part eager/cuda/cudnn_*.c use) emulated on the
 * CPU, so the backend's convolution, batch norm and pooling paths run unchanged in `make test` and
 * have their use of cuDNN checked against its documentation.
 *
 * What a call does. Every entry point validates its arguments the way the documentation lists
 * them (NULL or dead handle/descriptor, a descriptor never set, mismatched dims or data types,
 * bad enumerants, negative pads ...: CUDNN_STATUS_BAD_PARAM; a configuration cuDNN has no kernel
 * for: CUDNN_STATUS_NOT_SUPPORTED). A compute entry then checks that every device operand is
 * device memory covering what its descriptor spans (a host or stale pointer is reported on
 * stderr, since on a GPU it would fault or corrupt memory silently), copies what it needs by
 * value (descriptors, alpha/beta read from the host as the data type says: double for double
 * data, float otherwise) and queues the computation on the handle's stream; device memory is
 * touched only when that work runs. A sticky device fault makes compute entries return
 * CUDNN_STATUS_EXECUTION_FAILED, as a dead CUDA context does.
 *
 * Arithmetic. Results come from straightforward reference loops written from the definitions
 * in cuDNN's documentation; every product and sum is done in double for float and double data
 * and rounded once to the output type, so float results are at least as accurate as those of
 * cuDNN's kernels (which accumulate in float) and a caller's tolerance that passes here may still
 * be too tight on a GPU. A math type is accepted and reported, but TF32 rounding is not imitated.
 * beta == 0 never reads the output (cuDNN allows it to hold NaN then).
 *
 * Algorithms. Each kind has a handful of emulated algorithms with cuDNN's ids; they differ only
 * in which geometries they accept, the workspace they demand and the made-up time Find reports,
 * and all compute the same result. A call checks that the workspace it is given is device memory
 * of at least what its algorithm needs (less than that in workSpaceSizeInBytes: BAD_PARAM), and
 * the work fills that much with garbage first, as a real kernel's scratch use would: a caller
 * that shares a workspace with live data sees it.
 * Find*Ex blocks until its work is done, overwrites its output operand with NaN (the
 * documentation promises only "arbitrary values" there), and returns several results sorted by
 * time: those needing more workspace than offered come back as CUDNN_STATUS_ALLOC_FAILED, those
 * that cannot run this geometry as CUDNN_STATUS_NOT_SUPPORTED.
 *
 * A handle belongs to the device current at cudnnCreate; a call while another device is current
 * is refused (on a GPU its work would go to the wrong context).
 *
 * Errors. The reason for the last failure of the calling thread is kept for
 * cudnnGetLastErrorString; CUDNN_LOGERR_DBG=1 (cuDNN's own switch) prints every failure. */
#include <cudnn.h>

#include "emu_internal.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef cudnnStatus_t st_t;
#define OK CUDNN_STATUS_SUCCESS

/* ---- errors ---- */

static _Thread_local char t_last_error[512];
static pthread_once_t g_log_once = PTHREAD_ONCE_INIT;
static bool g_log_all;

static void log_init(void) {
    const char *e = getenv("CUDNN_LOGERR_DBG");
    g_log_all = e && e[0] == '1';
}

static const char *status_name(cudnnStatus_t s) {
    switch (s) {
#define S(x) case x: return #x;
    S(CUDNN_STATUS_SUCCESS)
    S(CUDNN_STATUS_NOT_INITIALIZED)
    S(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
    S(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
    S(CUDNN_STATUS_DEPRECATED)
    S(CUDNN_STATUS_LICENSE_ERROR)
    S(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
    S(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
    S(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
    S(CUDNN_STATUS_BAD_PARAM)
    S(CUDNN_STATUS_INVALID_VALUE)
    S(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    S(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    S(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
    S(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
    S(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    S(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
    S(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
    S(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
    S(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
    S(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
    S(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
    S(CUDNN_STATUS_NOT_SUPPORTED)
    S(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
    S(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
    S(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
    S(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
    S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
    S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
    S(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
    S(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
    S(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
    S(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
    S(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
    S(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
    S(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
    S(CUDNN_STATUS_INTERNAL_ERROR)
    S(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
    S(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
    S(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    S(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    S(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
    S(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
    S(CUDNN_STATUS_EXECUTION_FAILED)
    S(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
    S(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
    S(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
    S(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
#undef S
    }
    return "CUDNN_UNKNOWN_STATUS";
}

/* Records why fn fails with s; `loud` also prints it whatever CUDNN_LOGERR_DBG says (used for
 * pointer faults, which a GPU would not report politely). Returns s. */
static st_t failv(bool loud, st_t s, const char *fn, const char *fmt, va_list ap) {
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    snprintf(t_last_error, sizeof t_last_error, "%s: %s (%s)", fn, msg, status_name(s));
    pthread_once(&g_log_once, log_init);
    if (loud || g_log_all) fprintf(stderr, "cudnn-emu: %s\n", t_last_error);
    return s;
}
__attribute__((format(printf, 3, 4))) static st_t fail(st_t s, const char *fn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    failv(false, s, fn, fmt, ap);
    va_end(ap);
    return s;
}
__attribute__((format(printf, 3, 4))) static st_t fail_loud(st_t s, const char *fn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    failv(true, s, fn, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- live objects ----
 * Handles and descriptors are registered while alive, so a NULL, destroyed or wrong-kind object
 * is refused with BAD_PARAM instead of being read after free. An open-addressing set keyed by
 * address (linear probing, backward-shift deletion). */

enum { OBJ_HANDLE = 1, OBJ_TENSOR, OBJ_FILTER, OBJ_CONV, OBJ_POOL };

typedef struct reg_slot { const void *p; int kind; } reg_slot;
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static reg_slot *g_reg;
static size_t g_reg_cap, g_reg_n;

static size_t reg_hash(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

/* The slot holding p, or the empty slot where it would go. Needs g_reg_cap > 0. */
static size_t reg_slot_of(const void *p) {
    size_t i = reg_hash(p, g_reg_cap);
    while (g_reg[i].p && g_reg[i].p != p) i = (i + 1) & (g_reg_cap - 1);
    return i;
}

static bool reg_grow(void) {
    size_t cap = g_reg_cap ? g_reg_cap * 2 : 256;
    reg_slot *old = g_reg, *nw = calloc(cap, sizeof *nw);
    if (!nw) return false;
    size_t old_cap = g_reg_cap;
    g_reg = nw;
    g_reg_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].p) g_reg[reg_slot_of(old[i].p)] = old[i];
    free(old);
    return true;
}

static bool reg_add(const void *p, int kind) {
    pthread_mutex_lock(&g_reg_lock);
    bool ok = (g_reg_n + 1) * 2 <= g_reg_cap || reg_grow();
    if (ok) {
        g_reg[reg_slot_of(p)] = (reg_slot){ p, kind };
        g_reg_n++;
    }
    pthread_mutex_unlock(&g_reg_lock);
    return ok;
}

static bool reg_is(const void *p, int kind) {
    if (!p) return false;
    pthread_mutex_lock(&g_reg_lock);
    bool ok = g_reg_cap && g_reg[reg_slot_of(p)].p == p && g_reg[reg_slot_of(p)].kind == kind;
    pthread_mutex_unlock(&g_reg_lock);
    return ok;
}

static bool reg_remove(const void *p, int kind) {
    if (!p) return false;
    pthread_mutex_lock(&g_reg_lock);
    bool ok = false;
    if (g_reg_cap) {
        size_t mask = g_reg_cap - 1, i = reg_slot_of(p);
        if (g_reg[i].p == p && g_reg[i].kind == kind) {
            ok = true;
            g_reg[i].p = NULL;
            g_reg_n--;
            /* pull later members of the probe run back over the hole so lookups still reach them */
            for (size_t j = (i + 1) & mask; g_reg[j].p; j = (j + 1) & mask) {
                size_t k = reg_hash(g_reg[j].p, g_reg_cap);
                bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
                if (stays) continue;
                g_reg[i] = g_reg[j];
                g_reg[j].p = NULL;
                i = j;
            }
        }
    }
    pthread_mutex_unlock(&g_reg_lock);
    return ok;
}

static void *obj_new(size_t size, int kind) {
    void *o = calloc(1, size);
    if (o && !reg_add(o, kind)) {
        free(o);
        o = NULL;
    }
    return o;
}

static bool obj_free(void *o, int kind) {
    if (!reg_remove(o, kind)) return false;
    free(o);
    return true;
}

/* ---- objects ---- */

/* A 4-d strided view: dims and strides (in elements) in n, c, h, w order. Filters become one too
 * (k in the n slot), so every loop below indexes the same way. */
typedef struct tens {
    cudnnDataType_t dt;
    int64_t d[4], s[4];
} tens;

struct cudnnContext {
    cudaStream_t stream;
    int device;                   /* the current device at cudnnCreate */
};
struct cudnnTensorStruct {
    bool set;
    tens t;
};
struct cudnnFilterStruct {
    bool set;
    cudnnDataType_t dt;
    cudnnTensorFormat_t fmt;
    int k, c, h, w;
};
typedef struct conv_desc {
    bool set;
    int ph, pw, sh, sw, dh, dw;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t ctype;
    int groups;
    cudnnMathType_t math;
} conv_desc;
struct cudnnConvolutionStruct {
    conv_desc c;
};
typedef struct pool_desc {
    bool set;
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    int kh, kw, ph, pw, sh, sw;
} pool_desc;
struct cudnnPoolingStruct {
    pool_desc p;
};

static size_t dt_size(cudnnDataType_t dt) {
    switch (dt) {
    case CUDNN_DATA_FLOAT: case CUDNN_DATA_INT32: case CUDNN_DATA_INT8x4: case CUDNN_DATA_UINT8x4: return 4;
    case CUDNN_DATA_DOUBLE: case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_HALF: case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT8: case CUDNN_DATA_UINT8: case CUDNN_DATA_BOOLEAN: case CUDNN_DATA_FP8_E4M3:
    case CUDNN_DATA_FP8_E5M2: return 1;
    case CUDNN_DATA_INT8x32: return 32;
    default: return 0;    /* includes FAST_FLOAT_FOR_FP8: a compute type, not a storage type */
    }
}

static const char *dt_name(cudnnDataType_t dt) {
    switch (dt) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_DOUBLE: return "DOUBLE";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    default: return "another type";
    }
}

static bool is_fd(cudnnDataType_t dt) { return dt == CUDNN_DATA_FLOAT || dt == CUDNN_DATA_DOUBLE; }

/* Packed strides for a layout. */
static void packed(tens *t, cudnnTensorFormat_t fmt) {
    int64_t c = t->d[1], h = t->d[2], w = t->d[3];
    if (fmt == CUDNN_TENSOR_NHWC) {
        t->s[0] = h * w * c; t->s[1] = 1; t->s[2] = w * c; t->s[3] = c;
    } else {
        t->s[0] = c * h * w; t->s[1] = h * w; t->s[2] = w; t->s[3] = 1;
    }
}

/* Elements from the first to one past the last that the view touches. */
static int64_t span(const tens *t) {
    int64_t e = 1;
    for (int i = 0; i < 4; i++) e += (t->d[i] - 1) * t->s[i];
    return e;
}
static size_t bytes_of(const tens *t) { return (size_t)span(t) * dt_size(t->dt); }
static int64_t numel(const tens *t) { return t->d[0] * t->d[1] * t->d[2] * t->d[3]; }

static bool same_dims(const tens *a, const tens *b) {
    return a->d[0] == b->d[0] && a->d[1] == b->d[1] && a->d[2] == b->d[2] && a->d[3] == b->d[3];
}
static bool same_strides(const tens *a, const tens *b) {
    return a->s[0] == b->s[0] && a->s[1] == b->s[1] && a->s[2] == b->s[2] && a->s[3] == b->s[3];
}

/* ---- argument checks shared by the entry points ---- */

static st_t get_handle(const char *fn, cudnnHandle_t h, cudaStream_t *stream) {
    if (!h) return fail(CUDNN_STATUS_BAD_PARAM, fn, "handle is NULL");
    if (!reg_is(h, OBJ_HANDLE)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "handle %p is not a live cuDNN handle", (void *)h);
    if (h->device != dgemu_device())
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "the handle was created on device %d but device %d is current",
                         h->device, dgemu_device());
    if (stream) *stream = h->stream;
    return OK;
}

static st_t get_tensor(const char *fn, const char *what, cudnnTensorDescriptor_t d, tens *out) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is NULL", what);
    if (!reg_is(d, OBJ_TENSOR))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%s (%p) is not a live tensor descriptor", what, (void *)d);
    if (!d->set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s was created but never set", what);
    *out = d->t;
    return OK;
}

static st_t get_filter(const char *fn, const char *what, cudnnFilterDescriptor_t d, tens *out) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is NULL", what);
    if (!reg_is(d, OBJ_FILTER))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%s (%p) is not a live filter descriptor", what, (void *)d);
    if (!d->set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s was created but never set", what);
    if (d->fmt == CUDNN_TENSOR_NCHW_VECT_C)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s: the vectorised NCHW_VECT_C layout is not emulated", what);
    out->dt = d->dt;
    out->d[0] = d->k; out->d[1] = d->c; out->d[2] = d->h; out->d[3] = d->w;
    packed(out, d->fmt);
    return OK;
}

static st_t get_conv(const char *fn, cudnnConvolutionDescriptor_t d, conv_desc *out) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "convDesc is NULL");
    if (!reg_is(d, OBJ_CONV))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "convDesc (%p) is not a live convolution descriptor", (void *)d);
    if (!d->c.set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "convDesc was created but never set");
    *out = d->c;
    return OK;
}

static st_t get_pool(const char *fn, cudnnPoolingDescriptor_t d, pool_desc *out) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "poolingDesc is NULL");
    if (!reg_is(d, OBJ_POOL))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "poolingDesc (%p) is not a live pooling descriptor", (void *)d);
    if (!d->p.set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "poolingDesc was created but never set");
    *out = d->p;
    return OK;
}

/* A device operand: non-NULL and inside one live device allocation for all `bytes`. */
static st_t need_dev(const char *fn, const char *what, const void *p, size_t bytes) {
    if (!p) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is NULL", what);
    if (!dgemu_is_device(p, bytes))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn,
                         "%s (%p) is not device memory covering the %zu bytes needed", what, p, bytes);
    return OK;
}

static st_t need_host(const char *fn, const char *what, const void *p) {
    return p ? OK : fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is NULL", what);
}

static st_t not_poisoned(const char *fn) {
    cudaError_t e = dgemu_sticky_error();
    if (e == cudaSuccess) return OK;
    return fail(CUDNN_STATUS_EXECUTION_FAILED, fn, "an earlier device fault (%s) left the context unusable",
                cudaGetErrorName(e));
}

/* Queues fn's work; the queue frees arg. */
static st_t submit(const char *fn, cudaStream_t s, dgemu_work_fn work, void *arg) {
    cudaError_t e = dgemu_enqueue(s, fn, work, arg, free);
    if (e != cudaSuccess) return fail(CUDNN_STATUS_EXECUTION_FAILED, fn, "queueing the work failed: %s", cudaGetErrorName(e));
    return OK;
}

static void *work_alloc(const char *fn, size_t size, st_t *rc) {
    void *p = calloc(1, size);
    *rc = p ? OK : fail(CUDNN_STATUS_ALLOC_FAILED, fn, "out of host memory");
    return p;
}

/* A host scaling factor: double for double data, float for everything else. */
static double scal(const void *p, cudnnDataType_t dt) {
    return dt == CUDNN_DATA_DOUBLE ? *(const double *)p : (double)*(const float *)p;
}

/* ---- element access (only inside queued work) ---- */

static inline double ld(const void *p, cudnnDataType_t dt, int64_t i) {
    return dt == CUDNN_DATA_DOUBLE ? ((const double *)p)[i] : (double)((const float *)p)[i];
}
static inline void stv(void *p, cudnnDataType_t dt, int64_t i, double v) {
    if (dt == CUDNN_DATA_DOUBLE) ((double *)p)[i] = v;
    else ((float *)p)[i] = (float)v;
}
static inline int64_t at(const tens *t, int64_t n, int64_t c, int64_t h, int64_t w) {
    return n * t->s[0] + c * t->s[1] + h * t->s[2] + w * t->s[3];
}
/* out = alpha * r + beta * out, reading out only when beta is non-zero */
static inline void blend(void *p, const tens *t, int64_t off, double r, double alpha, double beta) {
    double v = alpha * r;
    if (beta != 0) v += beta * ld(p, t->dt, off);
    stv(p, t->dt, off, v);
}

/* A host scratch buffer inside queued work; out of memory there is a device-side failure. */
static double *work_scratch(const char *what, int64_t n) {
    double *b = calloc((size_t)(n > 0 ? n : 1), sizeof *b);
    if (!b) dgemu_fault(cudaErrorLaunchOutOfResources, "%s: the emulation ran out of host memory for %lld doubles", what,
                        (long long)n);
    return b;
}

/* ================= handle, version, errors ================= */

size_t cudnnGetVersion(void) {
    DGEMU_API();
    return CUDNN_VERSION;
}

const char *cudnnGetErrorString(cudnnStatus_t status) {
    DGEMU_API();
    return status_name(status);
}

void cudnnGetLastErrorString(char *message, size_t max_size) {
    DGEMU_API();
    if (!message || !max_size) return;
    snprintf(message, max_size, "%s", t_last_error);
    t_last_error[0] = 0;
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM, fn, "handle is NULL");
    if (dgemu_device_count() < 1) return fail(CUDNN_STATUS_NOT_INITIALIZED, fn, "no device");
    cudnnHandle_t h = obj_new(sizeof *h, OBJ_HANDLE);
    if (!h) return fail(CUDNN_STATUS_ALLOC_FAILED, fn, "out of host memory");
    h->device = dgemu_device();
    *handle = h;
    return OK;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!reg_is(handle, OBJ_HANDLE)) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "handle %p is not a live cuDNN handle", (void *)handle);
    /* documented: releasing the handle synchronises the device */
    cudaDeviceSynchronize();
    obj_free(handle, OBJ_HANDLE);
    return OK;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    st_t rc = get_handle(__func__, handle, NULL);
    if (rc) return rc;
    handle->stream = streamId;
    return OK;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *streamId) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    st_t rc = get_handle(__func__, handle, NULL);
    if (!rc) rc = need_host(__func__, "streamId", streamId);
    if (!rc) *streamId = handle->stream;
    return rc;
}

/* ================= tensor descriptors ================= */

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!tensorDesc) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "tensorDesc is NULL");
    *tensorDesc = obj_new(sizeof **tensorDesc, OBJ_TENSOR);
    return *tensorDesc ? OK : fail(CUDNN_STATUS_ALLOC_FAILED, __func__, "out of host memory");
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!tensorDesc) return OK;   /* destroying NULL is a no-op, as in cuDNN */
    return obj_free(tensorDesc, OBJ_TENSOR) ? OK
           : fail_loud(CUDNN_STATUS_BAD_PARAM, __func__, "%p is not a live tensor descriptor (destroyed twice?)", (void *)tensorDesc);
}

static st_t dims_ok(const char *fn, int n, int c, int h, int w) {
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "dims [%d, %d, %d, %d] must all be positive", n, c, h, w);
    return OK;
}

/* cuDNN's legacy descriptors address at most 2^31 elements. */
static st_t size_ok(const char *fn, const tens *t) {
    if ((double)t->d[0] * (double)t->d[1] * (double)t->d[2] * (double)t->d[3] > INT_MAX)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "the tensor has more than %d elements", INT_MAX);
    double e = 1;
    for (int i = 0; i < 4; i++) e += (double)(t->d[i] - 1) * (double)t->s[i];
    if (e > (double)INT_MAX + 1) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "the tensor spans more than %d elements", INT_MAX);
    return OK;
}

static st_t tensor_desc(const char *fn, cudnnTensorDescriptor_t d) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "tensorDesc is NULL");
    if (!reg_is(d, OBJ_TENSOR)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live tensor descriptor", (void *)d);
    return OK;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    st_t rc = tensor_desc(fn, tensorDesc);
    if (rc) return rc;
    if ((unsigned)format > CUDNN_TENSOR_NCHW_VECT_C) return fail(CUDNN_STATUS_BAD_PARAM, fn, "format %d is not a cudnnTensorFormat_t", (int)format);
    if (!dt_size(dataType)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dataType %d is not a storage type", (int)dataType);
    if ((rc = dims_ok(fn, n, c, h, w))) return rc;
    if (format == CUDNN_TENSOR_NCHW_VECT_C) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "NCHW_VECT_C is not emulated");
    tens t = { .dt = dataType, .d = { n, c, h, w } };
    packed(&t, format);
    if ((rc = size_ok(fn, &t))) return rc;
    tensorDesc->t = t;
    tensorDesc->set = true;
    return OK;
}

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType, int n, int c,
                                           int h, int w, int nStride, int cStride, int hStride, int wStride) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    st_t rc = tensor_desc(fn, tensorDesc);
    if (rc) return rc;
    if (!dt_size(dataType)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dataType %d is not a storage type", (int)dataType);
    if ((rc = dims_ok(fn, n, c, h, w))) return rc;
    if (nStride < 0 || cStride < 0 || hStride < 0 || wStride < 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "negative stride in [%d, %d, %d, %d]", nStride, cStride, hStride, wStride);
    tens t = { .dt = dataType, .d = { n, c, h, w }, .s = { nStride, cStride, hStride, wStride } };
    if ((rc = size_ok(fn, &t))) return rc;
    tensorDesc->t = t;
    tensorDesc->set = true;
    return OK;
}

cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t *dataType, int *n,
                                         int *c, int *h, int *w, int *nStride, int *cStride, int *hStride,
                                         int *wStride) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    tens t;
    st_t rc = get_tensor(__func__, "tensorDesc", tensorDesc, &t);
    if (rc) return rc;
    if (!dataType || !n || !c || !h || !w || !nStride || !cStride || !hStride || !wStride)
        return fail(CUDNN_STATUS_BAD_PARAM, __func__, "an output pointer is NULL");
    *dataType = t.dt;
    *n = (int)t.d[0]; *c = (int)t.d[1]; *h = (int)t.d[2]; *w = (int)t.d[3];
    *nStride = (int)t.s[0]; *cStride = (int)t.s[1]; *hStride = (int)t.s[2]; *wStride = (int)t.s[3];
    return OK;
}

/* ---- cudnnAddTensor: C = alpha * A + beta * C, A broadcast along its dims of size 1 ---- */

typedef struct add_work {
    tens a, c;
    const void *A;
    void *C;
    double alpha, beta;
} add_work;

static int add_run(void *arg) {
    add_work *k = arg;
    for (int64_t n = 0; n < k->c.d[0]; n++)
        for (int64_t c = 0; c < k->c.d[1]; c++)
            for (int64_t h = 0; h < k->c.d[2]; h++)
                for (int64_t w = 0; w < k->c.d[3]; w++) {
                    int64_t ai = at(&k->a, k->a.d[0] == 1 ? 0 : n, k->a.d[1] == 1 ? 0 : c, k->a.d[2] == 1 ? 0 : h,
                                    k->a.d[3] == 1 ? 0 : w);
                    blend(k->C, &k->c, at(&k->c, n, c, h, w), ld(k->A, k->a.dt, ai), k->alpha, k->beta);
                }
    return DGEMU_DONE;
}

cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t aDesc,
                             const void *A, const void *beta, const cudnnTensorDescriptor_t cDesc, void *C) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    tens a, c;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = get_tensor(fn, "aDesc", aDesc, &a);
    if (!rc) rc = get_tensor(fn, "cDesc", cDesc, &c);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (a.dt != c.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "A is %s but C is %s", dt_name(a.dt), dt_name(c.dt));
    for (int i = 0; i < 4; i++)
        if (a.d[i] != c.d[i] && a.d[i] != 1)
            return fail(CUDNN_STATUS_BAD_PARAM, fn,
                        "A [%lld, %lld, %lld, %lld] does not broadcast to C [%lld, %lld, %lld, %lld]: each dim must match or be 1",
                        (long long)a.d[0], (long long)a.d[1], (long long)a.d[2], (long long)a.d[3], (long long)c.d[0],
                        (long long)c.d[1], (long long)c.d[2], (long long)c.d[3]);
    if (!is_fd(c.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(c.dt));
    if ((rc = need_dev(fn, "A", A, bytes_of(&a))) || (rc = need_dev(fn, "C", C, bytes_of(&c)))) return rc;
    if ((rc = not_poisoned(fn))) return rc;
    add_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (add_work){ a, c, A, C, scal(alpha, c.dt), scal(beta, c.dt) };
    return submit(fn, s, add_run, k);
}

/* ================= filters and convolution descriptors ================= */

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!filterDesc) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "filterDesc is NULL");
    *filterDesc = obj_new(sizeof **filterDesc, OBJ_FILTER);
    return *filterDesc ? OK : fail(CUDNN_STATUS_ALLOC_FAILED, __func__, "out of host memory");
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!filterDesc) return OK;
    return obj_free(filterDesc, OBJ_FILTER) ? OK
           : fail_loud(CUDNN_STATUS_BAD_PARAM, __func__, "%p is not a live filter descriptor (destroyed twice?)", (void *)filterDesc);
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    if (!filterDesc) return fail(CUDNN_STATUS_BAD_PARAM, fn, "filterDesc is NULL");
    if (!reg_is(filterDesc, OBJ_FILTER)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live filter descriptor", (void *)filterDesc);
    if (!dt_size(dataType)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dataType %d is not a storage type", (int)dataType);
    if ((unsigned)format > CUDNN_TENSOR_NCHW_VECT_C) return fail(CUDNN_STATUS_BAD_PARAM, fn, "format %d is not a cudnnTensorFormat_t", (int)format);
    st_t rc = dims_ok(fn, k, c, h, w);
    if (rc) return rc;
    tens t = { .dt = dataType, .d = { k, c, h, w } };
    packed(&t, format);
    if ((rc = size_ok(fn, &t))) return rc;
    filterDesc->dt = dataType;
    filterDesc->fmt = format;
    filterDesc->k = k; filterDesc->c = c; filterDesc->h = h; filterDesc->w = w;
    filterDesc->set = true;
    return OK;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!convDesc) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "convDesc is NULL");
    cudnnConvolutionDescriptor_t d = obj_new(sizeof *d, OBJ_CONV);
    if (!d) return fail(CUDNN_STATUS_ALLOC_FAILED, __func__, "out of host memory");
    d->c.groups = 1;
    d->c.math = CUDNN_DEFAULT_MATH;
    *convDesc = d;
    return OK;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!convDesc) return OK;
    return obj_free(convDesc, OBJ_CONV) ? OK
           : fail_loud(CUDNN_STATUS_BAD_PARAM, __func__, "%p is not a live convolution descriptor (destroyed twice?)", (void *)convDesc);
}

static st_t conv_desc_live(const char *fn, cudnnConvolutionDescriptor_t d) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "convDesc is NULL");
    if (!reg_is(d, OBJ_CONV)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live convolution descriptor", (void *)d);
    return OK;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, int u,
                                              int v, int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    st_t rc = conv_desc_live(fn, convDesc);
    if (rc) return rc;
    if (pad_h < 0 || pad_w < 0) return fail(CUDNN_STATUS_BAD_PARAM, fn, "negative padding (%d, %d)", pad_h, pad_w);
    if (u <= 0 || v <= 0) return fail(CUDNN_STATUS_BAD_PARAM, fn, "stride (%d, %d) must be positive", u, v);
    if (dilation_h <= 0 || dilation_w <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "dilation (%d, %d) must be positive", dilation_h, dilation_w);
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "mode %d is not a cudnnConvolutionMode_t", (int)mode);
    if (!dt_size(computeType)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "computeType %d is not a data type", (int)computeType);
    conv_desc *c = &convDesc->c;
    c->ph = pad_h; c->pw = pad_w; c->sh = u; c->sw = v; c->dh = dilation_h; c->dw = dilation_w;
    c->mode = mode;
    c->ctype = computeType;
    c->set = true;
    return OK;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    st_t rc = conv_desc_live(__func__, convDesc);
    if (rc) return rc;
    if (groupCount < 1) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "groupCount %d must be positive", groupCount);
    convDesc->c.groups = groupCount;
    return OK;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    st_t rc = conv_desc_live(__func__, convDesc);
    if (rc) return rc;
    if ((unsigned)mathType > CUDNN_FMA_MATH) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "mathType %d is not a cudnnMathType_t", (int)mathType);
    convDesc->c.math = mathType;
    return OK;
}

/* Output size along one spatial dim; false when the dilated filter does not fit the padded input. */
static bool out_dim(int64_t in, int64_t pad, int64_t k, int64_t dil, int64_t stride, int64_t *out) {
    int64_t eff = (k - 1) * dil + 1, room = in + 2 * pad;
    if (eff > room) return false;
    *out = 1 + (room - eff) / stride;
    return true;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc, int *n, int *c, int *h,
                                                    int *w) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    conv_desc cd;
    tens x, f;
    st_t rc = get_conv(fn, convDesc, &cd);
    if (!rc) rc = get_tensor(fn, "inputTensorDesc", inputTensorDesc, &x);
    if (!rc) rc = get_filter(fn, "filterDesc", filterDesc, &f);
    if (rc) return rc;
    if (!n || !c || !h || !w) return fail(CUDNN_STATUS_BAD_PARAM, fn, "an output pointer is NULL");
    if (x.d[1] != f.d[1] * cd.groups)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "input has %lld channels, the filter %lld per group x %d groups",
                    (long long)x.d[1], (long long)f.d[1], cd.groups);
    int64_t oh, ow;
    if (!out_dim(x.d[2], cd.ph, f.d[2], cd.dh, cd.sh, &oh) || !out_dim(x.d[3], cd.pw, f.d[3], cd.dw, cd.sw, &ow))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "the dilated filter is larger than the padded input");
    *n = (int)x.d[0];
    *c = (int)f.d[0];
    *h = (int)oh;
    *w = (int)ow;
    return OK;
}

/* ================= convolution ================= */

enum { KF, KD, KW };              /* forward, backward data, backward filter */

/* One convolution as the three descriptors and the convolution descriptor define it:
 * x = image (dx for backward data), w = filter (dw for backward filter), y = output (dy). */
typedef struct conv_geom {
    tens x, w, y;
    cudnnDataType_t dt;
    int ph, pw, sh, sw, dh, dw, groups;
    bool flip;                    /* CUDNN_CONVOLUTION: a true convolution, the filter mirrored */
    cudnnMathType_t math;
} conv_geom;

static st_t conv_setup(const char *fn, cudnnTensorDescriptor_t xd, const char *xname, cudnnFilterDescriptor_t wd,
                       const char *wname, cudnnConvolutionDescriptor_t cdd, cudnnTensorDescriptor_t yd,
                       const char *yname, conv_geom *g) {
    conv_desc cd;
    st_t rc = get_tensor(fn, xname, xd, &g->x);
    if (!rc) rc = get_filter(fn, wname, wd, &g->w);
    if (!rc) rc = get_conv(fn, cdd, &cd);
    if (!rc) rc = get_tensor(fn, yname, yd, &g->y);
    if (rc) return rc;
    const tens *x = &g->x, *w = &g->w, *y = &g->y;
    if (x->dt != w->dt || x->dt != y->dt)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "data types differ: %s %s, %s %s, %s %s", xname, dt_name(x->dt), wname,
                    dt_name(w->dt), yname, dt_name(y->dt));
    /* the two configurations emulated: FLOAT_CONFIG and DOUBLE_CONFIG */
    if (!is_fd(x->dt) || cd.ctype != x->dt)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data with %s compute type is not a supported configuration",
                    dt_name(x->dt), dt_name(cd.ctype));
    if (x->d[1] != w->d[1] * cd.groups)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s has %lld channels but %s has %lld per group x %d groups", xname,
                    (long long)x->d[1], wname, (long long)w->d[1], cd.groups);
    if (w->d[0] % cd.groups)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s has %lld output channels, not a multiple of %d groups", wname,
                    (long long)w->d[0], cd.groups);
    if (y->d[0] != x->d[0] || y->d[1] != w->d[0])
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is [%lld, %lld, ...] but %s has %lld images and %s %lld output channels",
                    yname, (long long)y->d[0], (long long)y->d[1], xname, (long long)x->d[0], wname, (long long)w->d[0]);
    int64_t oh, ow;
    if (!out_dim(x->d[2], cd.ph, w->d[2], cd.dh, cd.sh, &oh) || !out_dim(x->d[3], cd.pw, w->d[3], cd.dw, cd.sw, &ow))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "the dilated %lldx%lld filter is larger than the padded %lldx%lld input",
                    (long long)w->d[2], (long long)w->d[3], (long long)x->d[2], (long long)x->d[3]);
    if (y->d[2] != oh || y->d[3] != ow)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s is %lldx%lld but this convolution produces %lldx%lld", yname,
                    (long long)y->d[2], (long long)y->d[3], (long long)oh, (long long)ow);
    g->dt = x->dt;
    g->ph = cd.ph; g->pw = cd.pw; g->sh = cd.sh; g->sw = cd.sw; g->dh = cd.dh; g->dw = cd.dw;
    g->groups = cd.groups;
    g->flip = cd.mode == CUDNN_CONVOLUTION;
    g->math = cd.math;
    return OK;
}

static double conv_flops(const conv_geom *g) {
    return 2.0 * (double)g->y.d[0] * (double)g->y.d[1] * (double)g->w.d[1] * (double)g->w.d[2] * (double)g->w.d[3] *
           (double)g->y.d[2] * (double)g->y.d[3];
}

static size_t pow2_at_least(int64_t v) {
    size_t p = 1;
    while ((int64_t)p < v) p <<= 1;
    return p;
}

/* One emulated algorithm on one geometry: whether it runs, its workspace, its determinism and a
 * made-up speed. The rules imitate cuDNN's familiar ones: the GEMM-style algorithms run
 * everything, FFT wants unit stride and dilation, fused Winograd 3x3 filters, both float only. */
typedef struct algo_spec {
    bool ok;
    size_t ws;
    bool det;
    double gflops;
} algo_spec;

static int algo_count(int kind) {
    return kind == KF ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
         : kind == KD ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

static algo_spec algo_of(int kind, int a, const conv_geom *g) {
    size_t es = dt_size(g->dt);
    int64_t cg = g->w.d[1], k = g->w.d[0], kk = g->w.d[2] * g->w.d[3];
    size_t col = (size_t)(cg * kk * g->y.d[2] * g->y.d[3]) * es;          /* one image unfolded */
    bool plain = g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1;
    bool f32 = g->dt == CUDNN_DATA_FLOAT;
    bool fft = plain && f32;
    bool wino = plain && f32 && g->w.d[2] == 3 && g->w.d[3] == 3 && g->groups == 1;
    size_t fh = pow2_at_least(g->x.d[2] + 2 * g->ph), fw = pow2_at_least(g->x.d[3] + 2 * g->pw);
    size_t fft_ws = 2 * es * fh * (fw / 2 + 1) * (size_t)(g->x.d[0] * g->x.d[1] + k * cg + g->y.d[0] * k);
    algo_spec no = { false, 0, true, 0 };
    if (kind == KF) {
        switch (a) {
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return (algo_spec){ true, 0, true, 1500 };
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
            return (algo_spec){ true, (size_t)(cg * kk) * sizeof(int32_t), true, 3000 };
        case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return (algo_spec){ true, col, true, 2200 };
        case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return fft ? (algo_spec){ true, fft_ws, true, 2600 } : no;
        case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return wino ? (algo_spec){ true, 0, true, 4000 } : no;
        default: return no;
        }
    }
    if (kind == KD) {
        switch (a) {
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return (algo_spec){ true, 0, false, 1400 };
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return (algo_spec){ true, col, true, 2600 };
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return fft ? (algo_spec){ true, fft_ws, true, 2400 } : no;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return wino ? (algo_spec){ true, 0, true, 3600 } : no;
        default: return no;
        }
    }
    switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return (algo_spec){ true, 0, false, 1200 };
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return (algo_spec){ true, col, true, 2400 };
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return fft ? (algo_spec){ true, fft_ws, true, 2000 } : no;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return (algo_spec){ true, (size_t)(k * cg * kk) * es, false, 2800 };
    default: return no;
    }
}

/* The algorithm a call names, checked against the geometry and the workspace it is given. */
static st_t algo_for_call(const char *fn, int kind, int a, const conv_geom *g, void *ws, size_t wsz, size_t *need) {
    if (a < 0 || a >= algo_count(kind)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "algo %d is not a valid algorithm", a);
    algo_spec sp = algo_of(kind, a, g);
    if (!sp.ok) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "algo %d does not support this configuration", a);
    if (sp.ws > wsz)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "algo %d needs %zu workspace bytes, workSpaceSizeInBytes is %zu", a, sp.ws, wsz);
    if (sp.ws) {
        st_t rc = need_dev(fn, "workSpace", ws, sp.ws);
        if (rc) return rc;
    }
    if (ws && wsz && !dgemu_is_device(ws, wsz))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "workSpace (%p) is not device memory of the %zu bytes claimed", ws, wsz);
    *need = sp.ws;
    return OK;
}

typedef struct conv_work {
    conv_geom g;
    int kind;
    bool scribble;                /* Find: overwrite the output with NaN instead of computing */
    const void *in1, *in2;        /* KF: x, w   KD: w, dy   KW: x, dy */
    void *out;                    /* KF: y      KD: dx      KW: dw */
    double alpha, beta;
    void *ws;
    size_t ws_bytes;
} conv_work;

/* A dense double copy of a strided operand (n, c, h, w order), or NULL after a fault. */
static double *dense_copy(const char *what, const void *p, const tens *t) {
    double *d = work_scratch(what, numel(t));
    if (!d) return NULL;
    int64_t i = 0;
    for (int64_t n = 0; n < t->d[0]; n++)
        for (int64_t c = 0; c < t->d[1]; c++)
            for (int64_t h = 0; h < t->d[2]; h++)
                for (int64_t w = 0; w < t->d[3]; w++) d[i++] = ld(p, t->dt, at(t, n, c, h, w));
    return d;
}

/* out = alpha * acc + beta * out over a strided operand, acc dense. */
static void blend_dense(void *p, const tens *t, const double *acc, double alpha, double beta) {
    int64_t i = 0;
    for (int64_t n = 0; n < t->d[0]; n++)
        for (int64_t c = 0; c < t->d[1]; c++)
            for (int64_t h = 0; h < t->d[2]; h++)
                for (int64_t w = 0; w < t->d[3]; w++) blend(p, t, at(t, n, c, h, w), acc[i++], alpha, beta);
}

/* The reference loop of all three kinds: every product x[n][ci][ih][iw] * w[k][c][r][s] of the
 * convolution (ci = the group's first channel + c; ih = oh*sh - ph + r*dh, likewise iw; taps
 * mirrored for a true convolution), accumulated into y (forward), x (backward data) or w
 * (backward filter). The operands are dense double copies, so the loop is pure arithmetic. */
static void conv_nk(int kind, const conv_geom *g, double *X, double *Wt, double *Y, int64_t n, int64_t k) {
    int64_t K = g->y.d[1], OH = g->y.d[2], OW = g->y.d[3];
    int64_t C = g->x.d[1], H = g->x.d[2], W = g->x.d[3];
    int64_t CG = g->w.d[1], KH = g->w.d[2], KW = g->w.d[3], KG = K / g->groups;
    int64_t c0 = (k / KG) * CG;
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t yi = ((n * K + k) * OH + oh) * OW + ow;
            double yv = kind == KF ? 0 : Y[yi];
            for (int64_t c = 0; c < CG; c++) {
                int64_t xb = (n * C + c0 + c) * H, wb = (k * CG + c) * KH;
                for (int64_t r = 0; r < KH; r++) {
                    int64_t ih = oh * g->sh - g->ph + r * g->dh;
                    if (ih < 0 || ih >= H) continue;
                    int64_t xr = (xb + ih) * W, wr = (wb + (g->flip ? KH - 1 - r : r)) * KW;
                    for (int64_t s = 0; s < KW; s++) {
                        int64_t iw = ow * g->sw - g->pw + s * g->dw;
                        if (iw < 0 || iw >= W) continue;
                        int64_t xi = xr + iw, wi = wr + (g->flip ? KW - 1 - s : s);
                        if (kind == KF) yv += X[xi] * Wt[wi];
                        else if (kind == KD) X[xi] += yv * Wt[wi];
                        else Wt[wi] += yv * X[xi];
                    }
                }
            }
            if (kind == KF) Y[yi] = yv;
        }
}

/* Spread over threads so that no two write one element (forward: each (n, k) its own outputs;
 * backward data: each image its own input gradient; backward filter: each filter its own
 * gradient), and every element still accumulates in the serial loop's order. */
static void conv_loop(int kind, const conv_geom *g, double *X, double *Wt, double *Y) {
    int64_t N = g->y.d[0], K = g->y.d[1];
    if (kind == KF) {
#pragma omp parallel for collapse(2) schedule(dynamic)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) conv_nk(kind, g, X, Wt, Y, n, k);
    } else if (kind == KD) {
#pragma omp parallel for schedule(dynamic)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) conv_nk(kind, g, X, Wt, Y, n, k);
    } else {
#pragma omp parallel for schedule(dynamic)
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++) conv_nk(kind, g, X, Wt, Y, n, k);
    }
}

/* The kind's two inputs copied dense, the third operand accumulated from zero, then blended. */
static void conv_compute(const conv_work *k) {
    static const char *const what[3] = { "cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                                         "cudnnConvolutionBackwardFilter" };
    const conv_geom *g = &k->g;
    const char *fn = what[k->kind];
    double *X, *Wt, *Y;
    if (k->kind == KF) {
        X = dense_copy(fn, k->in1, &g->x);
        Wt = dense_copy(fn, k->in2, &g->w);
        Y = work_scratch(fn, numel(&g->y));
    } else if (k->kind == KD) {
        Wt = dense_copy(fn, k->in1, &g->w);
        Y = dense_copy(fn, k->in2, &g->y);
        X = work_scratch(fn, numel(&g->x));
    } else {
        X = dense_copy(fn, k->in1, &g->x);
        Y = dense_copy(fn, k->in2, &g->y);
        Wt = work_scratch(fn, numel(&g->w));
    }
    if (X && Wt && Y) {
        conv_loop(k->kind, g, X, Wt, Y);
        const tens *out = k->kind == KF ? &g->y : k->kind == KD ? &g->x : &g->w;
        blend_dense(k->out, out, k->kind == KF ? Y : k->kind == KD ? X : Wt, k->alpha, k->beta);
    }
    free(X);
    free(Wt);
    free(Y);
}

static void fill_nan(void *p, const tens *t) {
    for (int64_t n = 0; n < t->d[0]; n++)
        for (int64_t c = 0; c < t->d[1]; c++)
            for (int64_t h = 0; h < t->d[2]; h++)
                for (int64_t w = 0; w < t->d[3]; w++) stv(p, t->dt, at(t, n, c, h, w), NAN);
}

static int conv_run(void *arg) {
    conv_work *k = arg;
    /* an algorithm's scratch holds garbage afterwards; so does ours */
    if (k->ws_bytes) memset(k->ws, 0xA5, k->ws_bytes);
    const tens *out = k->kind == KF ? &k->g.y : k->kind == KD ? &k->g.x : &k->g.w;
    if (k->scribble) fill_nan(k->out, out);
    else conv_compute(k);
    return DGEMU_DONE;
}

/* The device operands of a kind, in its argument order, with the bytes each spans. */
static st_t conv_operands(const char *fn, int kind, const conv_geom *g, const void *in1, const void *in2, const void *out) {
    static const char *const names[3][3] = { { "x", "w", "y" }, { "w", "dy", "dx" }, { "x", "dy", "dw" } };
    const tens *t1 = kind == KD ? &g->w : &g->x, *t2 = kind == KF ? &g->w : &g->y;
    const tens *to = kind == KF ? &g->y : kind == KD ? &g->x : &g->w;
    st_t rc = need_dev(fn, names[kind][0], in1, bytes_of(t1));
    if (!rc) rc = need_dev(fn, names[kind][1], in2, bytes_of(t2));
    if (!rc) rc = need_dev(fn, names[kind][2], out, bytes_of(to));
    return rc;
}

/* The three compute entries after their descriptors are read: checks, snapshot, queue. */
static st_t conv_call(const char *fn, int kind, cudaStream_t s, const conv_geom *g, const void *alpha, const void *beta,
                      const void *in1, const void *in2, void *out, int algo, void *ws, size_t wsz) {
    size_t need = 0;
    st_t rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (!rc) rc = conv_operands(fn, kind, g, in1, in2, out);
    if (!rc) rc = algo_for_call(fn, kind, algo, g, ws, wsz, &need);
    if (!rc) rc = not_poisoned(fn);
    if (rc) return rc;
    conv_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (conv_work){ .g = *g, .kind = kind, .in1 = in1, .in2 = in2, .out = out, .alpha = scal(alpha, g->dt),
                      .beta = scal(beta, g->dt), .ws = ws, .ws_bytes = need };
    return submit(fn, s, conv_run, k);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", wDesc, "wDesc", convDesc, yDesc, "yDesc", &g);
    if (rc) return rc;
    return conv_call(__func__, KF, s, &g, alpha, beta, x, w, y, (int)algo, workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha, const cudnnFilterDescriptor_t wDesc,
                                           const void *w, const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, dxDesc, "dxDesc", wDesc, "wDesc", convDesc, dyDesc, "dyDesc", &g);
    if (rc) return rc;
    return conv_call(__func__, KD, s, &g, alpha, beta, w, dy, dx, (int)algo, workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", dwDesc, "dwDesc", convDesc, dyDesc, "dyDesc", &g);
    if (rc) return rc;
    return conv_call(__func__, KW, s, &g, alpha, beta, x, dy, dw, (int)algo, workSpace, workSpaceSizeInBytes);
}

/* ---- workspace sizes ---- */

static st_t ws_size(const char *fn, int kind, const conv_geom *g, int algo, size_t *size) {
    if (!size) return fail(CUDNN_STATUS_BAD_PARAM, fn, "sizeInBytes is NULL");
    if (algo < 0 || algo >= algo_count(kind)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "algo %d is not a valid algorithm", algo);
    algo_spec sp = algo_of(kind, algo, g);
    if (!sp.ok) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "algo %d does not support this configuration", algo);
    *size = sp.ws;
    return OK;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                      const cudnnFilterDescriptor_t wDesc,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      const cudnnTensorDescriptor_t yDesc,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    conv_geom g;
    st_t rc = get_handle(__func__, handle, NULL);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", wDesc, "wDesc", convDesc, yDesc, "yDesc", &g);
    return rc ? rc : ws_size(__func__, KF, &g, (int)algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                           const cudnnTensorDescriptor_t dyDesc,
                                                           const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t dxDesc,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *sizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    conv_geom g;
    st_t rc = get_handle(__func__, handle, NULL);
    if (!rc) rc = conv_setup(__func__, dxDesc, "dxDesc", wDesc, "wDesc", convDesc, dyDesc, "dyDesc", &g);
    return rc ? rc : ws_size(__func__, KD, &g, (int)algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                             const cudnnTensorDescriptor_t dyDesc,
                                                             const cudnnConvolutionDescriptor_t convDesc,
                                                             const cudnnFilterDescriptor_t gradDesc,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t *sizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    conv_geom g;
    st_t rc = get_handle(__func__, handle, NULL);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", gradDesc, "gradDesc", convDesc, dyDesc, "dyDesc", &g);
    return rc ? rc : ws_size(__func__, KW, &g, (int)algo, sizeInBytes);
}

/* ---- algorithm search ---- */

/* One perf result, before it is copied into the kind's struct. */
typedef struct perf {
    int algo;
    st_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} perf;

/* success first, fastest first; then allocation failures, then unsupported; ties by algo id */
static int perf_rank(const perf *p) {
    return p->status == OK ? 0 : p->status == CUDNN_STATUS_ALLOC_FAILED ? 1 : 2;
}
static int perf_cmp(const void *a_, const void *b_) {
    const perf *a = a_, *b = b_;
    int ra = perf_rank(a), rb = perf_rank(b);
    if (ra != rb) return ra - rb;
    if (ra == 0 && a->time != b->time) return a->time < b->time ? -1 : 1;
    if (a->algo != b->algo) return a->algo - b->algo;
    return (int)a->math - (int)b->math;
}

/* Made-up results: time from the flop count and each algorithm's nominal speed. Float data
 * under a math type that allows tensor cores also gets a faster tensor-op run of algorithm 1,
 * as cuDNN lists TF32 kernels as separate results. Returns how many were written to p. */
static int make_perfs(int kind, const conv_geom *g, size_t wsz, perf *p) {
    double flops = conv_flops(g);
    bool f32 = g->dt == CUDNN_DATA_FLOAT;
    cudnnMathType_t plain_math = g->math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    int n = 0;
    for (int a = 0; a < algo_count(kind); a++) {
        algo_spec sp = algo_of(kind, a, g);
        perf e = { a, OK, -1.0f, sp.ws, sp.det ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC, plain_math };
        if (!sp.ok) {
            e.status = CUDNN_STATUS_NOT_SUPPORTED;
            e.memory = 0;
        } else if (sp.ws > wsz) {
            e.status = CUDNN_STATUS_ALLOC_FAILED;
        } else {
            e.time = (float)(0.004 + flops / (sp.gflops * (f32 ? 1e6 : 1.25e5)));
        }
        p[n++] = e;
        if (a == 1 && sp.ok && f32 && g->math != CUDNN_FMA_MATH) {
            perf t = e;
            t.math = g->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                                       : CUDNN_TENSOR_OP_MATH;
            if (t.status == OK) t.time = (float)(0.003 + flops / (sp.gflops * 4e6));
            p[n++] = t;
        }
    }
    qsort(p, (size_t)n, sizeof *p, perf_cmp);
    return n;
}

/* What the three Find*Ex share once their descriptors are read: checks, the blocking run that
 * overwrites the output, and the sorted results (at most `req` of them in `out`). */
static st_t find_common(const char *fn, int kind, cudaStream_t s, const conv_geom *g, const void *in1, const void *in2,
                        void *outp, int req, int *returned, perf *out, void *ws, size_t wsz) {
    st_t rc = OK;
    if (req < 1) return fail(CUDNN_STATUS_BAD_PARAM, fn, "requestedAlgoCount %d must be positive", req);
    if (!returned) return fail(CUDNN_STATUS_BAD_PARAM, fn, "returnedAlgoCount is NULL");
    if (!out) return fail(CUDNN_STATUS_BAD_PARAM, fn, "perfResults is NULL");
    if ((rc = conv_operands(fn, kind, g, in1, in2, outp))) return rc;
    if (wsz && (rc = need_dev(fn, "workSpace", ws, wsz))) return rc;
    if ((rc = not_poisoned(fn))) return rc;
    conv_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (conv_work){ .g = *g, .kind = kind, .scribble = true, .in1 = in1, .in2 = in2, .out = outp, .ws = ws,
                      .ws_bytes = wsz };
    if ((rc = submit(fn, s, conv_run, k))) return rc;
    /* real cuDNN times every algorithm before returning */
    cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return fail(CUDNN_STATUS_EXECUTION_FAILED, fn, "the search's work failed: %s", cudaGetErrorName(e));
    perf all[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = make_perfs(kind, g, wsz, all);
    if (n > req) n = req;
    memcpy(out, all, (size_t)n * sizeof *out);
    *returned = n;
    return OK;
}

/* The kinds' perf structs share one layout but are distinct types: copy member by member. */
#define COPY_PERFS(dst, src, n, algo_t)                                       \
    for (int i_ = 0; i_ < (n); i_++) {                                        \
        memset(&(dst)[i_], 0, sizeof (dst)[i_]);                              \
        (dst)[i_].algo = (algo_t)(src)[i_].algo;                              \
        (dst)[i_].status = (src)[i_].status;                                  \
        (dst)[i_].time = (src)[i_].time;                                      \
        (dst)[i_].memory = (src)[i_].memory;                                  \
        (dst)[i_].determinism = (src)[i_].det;                                \
        (dst)[i_].mathType = (src)[i_].math;                                  \
    }

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                     const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     const cudnnTensorDescriptor_t yDesc, void *y,
                                                     const int requestedAlgoCount, int *returnedAlgoCount,
                                                     cudnnConvolutionFwdAlgoPerf_t *perfResults, void *workSpace,
                                                     size_t workSpaceSizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    perf p[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", wDesc, "wDesc", convDesc, yDesc, "yDesc", &g);
    if (!rc) rc = find_common(__func__, KF, s, &g, x, w, y, requestedAlgoCount, returnedAlgoCount ? &n : NULL, perfResults ? p : NULL, workSpace,
                              workSpaceSizeInBytes);
    if (rc) return rc;
    COPY_PERFS(perfResults, p, n, cudnnConvolutionFwdAlgo_t);
    *returnedAlgoCount = n;
    return OK;
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                          const void *w, const cudnnTensorDescriptor_t dyDesc,
                                                          const void *dy, const cudnnConvolutionDescriptor_t convDesc,
                                                          const cudnnTensorDescriptor_t dxDesc, void *dx,
                                                          const int requestedAlgoCount, int *returnedAlgoCount,
                                                          cudnnConvolutionBwdDataAlgoPerf_t *perfResults,
                                                          void *workSpace, size_t workSpaceSizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    perf p[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, dxDesc, "dxDesc", wDesc, "wDesc", convDesc, dyDesc, "dyDesc", &g);
    if (!rc) rc = find_common(__func__, KD, s, &g, w, dy, dx, requestedAlgoCount, returnedAlgoCount ? &n : NULL, perfResults ? p : NULL, workSpace,
                              workSpaceSizeInBytes);
    if (rc) return rc;
    COPY_PERFS(perfResults, p, n, cudnnConvolutionBwdDataAlgo_t);
    *returnedAlgoCount = n;
    return OK;
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                            const void *x, const cudnnTensorDescriptor_t dyDesc,
                                                            const void *y, const cudnnConvolutionDescriptor_t convDesc,
                                                            const cudnnFilterDescriptor_t dwDesc, void *dw,
                                                            const int requestedAlgoCount, int *returnedAlgoCount,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t *perfResults,
                                                            void *workSpace, size_t workSpaceSizeInBytes) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    cudaStream_t s;
    conv_geom g;
    perf p[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    st_t rc = get_handle(__func__, handle, &s);
    if (!rc) rc = conv_setup(__func__, xDesc, "xDesc", dwDesc, "dwDesc", convDesc, dyDesc, "dyDesc", &g);
    if (!rc) rc = find_common(__func__, KW, s, &g, x, y, dw, requestedAlgoCount, returnedAlgoCount ? &n : NULL, perfResults ? p : NULL, workSpace,
                              workSpaceSizeInBytes);
    if (rc) return rc;
    COPY_PERFS(perfResults, p, n, cudnnConvolutionBwdFilterAlgo_t);
    *returnedAlgoCount = n;
    return OK;
}

/* ---- cudnnConvolutionBackwardBias: db[c] = alpha * sum over n, h, w of dy + beta * db[c] ---- */

typedef struct bias_work {
    tens dy, db;
    const void *src;
    void *dst;
    double alpha, beta;
} bias_work;

static int bias_run(void *arg) {
    bias_work *k = arg;
    for (int64_t c = 0; c < k->dy.d[1]; c++) {
        double sum = 0;
        for (int64_t n = 0; n < k->dy.d[0]; n++)
            for (int64_t h = 0; h < k->dy.d[2]; h++)
                for (int64_t w = 0; w < k->dy.d[3]; w++) sum += ld(k->src, k->dy.dt, at(&k->dy, n, c, h, w));
        blend(k->dst, &k->db, at(&k->db, 0, c, 0, 0), sum, k->alpha, k->beta);
    }
    return DGEMU_DONE;
}

cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void *alpha,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy, const void *beta,
                                           const cudnnTensorDescriptor_t dbDesc, void *db) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    tens t, b;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = get_tensor(fn, "dyDesc", dyDesc, &t);
    if (!rc) rc = get_tensor(fn, "dbDesc", dbDesc, &b);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (b.d[0] != 1 || b.d[2] != 1 || b.d[3] != 1)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "dbDesc must be 1xCx1x1, not [%lld, %lld, %lld, %lld]", (long long)b.d[0],
                    (long long)b.d[1], (long long)b.d[2], (long long)b.d[3]);
    if (b.d[1] != t.d[1])
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "dy has %lld feature maps, db %lld", (long long)t.d[1], (long long)b.d[1]);
    if (b.dt != t.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dy is %s but db is %s", dt_name(t.dt), dt_name(b.dt));
    if (!is_fd(t.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(t.dt));
    if ((rc = need_dev(fn, "dy", dy, bytes_of(&t))) || (rc = need_dev(fn, "db", db, bytes_of(&b)))) return rc;
    if ((rc = not_poisoned(fn))) return rc;
    bias_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (bias_work){ t, b, dy, db, scal(alpha, t.dt), scal(beta, t.dt) };
    return submit(fn, s, bias_run, k);
}

/* ================= batch normalization ================= */

/* The per-feature parameter descriptor a mode wants for x: 1xCx1x1 (spatial) or 1xCxHxW (per
 * activation), float for half/bfloat16 data, the data type otherwise. */
static tens bn_param_shape(const tens *x, bool spatial) {
    tens p = { .dt = (x->dt == CUDNN_DATA_HALF || x->dt == CUDNN_DATA_BFLOAT16) ? CUDNN_DATA_FLOAT : x->dt,
               .d = { 1, x->d[1], spatial ? 1 : x->d[2], spatial ? 1 : x->d[3] } };
    packed(&p, CUDNN_TENSOR_NCHW);
    return p;
}

static bool bn_mode_ok(cudnnBatchNormMode_t m) { return (unsigned)m <= CUDNN_BATCHNORM_SPATIAL_PERSISTENT; }

cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t derivedBnDesc, const cudnnTensorDescriptor_t xDesc,
                                            cudnnBatchNormMode_t mode) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    tens x;
    st_t rc = tensor_desc(fn, derivedBnDesc);
    if (!rc) rc = get_tensor(fn, "xDesc", xDesc, &x);
    if (rc) return rc;
    if (!bn_mode_ok(mode)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "mode %d is not a cudnnBatchNormMode_t", (int)mode);
    derivedBnDesc->t = bn_param_shape(&x, mode != CUDNN_BATCHNORM_PER_ACTIVATION);
    derivedBnDesc->set = true;
    return OK;
}

/* A batch norm's tensors: x, the output or gradient tensors (same dims and type as x), and the
 * per-feature parameter descriptor. A feature is a channel (spatial: its N*H*W values are
 * normalised together) or one (c, h, w) position (per activation: over N). */
typedef struct bn_geom {
    tens x, y, z, p;              /* z: dx in the backward, unused otherwise */
    bool spatial;
} bn_geom;

static st_t bn_setup(const char *fn, cudnnBatchNormMode_t mode, cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd,
                     const char *yname, cudnnTensorDescriptor_t zd, cudnnTensorDescriptor_t pd, const char *pname,
                     double eps, bn_geom *g) {
    if (!bn_mode_ok(mode)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "mode %d is not a cudnnBatchNormMode_t", (int)mode);
    st_t rc = get_tensor(fn, "xDesc", xd, &g->x);
    if (!rc) rc = get_tensor(fn, yname, yd, &g->y);
    if (!rc && zd) rc = get_tensor(fn, "dxDesc", zd, &g->z);
    if (!rc) rc = get_tensor(fn, pname, pd, &g->p);
    if (rc) return rc;
    if (!zd) g->z = g->y;
    if (!same_dims(&g->x, &g->y) || !same_dims(&g->x, &g->z))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and %s%s differ in dims", yname, zd ? " / dxDesc" : "");
    if (g->x.dt != g->y.dt || g->x.dt != g->z.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and %s differ in data type", yname);
    if (!is_fd(g->x.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(g->x.dt));
    g->spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
    tens want = bn_param_shape(&g->x, g->spatial);
    if (!same_dims(&g->p, &want))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is [%lld, %lld, %lld, %lld], this mode needs [1, %lld, %lld, %lld]", pname,
                    (long long)g->p.d[0], (long long)g->p.d[1], (long long)g->p.d[2], (long long)g->p.d[3],
                    (long long)want.d[1], (long long)want.d[2], (long long)want.d[3]);
    if (g->p.dt != want.dt)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is %s, %s data needs %s parameters", pname, dt_name(g->p.dt),
                    dt_name(g->x.dt), dt_name(want.dt));
    if (!(eps >= CUDNN_BN_MIN_EPSILON))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "epsilon %g is below CUDNN_BN_MIN_EPSILON (%g)", eps, CUDNN_BN_MIN_EPSILON);
    return OK;
}

static int64_t bn_features(const bn_geom *g) { return g->spatial ? g->x.d[1] : g->x.d[1] * g->x.d[2] * g->x.d[3]; }
static int64_t bn_count(const bn_geom *g) { return g->spatial ? g->x.d[0] * g->x.d[2] * g->x.d[3] : g->x.d[0]; }

/* Offset in t of value e of feature f. */
static int64_t bn_at(const bn_geom *g, const tens *t, int64_t f, int64_t e) {
    int64_t hw = g->x.d[2] * g->x.d[3];
    if (g->spatial) return at(t, e / hw, f, (e % hw) / g->x.d[3], e % g->x.d[3]);
    return at(t, e, f / hw, (f % hw) / g->x.d[3], f % g->x.d[3]);
}
/* Offset of feature f in the parameter tensor. */
static int64_t bn_pat(const bn_geom *g, int64_t f) {
    if (g->spatial) return at(&g->p, 0, f, 0, 0);
    int64_t hw = g->x.d[2] * g->x.d[3];
    return at(&g->p, 0, f / hw, (f % hw) / g->x.d[3], f % g->x.d[3]);
}

/* The batch mean and biased variance of feature f, two passes in double. */
static void bn_stats(const bn_geom *g, const void *x, int64_t f, double *mean, double *var) {
    int64_t m = bn_count(g);
    double s = 0, q = 0;
    for (int64_t e = 0; e < m; e++) s += ld(x, g->x.dt, bn_at(g, &g->x, f, e));
    s /= (double)m;
    for (int64_t e = 0; e < m; e++) {
        double d = ld(x, g->x.dt, bn_at(g, &g->x, f, e)) - s;
        q += d * d;
    }
    *mean = s;
    *var = q / (double)m;
}

static size_t bn_param_bytes(const bn_geom *g) { return bytes_of(&g->p); }

typedef struct bn_fwd_work {
    bn_geom g;
    bool training;
    double alpha, beta, factor, eps;
    const void *x, *scale, *bias;
    void *y;
    void *run_mean, *run_var;     /* training: updated when given; inference: read (est. mean / variance) */
    void *save_mean, *save_inv;
} bn_fwd_work;

static int bn_fwd_run(void *arg) {
    bn_fwd_work *k = arg;
    const bn_geom *g = &k->g;
    cudnnDataType_t pt = g->p.dt;
    int64_t m = bn_count(g);
    for (int64_t f = 0; f < bn_features(g); f++) {
        int64_t pi = bn_pat(g, f);
        double mean, var;
        if (k->training) bn_stats(g, k->x, f, &mean, &var);
        else {
            mean = ld(k->run_mean, pt, pi);
            var = ld(k->run_var, pt, pi);
        }
        double inv = 1.0 / sqrt(var + k->eps);
        double sc = ld(k->scale, pt, pi), bi = ld(k->bias, pt, pi);
        for (int64_t e = 0; e < m; e++) {
            double xv = ld(k->x, g->x.dt, bn_at(g, &g->x, f, e));
            blend(k->y, &g->y, bn_at(g, &g->y, f, e), sc * (xv - mean) * inv + bi, k->alpha, k->beta);
        }
        if (!k->training) continue;
        if (k->run_mean) {
            /* the running variance takes the unbiased estimate (NaN when one value per feature:
             * it is undefined there); factor 1 replaces, without reading what was there (the first
             * call of a training run may find garbage) */
            double unbiased = var * (double)m / (double)(m - 1);
            double om = k->factor == 1.0 ? 0 : ld(k->run_mean, pt, pi), ov = k->factor == 1.0 ? 0 : ld(k->run_var, pt, pi);
            stv(k->run_mean, pt, pi, (1 - k->factor) * om + k->factor * mean);
            stv(k->run_var, pt, pi, (1 - k->factor) * ov + k->factor * unbiased);
        }
        if (k->save_mean) {
            stv(k->save_mean, pt, pi, mean);
            stv(k->save_inv, pt, pi, inv);
        }
    }
    return DGEMU_DONE;
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha,
                                                     const void *beta, const cudnnTensorDescriptor_t xDesc,
                                                     const void *x, const cudnnTensorDescriptor_t yDesc, void *y,
                                                     const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
                                                     const void *bnScale, const void *bnBias,
                                                     double exponentialAverageFactor, void *resultRunningMean,
                                                     void *resultRunningVariance, double epsilon, void *resultSaveMean,
                                                     void *resultSaveInvVariance) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    bn_geom g;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = bn_setup(fn, mode, xDesc, yDesc, "yDesc", NULL, bnScaleBiasMeanVarDesc, "bnScaleBiasMeanVarDesc", epsilon, &g);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (!resultRunningMean != !resultRunningVariance)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "resultRunningMean and resultRunningVariance must both be given or both be NULL");
    if (!resultSaveMean != !resultSaveInvVariance)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "resultSaveMean and resultSaveInvVariance must both be given or both be NULL");
    size_t pb = bn_param_bytes(&g);
    if ((rc = need_dev(fn, "x", x, bytes_of(&g.x))) || (rc = need_dev(fn, "y", y, bytes_of(&g.y))) ||
        (rc = need_dev(fn, "bnScale", bnScale, pb)) || (rc = need_dev(fn, "bnBias", bnBias, pb)))
        return rc;
    if (resultRunningMean && ((rc = need_dev(fn, "resultRunningMean", resultRunningMean, pb)) ||
                              (rc = need_dev(fn, "resultRunningVariance", resultRunningVariance, pb))))
        return rc;
    if (resultSaveMean && ((rc = need_dev(fn, "resultSaveMean", resultSaveMean, pb)) ||
                           (rc = need_dev(fn, "resultSaveInvVariance", resultSaveInvVariance, pb))))
        return rc;
    if ((rc = not_poisoned(fn))) return rc;
    bn_fwd_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (bn_fwd_work){ .g = g, .training = true, .alpha = scal(alpha, g.x.dt), .beta = scal(beta, g.x.dt),
                        .factor = exponentialAverageFactor, .eps = epsilon, .x = x, .scale = bnScale, .bias = bnBias,
                        .y = y, .run_mean = resultRunningMean, .run_var = resultRunningVariance,
                        .save_mean = resultSaveMean, .save_inv = resultSaveInvVariance };
    return submit(fn, s, bn_fwd_run, k);
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t handle, cudnnBatchNormMode_t mode,
                                                      const void *alpha, const void *beta,
                                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                                      const cudnnTensorDescriptor_t yDesc, void *y,
                                                      const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
                                                      const void *bnScale, const void *bnBias,
                                                      const void *estimatedMean, const void *estimatedVariance,
                                                      double epsilon) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    bn_geom g;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = bn_setup(fn, mode, xDesc, yDesc, "yDesc", NULL, bnScaleBiasMeanVarDesc, "bnScaleBiasMeanVarDesc", epsilon, &g);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    size_t pb = bn_param_bytes(&g);
    if ((rc = need_dev(fn, "x", x, bytes_of(&g.x))) || (rc = need_dev(fn, "y", y, bytes_of(&g.y))) ||
        (rc = need_dev(fn, "bnScale", bnScale, pb)) || (rc = need_dev(fn, "bnBias", bnBias, pb)) ||
        (rc = need_dev(fn, "estimatedMean", estimatedMean, pb)) ||
        (rc = need_dev(fn, "estimatedVariance", estimatedVariance, pb)))
        return rc;
    if ((rc = not_poisoned(fn))) return rc;
    bn_fwd_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (bn_fwd_work){ .g = g, .training = false, .alpha = scal(alpha, g.x.dt), .beta = scal(beta, g.x.dt),
                        .eps = epsilon, .x = x, .scale = bnScale, .bias = bnBias, .y = y,
                        .run_mean = (void *)estimatedMean, .run_var = (void *)estimatedVariance };
    return submit(fn, s, bn_fwd_run, k);
}

typedef struct bn_bwd_work {
    bn_geom g;
    double a_data, b_data, a_param, b_param, eps;
    const void *x, *dy, *scale, *saved_mean, *saved_inv;
    void *dx, *dscale, *dbias;
} bn_bwd_work;

static int bn_bwd_run(void *arg) {
    bn_bwd_work *k = arg;
    const bn_geom *g = &k->g;
    cudnnDataType_t pt = g->p.dt, dt = g->x.dt;
    int64_t m = bn_count(g);
    for (int64_t f = 0; f < bn_features(g); f++) {
        int64_t pi = bn_pat(g, f);
        double mean, inv;
        if (k->saved_mean) {
            mean = ld(k->saved_mean, pt, pi);
            inv = ld(k->saved_inv, pt, pi);
        } else {
            double var;
            bn_stats(g, k->x, f, &mean, &var);
            inv = 1.0 / sqrt(var + k->eps);
        }
        /* dbias = sum dy, dscale = sum dy * xhat; dx = scale * inv / M * (M dy - dbias - xhat dscale) */
        double sdy = 0, sdyx = 0;
        for (int64_t e = 0; e < m; e++) {
            double d = ld(k->dy, dt, bn_at(g, &g->y, f, e));
            double xh = (ld(k->x, dt, bn_at(g, &g->x, f, e)) - mean) * inv;
            sdy += d;
            sdyx += d * xh;
        }
        double sc = ld(k->scale, pt, pi), cm = (double)m;
        for (int64_t e = 0; e < m; e++) {
            double d = ld(k->dy, dt, bn_at(g, &g->y, f, e));
            double xh = (ld(k->x, dt, bn_at(g, &g->x, f, e)) - mean) * inv;
            blend(k->dx, &g->z, bn_at(g, &g->z, f, e), sc * inv / cm * (cm * d - sdy - xh * sdyx), k->a_data, k->b_data);
        }
        blend(k->dscale, &g->p, pi, sdyx, k->a_param, k->b_param);
        blend(k->dbias, &g->p, pi, sdy, k->a_param, k->b_param);
    }
    return DGEMU_DONE;
}

cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t handle, cudnnBatchNormMode_t mode,
                                              const void *alphaDataDiff, const void *betaDataDiff,
                                              const void *alphaParamDiff, const void *betaParamDiff,
                                              const cudnnTensorDescriptor_t xDesc, const void *x,
                                              const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                              const cudnnTensorDescriptor_t dxDesc, void *dx,
                                              const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void *bnScale,
                                              void *dBnScaleResult, void *dBnBiasResult, double epsilon,
                                              const void *savedMean, const void *savedInvVariance) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    bn_geom g;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = bn_setup(fn, mode, xDesc, dyDesc, "dyDesc", dxDesc, dBnScaleBiasDesc, "dBnScaleBiasDesc", epsilon, &g);
    if (!rc) rc = need_host(fn, "alphaDataDiff", alphaDataDiff);
    if (!rc) rc = need_host(fn, "betaDataDiff", betaDataDiff);
    if (!rc) rc = need_host(fn, "alphaParamDiff", alphaParamDiff);
    if (!rc) rc = need_host(fn, "betaParamDiff", betaParamDiff);
    if (rc) return rc;
    if (!savedMean != !savedInvVariance)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "savedMean and savedInvVariance must both be given or both be NULL");
    size_t pb = bn_param_bytes(&g);
    if ((rc = need_dev(fn, "x", x, bytes_of(&g.x))) || (rc = need_dev(fn, "dy", dy, bytes_of(&g.y))) ||
        (rc = need_dev(fn, "dx", dx, bytes_of(&g.z))) || (rc = need_dev(fn, "bnScale", bnScale, pb)) ||
        (rc = need_dev(fn, "dBnScaleResult", dBnScaleResult, pb)) || (rc = need_dev(fn, "dBnBiasResult", dBnBiasResult, pb)))
        return rc;
    if (savedMean && ((rc = need_dev(fn, "savedMean", savedMean, pb)) ||
                      (rc = need_dev(fn, "savedInvVariance", savedInvVariance, pb))))
        return rc;
    if ((rc = not_poisoned(fn))) return rc;
    bn_bwd_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    cudnnDataType_t dt = g.x.dt;
    *k = (bn_bwd_work){ .g = g, .a_data = scal(alphaDataDiff, dt), .b_data = scal(betaDataDiff, dt),
                        .a_param = scal(alphaParamDiff, dt), .b_param = scal(betaParamDiff, dt), .eps = epsilon, .x = x,
                        .dy = dy, .scale = bnScale, .saved_mean = savedMean, .saved_inv = savedInvVariance, .dx = dx,
                        .dscale = dBnScaleResult, .dbias = dBnBiasResult };
    return submit(fn, s, bn_bwd_run, k);
}

/* ================= pooling ================= */

cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *poolingDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!poolingDesc) return fail(CUDNN_STATUS_BAD_PARAM, __func__, "poolingDesc is NULL");
    *poolingDesc = obj_new(sizeof **poolingDesc, OBJ_POOL);
    return *poolingDesc ? OK : fail(CUDNN_STATUS_ALLOC_FAILED, __func__, "out of host memory");
}

cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t poolingDesc) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    if (!poolingDesc) return OK;
    return obj_free(poolingDesc, OBJ_POOL) ? OK
           : fail_loud(CUDNN_STATUS_BAD_PARAM, __func__, "%p is not a live pooling descriptor (destroyed twice?)", (void *)poolingDesc);
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t poolingDesc, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t maxpoolingNanOpt, int windowHeight, int windowWidth,
                                          int verticalPadding, int horizontalPadding, int verticalStride,
                                          int horizontalStride) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    if (!poolingDesc) return fail(CUDNN_STATUS_BAD_PARAM, fn, "poolingDesc is NULL");
    if (!reg_is(poolingDesc, OBJ_POOL)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live pooling descriptor", (void *)poolingDesc);
    if ((unsigned)mode > CUDNN_POOLING_MAX_DETERMINISTIC) return fail(CUDNN_STATUS_BAD_PARAM, fn, "mode %d is not a cudnnPoolingMode_t", (int)mode);
    if ((unsigned)maxpoolingNanOpt > CUDNN_PROPAGATE_NAN)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "maxpoolingNanOpt %d is not a cudnnNanPropagation_t", (int)maxpoolingNanOpt);
    if (windowHeight <= 0 || windowWidth <= 0 || verticalStride <= 0 || horizontalStride <= 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "window %dx%d and stride (%d, %d) must be positive", windowHeight, windowWidth,
                    verticalStride, horizontalStride);
    if (verticalPadding < 0 || horizontalPadding < 0)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "negative padding (%d, %d)", verticalPadding, horizontalPadding);
    poolingDesc->p = (pool_desc){ true, mode, maxpoolingNanOpt, windowHeight, windowWidth, verticalPadding, horizontalPadding,
                                  verticalStride, horizontalStride };
    return OK;
}

cudnnStatus_t cudnnGetPooling2dForwardOutputDim(const cudnnPoolingDescriptor_t poolingDesc,
                                                const cudnnTensorDescriptor_t inputTensorDesc, int *n, int *c, int *h,
                                                int *w) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    pool_desc p;
    tens x;
    st_t rc = get_pool(fn, poolingDesc, &p);
    if (!rc) rc = get_tensor(fn, "inputTensorDesc", inputTensorDesc, &x);
    if (rc) return rc;
    if (!n || !c || !h || !w) return fail(CUDNN_STATUS_BAD_PARAM, fn, "an output pointer is NULL");
    int64_t oh, ow;
    if (!out_dim(x.d[2], p.ph, p.kh, 1, p.sh, &oh) || !out_dim(x.d[3], p.pw, p.kw, 1, p.sw, &ow))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "the %dx%d window is larger than the padded input", p.kh, p.kw);
    *n = (int)x.d[0];
    *c = (int)x.d[1];
    *h = (int)oh;
    *w = (int)ow;
    return OK;
}

/* Windows: output (i, j) covers rows i*sh - ph .. + kh - 1 and the like for columns; rows or
 * columns outside the image are padding. Max ignores padding (NaN per the NaN option); the
 * include-padding average divides by kh*kw, the exclude-padding one by the image elements the
 * window holds (0 when it holds none). */
typedef struct pool_work {
    pool_desc p;
    tens x, y, dy, dx;
    const void *X, *Y, *DY;
    void *out;                    /* y (forward) or dx (backward) */
    double alpha, beta;
    bool backward;
} pool_work;

static bool is_max(const pool_desc *p) { return p->mode == CUDNN_POOLING_MAX || p->mode == CUDNN_POOLING_MAX_DETERMINISTIC; }

/* The clipped window of output (i, j) in image rows [*h0, *h1) and columns [*w0, *w1). */
static void window(const pool_work *k, int64_t i, int64_t j, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1) {
    int64_t a = i * k->p.sh - k->p.ph, b = j * k->p.sw - k->p.pw;
    *h0 = a < 0 ? 0 : a;
    *h1 = a + k->p.kh < k->x.d[2] ? a + k->p.kh : k->x.d[2];
    *w0 = b < 0 ? 0 : b;
    *w1 = b + k->p.kw < k->x.d[3] ? b + k->p.kw : k->x.d[3];
}

/* The max of a window and where it is (-1 when the window holds no image element). */
static double window_max(const pool_work *k, int64_t n, int64_t c, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                         int64_t *where) {
    double best = -INFINITY;
    *where = -1;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) {
            int64_t o = at(&k->x, n, c, h, w);
            double v = ld(k->X, k->x.dt, o);
            if (isnan(v)) {
                if (k->p.nan == CUDNN_PROPAGATE_NAN) {
                    *where = o;
                    return v;
                }
                continue;
            }
            if (*where < 0 || v > best) {
                best = v;
                *where = o;
            }
        }
    return best;
}

static void pool_fwd(const pool_work *k) {
    int64_t area = (int64_t)k->p.kh * k->p.kw;
    for (int64_t n = 0; n < k->y.d[0]; n++)
        for (int64_t c = 0; c < k->y.d[1]; c++)
            for (int64_t i = 0; i < k->y.d[2]; i++)
                for (int64_t j = 0; j < k->y.d[3]; j++) {
                    int64_t h0, h1, w0, w1, where;
                    window(k, i, j, &h0, &h1, &w0, &w1);
                    double r;
                    if (is_max(&k->p)) r = window_max(k, n, c, h0, h1, w0, w1, &where);
                    else {
                        double s = 0;
                        for (int64_t h = h0; h < h1; h++)
                            for (int64_t w = w0; w < w1; w++) s += ld(k->X, k->x.dt, at(&k->x, n, c, h, w));
                        int64_t cnt = k->p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? area
                                    : (h1 > h0 && w1 > w0 ? (h1 - h0) * (w1 - w0) : 0);
                        r = cnt ? s / (double)cnt : 0;
                    }
                    blend(k->out, &k->y, at(&k->y, n, c, i, j), r, k->alpha, k->beta);
                }
}

static void pool_bwd(const pool_work *k) {
    const tens *x = &k->x;
    double *acc = work_scratch("cudnnPoolingBackward", numel(x));
    if (!acc) return;
    int64_t area = (int64_t)k->p.kh * k->p.kw;
    for (int64_t n = 0; n < k->y.d[0]; n++)
        for (int64_t c = 0; c < k->y.d[1]; c++)
            for (int64_t i = 0; i < k->y.d[2]; i++)
                for (int64_t j = 0; j < k->y.d[3]; j++) {
                    int64_t h0, h1, w0, w1;
                    window(k, i, j, &h0, &h1, &w0, &w1);
                    double g = ld(k->DY, k->dy.dt, at(&k->dy, n, c, i, j));
                    int64_t base = (n * x->d[1] + c) * x->d[2];
                    if (is_max(&k->p)) {
                        /* the gradient goes to the first element equal to the forward's y (that is
                         * why cuDNN takes y), else to the window's max */
                        double yv = ld(k->Y, k->y.dt, at(&k->y, n, c, i, j));
                        int64_t hit_h = -1, hit_w = -1;
                        for (int64_t h = h0; h < h1 && hit_h < 0; h++)
                            for (int64_t w = w0; w < w1; w++) {
                                double v = ld(k->X, x->dt, at(x, n, c, h, w));
                                if (v == yv || (isnan(v) && isnan(yv))) {
                                    hit_h = h;
                                    hit_w = w;
                                    break;
                                }
                            }
                        if (hit_h < 0) {
                            int64_t where;
                            window_max(k, n, c, h0, h1, w0, w1, &where);
                            for (int64_t h = h0; h < h1 && hit_h < 0; h++)
                                for (int64_t w = w0; w < w1; w++)
                                    if (at(x, n, c, h, w) == where) {
                                        hit_h = h;
                                        hit_w = w;
                                        break;
                                    }
                        }
                        if (hit_h >= 0) acc[(base + hit_h) * x->d[3] + hit_w] += g;
                    } else {
                        int64_t cnt = k->p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? area
                                    : (h1 > h0 && w1 > w0 ? (h1 - h0) * (w1 - w0) : 0);
                        if (!cnt) continue;
                        for (int64_t h = h0; h < h1; h++)
                            for (int64_t w = w0; w < w1; w++) acc[(base + h) * x->d[3] + w] += g / (double)cnt;
                    }
                }
    int64_t idx = 0;
    for (int64_t n = 0; n < x->d[0]; n++)
        for (int64_t c = 0; c < x->d[1]; c++)
            for (int64_t h = 0; h < x->d[2]; h++)
                for (int64_t w = 0; w < x->d[3]; w++) blend(k->out, &k->dx, at(&k->dx, n, c, h, w), acc[idx++], k->alpha, k->beta);
    free(acc);
}

static int pool_run(void *arg) {
    pool_work *k = arg;
    if (k->backward) pool_bwd(k);
    else pool_fwd(k);
    return DGEMU_DONE;
}

/* cuDNN's pooling kernels need unit w strides. */
static st_t pool_wstride(const char *fn, const char *what, const tens *t) {
    if (t->s[3] != 1 && t->d[3] > 1)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s has w stride %lld; pooling needs 1", what, (long long)t->s[3]);
    return OK;
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc, const void *alpha,
                                  const cudnnTensorDescriptor_t xDesc, const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yDesc, void *y) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    pool_desc p;
    tens xt, yt;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = get_pool(fn, poolingDesc, &p);
    if (!rc) rc = get_tensor(fn, "xDesc", xDesc, &xt);
    if (!rc) rc = get_tensor(fn, "yDesc", yDesc, &yt);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (xt.d[0] != yt.d[0] || xt.d[1] != yt.d[1])
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and y differ in n or c: [%lld, %lld] vs [%lld, %lld]", (long long)xt.d[0],
                    (long long)xt.d[1], (long long)yt.d[0], (long long)yt.d[1]);
    if (xt.dt != yt.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "x is %s but y is %s", dt_name(xt.dt), dt_name(yt.dt));
    if ((rc = pool_wstride(fn, "x", &xt)) || (rc = pool_wstride(fn, "y", &yt))) return rc;
    if (!is_fd(xt.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(xt.dt));
    if ((rc = need_dev(fn, "x", x, bytes_of(&xt))) || (rc = need_dev(fn, "y", y, bytes_of(&yt)))) return rc;
    if ((rc = not_poisoned(fn))) return rc;
    pool_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (pool_work){ .p = p, .x = xt, .y = yt, .X = x, .out = y, .alpha = scal(alpha, xt.dt), .beta = scal(beta, xt.dt) };
    return submit(fn, s, pool_run, k);
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc, const void *alpha,
                                   const cudnnTensorDescriptor_t yDesc, const void *y,
                                   const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                   const cudnnTensorDescriptor_t xDesc, const void *x, const void *beta,
                                   const cudnnTensorDescriptor_t dxDesc, void *dx) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    const char *fn = __func__;
    cudaStream_t s;
    pool_desc p;
    tens yt, dyt, xt, dxt;
    st_t rc = get_handle(fn, handle, &s);
    if (!rc) rc = get_pool(fn, poolingDesc, &p);
    if (!rc) rc = get_tensor(fn, "yDesc", yDesc, &yt);
    if (!rc) rc = get_tensor(fn, "dyDesc", dyDesc, &dyt);
    if (!rc) rc = get_tensor(fn, "xDesc", xDesc, &xt);
    if (!rc) rc = get_tensor(fn, "dxDesc", dxDesc, &dxt);
    if (!rc) rc = need_host(fn, "alpha", alpha);
    if (!rc) rc = need_host(fn, "beta", beta);
    if (rc) return rc;
    if (!same_dims(&yt, &dyt) || !same_strides(&yt, &dyt))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "y and dy differ in dims or strides");
    if (!same_dims(&xt, &dxt) || !same_strides(&xt, &dxt))
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and dx differ in dims or strides");
    if (xt.d[0] != yt.d[0] || xt.d[1] != yt.d[1]) return fail(CUDNN_STATUS_BAD_PARAM, fn, "x and y differ in n or c");
    if (yt.dt != dyt.dt || yt.dt != xt.dt || yt.dt != dxt.dt)
        return fail(CUDNN_STATUS_BAD_PARAM, fn, "the four tensors must have one data type");
    if ((rc = pool_wstride(fn, "x", &xt)) || (rc = pool_wstride(fn, "y", &yt))) return rc;
    if (!is_fd(xt.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%s data is not emulated", dt_name(xt.dt));
    if ((rc = need_dev(fn, "y", y, bytes_of(&yt))) || (rc = need_dev(fn, "dy", dy, bytes_of(&dyt))) ||
        (rc = need_dev(fn, "x", x, bytes_of(&xt))) || (rc = need_dev(fn, "dx", dx, bytes_of(&dxt))))
        return rc;
    if ((rc = not_poisoned(fn))) return rc;
    pool_work *k = work_alloc(fn, sizeof *k, &rc);
    if (!k) return rc;
    *k = (pool_work){ .p = p, .x = xt, .y = yt, .dy = dyt, .dx = dxt, .X = x, .Y = y, .DY = dy, .out = dx,
                      .alpha = scal(alpha, xt.dt), .beta = scal(beta, xt.dt), .backward = true };
    return submit(fn, s, pool_run, k);
}
