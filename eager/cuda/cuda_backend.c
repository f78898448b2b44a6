/* eager/cuda/cuda_backend.c — the CUDA backend's table and its instances, one per GPU: device
 * selection (a missing GPU is an error for whoever asked for one, never a crash), each device's
 * context (compute and communication streams with events between them, cuBLAS and cuDNN
 * handles, the caching allocator of eager/device_pool.c), pinned host buffers, host<->device and
 * device<->device copies, and the shutdown entry that gives all of it back for dg_shutdown. Kernels live in the .cu files and the cuDNN files beside
 * this one. */
#include "cuda_internal.h"
#include "../device_pool.h"
#include "../half_via_f32.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */
DG_MODULE_EXPORT int dg_cuda_check(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return 0;
    dg_set_error_at(DG_EDEVICE, file, line, "cuda: %s failed: %s (%d)", what, cudaGetErrorString(e), (int)e);
    return DG_EDEVICE;
}
int dg_cuda_check_blas(cublasStatus_t s, const char *what, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    dg_set_error_at(DG_EDEVICE, file, line, "cublas: %s failed: status %d", what, (int)s);
    return DG_EDEVICE;
}

int dg_cuda_check_dnn(cudnnStatus_t s, const char *what, const char *file, int line) {
    if (s == CUDNN_STATUS_SUCCESS) return 0;
    dg_set_error_at(s == CUDNN_STATUS_NOT_SUPPORTED ? DG_EUNSUPPORTED : DG_EDEVICE, file, line,
                    "cudnn: %s failed: %s (%d)", what, cudnnGetErrorString(s), (int)s);
    return s == CUDNN_STATUS_NOT_SUPPORTED ? DG_EUNSUPPORTED : DG_EDEVICE;
}

/* ---- devices: one context per GPU ----
 * Each GPU that is asked for gets an instance of the table below with its own context: its
 * compute and communication streams, the events between them, its cuBLAS and cuDNN handles and
 * its memory pool. Every entry begins with dg_cuda_enter(be), which makes the instance's device
 * current on the calling thread (a real GPU refuses a kernel launched onto another device's
 * stream) and points the kernels of this module at that context. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_count = -1;              /* devices seen; -1 before the first query */
static cudaError_t g_count_err;
static dg_cuda_ctx g_ctx[DG_CUDA_MAX_DEVICES];
static dg_backend g_instance[DG_CUDA_MAX_DEVICES];
static _Thread_local dg_cuda_ctx *t_ctx;

int dg_cuda_enter(const dg_backend *be) {
    dg_cuda_ctx *ctx = (dg_cuda_ctx *)be->context;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != ctx->device) {
        int rc = DG_CUDA(cudaSetDevice(ctx->device));
        if (rc) return rc;
    }
    t_ctx = ctx;
    return 0;
}

/* The context of the device current on this thread: what an entry entered, or, for the calls
 * the NCCL module makes outside any entry, the one cudaSetDevice chose. */
dg_cuda_ctx *dg_cuda_ctx_current(void) {
    int cur = 0;
    if (cudaGetDevice(&cur) != cudaSuccess || cur < 0 || cur >= DG_CUDA_MAX_DEVICES) cur = 0;
    if (!t_ctx || t_ctx->device != cur) t_ctx = &g_ctx[cur];
    return t_ctx;
}

/* Inside an entry the context it entered, without asking the runtime again on every launch. */
static inline dg_cuda_ctx *entered(void) { return t_ctx ? t_ctx : dg_cuda_ctx_current(); }

cudaStream_t dg_cuda_stream(void) { return entered()->stream; }
static void *cuda_stream_entry(const dg_backend *be) { return (void *)((dg_cuda_ctx *)be->context)->stream; }
/* The NCCL module calls these outside any entry: the context of the device it made current.
 * Streams past the first are made on first use, so a job with comm_num 1 holds one. */
