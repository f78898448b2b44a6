/* dist/reducer.c — the gradient reducer behind DataParallel: parameters grouped into
 * dtype-uniform buckets in reverse order (the order backward produces gradients; the first
 * bucket small so communication starts early), each bucket a persistent flat buffer on the
 * parameters' device. A step packs every bucket's gradients into its buffer, sums it over the
 * ranks and unpacks it back into the gradients. A transport that takes host buffers (MPI, not
 * CUDA-aware here) never sees GPU memory: a GPU bucket is downloaded into a persistent pinned
 * host buffer after packing, reduced there and uploaded back before unpacking.
 *
 * With overlap on, grad-ready hooks pack a bucket as soon as its last gradient is final and start
 * its all-reduce, strictly in bucket order (every rank must issue the same collectives in the
 * same order), and every hook polls the ones in flight, so communication advances between
 * backward's kernels on the rank's own thread; apply then finishes what is left and unpacks.
 * (A comm thread did this before; on a machine whose cores backward keeps busy it was seldom
 * running when its peer was, and most buckets were still pending when backward ended.) A
 * device transport (NCCL) queues every bucket on its stream in apply. With comm_num > 1 bucket k
 * goes to communicator k % comm_num (each NCCL one on its own stream). Parameters that got no
 * gradient are reported by name, or with find_unused_parameters count as zero gradients (and
 * receive the others' sum). */
#include "dist_internal.h"
#include "reducer.h"
#include <sched.h>

/* The bucket's pinned host copy, made with the bucket device's backend (ordinary memory where
 * it has no pinned allocator). */
static void *stage_alloc(const dg_bucket *b, size_t nb) {
    uint64_t errs = dg_error_count();
    void *p = dg_pinned_alloc(nb ? nb : 1, NULL);
    if (!p && !dg_error_since(errs)) DG_ERR(DG_ENOMEM, "data_parallel: %zu bytes of pinned host memory for a bucket", nb);
    return p;
}
static void stage_free(const dg_bucket *b) {
    if (b->stage) dg_pinned_free(b->stage, NULL);
}

static size_t bucket_bytes(const dg_bucket *b) { return (size_t)b->numel * dg_dtype_size(b->dtype); }

static void bucket_free(dg_bucket *b) {
    stage_free(b);
    free(b->params);
    free(b->offsets);
    dg_tensor_free(b->flat);
}

static void finish_pending(dg_reducer *r);

void dg_reducer_free(dg_reducer *r) {
    if (!r) return;
    finish_pending(r);   /* no request may outlive its buffer */
    for (int i = 0; i < r->np; i++) dg_clear_grad_hooks(r->params[i]);
    for (int b = 0; b < r->nb; b++)
        if (!r->abandoned || r->buckets[b].state != DG_BUCKET_REDUCING) bucket_free(&r->buckets[b]);
    free(r->buckets);
    free(r->bucket_of);
    free(r->ready);
    free(r->params);
    for (int i = 0; i < r->np; i++) free(r->names[i]);
    free(r->names);
    free(r);
}

/* ---- packing ---- */
/* Copies parameter k's gradient (zeros when it has none) into the bucket's flat buffer. */
static int pack_one(dg_reducer *r, dg_bucket *b, int k) {
    dg_tensor *p = r->params[b->params[k]], *g = dg_grad(p);
    int64_t n = dg_numel(p);
    dg_tensor *dst = dg_reshape(dg_slice(b->flat, 0, b->offsets[k], b->offsets[k] + n, 1), dg_shape_of(p));
    if (!dst) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    return g ? dg_copy_(dst, g) : dg_fill_(dst, 0.0);
}

