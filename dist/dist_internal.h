/* dist/dist_internal.h — what the files of dist/ share: the communicator's backend table (one
 * per transport: local, MPI, NCCL), the timeout rule and endpoint parsing. */
#ifndef DG_DIST_INTERNAL_H
#define DG_DIST_INTERNAL_H

#include <dygraph.h>
#include <dygraph/extension.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <dygraph/module.h>
#include <dygraph/dist.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#define DG_ERR DG_RAISE

/* One transport. Buffers are contiguous, of n elements of dt, on the device the transport
 * works on (host for MPI, the GPU for NCCL); staging is done by dist/comm.c. `ch` picks one of
 * the comm_num communicators (0 <= ch < c->comm_num); the other collectives use number 0. With
 * c->hierarchical the all-reduce runs in three stages over the node layout the transport found
 * (c->nodes, local_rank, local_size). */
/* The channel of collectives made through dg_comm_all_reduce: a transport whose in-flight bucket
 * all-reduces advance only when the reducer polls them (MPI's hierarchical stages) gives these a
 * channel of their own, so one made during backward (SyncBatchNorm's, a recomputed forward's)
 * never waits behind a bucket nobody is polling. */
#define DG_COMM_CH_USER (-1)

typedef struct dg_comm_backend {
    const char *name;
    bool device_buffers;          /* takes GPU memory (NCCL) rather than host memory */
    /* ch: 0..comm_num-1, or DG_COMM_CH_USER for a collective the program (or a layer such as
     * SyncBatchNorm) makes, perhaps while DataParallel's buckets are in flight */
    int (*all_reduce)(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, dg_comm_op op);
    int (*broadcast)(dg_comm *c, void *buf, int64_t n, dg_dtype dt, int root);
    int (*all_gather)(dg_comm *c, const void *send, void *recv, int64_t n, dg_dtype dt);
    int (*barrier)(dg_comm *c);
    /* after a collective queued on the device: make the compute stream wait for it (NULL:
     * collectives are complete on return) */
    int (*wait)(dg_comm *c);
    /* optional (host transports): start a SUM all-reduce and poll it to completion; *done set
     * and the handle freed when it completes or fails. What the DataParallel overlap uses. */
    int (*start_all_reduce)(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, void **handle);
    int (*poll)(dg_comm *c, void *handle, bool *done);
    /* optional: called once by dg_comm_timed_out, whoever waited (the transport's own wait or
     * the reducer's polls of the overlapped buckets, which the transport never sees time out):
     * the transport marks its own state so that nothing later waits on the abandoned
     * collectives, process exit included (MPI: no MPI_Finalize; NCCL: the communicators aborted) */
    void (*abandon)(dg_comm *c);
    void (*destroy)(dg_comm *c);
} dg_comm_backend;

struct dg_comm {
    const dg_comm_backend *be;
    int rank, size;
    double timeout_s;
    pthread_mutex_t lock;         /* one collective at a time: the transports are not reentrant */
    void *impl;                   /* the transport's state */
    dg_store *store;              /* rendezvous store when one was made (kept for the comm's life) */
    bool abandoned;               /* a collective outlived the timeout: its requests may still be
                                     posted, so nothing more goes through this communicator */
    /* progress, for the heartbeat (dist/watchdog.c): what the latest collective is */
    pthread_mutex_t progress_lock;
    uint64_t collectives;         /* collectives entered so far */
    char activity[128];           /* the latest one: "all_reduce", "data_parallel step 20, bucket 1 of 3" */
    struct dg_watchdog *watchdog; /* the heartbeat; NULL without a store */
    /* asked for by dg_comm_params (checked by dg_comm_new before the transport is made) */
    int comm_num;                 /* communicators the transport makes, >= 1 */
    bool hierarchical;
    int ranks_per_node;           /* 0: the transport finds the nodes */
    /* the node layout the transport found (hierarchical only; else 0, -1, 0) */
    int nodes, local_rank, local_size;
    int node;                     /* NCCL: the node's first rank (the split colour) */
    bool nodes_uniform;           /* NCCL: every node has local_size ranks */
};

/* ---- the nodes of a job (dist/topology.c) ---- */
typedef struct dg_node_layout {
    int node;                     /* the node's first rank */
    int nodes, local_rank, local_size;
    bool uniform;                 /* every node has as many ranks */
} dg_node_layout;
/* ranks_per_node > 0: ranks r / ranks_per_node form a node; 0: the ranks whose endpoint has the
 * same IP. 0, or an error naming what is missing. */
int dg_dist_node_layout(const dg_dist_env *env, int ranks_per_node, dg_node_layout *out);

