/* dist/ps/communicator.h — async mode's communicator (communicator.c): a thread that pushes a
 * dense table's gradients and pulls its values while the worker computes the next step, as
 * Paddle's AsyncCommunicator does. One step's gradient is in flight at a time: handing over the
 * next waits for the previous exchange, so the values a step starts from are never more than one
 * of this worker's steps behind (and the worker adds that step itself for SGD, client.c). */
#ifndef DG_DIST_PS_COMMUNICATOR_H
#define DG_DIST_PS_COMMUNICATOR_H

#include <stdbool.h>
#include <stdint.h>
#include "ps_internal.h"

typedef struct dg_ps_communicator dg_ps_communicator;

/* What the thread does with a merged gradient: push it and pull the values into `values` (total
 * floats), over its own transport; 0 or a DG_E* code with the error set. */
typedef int (*dg_ps_exchange_fn)(void *ctx, dg_ps_transport *tr, const float *grad, float *values);

/* Starts the thread; tr (owned from now on, even on failure) is only ever used by it. NULL with
 * the error set. */
dg_ps_communicator *dg_ps_communicator_new(dg_ps_transport *tr, int64_t total, dg_ps_exchange_fn fn, void *ctx);
/* Waits for the previous exchange, hands grad (total floats) over, and copies the values that
 * exchange pulled into values_out: 1, or 0 when there were none (the first step); or the
 * thread's first failure (its message re-raised here). */
int dg_ps_communicator_queue(dg_ps_communicator *c, const float *grad, float *values_out);
/* Waits until every queued gradient was sent and the values pulled after it are in values_out
 * (returns 1; 0 when nothing was queued since the last values were taken); or the failure. */
int dg_ps_communicator_flush(dg_ps_communicator *c, float *values_out);
/* Stops the thread (after the send under way) and frees everything, the transport too. */
void dg_ps_communicator_free(dg_ps_communicator *c);

#endif
