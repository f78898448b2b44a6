/* dygraph/extension.h — what an author of a layer, dataset, transport or custom kernel needs
 * beyond the user API: raising an error the way the library does, a tensor's raw address and
 * strides on its device, wrapping memory the library did not allocate (freed by the caller's
 * deleter when the last view goes), and the device's stream to launch a custom kernel on.
 * Everything in the library outside eager/ is written against these headers only. */
#ifndef DYGRAPH_EXTENSION_H
#define DYGRAPH_EXTENSION_H

#include "tensor.h"

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

/* The address of element 0 on the tensor's device: host memory for a CPU tensor, device memory
 * for a GPU tensor (pass it to a kernel, never dereference it on the host). */
DG_API void *dg_tensor_ptr(const dg_tensor *t);
/* Stride of an axis in elements (negative axes count from the end); 0 with an error if out of range. */
DG_API int64_t dg_stride(const dg_tensor *t, int axis);

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
