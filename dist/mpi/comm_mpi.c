/* dist/mpi/comm_mpi.c — the MPI transport (Open MPI): host buffers, collectives on a private
 * duplicate of MPI_COMM_WORLD so a program's own MPI traffic never interleaves with ours. MPI
 * is initialised here when the program has not done so, and then finalised when the process ends (mpirun
 * treats a rank that exits without MPI_Finalize as a failure). Counts above INT_MAX are sent in
 * pieces. MPI has no timeouts of its own: every collective is posted non-blocking and waited for
 * with dist_internal.h's peer wait, so a rank that stopped makes the others fail with DG_ETIMEOUT
 * after DG_DIST_TIMEOUT (and the launcher end the job) instead of spinning forever. comm_num > 1
 * makes that many duplicates, which all-reduces name by channel; the hierarchical all-reduce is
 * in hier_mpi.c. */
#include "mpi_internal.h"
#include <limits.h>

static bool g_we_initialised;
/* Set by the backend's abandon (dg_comm_timed_out calls it, whichever wait timed out): a
 * collective outlived the timeout and its requests stay posted, waiting for a rank that stopped,
 * so MPI_Finalize, which completes them first, would never return and the rank would never exit
 * (its peers' launcher waits for it). Such a process exits without finalizing; mpirun counts it
 * as failed, which it is. */
bool dg_mpi_abandoned;
static void finalize_at_exit(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && !dg_mpi_abandoned) MPI_Finalize();
}

int dg_mpi_fail(int err, const char *what, const dg_comm *c) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    DG_ERR(DG_ECOMM, "mpi: %s failed on rank %d of %d: %s", what, c->rank, c->size, msg);
    return DG_ECOMM;
}

MPI_Datatype dg_mpi_type(dg_dtype dt) {
    switch (dt) {
    case DG_F32: return MPI_FLOAT;
    case DG_F64: return MPI_DOUBLE;
    case DG_I64: return MPI_INT64_T;
    case DG_I32: return MPI_INT32_T;
    default: return MPI_BYTE;   /* DG_BOOL: raw bytes (broadcast, all_gather) */
    }
}

static void mpi_abandon(dg_comm *c) { dg_mpi_abandoned = true; }

/* The core's timeout error (dist/watchdog.c: it names the silent ranks). This module does not
 * link dist/module_shim.c, whose MPI forwarders would shadow its own entries, so it asks for
 * this one function itself. */
int dg_comm_timed_out(dg_comm *c, const char *transport, const char *what, const char *detail, bool aborted) {
    DG_MODULE_FN(int (*)(dg_comm *, const char *, const char *, const char *, bool), "dg_comm_timed_out");
    if (fn) return fn(c, transport, what, detail, aborted);   /* calls mpi_abandon */
    mpi_abandon(c);
    c->abandoned = true;
    return DG_ETIMEOUT;
}

/* Waits for n posted requests, bounded by the communicator's timeout. MPI cannot cancel a
 * collective, so on the timeout the requests stay posted and the communicator is abandoned. */
int dg_mpi_wait(dg_comm *c, int n, MPI_Request *req, const char *what) {
    dg_peer_wait w = dg_peer_wait_begin();
    for (;;) {
        int flag = 0;
        int err = MPI_Testall(n, req, &flag, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) {
            MPI_Waitall(n, req, MPI_STATUSES_IGNORE);   /* the pieces still running into the buffer */
            return dg_mpi_fail(err, what, c);
        }
        if (flag) return 0;
        if (!dg_peer_wait_pause(&w, c->timeout_s)) return dg_comm_timed_out(c, "mpi", what, "", false);
    }
}

static int mpi_start_pieces(dg_comm *c, MPI_Comm comm, void *buf, int64_t n, dg_dtype dt, MPI_Op mop, MPI_Request **out,
                            int *count);

/* The hierarchical one polled to its end, bounded like every wait here. */
static int hier_all_reduce(dg_comm *c, mpi_channel *ch, void *buf, int64_t n, dg_dtype dt, MPI_Op mop) {
    void *h;
    int rc = dg_mpi_hier_start(c, ch, buf, n, dt, mop, &h);
    dg_peer_wait w = dg_peer_wait_begin();
    for (bool done = false; !rc;) {
        if ((rc = dg_mpi_hier_poll(c, h, &done)) || done) break;
        if (!dg_peer_wait_pause(&w, c->timeout_s)) return dg_comm_timed_out(c, "mpi", "the hierarchical all-reduce", "", false);
    }
    return rc;
}

