/* dygraph/extension.h — what an author of a layer, dataset, transport or custom kernel needs
 * beyond the user API: raising an error the way the library does, a tensor's raw address and
 * strides on its device, wrapping memory the library did not allocate (freed by the caller's
 * deleter when the last view goes), and the device's stream to launch a custom kernel on.
 * Everything in the library outside eager/ is written against these headers only. */
#ifndef DYGRAPH_EXTENSION_H
#define DYGRAPH_EXTENSION_H

#include "tensor.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records a failure for dg_last_error(), with " (file:line)" appended: what DG_RAISE expands to.
 * status is a negative dg_status (0 is taken as DG_EINVAL). */
DG_API void dg_set_error_at(int status, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define DG_RAISE(status, ...) dg_set_error_at((status), __FILE__, __LINE__, __VA_ARGS__)
/* Whether a failure is recorded on this thread (dg_last_status() != 0). */
DG_API bool dg_has_error(void);
/* A NULL handed on from a call that failed: records the message only when none is recorded, so
 * the first failure stays what dg_last_error() reports. */
DG_API void dg_propagate_error_at(int status, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define DG_PROPAGATE(status, ...) dg_propagate_error_at((status), __FILE__, __LINE__, __VA_ARGS__)
/* Failures recorded by this thread so far; dg_error_since(n) is true when one was recorded after
 * dg_error_count() returned n: whether a callee said why it failed. */
DG_API uint64_t dg_error_count(void);
DG_API bool dg_error_since(uint64_t count);
/* For a failure that is handled (a fallback is taken): save before, restore after. */
#define DG_ERROR_MSG_LEN 1024
typedef struct dg_error_saved { int status; uint64_t count; char msg[DG_ERROR_MSG_LEN]; } dg_error_saved;
DG_API void dg_error_save(dg_error_saved *s);
DG_API void dg_error_restore(const dg_error_saved *s);
/* Splits the trailing " (file:line)" off a message (in place), to re-raise it with more context
 * and one location; false when there is none. */
DG_API bool dg_error_split_location(char *msg, const char **file, int *line);
/* 0 when t may be used (not NULL, not freed, made in this session); otherwise the failure is
 * recorded naming op and arg (a NULL propagates, a freed handle is DG_ESTATE) and its status
 * returned. */
DG_API int dg_tensor_check(const char *op, const char *arg, const dg_tensor *t);

/* Fail the calling function unless cond holds: with NULL, or with DG_EINVAL. */
#define DG_CHECK(cond, ...) do { if (!(cond)) { DG_RAISE(DG_EINVAL, __VA_ARGS__); return NULL; } } while (0)
#define DG_CHECK_INT(cond, ...) do { if (!(cond)) { DG_RAISE(DG_EINVAL, __VA_ARGS__); return DG_EINVAL; } } while (0)
/* A params struct argument (core.h, DG_PARAMS_TAG): 0 when its params_tag says it started from
 * its default function, else the error "op: the params were not made by default_fn() ..." and
 * DG_EINVAL. The macros fail the calling function with it; default_fn is the function's name.
 * They compare the tag in place and call only on a mismatch: every op taking params passes here. */
DG_API int dg_params_check(const char *op, uint32_t params_tag, const char *default_fn);
#define DG_CHECK_PARAMS(op, p, default_fn) do { \
        if ((p).params_tag != DG_PARAMS_TAG && dg_params_check((op), (p).params_tag, #default_fn)) return NULL; } while (0)
#define DG_CHECK_PARAMS_INT(op, p, default_fn) do { \
        if ((p).params_tag != DG_PARAMS_TAG) return dg_params_check((op), (p).params_tag, #default_fn); } while (0)
/* A handle argument (layer, optimizer, dataset, ...) that is NULL because the call that should
 * have made it failed: that call's message stands. */
#define DG_CHECK_HANDLE(p, ...) do { if (!(p)) { DG_PROPAGATE(DG_EINVAL, __VA_ARGS__); return NULL; } } while (0)
#define DG_CHECK_HANDLE_INT(p, ...) do { if (!(p)) { DG_PROPAGATE(DG_EINVAL, __VA_ARGS__); return DG_EINVAL; } } while (0)
/* A tensor argument: NULL propagates, a freed or stale handle is an error naming op. */
#define DG_CHECK_TENSOR(op, t) do { if (dg_tensor_check((op), #t, (t)) != 0) return NULL; } while (0)

/* The layer (or any caller) that ops run on behalf of, for anomaly mode's messages: push before
 * running a forward and pop after; describe(obj, buf, len) writes its name when a message needs
 * it. nn/ pushes each layer it runs while dg_anomaly_enabled(). Per thread, nesting. */
DG_API void dg_op_context_push(void (*describe)(const void *obj, char *buf, size_t len), const void *obj);
DG_API void dg_op_context_pop(void);
#define DG_CHECK_TENSOR_INT(op, t) do { int rc_ = dg_tensor_check((op), #t, (t)); if (rc_) return rc_; } while (0)

/* The address of element 0 on the tensor's device: host memory for a CPU tensor, device memory
 * for a GPU tensor (pass it to a kernel, never dereference it on the host). */
DG_API void *dg_tensor_ptr(const dg_tensor *t);
/* Stride of an axis in elements (negative axes count from the end); 0 with an error if out of range. */
DG_API int64_t dg_stride(const dg_tensor *t, int axis);

/* An uninitialised contiguous tensor on a given device (dg_empty uses the current one). */
DG_API dg_tensor *dg_empty_on(dg_shape shape, dg_dtype dtype, dg_device device);
/* Hands t, which the caller owns (made with no scope open, e.g. on a worker thread), to the
 * calling thread's innermost scope; with none open it stays the caller's. An error for a tensor
 * that already belongs to a scope. */
DG_API int dg_adopt(dg_tensor *t);

/* ---- the fused optimizer step, for optimizer authors ----
 * The element rules follow PyTorch 1.13's single-tensor optimizers operation by operation in
 * the parameter's dtype, so a step rounds the same on every device. */
typedef enum dg_update_kind {
    DG_UPD_SGD, DG_UPD_MOMENTUM, DG_UPD_ADAGRAD, DG_UPD_ADAM, DG_UPD_ADAMW, DG_UPD_RMSPROP, DG_UPD_ADAMAX, DG_UPD_NADAM,
    DG_UPD_ADADELTA
} dg_update_kind;

/* What is the same for every tensor of one step (one parameter group: lr and weight_decay are
 * the group's). */
typedef struct dg_update_params {
    dg_update_kind kind;
    double lr, weight_decay;
    double momentum; bool nesterov;     /* momentum; momentum also rmsprop (> 0: s1 is its buffer) */
    double beta1, beta2, eps;           /* adam/adamw/adamax/nadam; eps also adagrad, rmsprop */
    double dampening;                   /* momentum: buf = momentum buf + (1 - dampening) d */
    bool amsgrad;                       /* adam/adamw: s2 keeps max_exp_avg_sq, the denominator's */
    double alpha; bool centered;        /* rmsprop: square_avg's decay; centered: s2 is grad_avg */
    double rho;                         /* adadelta: the decay of square_avg (s0) and acc_delta (s1) */
} dg_update_params;

/* One parameter: contiguous p, g and state buffers of n elements, and its per-step scalars. */
typedef struct dg_update_tensor {
    void *p;
    const void *g;
    void *s0, *s1, *s2;       /* momentum buffer | adagrad sum | adam, nadam exp_avg, exp_avg_sq (adam amsgrad:
                                 max_exp_avg_sq) | adamax exp_avg, exp_inf | rmsprop square_avg, momentum_buffer,
                                 grad_avg | adadelta square_avg, acc_delta; NULL where the kind or its settings have no such buffer */
    int64_t n;
    double step_size;         /* sgd/momentum/rmsprop/adadelta: lr; adagrad: lr / (1 + (t-1) lr_decay); adam, adamax:
                                 lr / (1 - b1^t); nadam: lr (1 - mu_t) / (1 - mu_1...mu_t), the gradient's */
    double bc2_sqrt;          /* adam: sqrt(1 - b2^t); nadam: 1 - b2^t */
    double step_size2;        /* nadam: lr mu_(t+1) / (1 - mu_1...mu_(t+1)), exp_avg's */
    bool fresh;               /* momentum: the buffer starts as the first d */
} dg_update_tensor;
/* One step over n parameters that share a device and a float dtype, in as few passes as the
 * device's backend allows; t's pointers are dg_tensor_ptr addresses of contiguous tensors on
 * that device (parameters, gradients, state buffers of the same shape). */
DG_API int dg_fused_update(dg_device device, dg_dtype dtype, const dg_update_params *u, const dg_update_tensor *t, int n);

/* (dg_philox4x32 and dg_generator_reserve, for random numbers of one's own, are in
 * dygraph/custom_op.h.) */

/* Whether t belongs to scope s (made while s was the innermost scope, and not kept since). */
DG_API bool dg_scope_owns(const dg_scope *s, const dg_tensor *t);
/* a and b (same shape and dtype) exchange their data: storage, offset and strides; each keeps
 * its handle, gradient and tape links. How a tensor moves to another device in place (torch's
 * `p.data = p.data.to(device)`): make the copy, swap, free the copy. */
DG_API int dg_tensor_swap_data(dg_tensor *a, dg_tensor *b);
/* t, a leaf, gets its values in dtype dt in place (torch's `p.data = p.data.to(dt)`): the
 * handle, requires_grad and hooks stay, so layers and optimizers holding it follow; a
 * gradient of the old dtype is dropped. What dg_layer_to_dtype and O2 mixed precision use. */
DG_API int dg_tensor_cast_(dg_tensor *t, dg_dtype dt);
/* relu(conv2d(x, w, b)) in one pass for inference; an error when any input would record a
 * gradient (what eval-mode Conv+BN+ReLU folding uses). */
DG_API dg_tensor *dg_conv2d_relu_nograd(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p);

/* A tensor over `data`, which the library did not allocate: contiguous, on `device` (host
 * memory for the CPU, device memory for a GPU). When the tensor and every view of it are gone,
 * deleter(data, user) is called (from whichever thread drops the last reference; NULL: the
 * caller keeps ownership and must keep data alive). On failure NULL, and data stays the
 * caller's. Like any new tensor it belongs to the innermost open scope. */
DG_API dg_tensor *dg_from_blob(void *data, dg_shape shape, dg_dtype dtype, dg_device device,
                               void (*deleter)(void *data, void *user), void *user);

/* The stream the library queues work on for a device, for a custom kernel to run in order with
 * it: a cudaStream_t for a GPU; NULL for the CPU, whose work is done when an op returns. */
DG_API void *dg_device_stream(dg_device device);
/* (dg_synchronize in core.h waits until the device has finished the work queued so far.) */

#ifdef __cplusplus
}
#endif

#endif
