/* eager/cuda/cudnn_norm_pool.c — batch norm and average pooling on the CUDA backend through
 * cuDNN's legacy API, with pool.cu's kernels for what cuDNN does not do the CPU's way
 * (eager/cpu/batchnorm.c, eager/cpu/pool.c).
 *
 * Batch norm: x is viewed as NCHW [n, c, inner, 1], CUDNN_BATCHNORM_SPATIAL. Training runs
 * cudnnBatchNormalizationForwardTraining without running statistics (the op updates them
 * itself from save_mean / save_invstd) and saves the batch mean and 1/sqrt(biased var + eps),
 * the two things backend.h asks for; eval runs cudnnBatchNormalizationForwardInference on the
 * running mean and variance the op passes in those slots. The training backward is
 * cudnnBatchNormalizationBackward on the saved statistics. cuDNN has no eval-mode backward
 * (there the statistics are constants), so that, and the case without gx (cuDNN would compute
 * a full gx for nothing), go to pool.cu's kernels, as does anything cuDNN cannot take: eps
 * below CUDNN_BN_MIN_EPSILON, sizes past int, or a CUDNN_STATUS_NOT_SUPPORTED answer. A NULL
 * weight or bias becomes a cached device buffer of ones or zeros.
 *
 * Average pooling forward uses cudnnPoolingForward when cuDNN's windows are the CPU's: the
 * divisor modes match count_include_pad exactly (COUNT_INCLUDE_PADDING divides by kh*kw,
 * COUNT_EXCLUDE_PADDING by the real elements), but cuDNN has no notion of a ceil_mode window
 * that overhangs the padded input, where the CPU clips the include-pad divisor; so a geometry
 * with (oh-1)*sh + kh > h + 2*ph (or the same along w) goes to the kernel. The backward is
 * always the kernel: cudnnPoolingBackward takes x and y, which avg_pool2d_backward is not given.
 *
 * cuDNN has no divisor_override either: a geometry with one goes to the kernel.
 *
 * One lock guards the shared descriptors and the ones/zeros buffers and is held through the
 * cuDNN call that uses them. */
#include "cuda_internal.h"
#include <limits.h>
#include <pthread.h>

/* cudnnBatchNormalizationBackward reads its epsilon only when no saved statistics are given,
 * and we always give them; the entry has no eps, so pass a valid one */
#define BN_BACKWARD_EPS (1e-5 > CUDNN_BN_MIN_EPSILON ? 1e-5 : CUDNN_BN_MIN_EPSILON)

static pthread_mutex_t g_np_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_np_made;
static cudnnTensorDescriptor_t g_xd, g_yd, g_pd;   /* data, pooled data, per-channel parameters */
static cudnnPoolingDescriptor_t g_pool;
/* stand-ins for a NULL weight / bias, per device and dtype (0 f32, 1 f64), g_pcap elements each */
static void *g_ones[DG_CUDA_MAX_DEVICES][2], *g_zeros[DG_CUDA_MAX_DEVICES][2];
static int64_t g_pcap[DG_CUDA_MAX_DEVICES][2];

/* dg_shutdown, per device: the shared descriptors and that device's ones/zeros stand-ins (the
 * caller has waited for that device's stream, so no queued kernel reads them). */
void dg_cuda_norm_pool_release(int device) {
    pthread_mutex_lock(&g_np_lock);
    if (g_np_made) {
        cudnnDestroyPoolingDescriptor(g_pool);
        cudnnDestroyTensorDescriptor(g_pd);
        cudnnDestroyTensorDescriptor(g_yd);
        cudnnDestroyTensorDescriptor(g_xd);
        g_np_made = false;
    }
    for (int i = 0; i < 2; i++) {   /* only this device's: the others' streams may still read theirs */
        cudaFree(g_ones[device][i]);
        cudaFree(g_zeros[device][i]);
        g_ones[device][i] = g_zeros[device][i] = NULL;
        g_pcap[device][i] = 0;
    }
    pthread_mutex_unlock(&g_np_lock);
}