static int pack_bucket(dg_reducer *r, dg_bucket *b) {
    int rc = 0;
    uint64_t t0 = dg_profiler_span_begin();
    dg_no_grad_begin();
    dg_scope *sc = dg_scope_begin();
    for (int k = 0; k < b->n && !rc; k++) rc = pack_one(r, b, k);
    dg_scope_end(sc);
    dg_no_grad_end();
    /* a host transport reads the buffer as soon as its all-reduce starts: the packed bucket goes
     * to its pinned copy now (the download waits for the packing kernels and for itself) */
    if (!rc && b->stage) rc = dg_to_host(b->flat, b->stage, bucket_bytes(b));
    dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "bucket.pack", (int64_t)bucket_bytes(b), b - r->buckets);
    return rc;
}

/* Flat buffer back into the gradients; a parameter without one gets the buffer's slice. A
 * staged bucket's sum is uploaded first (queued before the unpacking copies on the same stream). */
static int unpack_bucket(dg_reducer *r, dg_bucket *b) {
    uint64_t t0 = dg_profiler_span_begin();
    int rc = b->stage ? dg_copy_from_host(b->flat, b->stage, bucket_bytes(b)) : 0;
    if (rc) return rc;
    dg_no_grad_begin();
    dg_scope *sc = dg_scope_begin();
    for (int k = 0; k < b->n && !rc; k++) {
        dg_tensor *p = r->params[b->params[k]];
        int64_t n = dg_numel(p);
        dg_tensor *src = dg_reshape(dg_slice(b->flat, 0, b->offsets[k], b->offsets[k] + n, 1), dg_shape_of(p));
        if (!src) { rc = dg_last_status() ? dg_last_status() : DG_ENOMEM; break; }
        rc = dg_set_grad(p, src);
    }
    dg_scope_end(sc);
    dg_no_grad_end();
    dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "bucket.unpack", (int64_t)bucket_bytes(b), b - r->buckets);
    return rc;
}

/* A bucket's all-reduce in flight, from its start to the poll that saw it complete, on a
 * profiler row of its own: it overlaps backward's ops on the rank's thread. */
static void prof_bucket_done(dg_reducer *r, dg_bucket *b) {
    if (!b->prof_t0) return;
    char track[48];
    snprintf(track, sizeof track, "DataParallel bucket %d", (int)(b - r->buckets));
    dg_profiler_span_end_on(track, b->prof_t0, DG_PROFILER_COLLECTIVE, "all_reduce bucket", (int64_t)bucket_bytes(b),
                            b - r->buckets);
    b->prof_t0 = 0;
}

/* ---- overlap: starting buckets in order, polling them ---- */
static bool can_start(const dg_reducer *r) { return r->comm->be->start_all_reduce && r->comm->be->poll; }

/* Keeps the first error of the step (its message too) for apply to report: a hook that fails
 * inside dg_backward cannot return it, and later buckets may fail too. */
static void fail(dg_reducer *r, int rc) {
    if (!rc || r->error) return;
    r->error = rc;
    snprintf(r->error_msg, sizeof r->error_msg, "%s", dg_last_error());
}

/* Bucket k's communicator: with comm_num > 1 the buckets take them in turn (Paddle's
 * nccl_comm_num), so that on NCCL neighbouring buckets run on different streams at once. */
static int channel(const dg_reducer *r, int k) { return k % r->comm->comm_num; }

/* What the watchdog's heartbeat says this rank is doing (dist/watchdog.c). */
static void note_bucket(dg_reducer *r, int k) {
    dg_comm_progress(r->comm, "data_parallel step %lld, all-reduce of bucket %d of %d (%lld values)", (long long)r->steps + 1, k,
                     r->nb, (long long)r->buckets[k].numel);
}

/* Starts every packed bucket from next_launch on, stopping at the first not packed yet. */
static void start_ready(dg_reducer *r) {
    while (!r->error && r->next_launch < r->nb && r->buckets[r->next_launch].state == DG_BUCKET_PACKED) {
        dg_bucket *b = &r->buckets[r->next_launch];
        note_bucket(r, r->next_launch);
        b->prof_t0 = dg_profiler_span_begin();
        int rc = dg_comm_start_all_reduce_raw(r->comm, channel(r, r->next_launch), b->host, b->numel, b->dtype, &b->pending);
        if (rc) { b->prof_t0 = 0; fail(r, rc); break; }
        b->state = DG_BUCKET_REDUCING;
        r->next_launch++;
    }
}

