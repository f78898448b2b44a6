/* dist/ps/communicator.h — async mode's communicator (communicator.c): a thread that pushes a
 * dense table's gradients and pulls its values while the worker goes on computing, as Paddle's
 * AsyncCommunicator does. Gradients handed over while an exchange is under way are summed into
 * one push until max_merge are waiting, then the worker waits; max_merge 1 keeps exactly one
 * gradient in flight and none behind it. The worker learns which of its gradients the values it
 * takes still lack, so it can add them itself (client.c does for SGD). */
#ifndef DG_DIST_PS_COMMUNICATOR_H
#define DG_DIST_PS_COMMUNICATOR_H

#include <stdbool.h>
#include <stdint.h>
#include "ps_internal.h"

/* Paddle's max_merge_var_num default: the gradients merged into one push at most */
#define DG_PS_MAX_MERGE 20

typedef struct dg_ps_communicator dg_ps_communicator;

/* What the thread does with a merged gradient: push it and pull the values into `values` (total
 * floats), over its own transport; 0 or a DG_E* code with the error set. */
typedef int (*dg_ps_exchange_fn)(void *ctx, dg_ps_transport *tr, const float *grad, float *values);

/* Starts the thread; tr (owned from now on, even on failure) is only ever used by it. NULL with
 * the error set. */
dg_ps_communicator *dg_ps_communicator_new(dg_ps_transport *tr, int64_t total, int max_merge, dg_ps_exchange_fn fn, void *ctx);
/* Hands grad (total floats) over (waiting while max_merge are queued). If the thread pulled values
 * since the last call, copies them into values_out and returns 1 — with missing_out (if not
 * NULL) = the sum of the gradients handed over before grad that those values do not include yet,
 * *n_missing how many — else 0; or the thread's first failure (its message re-raised here). */
int dg_ps_communicator_queue(dg_ps_communicator *c, const float *grad, float *values_out, float *missing_out, int *n_missing);
/* Waits until every queued gradient was sent and the values pulled after it are in values_out
 * (returns 1; 0 when nothing was queued since the last values were taken); or the failure. */
int dg_ps_communicator_flush(dg_ps_communicator *c, float *values_out);
/* Stops the thread (after sending what is queued) and frees everything, the transport too. */
void dg_ps_communicator_free(dg_ps_communicator *c);

#endif
