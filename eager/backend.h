/* eager/backend.h — the backend vtable (ggml-backend style). Ops in eager/ops/ check shapes and
 * dtypes, allocate outputs and record the tape; every loop over data goes through one of these
 * entries, so a new device is one new table. Tensors passed in are already validated: shapes
 * agree, dtypes agree (unless an entry says otherwise), and outputs are freshly allocated and
 * contiguous unless stated. Entries return 0 or a negative dg_status. */
#ifndef DG_EAGER_BACKEND_H
#define DG_EAGER_BACKEND_H

#include "internal.h"
#include "update_rule.h"
#include <stddef.h>

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
    DG_UN_ELU,         /* x > 0 ? x : p0 * expm1(x)              (p0 = alpha) */
    DG_UN_SOFTPLUS,    /* x * p0 > p1 ? x : log1p(exp(x * p0)) / p0   (p0 = beta, p1 = threshold) */
    DG_UN_LOG1P, DG_UN_SILU, DG_UN_RSQRT, DG_UN_SIN, DG_UN_COS,
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
    DG_BIN_ELU_GRAD,               /* b > 0 ? a : a * p0 * exp(b)                  b = x, p0 = alpha */
    DG_BIN_SOFTPLUS_GRAD,          /* b * p0 > p1 ? a : a * z / (z + 1), z = exp(b * p0)   b = x */
    DG_BIN_SILU_GRAD,              /* a * s * (1 + b * (1 - s)), s = sigmoid(b)  b = x */
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
    /* conv/pool parity: dilation of the max-pool window (read by the *_with_indices entries
     * only; the op sends dilated max pools there) and avg pool's divisor_override (0: none) */
    int dh, dw;
    int64_t divisor;
} dg_pool2d_geom;

/* What a kernel sees of a tensor: where its first element is and how the elements are laid
 * out. A plain value the op makes for one call (dg_kview_set, DG_KV); it holds no reference, so an op
 * may re-shape or re-stride it (a broadcast, a window) without copying or touching the
 * refcounted handle, and kernels never see ownership, autograd or scope state. */
typedef struct dg_kview {
    void *data;
    dg_dtype dtype;
    int ndim;
    int64_t numel;
    int64_t shape[DG_MAX_DIMS];
    int64_t stride[DG_MAX_DIMS];   /* in elements */
} dg_kview;

/* Fills v with t's view and returns v. Written field by field into the caller's struct (not
 * returned by value): a struct copied right after its fields were stored stalls on store
 * forwarding, and ops make several views per call. */
static inline dg_kview *dg_kview_set(dg_kview *v, const dg_tensor *t) {
    v->data = (char *)t->storage->data + t->offset * (int64_t)dg_dtype_bytes(t->dtype);
    v->dtype = t->dtype;
    v->ndim = t->ndim;
    v->numel = t->numel;
    for (int i = 0; i < t->ndim; i++) { v->shape[i] = t->shape[i]; v->stride[i] = t->stride[i]; }   /* dims past ndim are never read */
    return v;
}

/* The table's entries by number (eager/backend_entries.h, the one list): DG_BE_alloc ...
 * DG_BE_fused_update, in the struct's order, then DG_BE_COUNT. */
typedef enum dg_be_entry {
#define DG_BE_ENTRY(name, kind) DG_BE_##name,
#include "backend_entries.h"
#undef DG_BE_ENTRY
    DG_BE_COUNT
} dg_be_entry;
/* Each entry's kind, DG_BE_KIND_<name>: DG_KCALL reads it at compile time. */
enum {
    DG_BE_OPTIONAL = 0, DG_BE_REQUIRED = 1,
#define DG_BE_ENTRY(name, kind) DG_BE_KIND_##name = DG_BE_##kind,
#include "backend_entries.h"
#undef DG_BE_ENTRY
};

/* One time step of a recurrent cell over a batch of n rows with hidden size h (the rnn_cell
 * entries; eager/ops/rnn.c drives them, one call per step). G, the gates: 1 (RNN), 4 (LSTM:
 * i, f, g, o), 3 (GRU: r, z, n). Pointers are device addresses of contiguous row-major blocks
 * of dtype dt (f32 or f64). Rows b with t >= len[b] are padding: the state passes through
 * unchanged, the output row is 0 and the step gets no gradient. */
