/* test/cuda_emu/emu_internal.h — what the emulated libraries (cuBLAS, cuDNN, NCCL in this folder)
 * use of the emulated runtime (runtime.cc): queueing work on a stream, checking that a pointer is
 * device memory, reporting device-side faults, and recording which entry points ran.
 *
 * The model: device memory lives in an arena per device that the host cannot touch (its pages are
 * PROT_NONE except while queued work that may reach it runs: work of that device, of a device
 * with peer access to it, or a copy), streams are queues executed lazily (at a synchronise, a
 * query or an event), and work queued on a stream runs later, in stream order. A library's work
 * runs on the current device, like the kernels it stands for: on a stream of that device only,
 * touching that device's memory and its peers'. So a library
 * call must copy everything it needs from its arguments and descriptors *when it is called*
 * (descriptors may be changed or destroyed before the work runs; host scalars such as alpha and
 * beta are read at call time, as CUDA's host pointer mode says) and touch device memory only
 * inside the queued work function. */
#ifndef DGEMU_INTERNAL_H
#define DGEMU_INTERNAL_H

#include <cuda_runtime.h>
#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a work function returns: done, or "call me again later" (a collective waiting for its
 * peers). A work function that fails calls dgemu_fault() and returns DGEMU_DONE. */
enum { DGEMU_DONE = 0, DGEMU_AGAIN = 1 };
typedef int (*dgemu_work_fn)(void *arg);

/* Queues fn(arg) on stream s (NULL: the legacy default stream) of the current device. `what`
 * names the work in reports (a string literal). The queue owns arg from here on: free_arg(arg)
 * (may be NULL) runs once the work is done or dropped. Returns cudaSuccess, or the sticky error,
 * or cudaErrorInvalidResourceHandle for a dead stream or one of another device, as a kernel
 * launch there fails (then nothing is queued and free_arg has already run). */
cudaError_t dgemu_enqueue(cudaStream_t s, const char *what, dgemu_work_fn fn, void *arg, void (*free_arg)(void *));

/* The device stream s belongs to (NULL: the current device's legacy stream); -1 for a stream
 * that is not alive. Libraries bind a handle's stream with it. */
int dgemu_stream_device(cudaStream_t s);

/* Whether [p, p + n) lies inside one live device allocation (or a __device__ variable) that the
 * current device reaches: its own, or a device it enabled peer access to. Libraries check their
 * device pointer arguments with it at call time. */
bool dgemu_is_device(const void *p, size_t n);

/* A device-side error, reported on stderr the way compute-sanitizer words it ("========= ...")
 * and made sticky: every later runtime call returns e, as CUDA does after a kernel fault. */
void dgemu_fault(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The sticky error, cudaSuccess when none. */
cudaError_t dgemu_sticky_error(void);

/* The current device (cudaSetDevice) and how many are emulated (DGEMU_DEVICES, default 2). */
int dgemu_device(void);
int dgemu_device_count(void);

/* Records that an entry point of an emulated library ran (for the coverage report):
 * DGEMU_API() at the top of each entry point does it. */
void dgemu_called(const char *entry);
#define DGEMU_API() dgemu_called(__func__)
/* Fault injection: whether DGEMU_FAIL (a comma-separated list of entry points, read at every
 * call) names `entry`; DGEMU_INJECT(status) at the top of an entry point then returns status,
 * as a library that refuses the call would (a cuDNN without a kernel for this case, say), so
 * the callers' fallback and cleanup paths can be run. The item `cudaMalloc:N` (runtime.cc) fails
 * the Nth device allocation from when the value was set and every later one. */
bool dgemu_injected(const char *entry);
#define DGEMU_INJECT(status) do { if (dgemu_injected(__func__)) return (status); } while (0)

/* Counters for the emulator's own tests (what a profiler would show on a GPU). */
typedef struct dgemu_stats {
    unsigned long long launches, fiber_blocks, plain_blocks, work_items;
    unsigned long long syncs, queries;               /* stream/event/device synchronisations, stream queries */
    unsigned long long device_mallocs, device_frees, pageable_uploads;
    size_t device_bytes, pinned_bytes;               /* live now (device: whole pages) */
} dgemu_stats;
void dgemu_get_stats(dgemu_stats *out);

#ifdef __cplusplus
}
#endif
#endif
