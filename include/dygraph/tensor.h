/* dygraph/tensor.h — eager tensors: creation, inspection, host copies, printing, ownership scopes.
 *
 * Ownership: every tensor made while a scope is open belongs to the innermost scope and dies at
 * dg_scope_end unless dg_keep() hands it to the caller. Tensors made with no scope open belong
 * to the caller, who releases them with dg_tensor_free(). Views (reshape, transpose, slice…)
 * share storage with their base; storage lives while any view does. */
#ifndef DYGRAPH_TENSOR_H
#define DYGRAPH_TENSOR_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_tensor dg_tensor;
typedef struct dg_scope dg_scope;

typedef struct dg_shape { int ndim; int64_t d[DG_MAX_DIMS]; } dg_shape;

#define DG_NARGS_(_1, _2, _3, _4, _5, _6, _7, _8, N, ...) N
#define DG_NARGS(...) DG_NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
DG_API dg_shape dg_make_shape(int ndim, const int64_t *dims);
#ifdef __cplusplus
}   /* C++ (11 and later) builds shapes with a template: compound literals are not C++, and g++
     * refuses the address of a temporary array, so DG_SHAPE(n, 1, 28, 28) with a runtime n
     * needs this */
template <typename... T> static inline dg_shape dg_shape_from(T... v) {
    static_assert(sizeof...(T) <= DG_MAX_DIMS, "DG_SHAPE: more dims than DG_MAX_DIMS");
    const int64_t d[sizeof...(T) + 1] = { (int64_t)v..., 0 };
    dg_shape s = dg_shape();
    s.ndim = (int)sizeof...(T);
    for (int i = 0; i < s.ndim; i++) s.d[i] = d[i];
    return s;
}
#define DG_SHAPE(...) (dg_shape_from(__VA_ARGS__))
#define DG_SCALAR_SHAPE (dg_shape_from())
extern "C" {
#else
#define DG_SHAPE(...) ((dg_shape){ .ndim = DG_NARGS(__VA_ARGS__), .d = {__VA_ARGS__} })
#define DG_SCALAR_SHAPE ((dg_shape){ .ndim = 0 })
#endif

/* Creation on the current device. */
DG_API dg_tensor *dg_empty(dg_shape shape, dg_dtype dtype);
DG_API dg_tensor *dg_zeros(dg_shape shape, dg_dtype dtype);
DG_API dg_tensor *dg_ones(dg_shape shape, dg_dtype dtype);
DG_API dg_tensor *dg_full(dg_shape shape, double value, dg_dtype dtype);
DG_API dg_tensor *dg_scalar(double value, dg_dtype dtype);            /* 0-d tensor */
DG_API dg_tensor *dg_arange(double start, double end, double step, dg_dtype dtype);
DG_API dg_tensor *dg_rand(dg_shape shape, dg_dtype dtype);            /* U[0,1) */
DG_API dg_tensor *dg_randn(dg_shape shape, dg_dtype dtype);           /* N(0,1) */
DG_API dg_tensor *dg_uniform(dg_shape shape, double low, double high, dg_dtype dtype);
DG_API dg_tensor *dg_normal(dg_shape shape, double mean, double std, dg_dtype dtype);
/* torch.randint(low, high, shape): int64 uniform in [low, high) (high > low). torch.randperm(n):
 * a random permutation of 0..n-1 in dtype (int64 as torch's default; int32, float32, float64).
 * From the calling thread's generator's Philox stream (not torch's numbers for a seed). */
DG_API dg_tensor *dg_randint(int64_t low, int64_t high, dg_shape shape);
DG_API dg_tensor *dg_randperm(int64_t n, dg_dtype dtype);
/* The same, drawn from g (NULL: the calling thread's generator, as the four above). */
DG_API dg_tensor *dg_generator_rand(dg_generator *g, dg_shape shape, dg_dtype dtype);
DG_API dg_tensor *dg_generator_randn(dg_generator *g, dg_shape shape, dg_dtype dtype);
DG_API dg_tensor *dg_generator_uniform(dg_generator *g, dg_shape shape, double low, double high, dg_dtype dtype);
DG_API dg_tensor *dg_generator_normal(dg_generator *g, dg_shape shape, double mean, double std, dg_dtype dtype);
DG_API dg_tensor *dg_from_data(dg_shape shape, dg_dtype dtype, const void *data); /* copies */
DG_API dg_tensor *dg_zeros_like(const dg_tensor *t);
DG_API dg_tensor *dg_ones_like(const dg_tensor *t);
DG_API dg_tensor *dg_clone(const dg_tensor *t);                       /* differentiable copy */
DG_API dg_tensor *dg_to_device(const dg_tensor *t, dg_device device);
DG_API dg_tensor *dg_cast(const dg_tensor *t, dg_dtype dtype);        /* differentiable between float dtypes */

/* Inspection. */
DG_API int dg_ndim(const dg_tensor *t);
DG_API int64_t dg_dim(const dg_tensor *t, int axis);                  /* negative axis counts from the end */
DG_API dg_shape dg_shape_of(const dg_tensor *t);
DG_API int64_t dg_numel(const dg_tensor *t);
DG_API dg_dtype dg_dtype_of(const dg_tensor *t);
DG_API dg_device dg_device_of(const dg_tensor *t);
DG_API bool dg_is_contiguous(const dg_tensor *t);
/* Host pointer to the first element of a CPU tensor (NULL for other devices). */
DG_API void *dg_data(const dg_tensor *t);
/* Copy the values (in row-major order) to a host buffer of nbytes. */
DG_API int dg_to_host(const dg_tensor *t, void *dst, size_t nbytes);
DG_API int dg_copy_from_host(dg_tensor *t, const void *src, size_t nbytes);
DG_API double dg_item(const dg_tensor *t);                            /* value of a 1-element tensor; NAN on error */
DG_API double dg_get(const dg_tensor *t, const int64_t *index);       /* one element, for tests/debugging */
/* Readable text like PyTorch/Paddle: shape, dtype, device, values (elided past 6 per axis). */
DG_API char *dg_to_string(const dg_tensor *t);                        /* malloc'd; free() it */
DG_API int dg_print(const dg_tensor *t);
DG_API char *dg_shape_str(const dg_tensor *t, char *buf, size_t len); /* "[2, 3]" */

/* Ownership. */
DG_API dg_scope *dg_scope_begin(void);
DG_API void dg_scope_end(dg_scope *scope);
DG_API dg_tensor *dg_keep(dg_tensor *t);          /* take t out of its scope: the caller now owns it (dg_tensor_free) */
DG_API dg_tensor *dg_keep_in_parent(dg_tensor *t);/* hand t to the enclosing scope (caller if none) */
/* Release the owner's reference (also valid inside its scope). Freeing a tensor that was already
 * freed, or whose scope ended, is a DG_ESTATE error and changes nothing (always caught in checked
 * mode, see core.h). */
DG_API void dg_tensor_free(dg_tensor *t);
DG_API dg_tensor *dg_tensor_ref(dg_tensor *t);    /* an extra owned reference, released by dg_tensor_free */
/* `y = dg_advance(y, dg_relu(y));` in a forward: releases prev (a temporary the forward made,
 * never its input) once next exists and returns next, so a chain of layers holds one
 * activation at a time instead of all of them until the forward returns. In training the tape
 * still keeps what backward needs. prev is released even when next is NULL. */
DG_API dg_tensor *dg_advance(dg_tensor *prev, dg_tensor *next);
DG_API size_t dg_live_tensors(void);              /* tensors alive in this process, for leak tests */

/* In-place updates (not recorded on the tape; for optimizers and initialisers).
 * Refused on a tensor that requires grad unless inside dg_no_grad. */
DG_API int dg_fill_(dg_tensor *t, double value);
DG_API int dg_copy_(dg_tensor *dst, const dg_tensor *src);              /* broadcast src into dst */
DG_API int dg_add_(dg_tensor *dst, const dg_tensor *src);               /* dst += src (broadcast) */
DG_API int dg_axpy_(dg_tensor *y, double alpha, const dg_tensor *x);    /* y += alpha * x */
DG_API int dg_scale_(dg_tensor *t, double alpha);                       /* t *= alpha */
DG_API int dg_uniform_(dg_tensor *t, double low, double high);
DG_API int dg_normal_(dg_tensor *t, double mean, double std);
DG_API int dg_generator_uniform_(dg_generator *g, dg_tensor *t, double low, double high);   /* g NULL: as above */
DG_API int dg_generator_normal_(dg_generator *g, dg_tensor *t, double mean, double std);

#ifdef __cplusplus
}
#endif
#endif