/* One poll of every bucket in flight; true when none is left. */
static bool poll_all(dg_reducer *r) {
    bool all = true;
    for (int k = 0; k < r->next_launch; k++) {
        dg_bucket *b = &r->buckets[k];
        if (b->state != DG_BUCKET_REDUCING) continue;
        bool done = false;
        int rc = dg_comm_poll_raw(r->comm, b->pending, &done);
        if (done) { b->state = DG_BUCKET_DONE; b->pending = NULL; prof_bucket_done(r, b); }
        else all = false;
        if (rc) fail(r, rc);
    }
    return all;
}

/* The error for a step on a communicator abandoned after a timeout (buckets of an earlier step may
 * still be posted into their buffers, which must not be packed again). */
static int abandoned_error(const dg_reducer *r) {
    DG_ERR(DG_ECOMM, "data_parallel: rank %d of %d: the communicator was abandoned after a collective timed out; end the "
           "program", r->comm->rank, r->comm->size);
    return DG_ECOMM;
}

/* Completes whatever is in flight (apply, errors, free): a request must not outlive its buffer.
 * Touches the communicator only when something is in flight. Requests that outlived the timeout
 * once are not waited for again: they wait for a rank that stopped, and every later wait (the
 * step's reset, dg_reducer_free) used to last the whole timeout too, so the error came at twice
 * the timeout. The same holds when another collective abandoned the communicator. */
static void finish_pending(dg_reducer *r) {
    if (r->abandoned) return;
    bool any = false;
    for (int k = 0; r->buckets && k < r->next_launch && !any; k++) any = r->buckets[k].state == DG_BUCKET_REDUCING;
    if (!any) return;
    if (r->comm->abandoned) {
        r->abandoned = true;
        fail(r, abandoned_error(r));
        return;
    }
    dg_peer_wait w = dg_peer_wait_begin();
    while (!poll_all(r)) {
        if (dg_peer_wait_pause(&w, r->comm->timeout_s)) continue;
        int k = 0;
        while (k < r->next_launch && r->buckets[k].state != DG_BUCKET_REDUCING) k++;
        char detail[96];
        snprintf(detail, sizeof detail, " of bucket %d of %d (%lld values)", k, r->nb, (long long)r->buckets[k].numel);
        fail(r, dg_comm_timed_out(r->comm, "data_parallel", "the all-reduce", detail, false));
        /* the requests still posted write into the buckets' buffers: those stay allocated */
        r->abandoned = true;
        return;
    }
}

static void grad_ready(dg_tensor *leaf, void *user) {
    dg_reducer *r = user;
    if (r->no_sync || r->error || r->abandoned) return;
    int i = 0;
    while (i < r->np && r->params[i] != leaf) i++;
    if (i == r->np || r->ready[i]) return;
    r->ready[i] = true;
    dg_bucket *b = &r->buckets[r->bucket_of[i]];
    if (++b->nready == b->n) {
        int rc = pack_bucket(r, b);
        b->state = rc ? DG_BUCKET_DONE : DG_BUCKET_PACKED;
        if (rc) fail(r, rc);
    }
    if (can_start(r)) {
        start_ready(r);
        poll_all(r);
    }
}

