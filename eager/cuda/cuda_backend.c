/* eager/cuda/cuda_backend.c — the CUDA backend's table: device selection (a missing GPU is an
 * error for whoever asked for one, never a crash), one compute stream and cuBLAS handle, the
 * communication stream with events between the two, the caching device allocator (size-class
 * bins reused in stream order, so a steady training loop stops calling cudaMalloc after its
 * first step), pinned host buffers and host<->device copies. Kernels live in the .cu files and
 * the cuDNN files beside this one. */
#include "cuda_internal.h"
#include <pthread.h>

/* ---- errors ---- */
int dg_cuda_check(cudaError_t e, const char *what, const char *file, int line) {
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
cudaStream_t dg_cuda_comm_stream(void) { return g_comm; }
cublasHandle_t dg_cuda_cublas(void) { return g_blas; }
cudnnHandle_t dg_cuda_cudnn(void) { return g_dnn; }

int dg_cuda_comm_wait_compute(void) {
    int rc = DG_CUDA(cudaEventRecord(g_ev_compute, g_stream));
    return rc ? rc : DG_CUDA(cudaStreamWaitEvent(g_comm, g_ev_compute, 0));
}
int dg_cuda_compute_wait_comm(void) {
    int rc = DG_CUDA(cudaEventRecord(g_ev_comm, g_comm));
    return rc ? rc : DG_CUDA(cudaStreamWaitEvent(g_stream, g_ev_comm, 0));
}

/* ---- caching allocator ----
 * Requests are rounded to a size class (512 B granules below 1 MiB; above, eight classes per
 * power of two, so rounding wastes at most 1/8) and a freed block waits in its class's bin for
 * the next request of that class. Tensors are used on the compute stream only (collectives on
 * the comm stream are ordered back with dg_cuda_compute_wait_comm before their buffers can be
 * freed), so a block freed by the host may be handed out again at once: later kernels run after
 * the ones that used it. Live blocks sit in a pointer-keyed table so a free is O(1). */
typedef struct bin { size_t size; void **ptr; size_t n, cap; } bin;
typedef struct live { void *p; size_t size; } live;
static bin *g_bins; static size_t g_nbins, g_capbins;
static live *g_live; static size_t g_nlive, g_caplive;    /* open addressing, p == NULL empty */
static dg_memory_stats g_stats;

static size_t round_size(size_t n) {
    if (n < (1u << 20)) return (n + 511) / 512 * 512;
    size_t top = (size_t)1 << (63 - __builtin_clzll((unsigned long long)n));   /* 2^floor(log2 n) */
    size_t step = top / 8;
    return (n + step - 1) / step * step;
}

static bin *find_bin(size_t size, bool make) {
    for (size_t i = 0; i < g_nbins; i++) if (g_bins[i].size == size) return &g_bins[i];
    if (!make) return NULL;
    if (g_nbins == g_capbins) {
        size_t cap = g_capbins ? g_capbins * 2 : 64;
        bin *b = realloc(g_bins, sizeof *b * cap);
        if (!b) return NULL;
        g_bins = b; g_capbins = cap;
    }
    g_bins[g_nbins] = (bin){ size, NULL, 0, 0 };
    return &g_bins[g_nbins++];
}

static size_t live_slot(void *p) {
    size_t h = ((uintptr_t)p >> 9) * 0x9E3779B97F4A7C15ull;
    return h & (g_caplive - 1);
}
static bool live_put(void *p, size_t size);
static bool live_grow(void) {
    size_t old = g_caplive;
    live *o = g_live;
    live *n = calloc(old ? old * 2 : 1024, sizeof *n);
    if (!n) return false;
    g_live = n; g_caplive = old ? old * 2 : 1024; g_nlive = 0;
    for (size_t i = 0; i < old; i++) if (o[i].p) live_put(o[i].p, o[i].size);
    free(o);
    return true;
}
static bool live_put(void *p, size_t size) {
    if ((g_nlive + 1) * 2 > g_caplive && !live_grow()) return false;
    size_t i = live_slot(p);
    while (g_live[i].p) i = (i + 1) & (g_caplive - 1);
    g_live[i] = (live){ p, size };
    g_nlive++;
    return true;
}
/* Removes p and returns its size, 0 when p is not a live block. */
static size_t live_take(void *p) {
    if (!g_caplive) return 0;
    size_t i = live_slot(p);
    while (g_live[i].p && g_live[i].p != p) i = (i + 1) & (g_caplive - 1);
    if (!g_live[i].p) return 0;
    size_t size = g_live[i].size;
    g_live[i].p = NULL;
    g_nlive--;
    /* re-insert the rest of the cluster so lookups never stop early at the hole */
    for (size_t j = (i + 1) & (g_caplive - 1); g_live[j].p; j = (j + 1) & (g_caplive - 1)) {
        live e = g_live[j];
        g_live[j].p = NULL;
        g_nlive--;
        live_put(e.p, e.size);
    }
    return size;
}

/* Frees every cached block; the caller holds g_lock. */
static void release_cached(void) {
    for (size_t i = 0; i < g_nbins; i++) {
        for (size_t k = 0; k < g_bins[i].n; k++) cudaFree(g_bins[i].ptr[k]);
        g_stats.reserved -= g_bins[i].size * g_bins[i].n;
        g_bins[i].n = 0;
    }
}

void *dg_cuda_alloc(size_t n) {
    size_t sz = round_size(n ? n : 1);
    pthread_mutex_lock(&g_lock);
    void *p = NULL;
    bin *b = find_bin(sz, true);
    if (b && b->n) p = b->ptr[--b->n];
    if (!p && b && b->cap == 0) {
        b->ptr = malloc(sizeof *b->ptr * 16);
        b->cap = b->ptr ? 16 : 0;
    }
    if (!p) {
        cudaError_t e = cudaMalloc(&p, sz);
        if (e == cudaErrorMemoryAllocation) {
            /* give the cache back and try once more before failing */
            cudaGetLastError();
            cudaStreamSynchronize(g_stream);
            release_cached();
            e = cudaMalloc(&p, sz);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            dg_set_error_at(DG_ENOMEM, __FILE__, __LINE__, "cuda alloc: %zu bytes (%zu allocated, %zu reserved): %s",
                            n, g_stats.allocated, g_stats.reserved, cudaGetErrorString(e));
            pthread_mutex_unlock(&g_lock);
            return NULL;
        }
        g_stats.device_mallocs++;
        g_stats.reserved += sz;
    }
    if (!live_put(p, sz)) {   /* host out of memory for the table: keep the block cached */
        if (b && b->n < b->cap) b->ptr[b->n++] = p;
        else { cudaFree(p); g_stats.reserved -= sz; }
        pthread_mutex_unlock(&g_lock);
        DG_ERR(DG_ENOMEM, "cuda alloc: host memory for the block table ran out");
        return NULL;
    }
    g_stats.allocated += sz;
    if (g_stats.allocated > g_stats.peak_allocated) g_stats.peak_allocated = g_stats.allocated;
    pthread_mutex_unlock(&g_lock);
    return p;
}

void dg_cuda_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_lock);
    size_t sz = live_take(p);
    if (sz) {
        g_stats.allocated -= sz;
        bin *b = find_bin(sz, true);
        if (b && b->n == b->cap) {
            size_t cap = b->cap ? b->cap * 2 : 16;
            void **q = realloc(b->ptr, sizeof *q * cap);
            if (q) { b->ptr = q; b->cap = cap; }
        }
        if (b && b->n < b->cap) b->ptr[b->n++] = p;
        else { cudaFree(p); g_stats.reserved -= sz; }   /* no host memory for the bin: release */
    }
    pthread_mutex_unlock(&g_lock);
}