DG_MODULE_EXPORT cudaStream_t dg_cuda_comm_stream_at(int k) {
    if (k < 0 || k >= DG_CUDA_MAX_COMM_STREAMS) {
        DG_RAISE(DG_EINVAL, "cuda: communication stream %d of at most %d", k, DG_CUDA_MAX_COMM_STREAMS);
        return NULL;
    }
    dg_cuda_ctx *c = dg_cuda_ctx_current();
    pthread_mutex_lock(&g_lock);
    int rc = 0;
    if (!c->started) {   /* comm[0] comes with the context (cuda_init) */
        DG_RAISE(DG_ESTATE, "cuda: gpu:%d has no streams yet (no tensor was made on it)", c->device);
        rc = DG_ESTATE;
    }
    while (!rc && c->ncomm <= k) {
        rc = DG_CUDA(cudaStreamCreateWithFlags(&c->comm[c->ncomm], cudaStreamNonBlocking));
        if (!rc) c->ncomm++;
    }
    cudaStream_t st = rc ? NULL : c->comm[k];
    pthread_mutex_unlock(&g_lock);
    return st;
}
cublasHandle_t dg_cuda_cublas(void) { return entered()->blas; }
cudnnHandle_t dg_cuda_cudnn(void) { return entered()->dnn; }
int dg_cuda_device(void) { return entered()->device; }

DG_MODULE_EXPORT int dg_cuda_comm_wait_compute_at(int k) {
    cudaStream_t cm = dg_cuda_comm_stream_at(k);
    if (!cm) return dg_last_status() ? dg_last_status() : DG_EDEVICE;
    dg_cuda_ctx *c = dg_cuda_ctx_current();
    int rc = DG_CUDA(cudaEventRecord(c->ev_compute, c->stream));
    return rc ? rc : DG_CUDA(cudaStreamWaitEvent(cm, c->ev_compute, 0));
}
/* One event serves every stream: a wait takes the record made just before it. */
DG_MODULE_EXPORT int dg_cuda_compute_wait_comms(int n) {
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        cudaStream_t cm = dg_cuda_comm_stream_at(k);
        if (!cm) return dg_last_status() ? dg_last_status() : DG_EDEVICE;
        dg_cuda_ctx *c = dg_cuda_ctx_current();
        rc = DG_CUDA(cudaEventRecord(c->ev_comm, cm));
        if (!rc) rc = DG_CUDA(cudaStreamWaitEvent(c->stream, c->ev_comm, 0));
    }
    return rc;
}

/* ---- caching allocator ----
 * eager/device_pool.c splits cudaMalloc'ed segments into blocks and merges them when freed (a
 * steady training loop stops calling cudaMalloc after its first steps); each device has its
 * own pool. Tensors are used on their device's compute stream only (collectives on the comm
 * stream are ordered back with dg_cuda_compute_wait_comms before their buffers can be freed, and
 * a copy to another device orders that device's stream back too, cuda_copy_peer), so a block
 * freed by the host may be handed out again at once: later kernels run after the ones that
 * used it. */
static void *segment_alloc(size_t n, void *user) {
    dg_cuda_ctx *c = user;
    void *p = NULL;
    cudaError_t e = c->seg_err = cudaMalloc(&p, n);
    if (e == cudaSuccess) return p;
    cudaGetLastError();   /* out of memory is not sticky: clear it for the next call */
    return NULL;
}
/* cudaFree waits for the device, so queued kernels that used the segment have finished */
static void segment_free(void *p, void *user) { cudaFree(p); }

/* DG_CUDA_ALLOC_TRACE=FILE writes every request and release the pools see ("a <bytes> <ptr>",
 * "f <ptr>", "t" where fully free segments go back to the device), so that a real GPU run's allocation pattern can be replayed against the pool on
 * any machine (tools/pool_replay.c). Written under g_lock, which orders the lines. */
static FILE *g_trace;
static bool g_trace_checked;
static FILE *alloc_trace(void) {
    if (!g_trace_checked) {
        g_trace_checked = true;
        const char *path = getenv("DG_CUDA_ALLOC_TRACE");
        if (path && *path && !(g_trace = fopen(path, "w")))
            fprintf(stderr, "dygraph: DG_CUDA_ALLOC_TRACE=%s: cannot open: %s\n", path, strerror(errno));
    }
    return g_trace;
}

