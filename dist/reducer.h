/* dist/reducer.h — the gradient reducer (dist/reducer.c) that DataParallel drives. */
#ifndef DG_DIST_REDUCER_H
#define DG_DIST_REDUCER_H

#include "dist_internal.h"

typedef enum { DG_BUCKET_IDLE, DG_BUCKET_PACKED, DG_BUCKET_REDUCING, DG_BUCKET_DONE } dg_bucket_state;

typedef struct dg_bucket {
    dg_dtype dtype;
    dg_device device;
    int n;                        /* parameters in the bucket */
    int *params;                  /* their indices, in bucket order (reverse registration) */
    int64_t *offsets;             /* element offset of each in flat */
    int64_t numel;
    dg_tensor *flat;              /* persistent buffer */
    /* what the transport reduces: flat's data pointer, or for a host transport (MPI) and a GPU
     * bucket the pinned host copy `stage` (such a transport reads and writes it on the host) */
    void *host;
    void *stage;                  /* pinned host copy of flat (NULL: none needed) */
    int nready;                   /* overlap: gradients final so far */
    dg_bucket_state state;        /* overlap */
    void *pending;                /* overlap: the transport's handle while REDUCING */
    uint64_t prof_t0;             /* overlap: the profiler's token from the start to the completion */
} dg_bucket;

typedef struct dg_reducer {
    dg_comm *comm;
    dg_dp_params p;
    int np;
    dg_tensor **params;           /* borrowed (the wrapped layer owns them) */
    char **names;
    int nb;
    dg_bucket *buckets;
    int *bucket_of;
    bool *ready;
    bool no_sync;
    int64_t steps;                /* reductions applied, for the watchdog's labels */
    /* overlap (all on the thread that runs backward and apply) */
    int next_launch;              /* first bucket not yet started */
    int error;
    bool abandoned;               /* buckets timed out: their requests may still write into their buffers */
    char error_msg[512];
} dg_reducer;

dg_reducer *dg_reducer_new(dg_comm *comm, dg_tensor *const *params, char *const *names, int np, dg_dp_params p);
int dg_reducer_apply(dg_reducer *r);
int dg_reducer_num_buckets(const dg_reducer *r);
void dg_reducer_free(dg_reducer *r);

#endif
