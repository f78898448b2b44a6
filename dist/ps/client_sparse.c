/* dist/ps/client_sparse.c — a worker's sparse table on the parameter servers (client.h): rows
 * keyed by int64 id, server id % S. A lookup pulls the batch's unique ids (or takes the rows a
 * prefetch brought), the step pushes their row gradients (async: posted to the dense table's
 * communicator), and geo mode keeps the worker's own rows and sends their changes every k steps. */
#include "../dist_internal.h"
#include "client.h"
#include "communicator.h"
#include "proto.h"
#include "request.h"
#include "table_sparse.h"
#include <pthread.h>


typedef struct pending_lookup { int64_t *ids; int64_t n; dg_tensor *rows; } pending_lookup;

/* A prefetch (dg_ps_sparse_prefetch): the sorted unique ids of the next batch, their rows as the
 * servers' replies fill them in (on the communicator thread), and this worker's own row gradients
 * pushed after the pull was posted, which the rows therefore lack (summed per id). */
typedef struct prefetch {
    int64_t *ids, u;
    float *rows;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending, rc;               /* replies still to come; the first failure */
    dg_ps_sparse_table *since;
} prefetch;
typedef struct prefetch_part { prefetch *pf; int64_t *pos, k, dim; } prefetch_part;

struct dg_ps_sparse {
    dg_ps_transport *tr;
    int n_servers, worker;
    uint32_t table;
    int mode, k_steps, n_workers;
    double timeout_s;
    int64_t dim;
    uint64_t version;              /* sync: steps this table has taken */
    pending_lookup *pend;          /* the lookups since the last push */
    int n_pend, cap_pend;
    /* geo: the worker's rows, stepped here by the table's rule, and the values they had when
     * last pulled (an id is in base while its row is fresh: until the next exchange) */
    dg_ps_sparse_table *local, *base;
    int64_t steps;
    int kind;                      /* the rows' rule (DG_PS_SPARSE_*) and lr */
    double lr;
    /* async: pushes and prefetching pulls go through the dense table's communicator */
    dg_ps_dense *post;
    prefetch *pf;                  /* the rows of an announced next batch, on their way */
};