/* ---- construction ---- */
dg_reducer *dg_reducer_new(dg_comm *comm, dg_tensor *const *params, char *const *names, int np, dg_dp_params p) {
    dg_reducer *r = calloc(1, sizeof *r);
    DG_CHECK(r, "data_parallel: out of memory");
    r->comm = comm;
    r->np = np;
    r->p = p;
    r->params = malloc(sizeof *r->params * (size_t)(np ? np : 1));
    r->names = calloc((size_t)(np ? np : 1), sizeof *r->names);
    r->bucket_of = malloc(sizeof *r->bucket_of * (size_t)(np ? np : 1));
    r->ready = calloc((size_t)(np ? np : 1), sizeof *r->ready);
    r->buckets = calloc((size_t)(np ? np : 1), sizeof *r->buckets);
    if (!r->params || !r->names || !r->bucket_of || !r->ready || !r->buckets) { dg_reducer_free(r); DG_ERR(DG_ENOMEM, "data_parallel: out of memory"); return NULL; }
    for (int i = 0; i < np; i++) {
        r->params[i] = params[i];
        r->names[i] = strdup(names[i] ? names[i] : "?");
    }
    double cap = p.bucket_mb * 1048576.0;          /* checked > 0 by dg_data_parallel */
    double first = p.first_bucket_mb * 1048576.0;
    /* reverse order; a bucket closes when full or when the dtype or device changes */
    for (int i = np - 1; i >= 0; i--) {
        dg_tensor *t = params[i];
        dg_bucket *b = r->nb ? &r->buckets[r->nb - 1] : NULL;
        double limit = r->nb == 1 ? first : cap;   /* the current bucket is index nb-1 */
        dg_dtype dt = dg_dtype_of(t);
        dg_device dev = dg_device_of(t);
        size_t es = dg_dtype_size(dt);
        bool fits = b && b->dtype == dt && b->device.type == dev.type && b->device.index == dev.index &&
                    (double)(b->numel + dg_numel(t)) * (double)es <= limit;
        if (!fits) {
            b = &r->buckets[r->nb++];
            b->dtype = dt;
            b->device = dev;
            b->params = malloc(sizeof *b->params * (size_t)np);
            b->offsets = malloc(sizeof *b->offsets * (size_t)np);
            if (!b->params || !b->offsets) { dg_reducer_free(r); DG_ERR(DG_ENOMEM, "data_parallel: out of memory"); return NULL; }
        }
        b->params[b->n] = i;
        b->offsets[b->n] = b->numel;
        b->n++;
        b->numel += dg_numel(t);
        r->bucket_of[i] = r->nb - 1;
    }
    for (int k = 0; k < r->nb; k++) {
        dg_bucket *b = &r->buckets[k];
        b->flat = dg_empty_on(DG_SHAPE(b->numel), b->dtype, b->device);
        if (!b->flat) { dg_reducer_free(r); return NULL; }
        b->host = dg_tensor_ptr(b->flat);
        /* a GPU bucket on a host transport: reduced in a pinned host copy (CPU buckets, and
         * device transports such as NCCL, use flat itself) */
        if (comm->size > 1 && !comm->be->device_buffers && b->device.type != DG_CPU) {
            if (!(b->stage = stage_alloc(b, bucket_bytes(b)))) { dg_reducer_free(r); return NULL; }
            b->host = b->stage;
        }
    }
    if (p.overlap && comm->size > 1)
        for (int i = 0; i < np; i++)
            if (dg_register_grad_hook(params[i], grad_ready, r) != 0) { dg_reducer_free(r); return NULL; }
    return r;
}

int dg_reducer_num_buckets(const dg_reducer *r) { return r ? r->nb : 0; }

/* ---- the step ---- */
static void reset(dg_reducer *r) {
    finish_pending(r);
    for (int i = 0; i < r->np; i++) r->ready[i] = false;
    /* an abandoned bucket stays REDUCING: its request may still write into it, so
     * dg_reducer_free keeps its buffers */
    for (int k = 0; k < r->nb; k++) {
        r->buckets[k].nready = 0;
        if (!r->abandoned || r->buckets[k].state != DG_BUCKET_REDUCING) r->buckets[k].state = DG_BUCKET_IDLE;
    }
    r->next_launch = 0;
    r->error = 0;
    r->error_msg[0] = 0;
    r->steps++;
}

