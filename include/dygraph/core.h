/* dygraph/core.h — library lifetime, dtypes, devices, threads, seeding and the error model.
 *
 * Error model: a function that returns a pointer returns NULL on failure and records a message
 * readable with dg_last_error(); a function that acts returns 0 on success and a negative
 * DG_E* code on failure. Messages are per thread. Each new failure replaces the message and
 * status, so dg_last_error() names the call that failed last, as PyTorch and Paddle raise at
 * the failing call. The exception is a NULL input: an op or function handed NULL where a
 * tensor, layer, optimizer, dataset... belongs takes it to be the result of an earlier failed
 * call, returns NULL (or an error code) and keeps that call's message, adding its own only when
 * no message is recorded. So `dg_mean_all(dg_relu(dg_add(a, b)))` with mismatched a and b
 * reports the add, and a training loop may check once per step. A successful call does not
 * clear the message; dg_clear_error() does (after which a NULL input reports itself as NULL).
 * The library never exits or aborts the host program.
 *
 * Handles: a tensor used after it was freed (dg_tensor_free, or the end of its scope), freed
 * twice, or kept across dg_shutdown is reported as a DG_ESTATE error naming the op, provided
 * its memory has not been reused yet. Checked mode (DG_CHECKED=1, dg_init_params.checked or
 * dg_set_checked) guarantees it for the most recent frees: freed tensor handles are held back
 * from reuse (a bounded quarantine, emptied by dg_shutdown).
 *
 * Threads (README.md, "Threads", says it in full): the last error, the scope stack, no-grad mode
 * and the generator picked with dg_generator_use are per thread. Threads may train models of
 * their own at once, share one model for inference (eval mode, each thread under no-grad), draw
 * from one generator, and free on one thread a caller-owned tensor made on another. Anything else
 * (a tensor, layer, optimizer) is used by one thread at a time; the current device and the bf16 /
 * TF32 switches are process-wide and set before other threads run ops. */
#ifndef DYGRAPH_CORE_H
#define DYGRAPH_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DG_VERSION_MAJOR 0
#define DG_VERSION_MINOR 1
#define DG_VERSION_PATCH 0
#define DG_MAX_DIMS 8

/* Marks what the library exports. It is built with -fvisibility=hidden, so every other function
 * stays inside it; `make test` checks that the exported symbols are exactly those declared
 * with DG_API in include/. */
#ifndef DG_API   /* modules define it empty: what they use of the API stays theirs */
#if defined(__GNUC__) || defined(__clang__)
#define DG_API __attribute__((visibility("default")))
#else
#define DG_API
#endif
#endif

typedef enum dg_dtype {
    DG_F32 = 0,
    DG_F64 = 1,
    DG_I64 = 2,
    DG_I32 = 3,
    DG_F16 = 4,   /* IEEE half: a storage type for mixed precision, computed in f32 (README, "Mixed precision") */
    DG_BF16 = 5,  /* bfloat16, likewise (dg_set_cpu_bf16 is a different switch: bf16 convolutions inside f32 tensors) */
    DG_BOOL = 6,  /* masks produced by comparisons, stored one byte each */
} dg_dtype;

typedef enum dg_device_type { DG_CPU = 0, DG_CUDA = 1 } dg_device_type;
typedef struct dg_device { dg_device_type type; int index; } dg_device;

typedef enum dg_status {
    DG_OK = 0,
    DG_EINVAL = -1,      /* bad argument: NULL, wrong shape, wrong dtype */
    DG_ENOMEM = -2,      /* allocation failed */
    DG_EIO = -3,         /* file could not be read or written */
    DG_EFORMAT = -4,     /* file content is malformed */
    DG_EDEVICE = -5,     /* device missing or device mismatch */
    DG_ESTATE = -6,      /* call out of order (e.g. backward through a freed graph) */
    DG_EUNSUPPORTED = -7, /* op or dtype not implemented on this backend */
    DG_ETIMEOUT = -8,    /* a peer (another rank, the rendezvous store) did not answer in time */
    DG_ECOMM = -9        /* a collective failed (peer gone, transport error) */
} dg_status;

/* Params structs (dg_*_params) are passed by value and every field is taken literally: 0 means
 * 0 (a zero weight decay, a zero momentum, axis 0). Each has a function returning its defaults,
 * dg_<name>_default_params(), with the values of PyTorch or Paddle its comment names; start
 * from it and set what differs:
 *     dg_adam_params p = dg_adam_default_params();
 *     p.lr = 1e-2;
 * A field whose default is read from the environment at the call holds DG_FROM_ENV (a value
 * such a field never takes otherwise). Out-of-range values are errors naming the field. */
#define DG_FROM_ENV (-1)

