/* data/data_util.h — what the files of data/ share: the public headers they are written
 * against (dygraph.h and dygraph/extension.h, like a user's dataset), and the one error macro
 * name they use. */
#ifndef DG_DATA_UTIL_H
#define DG_DATA_UTIL_H

#include <dygraph.h>
#include <dygraph/extension.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DG_ERR DG_RAISE

static inline int64_t dg_data_numel(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* A CPU tensor of the given shape (the batch and sample tensors of data/ are host tensors). */
static inline dg_tensor *dg_data_cpu_tensor(const int64_t *shape, int ndim, dg_dtype dt) {
    return dg_empty_on(dg_make_shape(ndim, shape), dt, dg_cpu());
}

/* Random numbers of data/ (shuffles, augmentations): a stream (key, *counter) of Philox blocks,
 * so a sample's randomness depends only on its own seed, never on which worker made it. */
static inline uint64_t dg_data_philox64(uint64_t key, uint64_t counter) {
    uint32_t o[4];
    dg_philox4x32(key, counter, o);
    return (uint64_t)o[0] | (uint64_t)o[1] << 32;
}
/* Uniform integer in [0, bound] from the stream, without modulo bias. */
static inline uint64_t dg_data_uniform_upto(uint64_t key, uint64_t *counter, uint64_t bound) {
    if (bound == UINT64_MAX) return dg_data_philox64(key, (*counter)++);
    uint64_t range = bound + 1, limit = UINT64_MAX - UINT64_MAX % range;
    for (;;) {
        uint64_t v = dg_data_philox64(key, (*counter)++);
        if (v < limit) return v % range;
    }
}
/* Uniform double in [0, 1). */
static inline double dg_data_uniform01(uint64_t key, uint64_t *counter) {
    return (double)(dg_data_philox64(key, (*counter)++) >> 11) * 0x1.0p-53;
}

#endif
