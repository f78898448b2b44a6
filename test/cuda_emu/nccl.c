/* test/cuda_emu/nccl.c — the emulated NCCL library: communicators whose ranks are separate
 * processes (one emulated GPU each) exchanging through POSIX shared memory, collectives queued
 * on streams of the emulated runtime, NCCL's non-blocking mode, abort and finalize. Written from
 * NCCL's documentation; what it emulates is the API's contract, not NCCL's algorithms.
 *
 * Shared memory. ncclGetUniqueId puts random bytes and the creator's pid in the id; every rank
 * derives the segment's name from them (/dev/shm/dgemu-nccl-<pid>-<random>). The first rank to
 * arrive creates the segment, the others open it. Once every rank has joined, the name is
 * unlinked (the mappings stay), so no file outlives the job even when ranks crash; destroy and
 * abort unlink it too when some rank never came. The segment holds a header (rank count, abort
 * flag and reason), a record per rank (steps posted and consumed, joined/left flags, pid) and a
 * slot per rank through which data passes.
 *
 * Collectives. Each is split into chunks of at most a slot; chunk k of the communicator's
 * history is "step" k (numbered across operations: every rank issues the same operations in the
 * same order with the same counts, so the numbers agree, and each slot's header names the
 * operation so that a mismatch is reported rather than computed). Per step a rank waits until
 * every rank has consumed the previous step (its slot may then be overwritten), copies its part
 * into its slot, publishes "posted = step", waits until every rank has posted, computes its
 * result from the slots in rank order 0..n-1 (so every rank gets the same bits) into the device
 * buffer and publishes "consumed = step". The work queued on the stream does this without
 * blocking: it spins briefly (yielding the core) and otherwise returns DGEMU_AGAIN for the runtime
 * to call it again later; the step it has reached is kept in the operation.
 *
 * Failure. A rank that aborts sets the segment's abort flag with a reason; a rank waiting for a
 * peer checks that flag, the peer's "left" flag (its communicator is gone) and whether the peer
 * process is alive (each rank holds an open-file-description lock on a byte of the segment
 * while it is attached; the lock vanishes with the process, zombie or not). Any of these ends the
 * waiting collective with ncclRemoteError in the communicator's async error instead of a hang.
 * Operations queued on this rank after ncclCommAbort end with ncclSystemError. */
#include "nccl_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* Queued work                                                                                */
/* ------------------------------------------------------------------------------------------ */

static int op_end(op_t *o) {
    o->finished = true;
    atomic_fetch_sub(&o->c->pending, 1);
    atomic_fetch_add_explicit(&o->c->exec_seq, 1, memory_order_release);
    return DGEMU_DONE;
}

/* Whether every peer's slot holds this operation (same sequence number, kind, type, count, op,
 * root); otherwise the ranks issued different collectives, which is reported. */
static bool slots_match(op_t *o, uint64_t step) {
    ncclComm_t c = o->c;
    for (int q = 0; q < c->nranks; q++) {
        const slot_hdr *s = slot_of(c, q);
        if (s->step == step && s->seq == o->seq && s->kind == o->kind && s->dtype == (int)o->dt && s->count == o->count &&
            ((o->kind != K_ALLREDUCE && o->kind != K_REDUCE) || s->redop == (int)o->red) &&
            ((o->kind != K_BROADCAST && o->kind != K_REDUCE) || s->root == o->root))
            continue;
        comm_fail(c, ncclInvalidUsage, "rank %d of %d: collective #%llu does not match across ranks: this rank called %s(count %zu, %s%s%s) "
                  "but rank %d called %s(count %llu, %s) as its collective #%llu", c->rank, c->nranks, (unsigned long long)o->seq,
                  KIND_NAME[o->kind], o->count, type_name(o->dt), o->kind == K_ALLREDUCE || o->kind == K_REDUCE ? ", " : "",
                  o->kind == K_ALLREDUCE || o->kind == K_REDUCE ? op_name(o->red) : "", q,
                  s->kind >= 0 && s->kind < K_NUM_KINDS ? KIND_NAME[s->kind] : "?",
                  (unsigned long long)s->count, type_name((ncclDataType_t)s->dtype), (unsigned long long)s->seq);
        return false;
    }
    return true;
}

