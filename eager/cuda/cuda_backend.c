/* eager/cuda/cuda_backend.c — the CUDA backend's table: device selection (a missing GPU is an
 * error for whoever asked for one, never a crash), one compute stream and cuBLAS handle, the
 * caching device allocator (size-rounded blocks reused in stream order, so a steady training
 * loop stops calling cudaMalloc after its first step), host<->device copies, and the entries
 * whose kernels are not written yet, which report themselves as unsupported. */
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

/* ---- device, stream, cuBLAS ---- */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_count = -1;              /* devices seen; -1 before the first query */
static cudaError_t g_count_err;
static int g_current = -1;
static cudaStream_t g_stream;
static cublasHandle_t g_blas;

cudaStream_t dg_cuda_stream(void) { return g_stream; }
cublasHandle_t dg_cuda_cublas(void) { return g_blas; }

/* ---- caching allocator ----
 * Requests are rounded (512 B granules below 1 MiB, 2 MiB above) and freed blocks wait in a
 * list for a request of the same rounded size. All work runs on one stream, so a block freed by
 * the host may be reused at once: later kernels are ordered after the ones that used it. */
typedef struct block { void *p; size_t size; bool used; } block;
static block *g_blocks;
static size_t g_nblocks, g_capblocks;
static dg_memory_stats g_stats;

static size_t round_size(size_t n) {
    if (n < (1u << 20)) return (n + 511) / 512 * 512;
    return (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
}

static void *cuda_alloc(size_t n) {
    size_t sz = round_size(n ? n : 1);
    pthread_mutex_lock(&g_lock);
    void *p = NULL;
    for (size_t i = 0; i < g_nblocks; i++)
        if (!g_blocks[i].used && g_blocks[i].size == sz) { g_blocks[i].used = true; p = g_blocks[i].p; break; }
    if (!p) {
        if (g_nblocks == g_capblocks) {
            size_t cap = g_capblocks ? g_capblocks * 2 : 256;
            block *b = realloc(g_blocks, sizeof *b * cap);
            if (!b) { pthread_mutex_unlock(&g_lock); return NULL; }
            g_blocks = b;
            g_capblocks = cap;
        }
        cudaError_t e = cudaMalloc(&p, sz);
        if (e == cudaErrorMemoryAllocation) {
            /* give the cache back and try once more before failing */
            cudaStreamSynchronize(g_stream);
            for (size_t i = 0; i < g_nblocks;)
                if (!g_blocks[i].used) { cudaFree(g_blocks[i].p); g_stats.reserved -= g_blocks[i].size; g_blocks[i] = g_blocks[--g_nblocks]; }
                else i++;
            e = cudaMalloc(&p, sz);
        }
        if (e != cudaSuccess) { DG_CUDA(e); pthread_mutex_unlock(&g_lock); return NULL; }
        g_stats.device_mallocs++;
        g_stats.reserved += sz;
        g_blocks[g_nblocks++] = (block){ p, sz, true };
    }
    g_stats.allocated += sz;
    if (g_stats.allocated > g_stats.peak_allocated) g_stats.peak_allocated = g_stats.allocated;
    pthread_mutex_unlock(&g_lock);
    return p;
}

static void cuda_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nblocks; i++)
        if (g_blocks[i].p == p && g_blocks[i].used) {
            g_blocks[i].used = false;
            g_stats.allocated -= g_blocks[i].size;
            break;
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
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nblocks;)
        if (!g_blocks[i].used) { cudaFree(g_blocks[i].p); g_stats.reserved -= g_blocks[i].size; g_blocks[i] = g_blocks[--g_nblocks]; }
        else i++;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ---- copies ---- */