static int mpi_all_reduce(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, dg_comm_op op) {
    mpi_state *s = c->impl;
    MPI_Op mop = op == DG_COMM_MAX ? MPI_MAX : MPI_SUM;
    if (c->hierarchical) return hier_all_reduce(c, ch < 0 ? &s->user : &s->ch[ch], buf, n, dt, mop);
    if (ch < 0) ch = 0;
    MPI_Request *req;
    int count;
    int rc = mpi_start_pieces(c, s->ch[ch].comm, buf, n, dt, mop, &req, &count);
    if (rc) return rc;
    rc = dg_mpi_wait(c, count, req, "MPI_Allreduce");
    if (rc != DG_ETIMEOUT) free(req);   /* posted requests keep their array */
    return rc;
}

/* Non-blocking all-reduce for the DataParallel overlap: every piece posted at once, advanced by
 * each poll. The rank's own thread polls from backward's grad-ready hooks, between kernels: a
 * helper thread polling instead was seldom on a core (backward keeps every core busy) when its
 * peer was, and most buckets were still pending when backward ended. */
typedef struct mpi_pending { bool hier; void *op; int n; MPI_Request req[]; } mpi_pending;

/* Posts the pieces of an all-reduce of buf; *out (malloc'ed) holds *count requests. */
static int mpi_start_pieces(dg_comm *c, MPI_Comm comm, void *buf, int64_t n, dg_dtype dt, MPI_Op mop, MPI_Request **out,
                            int *count) {
    size_t es = dg_dtype_size(dt);
    int64_t piece = PIECE_BYTES / (int64_t)es, pieces = n ? (n + piece - 1) / piece : 0;
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(pieces ? pieces : 1));
    if (!req) { DG_ERR(DG_ENOMEM, "mpi: out of memory starting an all-reduce"); return DG_ENOMEM; }
    int k = 0;
    for (int64_t off = 0; off < n; off += piece) {
        int cnt = (int)(n - off < piece ? n - off : piece);
        int err = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * es, cnt, dg_mpi_type(dt), mop, comm, &req[k]);
        if (err != MPI_SUCCESS) {
            /* the pieces already posted must still complete before the buffer is reused */
            MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
            free(req);
            return dg_mpi_fail(err, "MPI_Iallreduce", c);
        }
        k++;
    }
    *out = req;
    *count = k;
    return 0;
}

static int mpi_start_all_reduce(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, void **handle) {
    mpi_state *s = c->impl;
    if (c->hierarchical) {
        mpi_pending *p = malloc(sizeof *p);
        if (!p) { DG_ERR(DG_ENOMEM, "mpi: out of memory starting an all-reduce"); return DG_ENOMEM; }
        p->hier = true;
        int rc = dg_mpi_hier_start(c, &s->ch[ch], buf, n, dt, MPI_SUM, &p->op);
        if (rc) free(p);
        else *handle = p;
        return rc;
    }
    MPI_Request *req;
    int count;
    int rc = mpi_start_pieces(c, s->ch[ch].comm, buf, n, dt, MPI_SUM, &req, &count);
    if (rc) return rc;
    mpi_pending *p = malloc(sizeof *p + sizeof(MPI_Request) * (size_t)(count ? count : 1));
    if (!p) {
        MPI_Waitall(count, req, MPI_STATUSES_IGNORE);
        free(req);
        DG_ERR(DG_ENOMEM, "mpi: out of memory starting an all-reduce");
        return DG_ENOMEM;
    }
    p->hier = false;
    p->n = count;
    memcpy(p->req, req, sizeof(MPI_Request) * (size_t)count);
    free(req);
    *handle = p;
    return 0;
}

