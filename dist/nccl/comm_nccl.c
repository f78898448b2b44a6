/* dist/nccl/comm_nccl.c — the NCCL transport: GPU buffers, collectives on the CUDA backend's
 * communication stream (ordered after the compute work that produced the buffer, and the
 * compute stream ordered after them by `wait`). The unique id travels through the rendezvous
 * store (as Paddle's gen_nccl_id), or under mpirun without endpoints through an MPI broadcast
 * from rank 0 (the build's MPI transport; MPI_Init is done there if the program did not). Everything
 * runs in NCCL's non-blocking mode and is polled against the timeout: a peer that never comes
 * or dies makes this rank abort the communicator and return an error instead of hanging.
 * comm_num > 1 splits that many communicators off the first (one CUDA stream each); the
 * hierarchical all-reduce splits each by node (dist/topology.c: endpoint IPs or ranks_per_node)
 * and by node leader, and runs ncclReduce -> ncclAllReduce -> ncclBroadcast. */
#include "../dist_internal.h"
#include "nccl_cuda.h"
#include <nccl.h>
#include <time.h>
#include <unistd.h>

/* device: the GPU the communicator was made on. A process may use several GPUs, and the CUDA
 * module's streams are those of the thread's current device, so every call makes it current.
 * ch[k] is communicator k of comm_num (ch[0].comm from the unique id, the others split from it),
 * its collectives on comm stream k; with the hierarchical all-reduce, k's node and node-leader
 * communicators (NULL on a rank that is not its node's first) are split from it too. A failure
 * aborts them all: they share the peers. */
typedef struct nccl_chan { ncclComm_t comm, node, leaders; } nccl_chan;
typedef struct nccl_state { nccl_chan ch[DG_COMM_MAX_NUM]; int n; bool aborted; int device; } nccl_state;

static void abort_all(nccl_state *s) {
    if (s->aborted) return;
    s->aborted = true;
    for (int k = 0; k < s->n; k++) {
        ncclComm_t *all[] = { &s->ch[k].leaders, &s->ch[k].node, &s->ch[k].comm };
        for (int i = 0; i < 3; i++)
            if (*all[i]) ncclCommAbort(*all[i]);
    }
}

static int nccl_fail(dg_comm *c, ncclComm_t comm, ncclResult_t r, const char *what) {
    nccl_state *s = c->impl;
    const char *last = comm ? ncclGetLastError(comm) : "";
    DG_ERR(DG_ECOMM, "nccl: %s failed on rank %d of %d: %s%s%s", what, c->rank, c->size, ncclGetErrorString(r),
           last && *last ? ": " : "", last ? last : "");
    if (s) abort_all(s);
    return DG_ECOMM;
}

/* The backend's abandon (dg_comm_timed_out): the transport's own waits abort before they call
 * it; this covers any other waiter. */
static void nccl_abandon(dg_comm *c) {
    if (c->impl) abort_all(c->impl);
}

/* Polls comm until its pending operation leaves ncclInProgress or the timeout. */
static int settle(dg_comm *c, ncclComm_t comm, ncclResult_t r, const char *what) {
    nccl_state *s = c->impl;
    dg_peer_wait w = dg_peer_wait_begin();
    while (r == ncclInProgress) {
        if (!dg_peer_wait_pause(&w, c->timeout_s)) {
            abort_all(s);
            return dg_comm_timed_out(c, "nccl", what, "", true);
        }
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) break;
    }
    return r == ncclSuccess ? 0 : nccl_fail(c, comm, r, what);
}

/* Communicator ch may queue work: this device current, its stream after the compute so far. */
static int usable(dg_comm *c, int ch) {
    nccl_state *s = c->impl;
    if (s->aborted) { DG_ERR(DG_ECOMM, "nccl: the communicator of rank %d was aborted after an earlier failure", c->rank); return DG_ECOMM; }
    int rc = DG_CUDA(cudaSetDevice(s->device));
    return rc ? rc : dg_cuda_comm_wait_compute_at(ch);
}

static ncclDataType_t nccl_type(dg_dtype dt) {
    switch (dt) {
    case DG_F32: return ncclFloat32;
    case DG_F64: return ncclFloat64;
    case DG_I64: return ncclInt64;
    case DG_I32: return ncclInt32;
    default: return ncclUint8;
    }
}