dg_ps_sparse *dg_ps_sparse_new(dg_ps_transport *tr, int n_servers, int worker, int n_workers, uint32_t table, dg_ps_mode mode,
                               double timeout_s, const dg_ps_sparse_msg *settings) {
    dg_ps_sparse *sp = calloc(1, sizeof *sp);
    if (!sp) { DG_ERR(DG_ENOMEM, "sparse table: out of memory"); return NULL; }
    *sp = (dg_ps_sparse){ .tr = tr, .n_servers = n_servers, .worker = worker, .table = table, .mode = mode.mode,
                          .k_steps = mode.k_steps, .n_workers = n_workers, .timeout_s = timeout_s, .dim = settings->dim,
                          .kind = (int)settings->kind, .lr = settings->lr };
    dg_ps_sparse_msg m = *settings;
    m.n_workers = (uint32_t)n_workers;
    m.mode = (uint32_t)mode.mode;
    dg_ps_sparse_msg plain = m;   /* base holds values only */
    plain.kind = DG_PS_SPARSE_SGD;
    if (mode.mode == DG_PS_MODE_GEO && (!(sp->local = dg_ps_sparse_table_new(&m)) || !(sp->base = dg_ps_sparse_table_new(&plain)))) {
        dg_ps_sparse_free(sp);
        DG_ERR(DG_ENOMEM, "sparse table: out of memory");
        return NULL;
    }
    unsigned char msg[DG_PS_REQ_HEADER + DG_PS_SPARSE_BYTES];
    dg_ps_req_header(msg, DG_PS_OP_SPARSE_INIT, table, (uint32_t)worker, 0);
    dg_ps_sparse_encode(&m, msg + DG_PS_REQ_HEADER);
    for (int s = 0; s < n_servers; s++) {
        int status;
        uint64_t ver;
        if (dg_ps_ask(sp->tr, sp->timeout_s, s, msg, sizeof msg, "sparse init", &status, &ver, NULL, NULL)) {
            dg_ps_sparse_free(sp);
            return NULL;
        }
        if (s == 0 || ver < sp->version) sp->version = ver;   /* a table loaded from a save goes on from its version */
    }
    return sp;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The rows of the u ids (distinct) from their servers into rows (u x dim), at this table's version
 * (sync: after every worker's last push). */
static int pull_rows(dg_ps_sparse *sp, const int64_t *ids, int64_t u, float *rows) {
    int64_t *mine = malloc(sizeof(int64_t) * (size_t)(u ? u : 1));
    int rc = mine ? 0 : DG_ENOMEM;
    for (int s = 0; !rc && s < sp->n_servers; s++) {
        int64_t k = 0;
        for (int64_t i = 0; i < u; i++) if (ids[i] % sp->n_servers == s) mine[k++] = i;
        if (!k) continue;
        size_t len = DG_PS_REQ_HEADER + (size_t)k * 8;
        unsigned char *msg = malloc(len);
        if (!msg) { rc = DG_ENOMEM; break; }
        uint64_t ver, want = sp->mode == DG_PS_MODE_SYNC ? sp->version : 0;
        dg_ps_req_header(msg, DG_PS_OP_SPARSE_PULL, sp->table, (uint32_t)sp->worker, want);
        for (int64_t i = 0; i < k; i++) dg_ps_put64(msg + DG_PS_REQ_HEADER + 8 * i, (uint64_t)ids[mine[i]]);
        unsigned char *r = NULL;
        size_t rl = 0;
        rc = dg_ps_ask_when_ready(sp->tr, sp->timeout_s, s, msg, len, "sparse pull", sp->table, sp->worker, want, &ver, &r, &rl);
        if (!rc && rl != (size_t)k * (size_t)sp->dim * sizeof(float)) {
            DG_ERR(DG_ECOMM, "sparse pull: server %d sent %zu bytes for %lld rows of %lld", s, rl, (long long)k, (long long)sp->dim);
            rc = DG_ECOMM;
        }
        for (int64_t i = 0; !rc && i < k; i++)
            memcpy(rows + mine[i] * sp->dim, r + DG_PS_REPLY_HEADER + (size_t)i * (size_t)sp->dim * sizeof(float),
                   (size_t)sp->dim * sizeof(float));
        free(r);
        free(msg);
    }
    free(mine);
    return rc;
}

/* Geo mode: the worker's own copy of the rows. An id not pulled since the last exchange is pulled
 * now (its local row and its base, the value the next delta is measured from, become the
 * server's); the rows returned are the local ones, which the worker's steps move. */
static int geo_rows(dg_ps_sparse *sp, const int64_t *ids, int64_t u, float *rows) {
    int64_t *missing = malloc(sizeof(int64_t) * (size_t)(u ? u : 1)), m = 0;
    if (!missing) return DG_ENOMEM;
    for (int64_t i = 0; i < u; i++) if (!dg_ps_sparse_table_find(sp->base, ids[i])) missing[m++] = ids[i];
    float *got = malloc((size_t)(m ? m : 1) * (size_t)sp->dim * sizeof(float));
    int rc = got ? pull_rows(sp, missing, m, got) : DG_ENOMEM;
    size_t row_bytes = (size_t)sp->dim * sizeof(float);
    for (int64_t i = 0; !rc && i < m; i++) {
        float *l = dg_ps_sparse_table_row(sp->local, missing[i]), *b = dg_ps_sparse_table_row(sp->base, missing[i]);
        if (!l || !b) { rc = DG_ENOMEM; break; }
        memcpy(l, got + i * sp->dim, row_bytes);
        memcpy(b, got + i * sp->dim, row_bytes);
    }
    for (int64_t i = 0; !rc && i < u; i++) memcpy(rows + i * sp->dim, dg_ps_sparse_table_find(sp->local, ids[i]), row_bytes);
    free(missing);
    free(got);
    return rc;
}

static int take_prefetch(dg_ps_sparse *sp, const int64_t *uniq, int64_t u, float *rows, bool *used);

/* Sorted unique ids of an id tensor (int64/int32, >= 0) into *uniq_out (malloc'd); their count,
 * or a DG_E* code with the error set. inv (if not NULL, numel entries): each id's place in uniq. */
static int64_t unique_ids(const dg_tensor *ids, const char *what, int64_t **uniq_out, int64_t *inv) {
    *uniq_out = NULL;
    if (dg_dtype_of(ids) != DG_I64 && dg_dtype_of(ids) != DG_I32) {
        DG_ERR(DG_EINVAL, "%s: ids are %s; expects int64 or int32", what, dg_dtype_name(dg_dtype_of(ids)));
        return DG_EINVAL;
    }
    int64_t n = dg_numel(ids);
    int64_t *all = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), *uniq = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int rc = all && uniq ? 0 : DG_ENOMEM;
    if (rc) DG_ERR(DG_ENOMEM, "%s: out of memory for %lld ids", what, (long long)n);
    if (!rc) {
        dg_scope *sc = dg_scope_begin();
        const dg_tensor *h = dg_dtype_of(ids) == DG_I64 ? ids : dg_cast(ids, DG_I64);
        rc = h ? dg_to_host(h, all, (size_t)n * sizeof(int64_t)) : DG_ENOMEM;
        dg_scope_end(sc);
    }
    for (int64_t i = 0; !rc && i < n; i++)
        if (all[i] < 0) {
            DG_ERR(DG_EINVAL, "%s: id %lld at position %lld is negative", what, (long long)all[i], (long long)i);
            rc = DG_EINVAL;
        }
    int64_t u = 0;
    if (!rc && n) {
        memcpy(uniq, all, (size_t)n * sizeof(int64_t));
        qsort(uniq, (size_t)n, sizeof(int64_t), cmp_i64);
        for (int64_t i = 0; i < n; i++) if (i == 0 || uniq[i] != uniq[u - 1]) uniq[u++] = uniq[i];
        for (int64_t i = 0; inv && i < n; i++) inv[i] = (int64_t *)bsearch(&all[i], uniq, (size_t)u, sizeof(int64_t), cmp_i64) - uniq;
    }
    free(all);
    if (rc) { free(uniq); return rc; }
    *uniq_out = uniq;
    return u;
}

dg_tensor *dg_ps_sparse_lookup(dg_ps_sparse *sp, const dg_tensor *ids) {
    DG_CHECK(dg_dtype_of(ids) == DG_I64 || dg_dtype_of(ids) == DG_I32, "sparse_embedding: ids are %s; expects int64 or int32",
             dg_dtype_name(dg_dtype_of(ids)));
    int64_t n = dg_numel(ids);
    int64_t *uniq = NULL, *inv = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    float *rows = NULL;
    dg_tensor *out = NULL, *rt = NULL;
    int64_t u = inv ? unique_ids(ids, "sparse_embedding", &uniq, inv) : DG_ENOMEM;
    int rc = u < 0 ? (int)u : 0;
    if (!rc && !(rows = malloc((size_t)(u ? u : 1) * (size_t)sp->dim * sizeof(float)))) rc = DG_ENOMEM;
    if (!rc && sp->mode == DG_PS_MODE_GEO) {
        rc = geo_rows(sp, uniq, u, rows);
    } else if (!rc) {   /* the rows a prefetch brought, else a pull now */
        bool used = false;
        rc = take_prefetch(sp, uniq, u, rows, &used);
        /* a pull of our own must not overtake our pushes still waiting to be posted */
        if (!rc && !used && sp->post) rc = dg_ps_dense_flush_posts(sp->post);
        if (!rc && !used) rc = pull_rows(sp, uniq, u, rows);
    }
    /* rows [u, dim] as a leaf whose gradient is what this lookup pushes; out = rows[inverse] */
    if (!rc) {
        rt = dg_keep(dg_from_data(DG_SHAPE(u, sp->dim), DG_F32, rows));
        if (rt) dg_set_requires_grad(rt, true);
        dg_tensor *it = rt ? dg_from_data(DG_SHAPE(n), DG_I64, inv) : NULL;
        dg_tensor *sel = it ? dg_index_select(rt, it, 0) : NULL;
        dg_shape shp = dg_shape_of(ids);
        if (sel && shp.ndim < DG_MAX_DIMS) {
            shp.d[shp.ndim++] = sp->dim;
            out = dg_reshape(sel, shp);
        }
        if (!out) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    if (!rc && sp->n_pend == sp->cap_pend) {
        int nc = sp->cap_pend ? sp->cap_pend * 2 : 8;
        pending_lookup *p = realloc(sp->pend, sizeof *p * (size_t)nc);
        if (!p) rc = DG_ENOMEM;
        else sp->pend = p, sp->cap_pend = nc;
    }
    if (!rc) {
        sp->pend[sp->n_pend++] = (pending_lookup){ uniq, u, rt };
        uniq = NULL;
        rt = NULL;
    }
    dg_tensor_free(rt);
    free(uniq);
    free(inv);
    free(rows);
    return rc ? NULL : out;
}

/* Geo: sends every fresh row's change since it was pulled, divided by the number of workers
 * (rows that did not move are left out), then forgets which rows are fresh: the next lookups pull
 * the servers' sums of every worker's changes. */
int dg_ps_sparse_geo_exchange(dg_ps_sparse *sp) {
    if (sp->mode != DG_PS_MODE_GEO) return 0;
    int64_t n = dg_ps_sparse_table_rows(sp->base);
    size_t row_bytes = (size_t)sp->dim * sizeof(float);
    float inv = 1.0f / (float)sp->n_workers;
    int rc = 0;
    for (int s = 0; s < sp->n_servers && !rc; s++) {
        size_t cap = DG_PS_REQ_HEADER + 8 + (size_t)n * (8 + row_bytes);
        unsigned char *msg = malloc(cap);
        if (!msg) return DG_ENOMEM;
        int64_t k = 0;
        for (int64_t r = 0; r < n; r++) {   /* ids first, then the deltas: count them in one pass */
            int64_t id = dg_ps_sparse_table_id(sp->base, r);
            if (id % sp->n_servers != s) continue;
            const float *b = dg_ps_sparse_table_row_at(sp->base, r), *l = dg_ps_sparse_table_find(sp->local, id);
            if (memcmp(b, l, row_bytes) == 0) continue;
            dg_ps_put64(msg + DG_PS_REQ_HEADER + 8 + 8 * (size_t)k, (uint64_t)id);
            k++;
        }
        unsigned char *dp = msg + DG_PS_REQ_HEADER + 8 + 8 * (size_t)k;
        for (int64_t i = 0; i < k; i++) {
            int64_t id = (int64_t)dg_ps_get64(msg + DG_PS_REQ_HEADER + 8 + 8 * (size_t)i);
            const float *b = dg_ps_sparse_table_find(sp->base, id), *l = dg_ps_sparse_table_find(sp->local, id);
            for (int64_t j = 0; j < sp->dim; j++) {
                float d = (l[j] - b[j]) * inv;
                memcpy(dp + ((size_t)i * (size_t)sp->dim + (size_t)j) * 4, &d, 4);
            }
        }
        dg_ps_req_header(msg, DG_PS_OP_SPARSE_GEO_PUSH, sp->table, (uint32_t)sp->worker, 0);
        dg_ps_put64(msg + DG_PS_REQ_HEADER, (uint64_t)k);
        int status;
        uint64_t ver;
        if (k) rc = dg_ps_ask(sp->tr, sp->timeout_s, s, msg, DG_PS_REQ_HEADER + 8 + (size_t)k * (8 + row_bytes), "sparse geo push",
                        &status, &ver, NULL, NULL);
        free(msg);
    }
    if (!rc) {
        dg_ps_sparse_table *fresh = dg_ps_sparse_table_new(dg_ps_sparse_table_settings(sp->base));
        if (!fresh) return DG_ENOMEM;
        dg_ps_sparse_table_free(sp->base);
        sp->base = fresh;
    }
    return rc;
}

/* Geo: each lookup's row gradients step the worker's own rows with the table's rule; every
 * k_steps steps the changes go to the servers. */
static int geo_step(dg_ps_sparse *sp) {
    int rc = 0;
    for (int p = 0; p < sp->n_pend && !rc; p++) {
        const dg_tensor *gr = dg_grad(sp->pend[p].rows);
        if (!gr) continue;
        float *host = malloc(sizeof(float) * (size_t)(sp->pend[p].n * sp->dim + 1));
        if (!host || dg_to_host(gr, host, sizeof(float) * (size_t)(sp->pend[p].n * sp->dim))) { free(host); rc = DG_ENOMEM; break; }
        for (int64_t i = 0; i < sp->pend[p].n && !rc; i++) rc = dg_ps_sparse_table_step(sp->local, sp->pend[p].ids[i], host + i * sp->dim);
        free(host);
    }
    for (int p = 0; p < sp->n_pend; p++) {
        free(sp->pend[p].ids);
        dg_tensor_free(sp->pend[p].rows);
    }
    sp->n_pend = 0;
    if (!rc && ++sp->steps % sp->k_steps == 0) rc = dg_ps_sparse_geo_exchange(sp);
    return rc;
}

int dg_ps_sparse_push(dg_ps_sparse *sp) {
    if (sp->mode == DG_PS_MODE_GEO) return geo_step(sp);
    int rc = 0;
    size_t row_bytes = (size_t)sp->dim * sizeof(float);
    /* every lookup's row gradients on the host once (a lookup whose rows got no gradient pushes
     * zeros: in sync mode each worker's push counts) */
    float **host = calloc((size_t)(sp->n_pend ? sp->n_pend : 1), sizeof *host);
    if (!host) rc = DG_ENOMEM;
    for (int p = 0; p < sp->n_pend && !rc; p++) {
        const dg_tensor *gr = dg_grad(sp->pend[p].rows);
        host[p] = calloc((size_t)(sp->pend[p].n ? sp->pend[p].n : 1), row_bytes);
        if (!host[p] || (gr && dg_to_host(gr, host[p], row_bytes * (size_t)sp->pend[p].n))) rc = DG_ENOMEM;
        /* a prefetch posted before this push lacks these gradients: kept to add them back */
        for (int64_t i = 0; !rc && sp->pf && sp->post && i < sp->pend[p].n; i++) {
            float *acc = dg_ps_sparse_table_row(sp->pf->since, sp->pend[p].ids[i]);
            if (!acc) rc = DG_ENOMEM;
            else for (int64_t j = 0; j < sp->dim; j++) acc[j] += host[p][i * sp->dim + j];
        }
    }
    /* per server: its ids with their rows, sent now (sync, or no communicator) or posted to the
     * communicator, which sends them before its next exchange (async) */
    for (int s = 0; s < sp->n_servers && !rc; s++) {
        int64_t k = 0;
        for (int p = 0; p < sp->n_pend; p++)
            for (int64_t i = 0; i < sp->pend[p].n; i++) k += sp->pend[p].ids[i] % sp->n_servers == s;
        size_t len = DG_PS_REQ_HEADER + 8 + (size_t)k * 8 + (size_t)k * row_bytes;
        unsigned char *msg = malloc(len);
        if (!msg) { rc = DG_ENOMEM; break; }
        dg_ps_req_header(msg, DG_PS_OP_SPARSE_PUSH, sp->table, (uint32_t)sp->worker, sp->version);
        dg_ps_put64(msg + DG_PS_REQ_HEADER, (uint64_t)k);
        unsigned char *idp = msg + DG_PS_REQ_HEADER + 8, *gp = idp + (size_t)k * 8;
        int64_t at = 0;
        for (int p = 0; p < sp->n_pend; p++)
            for (int64_t i = 0; i < sp->pend[p].n; i++) {
                if (sp->pend[p].ids[i] % sp->n_servers != s) continue;
                dg_ps_put64(idp + 8 * at, (uint64_t)sp->pend[p].ids[i]);
                memcpy(gp + (size_t)at * row_bytes, host[p] + i * sp->dim, row_bytes);
                at++;
            }
        if (sp->post && sp->mode == DG_PS_MODE_ASYNC) {
            rc = dg_ps_dense_post(sp->post, s, msg, len, NULL, NULL);   /* the message is the communicator's now */
        } else {
            int status;
            uint64_t ver;
            rc = dg_ps_ask(sp->tr, sp->timeout_s, s, msg, len, "sparse push", &status, &ver, NULL, NULL);
            free(msg);
        }
    }
    for (int p = 0; host && p < sp->n_pend; p++) free(host[p]);
    free(host);
    for (int p = 0; p < sp->n_pend; p++) {
        free(sp->pend[p].ids);
        dg_tensor_free(sp->pend[p].rows);
    }
    sp->n_pend = 0;
    if (!rc) sp->version++;
    return rc;
}

/* ---- prefetching the next batch's rows (async, through the communicator) ---- */

static void prefetch_reply(void *arg, int rc, const unsigned char *payload, size_t n) {
    prefetch_part *part = arg;
    prefetch *pf = part->pf;
    size_t row_bytes = (size_t)part->dim * sizeof(float);
    if (!rc && n != (size_t)part->k * row_bytes) rc = DG_ECOMM;
    for (int64_t i = 0; !rc && i < part->k; i++) memcpy(pf->rows + part->pos[i] * part->dim, payload + (size_t)i * row_bytes, row_bytes);
    pthread_mutex_lock(&pf->mu);
    if (rc && !pf->rc) pf->rc = rc;
    pf->pending--;
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    free(part->pos);
    free(part);
}

static void prefetch_wait(prefetch *pf) {
    pthread_mutex_lock(&pf->mu);
    while (pf->pending > 0) pthread_cond_wait(&pf->cv, &pf->mu);
    pthread_mutex_unlock(&pf->mu);
}

/* Frees a prefetch once no reply can still write into it. */
static void prefetch_free(prefetch *pf) {
    if (!pf) return;
    prefetch_wait(pf);
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->cv);
    free(pf->ids);
    free(pf->rows);
    dg_ps_sparse_table_free(pf->since);
    free(pf);
}

int dg_ps_sparse_prefetch(dg_ps_sparse *sp, const dg_tensor *ids) {
    if (sp->mode != DG_PS_MODE_ASYNC || !sp->post) return 0;   /* sync and geo: nothing may be pulled early */
    prefetch_free(sp->pf);   /* one that was never used */
    sp->pf = NULL;
    int64_t *uniq = NULL, u = unique_ids(ids, "sparse_prefetch", &uniq, NULL);
    if (u < 0) return (int)u;
    prefetch *pf = calloc(1, sizeof *pf);
    dg_ps_sparse_msg zero = { .dim = (uint32_t)sp->dim };
    if (pf) {
        pf->ids = uniq, pf->u = u;
        pf->rows = malloc((size_t)(u ? u : 1) * (size_t)sp->dim * sizeof(float));
        pf->since = dg_ps_sparse_table_new(&zero);
        pthread_mutex_init(&pf->mu, NULL);
        pthread_cond_init(&pf->cv, NULL);
    }
    if (!pf || !pf->rows || !pf->since) {
        if (pf) prefetch_free(pf);
        else free(uniq);
        DG_ERR(DG_ENOMEM, "sparse_prefetch: out of memory");
        return DG_ENOMEM;
    }
    int rc = 0;
    for (int s = 0; s < sp->n_servers && !rc; s++) {
        int64_t k = 0;
        for (int64_t i = 0; i < u; i++) k += uniq[i] % sp->n_servers == s;
        if (!k) continue;
        prefetch_part *part = malloc(sizeof *part);
        int64_t *pos = malloc(sizeof(int64_t) * (size_t)k);
        size_t len = DG_PS_REQ_HEADER + (size_t)k * 8;
        unsigned char *msg = malloc(len);
        if (!part || !pos || !msg) { free(part); free(pos); free(msg); rc = DG_ENOMEM; break; }
        dg_ps_req_header(msg, DG_PS_OP_SPARSE_PULL, sp->table, (uint32_t)sp->worker, 0);
        for (int64_t i = 0, j = 0; i < u; i++)
            if (uniq[i] % sp->n_servers == s) {
                pos[j] = i;
                dg_ps_put64(msg + DG_PS_REQ_HEADER + 8 * j++, (uint64_t)uniq[i]);
            }
        *part = (prefetch_part){ pf, pos, k, sp->dim };
        pthread_mutex_lock(&pf->mu);
        pf->pending++;
        pthread_mutex_unlock(&pf->mu);
        rc = dg_ps_dense_post(sp->post, s, msg, len, prefetch_reply, part);
        if (rc) {   /* never posted: its reply will not come */
            pthread_mutex_lock(&pf->mu);
            pf->pending--;
            pthread_mutex_unlock(&pf->mu);
            free(pos);
            free(part);
        }
    }
    if (rc) { prefetch_free(pf); return rc; }
    sp->pf = pf;
    return 0;
}

/* The rows of uniq from the prefetch when it was for exactly these ids (*used), with this
 * worker's own gradients pushed since added: SGD's step on them here, other rules' rows pulled
 * again; else nothing (the caller pulls). */
static int take_prefetch(dg_ps_sparse *sp, const int64_t *uniq, int64_t u, float *rows, bool *used) {
    prefetch *pf = sp->pf;
    *used = false;
    if (!pf) return 0;
    sp->pf = NULL;
    prefetch_wait(pf);
    if (pf->u != u || memcmp(pf->ids, uniq, sizeof(int64_t) * (size_t)u) != 0) {
        prefetch_free(pf);
        return 0;
    }
    int rc = pf->rc;
    if (rc) DG_ERR(rc, "sparse lookup: prefetching table %u's rows failed (a malformed reply, or the communicator stopped)", sp->table);
    if (!rc) memcpy(rows, pf->rows, (size_t)u * (size_t)sp->dim * sizeof(float));
    int64_t n_since = rc ? 0 : dg_ps_sparse_table_rows(pf->since), m = 0;
    int64_t *again = n_since && sp->kind != DG_PS_SPARSE_SGD ? malloc(sizeof(int64_t) * (size_t)n_since) : NULL;
    int64_t *where = again ? malloc(sizeof(int64_t) * (size_t)n_since) : NULL;
    if (n_since && sp->kind != DG_PS_SPARSE_SGD && !where) rc = DG_ENOMEM;
    for (int64_t r = 0; !rc && r < n_since; r++) {
        int64_t id = dg_ps_sparse_table_id(pf->since, r);
        const int64_t *hit = bsearch(&id, uniq, (size_t)u, sizeof(int64_t), cmp_i64);
        if (!hit) continue;
        float *row = rows + (hit - uniq) * sp->dim;
        if (sp->kind == DG_PS_SPARSE_SGD) {
            const float *g = dg_ps_sparse_table_row_at(pf->since, r);
            for (int64_t j = 0; j < sp->dim; j++) row[j] -= (float)sp->lr * g[j];
        } else {
            again[m] = id, where[m++] = hit - uniq;
        }
    }
    float *fresh = m ? malloc((size_t)m * (size_t)sp->dim * sizeof(float)) : NULL;
    if (!rc && m && !fresh) rc = DG_ENOMEM;
    if (!rc && m) rc = dg_ps_dense_flush_posts(sp->post);   /* those pushes must have reached the servers */
    if (!rc && m) rc = pull_rows(sp, again, m, fresh);
    for (int64_t i = 0; !rc && i < m; i++) memcpy(rows + where[i] * sp->dim, fresh + i * sp->dim, (size_t)sp->dim * sizeof(float));
    free(fresh);
    free(again);
    free(where);
    prefetch_free(pf);
    *used = !rc;
    return rc;
}

void dg_ps_sparse_post_through(dg_ps_sparse *sp, dg_ps_dense *d) { sp->post = dg_ps_dense_has_communicator(d) ? d : NULL; }

void dg_ps_sparse_free(dg_ps_sparse *sp) {
    if (!sp) return;
    prefetch_free(sp->pf);
    for (int p = 0; p < sp->n_pend; p++) {
        free(sp->pend[p].ids);
        dg_tensor_free(sp->pend[p].rows);
    }
    free(sp->pend);
    dg_ps_sparse_table_free(sp->local);
    dg_ps_sparse_table_free(sp->base);
    free(sp);
}

