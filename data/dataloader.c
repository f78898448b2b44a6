/* data/dataloader.c — collate and the DataLoader.
 *
 * An epoch's batches are snapshotted from the batch sampler at start_epoch. With num_workers > 0,
 * worker threads claim whole batches in order (batch b only while b < next + slots, so at most
 * `num_workers * prefetch_factor` batches are in flight or waiting), make each sample with the seed
 * dg_sample_seed(seed, epoch, index), collate, and park the batch in slot b % slots; the caller
 * takes slot `next` when it holds batch `next`, so batches arrive in sampler order whatever the
 * timing. A failed batch parks its status and message instead; workers stop claiming, the
 * caller reaches it in order and re-raises the message on its own thread (error messages are
 * thread-local). Worker tensors belong to no scope; dg_dataloader_next registers the batch with
 * the caller's innermost scope (dg_scope_adopt). With num_workers = 0 the same batch function
 * runs on the caller's thread, so messages and bytes are the same. */
#include "data_util.h"
#include <pthread.h>
#include <stdint.h>

typedef struct host_hooks {
    void *(*alloc)(size_t bytes, void *user);
    void (*free)(void *p, void *user);
    void *user;
} host_hooks;

/* ---- collated tensors in host_alloc memory ----
 * host_alloc's block is given to dg_from_blob with a deleter that hands it back, so every
 * kernel treats the batch as an ordinary CPU tensor. The data starts at the block's first
 * 64-byte boundary (the kernels' alignment); the deleter gets the block's own address back from
 * the word just before the data. */
#define HOOK_PAD 64
typedef struct hook_ctx { void (*free)(void *p, void *user); void *user; } hook_ctx;

static void hook_delete(void *data, void *ctx_) {
    hook_ctx *ctx = ctx_;
    void *base = ((void **)data)[-1];
    ctx->free(base, ctx->user);
    free(ctx);
}

static dg_tensor *hooked_tensor(const int64_t *shape, int ndim, dg_dtype dt, const host_hooks *hk) {
    size_t nbytes = (size_t)dg_data_numel(shape, ndim) * dg_dtype_size(dt);
    hook_ctx *ctx = malloc(sizeof *ctx);
    void *base = ctx ? hk->alloc(nbytes + HOOK_PAD, hk->user) : NULL;
    if (!base) { free(ctx); DG_ERR(DG_ENOMEM, "dataloader: host_alloc(%zu) returned NULL", nbytes + HOOK_PAD); return NULL; }
    ctx->free = hk->free;
    ctx->user = hk->user;
    void *data = (void *)(((uintptr_t)base + sizeof(void *) + 63) & ~(uintptr_t)63);
    ((void **)data)[-1] = base;
    dg_tensor *t = dg_from_blob(data, dg_make_shape(ndim, shape), dt, dg_cpu(), hook_delete, ctx);
    if (!t) { hk->free(base, hk->user); free(ctx); }
    return t;
}

/* ---- collate ---- */
static const char *sample_label(char *buf, size_t len, int64_t k, const int64_t *idx) {
    if (idx) snprintf(buf, len, "sample %lld (index %lld)", (long long)k, (long long)idx[k]);
    else snprintf(buf, len, "sample %lld", (long long)k);
    return buf;
}