/* The result of one chunk, from the slots in rank order, into the device buffer. */
static void compute_chunk(op_t *o, size_t off, size_t len) {
    ncclComm_t c = o->c;
    size_t es = o->es, nb = len * es;
    switch (o->kind) {
    case K_ALLREDUCE: {
        char *dst = o->recv + off * es;
        memcpy(dst, slot_data(c, 0), nb);
        for (int q = 1; q < c->nranks; q++) reduce_into(dst, slot_data(c, q), len, o->dt, o->red);
        if (o->red == ncclAvg) divide_by(dst, len, o->dt, c->nranks);
        break;
    }
    case K_REDUCE: {   /* as the all-reduce, on the root only: the others' recvbuff is not theirs to write */
        if (c->rank != o->root) break;
        char *dst = o->recv + off * es;
        memcpy(dst, slot_data(c, 0), nb);
        for (int q = 1; q < c->nranks; q++) reduce_into(dst, slot_data(c, q), len, o->dt, o->red);
        if (o->red == ncclAvg) divide_by(dst, len, o->dt, c->nranks);
        break;
    }
    case K_BROADCAST: memcpy(o->recv + off * es, slot_data(c, o->root), nb); break;
    case K_ALLGATHER:
        for (int q = 0; q < c->nranks; q++) memcpy(o->recv + ((size_t)q * o->count + off) * es, slot_data(c, q), nb);
        break;
    }
}

/* The work function: advances the operation as far as the peers allow, without blocking for
 * long: while peers keep up it goes on; after 300 us without progress (spinning, but yielding
 * the core) it returns DGEMU_AGAIN. Returning is not free: the runtime re-protects and
 * re-opens all device memory around each call, which costs milliseconds for large buffers, so
 * a short wait is better spent here. */
static int op_work(void *arg) {
    op_t *o = arg;
    ncclComm_t c = o->c;
    const char *what = KIND_NAME[o->kind];
    if (atomic_load(&c->aborted)) {
        comm_fail(c, ncclSystemError, "rank %d of %d: %s (collective #%llu) did not complete: the communicator was aborted "
                  "on this rank (ncclCommAbort)", c->rank, c->nranks, what, (unsigned long long)o->seq);
        return op_end(o);
    }
    if (atomic_load(&c->async_error) != ncclSuccess) return op_end(o);   /* an earlier failure: nothing runs */
    if (!atomic_load(&c->formed)) {
        pthread_mutex_lock(&c->mu);
        ncclResult_t r = init_progress(c);
        pthread_mutex_unlock(&c->mu);
        if (r == ncclInProgress) return DGEMU_AGAIN;
        if (r != ncclSuccess) return op_end(o);
    }
    /* operations run in the order they were called on this communicator, whatever their streams */
    if (atomic_load_explicit(&c->exec_seq, memory_order_acquire) != o->seq) return DGEMU_AGAIN;
    shm_head *h = c->h;
    if (!o->started) {
        o->started = true;
        o->first_step = atomic_load(&c->done_step);
        o->chunk_elems = h->slot_bytes / o->es;
        o->nchunks = (o->count + o->chunk_elems - 1) / o->chunk_elems;
    }
    shm_rank *me = &h->ranks[c->rank];
    int64_t spin_until = now_ns() + 300000;
    while (o->chunk < o->nchunks) {
        uint64_t s = o->first_step + o->chunk + 1;
        size_t off = (size_t)(o->chunk * o->chunk_elems), len = o->count - off < o->chunk_elems ? o->count - off : (size_t)o->chunk_elems;
        bool blocked = false;
        if (o->phase == 0) {
            /* the slot may be rewritten once every rank has read the previous step */
            for (int q = 0; q < c->nranks && !blocked; q++)
                blocked = atomic_load_explicit(&h->ranks[q].consumed, memory_order_acquire) < s - 1;
            if (!blocked) {
                slot_hdr *sh = slot_of(c, c->rank);
                if (o->kind != K_BROADCAST || c->rank == o->root) memcpy(slot_data(c, c->rank), o->send + off * o->es, len * o->es);
                *sh = (slot_hdr){ .step = s, .seq = o->seq, .count = o->count, .kind = o->kind, .dtype = (int)o->dt,
                                  .redop = (int)o->red, .root = o->root };
                atomic_store_explicit(&me->posted, s, memory_order_release);
                o->phase = 1;
            }
        }
        if (!blocked)
            for (int q = 0; q < c->nranks && !blocked; q++)
                blocked = atomic_load_explicit(&h->ranks[q].posted, memory_order_acquire) < s;
        if (blocked) {
            char ctx[96];
            snprintf(ctx, sizeof ctx, "%s (collective #%llu)", what, (unsigned long long)o->seq);
            if (check_peers(c, s, ctx) != ncclSuccess) return op_end(o);
            if (now_ns() > spin_until) return DGEMU_AGAIN;
            sched_yield();   /* a peer may need this core to post */
            continue;
        }
        if (o->chunk == 0 && !slots_match(o, s)) return op_end(o);
        compute_chunk(o, off, len);
        atomic_store_explicit(&me->consumed, s, memory_order_release);
        atomic_store(&c->done_step, s);
        o->phase = 0;
        o->chunk++;
        spin_until = now_ns() + 300000;
    }
    return op_end(o);
}

