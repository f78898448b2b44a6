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
 * is refused with BAD_PARAM (on a GPU its work would go to the wrong context), and cudnnSetStream
 * with a stream of another device with CUDNN_STATUS_MAPPING_ERROR, the status cuDNN documents
 * there for a stream that does not match the handle's context (cuDNN 9's header makes it an alias
 * of CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED, which is the name it reports).
 * cudnnDestroy synchronises the handle's device.
 *
 * Errors. The reason for the last failure of the calling thread is kept for
 * cudnnGetLastErrorString; CUDNN_LOGERR_DBG=1 (cuDNN's own switch) prints every failure. */
#include "cudnn_internal.h"

/* ---- errors ---- */

_Thread_local char t_last_error[512];
static pthread_once_t g_log_once = PTHREAD_ONCE_INIT;
static bool g_log_all;

void log_init(void) {
    const char *e = getenv("CUDNN_LOGERR_DBG");
    g_log_all = e && e[0] == '1';
}

const char *status_name(cudnnStatus_t s) {
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
st_t failv(bool loud, st_t s, const char *fn, const char *fmt, va_list ap) {
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    snprintf(t_last_error, sizeof t_last_error, "%s: %s (%s)", fn, msg, status_name(s));
    pthread_once(&g_log_once, log_init);
    if (loud || g_log_all) fprintf(stderr, "cudnn-emu: %s\n", t_last_error);
    return s;
}
__attribute__((format(printf, 3, 4))) st_t fail(st_t s, const char *fn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    failv(false, s, fn, fmt, ap);
    va_end(ap);
    return s;
}
__attribute__((format(printf, 3, 4))) st_t fail_loud(st_t s, const char *fn, const char *fmt, ...) {
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


typedef struct reg_slot { const void *p; int kind; } reg_slot;
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static reg_slot *g_reg;
static size_t g_reg_cap, g_reg_n;

size_t reg_hash(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

/* The slot holding p, or the empty slot where it would go. Needs g_reg_cap > 0. */
size_t reg_slot_of(const void *p) {
    size_t i = reg_hash(p, g_reg_cap);
    while (g_reg[i].p && g_reg[i].p != p) i = (i + 1) & (g_reg_cap - 1);
    return i;
}

bool reg_grow(void) {
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

bool reg_add(const void *p, int kind) {
    pthread_mutex_lock(&g_reg_lock);
    bool ok = (g_reg_n + 1) * 2 <= g_reg_cap || reg_grow();
    if (ok) {
        g_reg[reg_slot_of(p)] = (reg_slot){ p, kind };
        g_reg_n++;
    }
    pthread_mutex_unlock(&g_reg_lock);
    return ok;
}

bool reg_is(const void *p, int kind) {
    if (!p) return false;
    pthread_mutex_lock(&g_reg_lock);
    bool ok = g_reg_cap && g_reg[reg_slot_of(p)].p == p && g_reg[reg_slot_of(p)].kind == kind;
    pthread_mutex_unlock(&g_reg_lock);
    return ok;
}

bool reg_remove(const void *p, int kind) {
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

void *obj_new(size_t size, int kind) {
    void *o = calloc(1, size);
    if (o && !reg_add(o, kind)) {
        free(o);
        o = NULL;
    }
    return o;
}

bool obj_free(void *o, int kind) {
    if (!reg_remove(o, kind)) return false;
    free(o);
    return true;
}

size_t dt_size(cudnnDataType_t dt) {
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

const char *dt_name(cudnnDataType_t dt) {
    switch (dt) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_DOUBLE: return "DOUBLE";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    default: return "another type";
    }
}

bool is_fd(cudnnDataType_t dt) { return dt == CUDNN_DATA_FLOAT || dt == CUDNN_DATA_DOUBLE; }
bool is_half(cudnnDataType_t dt) { return dt == CUDNN_DATA_HALF || dt == CUDNN_DATA_BFLOAT16; }

/* Packed strides for a layout. */
void packed(tens *t, cudnnTensorFormat_t fmt) {
    int64_t c = t->d[1], h = t->d[2], w = t->d[3];
    if (fmt == CUDNN_TENSOR_NHWC) {
        t->s[0] = h * w * c; t->s[1] = 1; t->s[2] = w * c; t->s[3] = c;
    } else {
        t->s[0] = c * h * w; t->s[1] = h * w; t->s[2] = w; t->s[3] = 1;
    }
}

/* Elements from the first to one past the last that the view touches. */
int64_t span(const tens *t) {
    int64_t e = 1;
    for (int i = 0; i < 4; i++) e += (t->d[i] - 1) * t->s[i];
    return e;
}
size_t bytes_of(const tens *t) { return (size_t)span(t) * dt_size(t->dt); }
int64_t numel(const tens *t) { return t->d[0] * t->d[1] * t->d[2] * t->d[3]; }

bool same_dims(const tens *a, const tens *b) {
    return a->d[0] == b->d[0] && a->d[1] == b->d[1] && a->d[2] == b->d[2] && a->d[3] == b->d[3];
}
bool same_strides(const tens *a, const tens *b) {
    return a->s[0] == b->s[0] && a->s[1] == b->s[1] && a->s[2] == b->s[2] && a->s[3] == b->s[3];
}

/* ---- argument checks shared by the entry points ---- */

st_t get_handle(const char *fn, cudnnHandle_t h, cudaStream_t *stream) {
    if (!h) return fail(CUDNN_STATUS_BAD_PARAM, fn, "handle is NULL");
    if (!reg_is(h, OBJ_HANDLE)) return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "handle %p is not a live cuDNN handle", (void *)h);
    if (h->device != dgemu_device())
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "the handle was created on device %d but device %d is current",
                         h->device, dgemu_device());
    if (stream) *stream = h->stream;
    return OK;
}

st_t get_tensor(const char *fn, const char *what, cudnnTensorDescriptor_t d, tens *out) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is NULL", what);
    if (!reg_is(d, OBJ_TENSOR))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "%s (%p) is not a live tensor descriptor", what, (void *)d);
    if (!d->set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s was created but never set", what);
    *out = d->t;
    return OK;
}

st_t get_filter(const char *fn, const char *what, cudnnFilterDescriptor_t d, tens *out) {
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

st_t get_conv(const char *fn, cudnnConvolutionDescriptor_t d, conv_desc *out) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "convDesc is NULL");
    if (!reg_is(d, OBJ_CONV))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "convDesc (%p) is not a live convolution descriptor", (void *)d);
    if (!d->c.set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "convDesc was created but never set");
    *out = d->c;
    return OK;
}

st_t get_pool(const char *fn, cudnnPoolingDescriptor_t d, pool_desc *out) {
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, fn, "poolingDesc is NULL");
    if (!reg_is(d, OBJ_POOL))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn, "poolingDesc (%p) is not a live pooling descriptor", (void *)d);
    if (!d->p.set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "poolingDesc was created but never set");
    *out = d->p;
    return OK;
}