static int collate_impl(const dg_sample *s, int64_t n, const int64_t *idx, dg_sample *out, const host_hooks *hk) {
    memset(out, 0, sizeof *out);
    DG_CHECK_INT(s && n >= 1, "collate: %s", s ? "no samples" : "samples is NULL");
    int nf = s[0].n;
    char la[64], lb[64], sa[96], sb[96];
    DG_CHECK_INT(nf >= 1 && nf <= DG_MAX_SAMPLE_FIELDS, "collate: %s has %d fields", sample_label(la, sizeof la, 0, idx), nf);
    for (int64_t k = 0; k < n; k++) {
        DG_CHECK_INT(s[k].n == nf, "collate: %s has %d fields but %s has %d", sample_label(la, sizeof la, k, idx), s[k].n,
                     sample_label(lb, sizeof lb, 0, idx), nf);
        for (int f = 0; f < nf; f++) {
            const dg_tensor *a = s[k].t[f], *b = s[0].t[f];
            char what[96];
            snprintf(what, sizeof what, "%s field %d", sample_label(la, sizeof la, k, idx), f);
            int bad = dg_tensor_check("collate", what, a);
            if (bad) return bad;
            dg_shape sa_ = dg_shape_of(a), sb_ = dg_shape_of(b);
            bool same = sa_.ndim == sb_.ndim && dg_dtype_of(a) == dg_dtype_of(b);
            for (int d = 0; same && d < sa_.ndim; d++) same = sa_.d[d] == sb_.d[d];
            DG_CHECK_INT(same, "collate: %s field %d is %s %s but %s is %s %s", sample_label(la, sizeof la, k, idx), f,
                         dg_dtype_name(dg_dtype_of(a)), dg_shape_str(a, sa, sizeof sa), sample_label(lb, sizeof lb, 0, idx),
                         dg_dtype_name(dg_dtype_of(b)), dg_shape_str(b, sb, sizeof sb));
        }
    }
    for (int f = 0; f < nf; f++) {
        const dg_tensor *t0 = s[0].t[f];
        dg_shape s0 = dg_shape_of(t0);
        dg_dtype dt0 = dg_dtype_of(t0);
        DG_CHECK_INT(s0.ndim < DG_MAX_DIMS, "collate: field %d already has %d dims (at most %d after stacking)", f, s0.ndim, DG_MAX_DIMS);
        int64_t shape[DG_MAX_DIMS];
        shape[0] = n;
        memcpy(shape + 1, s0.d, sizeof(int64_t) * (size_t)s0.ndim);
        dg_tensor *y = hk && hk->alloc ? hooked_tensor(shape, s0.ndim + 1, dt0, hk) : dg_data_cpu_tensor(shape, s0.ndim + 1, dt0);
        int rc = y ? 0 : DG_ENOMEM;
        size_t each = (size_t)dg_numel(t0) * dg_dtype_size(dt0);
        char *dst = y ? dg_tensor_ptr(y) : NULL;
        for (int64_t k = 0; !rc && k < n; k++) {
            const dg_tensor *a = s[k].t[f];
            if (dg_is_contiguous(a) && dg_device_of(a).type == DG_CPU) { if (each) memcpy(dst + (size_t)k * each, dg_tensor_ptr(a), each); }
            else rc = dg_to_host(a, dst + (size_t)k * each, each);
        }
        if (rc) {
            dg_tensor_free(y);
            for (int g = 0; g < f; g++) dg_tensor_free(out->t[g]);
            memset(out, 0, sizeof *out);
            return rc;
        }
        out->t[f] = y;
    }
    out->n = nf;
    return 0;
}

int dg_collate(const dg_sample *samples, int64_t n, dg_sample *batch) {
    DG_CHECK_INT(batch, "collate: batch is NULL");
    return collate_impl(samples, n, NULL, batch, NULL);
}


/* ---- the loader ---- */
typedef struct slot {
    int64_t b;
    int state;                 /* SLOT_EMPTY, SLOT_READY, SLOT_FAILED */
    dg_sample batch;
    int status;
    char msg[1024];
} slot;
enum { SLOT_EMPTY = 0, SLOT_READY, SLOT_FAILED };
#define BATCH_STOPPED 1        /* make_batch gave up because the epoch is being stopped */

struct dg_dataloader {
    dg_dataset *ds;
    dg_batch_sampler *sampler;
    bool own_sampler;
    dg_collate_fn collate;     /* the user's, or NULL: collate_impl */
    void *collate_user;
    int nw;
    uint64_t seed;
    host_hooks hooks;
    /* the epoch */
    bool started, failed;
    int64_t epoch;
    int64_t nb, *boff, *bidx;  /* batch b: bidx[boff[b] .. boff[b+1]) */
    int64_t next;              /* next batch to hand out (written under mu) */
    /* workers */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, ready_cv;
    pthread_t *th;
    int nth;
    int64_t claim;             /* next batch to claim */
    int stop;                  /* read without the lock between samples (atomic) */
    bool halt;                 /* a batch failed: claim no more */
    slot *slots;
    int nslots;
};

/* The user's collate hook, and checks of what it made: 1..DG_MAX_SAMPLE_FIELDS live tensors,
 * none of them a sample's own (those die with the samples). */