static int mpi_poll(dg_comm *c, void *handle, bool *done) {
    mpi_pending *p = handle;
    if (p->hier) {
        int rc = dg_mpi_hier_poll(c, p->op, done);
        if (*done) free(p);
        return rc;
    }
    int flag = 0;
    int err = MPI_Testall(p->n, p->req, &flag, MPI_STATUSES_IGNORE);
    /* after an error some pieces may still be running into the buffer: wait them out */
    if (err != MPI_SUCCESS) MPI_Waitall(p->n, p->req, MPI_STATUSES_IGNORE);
    *done = err != MPI_SUCCESS || flag;
    if (*done) free(p);
    return err == MPI_SUCCESS ? 0 : dg_mpi_fail(err, "MPI_Testall (all-reduce)", c);
}

static int mpi_broadcast(dg_comm *c, void *buf, int64_t n, dg_dtype dt, int root) {
    mpi_state *s = c->impl;
    size_t es = dg_dtype_size(dt);
    for (int64_t off = 0; off < n; off += INT_MAX) {
        int cnt = (int)(n - off < INT_MAX ? n - off : INT_MAX);
        MPI_Request req;
        int err = MPI_Ibcast((char *)buf + (size_t)off * es, cnt, dg_mpi_type(dt), root, s->ch[0].comm, &req);
        if (err != MPI_SUCCESS) return dg_mpi_fail(err, "MPI_Ibcast", c);
        int rc = dg_mpi_wait(c, 1, &req, "MPI_Bcast");
        if (rc) return rc;
    }
    return 0;
}

static int mpi_all_gather(dg_comm *c, const void *send, void *recv, int64_t n, dg_dtype dt) {
    mpi_state *s = c->impl;
    if (n > INT_MAX) { DG_ERR(DG_EUNSUPPORTED, "mpi: all_gather of %lld elements per rank (limit %d)", (long long)n, INT_MAX); return DG_EUNSUPPORTED; }
    MPI_Request req;
    int err = MPI_Iallgather(send, (int)n, dg_mpi_type(dt), recv, (int)n, dg_mpi_type(dt), s->ch[0].comm, &req);
    return err == MPI_SUCCESS ? dg_mpi_wait(c, 1, &req, "MPI_Allgather") : dg_mpi_fail(err, "MPI_Iallgather", c);
}

static int mpi_barrier(dg_comm *c) {
    MPI_Request req;
    int err = MPI_Ibarrier(((mpi_state *)c->impl)->ch[0].comm, &req);
    return err == MPI_SUCCESS ? dg_mpi_wait(c, 1, &req, "MPI_Barrier") : dg_mpi_fail(err, "MPI_Ibarrier", c);
}

static void mpi_destroy(dg_comm *c) {
    mpi_state *s = c->impl;
    if (!s) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && !c->abandoned)   /* an abandoned one still has requests posted */
        for (int k = 0; k < s->n; k++) {
            dg_mpi_hier_free(&s->ch[k]);
            if (s->ch[k].comm != MPI_COMM_NULL) MPI_Comm_free(&s->ch[k].comm);
        }
    if (!fin && !c->abandoned && s->has_user) {
        dg_mpi_hier_free(&s->user);
        if (s->user.comm != MPI_COMM_NULL) MPI_Comm_free(&s->user.comm);
    }
    free(s);
    c->impl = NULL;
}

static const dg_comm_backend mpi_backend = {
    .name = "mpi", .all_reduce = mpi_all_reduce, .broadcast = mpi_broadcast, .all_gather = mpi_all_gather,
    .barrier = mpi_barrier, .destroy = mpi_destroy, .start_all_reduce = mpi_start_all_reduce, .poll = mpi_poll,
    .abandon = mpi_abandon,
};


/* MPI initialised (by the program or here), or an error. */
static int ensure_mpi(void) {
    int inited = 0, fin = 0;
    MPI_Finalized(&fin);
    if (fin) { DG_ERR(DG_ESTATE, "mpi: MPI was already finalised in this process"); return DG_ESTATE; }
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        /* SERIALIZED: a program may call us from more than one thread, never at the same
         * time (the comm lock orders them) */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            DG_ERR(DG_ECOMM, "mpi: MPI_Init_thread failed");
            return DG_ECOMM;
        }
        if (!g_we_initialised) atexit(finalize_at_exit);
        g_we_initialised = true;
        if (provided < MPI_THREAD_SERIALIZED) {
            DG_ERR(DG_EUNSUPPORTED, "mpi: this MPI offers thread level %d, below MPI_THREAD_SERIALIZED", provided);
            return DG_EUNSUPPORTED;
        }
    }
    return 0;
}