typedef struct dg_rnn_cell_args {
    int mode;                     /* dg_rnn_mode (rnn.h): DG_RNN_TANH, DG_RNN_RELU, DG_RNN_LSTM, DG_RNN_GRU */
    dg_dtype dt;
    int64_t n, h;
    int64_t t;                    /* the step's time index, compared with len */
    const int64_t *len;           /* [n] sequence lengths on the device, or NULL: no padding */
    /* forward */
    const void *gi;               /* [n, G h] pre-activations: x W_ih^T + b_ih, and for RNN and LSTM also
                                     h_prev W_hh^T + b_hh (the op adds them with the GEMM) */
    const void *gh;               /* GRU: [n, 3h] h_prev W_hh^T (no bias); NULL otherwise */
    const void *b_hh;             /* GRU: [3h] or NULL */
    const void *h_prev, *c_prev;  /* [n, h]; c_prev LSTM only */
    void *h_next, *c_next;        /* [n, h]; c_next LSTM only */
    void *y;                      /* [n, h]: h_next, 0 on padding rows */
    void *ws;                     /* saved for backward: RNN [n, h] h_next; LSTM [n, 5h] i f g o tanh(c');
                                     GRU [n, 4h] r z n (h_prev W_hn^T + b_hn) */
    /* backward (ws, h_prev, c_prev as the forward step had them) */
    const void *dy;               /* [n, h] gradient of y, or NULL */
    void *dh;                     /* [n, h] in: gradient at h_next (from later steps or h_n); out: the part of
                                     h_prev's gradient that does not pass through W_hh (GRU dh z;
                                     padding rows dh; else 0); the op adds dgh W_hh */
    void *dc;                     /* LSTM [n, h] in: gradient at c_next; out: at c_prev */
    void *dgi;                    /* [n, G h] gradient of the input pre-activations (0 on padding rows) */
    void *dgh;                    /* GRU: [n, 3h] gradient of h_prev W_hh^T + b_hh; NULL otherwise (equal to dgi) */
} dg_rnn_cell_args;

/* A backend instance: the table of entries, and the device and context they act on. Every
 * entry receives its instance first (ggml-backend style), so one table serves several devices
 * (gpu:0 and gpu:1 are two instances of the CUDA table with their own streams, library
 * handles and memory pool). The header fields come first; every field after them is an entry
 * of eager/backend_entries.h, a function pointer, in that list's order (checked at compile time
 * in eager/backend.c, which is what lets dg_backend_has find an entry by its number). */
typedef struct dg_backend dg_backend;
struct dg_half_via_f32;
struct dg_backend {
    const char *name;
    dg_device_type type;
    int index;                    /* the device's index (0 for the CPU) */
    void *context;                /* the backend's own state for that device */
    /* the kernels and scratch behind the entries this table points at the shared float16 /
     * bfloat16 wrappers (eager/half_via_f32.h); NULL when it points at none */
    const struct dg_half_via_f32 *half;
    /* memory */
    void *(*alloc)(const dg_backend *be, size_t nbytes);
    void (*free)(const dg_backend *be, void *p);
    int (*upload)(const dg_backend *be, void *dst, const void *host_src, size_t nbytes);
    int (*download)(const dg_backend *be, void *host_dst, const void *src, size_t nbytes);
    /* optional: nbytes from memory of `from` (another instance of the same table) to dst on
     * this device, ordered after the work queued on both; NULL: the op stages through the host */
    int (*copy_peer)(const dg_backend *be, void *dst, const dg_backend *from, const void *src, size_t nbytes);
    int (*synchronize)(const dg_backend *be);
    /* optional (NULL where meaningless): caching-allocator statistics and release */
    int (*memory_stats)(const dg_backend *be, dg_memory_stats *out);
    int (*empty_cache)(const dg_backend *be);
    /* optional: page-locked host memory that uploads can read without a host wait (thread-safe) */
    void *(*host_alloc)(const dg_backend *be, size_t nbytes);
    void (*host_free)(const dg_backend *be, void *p);
    /* optional: the queue work is issued on, for custom kernels (dg_device_stream) */
    void *(*stream)(const dg_backend *be);
    /* optional, for dg_shutdown: wait for queued work, then release what the backend holds
     * (cached memory, library handles, streams, primitive caches). Memory of tensors still
     * alive stays valid and may still be freed; the next use starts the backend again. */
    void (*shutdown)(const dg_backend *be);
    /* optional (ggml's supports_op): whether entry e computes on data of dtype dt (the dtype of
     * the values it works on: x, the gradient, gemm's dt, the parameters of fused_update; dt is
     * ignored for entries without one, such as alloc). It answers for the entry as the table
     * serves it, half-precision wrappers included; an entry may still refuse one of its
     * operations for a dtype it takes (binary's DIV on int32) with an error of its own. NULL:
     * every entry present takes every dtype. dg_backend_require asks it. */
    bool (*supports)(const dg_backend *be, dg_be_entry e, dg_dtype dt);