/* A device operand: non-NULL and inside one live device allocation for all `bytes`. */
st_t need_dev(const char *fn, const char *what, const void *p, size_t bytes) {
    if (!p) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is NULL", what);
    if (!dgemu_is_device(p, bytes))
        return fail_loud(CUDNN_STATUS_BAD_PARAM, fn,
                         "%s (%p) is not device memory covering the %zu bytes needed", what, p, bytes);
    return OK;
}

st_t need_host(const char *fn, const char *what, const void *p) {
    return p ? OK : fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is NULL", what);
}

st_t not_poisoned(const char *fn) {
    cudaError_t e = dgemu_sticky_error();
    if (e == cudaSuccess) return OK;
    return fail(CUDNN_STATUS_EXECUTION_FAILED, fn, "an earlier device fault (%s) left the context unusable",
                cudaGetErrorName(e));
}

/* Queues fn's work; the queue frees arg. */
st_t submit(const char *fn, cudaStream_t s, dgemu_work_fn work, void *arg) {
    cudaError_t e = dgemu_enqueue(s, fn, work, arg, free);
    if (e != cudaSuccess) return fail(CUDNN_STATUS_EXECUTION_FAILED, fn, "queueing the work failed: %s", cudaGetErrorName(e));
    return OK;
}

void *work_alloc(const char *fn, size_t size, st_t *rc) {
    void *p = calloc(1, size);
    *rc = p ? OK : fail(CUDNN_STATUS_ALLOC_FAILED, fn, "out of host memory");
    return p;
}

/* A host scaling factor: double for double data, float for everything else. */
double scal(const void *p, cudnnDataType_t dt) {
    return dt == CUDNN_DATA_DOUBLE ? *(const double *)p : (double)*(const float *)p;
}

/* A host scratch buffer inside queued work; out of memory there is a device-side failure. */
double *work_scratch(const char *what, int64_t n) {
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
    /* documented: releasing the handle synchronises the device (the handle's, whichever is current) */
    int cur = dgemu_device();
    if (cur != handle->device) cudaSetDevice(handle->device);
    cudaDeviceSynchronize();
    if (cur != handle->device) cudaSetDevice(cur);
    obj_free(handle, OBJ_HANDLE);
    return OK;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
    DGEMU_API();
    DGEMU_INJECT(CUDNN_STATUS_NOT_SUPPORTED);
    st_t rc = get_handle(__func__, handle, NULL);
    if (rc) return rc;
    int d = dgemu_stream_device(streamId);
    if (streamId && d >= 0 && d != handle->device)
        return fail_loud(CUDNN_STATUS_MAPPING_ERROR, __func__, "streamId belongs to device %d, the handle to device %d",
                         d, handle->device);
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