static const float k_one_f = 1.0f, k_zero_f = 0.0f;
static const double k_one_d = 1.0, k_zero_d = 0.0;
/* cuDNN's alpha/beta: host scalars of the compute type (double for f64, float for f32) */
static const void *scal(dg_dtype dt, bool one) {
    if (dt == DG_F32) return one ? (const void *)&k_one_f : (const void *)&k_zero_f;
    return one ? (const void *)&k_one_d : (const void *)&k_zero_d;
}

static int np_check(cudnnStatus_t s, const char *fn, const char *op, const dg_kview *x, int line) {
    if (s == CUDNN_STATUS_SUCCESS) return 0;
    char sh[96], what[256];
    dg_shape_fmt(x->shape, x->ndim, sh, sizeof sh);
    snprintf(what, sizeof what, "%s (%s: input %s, %s)", fn, op, sh, dg_dtype_name(x->dtype));
    return dg_cuda_check_dnn(s, what, __FILE__, line);
}
/* a cuDNN call checked with the op and input shape in its message (needs `op` and `xt`) */
#define NP(fn, ...) np_check(fn(__VA_ARGS__), #fn, op, xt, __LINE__)

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }
static cudnnDataType_t dnn_type(dg_dtype dt) { return dt == DG_F32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE; }

/* Creates the shared descriptors once; the caller holds g_np_lock. */
static int np_make(const char *op, const dg_kview *xt) {
    if (g_np_made) return 0;
    int rc = NP(cudnnCreateTensorDescriptor, &g_xd);
    if (rc) return rc;
    if ((rc = NP(cudnnCreateTensorDescriptor, &g_yd))) goto no_y;
    if ((rc = NP(cudnnCreateTensorDescriptor, &g_pd))) goto no_p;
    if ((rc = NP(cudnnCreatePoolingDescriptor, &g_pool))) goto no_pool;
    g_np_made = true;
    return 0;
no_pool:
    cudnnDestroyTensorDescriptor(g_pd);
no_p:
    cudnnDestroyTensorDescriptor(g_yd);
no_y:
    cudnnDestroyTensorDescriptor(g_xd);
    return rc;
}

/* Makes the ones/zeros stand-ins hold at least c elements of dt; the caller holds g_np_lock.
 * Plain cudaMalloc: they live as long as the process and are not tensor memory, so they stay
 * out of the allocator's statistics. */
static int bn_params(dg_dtype dt, int64_t c) {
    int i = dt == DG_F64, d = dg_cuda_device();
    if (g_pcap[d][i] >= c) return 0;
    int64_t cap = g_pcap[d][i] * 2 > c ? g_pcap[d][i] * 2 : c;
    if (cap < 256) cap = 256;
    size_t bytes = (size_t)cap * dg_dtype_size(dt);
    if (g_ones[d][i] || g_zeros[d][i]) {
        /* queued kernels may still read the old pair */
        int rc = DG_CUDA(cudaStreamSynchronize(dg_cuda_stream()));
        if (rc) return rc;
        cudaFree(g_ones[d][i]);
        cudaFree(g_zeros[d][i]);
        g_ones[d][i] = g_zeros[d][i] = NULL;
        g_pcap[d][i] = 0;
    }
    void *o = NULL, *z = NULL;
    int rc = DG_CUDA(cudaMalloc(&o, bytes));
    if (!rc) rc = DG_CUDA(cudaMalloc(&z, bytes));
    if (!rc) rc = dg_cuda_fill_raw(o, dt, cap, 1.0);
    if (!rc) rc = DG_CUDA(cudaMemsetAsync(z, 0, bytes, dg_cuda_stream()));
    if (rc) {
        cudaFree(o);
        cudaFree(z);
        return rc;
    }
    g_ones[d][i] = o;
    g_zeros[d][i] = z;
    g_pcap[d][i] = cap;
    return 0;
}

/* Whether cuDNN can take x [n, c, inner] as a 4-d tensor with int sizes and strides. */
static bool bn_fits(int64_t n, int64_t c, int64_t inner) {
    return fits_int(n) && fits_int(c) && fits_int(inner) && n * c * inner <= INT_MAX;
}

