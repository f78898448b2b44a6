/* dist/ps/client.c — a worker's side of a parameter-server job: the dense parameters of an
 * optimizer as one table flattened in parameter order and split evenly over the servers
 * (server s holds elements [s*N/S, (s+1)*N/S)), pushed as gradients and pulled as values.
 *
 * The worker's optimizer is not run here: its kind and settings travel in INIT and each server
 * runs it on its shard (server.c). dg_optimizer_step of an optimizer given to
 * dg_fleet_distributed_optimizer in this mode therefore pushes the gradients and, in sync mode,
 * waits for the servers to have stepped with every worker's, then pulls the new values. */
#include "../dist_internal.h"
#include "../../optim/optim_internal.h"
#include "client.h"
#include "proto.h"

struct dg_ps_dense {
    dg_ps_transport *tr;
    int n_servers, worker;
    uint32_t table;
    bool sync;
    double timeout_s;
    dg_optimizer *opt;            /* borrowed: its parameters are the table */
    int64_t total;
    int64_t *off, *len;           /* per server */
    float *flat;                  /* total floats: gradients out, values in */
    uint64_t version;             /* the table version this worker's parameters hold */
};

static int64_t shard_off(int64_t total, int s, int n) { return (int64_t)((__int128)total * s / n); }

/* One request to server s; the reply's status, version and payload (malloc'd, caller frees). */
static int ask(dg_ps_dense *d, int s, const unsigned char *msg, size_t len, const char *what, int *status, uint64_t *version,
               unsigned char **payload, size_t *plen) {
    void *r = NULL;
    size_t rl = 0;
    int rc = d->tr->ops->request(d->tr, s, msg, len, &r, &rl, d->timeout_s);
    if (rc) return rc;   /* the transport named the server and what happened */
    const unsigned char *b = r;
    if (rl < DG_PS_REPLY_HEADER || dg_ps_get32(b) != DG_PS_MAGIC || dg_ps_get16(b + 4) != DG_PS_VERSION) {
        free(r);
        DG_ERR(DG_ECOMM, "ps %s: server %d answered %zu bytes that are not a parameter-server reply", what, s, rl);
        return DG_ECOMM;
    }
    *status = dg_ps_get16(b + 6);
    *version = dg_ps_get64(b + 8);
    if (*status == DG_PS_ERROR) {
        DG_ERR(DG_ECOMM, "ps %s: server %d refused: %.*s", what, s, (int)(rl - DG_PS_REPLY_HEADER), (const char *)b + DG_PS_REPLY_HEADER);
        free(r);
        return DG_ECOMM;
    }
    if (payload) {
        *plen = rl - DG_PS_REPLY_HEADER;
        *payload = r;   /* the caller reads from DG_PS_REPLY_HEADER on */
    } else {
        free(r);
    }
    return 0;
}

/* The optimizer's parameters, flattened into d->flat (values or gradients). */
static int gather(dg_ps_dense *d, bool grads) {
    int64_t at = 0;
    for (int i = 0; i < d->opt->n; i++) {
        dg_tensor *p = d->opt->params[i];
        int64_t n = dg_numel(p);
        const dg_tensor *src = grads ? dg_grad(p) : p;
        if (!src) {
            memset(d->flat + at, 0, (size_t)n * sizeof(float));   /* unused this step: no gradient */
        } else {
            dg_scope *sc = dg_scope_begin();
            dg_tensor *c = dg_dtype_of(src) == DG_F32 ? (dg_tensor *)src : dg_cast(src, DG_F32);
            int rc = c ? dg_to_host(c, d->flat + at, (size_t)n * sizeof(float)) : DG_ENOMEM;
            dg_scope_end(sc);
            if (rc) return rc;
        }
        at += n;
    }
    return 0;
}