static int user_collate(dg_dataloader *dl, const dg_sample *smp, int64_t cnt, dg_sample *out) {
    uint64_t errs = dg_error_count();
    memset(out, 0, sizeof *out);
    int rc = dl->collate(smp, cnt, out, dl->collate_user);
    if (rc) {
        if (!dg_error_since(errs)) DG_ERR(rc < 0 ? rc : DG_EINVAL, "collate hook failed (returned %d) without a message", rc);
        memset(out, 0, sizeof *out);
        return rc < 0 ? rc : DG_EINVAL;
    }
    DG_CHECK_INT(out->n >= 1 && out->n <= DG_MAX_SAMPLE_FIELDS, "collate hook: the batch has %d fields (1 to %d)", out->n,
                 DG_MAX_SAMPLE_FIELDS);
    for (int f = 0; f < out->n; f++) {
        char what[32];
        snprintf(what, sizeof what, "batch field %d", f);
        int bad = dg_tensor_check("collate hook", what, out->t[f]);
        if (bad) return bad;
        for (int64_t k = 0; k < cnt; k++)
            for (int j = 0; j < smp[k].n; j++)
                DG_CHECK_INT(out->t[f] != smp[k].t[j], "collate hook: batch field %d is sample %lld's field %d itself; "
                             "the batch needs new tensors (the samples are freed after collate)", f, (long long)k, j);
    }
    return 0;
}

/* Makes batch b: 0 and *out, BATCH_STOPPED, or a negative status with msg. Runs on any thread. */
static int make_batch(dg_dataloader *dl, int64_t b, dg_sample *out, char *msg, size_t msglen) {
    memset(out, 0, sizeof *out);
    uint64_t errs = dg_error_count();
    int64_t cnt = dl->boff[b + 1] - dl->boff[b];
    const int64_t *idx = dl->bidx + dl->boff[b];
    dg_sample *smp = calloc((size_t)(cnt ? cnt : 1), sizeof *smp);
    if (!smp) { snprintf(msg, msglen, "batch %lld: out of memory", (long long)b); return DG_ENOMEM; }
    /* The dataset's temporaries die with this scope; the samples and the batch are kept. */
    dg_scope *sc = dg_scope_begin();
    int rc = sc ? 0 : DG_ENOMEM;
    int64_t got = 0;
    for (int64_t k = 0; !rc && k < cnt; k++) {
        if (__atomic_load_n(&dl->stop, __ATOMIC_ACQUIRE)) { rc = BATCH_STOPPED; break; }
        rc = dg_dataset_get(dl->ds, idx[k], dg_sample_seed(dl->seed, dl->epoch, idx[k]), &smp[k]);
        if (rc) break;
        for (int f = 0; f < smp[k].n; f++) dg_keep(smp[k].t[f]);
        got++;
    }
    if (!rc && dl->collate) {
        rc = user_collate(dl, smp, cnt, out);
        if (!rc) for (int f = 0; f < out->n; f++) dg_keep(out->t[f]);
        else memset(out, 0, sizeof *out);   /* what it made dies with the scope below */
    } else if (!rc) {
        rc = collate_impl(smp, cnt, idx, out, dl->hooks.alloc ? &dl->hooks : NULL);
        if (!rc) for (int f = 0; f < out->n; f++) dg_keep(out->t[f]);
    }
    for (int64_t k = 0; k < got; k++) dg_sample_clear(&smp[k]);
    free(smp);
    dg_scope_end(sc);
    if (rc < 0) {
        snprintf(msg, msglen, "batch %lld: %s", (long long)b, dg_error_since(errs) ? dg_last_error() : "failed without a message");
    }
    return rc;
}

static void *worker_main(void *arg) {
    dg_dataloader *dl = arg;
    char msg[1024];
    dg_profiler_thread_name("dataloader worker");
    pthread_mutex_lock(&dl->mu);
    for (;;) {
        while (!dl->stop && !dl->halt && dl->claim < dl->nb && dl->claim >= dl->next + dl->nslots)
            pthread_cond_wait(&dl->work_cv, &dl->mu);
        if (dl->stop || dl->halt || dl->claim >= dl->nb) break;
        int64_t b = dl->claim++;
        pthread_mutex_unlock(&dl->mu);
        dg_sample batch;
        msg[0] = 0;
        uint64_t t0 = dg_profiler_span_begin();
        int rc = make_batch(dl, b, &batch, msg, sizeof msg);
        dg_profiler_span_end(t0, DG_PROFILER_DATALOADER, "dataloader.load", -1, b);
        pthread_mutex_lock(&dl->mu);
        if (rc == BATCH_STOPPED) continue;
        slot *s = &dl->slots[b % dl->nslots];
        s->b = b;
        s->batch = batch;
        s->status = rc;
        s->state = rc ? SLOT_FAILED : SLOT_READY;
        if (rc) {
            snprintf(s->msg, sizeof s->msg, "%s", msg);
            dl->halt = true;
            pthread_cond_broadcast(&dl->work_cv);
        }
        pthread_cond_broadcast(&dl->ready_cv);
    }
    pthread_mutex_unlock(&dl->mu);
    return NULL;
}