    /* elementwise; x/a/b may be strided (stride 0 = broadcast) with y's shape */
    int (*fill)(const dg_backend *be, dg_kview *y, double value);
    int (*copy)(const dg_backend *be, const dg_kview *x, dg_kview *y);          /* any strides, casts between dtypes */
    int (*unary)(const dg_backend *be, dg_unary_op op, const dg_kview *x, dg_kview *y, double p0, double p1);
    int (*binary)(const dg_backend *be, dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, double p0, double p1);
    int (*where)(const dg_backend *be, const dg_kview *cond, const dg_kview *a, const dg_kview *b, dg_kview *y);
    /* y has x's ndim with size 1 on reduced axes (ARG ops: one reduced axis, y is DG_I64) */
    int (*reduce)(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y);
    int (*random)(const dg_backend *be, dg_random_kind kind, dg_kview *y, double p0, double p1, uint64_t seed, uint64_t counter);

    /* C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b], row-major, batch strides in elements */
    int (*gemm)(const dg_backend *be, dg_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch);

    /* softmax over the last axis of a contiguous [rows, cols] view */
    int (*softmax)(const dg_backend *be, const dg_kview *x, dg_kview *y, int64_t rows, int64_t cols, bool log);
    int (*softmax_backward)(const dg_backend *be, const dg_kview *y, const dg_kview *gy, dg_kview *gx, int64_t rows, int64_t cols, bool log);

    /* indexing: x viewed as [outer, dim, inner]; index is I64/I32 with n entries */
    int (*index_select)(const dg_backend *be, const dg_kview *x, const dg_kview *index, dg_kview *y, int64_t outer, int64_t dim, int64_t inner);
    int (*index_add)(const dg_backend *be, const dg_kview *gy, const dg_kview *index, dg_kview *gx, int64_t outer, int64_t dim, int64_t inner);
    /* torch.gather along axis for contiguous x, index, y ([outer, dim, inner] with index's dim) */
    int (*gather)(const dg_backend *be, const dg_kview *x, const dg_kview *index, dg_kview *y, int64_t outer, int64_t xdim, int64_t idim, int64_t inner);
    int (*scatter_add)(const dg_backend *be, const dg_kview *gy, const dg_kview *index, dg_kview *gx, int64_t outer, int64_t xdim, int64_t idim, int64_t inner);
    /* stable argsort of contiguous x (f32/f64/i64/i32) viewed as [outer, dim, inner] along dim: idx
     * (I64, x's shape) gets each output's source position; NaN sorts as the largest (torch's) */
    int (*argsort)(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t outer, int64_t dim, int64_t inner, bool descending);

    /* losses on [rows, cols] logprobs and int labels: loss per row (0 for ignored) */
    int (*nll)(const dg_backend *be, const dg_kview *logp, const dg_kview *label, dg_kview *loss_rows, int64_t rows, int64_t cols, int64_t ignore_index);
    int (*nll_backward)(const dg_backend *be, const dg_kview *g_rows, const dg_kview *label, dg_kview *glogp, int64_t rows, int64_t cols, int64_t ignore_index);

    /* convolution (contiguous NCHW; y/gx/gw are overwritten) */
    int (*conv2d)(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y);
    int (*conv2d_backward_data)(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx);
    int (*conv2d_backward_filter)(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb);