/* Reduce inside the node to its first rank, all-reduce among those, broadcast inside the node,
 * queued in that order on one stream. An average is the nodes' averages averaged, which is the
 * world's only when every node has as many ranks; otherwise it goes flat. */
static int hier_all_reduce(dg_comm *c, nccl_chan *ch, cudaStream_t st, void *buf, size_t n, ncclDataType_t t, ncclRedOp_t o) {
    if (o == ncclAvg && !c->nodes_uniform)
        return settle(c, ch->comm, ncclAllReduce(buf, buf, n, t, o, ch->comm, st), "ncclAllReduce (nodes of unequal sizes)");
    int rc = settle(c, ch->node, ncclReduce(buf, buf, n, t, o, 0, ch->node, st), "ncclReduce (node)");
    if (!rc && ch->leaders) rc = settle(c, ch->leaders, ncclAllReduce(buf, buf, n, t, o, ch->leaders, st), "ncclAllReduce (leaders)");
    if (!rc) rc = settle(c, ch->node, ncclBroadcast(buf, buf, n, t, 0, ch->node, st), "ncclBroadcast (node)");
    return rc;
}

static int nccl_all_reduce(dg_comm *c, int k, void *buf, int64_t n, dg_dtype dt, dg_comm_op op) {
    if (k < 0) k = 0;   /* DG_COMM_CH_USER: NCCL's buckets are all queued in apply, none is in flight before */
    int rc = usable(c, k);
    if (rc) return rc;
    nccl_chan *ch = &((nccl_state *)c->impl)->ch[k];
    cudaStream_t st = dg_cuda_comm_stream_at(k);
    ncclRedOp_t o = op == DG_COMM_MAX ? ncclMax : op == DG_COMM_AVG ? ncclAvg : ncclSum;
    if (c->hierarchical) return hier_all_reduce(c, ch, st, buf, (size_t)n, nccl_type(dt), o);
    return settle(c, ch->comm, ncclAllReduce(buf, buf, (size_t)n, nccl_type(dt), o, ch->comm, st), "ncclAllReduce");
}
static int nccl_broadcast(dg_comm *c, void *buf, int64_t n, dg_dtype dt, int root) {
    int rc = usable(c, 0);
    if (rc) return rc;
    ncclComm_t comm = ((nccl_state *)c->impl)->ch[0].comm;
    return settle(c, comm, ncclBroadcast(buf, buf, (size_t)n, nccl_type(dt), root, comm, dg_cuda_comm_stream_at(0)), "ncclBroadcast");
}
static int nccl_all_gather(dg_comm *c, const void *send, void *recv, int64_t n, dg_dtype dt) {
    int rc = usable(c, 0);
    if (rc) return rc;
    ncclComm_t comm = ((nccl_state *)c->impl)->ch[0].comm;
    return settle(c, comm, ncclAllGather(send, recv, (size_t)n, nccl_type(dt), comm, dg_cuda_comm_stream_at(0)), "ncclAllGather");
}

/* The first asynchronous error of any of the communicators, ncclSuccess when none. */
static ncclResult_t first_error(nccl_state *s, ncclComm_t *which) {
    for (int k = 0; k < s->n; k++) {
        ncclComm_t all[] = { s->ch[k].comm, s->ch[k].node, s->ch[k].leaders };
        for (int i = 0; i < 3; i++) {
            ncclResult_t r = ncclSuccess;
            if (all[i]) ncclCommGetAsyncError(all[i], &r);
            if (r != ncclSuccess && r != ncclInProgress) { *which = all[i]; return r; }
        }
    }
    return ncclSuccess;
}

/* The compute stream waits for the queued collectives of every communicator; the host polls so
 * that a collective stuck on a dead peer ends in an error after the timeout instead of a hang. */