/* Stops and joins the workers, then frees every batch still parked. */
static void stop_workers(dg_dataloader *dl) {
    if (dl->nth) {
        pthread_mutex_lock(&dl->mu);
        __atomic_store_n(&dl->stop, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&dl->work_cv);
        pthread_mutex_unlock(&dl->mu);
        for (int i = 0; i < dl->nth; i++) pthread_join(dl->th[i], NULL);
        dl->nth = 0;
    }
    free(dl->th);
    dl->th = NULL;
    for (int i = 0; i < dl->nslots; i++) {
        if (dl->slots[i].state == SLOT_READY) dg_sample_clear(&dl->slots[i].batch);
        dl->slots[i].state = SLOT_EMPTY;
    }
}

dg_dataloader_params dg_dataloader_default_params(void) {
    return (dg_dataloader_params){ .params_tag = DG_PARAMS_TAG, .batch_size = 1, .num_workers = 0, .prefetch_factor = 2, .seed = 0, .sampler = NULL };
}

dg_dataloader *dg_dataloader_new(dg_dataset *ds, dg_dataloader_params p) {
    DG_CHECK_PARAMS("dataloader_new", p, dg_dataloader_default_params);
    DG_CHECK_HANDLE(ds, "dataloader_new: dataset is NULL");
    int64_t len = dg_dataset_len(ds);
    DG_CHECK(len >= 0, "dataloader_new('%s'): dataset length %lld", dg_dataset_name(ds), (long long)len);
    DG_CHECK(p.sampler || p.batch_size >= 1, "dataloader_new('%s'): batch_size must be >= 1, got %lld", dg_dataset_name(ds),
             (long long)p.batch_size);
    DG_CHECK(p.num_workers >= 0 && p.num_workers <= 1024, "dataloader_new('%s'): num_workers %d (0..1024)", dg_dataset_name(ds), p.num_workers);
    DG_CHECK(!p.num_workers || (p.prefetch_factor >= 1 && p.prefetch_factor <= 1024),
             "dataloader_new('%s'): prefetch_factor must be in [1, 1024] with %d workers, got %d", dg_dataset_name(ds),
             p.num_workers, p.prefetch_factor);
    DG_CHECK(!p.host_alloc == !p.host_free, "dataloader_new('%s'): host_alloc and host_free go together", dg_dataset_name(ds));
    if (p.sampler)
        DG_CHECK(dg_batch_sampler_dataset_len(p.sampler) == len, "dataloader_new('%s'): the sampler was made for %lld samples, the dataset has %lld",
                 dg_dataset_name(ds), (long long)dg_batch_sampler_dataset_len(p.sampler), (long long)len);
    dg_dataloader *dl = calloc(1, sizeof *dl);
    DG_CHECK(dl, "dataloader_new: out of memory");
    dl->sampler = p.sampler;
    if (!dl->sampler) {
        dg_batch_sampler_params sp = dg_batch_sampler_default_params();
        sp.batch_size = p.batch_size;
        sp.shuffle = p.shuffle;
        sp.drop_last = p.drop_last;
        sp.seed = p.seed;
        dl->sampler = dg_batch_sampler_new(len, sp);
        if (!dl->sampler) { free(dl); return NULL; }
        dl->own_sampler = true;
    }
    dl->nw = p.num_workers;
    dl->seed = p.seed;
    dl->collate = p.collate;
    dl->collate_user = p.collate_user;
    if (p.pin_memory && !p.host_alloc) { p.host_alloc = dg_pinned_alloc; p.host_free = dg_pinned_free; }
    dl->hooks = (host_hooks){ p.host_alloc, p.host_free, p.host_user };
    dl->nslots = p.num_workers * p.prefetch_factor;
    if (dl->nslots) {
        dl->slots = calloc((size_t)dl->nslots, sizeof *dl->slots);
        if (!dl->slots) {
            if (dl->own_sampler) dg_batch_sampler_free(dl->sampler);
            free(dl);
            DG_ERR(DG_ENOMEM, "dataloader_new: out of memory");
            return NULL;
        }
    }
    pthread_mutex_init(&dl->mu, NULL);
    pthread_cond_init(&dl->work_cv, NULL);
    pthread_cond_init(&dl->ready_cv, NULL);
    dl->ds = dg_dataset_ref(ds);
    return dl;
}