    /* pooling (contiguous NCHW; gx is overwritten) */
    int (*max_pool2d)(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y);
    int (*max_pool2d_backward)(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, const dg_kview *y, const dg_kview *gy, dg_kview *gx);
    int (*avg_pool2d)(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y);
    int (*avg_pool2d_backward)(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *gy, dg_kview *gx);
    int (*adaptive_avg_pool2d)(const dg_backend *be, const dg_kview *x, dg_kview *y);
    int (*adaptive_avg_pool2d_backward)(const dg_backend *be, const dg_kview *gy, dg_kview *gx);
    /* conv/pool parity: max pooling that also writes torch's indices (I64, flat within the
     * input plane; the first maximum in row-major window order, NaN wins; -1 for a window with
     * no input element) with dilation g->dh/g->dw, adaptive max pooling (torch's bins), and
     * their backward: gx (overwritten) gets gy at the indices */
    int (*max_pool2d_with_indices)(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y, dg_kview *idx);
    int (*adaptive_max_pool2d)(const dg_backend *be, const dg_kview *x, dg_kview *y, dg_kview *idx);
    /* g: the forward's geometry, or NULL after adaptive max pooling (gx [N,C,H,W], gy [N,C,OH,OW]) */
    int (*max_pool2d_indices_backward)(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *idx, const dg_kview *gy, dg_kview *gx);

    /* batch norm over x viewed as [n, c, inner] (contiguous). Training: computes batch mean and
     * inverse std into save_mean/save_invstd; eval: uses mean/var given in save_mean/save_invstd
     * slots as running mean and running var. weight/bias may be NULL (1 and 0). */
    int (*batch_norm)(const dg_backend *be, const dg_kview *x, const dg_kview *weight, const dg_kview *bias, dg_kview *y,
                      dg_kview *save_mean, dg_kview *save_invstd, bool training, double eps,
                      int64_t n, int64_t c, int64_t inner);
    /* gx/gw/gb may be NULL when not needed. Training: gradient through the batch stats, with
     * save_mean/save_invstd as the forward computed them. Eval: save_mean is the running mean
     * and save_invstd is 1/sqrt(running_var + eps) (the op computes it; there is no eps here). */
    int (*batch_norm_backward)(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *weight,
                               const dg_kview *save_mean, const dg_kview *save_invstd, bool training,
                               dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner);
    /* optional (NULL: the op runs batch_norm, then relu in place, and masks gy itself): batch norm
     * with the ReLU after it in the same pass; its backward masks gy by y > 0 (y = the fused
     * output, as relu's backward does) before the batch-norm backward */
    int (*batch_norm_relu)(const dg_backend *be, const dg_kview *x, const dg_kview *weight, const dg_kview *bias, dg_kview *y,
                           dg_kview *save_mean, dg_kview *save_invstd, bool training, double eps,
                           int64_t n, int64_t c, int64_t inner);
    int (*batch_norm_relu_backward)(const dg_backend *be, const dg_kview *x, const dg_kview *y, const dg_kview *gy,
                                    const dg_kview *weight, const dg_kview *save_mean, const dg_kview *save_invstd, bool training,
                                    dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner);

    /* recurrent cells: one time step forward, and its backward (dg_rnn_cell_args) */
    int (*rnn_cell)(const dg_backend *be, const dg_rnn_cell_args *a);
    int (*rnn_cell_backward)(const dg_backend *be, const dg_rnn_cell_args *a);

    /* one optimizer step over n parameters of one dtype (f32/f64) in as few passes as the
     * device allows (eager/update_rule.h holds the per-element rules) */
    int (*fused_update)(const dg_backend *be, const dg_update_params *u, dg_dtype dt, const dg_update_tensor *t, int n);
};

extern const dg_backend dg_cpu_backend;
/* The CUDA instance for device `index` (started on first request), or NULL with a message: the CUDA module's entry
 * (eager/cuda/cuda_backend.c, in libdygraph-cuda.so.0), reached through eager/device.c. */
const dg_backend *dg_cuda_backend_get(int index);
/* The backend for a device (eager/device.c), or NULL with a message when it is not available:
 * the CUDA module missing or unloadable, no usable GPU, an index out of range. */
