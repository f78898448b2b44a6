/* eager/ops/pool_internal.h — what eager/ops/pool.c shares with the pooling ops built beside
 * it (eager/ops/pool_indices.c, eager/ops/pool1d.c): the checked geometry of a 2-D pool. */
#ifndef DG_OPS_POOL_INTERNAL_H
#define DG_OPS_POOL_INTERNAL_H

#include "op_util.h"

/* Checks x and p for op (avg: average pooling's rules, else max pooling's) and fills g; false
 * with the error set when they are bad. */
bool dg_pool2d_make_geom(const char *op, bool avg, const dg_tensor *x, dg_pool2d_params p, dg_pool2d_geom *g);

#endif