int dg_dataloader_start_epoch(dg_dataloader *dl, int64_t epoch) { return dg_dataloader_start_epoch_at(dl, epoch, 0); }

int dg_dataloader_start_epoch_at(dg_dataloader *dl, int64_t epoch, int64_t first_batch) {
    DG_CHECK_HANDLE_INT(dl, "dataloader_start_epoch: loader is NULL");
    DG_CHECK_INT(first_batch >= 0, "dataloader_start_epoch_at: first batch %lld is negative", (long long)first_batch);
    stop_workers(dl);
    dl->started = false;
    int rc = dg_batch_sampler_set_epoch(dl->sampler, epoch);
    if (rc) return rc;
    int64_t nb = dg_batch_sampler_num_batches(dl->sampler);
    /* a batch holds at most min(batch size, dataset length) indices */
    int64_t cap = dg_batch_sampler_dataset_len(dl->sampler);
    if (cap < 1) cap = 1;
    int64_t total = 0, size = 0;
    int64_t *boff = malloc(sizeof *boff * (size_t)(nb + 1)), *buf = NULL;
    rc = boff ? 0 : DG_ENOMEM;
    for (int64_t b = 0; !rc && b < nb; b++) {
        if (size - total < cap) {
            int64_t nsize = size * 2 > total + cap ? size * 2 : total + cap;
            int64_t *nbuf = realloc(buf, sizeof *buf * (size_t)nsize);
            if (!nbuf) { rc = DG_ENOMEM; break; }
            buf = nbuf;
            size = nsize;
        }
        int64_t c = dg_batch_sampler_batch(dl->sampler, b, buf + total, size - total);
        if (c < 0) { rc = (int)c; break; }
        boff[b] = total;
        total += c;
    }
    if (rc) {
        free(boff);
        free(buf);
        if (rc == DG_ENOMEM) DG_ERR(DG_ENOMEM, "dataloader_start_epoch: out of memory for %lld batches", (long long)nb);
        return rc;
    }
    boff[nb] = total;
    if (first_batch > nb) {
        free(boff);
        free(buf);
        DG_ERR(DG_EINVAL, "dataloader_start_epoch_at: batch %lld of epoch %lld, but the epoch has %lld batches (another "
               "batch size, dataset or number of replicas than the run that saved this position?)", (long long)first_batch,
               (long long)epoch, (long long)nb);
        return DG_EINVAL;
    }
    free(dl->boff);
    free(dl->bidx);
    dl->boff = boff;
    dl->bidx = buf;
    dl->nb = nb;
    dl->epoch = epoch;
    /* batches before first_batch are neither loaded nor handed out: the order and every
     * sample's random transform depend on (seed, epoch, index) only, so batch first_batch is
     * the one an uninterrupted epoch would give there (a resume in the middle of an epoch) */
    dl->next = dl->claim = first_batch;
    dl->stop = 0;
    dl->halt = dl->failed = false;
    if (dl->nw > 0 && nb > first_batch) {
        int want = dl->nw < nb - first_batch ? dl->nw : (int)(nb - first_batch);
        dl->th = calloc((size_t)want, sizeof *dl->th);
        if (!dl->th) { DG_ERR(DG_ENOMEM, "dataloader_start_epoch: out of memory"); return DG_ENOMEM; }
        for (int i = 0; i < want; i++) {
            if (pthread_create(&dl->th[i], NULL, worker_main, dl) != 0) break;
            dl->nth++;
        }
        if (dl->nth == 0) {   /* fewer workers than asked still load correctly; none cannot */
            free(dl->th);
            dl->th = NULL;
            DG_ERR(DG_ENOMEM, "dataloader_start_epoch: could not start a worker thread");
            return DG_ENOMEM;
        }
    }
    dl->started = true;
    return 0;
}