/* From the pool of the current device (the caller entered it). */
DG_MODULE_EXPORT void *dg_cuda_alloc(size_t n) {
    dg_cuda_ctx *c = dg_cuda_ctx_current();
    pthread_mutex_lock(&g_lock);
    if (!c->pool) c->pool = dg_device_pool_new((dg_device_pool_ops){ segment_alloc, segment_free, c });
    c->seg_err = cudaSuccess;
    void *p = c->pool ? dg_device_pool_alloc(c->pool, n) : NULL;
    if (!p) {
        dg_memory_stats st = { 0 };
        if (c->pool) dg_device_pool_stats(c->pool, &st);
        cudaError_t e = c->seg_err;
        pthread_mutex_unlock(&g_lock);
        if (e == cudaSuccess || e == cudaErrorMemoryAllocation)
            DG_ERR(DG_ENOMEM, "cuda alloc: %zu bytes on gpu:%d (%zu allocated, %zu reserved): out of device memory", n,
                   c->device, st.allocated, st.reserved);
        else
            DG_ERR(DG_EDEVICE, "cuda alloc: %zu bytes on gpu:%d: cudaMalloc failed: %s (%d)", n, c->device,
                   cudaGetErrorString(e), (int)e);
        return NULL;
    }
    if (alloc_trace()) fprintf(g_trace, "a %zu %p\n", n, p);
    pthread_mutex_unlock(&g_lock);
    return p;
}

static void pool_free(dg_cuda_ctx *c, void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_lock);
    if (alloc_trace()) fprintf(g_trace, "f %p\n", p);
    if (c->pool) dg_device_pool_free(c->pool, p);
    pthread_mutex_unlock(&g_lock);
}
/* Back to the pool of the current device (workspaces, the NCCL module's buffers). */
DG_MODULE_EXPORT void dg_cuda_free(void *p) { pool_free(dg_cuda_ctx_current(), p); }

void dg_cuda_pool_trim(void) {
    dg_cuda_ctx *c = dg_cuda_ctx_current();
    pthread_mutex_lock(&g_lock);
    if (alloc_trace()) fprintf(g_trace, "t\n");
    if (c->pool) dg_device_pool_release_free(c->pool);
    pthread_mutex_unlock(&g_lock);
}

static void *cuda_alloc_entry(const dg_backend *be, size_t n) {
    if (dg_cuda_enter(be)) return NULL;
    return dg_cuda_alloc(n);
}
/* A tensor's block goes back to the pool of the instance that made it, whatever device is
 * current on the freeing thread. */
static void cuda_free_entry(const dg_backend *be, void *p) { pool_free((dg_cuda_ctx *)be->context, p); }

static int cuda_memory_stats(const dg_backend *be, dg_memory_stats *out) {
    dg_cuda_ctx *c = (dg_cuda_ctx *)be->context;
    pthread_mutex_lock(&g_lock);
    if (c->pool) dg_device_pool_stats(c->pool, out);
    else memset(out, 0, sizeof *out);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static void release_pinned(void);

static int cuda_empty_cache(const dg_backend *be) {
    DG_CUDA_ENTER(be);
    dg_cuda_ctx *c = (dg_cuda_ctx *)be->context;
    int rc = c->started ? DG_CUDA(cudaStreamSynchronize(c->stream)) : 0;
    for (int k = 0; !rc && c->started && k < c->ncomm; k++) rc = DG_CUDA(cudaStreamSynchronize(c->comm[k]));
    pthread_mutex_lock(&g_lock);
    if (c->pool) dg_device_pool_release_free(c->pool);
    pthread_mutex_unlock(&g_lock);
    release_pinned();
    return rc;
}

/* ---- pinned host memory ----
 * Page-locked buffers for the DataLoader's collated batches. An upload from one of them is
 * queued without waiting (the DMA reads it later); so that the buffer is not refilled while a
 * copy still reads it, its release records an event on the compute stream of the device it was
 * handed to, and the next hand-out of that buffer waits for the event. Buffers are cached by
 * exact size and device (a DataLoader asks for the same few sizes every batch; an event belongs
 * to the device it was made on). */
typedef struct pinned { void *p; size_t size; int device; bool used; cudaEvent_t done; } pinned;
static pthread_mutex_t g_pin_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned *g_pin; static size_t g_npin, g_cappin;

static void *cuda_host_alloc(const dg_backend *be, size_t n) {
    if (!n) n = 1;
    /* DataLoader workers are threads of their own: the event must belong to be's device */
    if (dg_cuda_enter(be)) return NULL;
    int dev = be->index;
    pthread_mutex_lock(&g_pin_lock);
    for (size_t i = 0; i < g_npin; i++)
        if (!g_pin[i].used && g_pin[i].size == n && g_pin[i].device == dev) {
            /* copied under the lock: another thread's hand-out may realloc g_pin meanwhile */
            void *p = g_pin[i].p;
            cudaEvent_t done = g_pin[i].done;
            g_pin[i].used = true;
            pthread_mutex_unlock(&g_pin_lock);
            if (DG_CUDA(cudaEventSynchronize(done))) {   /* a copy may still read it: do not hand it out */
                pthread_mutex_lock(&g_pin_lock);
                for (size_t j = 0; j < g_npin; j++) if (g_pin[j].p == p) g_pin[j].used = false;
                pthread_mutex_unlock(&g_pin_lock);
                return NULL;
            }
            return p;
        }
    if (g_npin == g_cappin) {
        size_t cap = g_cappin ? g_cappin * 2 : 32;
        pinned *q = realloc(g_pin, sizeof *q * cap);
        if (!q) { pthread_mutex_unlock(&g_pin_lock); DG_ERR(DG_ENOMEM, "pinned alloc: out of host memory"); return NULL; }
        g_pin = q; g_cappin = cap;
    }
    void *p = NULL;
    cudaEvent_t ev;
    if (DG_CUDA(cudaHostAlloc(&p, n, cudaHostAllocPortable))) { pthread_mutex_unlock(&g_pin_lock); return NULL; }
    if (DG_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming))) {
        cudaFreeHost(p);
        pthread_mutex_unlock(&g_pin_lock);
        return NULL;
    }
    g_pin[g_npin++] = (pinned){ p, n, dev, true, ev };
    pthread_mutex_unlock(&g_pin_lock);
    return p;
}

