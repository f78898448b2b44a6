/* eager/half_via_f32.h — float16 / bfloat16 for backend entries that have no 2-byte kernel,
 * written once for every backend. eager/half_via_f32.c is built into the core (the CPU table) and
 * into the CUDA module (the GPU table); each backend says, in a small file of its own
 * (eager/cpu/half.c, eager/cuda/half.c), which kernels stand behind the wrappers, how it gets
 * scratch memory, and which calls with half operands its kernels take as they are.
 *
 * A table points an entry at the wrapper of the same name (.reduce = dg_half_reduce) and its
 * `half` field at its dg_half_via_f32. A call with no half operand goes straight to the kernel.
 * Otherwise the backend's `keep` names the operands the kernel takes as they are; every other
 * half operand is widened into an f32 scratch buffer by the table's own copy entry (exact), the
 * kernel runs on those views, each half output is rounded back once (the copy entry's
 * round-to-nearest-even, eager/half.h's bits on every backend) and the scratch is freed. So
 * reductions, softmax, losses and statistics accumulate in f32 with one kernel per entry, and a
 * backend gains a native half path by keeping operands, not by another wrapper. */
#ifndef DG_EAGER_HALF_VIA_F32_H
#define DG_EAGER_HALF_VIA_F32_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A call with half operands, as a backend's `keep` sees it. */
#define DG_HALF_MAX_VIEWS 9
typedef struct dg_half_call {
    dg_be_entry entry;
    int op;                  /* the dg_unary_op / dg_binary_op / dg_reduce_op / dg_random_kind, else 0 */
    const void *geom;        /* the dg_conv2d_geom or dg_pool2d_geom (NULL after adaptive pooling), else NULL */
    int n;
    const dg_kview *v[DG_HALF_MAX_VIEWS];   /* the entry's view arguments in its order; NULL where absent */
} dg_half_call;

/* keep's answer for "the kernel takes the call unchanged". */
#define DG_HALF_KEEP_ALL (~0u)
/* What a kernel handed a whole call unchanged (keep said DG_HALF_KEEP_ALL) may return to decline
 * it after all (oneDNN refusing a geometry): the wrapper then widens every half operand and runs
 * the kernel again. Positive, so never an entry's status. */
#define DG_HALF_DECLINED 1

typedef struct dg_half_via_f32 {
    /* the kernels behind the wrapped entries, entry by entry (the entries' contracts, on f32/f64
     * operands and on the half operands keep lets through) */
    const dg_backend *kernels;
    /* &dg_half_wrappers as the backend's object sees it: dg_backend_validate compares a table's
     * entries against it to find the wrapped ones and checks each has a kernel */
    const dg_backend *wrappers;
    /* scratch of nbytes on be's device, or NULL having recorded why; and its release. NULL: the
     * table's alloc / free entries. Scratch is freed as soon as the work using it is queued, so
     * a device's allocator must hand a block only to work ordered after that (the CUDA pool
     * serves one compute stream). */
    void *(*scratch_alloc)(const dg_backend *be, size_t nbytes);
    void (*scratch_free)(const dg_backend *be, void *p);
    /* the operands of c its kernel takes as they are: bit i for c->v[i], DG_HALF_KEEP_ALL for
     * the whole call; called only when c has a half operand. NULL: none (widen them all). */
    unsigned (*keep)(const dg_backend *be, const dg_half_call *c);
} dg_half_via_f32;

/* The wrappers, each with its entry's signature; dg_half_wrappers holds them all by entry. */
extern const dg_backend dg_half_wrappers;
int dg_half_unary(const dg_backend *be, dg_unary_op op, const dg_kview *x, dg_kview *y, double p0, double p1);
int dg_half_binary(const dg_backend *be, dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, double p0, double p1);
int dg_half_reduce(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y);
int dg_half_random(const dg_backend *be, dg_random_kind kind, dg_kview *y, double p0, double p1, uint64_t seed, uint64_t counter);
int dg_half_softmax(const dg_backend *be, const dg_kview *x, dg_kview *y, int64_t rows, int64_t cols, bool log);
int dg_half_softmax_backward(const dg_backend *be, const dg_kview *y, const dg_kview *gy, dg_kview *gx, int64_t rows, int64_t cols, bool log);
int dg_half_index_select(const dg_backend *be, const dg_kview *x, const dg_kview *index, dg_kview *y, int64_t outer, int64_t dim, int64_t inner);
int dg_half_index_add(const dg_backend *be, const dg_kview *gy, const dg_kview *index, dg_kview *gx, int64_t outer, int64_t dim, int64_t inner);
int dg_half_gather(const dg_backend *be, const dg_kview *x, const dg_kview *index, dg_kview *y, int64_t outer, int64_t xdim, int64_t idim, int64_t inner);
int dg_half_scatter_add(const dg_backend *be, const dg_kview *gy, const dg_kview *index, dg_kview *gx, int64_t outer, int64_t xdim, int64_t idim, int64_t inner);
int dg_half_argsort(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t outer, int64_t dim, int64_t inner, bool descending);
int dg_half_nll(const dg_backend *be, const dg_kview *logp, const dg_kview *label, dg_kview *loss_rows, int64_t rows, int64_t cols, int64_t ignore_index);
int dg_half_nll_backward(const dg_backend *be, const dg_kview *g_rows, const dg_kview *label, dg_kview *glogp, int64_t rows, int64_t cols, int64_t ignore_index);
int dg_half_conv2d(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y);
int dg_half_conv2d_backward_data(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx);
int dg_half_conv2d_backward_filter(const dg_backend *be, const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb);
int dg_half_max_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y);
int dg_half_max_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, const dg_kview *y, const dg_kview *gy, dg_kview *gx);
int dg_half_avg_pool2d(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y);
int dg_half_avg_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *gy, dg_kview *gx);
int dg_half_adaptive_avg_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y);
int dg_half_adaptive_avg_pool2d_backward(const dg_backend *be, const dg_kview *gy, dg_kview *gx);
int dg_half_max_pool2d_with_indices(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *x, dg_kview *y, dg_kview *idx);
int dg_half_adaptive_max_pool2d(const dg_backend *be, const dg_kview *x, dg_kview *y, dg_kview *idx);
int dg_half_max_pool2d_indices_backward(const dg_backend *be, const dg_pool2d_geom *g, const dg_kview *idx, const dg_kview *gy, dg_kview *gx);
int dg_half_batch_norm(const dg_backend *be, const dg_kview *x, const dg_kview *weight, const dg_kview *bias, dg_kview *y,
                       dg_kview *save_mean, dg_kview *save_invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner);
int dg_half_batch_norm_backward(const dg_backend *be, const dg_kview *x, const dg_kview *gy, const dg_kview *weight,
                                const dg_kview *save_mean, const dg_kview *save_invstd, bool training,
                                dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner);
int dg_half_batch_norm_relu(const dg_backend *be, const dg_kview *x, const dg_kview *weight, const dg_kview *bias, dg_kview *y,
                            dg_kview *save_mean, dg_kview *save_invstd, bool training, double eps, int64_t n, int64_t c, int64_t inner);
int dg_half_batch_norm_relu_backward(const dg_backend *be, const dg_kview *x, const dg_kview *y, const dg_kview *gy,
                                     const dg_kview *weight, const dg_kview *save_mean, const dg_kview *save_invstd, bool training,
                                     dg_kview *gx, dg_kview *gw, dg_kview *gb, int64_t n, int64_t c, int64_t inner);

#ifdef __cplusplus
}
#endif

#endif
