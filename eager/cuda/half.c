/* eager/cuda/half.c — the CUDA backend's side of the shared float16 / bfloat16 wrappers
 * (eager/half_via_f32.h): the kernels behind the wrapped entries of its table and the half calls
 * they take as they are. Scratch is the table's own alloc / free: the device's caching
 * allocator, on the device the call entered; a block is freed as soon as the work using it is
 * queued, since the pool hands it only to later work on the same compute stream. The casts are
 * the copy kernel's (copy.cu), eager/half.h's bits written for the device, so the results are
 * the CPU's up to the f32 kernels' own summation order. Native half paths: fill, copy/cast and
 * where (not wrapped), the comparisons, index_select and gather of one dtype (exact: compared
 * as doubles, moved as raw bits), GEMM on cuBLAS with f32 compute (not wrapped) and
 * convolutions on cuDNN with f32 compute when every operand has one half dtype. */
#include "cuda_internal.h"
#include "../half_via_f32.h"

/* all of a, b, c (and d when present) of the half dtype dt */
static bool all_of(dg_dtype dt, const dg_kview *a, const dg_kview *b, const dg_kview *c, const dg_kview *d) {
    return dg_dtype_is_half(dt) && a->dtype == dt && b->dtype == dt && c->dtype == dt && (!d || d->dtype == dt);
}

static unsigned keep(const dg_backend *be, const dg_half_call *c) {
    const dg_kview *const *v = c->v;
    switch (c->entry) {
    case DG_BE_binary:   /* the comparisons read half operands natively (exact widening) */
        return c->op == DG_BIN_GT || c->op == DG_BIN_EQ ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_index_select: case DG_BE_gather:   /* x, index, y: raw moves by element size */
        return v[0]->dtype == v[2]->dtype ? DG_HALF_KEEP_ALL : 0;
    /* convolutions: cuDNN with HALF / BFLOAT16 descriptors and f32 compute. Mixed dtypes and the
     * empty-batch / empty-plane edges, which cudnn_conv.c handles with f32 / f64 helpers, are
     * widened. v: x, w, b, y / gy, w, gx / gy, x, gw, gb */
    case DG_BE_conv2d:
        return all_of(v[0]->dtype, v[0], v[1], v[3], v[2]) && v[0]->numel > 0 ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_conv2d_backward_data:
        return all_of(v[0]->dtype, v[0], v[1], v[2], NULL) && v[0]->numel > 0 ? DG_HALF_KEEP_ALL : 0;
    case DG_BE_conv2d_backward_filter:
        return v[2] && all_of(v[0]->dtype, v[0], v[1], v[2], v[3]) && v[0]->numel > 0 && v[1]->numel > 0 ? DG_HALF_KEEP_ALL : 0;
    default: return 0;
    }
}

static const dg_backend kernels = {
    .name = "cuda kernels",
    .unary = dg_cuda_unary,
    .binary = dg_cuda_binary,
    .reduce = dg_cuda_reduce,
    .random = dg_cuda_random,
    .softmax = dg_cuda_softmax,
    .softmax_backward = dg_cuda_softmax_backward,
    .index_select = dg_cuda_index_select,
    .index_add = dg_cuda_index_add,
    .gather = dg_cuda_gather,
    .scatter_add = dg_cuda_scatter_add,
    .argsort = dg_cuda_argsort,
    .nll = dg_cuda_nll,
    .nll_backward = dg_cuda_nll_backward,
    .conv2d = dg_cuda_conv2d,
    .conv2d_backward_data = dg_cuda_conv2d_backward_data,
    .conv2d_backward_filter = dg_cuda_conv2d_backward_filter,
    .max_pool2d = dg_cuda_max_pool2d,
    .max_pool2d_backward = dg_cuda_max_pool2d_backward,
    .avg_pool2d = dg_cuda_avg_pool2d,
    .avg_pool2d_backward = dg_cuda_avg_pool2d_backward,
    .adaptive_avg_pool2d = dg_cuda_adaptive_avg_pool2d,
    .adaptive_avg_pool2d_backward = dg_cuda_adaptive_avg_pool2d_backward,
    .max_pool2d_with_indices = dg_cuda_max_pool2d_with_indices,
    .adaptive_max_pool2d = dg_cuda_adaptive_max_pool2d,
    .max_pool2d_indices_backward = dg_cuda_max_pool2d_indices_backward,
    .batch_norm = dg_cuda_batch_norm,
    .batch_norm_backward = dg_cuda_batch_norm_backward,
};

const dg_half_via_f32 dg_cuda_half = {
    .kernels = &kernels,
    .wrappers = &dg_half_wrappers,
    .keep = keep,
};