/* n bytes from `root` to every rank of MPI_COMM_WORLD, on a private duplicate so that the
 * program's own traffic on the world communicator never matches ours. What the NCCL transport
 * uses to hand out its unique id under plain mpirun (no rendezvous endpoint). Collective: every
 * rank must call it. */
DG_MODULE_EXPORT int dg_mpi_broadcast_bytes(void *buf, size_t n, int root) {
    int rc = ensure_mpi();
    if (rc) return rc;
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (root < 0 || root >= size) {
        DG_ERR(DG_EINVAL, "mpi: broadcast root %d outside MPI_COMM_WORLD of %d ranks", root, size);
        return DG_EINVAL;
    }
    if (n > INT_MAX) {
        DG_ERR(DG_EUNSUPPORTED, "mpi: broadcast of %zu bytes (limit %d)", n, INT_MAX);
        return DG_EUNSUPPORTED;
    }
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Comm comm;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int err = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (err != MPI_SUCCESS) {
        MPI_Error_string(err, msg, &len);
        DG_ERR(DG_ECOMM, "mpi: MPI_Comm_dup failed on rank %d of %d: %s", rank, size, msg);
        return DG_ECOMM;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    err = MPI_Bcast(buf, (int)n, MPI_BYTE, root, comm);
    MPI_Comm_free(&comm);
    if (err != MPI_SUCCESS) {
        MPI_Error_string(err, msg, &len);
        DG_ERR(DG_ECOMM, "mpi: MPI_Bcast of %zu bytes from rank %d failed on rank %d of %d: %s", n, root, rank, size, msg);
        return DG_ECOMM;
    }
    return 0;
}

DG_MODULE_EXPORT int dg_comm_mpi_make(dg_comm *c, const dg_dist_env *env) {
    int rc = ensure_mpi();
    if (rc) return rc;
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != env->rank || size != env->world_size) {
        DG_ERR(DG_EINVAL, "mpi: MPI says rank %d of %d but the environment says rank %d of %d (mixed launchers?)",
               rank, size, env->rank, env->world_size);
        return DG_EINVAL;
    }
    mpi_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "mpi: out of memory"); return DG_ENOMEM; }
    for (int k = 0; k < DG_COMM_MAX_NUM; k++)
        s->ch[k] = (mpi_channel){ .comm = MPI_COMM_NULL, .node_reduce = MPI_COMM_NULL, .node_bcast = MPI_COMM_NULL,
                                  .leaders = MPI_COMM_NULL };
    c->impl = s;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int k = 0; k < c->comm_num && !rc; k++) {
        int err = MPI_Comm_dup(MPI_COMM_WORLD, &s->ch[k].comm);
        if (err != MPI_SUCCESS) { rc = dg_mpi_fail(err, "MPI_Comm_dup", c); break; }
        s->n = k + 1;
        MPI_Comm_set_errhandler(s->ch[k].comm, MPI_ERRORS_RETURN);
        if (c->hierarchical) rc = dg_mpi_hier_make(c, &s->ch[k], k == 0);
    }
    s->user = (mpi_channel){ .comm = MPI_COMM_NULL, .node_reduce = MPI_COMM_NULL, .node_bcast = MPI_COMM_NULL,
                             .leaders = MPI_COMM_NULL };
    if (!rc && c->hierarchical) {   /* the program's own collectives' channel (DG_COMM_CH_USER) */
        int err = MPI_Comm_dup(MPI_COMM_WORLD, &s->user.comm);
        if (err != MPI_SUCCESS) rc = dg_mpi_fail(err, "MPI_Comm_dup", c);
        else {
            s->has_user = true;
            MPI_Comm_set_errhandler(s->user.comm, MPI_ERRORS_RETURN);
            rc = dg_mpi_hier_make(c, &s->user, false);
        }
    }
    if (rc) { mpi_destroy(c); return rc; }
    c->be = &mpi_backend;
    return 0;
}
