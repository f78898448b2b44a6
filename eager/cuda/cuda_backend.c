/* eager/cuda/cuda_backend.c — the CUDA backend's table: device selection (a missing GPU is an
 * error for whoever asked for one, never a crash), one compute stream and cuBLAS handle, the
 * communication stream with events between the two, the caching device allocator
 * (eager/device_pool.c), pinned host buffers and host<->device copies, and the shutdown entry that
 * gives all of it back for dg_shutdown. Kernels live in the .cu files and the cuDNN files beside
 * this one. */
#include "cuda_internal.h"
#include "../device_pool.h"
#include <pthread.h>

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

/* ---- device, streams, library handles ---- */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_count = -1;              /* devices seen; -1 before the first query */
static cudaError_t g_count_err;
static int g_current = -1;
static cudaStream_t g_stream, g_comm;
static cudaEvent_t g_ev_compute, g_ev_comm;
static cublasHandle_t g_blas;
static cudnnHandle_t g_dnn;

cudaStream_t dg_cuda_stream(void) { return g_stream; }
static void *cuda_stream_entry(void) { return (void *)g_stream; }
DG_MODULE_EXPORT cudaStream_t dg_cuda_comm_stream(void) { return g_comm; }
cublasHandle_t dg_cuda_cublas(void) { return g_blas; }
cudnnHandle_t dg_cuda_cudnn(void) { return g_dnn; }

DG_MODULE_EXPORT int dg_cuda_comm_wait_compute(void) {
    int rc = DG_CUDA(cudaEventRecord(g_ev_compute, g_stream));
    return rc ? rc : DG_CUDA(cudaStreamWaitEvent(g_comm, g_ev_compute, 0));
}
DG_MODULE_EXPORT int dg_cuda_compute_wait_comm(void) {
    int rc = DG_CUDA(cudaEventRecord(g_ev_comm, g_comm));
    return rc ? rc : DG_CUDA(cudaStreamWaitEvent(g_stream, g_ev_comm, 0));
}

/* ---- caching allocator ----
 * eager/device_pool.c splits cudaMalloc'ed segments into blocks and merges them when freed (a
 * steady training loop stops calling cudaMalloc after its first steps). Tensors are used on the
 * compute stream only (collectives on the comm stream are ordered back with
 * dg_cuda_compute_wait_comm before their buffers can be freed), so a block freed by the host may
 * be handed out again at once: later kernels run after the ones that used it. */
static dg_device_pool *g_pool;
static cudaError_t g_seg_err;   /* why the last segment could not be made (under g_lock) */

static void *segment_alloc(size_t n, void *ctx) {
    void *p = NULL;
    cudaError_t e = g_seg_err = cudaMalloc(&p, n);
    if (e == cudaSuccess) return p;
    cudaGetLastError();   /* out of memory is not sticky: clear it for the next call */
    return NULL;
}
/* cudaFree waits for the device, so queued kernels that used the segment have finished */
static void segment_free(void *p, void *ctx) { cudaFree(p); }

DG_MODULE_EXPORT void *dg_cuda_alloc(size_t n) {
    pthread_mutex_lock(&g_lock);
    if (!g_pool) g_pool = dg_device_pool_new((dg_device_pool_ops){ segment_alloc, segment_free, NULL });
    g_seg_err = cudaSuccess;
    void *p = g_pool ? dg_device_pool_alloc(g_pool, n) : NULL;
    if (!p) {
        dg_memory_stats st = { 0 };
        if (g_pool) dg_device_pool_stats(g_pool, &st);
        cudaError_t e = g_seg_err;
        pthread_mutex_unlock(&g_lock);
        if (e == cudaSuccess || e == cudaErrorMemoryAllocation)
            DG_ERR(DG_ENOMEM, "cuda alloc: %zu bytes (%zu allocated, %zu reserved): out of device memory", n, st.allocated,
                   st.reserved);
        else
            DG_ERR(DG_EDEVICE, "cuda alloc: %zu bytes: cudaMalloc failed: %s (%d)", n, cudaGetErrorString(e), (int)e);
        return NULL;
    }
    pthread_mutex_unlock(&g_lock);
    return p;
}

DG_MODULE_EXPORT void dg_cuda_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_lock);
    if (g_pool) dg_device_pool_free(g_pool, p);
    pthread_mutex_unlock(&g_lock);
}

