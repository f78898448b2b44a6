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

#define DG_ERR DG_RAISE

/* One transport. Buffers are contiguous, of n elements of dt, on the device the transport
 * works on (host for MPI, the GPU for NCCL); staging is done by dist/comm.c. */
typedef struct dg_comm_backend {
    const char *name;
    bool device_buffers;          /* takes GPU memory (NCCL) rather than host memory */
    int (*all_reduce)(dg_comm *c, void *buf, int64_t n, dg_dtype dt, dg_comm_op op);
    int (*broadcast)(dg_comm *c, void *buf, int64_t n, dg_dtype dt, int root);
    int (*all_gather)(dg_comm *c, const void *send, void *recv, int64_t n, dg_dtype dt);
    int (*barrier)(dg_comm *c);
    /* after a collective queued on the device: make the compute stream wait for it (NULL:
     * collectives are complete on return) */
    int (*wait)(dg_comm *c);
    /* optional (host transports): start a SUM all-reduce and poll it to completion; *done set
     * and the handle freed when it completes or fails. What the DataParallel overlap uses. */
    int (*start_all_reduce)(dg_comm *c, void *buf, int64_t n, dg_dtype dt, void **handle);
    int (*poll)(dg_comm *c, void *handle, bool *done);
    void (*destroy)(dg_comm *c);
} dg_comm_backend;

struct dg_comm {
    const dg_comm_backend *be;
    int rank, size;
    double timeout_s;
    pthread_mutex_t lock;         /* one collective at a time: the transports are not reentrant */
    void *impl;                   /* the transport's state */
    dg_store *store;              /* rendezvous store when one was made (kept for the comm's life) */
};

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
int dg_comm_all_reduce_raw(dg_comm *c, void *buf, int64_t n, dg_dtype dt, dg_comm_op op);

/* The transport's start_all_reduce / poll under the comm lock (callers check they exist). */
int dg_comm_start_all_reduce_raw(dg_comm *c, void *buf, int64_t n, dg_dtype dt, void **handle);
int dg_comm_poll_raw(dg_comm *c, void *handle, bool *done);

/* The timeout a params field asks for: itself, or for DG_FROM_ENV $DG_DIST_TIMEOUT, else 300. */
double dg_dist_timeout(double given);
int dg_dist_split_endpoint(const char *ep, char *host, size_t hlen, int *port);
/* Rank 0's store from the environment (server on rank 0), and a check-in of every rank so that
 * a missing or duplicated rank fails on all ranks within the timeout. */
dg_store *dg_dist_rendezvous(const dg_dist_env *env, double timeout_s);
/* $DG_JOB_TOKEN (dgrun's job identity) into buf, "" when unset (a job started by hand or by plain
 * mpirun: its store then meets only tokenless ranks, as before tokens); 0 or an error naming the
 * variable. */
int dg_dist_job_token(char *buf, size_t len);

#endif