static int nccl_wait(dg_comm *c) {
    nccl_state *s = c->impl;
    dg_peer_wait w = dg_peer_wait_begin();
    int rc = DG_CUDA(cudaSetDevice(s->device));
    if (rc) return rc;
    for (int k = 0; k < s->n; k++) {
        cudaStream_t st = dg_cuda_comm_stream_at(k);
        if (!st) return dg_last_status() ? dg_last_status() : DG_EDEVICE;
        for (;;) {
            cudaError_t e = cudaStreamQuery(st);
            /* a collective may also end with an error (NCCL reports it until the work is done,
             * and a failed one still leaves the stream): the stream's end alone is no success */
            ncclComm_t bad = NULL;
            ncclResult_t r = first_error(s, &bad);
            if (r != ncclSuccess) return nccl_fail(c, bad, r, "a queued collective");
            if (e == cudaSuccess) break;
            if (e != cudaErrorNotReady) return DG_CUDA(e);
            if (!dg_peer_wait_pause(&w, c->timeout_s)) {
                abort_all(s);
                return dg_comm_timed_out(c, "nccl", "the queued collectives", "", true);
            }
        }
    }
    return dg_cuda_compute_wait_comms(s->n);
}

/* A one-byte all-reduce (of a scratch byte whose value does not matter) is a barrier on NCCL:
 * no rank leaves it before every rank has entered it. */
static int nccl_barrier(dg_comm *c) {
    int rc = usable(c, 0);
    if (rc) return rc;
    void *one = dg_cuda_alloc(1);
    if (!one) return DG_ENOMEM;
    ncclComm_t comm = ((nccl_state *)c->impl)->ch[0].comm;
    rc = settle(c, comm, ncclAllReduce(one, one, 1, ncclUint8, ncclSum, comm, dg_cuda_comm_stream_at(0)), "barrier");
    if (!rc) rc = nccl_wait(c);
    dg_cuda_free(one);
    return rc;
}

/* Finalizes and destroys comm; one that cannot finalize is abandoned. */
static void finish(dg_comm *c, ncclComm_t comm) {
    if (!comm || ((nccl_state *)c->impl)->aborted) return;
    if (settle(c, comm, ncclCommFinalize(comm), "ncclCommFinalize") == 0) ncclCommDestroy(comm);
}

static void nccl_destroy(dg_comm *c) {
    nccl_state *s = c->impl;
    if (!s) return;
    /* freeing is not a failure of anything the caller asked for, so it leaves no message */
    dg_error_saved before;
    dg_error_save(&before);
    for (int k = s->n - 1; k >= 0; k--) {   /* the split ones before their parents */
        finish(c, s->ch[k].leaders);
        finish(c, s->ch[k].node);
        finish(c, s->ch[k].comm);
    }
    dg_error_restore(&before);
    free(s);
    c->impl = NULL;
}

static const dg_comm_backend nccl_backend = {
    .name = "nccl", .device_buffers = true, .all_reduce = nccl_all_reduce, .broadcast = nccl_broadcast,
    .all_gather = nccl_all_gather, .barrier = nccl_barrier, .wait = nccl_wait, .abandon = nccl_abandon,
    .destroy = nccl_destroy,
};

/* *out split from parent (collective over parent's ranks); NULL for NCCL_SPLIT_NOCOLOR. The
 * non-blocking configuration is inherited (config NULL). */
static int split(dg_comm *c, ncclComm_t parent, int color, ncclComm_t *out, const char *what) {
    *out = NULL;
    ncclResult_t r = ncclCommSplit(parent, color, c->rank, out, NULL);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(c, parent, r, what);
    return *out ? settle(c, *out, r, what) : settle(c, parent, r, what);
}

/* Communicators 1..comm_num-1 (every rank one colour: duplicates) and, hierarchical, each
 * one's node and leader communicators. */
static int make_splits(dg_comm *c, nccl_state *s) {
    int rc = 0;
    for (int k = 1; k < c->comm_num && !rc; k++) {
        rc = split(c, s->ch[0].comm, 0, &s->ch[k].comm, "ncclCommSplit (comm_num)");
        if (s->ch[k].comm) s->n = k + 1;
    }
    for (int k = 0; k < s->n && c->hierarchical && !rc; k++) {
        rc = split(c, s->ch[k].comm, c->node, &s->ch[k].node, "ncclCommSplit (node)");
        if (!rc) rc = split(c, s->ch[k].comm, c->local_rank == 0 ? 0 : NCCL_SPLIT_NOCOLOR, &s->ch[k].leaders,
                            "ncclCommSplit (leaders)");
    }
    return rc;
}

static int make_id(ncclUniqueId *id) {
    ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess) { DG_ERR(DG_ECOMM, "nccl: ncclGetUniqueId: %s", ncclGetErrorString(r)); return DG_ECOMM; }
    return 0;
}

