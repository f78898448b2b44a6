/* eager/cuda/cuda_internal.h — what the CUDA backend's files share: the current stream and
 * cuBLAS handle, error translation, and the kernel entry points behind the vtable (same
 * contracts as eager/backend.h; tensors here live in device memory). C and CUDA C++ include it. */
#ifndef DG_CUDA_INTERNAL_H
#define DG_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include "../backend.h"
#include <dygraph/module.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLAS through dlopen (eager/cuda/cublas_loader.c): loading it costs ~215 MB of RSS, paid
 * only by processes that select a GPU. */
typedef struct dg_cublas_api {
    bool loaded;
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*sgemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t, int64_t, int64_t,
                                            const float *, const float *, int64_t, long long, const float *, int64_t,
                                            long long, const float *, float *, int64_t, long long, int64_t);
    cublasStatus_t (*dgemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t, int64_t, int64_t,
                                            const double *, const double *, int64_t, long long, const double *, int64_t,
                                            long long, const double *, double *, int64_t, long long, int64_t);
    /* float16 / bfloat16 (and any mixed type) with a compute type: f32 accumulation on tensor cores */
    cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t, int64_t, int64_t,
                                              const void *, const void *, cudaDataType, int64_t, long long, const void *,
                                              cudaDataType, int64_t, long long, const void *, void *, cudaDataType, int64_t,
                                              long long, int64_t, cublasComputeType_t, cublasGemmAlgo_t);
} dg_cublas_api;
extern dg_cublas_api dg_cublas;
int dg_cublas_load(void);

/* One GPU's state (eager/cuda/cuda_backend.c): what the entries of that device's instance work
 * with. */
#define DG_CUDA_MAX_DEVICES 16
#define DG_CUDA_MAX_COMM_STREAMS 8    /* DG_COMM_MAX_NUM */
typedef struct dg_device_pool dg_device_pool;
typedef struct dg_cuda_ctx {
    int device;
    bool started;                 /* streams, events and handles made */
    cudaStream_t stream;          /* compute */
    /* collectives: comm[0] made with the context, comm[k] on the first request for it (one per
     * communicator of the NCCL transport's comm_num; under g_lock) */
    cudaStream_t comm[DG_CUDA_MAX_COMM_STREAMS];
    int ncomm;
    cudaEvent_t ev_compute, ev_comm;
    cublasHandle_t blas;          /* bound to stream */
    cudnnHandle_t dnn;            /* bound to stream */
    dg_device_pool *pool;
    cudaError_t seg_err;          /* why the last segment could not be made (under the pool lock) */
} dg_cuda_ctx;
/* Makes be's device current on the calling thread and its context the one this module's
 * kernels use; every entry of the table starts with it. */
int dg_cuda_enter(const dg_backend *be);
#define DG_CUDA_ENTER(be) do { int enter_rc_ = dg_cuda_enter(be); if (enter_rc_) return enter_rc_; } while (0)
dg_cuda_ctx *dg_cuda_ctx_current(void);   /* the context of the device current on this thread */
int dg_cuda_device(void);                 /* its index */
cudaStream_t dg_cuda_stream(void);        /* the compute stream of the current device */
cublasHandle_t dg_cuda_cublas(void);      /* bound to dg_cuda_stream() */
cudnnHandle_t dg_cuda_cudnn(void);        /* bound to dg_cuda_stream() */
/* The communication streams (collectives run there so they overlap with compute; stream k
 * serves the NCCL transport's communicator k) and the two directions of ordering between the
 * streams: after dg_cuda_comm_wait_compute_at(k) comm stream k's next work sees everything
 * queued on compute so far; after dg_cuda_compute_wait_comms(n) compute's next work sees
 * everything queued so far on comm streams 0..n-1. */
cudaStream_t dg_cuda_comm_stream_at(int k);   /* NULL with an error for k outside 0..DG_CUDA_MAX_COMM_STREAMS-1 */
int dg_cuda_comm_wait_compute_at(int k);
int dg_cuda_compute_wait_comms(int n);
/* The caching allocator (device memory for tensors and library workspaces). */
void *dg_cuda_alloc(size_t nbytes);
void dg_cuda_free(void *p);
/* Gives the current device's fully free segments back (cudaFree, which waits for the device):
 * for one-off blocks such as an algorithm search's workspace, which would otherwise stay
 * reserved beside the steady loop's segments. */
void dg_cuda_pool_trim(void);
/* Turn a CUDA/cuBLAS status into a dg error naming what failed; returns 0 or DG_EDEVICE. */
int dg_cuda_check(cudaError_t e, const char *what, const char *file, int line);
int dg_cuda_check_blas(cublasStatus_t s, const char *what, const char *file, int line);
#define DG_CUDA(call) dg_cuda_check((call), #call, __FILE__, __LINE__)
#define DG_CUBLAS(call) dg_cuda_check_blas((call), #call, __FILE__, __LINE__)
int dg_cuda_check_dnn(cudnnStatus_t s, const char *what, const char *file, int line);
#define DG_CUDNN(call) dg_cuda_check_dnn((call), #call, __FILE__, __LINE__)

