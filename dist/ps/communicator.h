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

/* A message for the thread to send before its next exchange (msg malloc'd, freed by the thread),
 * and what to do with the reply: reply(arg, 0, payload, n) with the reply's payload, or
 * reply(arg, rc, NULL, 0) when it failed or was never sent; reply may be NULL. */
typedef void (*dg_ps_reply_fn)(void *arg, int rc, const unsigned char *payload, size_t n);
typedef struct dg_ps_post {
    int server;
    unsigned char *msg;
    size_t len;
    dg_ps_reply_fn reply;
    void *arg;
    struct dg_ps_post *next;
} dg_ps_post;
/* How the thread sends a post over its transport and hands the reply on; 0 or a DG_E* code with
 * the error set (then the thread fails as for an exchange). */
typedef int (*dg_ps_send_fn)(void *ctx, dg_ps_transport *tr, const dg_ps_post *p);

/* Starts the thread; tr (owned from now on, even on failure) is only ever used by it. NULL with
 * the error set. */
dg_ps_communicator *dg_ps_communicator_new(dg_ps_transport *tr, int64_t total, int max_merge, dg_ps_exchange_fn fn,
                                           dg_ps_send_fn send, void *ctx);
/* Queues msg (owned by the communicator from now on, also on failure) for server; 0, or the
 * thread's first failure. */
int dg_ps_communicator_post(dg_ps_communicator *c, int server, unsigned char *msg, size_t len, dg_ps_reply_fn reply, void *arg);
/* What a step hands over and takes back, under the communicator's lock: the values the thread
 * pulled since the last step, and the sums of this worker's gradients they do not include yet —
 * `sending` (NULL when no exchange is under way) and `queued` (NULL when none wait) — n_missing
 * gradients in all. */
typedef struct dg_ps_handover {
    const float *fresh, *sending, *queued;
    int n_missing;
} dg_ps_handover;
typedef void (*dg_ps_take_fn)(void *ctx, const dg_ps_handover *h);
/* Writes (accumulate false) or adds this step's gradient into queue (total floats). */
typedef int (*dg_ps_add_fn)(void *ctx, float *queue, bool accumulate);

/* One step's hand-over (waiting while max_merge gradients are queued): take(ctx, ...) if values
 * were pulled since the last step, then add(ctx, ...) this step's gradient. Returns 1 when take
 * was called, 0 when not; or add's failure, or the thread's first failure (its message re-raised
 * here). */
int dg_ps_communicator_step(dg_ps_communicator *c, dg_ps_take_fn take, dg_ps_add_fn add, void *ctx);
/* Waits until every queued gradient and post was sent, then take(ctx, ...) with the values pulled after
 * them (returns 1; 0 when nothing new was pulled since the last take); or the failure. */
int dg_ps_communicator_flush(dg_ps_communicator *c, dg_ps_take_fn take, void *ctx);
/* Stops the thread (after sending what is queued) and frees everything, the transport too. */
void dg_ps_communicator_free(dg_ps_communicator *c);

#endif