static void cuda_host_free(const dg_backend *be, void *p) {
    if (!p) return;
    dg_cuda_ctx *c = (dg_cuda_ctx *)be->context;
    pthread_mutex_lock(&g_pin_lock);
    for (size_t i = 0; i < g_npin; i++)
        if (g_pin[i].p == p) {
            if (c->started) cudaEventRecord(g_pin[i].done, c->stream);
            g_pin[i].used = false;
            break;
        }
    pthread_mutex_unlock(&g_pin_lock);
}

/* Frees the cached pinned buffers nobody holds (dg_empty_cache), once their last copy is done. */
static void release_pinned(void) {
    pthread_mutex_lock(&g_pin_lock);
    size_t w = 0;
    for (size_t i = 0; i < g_npin; i++) {
        if (!g_pin[i].used && cudaEventSynchronize(g_pin[i].done) == cudaSuccess) {
            cudaEventDestroy(g_pin[i].done);
            cudaFreeHost(g_pin[i].p);
        } else {
            g_pin[w++] = g_pin[i];
        }
    }
    g_npin = w;
    pthread_mutex_unlock(&g_pin_lock);
}

/* dg_shutdown, once per started device: waits for both streams, then releases the cuDNN state,
 * the idle pinned buffers, the cached device memory (the whole pool when no tensor still holds
 * a block of it), the library handles, events and streams. A later request for the GPU starts
 * it again. */
static void cuda_shutdown(const dg_backend *be) {
    dg_cuda_ctx *c = (dg_cuda_ctx *)be->context;
    pthread_mutex_lock(&g_lock);
    bool started = c->started;
    pthread_mutex_unlock(&g_lock);
    if (started && !dg_cuda_enter(be)) {
        cudaStreamSynchronize(c->stream);
        for (int k = 0; k < c->ncomm; k++) cudaStreamSynchronize(c->comm[k]);
        dg_cuda_conv_release();
        dg_cuda_norm_pool_release(c->device);
        dg_cuda_prof_release_all(c->device);
    }
    release_pinned();
    pthread_mutex_lock(&g_pin_lock);
    if (g_npin == 0) { free(g_pin); g_pin = NULL; g_cappin = 0; }
    pthread_mutex_unlock(&g_pin_lock);
    pthread_mutex_lock(&g_lock);
    if (c->pool) {
        dg_memory_stats st;
        dg_device_pool_stats(c->pool, &st);
        if (st.allocated == 0) { dg_device_pool_destroy(c->pool); c->pool = NULL; }
        else dg_device_pool_release_free(c->pool);
    }
    if (started) {
        cudnnDestroy(c->dnn);
        dg_cublas.destroy(c->blas);
        cudaEventDestroy(c->ev_comm);
        cudaEventDestroy(c->ev_compute);
        for (int k = 0; k < c->ncomm; k++) { cudaStreamDestroy(c->comm[k]); c->comm[k] = NULL; }
        c->ncomm = 0;
        cudaStreamDestroy(c->stream);
        c->dnn = NULL; c->blas = NULL; c->ev_comm = c->ev_compute = NULL; c->stream = NULL;
        c->started = false;
    }
    pthread_mutex_unlock(&g_lock);
}