static int cuda_memory_stats(dg_memory_stats *out) {
    pthread_mutex_lock(&g_lock);
    *out = g_stats;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static int cuda_empty_cache(void) {
    int rc = DG_CUDA(cudaStreamSynchronize(g_stream));
    if (!rc) rc = DG_CUDA(cudaStreamSynchronize(g_comm));
    pthread_mutex_lock(&g_lock);
    release_cached();
    pthread_mutex_unlock(&g_lock);
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

/* True when [p, p+n) lies in one of our pinned buffers. */
static bool is_pinned(const void *p, size_t n) {
    bool yes = false;
    pthread_mutex_lock(&g_pin_lock);
    for (size_t i = 0; i < g_npin && !yes; i++)
        yes = g_pin[i].used && (const char *)p >= (const char *)g_pin[i].p &&
              (const char *)p + n <= (const char *)g_pin[i].p + g_pin[i].size;
    pthread_mutex_unlock(&g_pin_lock);
    return yes;
}

/* ---- copies ---- */
static int cuda_upload(void *dst, const void *src, size_t n) {
    if (!n) return 0;
    int rc = DG_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, g_stream));
    /* a pageable buffer may be freed right after: finish before returning; a pinned one of
     * ours is guarded by its release event */
    if (rc || is_pinned(src, n)) return rc;
    return DG_CUDA(cudaStreamSynchronize(g_stream));
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
    .upload = cuda_upload,
    .download = cuda_download,
    .synchronize = cuda_sync,
    .memory_stats = cuda_memory_stats,
    .empty_cache = cuda_empty_cache,
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

/* The strong definition of the lookup eager/cpu/cpu_backend.c declares weak: NULL with a message
 * when no usable GPU exists (cudaGetDeviceCount fails, e.g. 35 with only the stub driver, or
 * reports fewer devices than the index). */
const dg_backend *dg_cuda_backend_get(int index) {
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

bool dg_cuda_built(void) { return true; }