/* d->flat into the parameters (outside the graph, as an optimizer step writes them). */
static int scatter(dg_ps_dense *d) {
    int64_t at = 0;
    int rc = 0;
    dg_no_grad_begin();
    for (int i = 0; i < d->opt->n && !rc; i++) {
        dg_tensor *p = d->opt->params[i];
        dg_scope *sc = dg_scope_begin();
        dg_tensor *v = dg_from_data(dg_shape_of(p), DG_F32, d->flat + at);
        rc = v ? dg_copy_(p, v) : DG_ENOMEM;
        dg_scope_end(sc);
        at += dg_numel(p);
    }
    dg_no_grad_end();
    return rc;
}

/* Pulls every shard at version >= want into flat, waiting (with the peer backoff) while a
 * server answers NOT_YET, until the timeout. */
static int pull_all(dg_ps_dense *d, uint64_t want) {
    unsigned char h[DG_PS_REQ_HEADER];
    dg_ps_req_header(h, DG_PS_OP_PULL, d->table, (uint32_t)d->worker, want);
    uint64_t got_version = 0;
    for (int s = 0; s < d->n_servers; s++) {
        dg_peer_wait w = dg_peer_wait_begin();
        for (;;) {
            int status;
            uint64_t ver;
            unsigned char *r = NULL;
            size_t rl = 0;
            int rc = ask(d, s, h, sizeof h, "pull", &status, &ver, &r, &rl);
            if (rc) return rc;
            if (status == DG_PS_OK) {
                bool fits = rl == (size_t)d->len[s] * sizeof(float);
                if (fits) memcpy(d->flat + d->off[s], r + DG_PS_REPLY_HEADER, rl);
                free(r);
                if (!fits) {
                    DG_ERR(DG_ECOMM, "ps pull: server %d sent %zu bytes for a shard of %lld floats", s, rl, (long long)d->len[s]);
                    return DG_ECOMM;
                }
                if (s == 0 || ver < got_version) got_version = ver;
                break;
            }
            free(r);
            if (!dg_peer_wait_pause(&w, d->timeout_s)) {
                DG_ERR(DG_ETIMEOUT, "ps pull: server %d has table %u at version %llu, worker %d needs %llu; waited %.0f s "
                       "(DG_DIST_TIMEOUT): a worker stopped pushing?", s, d->table, (unsigned long long)ver, d->worker,
                       (unsigned long long)want, d->timeout_s);
                return DG_ETIMEOUT;
            }
        }
    }
    d->version = got_version;
    return 0;
}