/* ---- copies ---- */
/* No wait: the runtime stages a pageable source before cudaMemcpyAsync returns, so the caller may
 * reuse it at once; a pinned buffer of ours is guarded by its release event. */
static int cuda_upload(const dg_backend *be, void *dst, const void *src, size_t n) {
    if (!n) return 0;
    DG_CUDA_ENTER(be);
    return DG_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, dg_cuda_stream()));
}
static int cuda_download(const dg_backend *be, void *dst, const void *src, size_t n) {
    if (!n) return 0;
    DG_CUDA_ENTER(be);
    cudaStream_t st = dg_cuda_stream();
    int rc = DG_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, st));
    return rc ? rc : DG_CUDA(cudaStreamSynchronize(st));
}
static int cuda_sync(const dg_backend *be) {
    DG_CUDA_ENTER(be);
    return DG_CUDA(cudaStreamSynchronize(dg_cuda_stream()));
}

/* Device to device, on the destination's compute stream: it first waits for the source
 * stream's work (which wrote src), and the source stream then waits for the copy, because the
 * source's pool may hand src's block to its next kernel as soon as the host frees it. */
static int cuda_copy_peer(const dg_backend *be, void *dst, const dg_backend *from, const void *src, size_t n) {
    if (!n) return 0;
    dg_cuda_ctx *d = (dg_cuda_ctx *)be->context, *s = (dg_cuda_ctx *)from->context;
    DG_CUDA_ENTER(from);
    int rc = DG_CUDA(cudaEventRecord(s->ev_compute, s->stream));
    if (!rc) rc = dg_cuda_enter(be);
    if (!rc) rc = DG_CUDA(cudaStreamWaitEvent(d->stream, s->ev_compute, 0));
    if (!rc) rc = DG_CUDA(cudaMemcpyPeerAsync(dst, d->device, src, s->device, n, d->stream));
    if (!rc) rc = DG_CUDA(cudaEventRecord(d->ev_compute, d->stream));
    if (!rc) rc = DG_CUDA(cudaStreamWaitEvent(s->stream, d->ev_compute, 0));
    return rc;
}

/* What each entry takes (the `supports` entry, ggml's supports_op): the dtypes of the values it
 * computes on, float16 / bfloat16 included where half.c widens them. binary's integer
 * arithmetic is add, sub, mul, max and min (the comparisons take any dtype); the random draws
 * are floating point only (random.cu), where the CPU stores them into any dtype. */
