/* dist/mpi/mpi_internal.h — what the two files of the MPI transport share: its state (comm_num
 * duplicates of MPI_COMM_WORLD and, for the hierarchical all-reduce, the node and node-leader
 * communicators made from each), the error and bounded-wait helpers of comm_mpi.c, and the
 * hierarchical all-reduce of hier_mpi.c. */
#ifndef DG_DIST_MPI_INTERNAL_H
#define DG_DIST_MPI_INTERNAL_H

#include "../dist_internal.h"
#include <mpi.h>

/* Open MPI's shared-memory all-reduce runs at 5-6 GB/s up to a few MB here but drops to about
 * 1 GB/s from 16 MB up (bench/dist_allreduce.c), so large buffers go in 8 MB pieces. */
#define PIECE_BYTES (8 << 20)

typedef struct mpi_channel {
    MPI_Comm comm;                /* a private duplicate of MPI_COMM_WORLD */
    /* hierarchical only (else MPI_COMM_NULL): this rank's node twice — the reduce stage and the
     * broadcast stage each on their own, because with overlap one bucket's broadcast may be
     * posted before or after the next bucket's reduce depending on the rank, and MPI matches
     * collectives on a communicator by posting order — and the node leaders (MPI_COMM_NULL on
     * the other ranks) */
    MPI_Comm node_reduce, node_bcast, leaders;
    /* hierarchical all-reduces started on this channel, and how many have posted their leader
     * and broadcast stages: each stage is posted in start order, the same order on every rank */
    uint64_t started, leaders_posted, bcast_posted;
    bool failed;                  /* a stage failed: the ones waiting behind it give up */
} mpi_channel;

/* user: the hierarchical channel of DG_COMM_CH_USER collectives (its own node and leader
 * communicators; unused when flat, where every stage is posted at once and a later collective
 * cannot wait behind an unposted one) */
typedef struct mpi_state { int n; mpi_channel ch[DG_COMM_MAX_NUM]; mpi_channel user; bool has_user; } mpi_state;

extern bool dg_mpi_abandoned;     /* a collective timed out (set by the backend's abandon): MPI_Finalize would wait for it forever */
int dg_mpi_fail(int err, const char *what, const dg_comm *c);
MPI_Datatype dg_mpi_type(dg_dtype dt);
/* Waits for n posted requests, bounded by the communicator's timeout. */
int dg_mpi_wait(dg_comm *c, int n, MPI_Request *req, const char *what);

/* ---- hier_mpi.c ---- */
/* Makes channel ch's node and leader communicators (collective over MPI_COMM_WORLD) and, for the
 * first channel, sets c->nodes, local_rank, local_size. */
int dg_mpi_hier_make(dg_comm *c, mpi_channel *ch, bool first);
void dg_mpi_hier_free(mpi_channel *ch);
/* The three stages as one non-blocking operation: started here, advanced by poll (which frees
 * the handle once *done). */
int dg_mpi_hier_start(dg_comm *c, mpi_channel *ch, void *buf, int64_t n, dg_dtype dt, MPI_Op op, void **handle);
int dg_mpi_hier_poll(dg_comm *c, void *handle, bool *done);

#endif