static void track_stream(ncclComm_t c, cudaStream_t s, int delta) {
    pthread_mutex_lock(&c->mu);
    int free_i = -1;
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (c->streams[i].n > 0 && c->streams[i].s == s) { c->streams[i].n += delta; free_i = -2; break; }
        if (c->streams[i].n == 0 && free_i == -1) free_i = i;
    }
    if (delta > 0 && free_i >= 0) { c->streams[free_i].s = s; c->streams[free_i].n = delta; }
    pthread_mutex_unlock(&c->mu);
}

/* Runs once the work is done or dropped by the runtime. */
static void op_free(void *arg) {
    op_t *o = arg;
    ncclComm_t c = o->c;
    if (!o->finished) {   /* later operations wait for this one's turn: fail them instead of hanging */
        atomic_fetch_sub(&c->pending, 1);
        comm_fail(c, ncclUnhandledCudaError, "rank %d of %d: %s (collective #%llu) was dropped by the CUDA runtime before it "
                  "completed (a sticky CUDA error?)", c->rank, c->nranks, KIND_NAME[o->kind], (unsigned long long)o->seq);
    }
    track_stream(c, o->stream, -1);
    atomic_fetch_sub(&c->inflight, 1);
    comm_release(c);
    free(o);
}

/* Gives the runtime a chance to run our queued work: the streams that hold some are queried
 * (what cudaStreamSynchronize's loop would do), on the communicator's device. */
static void drive_streams(ncclComm_t c) {
    cudaStream_t s[MAX_STREAMS];
    int n = 0;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_STREAMS; i++) if (c->streams[i].n > 0) s[n++] = c->streams[i].s;
    pthread_mutex_unlock(&c->mu);
    if (!n) return;
    int cur = dgemu_device();
    if (cur != c->device) cudaSetDevice(c->device);
    for (int i = 0; i < n; i++) (void)cudaStreamQuery(s[i]);
    if (cur != c->device) cudaSetDevice(cur);
}