#define FLOATS DG_DT_FLOATS
#define INTS DG_DT_INTS
#define ALL DG_DT_ALL
static const unsigned cuda_dtypes[DG_BE_COUNT] = {
    /* no data dtype */
    [DG_BE_alloc] = ALL, [DG_BE_free] = ALL, [DG_BE_upload] = ALL, [DG_BE_download] = ALL, [DG_BE_copy_peer] = ALL,
    [DG_BE_synchronize] = ALL, [DG_BE_memory_stats] = ALL, [DG_BE_empty_cache] = ALL, [DG_BE_host_alloc] = ALL,
    [DG_BE_host_free] = ALL, [DG_BE_stream] = ALL, [DG_BE_shutdown] = ALL, [DG_BE_supports] = ALL,
    [DG_BE_fill] = ALL, [DG_BE_copy] = ALL, [DG_BE_where] = ALL, [DG_BE_random] = FLOATS,
    [DG_BE_unary] = FLOATS, [DG_BE_binary] = FLOATS | INTS, [DG_BE_reduce] = FLOATS, [DG_BE_gemm] = FLOATS,
    [DG_BE_softmax] = FLOATS, [DG_BE_softmax_backward] = FLOATS,
    [DG_BE_index_select] = ALL, [DG_BE_gather] = ALL, [DG_BE_index_add] = FLOATS, [DG_BE_scatter_add] = FLOATS,
    [DG_BE_argsort] = FLOATS | INTS, [DG_BE_nll] = FLOATS, [DG_BE_nll_backward] = FLOATS,
    [DG_BE_conv2d] = FLOATS, [DG_BE_conv2d_backward_data] = FLOATS, [DG_BE_conv2d_backward_filter] = FLOATS,
    [DG_BE_max_pool2d] = FLOATS, [DG_BE_max_pool2d_backward] = FLOATS, [DG_BE_avg_pool2d] = FLOATS,
    [DG_BE_avg_pool2d_backward] = FLOATS, [DG_BE_adaptive_avg_pool2d] = FLOATS, [DG_BE_adaptive_avg_pool2d_backward] = FLOATS,
    [DG_BE_max_pool2d_with_indices] = FLOATS, [DG_BE_adaptive_max_pool2d] = FLOATS, [DG_BE_max_pool2d_indices_backward] = FLOATS,
    [DG_BE_batch_norm] = FLOATS, [DG_BE_batch_norm_backward] = FLOATS,
    [DG_BE_rnn_cell] = DG_DT_BIT(DG_F32) | DG_DT_BIT(DG_F64), [DG_BE_rnn_cell_backward] = DG_DT_BIT(DG_F32) | DG_DT_BIT(DG_F64),
    [DG_BE_fused_update] = DG_DT_BIT(DG_F32) | DG_DT_BIT(DG_F64),
};
static bool cuda_supports(const dg_backend *be, dg_be_entry e, dg_dtype dt) {
    return (unsigned)e < DG_BE_COUNT && dg_dt_in(cuda_dtypes[e], dt);
}

static const dg_backend cuda_table = {
    .name = "cuda",
    .type = DG_CUDA,
    .half = &dg_cuda_half,
    .alloc = cuda_alloc_entry,
    .free = cuda_free_entry,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream = cuda_stream_entry,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy_peer = cuda_copy_peer,
    .synchronize = cuda_sync,
    .memory_stats = cuda_memory_stats,
    .empty_cache = cuda_empty_cache,
    .shutdown = cuda_shutdown,
    .supports = cuda_supports,
    .fill = dg_cuda_fill,
    .copy = dg_cuda_copy,
    .unary = dg_half_unary,
    .binary = dg_half_binary,
    .where = dg_cuda_where,
    .reduce = dg_half_reduce,
    .random = dg_half_random,
    .gemm = dg_cuda_gemm,
    .softmax = dg_half_softmax,
    .softmax_backward = dg_half_softmax_backward,
    .index_select = dg_half_index_select,
    .index_add = dg_half_index_add,
    .gather = dg_half_gather,
    .scatter_add = dg_half_scatter_add,
    .argsort = dg_half_argsort,
    .nll = dg_half_nll,
    .nll_backward = dg_half_nll_backward,
    .rnn_cell = dg_cuda_rnn_cell,
    .rnn_cell_backward = dg_cuda_rnn_cell_backward,
    .fused_update = dg_cuda_fused_update,
    .conv2d = dg_half_conv2d,
    .conv2d_backward_data = dg_half_conv2d_backward_data,
    .conv2d_backward_filter = dg_half_conv2d_backward_filter,
    .max_pool2d = dg_half_max_pool2d,
    .max_pool2d_backward = dg_half_max_pool2d_backward,
    .avg_pool2d = dg_half_avg_pool2d,
    .avg_pool2d_backward = dg_half_avg_pool2d_backward,
    .adaptive_avg_pool2d = dg_half_adaptive_avg_pool2d,
    .adaptive_avg_pool2d_backward = dg_half_adaptive_avg_pool2d_backward,
    .max_pool2d_with_indices = dg_half_max_pool2d_with_indices,
    .adaptive_max_pool2d = dg_half_adaptive_max_pool2d,
    .max_pool2d_indices_backward = dg_half_max_pool2d_indices_backward,
    .batch_norm = dg_half_batch_norm,
    .batch_norm_backward = dg_half_batch_norm_backward,
};