/* g_xd = x as [n, c, inner, 1], g_pd = the per-channel descriptor derived from it. */
static int bn_descs(const char *op, const dg_kview *xt, int64_t n, int64_t c, int64_t inner) {
    int rc = NP(cudnnSetTensor4dDescriptor, g_xd, CUDNN_TENSOR_NCHW, dnn_type(xt->dtype), (int)n, (int)c, (int)inner, 1);
    if (!rc) rc = NP(cudnnDeriveBNTensorDescriptor, g_pd, g_xd, CUDNN_BATCHNORM_SPATIAL);
    return rc;
}

int dg_cuda_batch_norm(const dg_backend *be, const dg_kview *x, const dg_kview *weight, const dg_kview *bias, dg_kview *y,
                       dg_kview *save_mean, dg_kview *save_invstd, bool training, double eps,
                       int64_t n, int64_t c, int64_t inner) {
    DG_CUDA_ENTER(be);
    const char *op = "batch_norm";
    const dg_kview *xt = x;
    dg_dtype dt = x->dtype;
    if ((dt != DG_F32 && dt != DG_F64) || eps < CUDNN_BN_MIN_EPSILON || n * inner == 0 || !bn_fits(n, c, inner))
        return dg_cuda_batch_norm_kernel(x, weight, bias, y, save_mean, save_invstd, training, eps, n, c, inner);
    if (c == 0) return 0;
    pthread_mutex_lock(&g_np_lock);
    int rc = np_make(op, xt);
    if (!rc) rc = bn_descs(op, xt, n, c, inner);
    if (!rc && (!weight || !bias)) rc = bn_params(dt, c);
    if (rc) {
        pthread_mutex_unlock(&g_np_lock);
        return rc;
    }
    int pi = dt == DG_F64;
    const void *wp = weight ? weight->data : g_ones[dg_cuda_device()][pi], *bp = bias ? bias->data : g_zeros[dg_cuda_device()][pi];
    cudnnStatus_t st;
    const char *fn;
    if (training) {
        fn = "cudnnBatchNormalizationForwardTraining";
        st = cudnnBatchNormalizationForwardTraining(dg_cuda_cudnn(), CUDNN_BATCHNORM_SPATIAL, scal(dt, true), scal(dt, false),
                                                    g_xd, x->data, g_xd, y->data, g_pd, wp, bp,
                                                    0.0, NULL, NULL, eps, save_mean->data, save_invstd->data);
    } else {
        fn = "cudnnBatchNormalizationForwardInference";
        st = cudnnBatchNormalizationForwardInference(dg_cuda_cudnn(), CUDNN_BATCHNORM_SPATIAL, scal(dt, true), scal(dt, false),
                                                     g_xd, x->data, g_xd, y->data, g_pd, wp, bp,
                                                     save_mean->data, save_invstd->data, eps);
    }
    pthread_mutex_unlock(&g_np_lock);
    if (st == CUDNN_STATUS_NOT_SUPPORTED)
        return dg_cuda_batch_norm_kernel(x, weight, bias, y, save_mean, save_invstd, training, eps, n, c, inner);
    return np_check(st, fn, op, xt, __LINE__);
}

