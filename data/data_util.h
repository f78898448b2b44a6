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

#endif