/* Streams, events and library handles on device c->device; on a failure what was made is
 * destroyed again, so a later request starts clean instead of leaking a set per try. The caller
 * holds g_lock. */
static int cuda_init(dg_cuda_ctx *c) {
    cudaStream_t st = NULL, cm = NULL;
    cudaEvent_t ec = NULL, em = NULL;
    cublasHandle_t blas = NULL;
    cudnnHandle_t dnn = NULL;
    bool have_blas = false, have_dnn = false;
    int rc = DG_CUDA(cudaSetDevice(c->device));
    if (!rc) rc = DG_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (!rc) rc = DG_CUDA(cudaStreamCreateWithFlags(&cm, cudaStreamNonBlocking));
    if (!rc) rc = DG_CUDA(cudaEventCreateWithFlags(&ec, cudaEventDisableTiming));
    if (!rc) rc = DG_CUDA(cudaEventCreateWithFlags(&em, cudaEventDisableTiming));
    if (!rc) rc = dg_cublas_load();
    if (!rc && !(rc = DG_CUBLAS(dg_cublas.create(&blas)))) have_blas = true;
    if (!rc) rc = DG_CUBLAS(dg_cublas.set_stream(blas, st));
    if (!rc) rc = DG_CUBLAS(dg_cublas.set_math_mode(blas, CUBLAS_DEFAULT_MATH));   /* TF32 off unless allowed */
    if (!rc && !(rc = DG_CUDNN(cudnnCreate(&dnn)))) have_dnn = true;
    if (!rc) rc = DG_CUDNN(cudnnSetStream(dnn, st));
    if (rc) {
        if (have_dnn) cudnnDestroy(dnn);
        if (have_blas) dg_cublas.destroy(blas);
        if (em) cudaEventDestroy(em);
        if (ec) cudaEventDestroy(ec);
        if (cm) cudaStreamDestroy(cm);
        if (st) cudaStreamDestroy(st);
        return rc;
    }
    c->stream = st; c->comm[0] = cm; c->ncomm = 1; c->ev_compute = ec; c->ev_comm = em; c->blas = blas; c->dnn = dnn;
    c->started = true;
    return 0;
}

/* The module's entry for the device registry (eager/device.c): the instance for gpu:index,
 * started on first request, or NULL with a message when no usable GPU exists
 * (cudaGetDeviceCount fails, e.g. 35 with only the stub driver, or reports fewer devices than
 * the index). */
DG_MODULE_EXPORT const dg_backend *dg_cuda_backend_get(int index) {
    pthread_mutex_lock(&g_lock);
    if (g_count < 0) {
        int n = 0;
        g_count_err = cudaGetDeviceCount(&n);   /* leaves n untouched on failure: check the code */
        g_count = g_count_err == cudaSuccess ? (n < DG_CUDA_MAX_DEVICES ? n : DG_CUDA_MAX_DEVICES) : 0;
        for (int i = 0; i < DG_CUDA_MAX_DEVICES; i++) {
            g_ctx[i].device = i;
            g_instance[i] = cuda_table;
            g_instance[i].index = i;
            g_instance[i].context = &g_ctx[i];
        }
    }
    const dg_backend *be = NULL;
    if (g_count_err != cudaSuccess) {
        DG_ERR(DG_EDEVICE, "gpu:%d requested but no usable GPU: cudaGetDeviceCount says %s (%d)", index,
               cudaGetErrorString(g_count_err), (int)g_count_err);
    } else if (index < 0 || index >= g_count) {
        DG_ERR(DG_EDEVICE, "gpu:%d requested but %d GPU(s) are visible", index, g_count);
    } else if (g_ctx[index].started || !cuda_init(&g_ctx[index])) {
        be = &g_instance[index];
    }
    pthread_mutex_unlock(&g_lock);
    return be;
}

/* The instances this process has started (or that still hold pool memory), at most cap; never
 * starts one. */
DG_MODULE_EXPORT int dg_cuda_backends_started(const dg_backend **out, int cap) {
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < DG_CUDA_MAX_DEVICES && g_count > 0; i++)
        if ((g_ctx[i].started || g_ctx[i].pool) && n < cap) out[n++] = &g_instance[i];
    pthread_mutex_unlock(&g_lock);
    return n;
}