static int check_unused(dg_reducer *r) {
    if (r->p.find_unused_parameters) return 0;
    for (int i = 0; i < r->np; i++)
        if (!dg_grad(r->params[i])) {
            DG_ERR(DG_ESTATE, "data_parallel: parameter '%s' got no gradient in this backward pass on rank %d; "
                   "every rank must reduce the same gradients (set find_unused_parameters if parts of the model "
                   "are skipped on purpose)", r->names[i], r->comm->rank);
            return DG_ESTATE;
        }
    return 0;
}

/* After a blocking all-reduce of this step failed on a communicator now abandoned: the request that
 * timed out (MPI cannot cancel it) or the collectives queued with it may still write into their
 * buckets, so every bucket is kept as in flight (dg_reducer_free keeps its buffers) and later
 * steps fail at once instead of packing into them. */
static void abandon_buckets(dg_reducer *r) {
    r->abandoned = true;
    for (int k = 0; k < r->nb; k++) r->buckets[k].state = DG_BUCKET_REDUCING;
}

int dg_reducer_apply(dg_reducer *r) {
    int rc = 0;
    if (r->no_sync) return 0;
    if (r->abandoned) return abandoned_error(r);   /* nothing packed into buffers still posted */
    if (r->comm->size == 1) {       /* nothing to sum, but unused parameters are still an error */
        rc = check_unused(r);
        reset(r);
        return rc;
    }
    if (!r->p.overlap) {
        if ((rc = check_unused(r))) { reset(r); return rc; }
        for (int k = 0; k < r->nb && !rc; k++) {
            dg_bucket *b = &r->buckets[k];
            rc = pack_bucket(r, b);
            if (!rc) note_bucket(r, k);
            uint64_t t0 = dg_profiler_span_begin();
            if (!rc) rc = dg_comm_all_reduce_raw(r->comm, channel(r, k), b->host, b->numel, b->dtype, DG_COMM_SUM);
            dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "all_reduce bucket", (int64_t)bucket_bytes(b), k);
        }
        if (!rc && r->comm->be->wait) rc = r->comm->be->wait(r->comm);
        if (rc && r->comm->abandoned) abandon_buckets(r);
        for (int k = 0; k < r->nb && !rc; k++) rc = unpack_bucket(r, &r->buckets[k]);
        reset(r);
        return rc;
    }
    /* overlap: an error a hook met comes first; then buckets whose gradients never all arrived
     * (unused parameters) are packed now */
    if (!r->error) fail(r, check_unused(r));
    for (int k = 0; k < r->nb && !r->error; k++) {
        dg_bucket *b = &r->buckets[k];
        if (b->state != DG_BUCKET_IDLE) continue;
        int prc = pack_bucket(r, b);
        b->state = prc ? DG_BUCKET_DONE : DG_BUCKET_PACKED;
        fail(r, prc);
    }
    if (can_start(r)) start_ready(r);
    finish_pending(r);   /* before the error is raised: polling may record one */
    if (r->error) {
        rc = r->error;
        const char *file = __FILE__;
        int line = __LINE__;
        dg_error_split_location(r->error_msg, &file, &line);
        dg_set_error_at(rc, file, line, "%s", r->error_msg);
        reset(r);
        return rc;
    }
    if (!can_start(r)) {
        /* a transport without non-blocking collectives (device transports queue on their
         * stream): every bucket in order now; the others were started and finished above */
        for (int k = 0; k < r->nb && !rc; k++) {
            note_bucket(r, k);
            uint64_t t0 = dg_profiler_span_begin();
            rc = dg_comm_all_reduce_raw(r->comm, channel(r, k), r->buckets[k].host, r->buckets[k].numel, r->buckets[k].dtype,
                                        DG_COMM_SUM);
            dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "all_reduce bucket", (int64_t)bucket_bytes(&r->buckets[k]), k);
        }
        if (!rc && r->comm->be->wait) rc = r->comm->be->wait(r->comm);
        if (rc && r->comm->abandoned) abandon_buckets(r);
    }
    for (int k = 0; k < r->nb && !rc; k++) rc = unpack_bucket(r, &r->buckets[k]);
    reset(r);
    return rc;
}