int dg_cuda_batch_norm_backward(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *weight,
                                const dg_kview *save_mean, const dg_kview *save_invstd, bool training,
                                dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner) {
    DG_CUDA_ENTER(be);
    const char *op = "batch_norm backward";
    const dg_kview *xt = x;
    dg_dtype dt = x->dtype;
    if (!gx && !gw && !gb) return 0;
    if ((dt != DG_F32 && dt != DG_F64) || !training || !gx || n * inner == 0 || !bn_fits(n, c, inner))
        return dg_cuda_batch_norm_backward_kernel(x, gy, weight, save_mean, save_invstd, training, gx, gw, gb, n, c, inner);
    if (c == 0) return 0;
    size_t es = dg_dtype_size(dt);
    /* cuDNN always writes both parameter gradients: give it scratch for the unwanted ones */
    char *scratch = NULL;
    if ((!gw || !gb) && !(scratch = dg_cuda_alloc((size_t)(2 * c) * es))) return DG_ENOMEM;
    void *dscale = gw ? gw->data : scratch, *dbias = gb ? gb->data : scratch + (size_t)c * es;
    pthread_mutex_lock(&g_np_lock);
    int rc = np_make(op, xt);
    if (!rc) rc = bn_descs(op, xt, n, c, inner);
    if (!rc && !weight) rc = bn_params(dt, c);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (!rc) {
        const void *wp = weight ? weight->data : g_ones[dg_cuda_device()][dt == DG_F64];
        st = cudnnBatchNormalizationBackward(dg_cuda_cudnn(), CUDNN_BATCHNORM_SPATIAL, scal(dt, true), scal(dt, false),
                                             scal(dt, true), scal(dt, false), g_xd, x->data, g_xd, gy->data,
                                             g_xd, gx->data, g_pd, wp, dscale, dbias, BN_BACKWARD_EPS,
                                             save_mean->data, save_invstd->data);
    }
    pthread_mutex_unlock(&g_np_lock);
    dg_cuda_free(scratch);        /* reused only by work queued after the call */
    if (rc) return rc;
    if (st == CUDNN_STATUS_NOT_SUPPORTED)
        return dg_cuda_batch_norm_backward_kernel(x, gy, weight, save_mean, save_invstd, training, gx, gw, gb, n, c, inner);
    return np_check(st, "cudnnBatchNormalizationBackward", op, xt, __LINE__);
}

/* Whether cuDNN's average windows are the CPU's for this geometry (see the top comment). */
static bool avg_cudnn_ok(const dg_pool2d_geom *g) {
    return g->divisor == 0 && fits_int(g->n) && fits_int(g->c) && fits_int(g->h) && fits_int(g->w) && fits_int(g->oh) && fits_int(g->ow) &&
           g->n * g->c * g->h * g->w <= INT_MAX && g->n * g->c * g->oh * g->ow <= INT_MAX &&
           g->ph < g->kh && g->pw < g->kw &&
           (g->oh - 1) * g->sh + g->kh <= g->h + 2 * (int64_t)g->ph &&
           (g->ow - 1) * g->sw + g->kw <= g->w + 2 * (int64_t)g->pw;
}

int dg_cuda_avg_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y) {
    DG_CUDA_ENTER(be);
    const char *op = "avg_pool2d";
    const dg_kview *xt = x;
    dg_dtype dt = x->dtype;
    if ((dt != DG_F32 && dt != DG_F64) || y->numel == 0 || !avg_cudnn_ok(g)) return dg_cuda_avg_pool2d_kernel(g, x, y);
    pthread_mutex_lock(&g_np_lock);
    int rc = np_make(op, xt);
    if (!rc) rc = NP(cudnnSetTensor4dDescriptor, g_xd, CUDNN_TENSOR_NCHW, dnn_type(dt), (int)g->n, (int)g->c, (int)g->h, (int)g->w);
    if (!rc) rc = NP(cudnnSetTensor4dDescriptor, g_yd, CUDNN_TENSOR_NCHW, dnn_type(dt), (int)g->n, (int)g->c, (int)g->oh, (int)g->ow);
    if (!rc) rc = NP(cudnnSetPooling2dDescriptor, g_pool,
                     g->count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
                     CUDNN_PROPAGATE_NAN, g->kh, g->kw, g->ph, g->pw, g->sh, g->sw);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (!rc)
        st = cudnnPoolingForward(dg_cuda_cudnn(), g_pool, scal(dt, true), g_xd, x->data, scal(dt, false), g_yd,
                                 y->data);
    pthread_mutex_unlock(&g_np_lock);
    if (rc) return rc;
    if (st == CUDNN_STATUS_NOT_SUPPORTED) return dg_cuda_avg_pool2d_kernel(g, x, y);
    return np_check(st, "cudnnPoolingForward", op, xt, __LINE__);
}