static int cuda_upload(void *dst, const void *src, size_t n) {
    if (!n) return 0;
    /* the host buffer may be pageable and freed right after: finish before returning */
    int rc = DG_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, g_stream));
    return rc ? rc : DG_CUDA(cudaStreamSynchronize(g_stream));
}
static int cuda_download(void *dst, const void *src, size_t n) {
    if (!n) return 0;
    int rc = DG_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, g_stream));
    return rc ? rc : DG_CUDA(cudaStreamSynchronize(g_stream));
}
static int cuda_sync(void) { return DG_CUDA(cudaStreamSynchronize(g_stream)); }

/* ---- entries without CUDA kernels yet (cuDNN convolution, pooling, batch norm) ---- */
#define NOT_YET(name) DG_ERR(DG_EUNSUPPORTED, "%s: not implemented on the CUDA backend yet", name); return DG_EUNSUPPORTED
static int cu_conv(const dg_conv2d_geom *g, const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_tensor *y) { NOT_YET("conv2d"); }
static int cu_conv_bd(const dg_conv2d_geom *g, const dg_tensor *gy, const dg_tensor *w, dg_tensor *gx) { NOT_YET("conv2d backward"); }
static int cu_conv_bf(const dg_conv2d_geom *g, const dg_tensor *gy, const dg_tensor *x, dg_tensor *gw, dg_tensor *gb) { NOT_YET("conv2d backward"); }
static int cu_maxp(const dg_pool2d_geom *g, const dg_tensor *x, dg_tensor *y) { NOT_YET("max_pool2d"); }
static int cu_maxp_b(const dg_pool2d_geom *g, const dg_tensor *x, const dg_tensor *y, const dg_tensor *gy, dg_tensor *gx) { NOT_YET("max_pool2d backward"); }
static int cu_avgp(const dg_pool2d_geom *g, const dg_tensor *x, dg_tensor *y) { NOT_YET("avg_pool2d"); }
static int cu_avgp_b(const dg_pool2d_geom *g, const dg_tensor *gy, dg_tensor *gx) { NOT_YET("avg_pool2d backward"); }
static int cu_aap(const dg_tensor *x, dg_tensor *y) { NOT_YET("adaptive_avg_pool2d"); }
static int cu_aap_b(const dg_tensor *gy, dg_tensor *gx) { NOT_YET("adaptive_avg_pool2d backward"); }
static int cu_bn(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_tensor *y, dg_tensor *m, dg_tensor *v,
                 bool tr, double eps, int64_t n, int64_t c, int64_t inner) { NOT_YET("batch_norm"); }
static int cu_bn_b(const dg_tensor *x, const dg_tensor *gy, const dg_tensor *w, const dg_tensor *m, const dg_tensor *v,
                   bool tr, dg_tensor *gx, dg_tensor *gw, dg_tensor *gb, int64_t n, int64_t c, int64_t inner) { NOT_YET("batch_norm backward"); }

static const dg_backend cuda_backend = {
    .name = "cuda",
    .type = DG_CUDA,
    .alloc = cuda_alloc,
    .free = cuda_free,
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
    .conv2d = cu_conv,
    .conv2d_backward_data = cu_conv_bd,
    .conv2d_backward_filter = cu_conv_bf,
    .max_pool2d = cu_maxp,
    .max_pool2d_backward = cu_maxp_b,
    .avg_pool2d = cu_avgp,
    .avg_pool2d_backward = cu_avgp_b,
    .adaptive_avg_pool2d = cu_aap,
    .adaptive_avg_pool2d_backward = cu_aap_b,
    .batch_norm = cu_bn,
    .batch_norm_backward = cu_bn_b,
};

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
    } else if (!DG_CUDA(cudaSetDevice(index)) && !DG_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking)) &&
               !DG_CUBLAS(cublasCreate(&g_blas)) && !DG_CUBLAS(cublasSetStream(g_blas, g_stream)) &&
               !DG_CUBLAS(cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH))) {  /* TF32 off by default */
        g_current = index;
        be = &cuda_backend;
    }
    pthread_mutex_unlock(&g_lock);
    return be;
}