/* Waits (driving our streams) until none of our work is left, an error, or the timeout. */
static bool flush(ncclComm_t c, double limit_s) {
    double deadline = now_s() + limit_s;
    for (int k = 0; atomic_load(&c->inflight) > 0; k++) {
        drive_streams(c);
        if (atomic_load(&c->inflight) == 0) break;
        if (now_s() > deadline) return false;
        if (k < 100) sched_yield(); else usleep(200);
    }
    return true;
}

static ncclResult_t enqueue(const char *api, int kind, const void *send, void *recv, size_t count, ncclDataType_t dt,
                            ncclRedOp_t red, int root, ncclComm_t c, cudaStream_t stream) {
    if (!comm_ok(c)) return note(NULL, ncclInvalidArgument, "%s: comm is NULL or not a communicator", api);
    if (atomic_load(&c->user_gone))
        return note(c, ncclInvalidUsage, "%s: the communicator was destroyed or aborted", api);
    if (atomic_load(&c->finalizing))
        return note(c, ncclInvalidUsage, "%s: the communicator is being finalized (ncclCommFinalize was called)", api);
    int e = atomic_load(&c->async_error);
    if (e != ncclSuccess) {
        char cause[512];
        pthread_mutex_lock(&g_msg_mu);
        memcpy(cause, c->async_msg, sizeof cause);
        pthread_mutex_unlock(&g_msg_mu);
        return note(c, (ncclResult_t)e, "%s: the communicator failed before (abort it): %.400s", api, cause);
    }
    size_t es = type_size(dt);
    if (!es) return note(c, ncclInvalidArgument, "%s: invalid data type %d", api, (int)dt);
    if (kind == K_ALLREDUCE || kind == K_REDUCE) {
        if ((int)red < 0 || (int)red >= ncclNumOps) return note(c, ncclInvalidArgument, "%s: invalid reduction operation %d", api, (int)red);
        if (dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2)
            return note(c, ncclInvalidArgument, "%s: reductions of %s are not emulated", api, type_name(dt));
    }
    if ((kind == K_BROADCAST || kind == K_REDUCE) && (root < 0 || root >= c->nranks))
        return note(c, ncclInvalidArgument, "%s: root %d is not a rank of this communicator of %d", api, root, c->nranks);
    if (count == 0) return ncclSuccess;   /* nothing to move: NCCL returns without launching */
    size_t mult = kind == K_ALLGATHER ? (size_t)c->nranks : 1;
    if (count > SIZE_MAX / es / mult) return note(c, ncclInvalidArgument, "%s: count %zu is too large", api, count);
    size_t in_bytes = count * es, out_bytes = count * es * mult;
    /* NCCL works on the communicator's device whatever the caller's current one is */
    int cur = dgemu_device();
    if (cur != c->device) cudaSetDevice(c->device);
    ncclResult_t r = ncclSuccess;
    bool need_send = kind != K_BROADCAST || c->rank == root;
    if (need_send && !dgemu_is_device(send, in_bytes))
        r = note(c, ncclInvalidArgument, "%s: sendbuff %p: %zu bytes from there are not device memory of device %d "
                 "(a host pointer, or an allocation too short)", api, send, in_bytes, c->device);
    else if ((kind != K_REDUCE || c->rank == root) && !dgemu_is_device(recv, out_bytes))
        r = note(c, ncclInvalidArgument, "%s: recvbuff %p: %zu bytes from there are not device memory of device %d "
                 "(a host pointer, or an allocation too short)", api, recv, out_bytes, c->device);
    op_t *o = r == ncclSuccess ? calloc(1, sizeof *o) : NULL;
    if (r == ncclSuccess && !o) r = note(c, ncclSystemError, "%s: out of host memory", api);
    if (r == ncclSuccess) {
        *o = (op_t){ .c = c, .kind = kind, .dt = dt, .red = red, .root = root, .count = count, .es = es,
                     .send = send, .recv = recv, .stream = stream };
        pthread_mutex_lock(&c->mu);
        o->seq = c->next_seq++;
        pthread_mutex_unlock(&c->mu);
        atomic_fetch_add(&c->refs, 1);
        atomic_fetch_add(&c->inflight, 1);
        atomic_fetch_add(&c->pending, 1);
        track_stream(c, stream, 1);
        cudaError_t ce = dgemu_enqueue(stream, KIND_NAME[kind], op_work, o, op_free);
        if (ce != cudaSuccess)   /* op_free has run and failed the communicator (a sequence number is lost) */
            r = note(c, ncclUnhandledCudaError, "%s: queueing on the stream failed: %s", api, cudaGetErrorString(ce));
    }
    if (cur != c->device) cudaSetDevice(cur);
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Entry points                                                                               */
/* ------------------------------------------------------------------------------------------ */

ncclResult_t ncclGetVersion(int *version) {
    DGEMU_API();
    if (!version) return note(NULL, ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
    DGEMU_API();
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

/* The communicator's last message when it has one, else the process's (NCCL keeps one per
 * process; the communicator's is the more precise here). Not cleared by reading. */
const char *ncclGetLastError(ncclComm_t comm) {
    DGEMU_API();
    if (comm_ok(comm) && comm->last_error[0]) return comm->last_error;
    return g_last_error;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    DGEMU_API();
    if (!id) return note(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    id_layout l;
    memset(id, 0, sizeof *id);
    memcpy(l.tag, ID_TAG, sizeof l.tag);
    l.pid = (int32_t)getpid();
    size_t got = 0;
    while (got < sizeof l.rnd) {
        ssize_t k = getrandom(l.rnd + got, sizeof l.rnd - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    if (got < sizeof l.rnd) {   /* no getrandom: time and address bits still make it unique enough */
        uint64_t a = (uint64_t)now_ns(), b = (uint64_t)(uintptr_t)id ^ ((uint64_t)getpid() << 32);
        memcpy(l.rnd, &a, 8);
        memcpy(l.rnd + 8, &b, 8);
    }
    memcpy(id->internal, &l, sizeof l);
    return ncclSuccess;
}

/* blocking from a config: unset means blocking, as NCCL's default */
ncclResult_t config_blocking(const char *api, ncclComm_t c, const ncclConfig_t *cfg, bool *blocking) {
    if (cfg->magic != 0xcafebeef || cfg->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
        return note(c, ncclInvalidArgument, "%s: config was not initialised with NCCL_CONFIG_INITIALIZER", api);
    if (cfg->blocking != NCCL_CONFIG_UNDEF_INT && cfg->blocking != 0 && cfg->blocking != 1)
        return note(c, ncclInvalidArgument, "%s: config.blocking is %d (0 or 1)", api, cfg->blocking);
    *blocking = cfg->blocking != 0;
    return ncclSuccess;
}

/* Rank `rank` of nranks on the segment named by (pid, rnd), on `device`. */
ncclResult_t init_named(const char *api, ncclComm_t *out, int nranks, int32_t pid, const uint8_t rnd[16], int rank,
                               bool blocking, int device) {
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return note(NULL, ncclSystemError, "%s: out of host memory", api);
    c->magic = COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->blocking = blocking;
    c->fd = -1;
    c->device = device;
    c->t_start = now_s();
    c->id_pid = pid;
    memcpy(c->id_rnd, rnd, sizeof c->id_rnd);
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->mu, NULL);
    char hex[33];
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    snprintf(c->name, sizeof c->name, "/dgemu-nccl-%d-%s", (int)pid, hex);

    pthread_mutex_lock(&c->mu);
    ncclResult_t r = init_progress(c);
    pthread_mutex_unlock(&c->mu);
    if (!blocking) {
        /* non-blocking: the caller polls ncclCommGetAsyncError; errors are reported there */
        *out = c;
        return ncclInProgress;
    }
    for (int k = 0; r == ncclInProgress; k++) {
        if (k < 200) sched_yield(); else usleep(1000);   /* a short spin, then sleeps */
        pthread_mutex_lock(&c->mu);
        r = init_progress(c);
        pthread_mutex_unlock(&c->mu);
    }
    if (r != ncclSuccess) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", c->last_error);
        comm_release(c);
        return note(NULL, r, "%s", msg);
    }
    c->state = ST_READY;
    *out = c;
    return ncclSuccess;
}

static ncclResult_t init_rank(const char *api, ncclComm_t *out, int nranks, ncclUniqueId id, int rank, const ncclConfig_t *cfg) {
    if (!out) return note(NULL, ncclInvalidArgument, "%s: comm is NULL", api);
    *out = NULL;
    if (nranks < 1) return note(NULL, ncclInvalidArgument, "%s: nranks %d is not positive", api, nranks);
    if (rank < 0 || rank >= nranks) return note(NULL, ncclInvalidArgument, "%s: rank %d is not in [0, %d)", api, rank, nranks);
    bool blocking = true;
    if (cfg) {
        ncclResult_t r = config_blocking(api, NULL, cfg, &blocking);
        if (r != ncclSuccess) return r;
    }
    id_layout l;
    memcpy(&l, id.internal, sizeof l);
    if (memcmp(l.tag, ID_TAG, sizeof l.tag) != 0)
        return note(NULL, ncclInvalidArgument, "%s: the unique id was not made by ncclGetUniqueId (or was corrupted on its way)", api);
    return init_named(api, out, nranks, l.pid, l.rnd, rank, blocking, dgemu_device());
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
    DGEMU_API();
    return init_rank("ncclCommInitRank", comm, nranks, commId, rank, NULL);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config) {
    DGEMU_API();
    return init_rank("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

/* The state of the communicator: ncclInProgress while it forms (until every rank joined, and for
 * at least the first two polls, so callers' polling loops are exercised) or while a
 * non-blocking finalize still has work queued; then ncclSuccess, or the first asynchronous error
 * (a peer that aborted or died is noticed here too while collectives are pending). */
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *asyncError) {
    DGEMU_API();
    if (!comm_ok(c)) return note(NULL, ncclInvalidArgument, "ncclCommGetAsyncError: comm is NULL or not a communicator");
    if (!asyncError) return note(c, ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    int e = atomic_load(&c->async_error);
    if (e != ncclSuccess) { *asyncError = (ncclResult_t)e; return ncclSuccess; }
    pthread_mutex_lock(&c->mu);
    if (c->state == ST_INIT) {
        ncclResult_t r = init_progress(c);
        if (r == ncclSuccess && c->init_polls >= 2) c->state = ST_READY;
        else if (r == ncclSuccess || r == ncclInProgress) { c->init_polls++; r = ncclInProgress; }
        pthread_mutex_unlock(&c->mu);
        if (r != ncclSuccess) { *asyncError = r; return ncclSuccess; }
    } else pthread_mutex_unlock(&c->mu);
    if (atomic_load(&c->finalizing)) {
        if (atomic_load(&c->inflight) > 0) drive_streams(c);
        if (atomic_load(&c->inflight) > 0) { *asyncError = ncclInProgress; return ncclSuccess; }
    } else if (c->h && c->header_ok) {
        if (atomic_load(&c->pending) > 0) check_peers(c, atomic_load(&c->done_step) + 1, "a queued collective");
        else check_abort_flag(c);
    }
    *asyncError = (ncclResult_t)atomic_load(&c->async_error);
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
    DGEMU_API();
    if (!comm_ok(c)) return note(NULL, ncclInvalidArgument, "ncclCommFinalize: comm is NULL or not a communicator");
    if (atomic_load(&c->user_gone)) return note(c, ncclInvalidUsage, "ncclCommFinalize: the communicator was destroyed or aborted");
    if (atomic_exchange(&c->finalizing, 1)) return note(c, ncclInvalidUsage, "ncclCommFinalize: called twice");
    if (!c->blocking) return ncclInProgress;   /* ncclCommGetAsyncError says when the queued work is done */
    if (!flush(c, timeout_s()))
        return comm_fail(c, ncclSystemError, "ncclCommFinalize: rank %d of %d still has %d collectives queued after %.0f s",
                         c->rank, c->nranks, atomic_load(&c->inflight), timeout_s());
    return (ncclResult_t)atomic_load(&c->async_error);
}

/* Publishes this rank's abort so peers waiting on it fail instead of hanging. */
static void publish_abort(ncclComm_t c, const char *why) {
    pthread_mutex_lock(&c->mu);
    if (c->h && c->header_ok) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&c->h->aborted, &expect, ABORT_WRITING)) {
            c->h->abort_rank = c->rank;
            snprintf(c->h->abort_reason, sizeof c->h->abort_reason, "%s", why);
            atomic_store_explicit(&c->h->aborted, 1, memory_order_release);
        }
        unlink_once(c);
    }
    pthread_mutex_unlock(&c->mu);
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    DGEMU_API();
    if (!c) return ncclSuccess;
    if (!comm_ok(c)) return note(NULL, ncclInvalidArgument, "ncclCommDestroy: comm is not a communicator");
    if (atomic_exchange(&c->user_gone, 1)) return note(c, ncclInvalidUsage, "ncclCommDestroy: the communicator was already destroyed or aborted");
    /* destroy without finalize finalizes (NCCL: flushes the queued work) */
    if (!flush(c, timeout_s())) {
        char why[160];
        snprintf(why, sizeof why, "rank %d destroyed it with %d collectives still pending after %.0f s", c->rank,
                 atomic_load(&c->inflight), timeout_s());
        note(c, ncclSystemError, "ncclCommDestroy: %s", why);
        atomic_store(&c->aborted, 1);
        publish_abort(c, why);
    }
    comm_release(c);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
    DGEMU_API();
    if (!c) return ncclSuccess;
    if (!comm_ok(c)) return note(NULL, ncclInvalidArgument, "ncclCommAbort: comm is not a communicator");
    if (atomic_exchange(&c->user_gone, 1)) return note(c, ncclInvalidUsage, "ncclCommAbort: the communicator was already destroyed or aborted");
    atomic_store(&c->aborted, 1);
    /* the peers learn why: an abort after an error passes that error on */
    char why[448];
    pthread_mutex_lock(&g_msg_mu);
    if (atomic_load(&c->async_error) != ncclSuccess && c->async_msg[0])
        snprintf(why, sizeof why, "rank %d called ncclCommAbort after: %.400s", c->rank, c->async_msg);
    else snprintf(why, sizeof why, "rank %d called ncclCommAbort", c->rank);
    pthread_mutex_unlock(&g_msg_mu);
    publish_abort(c, why);
    /* queued operations keep the memory alive; they end with an error when the runtime runs them */
    comm_release(c);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t c, int *count) {
    DGEMU_API();
    if (!comm_ok(c) || !count) return note(NULL, ncclInvalidArgument, "ncclCommCount: %s is NULL", count ? "comm" : "count");
    *count = c->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *device) {
    DGEMU_API();
    if (!comm_ok(c) || !device) return note(NULL, ncclInvalidArgument, "ncclCommCuDevice: %s is NULL", device ? "comm" : "device");
    *device = c->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t c, int *rank) {
    DGEMU_API();
    if (!comm_ok(c) || !rank) return note(NULL, ncclInvalidArgument, "ncclCommUserRank: %s is NULL", rank ? "comm" : "rank");
    *rank = c->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    DGEMU_API();
    return enqueue("ncclAllReduce", K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
    DGEMU_API();
    return enqueue("ncclReduce", K_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    DGEMU_API();
    return enqueue("ncclBroadcast", K_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    DGEMU_API();
    return enqueue("ncclAllGather", K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}