/* Under mpirun without endpoints: rank 0 makes the id and broadcasts it over MPI. Whether rank 0
 * managed to make one travels with it, so that a failure there fails every rank (instead of the
 * others initialising with garbage). */
static int share_id_over_mpi(const dg_dist_env *env, ncclUniqueId *id) {
    struct { int32_t ok; char why[200]; ncclUniqueId id; } msg;
    memset(&msg, 0, sizeof msg);
    if (env->rank == 0) {
        msg.ok = make_id(&msg.id) == 0;
        if (!msg.ok) snprintf(msg.why, sizeof msg.why, "%s", dg_last_error());
    }
    if (dg_mpi_broadcast_bytes(&msg, sizeof msg, 0) != 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", dg_last_error());
        int st = dg_last_status() ? dg_last_status() : DG_ECOMM;
        DG_ERR(st, "nccl: rank %d of %d could not receive the NCCL id over MPI (mpirun without PADDLE_TRAINER_ENDPOINTS): %s",
               env->rank, env->world_size, why);
        return st;
    }
    if (!msg.ok) {
        DG_ERR(DG_ECOMM, "nccl: rank %d of %d: rank 0 could not make the NCCL id: %s", env->rank, env->world_size, msg.why);
        return DG_ECOMM;
    }
    *id = msg.id;
    return 0;
}

DG_MODULE_EXPORT int dg_comm_nccl_make(dg_comm *c, const dg_dist_env *env) {
    dg_device d = dg_get_device();
    if (d.type != DG_CUDA) {
        DG_ERR(DG_EDEVICE, "nccl: rank %d has no GPU selected (dg_set_device(\"gpu\") or FLAGS_selected_gpus first)", env->rank);
        return DG_EDEVICE;
    }
    ncclUniqueId id;
    if (env->world_size > 1 && !c->store) {
        if (!env->under_mpirun) {
            DG_ERR(DG_EINVAL, "nccl: rank %d of %d has no rendezvous endpoint (PADDLE_TRAINER_ENDPOINTS) to share the NCCL id "
                   "and was not started by mpirun: start GPU workers with `dgrun --nproc_per_node N prog` or `mpirun -np N prog`",
                   env->rank, env->world_size);
            return DG_EINVAL;
        }
        if (!dg_comm_mpi_built()) {
            DG_ERR(DG_EUNSUPPORTED, "nccl: rank %d of %d runs under mpirun without a rendezvous endpoint "
                   "(PADDLE_TRAINER_ENDPOINTS), and this build has no MPI to share the NCCL id over: rebuild with MPI "
                   "(libopenmpi-dev, MPI=auto) or start the workers with `dgrun --nproc_per_node N prog`",
                   env->rank, env->world_size);
            return DG_EUNSUPPORTED;
        }
        int rc = share_id_over_mpi(env, &id);
        if (rc) return rc;
    } else if (env->world_size > 1) {
        if (env->rank == 0) {
            int rc = make_id(&id);
            if (!rc) rc = dg_store_set(c->store, "nccl_id", &id, sizeof id);
            if (rc) return rc;
        } else {
            void *v = NULL;
            size_t len = 0;
            int rc = dg_store_get(c->store, "nccl_id", &v, &len);
            if (rc) return rc;
            if (len != sizeof id) { free(v); DG_ERR(DG_EFORMAT, "nccl: the store's nccl_id has %zu bytes, want %zu", len, sizeof id); return DG_EFORMAT; }
            memcpy(&id, v, sizeof id);
            free(v);
        }
    } else {
        int rc = make_id(&id);
        if (rc) return rc;
    }
    nccl_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "nccl: out of memory"); return DG_ENOMEM; }
    s->device = d.index;
    c->impl = s;
    int set = DG_CUDA(cudaSetDevice(d.index));   /* the communicator belongs to the current device */
    if (set) return set;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&s->ch[0].comm, env->world_size, id, env->rank, &cfg);
    s->n = 1;
    int rc = r == ncclSuccess || r == ncclInProgress ? settle(c, s->ch[0].comm, r, "ncclCommInitRankConfig")
                                                     : nccl_fail(c, s->ch[0].comm, r, "ncclCommInitRankConfig");
    if (!rc) rc = make_splits(c, s);
    if (rc) { free(s); c->impl = NULL; return rc; }
    c->be = &nccl_backend;
    return 0;
}
