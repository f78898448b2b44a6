/* eager/backend.h — the backend vtable (ggml-backend style). Ops in eager/ops/ check shapes and
 * dtypes, allocate outputs and record the tape; every loop over data goes through one of these
 * entries, so a new device is one new table. Tensors passed in are already validated: shapes
 * agree, dtypes agree (unless an entry says otherwise), and outputs are freshly allocated and
 * contiguous unless stated. Entries return 0 or a negative dg_status. */
#ifndef DG_EAGER_BACKEND_H
#define DG_EAGER_BACKEND_H

#include "internal.h"
#include "update_rule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_unary_op {
    DG_UN_EXP, DG_UN_LOG, DG_UN_SQRT, DG_UN_ABS, DG_UN_SIGN,
    DG_UN_RELU, DG_UN_SIGMOID, DG_UN_TANH, DG_UN_GELU, DG_UN_GELU_TANH,
    DG_UN_LEAKY_RELU,  /* p0 = slope */
    DG_UN_CLIP,        /* p0 = min, p1 = max */
    DG_UN_AFFINE,      /* p0 * x + p1 */
    DG_UN_RDIV,        /* p0 / x */
    DG_UN_POWS,        /* x ^ p0 */
} dg_unary_op;

typedef enum dg_binary_op {
    DG_BIN_ADD, DG_BIN_SUB, DG_BIN_MUL, DG_BIN_DIV, DG_BIN_MAX, DG_BIN_MIN, DG_BIN_POW,
    DG_BIN_GT, DG_BIN_EQ,          /* result dtype DG_BOOL */
    DG_BIN_AXPBY,                  /* p0 * a + p1 * b */
    DG_BIN_ADD_RELU,               /* relu(a + b) (NaN stays NaN) */
    /* backward helpers: a = upstream gradient, b = saved input (x) or output (y) */
    DG_BIN_RELU_GRAD,              /* a * (b > 0)             b = x or y (relu saves y) */
    DG_BIN_LEAKY_RELU_GRAD,        /* a * (b > 0 ? 1 : p0)    b = x */
    DG_BIN_SIGMOID_GRAD,           /* a * b * (1 - b)         b = y */
    DG_BIN_TANH_GRAD,              /* a * (1 - b*b)           b = y */
    DG_BIN_GELU_GRAD,              /* a * gelu'(b)            b = x */
    DG_BIN_GELU_TANH_GRAD,         /* a * gelu_tanh'(b)       b = x */
    DG_BIN_CLIP_GRAD,              /* a * (p0 <= b <= p1)     b = x */
} dg_binary_op;

typedef enum dg_reduce_op { DG_RED_SUM, DG_RED_MAX, DG_RED_MIN, DG_RED_ARGMAX, DG_RED_ARGMIN } dg_reduce_op;
typedef enum dg_random_kind { DG_RAND_UNIFORM, DG_RAND_NORMAL, DG_RAND_BERNOULLI_KEEP } dg_random_kind;

/* Geometry of one 2-D convolution, shared by forward and the two backward entries. */
typedef struct dg_conv2d_geom {
    int64_t n, c, h, w;          /* input */
    int64_t oc, kh, kw;          /* weight [oc, c/groups, kh, kw] */
    int64_t oh, ow;              /* output */
    int sh, sw, ph, pw, dh, dw, groups;
    int relu;                    /* forward only: ReLU on the output (inference fusion, never recorded) */
} dg_conv2d_geom;

typedef struct dg_pool2d_geom {
    int64_t n, c, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
} dg_pool2d_geom;