/* Params structs. Every struct of options a function takes (dg_adam_params, dg_conv2d_params,
 * ...) has a dg_<name>_default_params() with PyTorch's (or Paddle's) defaults; start from it and
 * set what differs:
 *     dg_adam_params p = dg_adam_default_params();
 *     p.lr = 1e-2;
 * Fields are then taken literally (0 means 0). The last field, params_tag, is what the default
 * function sets to DG_PARAMS_TAG: a struct written as a literal ({0}, or designated initialisers
 * such as (dg_adam_params){ .lr = 1e-2 }) leaves it 0, and every function given one refuses it
 * with an error naming the default function, because the literal's other fields are 0 rather
 * than the defaults (Adam's betas and eps 0, SGD's gradient scale 0: NaN or no learning, with no
 * error). The one exception is dg_update_params (extension.h), a fused step's complete
 * description, which has no defaults. */
#define DG_PARAMS_TAG 0x64677031u

/* The random stream's starting key when none is given (dg_init_default_params().seed). */
#define DG_DEFAULT_SEED 0x2024u

typedef struct dg_init_params {
    const char *device;  /* "cpu", "gpu", "gpu:N"; NULL (default): $DG_DEVICE, else FLAGS_selected_gpus, else cpu */
    int num_threads;     /* >= 1: CPU threads (dg_set_num_threads); DG_FROM_ENV (default): $DG_NUM_THREADS,
                            else $OMP_NUM_THREADS, else automatic (dg_set_num_threads); 0 is an error.
                            The two variables apply without dg_init too, read at the first op */
    uint64_t seed;       /* dg_manual_seed(seed) at init; default DG_DEFAULT_SEED; 0 is a seed like any other */
    bool quiet;          /* suppress the one-line device notice; default false */
    bool cpu_bf16;       /* dg_set_cpu_bf16(true); also $DG_CPU_BF16=1; default false */
    bool checked;        /* checked mode (see above); also $DG_CHECKED=1; default false */
    uint32_t params_tag;     /* set by dg_init_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_init_params;
DG_API dg_init_params dg_init_default_params(void);

/* Optional: ops work without it (CPU, automatic thread count, default seed). params NULL means
 * dg_init_default_params(). It seeds the random stream with params->seed. After dg_shutdown it
 * starts a new session and is required before tensors are made or used again. */
DG_API int dg_init(const dg_init_params *params);
/* Ends the session: frees what the library holds (the calling thread's open scopes and their
 * tensors, cached host and device memory, device streams and library handles, convolution
 * primitive caches, the checked-mode quarantine) and resets the default generator, the device (cpu) and the
 * TF32/bf16 flags. Then every call that makes or uses a tensor fails with DG_ESTATE ("called
 * after dg_shutdown; call dg_init first") until dg_init. Tensors still held are not freed:
 * dg_tensor_free (and dg_layer_free, dg_optimizer_free, ...) still releases them, but using
 * one in an op, before or after the next dg_init, is an error. Call it when no other thread is
 * inside the library (free DataLoaders and communicators first). A second call does nothing. */
DG_API void dg_shutdown(void);
DG_API const char *dg_version(void);

/* Errors (see the model above). The message names the op, the shapes/dtypes and the source
 * location. */
DG_API const char *dg_last_error(void);
DG_API int dg_last_status(void);
DG_API void dg_clear_error(void);

/* Checked mode: on, freed tensor handles are quarantined so that any later use or second free
 * is an error naming the op (costs a lock per freed tensor; for debugging and tests). Off by
 * default unless $DG_CHECKED=1. */
DG_API void dg_set_checked(bool on);
DG_API bool dg_get_checked(void);

/* Devices. */
DG_API dg_device dg_cpu(void);
DG_API int dg_set_device(const char *name);  /* like paddle.set_device("cpu" | "gpu" | "gpu:1") */
DG_API dg_device dg_get_device(void);
DG_API const char *dg_device_name(dg_device d, char *buf, size_t len);

/* Memory of the caching allocators. CUDA: device memory. CPU: blocks above 256 KB (the
 * activations, gradients and optimizer state of any real model); device_mallocs counts the times
 * the CPU pool had to grow. Either way a steady training loop leaves device_mallocs flat. */
typedef struct dg_memory_stats {
    size_t allocated;        /* bytes in live tensors */
    size_t reserved;         /* allocated + cached for reuse */
    size_t peak_allocated;
    uint64_t device_mallocs; /* calls to the device's malloc so far: flat in a steady loop */
} dg_memory_stats;
DG_API int dg_memory_stats_get(dg_device d, dg_memory_stats *out);
DG_API int dg_empty_cache(dg_device d);      /* return cached blocks to the device */
DG_API int dg_synchronize(dg_device d);      /* wait for queued work on the device */

/* Page-locked host memory for batches bound for the current device (plain malloc when the
 * current device is the CPU). The signatures fit dg_dataloader_params.host_alloc/host_free, and
 * dg_dataloader_params.pin_memory uses them. */
DG_API void *dg_pinned_alloc(size_t bytes, void *user);
DG_API void dg_pinned_free(void *p, void *user);

/* TF32 tensor-core math for f32 matmul and convolution on GPUs (torch.backends.*.allow_tf32):
 * off by default, so GPU f32 results round like the CPU's. */
DG_API void dg_set_allow_tf32(bool allow);
DG_API bool dg_get_allow_tf32(void);

/* f32 convolutions on GPUs only through algorithms that sum the products directly (no FFT, no
 * Winograd), so that GPU results differ from the CPU's in summation order alone. Off by default:
 * the fastest algorithm cuDNN measures runs, as under torch.backends.cudnn.benchmark, and the
 * transformed ones put outputs ~1e-4 of the largest off (ResNet18 training, batch 128 at
 * 224x224 on an H200: 2,970 img/s with them, 1,930 without). Ignored while TF32 is allowed. */
DG_API void dg_set_exact_gpu_conv(bool exact);
DG_API bool dg_get_exact_gpu_conv(void);

/* bf16 convolutions on the CPU's AMX / AVX512-BF16 units, like running them under
 * torch.autocast("cpu", torch.bfloat16): a convolution's inputs (activations, weights, upstream
 * gradients) are rounded to bf16, products accumulate in f32 and what it writes is f32, so
 * tensors, gradients and optimizer state all stay f32 (the master weights). Off by default.
 * Convolutions on the im2col fallback (f64, and the backward pass of layers with fewer than 16
 * input channels) and matmuls stay f32. DG_EUNSUPPORTED where the CPU lacks bf16 instructions. */
DG_API int dg_set_cpu_bf16(bool on);
DG_API bool dg_get_cpu_bf16(void);

/* Threads used by CPU kernels (OpenMP, and oneDNN's GEMM and convolutions on the same pool).
 * n >= 1: that many (more than four per CPU is clamped to that). n < 1: automatic, also the
 * default when neither dg_init's num_threads, DG_NUM_THREADS nor OMP_NUM_THREADS names a count:
 * one per CPU this process may run on, less the CPUs that other processes keep busy (measured
 * from /proc/stat about every quarter second), at least one. OpenMP's idle workers spin, so a
 * thread on a CPU that something else holds slows every step down many times; the automatic
 * count avoids that. Where a kernel's rounding depends on its thread count (oneDNN's weight
 * gradients of large convolutions), an automatic run's last bits can then depend on the load:
 * name a count for bit-reproducible runs. */
DG_API void dg_set_num_threads(int n);
DG_API int dg_get_num_threads(void);   /* the count ops on the calling thread use now */

/* Random numbers: counter-based Philox4x32-10; a seed gives the same stream on every backend.
 * A generator (torch.Generator) is a seed and the position in its stream. Random ops draw from
 * the calling thread's generator (dg_generator_use) unless given one, and that is the default
 * generator until the thread picks another: dg_manual_seed / dg_get_seed act on the default one.
 * Draws from one generator may come from several threads at once: each op reserves its own
 * counters with one atomic step, so no two draws overlap (which thread gets which numbers
 * follows the order they arrive in). Seeding or setting the state of a generator while another
 * thread draws from it leaves that draw's numbers unspecified. */
typedef struct dg_generator dg_generator;
typedef struct dg_generator_state {
    uint64_t seed;
    uint64_t offset;   /* the next unused Philox counter (each gives four 32-bit draws) */
} dg_generator_state;

DG_API void dg_manual_seed(uint64_t seed);             /* the default generator: seed, from the start */
DG_API uint64_t dg_get_seed(void);
DG_API dg_generator *dg_default_generator(void);       /* never freed; dg_generator_free ignores it */
DG_API dg_generator *dg_generator_new(uint64_t seed);  /* NULL when out of memory */
DG_API void dg_generator_free(dg_generator *g);        /* not while an op or a thread still uses it */
DG_API int dg_generator_manual_seed(dg_generator *g, uint64_t seed);
DG_API uint64_t dg_generator_get_seed(const dg_generator *g);   /* 0 and an error for NULL */
/* The exact position: restoring a saved state makes the next draws repeat (a checkpoint saves
 * it beside the model to resume dropout masks and random transforms where they were). */
DG_API int dg_generator_get_state(const dg_generator *g, dg_generator_state *out);
DG_API int dg_generator_set_state(dg_generator *g, const dg_generator_state *state);
/* Makes g the calling thread's generator for random ops given none (layer initialisation in
 * dg_nn_linear and the models, dropout layers, dg_rand...); NULL or the default generator: back
 * to the default. Returns the one used before, for nesting. Other threads are not affected. */
DG_API dg_generator *dg_generator_use(dg_generator *g);

/* dtype helpers */
DG_API size_t dg_dtype_size(dg_dtype dt);
DG_API const char *dg_dtype_name(dg_dtype dt);
DG_API bool dg_dtype_is_float(dg_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