const dg_backend *dg_backend_for(dg_device d);
/* The CUDA instances this process has started (one per GPU selected), at most cap; never starts
 * one (the CUDA module's entry, asked only when the module is already open). */
int dg_cuda_backends_started(const dg_backend **out, int cap);
/* The backends this process has started (the CPU's always), at most cap; returns how many
 * (eager/device.c). */
int dg_backends_started(const dg_backend **out, int cap);

/* ---- what a table provides (eager/backend.c) ---- */
/* The field offset of entry e: the entries follow the header fields, one pointer each. */
#define DG_BE_ENTRY_OFFSET(e) (offsetof(struct dg_backend, alloc) + (size_t)(e) * sizeof(void (*)(void)))
/* Whether be has entry e (a pointer load and a compare). */
static inline bool dg_backend_has(const dg_backend *be, dg_be_entry e) {
    void (*fn)(void);
    memcpy(&fn, (const char *)be + DG_BE_ENTRY_OFFSET(e), sizeof fn);
    return fn != NULL;
}
/* Sets of dtypes, for the tables behind a `supports` entry. */
#define DG_DT_BIT(dt) (1u << (dt))
#define DG_DT_FLOATS (DG_DT_BIT(DG_F32) | DG_DT_BIT(DG_F64) | DG_DT_BIT(DG_F16) | DG_DT_BIT(DG_BF16))
#define DG_DT_INTS (DG_DT_BIT(DG_I64) | DG_DT_BIT(DG_I32))
#define DG_DT_ALL (DG_DT_FLOATS | DG_DT_INTS | DG_DT_BIT(DG_BOOL))
static inline bool dg_dt_in(unsigned set, dg_dtype dt) { return (unsigned)dt < 32 && ((set >> dt) & 1u); }
/* "gemm", "batch_norm_relu", ...; "?" for a number outside the list. */
const char *dg_backend_entry_name(dg_be_entry e);
/* Whether every table must have e (REQUIRED in eager/backend_entries.h). */
bool dg_backend_entry_required(dg_be_entry e);
/* The check made when an instance is made (eager/device.c): 0, or DG_EDEVICE with a message
 * naming the backend, the device and every required entry the table lacks (and an entry present
 * without its partner: host_alloc without host_free, or a half-precision wrapper with no kernel
 * behind it). An instance that fails it is never handed out, so DG_KCALL on a required entry
 * never meets NULL. */
int dg_backend_validate(const dg_backend *be);
/* The op-side check (the op registry calls it on entry with the entries the op calls): 0 when
 * be has each of entries[0..n) and, where be says what it supports, takes dtype dt in each;
 * else DG_EUNSUPPORTED with "op OP needs backend entry 'E' for dtype DT, which cuda on gpu:0
 * does not provide" ("op OP needs backend entry 'E', which ..." when the entry is absent). A
 * few loads per entry and, where the table has `supports`, one call each. */
int dg_backend_require(const dg_backend *be, const dg_be_entry *entries, int n, dg_dtype dt, const char *op);

/* How ops reach a kernel: DG_KCALL(t, entry, ...) calls `entry` of the instance holding t's
 * storage, with that instance first; DG_KV(t) is a kernel view of tensor t made for the call
 * (it lives until the end of the enclosing block), DG_KV_OPT(t) the same or NULL. DG_KCALL
 * takes required entries only, refused at compile time otherwise ("size of unnamed array is
 * negative"): a required entry is non-NULL in every instance handed out (dg_backend_validate),
 * so the call needs no check; an optional one is called as `be->entry ? ... : fallback` (or
 * after dg_backend_has / dg_backend_require), where the fallback is the op's to choose. */
#define DG_KCALL(t, entry, ...)                                                               \
    ((void)sizeof(char[DG_BE_KIND_##entry == DG_BE_REQUIRED ? 1 : -1]),                       \
     dg_backend_of(t)->entry(dg_backend_of(t), __VA_ARGS__))
#define DG_KV(t) dg_kview_set((dg_kview[1]){ { 0 } }, (t))
#define DG_KV_OPT(t) ((t) ? DG_KV(t) : NULL)

#ifdef __cplusplus
}
#endif

#endif