int dg_dataloader_next(dg_dataloader *dl, dg_sample *batch) {
    DG_CHECK_HANDLE_INT(dl, "dataloader_next: loader is NULL");
    DG_CHECK_INT(batch, "dataloader_next: batch is NULL");
    memset(batch, 0, sizeof *batch);
    if (!dl->started) {
        int rc = dg_dataloader_start_epoch(dl, dl->epoch);
        if (rc) return rc;
    }
    if (dl->failed) {
        DG_ERR(DG_ESTATE, "dataloader('%s'): this epoch stopped at an error; call dg_dataloader_start_epoch", dg_dataset_name(dl->ds));
        return DG_ESTATE;
    }
    if (dl->next >= dl->nb) { stop_workers(dl); return 0; }
    dg_sample out;
    char msg[1024];
    msg[0] = 0;
    int rc;
    /* the profiler's range: the time the caller waits for and receives the batch */
    int64_t bno = dl->next;
    uint64_t t0 = dg_profiler_span_begin();
    if (dl->nth == 0) {
        rc = make_batch(dl, dl->next, &out, msg, sizeof msg);
        dl->next++;
    } else {
        pthread_mutex_lock(&dl->mu);
        slot *s = &dl->slots[dl->next % dl->nslots];
        while (!(s->state != SLOT_EMPTY && s->b == dl->next)) pthread_cond_wait(&dl->ready_cv, &dl->mu);
        out = s->batch;
        rc = s->state == SLOT_FAILED ? s->status : 0;
        if (rc) snprintf(msg, sizeof msg, "%s", s->msg);
        memset(&s->batch, 0, sizeof s->batch);
        s->state = SLOT_EMPTY;
        dl->next++;
        pthread_cond_broadcast(&dl->work_cv);
        pthread_mutex_unlock(&dl->mu);
    }
    if (rc) {
        dl->failed = true;
        stop_workers(dl);
        const char *file = __FILE__;
        int line = __LINE__;
        dg_error_split_location(msg, &file, &line);
        dg_set_error_at(rc < 0 ? rc : DG_EINVAL, file, line, "dataloader: %s", msg);
        return rc < 0 ? rc : DG_EINVAL;
    }
    if (dl->next >= dl->nb) stop_workers(dl);   /* every batch is out: the workers have finished */
    /* batches go to the current device, as Paddle's DataLoader places them (an upload from a
     * pinned batch is queued without a host wait) */
    dg_device dev = dg_get_device();
    for (int f = 0; f < out.n && dev.type != DG_CPU; f++) {
        dg_tensor *moved = dg_keep(dg_to_device(out.t[f], dev));
        if (!moved) {
            for (int k = 0; k < out.n; k++) dg_tensor_free(out.t[k]);
            char m[512];
            snprintf(m, sizeof m, "%s", dg_last_error());
            DG_ERR(DG_EDEVICE, "dataloader('%s'): moving field %d of batch %lld to the device: %s", dg_dataset_name(dl->ds), f,
                   (long long)(dl->next - 1), m);
            return DG_EDEVICE;
        }
        dg_tensor_free(out.t[f]);
        out.t[f] = moved;
    }
    for (int f = 0; f < out.n; f++) dg_adopt(out.t[f]);
    *batch = out;
    dg_profiler_span_end(t0, DG_PROFILER_DATALOADER, "dataloader.next", -1, bno);
    return 1;
}

int64_t dg_dataloader_num_batches(const dg_dataloader *dl) {
    DG_CHECK_HANDLE_INT(dl, "dataloader_num_batches: loader is NULL");
    return dg_batch_sampler_num_batches(dl->sampler);
}

void dg_dataloader_free(dg_dataloader *dl) {
    if (!dl) return;
    stop_workers(dl);
    pthread_mutex_destroy(&dl->mu);
    pthread_cond_destroy(&dl->work_cv);
    pthread_cond_destroy(&dl->ready_cv);
    free(dl->slots);
    free(dl->boff);
    free(dl->bidx);
    if (dl->own_sampler) dg_batch_sampler_free(dl->sampler);
    dg_dataset_free(dl->ds);
    free(dl);
}