static int cuda_memory_stats(dg_memory_stats *out) {
    pthread_mutex_lock(&g_lock);
    if (g_pool) dg_device_pool_stats(g_pool, out);
    else memset(out, 0, sizeof *out);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static void release_pinned(void);

static int cuda_empty_cache(void) {
    int rc = DG_CUDA(cudaStreamSynchronize(g_stream));
    if (!rc) rc = DG_CUDA(cudaStreamSynchronize(g_comm));
    pthread_mutex_lock(&g_lock);
    if (g_pool) dg_device_pool_release_free(g_pool);
    pthread_mutex_unlock(&g_lock);
    release_pinned();
    return rc;
}

/* ---- pinned host memory ----
 * Page-locked buffers for the DataLoader's collated batches. An upload from one of them is
 * queued without waiting (the DMA reads it later); so that the buffer is not refilled while a
 * copy still reads it, its release records an event on the compute stream and the next hand-out
 * of that buffer waits for the event. Buffers are cached by exact size (a DataLoader asks for
 * the same few sizes every batch). */
typedef struct pinned { void *p; size_t size; bool used; cudaEvent_t done; } pinned;
static pthread_mutex_t g_pin_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned *g_pin; static size_t g_npin, g_cappin;

static void *cuda_host_alloc(size_t n) {
    if (!n) n = 1;
    cudaSetDevice(g_current);   /* DataLoader workers are threads of their own: events belong to our device */
    pthread_mutex_lock(&g_pin_lock);
    for (size_t i = 0; i < g_npin; i++)
        if (!g_pin[i].used && g_pin[i].size == n) {
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
    g_pin[g_npin++] = (pinned){ p, n, true, ev };
    pthread_mutex_unlock(&g_pin_lock);
    return p;
}

static void cuda_host_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_pin_lock);
    for (size_t i = 0; i < g_npin; i++)
        if (g_pin[i].p == p) {
            cudaEventRecord(g_pin[i].done, g_stream);
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

/* dg_shutdown: waits for both streams, then releases the cuDNN state, the idle pinned buffers,
 * the cached device memory (the whole pool when no tensor still holds a block of it), the
 * library handles, events and streams. A later request for the GPU starts it again. */
static void cuda_shutdown(void) {
    pthread_mutex_lock(&g_lock);
    bool started = g_current >= 0;
    pthread_mutex_unlock(&g_lock);
    if (started) {
        cudaSetDevice(g_current);
        cudaStreamSynchronize(g_stream);
        cudaStreamSynchronize(g_comm);
        dg_cuda_conv_release();
        dg_cuda_norm_pool_release();
    }
    release_pinned();
    pthread_mutex_lock(&g_pin_lock);
    if (g_npin == 0) { free(g_pin); g_pin = NULL; g_cappin = 0; }
    pthread_mutex_unlock(&g_pin_lock);
    pthread_mutex_lock(&g_lock);
    if (g_pool) {
        dg_memory_stats st;
        dg_device_pool_stats(g_pool, &st);
        if (st.allocated == 0) { dg_device_pool_destroy(g_pool); g_pool = NULL; }
        else dg_device_pool_release_free(g_pool);
    }
    if (started) {
        cudnnDestroy(g_dnn);
        dg_cublas.destroy(g_blas);
        cudaEventDestroy(g_ev_comm);
        cudaEventDestroy(g_ev_compute);
        cudaStreamDestroy(g_comm);
        cudaStreamDestroy(g_stream);
        g_dnn = NULL; g_blas = NULL; g_ev_comm = g_ev_compute = NULL; g_comm = g_stream = NULL;
        g_current = -1;
    }
    pthread_mutex_unlock(&g_lock);
}

/* ---- copies ---- */
/* No wait: the runtime stages a pageable source before cudaMemcpyAsync returns, so the caller may
 * reuse it at once; a pinned buffer of ours is guarded by its release event. */
static int cuda_upload(void *dst, const void *src, size_t n) {
    if (!n) return 0;
    return DG_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, g_stream));
}
static int cuda_download(void *dst, const void *src, size_t n) {
    if (!n) return 0;
    int rc = DG_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, g_stream));
    return rc ? rc : DG_CUDA(cudaStreamSynchronize(g_stream));
}
static int cuda_sync(void) { return DG_CUDA(cudaStreamSynchronize(g_stream)); }