/* ---- waiting for peers (a collective, the DataParallel buckets) ----
 * A wait first yields (a peer sharing this core may need it), then sleeps 50 us doubling to 2 ms:
 * a rank waiting for a stopped peer costs no core, and one waiting for a slow peer sees it within
 * 2 ms of its arrival. The wait gives up after the communicator's timeout (DG_DIST_TIMEOUT),
 * which is what ends a job whose rank stopped instead of letting it hang. Inline, because the
 * transport modules link nothing of the core. */
typedef struct dg_peer_wait { double start; unsigned pauses; } dg_peer_wait;
static inline double dg_monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static inline dg_peer_wait dg_peer_wait_begin(void) { return (dg_peer_wait){ dg_monotonic_s(), 0 }; }
/* One pause of the wait; false once it has lasted timeout_s. */
static inline bool dg_peer_wait_pause(dg_peer_wait *w, double timeout_s) {
    if (dg_monotonic_s() - w->start > timeout_s) return false;
    if (w->pauses < 64) {
        sched_yield();
    } else {
        unsigned shift = (w->pauses - 64) / 16;
        long us = 50L << (shift < 6 ? shift : 6);
        struct timespec ts = { 0, (us < 2000 ? us : 2000) * 1000L };
        nanosleep(&ts, NULL);
    }
    w->pauses++;
    return true;
}
/* ---- the watchdog (dist/watchdog.c) ----
 * Every collective is counted and labelled before it starts; a thread per rank posts that
 * progress and its clock to the store every interval, so a rank whose collective times out can
 * name the rank that stopped. */
void dg_comm_progress(dg_comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct dg_watchdog *dg_watchdog_start(dg_comm *c, const dg_dist_env *env);   /* NULL: none (no store) */
void dg_watchdog_stop(struct dg_watchdog *w);
/* The error for a collective that outlived the timeout: names the transport's call, the latest
 * collective, and what the other ranks' heartbeats say; abandons the communicator, telling its
 * transport (backend `abandon`), `aborted`: the transport could abort it, as NCCL can. Provided
 * to the transport modules. */
int dg_comm_timed_out(dg_comm *c, const char *transport, const char *what, const char *detail, bool aborted);

/* Transports. Each make function fills c->impl and returns 0, or an error with a message. */
extern const dg_comm_backend dg_comm_local_backend;
/* The MPI and NCCL transports live in modules (libdygraph-mpi.so.0, libdygraph-nccl.so.0,
 * dygraph/module.h): dist/comm.c reaches these entries through dg_module_symbol. */
int dg_comm_mpi_make(dg_comm *c, const dg_dist_env *env);     /* dist/mpi/comm_mpi.c */
int dg_comm_nccl_make(dg_comm *c, const dg_dist_env *env);    /* dist/nccl/comm_nccl.c */
bool dg_comm_mpi_built(void);    /* the MPI module is installed (dist/comm.c, forwarded to modules) */

/* n bytes from `root` to every rank of MPI_COMM_WORLD (initialising MPI when the program has
 * not): how the NCCL transport shares its unique id under plain mpirun, where there is no
 * rendezvous store. Collective over all ranks. Without the MPI module: DG_EUNSUPPORTED. */
int dg_mpi_broadcast_bytes(void *buf, size_t n, int root);

/* A collective on a raw buffer of the transport's kind (used by the DataParallel reducer;
 * takes the comm lock). */
int dg_comm_all_reduce_raw(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, dg_comm_op op);

/* The transport's start_all_reduce / poll under the comm lock (callers check they exist). */
int dg_comm_start_all_reduce_raw(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, void **handle);
int dg_comm_poll_raw(dg_comm *c, void *handle, bool *done);

/* The timeout a params field asks for: itself, or for DG_FROM_ENV $DG_DIST_TIMEOUT, else 300. */
double dg_dist_timeout(double given);
int dg_dist_split_endpoint(const char *ep, char *host, size_t hlen, int *port);
/* Rank 0's store from the environment (server on rank 0), and a check-in of every rank so that
 * a missing or duplicated rank fails on all ranks within the timeout. */
dg_store *dg_dist_rendezvous(const dg_dist_env *env, double timeout_s);
/* The store parameters every rank of env uses (rank 0's endpoint, the job token); host and token
 * are the caller's buffers the params point into. */
int dg_dist_store_params(const dg_dist_env *env, double timeout_s, dg_store_params *sp, char *host, size_t hlen,
                         char *token, size_t tlen);
/* Like dg_store_get, but answers at once: *found false when the key is absent. */
int dg_store_peek(dg_store *s, const char *key, void **value, size_t *len, bool *found);
/* $DG_JOB_TOKEN (dgrun's job identity) into buf, "" when unset (a job started by hand or by plain
 * mpirun: its store then meets only tokenless ranks, as before tokens); 0 or an error naming the
 * variable. */
int dg_dist_job_token(char *buf, size_t len);

#endif