typedef struct dg_backend {
    const char *name;
    dg_device_type type;
    /* memory */
    void *(*alloc)(size_t nbytes);
    void (*free)(void *p);
    int (*upload)(void *dst, const void *host_src, size_t nbytes);
    int (*download)(void *host_dst, const void *src, size_t nbytes);
    int (*synchronize)(void);
    /* optional (NULL where meaningless): caching-allocator statistics and release */
    int (*memory_stats)(dg_memory_stats *out);
    int (*empty_cache)(void);
    /* optional: page-locked host memory that uploads can read without a host wait (thread-safe) */
    void *(*host_alloc)(size_t nbytes);
    void (*host_free)(void *p);
    /* optional: the queue work is issued on, for custom kernels (dg_device_stream) */
    void *(*stream)(void);
    /* optional, for dg_shutdown: wait for queued work, then release what the backend holds
     * (cached memory, library handles, streams, primitive caches). Memory of tensors still
     * alive stays valid and may still be freed; the next use starts the backend again. */
    void (*shutdown)(void);

    /* elementwise; x/a/b may be strided (stride 0 = broadcast) with y's shape */
    int (*fill)(dg_tensor *y, double value);
    int (*copy)(const dg_tensor *x, dg_tensor *y);          /* any strides, casts between dtypes */
    int (*unary)(dg_unary_op op, const dg_tensor *x, dg_tensor *y, double p0, double p1);
    int (*binary)(dg_binary_op op, const dg_tensor *a, const dg_tensor *b, dg_tensor *y, double p0, double p1);
    int (*where)(const dg_tensor *cond, const dg_tensor *a, const dg_tensor *b, dg_tensor *y);
    /* y has x's ndim with size 1 on reduced axes (ARG ops: one reduced axis, y is DG_I64) */
    int (*reduce)(dg_reduce_op op, const dg_tensor *x, dg_tensor *y);
    int (*random)(dg_random_kind kind, dg_tensor *y, double p0, double p1, uint64_t seed, uint64_t counter);

    /* C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b], row-major, batch strides in elements */
    int (*gemm)(dg_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);

    /* softmax over the last axis of a contiguous [rows, cols] view */
    int (*softmax)(const dg_tensor *x, dg_tensor *y, int64_t rows, int64_t cols, bool log);
    int (*softmax_backward)(const dg_tensor *y, const dg_tensor *gy, dg_tensor *gx, int64_t rows, int64_t cols, bool log);

    /* indexing: x viewed as [outer, dim, inner]; index is I64/I32 with n entries */
    int (*index_select)(const dg_tensor *x, const dg_tensor *index, dg_tensor *y, int64_t outer, int64_t dim, int64_t inner);
    int (*index_add)(const dg_tensor *gy, const dg_tensor *index, dg_tensor *gx, int64_t outer, int64_t dim, int64_t inner);
    /* torch.gather along axis for contiguous x, index, y ([outer, dim, inner] with index's dim) */
    int (*gather)(const dg_tensor *x, const dg_tensor *index, dg_tensor *y, int64_t outer, int64_t xdim, int64_t idim, int64_t inner);
    int (*scatter_add)(const dg_tensor *gy, const dg_tensor *index, dg_tensor *gx, int64_t outer, int64_t xdim, int64_t idim, int64_t inner);

    /* losses on [rows, cols] logprobs and int labels: loss per row (0 for ignored) */
    int (*nll)(const dg_tensor *logp, const dg_tensor *label, dg_tensor *loss_rows, int64_t rows, int64_t cols, int64_t ignore_index);
    int (*nll_backward)(const dg_tensor *g_rows, const dg_tensor *label, dg_tensor *glogp, int64_t rows, int64_t cols, int64_t ignore_index);

    /* convolution (contiguous NCHW; y/gx/gw are overwritten) */
    int (*conv2d)(const dg_conv2d_geom *g, const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_tensor *y);
    int (*conv2d_backward_data)(const dg_conv2d_geom *g, const dg_tensor *gy, const dg_tensor *w, dg_tensor *gx);
    int (*conv2d_backward_filter)(const dg_conv2d_geom *g, const dg_tensor *gy, const dg_tensor *x, dg_tensor *gw, dg_tensor *gb);

    /* pooling (contiguous NCHW; gx is overwritten) */
    int (*max_pool2d)(const dg_pool2d_geom *g, const dg_tensor *x, dg_tensor *y);
    int (*max_pool2d_backward)(const dg_pool2d_geom *g, const dg_tensor *x, const dg_tensor *y, const dg_tensor *gy, dg_tensor *gx);
    int (*avg_pool2d)(const dg_pool2d_geom *g, const dg_tensor *x, dg_tensor *y);
    int (*avg_pool2d_backward)(const dg_pool2d_geom *g, const dg_tensor *gy, dg_tensor *gx);
    int (*adaptive_avg_pool2d)(const dg_tensor *x, dg_tensor *y);
    int (*adaptive_avg_pool2d_backward)(const dg_tensor *gy, dg_tensor *gx);

    /* batch norm over x viewed as [n, c, inner] (contiguous). Training: computes batch mean and
     * inverse std into save_mean/save_invstd; eval: uses mean/var given in save_mean/save_invstd
     * slots as running mean and running var. weight/bias may be NULL (1 and 0). */
    int (*batch_norm)(const dg_tensor *x, const dg_tensor *weight, const dg_tensor *bias, dg_tensor *y,
                      dg_tensor *save_mean, dg_tensor *save_invstd, bool training, double eps,
                      int64_t n, int64_t c, int64_t inner);
    /* gx/gw/gb may be NULL when not needed. Training: gradient through the batch stats, with
     * save_mean/save_invstd as the forward computed them. Eval: save_mean is the running mean
     * and save_invstd is 1/sqrt(running_var + eps) (the op computes it; there is no eps here). */
    int (*batch_norm_backward)(const dg_tensor *x, const dg_tensor *gy, const dg_tensor *weight,
                               const dg_tensor *save_mean, const dg_tensor *save_invstd, bool training,
                               dg_tensor *gx, dg_tensor *gw, dg_tensor *gb, int64_t n, int64_t c, int64_t inner);

    /* one optimizer step over n parameters of one dtype (f32/f64) in as few passes as the
     * device allows (eager/update_rule.h holds the per-element rules) */
    int (*fused_update)(const dg_update_params *u, dg_dtype dt, const dg_update_tensor *t, int n);
} dg_backend;

extern const dg_backend dg_cpu_backend;
/* The CUDA table for device `index`, or NULL with a message: the CUDA module's entry
 * (eager/cuda/cuda_backend.c, in libdygraph-cuda.so.0), reached through eager/device.c. */
const dg_backend *dg_cuda_backend_get(int index);
/* The backend for a device (eager/device.c), or NULL with a message when it is not available:
 * the CUDA module missing or unloadable, no usable GPU, an index out of range. */
const dg_backend *dg_backend_for(dg_device d);
/* The CUDA table when this process started it (a GPU was selected), else NULL; never starts it
 * (the CUDA module's entry, asked only when the module is already open). */
const dg_backend *dg_cuda_backend_started(void);
/* The backends this process has started (the CPU's always), at most cap; returns how many
 * (eager/device.c). */
int dg_backends_started(const dg_backend **out, int cap);

#ifdef __cplusplus
}
#endif

#endif