/* kernels (the .cu files of eager/cuda) */
int dg_cuda_fill(const dg_backend *be, dg_kview *y, double value);
int dg_cuda_copy(const dg_backend *be, const dg_kview *x, dg_kview *y);
int dg_cuda_unary(const dg_backend *be, dg_unary_op op, const dg_kview *x, dg_kview *y, double p0, double p1);
int dg_cuda_binary(const dg_backend *be, dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, double p0, double p1);
int dg_cuda_where(const dg_backend *be, const dg_kview *cond, const dg_kview *a, const dg_kview *b, dg_kview *y);
int dg_cuda_reduce(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y);
int dg_cuda_random(const dg_backend *be, dg_random_kind kind, dg_kview *y, double p0, double p1, uint64_t seed, uint64_t counter);
int dg_cuda_gemm(const dg_backend *be, dg_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                 const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                 double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);
int dg_cuda_softmax(const dg_backend *be, const dg_kview *x, dg_kview *y, int64_t rows, int64_t cols, bool log);
int dg_cuda_softmax_backward(const dg_backend *be, const dg_kview *y, const dg_kview *gy, dg_kview *gx, int64_t rows, int64_t cols, bool log);
int dg_cuda_index_select(const dg_backend *be, const dg_kview *x, const dg_kview *index, dg_kview *y, int64_t outer, int64_t dim, int64_t inner);
int dg_cuda_index_add(const dg_backend *be, const dg_kview *gy, const dg_kview *index, dg_kview *gx, int64_t outer, int64_t dim, int64_t inner);
int dg_cuda_gather(const dg_backend *be, const dg_kview *x, const dg_kview *index, dg_kview *y, int64_t outer, int64_t xdim, int64_t idim, int64_t inner);
int dg_cuda_scatter_add(const dg_backend *be, const dg_kview *gy, const dg_kview *index, dg_kview *gx, int64_t outer, int64_t xdim, int64_t idim, int64_t inner);
int dg_cuda_argsort(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t outer, int64_t dim, int64_t inner, bool descending);
int dg_cuda_nll(const dg_backend *be, const dg_kview *logp, const dg_kview *label, dg_kview *loss_rows, int64_t rows, int64_t cols, int64_t ignore_index);
int dg_cuda_nll_backward(const dg_backend *be, const dg_kview *g_rows, const dg_kview *label, dg_kview *glogp, int64_t rows, int64_t cols, int64_t ignore_index);
int dg_cuda_fused_update(const dg_backend *be, const dg_update_params *u, dg_dtype dt, const dg_update_tensor *t, int n);

/* cuDNN convolution, pooling and batch norm (cudnn_*.c / pool.cu) */
/* vtable entries (cudnn_conv.c, cudnn_norm_pool.c, pool.cu) */
void dg_cuda_conv_release(void);        /* dg_shutdown: descriptors and chosen algorithms */
void dg_cuda_norm_pool_release(int device);   /* dg_shutdown: descriptors and that device's stand-in buffers */
void dg_cuda_prof_release_all(int device);    /* dg_shutdown: that device's profiler events (eager/cuda/profile.c) */
int dg_cuda_conv2d(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y);
int dg_cuda_conv2d_backward_data(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx);
int dg_cuda_conv2d_backward_filter(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb);
int dg_cuda_max_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y);
int dg_cuda_max_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, const dg_kview *y, const dg_kview *gy, dg_kview *gx);
int dg_cuda_avg_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y);
int dg_cuda_avg_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *gy, dg_kview *gx);
int dg_cuda_adaptive_avg_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y);
int dg_cuda_adaptive_avg_pool2d_backward(const dg_backend *be, const dg_kview *gy, dg_kview *gx);
/* rnn.cu */
int dg_cuda_rnn_cell(const dg_backend *be, const dg_rnn_cell_args *a);
int dg_cuda_rnn_cell_backward(const dg_backend *be, const dg_rnn_cell_args *a);
/* pool_indices.cu */
int dg_cuda_max_pool2d_with_indices(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y, dg_kview *idx);
int dg_cuda_adaptive_max_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y, dg_kview *idx);
int dg_cuda_max_pool2d_indices_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *idx, const dg_kview *gy, dg_kview *gx);
int dg_cuda_batch_norm(const dg_backend *be, const dg_kview *x, const dg_kview *weight, const dg_kview *bias, dg_kview *y,
                       dg_kview *save_mean, dg_kview *save_invstd, bool training, double eps,
                       int64_t n, int64_t c, int64_t inner);
int dg_cuda_batch_norm_backward(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *weight,
                                const dg_kview *save_mean, const dg_kview *save_invstd, bool training,
                                dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner);
/* The backend's dg_half_via_f32 (half.c): the table's `half`, behind the entries it points at
 * the shared float16 / bfloat16 wrappers (eager/half_via_f32.h). */
struct dg_half_via_f32;
extern const struct dg_half_via_f32 dg_cuda_half;
/* pool.cu kernels the cuDNN files fall back on (same contracts as the entries above) */
int dg_cuda_avg_pool2d_kernel(const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y);
int dg_cuda_batch_norm_kernel(const dg_kview *x, const dg_kview *weight, const dg_kview *bias, dg_kview *y,
                              dg_kview *save_mean, dg_kview *save_invstd, bool training, double eps,
                              int64_t n, int64_t c, int64_t inner);
int dg_cuda_batch_norm_backward_kernel(const dg_kview *x, const dg_kview *gy, const dg_kview *weight,
                                       const dg_kview *save_mean, const dg_kview *save_invstd, bool training,
                                       dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner);
/* raw-buffer helpers (dt is DG_F32 or DG_F64, pointers are device memory, all on the compute stream):
 * p[0..n) = v; y[n, oc, l] = b[oc] (b NULL: zeros); out[ch] = sum of x[:, ch, :] over [n, c, inner] */
int dg_cuda_fill_raw(void *p, dg_dtype dt, int64_t n, double v);
int dg_cuda_bias_fill_raw(void *y, const void *b, dg_dtype dt, int64_t n, int64_t oc, int64_t l);
int dg_cuda_channel_sum_raw(const void *x, void *out, dg_dtype dt, int64_t n, int64_t c, int64_t inner);

#ifdef __cplusplus
}
#endif
#endif
