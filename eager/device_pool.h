/* eager/device_pool.h — the caching allocator of a device whose memory the host cannot touch
 * (the CUDA backend's): segments from the device's own malloc, split into blocks best-fit and
 * merged again when freed. All bookkeeping lives in host memory. Not thread-safe: the backend
 * calls it under its lock. Kept free of CUDA so the CPU test suite can check it with a fake
 * segment provider. */
#ifndef DG_DEVICE_POOL_H
#define DG_DEVICE_POOL_H

#include <dygraph.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_device_pool_ops {
    void *(*seg_alloc)(size_t n, void *ctx);   /* NULL when the device is out of memory */
    void (*seg_free)(void *p, void *ctx);
    void *ctx;
} dg_device_pool_ops;

typedef struct dg_device_pool dg_device_pool;

dg_device_pool *dg_device_pool_new(dg_device_pool_ops ops);
/* Frees every segment (blocks still handed out included) and the pool. */
void dg_device_pool_destroy(dg_device_pool *pool);
/* A block of at least n bytes (512-byte granules), NULL when neither the cache nor the device
 * has room even after the fully free segments were given back. */
void *dg_device_pool_alloc(dg_device_pool *pool, size_t n);
/* Returns false (and changes nothing) when p is not a block handed out by this pool. */
bool dg_device_pool_free(dg_device_pool *pool, void *p);
/* Gives every segment without a live block back to the device. */
void dg_device_pool_release_free(dg_device_pool *pool);
/* allocated, peak_allocated, reserved (segments) and device_mallocs (segments ever made). */
void dg_device_pool_stats(const dg_device_pool *pool, dg_memory_stats *out);
/* The longest probe sequence of the live-block table (how well its hash spreads addresses). */
size_t dg_device_pool_max_probe(const dg_device_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