static const dg_backend cuda_backend = {
    .name = "cuda",
    .type = DG_CUDA,
    .alloc = dg_cuda_alloc,
    .free = dg_cuda_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream = cuda_stream_entry,
    .upload = cuda_upload,
    .download = cuda_download,
    .synchronize = cuda_sync,
    .memory_stats = cuda_memory_stats,
    .empty_cache = cuda_empty_cache,
    .shutdown = cuda_shutdown,
    .fill = dg_cuda_fill,
    .copy = dg_cuda_copy,
    .unary = dg_cuda_unary,
    .binary = dg_cuda_binary,
    .where = dg_cuda_where,
    .reduce = dg_cuda_reduce,
    .random = dg_cuda_random,
    .gemm = dg_cuda_gemm,
    .softmax = dg_cuda_softmax,
    .softmax_backward = dg_cuda_softmax_backward,
    .index_select = dg_cuda_index_select,
    .index_add = dg_cuda_index_add,
    .gather = dg_cuda_gather,
    .scatter_add = dg_cuda_scatter_add,
    .nll = dg_cuda_nll,
    .nll_backward = dg_cuda_nll_backward,
    .fused_update = dg_cuda_fused_update,
    .conv2d = dg_cuda_conv2d,
    .conv2d_backward_data = dg_cuda_conv2d_backward_data,
    .conv2d_backward_filter = dg_cuda_conv2d_backward_filter,
    .max_pool2d = dg_cuda_max_pool2d,
    .max_pool2d_backward = dg_cuda_max_pool2d_backward,
    .avg_pool2d = dg_cuda_avg_pool2d,
    .avg_pool2d_backward = dg_cuda_avg_pool2d_backward,
    .adaptive_avg_pool2d = dg_cuda_adaptive_avg_pool2d,
    .adaptive_avg_pool2d_backward = dg_cuda_adaptive_avg_pool2d_backward,
    .batch_norm = dg_cuda_batch_norm,
    .batch_norm_backward = dg_cuda_batch_norm_backward,
};

/* Streams, events and library handles on device `index`; on a failure what was made is
 * destroyed again, so a later request starts clean instead of leaking a set per try. The caller
 * holds g_lock. */
static int cuda_init(int index) {
    cudaStream_t st = NULL, cm = NULL;
    cudaEvent_t ec = NULL, em = NULL;
    cublasHandle_t blas = NULL;
    cudnnHandle_t dnn = NULL;
    bool have_blas = false, have_dnn = false;
    int rc = DG_CUDA(cudaSetDevice(index));
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
    g_stream = st; g_comm = cm; g_ev_compute = ec; g_ev_comm = em; g_blas = blas; g_dnn = dnn;
    return 0;
}

/* The module's entry for the device registry (eager/device.c): NULL with a message when no
 * usable GPU exists (cudaGetDeviceCount fails, e.g. 35 with only the stub driver, or
 * reports fewer devices than the index). */
DG_MODULE_EXPORT const dg_backend *dg_cuda_backend_get(int index) {
    pthread_mutex_lock(&g_lock);
    if (g_count < 0) {
        int n = 0;
        g_count_err = cudaGetDeviceCount(&n);   /* leaves n untouched on failure: check the code */
        g_count = g_count_err == cudaSuccess ? n : 0;
    }
    const dg_backend *be = NULL;
    if (g_count_err != cudaSuccess) {
        DG_ERR(DG_EDEVICE, "gpu:%d requested but no usable GPU: cudaGetDeviceCount says %s (%d)", index,
               cudaGetErrorString(g_count_err), (int)g_count_err);
    } else if (index < 0 || index >= g_count) {
        DG_ERR(DG_EDEVICE, "gpu:%d requested but %d GPU(s) are visible", index, g_count);
    } else if (g_current == index) {
        be = &cuda_backend;
    } else if (g_current >= 0) {
        DG_ERR(DG_EDEVICE, "gpu:%d requested after gpu:%d: one GPU per process (start one process per GPU)", index, g_current);
    } else if (!cuda_init(index)) {
        g_current = index;
        be = &cuda_backend;
    }
    pthread_mutex_unlock(&g_lock);
    return be;
}

DG_MODULE_EXPORT const dg_backend *dg_cuda_backend_started(void) {
    pthread_mutex_lock(&g_lock);
    bool started = g_current >= 0 || g_pool;
    pthread_mutex_unlock(&g_lock);
    return started ? &cuda_backend : NULL;
}