dg_ps_dense *dg_ps_dense_new(dg_ps_transport *tr, int n_servers, int worker, int n_workers, uint32_t table, bool sync,
                             double timeout_s, dg_optimizer *opt) {
    DG_CHECK(opt->kind == DG_OPT_SGD || opt->kind == DG_OPT_MOMENTUM || opt->kind == DG_OPT_ADAGRAD || opt->kind == DG_OPT_ADAM,
             "fleet_distributed_optimizer: %s does not run on parameter servers (SGD, Momentum, Adagrad and Adam do)",
             opt->info->name);
    DG_CHECK(opt->n_groups == 1, "fleet_distributed_optimizer: parameter groups are not run on parameter servers (%d groups)",
             opt->n_groups);
    int64_t total = 0;
    for (int i = 0; i < opt->n; i++) {
        dg_tensor *p = opt->params[i];
        DG_CHECK(dg_dtype_of(p) == DG_F32, "fleet_distributed_optimizer: parameter %d is %s; parameter servers keep float32 tables",
                 i, dg_dtype_name(dg_dtype_of(p)));
        total += dg_numel(p);
    }
    DG_CHECK(total >= n_servers, "fleet_distributed_optimizer: %lld parameter elements cannot be split over %d servers",
             (long long)total, n_servers);
    dg_ps_dense *d = calloc(1, sizeof *d);
    if (d) {
        d->off = calloc((size_t)n_servers, sizeof *d->off);
        d->len = calloc((size_t)n_servers, sizeof *d->len);
        d->flat = malloc((size_t)total * sizeof(float));
    }
    if (!d || !d->off || !d->len || !d->flat) {
        dg_ps_dense_free(d);
        DG_ERR(DG_ENOMEM, "fleet_distributed_optimizer: out of memory");
        return NULL;
    }
    *d = (dg_ps_dense){ tr, n_servers, worker, table, sync, timeout_s, opt, total, d->off, d->len, d->flat, 0 };
    for (int s = 0; s < n_servers; s++) {
        d->off[s] = shard_off(total, s, n_servers);
        d->len[s] = shard_off(total, s + 1, n_servers) - d->off[s];
    }
    int rc = gather(d, false);
    /* INIT every shard with this worker's values (the first INIT a server gets makes the shard),
     * then pull: every worker starts from the same parameters */
    dg_ps_init_msg m = { .total = (uint64_t)total, .n_workers = (uint32_t)n_workers, .sync = sync, .kind = (uint32_t)opt->kind,
                         .nesterov = opt->nesterov, .amsgrad = opt->amsgrad, .lr = opt->groups[0].lr,
                         .weight_decay = opt->groups[0].weight_decay, .momentum = opt->momentum, .dampening = opt->dampening,
                         .beta1 = opt->beta1, .beta2 = opt->beta2, .eps = opt->eps, .init_acc = opt->init_acc,
                         .lr_decay = opt->lr_decay };
    for (int s = 0; s < n_servers && !rc; s++) {
        m.offset = (uint64_t)d->off[s];
        m.len = (uint64_t)d->len[s];
        size_t n = DG_PS_REQ_HEADER + DG_PS_INIT_BYTES + (size_t)d->len[s] * sizeof(float);
        unsigned char *msg = malloc(n);
        if (!msg) { rc = DG_ENOMEM; break; }
        dg_ps_req_header(msg, DG_PS_OP_INIT, table, (uint32_t)worker, 0);
        dg_ps_init_encode(&m, msg + DG_PS_REQ_HEADER);
        memcpy(msg + DG_PS_REQ_HEADER + DG_PS_INIT_BYTES, d->flat + d->off[s], (size_t)d->len[s] * sizeof(float));
        int status;
        uint64_t ver;
        rc = ask(d, s, msg, n, "init", &status, &ver, NULL, NULL);
        free(msg);
    }
    if (!rc) rc = pull_all(d, 0);
    if (!rc) rc = scatter(d);
    if (rc) {
        dg_ps_dense_free(d);
        return NULL;
    }
    return d;
}

int dg_ps_dense_step(dg_ps_dense *d) {
    int rc = gather(d, true);
    uint64_t at = d->version;
    for (int s = 0; s < d->n_servers && !rc; s++) {
        size_t n = DG_PS_REQ_HEADER + (size_t)d->len[s] * sizeof(float);
        unsigned char *msg = malloc(n);
        if (!msg) return DG_ENOMEM;
        dg_ps_req_header(msg, DG_PS_OP_PUSH, d->table, (uint32_t)d->worker, at);
        memcpy(msg + DG_PS_REQ_HEADER, d->flat + d->off[s], (size_t)d->len[s] * sizeof(float));
        int status;
        uint64_t ver;
        rc = ask(d, s, msg, n, "push", &status, &ver, NULL, NULL);
        free(msg);
    }
    /* sync: the step every worker pushed for; async: whatever the servers hold now */
    if (!rc) rc = pull_all(d, d->sync ? at + 1 : 0);
    if (!rc) rc = scatter(d);
    return rc;
}

void dg_ps_dense_free(dg_ps_dense *d) {
    if (!d) return;
    free(d->off);
    free(d->len);
    free(d->flat);
    free(d);
}

int dg_ps_stop_worker(dg_ps_transport *tr, int n_servers, int worker, double timeout_s) {
    unsigned char h[DG_PS_REQ_HEADER];
    dg_ps_req_header(h, DG_PS_OP_STOP, 0, (uint32_t)worker, 0);
    int rc = 0;
    for (int s = 0; s < n_servers; s++) {
        void *r = NULL;
        size_t rl = 0;
        int e = tr->ops->request(tr, s, h, sizeof h, &r, &rl, timeout_s);
        free(r);
        if (e && !rc) rc = e;
    }
    return rc;
}
