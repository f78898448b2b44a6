/* dist/ps/client.h — a worker's tables on the parameter servers: dense (client.c) and sparse (client_sparse.c). */
#ifndef DG_DIST_PS_CLIENT_H
#define DG_DIST_PS_CLIENT_H

#include <dygraph.h>
#include "ps_internal.h"
#include "proto.h"
#include "communicator.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_ps_dense dg_ps_dense;

/* How a worker's tables are kept: DG_PS_MODE_SYNC / ASYNC / GEO (proto.h), and for geo the local
 * steps between exchanges. */
typedef struct dg_ps_mode {
    int mode, k_steps;
    /* async: opens a second connected transport for the dense table's communicator thread
     * (communicator.h; NULL with the error set when it cannot); NULL: pushes and pulls on the
     * worker's own thread */
    dg_ps_transport *(*open_background)(void);
} dg_ps_mode;

/* opt's parameters as table `table` over n_servers servers of tr: INITs every shard with this
 * worker's values (with opt's kind and settings for the servers to run) and pulls them back into
 * the parameters. NULL with the error set (a server's refusal is quoted). */
dg_ps_dense *dg_ps_dense_new(dg_ps_transport *tr, int n_servers, int worker, int n_workers, uint32_t table, dg_ps_mode mode,
                             double timeout_s, dg_optimizer *opt);
/* Pushes the parameters' gradients (none: zeros), then pulls the values the servers hold after
 * the step (sync: after the step of every worker's push of this version). */
int dg_ps_dense_step(dg_ps_dense *d);
/* Geo mode: sends what the parameters moved since the last exchange and pulls the servers' sums
 * now (what dg_ps_dense_step does every k_steps steps; stop and save call it so no step is lost);
 * 0 at once in the other modes. The sparse tables' counterpart likewise. */
int dg_ps_dense_geo_exchange(dg_ps_dense *d);
/* Async with a communicator: waits for every queued gradient to be sent and takes the values
 * pulled after them into the parameters; 0 at once otherwise. */
int dg_ps_dense_flush(dg_ps_dense *d);
/* Waits until the sparse tables' posts went out (so a pull of this thread's sees them). */
int dg_ps_dense_flush_posts(dg_ps_dense *d);
/* Async on the CPU: a communicator's post (communicator.h) for the sparse tables' messages, on a
 * thread of their own made at the first post; whether posting is on. */
int dg_ps_dense_post(dg_ps_dense *d, int server, unsigned char *msg, size_t len, dg_ps_reply_fn reply, void *arg);
bool dg_ps_dense_has_communicator(const dg_ps_dense *d);
void dg_ps_dense_free(dg_ps_dense *d);
/* A sparse table (proto.h's dg_ps_sparse_msg: dim, rule, lr, ..., seed, init_range) over the
 * servers, row id on server id % n_servers. lookup: rows of ids (any shape, int64/int32, >= 0) as
 * ids.shape + [dim], pulled at this table's version; its gradient is kept for push, which sends
 * every lookup's row gradients since the last push (sync: once per step, even with none). */
typedef struct dg_ps_sparse dg_ps_sparse;
dg_ps_sparse *dg_ps_sparse_new(dg_ps_transport *tr, int n_servers, int worker, int n_workers, uint32_t table, dg_ps_mode mode,
                               double timeout_s, const dg_ps_sparse_msg *settings);
dg_tensor *dg_ps_sparse_lookup(dg_ps_sparse *sp, const dg_tensor *ids);
int dg_ps_sparse_push(dg_ps_sparse *sp);
/* Async with a communicator: starts pulling ids' rows (the next batch's) on its thread; the next
 * lookup of exactly these ids takes them, this worker's own pushes since added (SGD) or pulled
 * again (other rules). Otherwise 0 at once. */
int dg_ps_sparse_prefetch(dg_ps_sparse *sp, const dg_tensor *ids);
/* Async: the table's pushes and prefetches go through d's communicator (when it has one). */
void dg_ps_sparse_post_through(dg_ps_sparse *sp, dg_ps_dense *d);
int dg_ps_sparse_geo_exchange(dg_ps_sparse *sp);
void dg_ps_sparse_free(dg_ps_sparse *sp);

/* Every server writes its tables to dir, then the manifest is written (server_io.c). */
int dg_ps_save(dg_ps_transport *tr, int n_servers, int worker, double timeout_s, const char *dir);
/* Has server drop its sparse rows unused for more than max_age versions; how many, or a DG_E* code. */
int64_t dg_ps_evict(dg_ps_transport *tr, int server, int worker, double timeout_s, uint64_t max_age);
/* The bytes this process's requests sent and their replies brought, and the requests, so far. */
void dg_ps_traffic(uint64_t *sent, uint64_t *received, uint64_t *requests);
/* Tells every server this worker is done (Paddle's exe.close()); the first failure is returned. */
int dg_ps_stop_worker(dg_ps_transport *tr, int n_servers, int worker, double timeout_s);

#ifdef __cplusplus
}
#endif
#endif
