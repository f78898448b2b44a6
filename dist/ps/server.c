/* dist/ps/server.c — a parameter server's tables and its request handler (ps_internal.h's
 * dg_ps_handler): a pure function of (the server's state, the request bytes) -> reply bytes.
 *
 * A dense table shard is one float32 leaf tensor with an optimizer of the worker's kind and
 * settings over it (optim/), so the server's step is the same fused update, element for element,
 * as a local dg_optimizer_step: sharding a table changes nothing but where each element lives.
 * Sync mode: the gradients the n workers push for version v are summed in arrival order, scaled
 * by 1/n and stepped once, and the table becomes version v + 1 (a worker pulls with "at least
 * v + 1", and is told NOT_YET until then). Async mode: each push is stepped at once. */
#include "../dist_internal.h"
#include "../../optim/optim_internal.h"
#include "proto.h"
#include <stdarg.h>
#include "env.h"
#include "server_internal.h"

int dg_ps_table_sync_buffers(ps_table *t, int n_workers) {
    if (t->init.mode != DG_PS_MODE_SYNC) return 0;
    t->acc = calloc(t->init.len, sizeof(float));
    t->pushed = calloc((size_t)n_workers, 1);
    return t->acc && t->pushed ? 0 : DG_ENOMEM;
}

dg_ps_server *dg_ps_server_new(int n_workers) {
    DG_CHECK(n_workers >= 1 && n_workers <= DG_PS_MAX_WORKERS, "ps server: %d workers (1..%d)", n_workers, DG_PS_MAX_WORKERS);
    dg_ps_server *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "ps server: out of memory"); return NULL; }
    s->n_workers = n_workers;
    return s;
}

void dg_ps_table_clear(ps_table *t) {
    dg_ps_sparse_table_free(t->sparse);
    dg_ps_sparse_table_free(t->pending);
    dg_optimizer_free(t->opt);
    dg_tensor_free(t->value);
    free(t->acc);
    free(t->pushed);
    memset(t, 0, sizeof *t);
}

void dg_ps_server_free(dg_ps_server *s) {
    if (!s) return;
    for (int i = 0; i < DG_PS_MAX_TABLES; i++) dg_ps_table_clear(&s->t[i]);
    free(s);
}

bool dg_ps_server_done(const dg_ps_server *s) { return s && s->n_stopped >= s->n_workers; }

/* ---- replies ---- */

static int reply_make(int status, uint64_t version, const void *payload, size_t n, void **out, size_t *out_len) {
    unsigned char *r = malloc(DG_PS_REPLY_HEADER + n);
    if (!r) return DG_ENOMEM;
    dg_ps_put32(r, DG_PS_MAGIC);
    dg_ps_put16(r + 4, DG_PS_VERSION);
    dg_ps_put16(r + 6, (uint16_t)status);
    dg_ps_put64(r + 8, version);
    if (n) memcpy(r + DG_PS_REPLY_HEADER, payload, n);
    *out = r;
    *out_len = DG_PS_REPLY_HEADER + n;
    return 0;
}

static int reply_error(void **out, size_t *out_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int reply_error(void **out, size_t *out_len, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return reply_make(DG_PS_ERROR, 0, msg, strlen(msg), out, out_len);
}

/* ---- the optimizer a table runs: the worker's, rebuilt from its settings ---- */

dg_optimizer *dg_ps_make_opt(dg_tensor *v, const dg_ps_init_msg *m) {
    switch (m->kind) {
    case DG_OPT_SGD: {
        dg_sgd_params p = dg_sgd_default_params();
        p.lr = m->lr, p.weight_decay = m->weight_decay;
        return dg_sgd(&v, 1, p);
    }
    case DG_OPT_MOMENTUM: {
        dg_momentum_params p = dg_momentum_default_params();
        p.lr = m->lr, p.weight_decay = m->weight_decay, p.momentum = m->momentum, p.dampening = m->dampening;
        p.nesterov = m->nesterov != 0;
        return dg_momentum(&v, 1, p);
    }
    case DG_OPT_ADAGRAD: {
        dg_adagrad_params p = dg_adagrad_default_params();
        p.lr = m->lr, p.weight_decay = m->weight_decay, p.eps = m->eps, p.initial_accumulator_value = m->init_acc;
        p.lr_decay = m->lr_decay;
        return dg_adagrad(&v, 1, p);
    }
    case DG_OPT_ADAM: {
        dg_adam_params p = dg_adam_default_params();
        p.lr = m->lr, p.weight_decay = m->weight_decay, p.beta1 = m->beta1, p.beta2 = m->beta2, p.eps = m->eps;
        p.amsgrad = m->amsgrad != 0;
        return dg_adam(&v, 1, p);
    }
    default:
        DG_ERR(DG_EUNSUPPORTED, "optimizer kind %u is not run on parameter servers (SGD, Momentum, Adagrad, Adam are)", m->kind);
        return NULL;
    }
}

static int op_init(dg_ps_server *s, const dg_ps_req *q, void **out, size_t *out_len) {
    if (q->payload_len < DG_PS_INIT_BYTES)
        return reply_error(out, out_len, "INIT: payload of %zu bytes, the settings alone are %d", q->payload_len, DG_PS_INIT_BYTES);
    dg_ps_init_msg m;
    dg_ps_init_decode(q->payload, &m);
    size_t rest = q->payload_len - DG_PS_INIT_BYTES;
    if (m.len == 0 || m.len > ((uint64_t)1 << 40) / 4 || rest != m.len * 4 || m.offset > m.total || m.len > m.total - m.offset)
        return reply_error(out, out_len, "INIT: table %u: shard [%llu, +%llu) of %llu elements with %zu value bytes", q->table,
                           (unsigned long long)m.offset, (unsigned long long)m.len, (unsigned long long)m.total, rest);
    if (m.mode > DG_PS_MODE_GEO) return reply_error(out, out_len, "INIT: table %u: mode %u", q->table, m.mode);
    if (m.n_workers != (uint32_t)s->n_workers)
        return reply_error(out, out_len, "INIT: table %u: the worker counts %u workers, this server %d", q->table, m.n_workers, s->n_workers);
    ps_table *t = &s->t[q->table];
    if (t->made && t->sparse) return reply_error(out, out_len, "INIT: table %u is sparse", q->table);
    if (t->made) {   /* another worker's INIT: the same geometry, or a mismatch to report */
        if (t->init.total != m.total || t->init.offset != m.offset || t->init.len != m.len || t->init.mode != m.mode ||
            t->init.kind != m.kind || t->init.lr != m.lr)
            return reply_error(out, out_len, "INIT: table %u exists with another geometry or optimizer (%llu elements at %llu)",
                               q->table, (unsigned long long)t->init.len, (unsigned long long)t->init.offset);
        return reply_make(DG_PS_OK, t->version, NULL, 0, out, out_len);
    }
    if (dg_get_device().type != DG_CPU)
        return reply_error(out, out_len, "INIT: table %u: a parameter server keeps its tables on the CPU (its device is not)", q->table);
    t->value = dg_from_data(DG_SHAPE((int64_t)m.len), DG_F32, q->payload + DG_PS_INIT_BYTES);
    if (t->value) dg_set_requires_grad(t->value, true);
    t->opt = t->value ? dg_ps_make_opt(t->value, &m) : NULL;
    t->init = m;
    if (!t->opt || dg_ps_table_sync_buffers(t, s->n_workers)) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", dg_last_error());
        dg_ps_table_clear(t);
        return reply_error(out, out_len, "INIT: table %u: %s", q->table, msg);
    }
    t->made = true;
    return reply_make(DG_PS_OK, 0, NULL, 0, out, out_len);
}

/* One optimizer step of table t with gradient g (len floats). */
static int step(ps_table *t, const float *g, char *why, size_t cap) {
    dg_scope *sc = dg_scope_begin();
    dg_tensor *gt = dg_from_data(DG_SHAPE((int64_t)t->init.len), DG_F32, g);
    int rc = gt ? dg_set_grad(t->value, gt) : DG_ENOMEM;
    if (!rc) rc = dg_optimizer_step(t->opt);
    if (rc) snprintf(why, cap, "%s", dg_last_error());
    dg_clear_grad(t->value);
    dg_scope_end(sc);
    if (!rc) t->version++;
    return rc;
}

static int op_push(dg_ps_server *s, const dg_ps_req *q, void **out, size_t *out_len) {
    ps_table *t = &s->t[q->table];
    if (!t->made) return reply_error(out, out_len, "PUSH: table %u was never initialised", q->table);
    if (t->sparse) return reply_error(out, out_len, "PUSH: table %u is sparse", q->table);
    if (q->payload_len != t->init.len * 4)
        return reply_error(out, out_len, "PUSH: table %u: %zu gradient bytes for a shard of %llu elements", q->table,
                           q->payload_len, (unsigned long long)t->init.len);
    float *g = malloc(t->init.len * sizeof(float));
    if (!g) return DG_ENOMEM;
    memcpy(g, q->payload, t->init.len * sizeof(float));
    char why[400] = "";
    int rc = 0;
    if (t->init.mode == DG_PS_MODE_GEO) {
        free(g);
        return reply_error(out, out_len, "PUSH: table %u is a geo table: it takes parameter deltas (GEO_PUSH)", q->table);
    } else if (t->init.mode == DG_PS_MODE_ASYNC) {
        rc = step(t, g, why, sizeof why);
    } else {
        if (q->arg != t->version) {
            free(g);
            return reply_error(out, out_len, "PUSH: table %u: worker %u pushed for version %llu; the table is at %llu", q->table,
                               q->worker, (unsigned long long)q->arg, (unsigned long long)t->version);
        }
        if (t->pushed[q->worker]) {
            free(g);
            return reply_error(out, out_len, "PUSH: table %u: worker %u pushed twice for version %llu", q->table, q->worker,
                               (unsigned long long)t->version);
        }
        for (uint64_t i = 0; i < t->init.len; i++) t->acc[i] += g[i];
        t->pushed[q->worker] = 1;
        if (++t->n_pushed == (uint32_t)s->n_workers) {
            /* the mean of the workers' mean gradients = the gradient of the mean loss over their
             * concatenated batches (equal batch sizes) */
            float inv = 1.0f / (float)s->n_workers;
            for (uint64_t i = 0; i < t->init.len; i++) g[i] = t->acc[i] * inv;
            rc = step(t, g, why, sizeof why);
            memset(t->acc, 0, t->init.len * sizeof(float));
            memset(t->pushed, 0, (size_t)s->n_workers);
            t->n_pushed = 0;
        }
    }
    free(g);
    if (rc) return reply_error(out, out_len, "PUSH: table %u: the step failed: %s", q->table, why);
    return reply_make(DG_PS_OK, t->version, NULL, 0, out, out_len);
}

static int op_pull(dg_ps_server *s, const dg_ps_req *q, void **out, size_t *out_len) {
    ps_table *t = &s->t[q->table];
    if (!t->made) return reply_make(DG_PS_NOT_YET, 0, NULL, 0, out, out_len);   /* its INIT may be on its way */
    if (t->sparse) return reply_error(out, out_len, "PULL: table %u is sparse", q->table);
    if (t->version < q->arg) return reply_make(DG_PS_NOT_YET, t->version, NULL, 0, out, out_len);
    return reply_make(DG_PS_OK, t->version, dg_tensor_ptr(t->value), t->init.len * sizeof(float), out, out_len);
}

/* ---- sparse tables ---- */

static dg_ps_sparse_table *pending_new(const dg_ps_sparse_msg *m) {
    dg_ps_sparse_msg z = *m;
    z.init_range = 0;   /* rows start at zero: sums of gradients */
    z.kind = DG_PS_SPARSE_SGD;
    return dg_ps_sparse_table_new(&z);
}

static int op_sparse_init(dg_ps_server *s, const dg_ps_req *q, void **out, size_t *out_len) {
    if (q->payload_len != DG_PS_SPARSE_BYTES)
        return reply_error(out, out_len, "SPARSE_INIT: payload of %zu bytes, want %d", q->payload_len, DG_PS_SPARSE_BYTES);
    dg_ps_sparse_msg m;
    dg_ps_sparse_decode(q->payload, &m);
    bool betas = m.kind != DG_PS_SPARSE_ADAM || (m.beta1 >= 0 && m.beta1 < 1 && m.beta2 >= 0 && m.beta2 < 1);
    if (m.dim == 0 || m.dim > 65536 || m.kind > DG_PS_SPARSE_ADAM || m.mode > DG_PS_MODE_GEO || m.pad != 0 || !betas || !(m.lr >= 0) || !(m.init_range >= 0) || !(m.eps >= 0))
        return reply_error(out, out_len, "SPARSE_INIT: table %u: dim %u, rule %u, mode %u, lr %g, init_range %g are not a table",
                           q->table, m.dim, m.kind, m.mode, m.lr, m.init_range);
    if (m.n_workers != (uint32_t)s->n_workers)
        return reply_error(out, out_len, "SPARSE_INIT: table %u: the worker counts %u workers, this server %d", q->table, m.n_workers,
                           s->n_workers);
    ps_table *t = &s->t[q->table];
    if (t->made) {
        const dg_ps_sparse_msg *h = t->sparse ? dg_ps_sparse_table_settings(t->sparse) : NULL;
        if (!h || memcmp(h, &m, sizeof m) != 0)
            return reply_error(out, out_len, "SPARSE_INIT: table %u exists with other settings%s", q->table, h ? "" : " (it is dense)");
        return reply_make(DG_PS_OK, t->version, NULL, 0, out, out_len);
    }
    t->sparse = dg_ps_sparse_table_new(&m);
    if (m.mode == DG_PS_MODE_SYNC) t->pending = pending_new(&m);
    t->pushed = calloc((size_t)s->n_workers, 1);
    if (!t->sparse || (m.mode == DG_PS_MODE_SYNC && !t->pending) || !t->pushed) {
        dg_ps_table_clear(t);
        return DG_ENOMEM;
    }
    t->init.mode = m.mode;
    t->made = true;
    return reply_make(DG_PS_OK, 0, NULL, 0, out, out_len);
}

static int op_sparse_pull(dg_ps_server *s, const dg_ps_req *q, void **out, size_t *out_len) {
    ps_table *t = &s->t[q->table];
    if (!t->made) return reply_make(DG_PS_NOT_YET, 0, NULL, 0, out, out_len);
    if (!t->sparse) return reply_error(out, out_len, "SPARSE_PULL: table %u is dense", q->table);
    if (t->version < q->arg) return reply_make(DG_PS_NOT_YET, t->version, NULL, 0, out, out_len);
    if (q->payload_len % 8) return reply_error(out, out_len, "SPARSE_PULL: %zu id bytes are not whole int64s", q->payload_len);
    size_t n = q->payload_len / 8, dim = dg_ps_sparse_table_settings(t->sparse)->dim;
    if (n > ((size_t)1 << 28) / dim) return reply_error(out, out_len, "SPARSE_PULL: %zu ids of %zu floats: too many", n, dim);
    float *rows = malloc(n * dim * sizeof(float) + 1);
    if (!rows) return DG_ENOMEM;
    uint32_t entry = dg_ps_sparse_table_settings(t->sparse)->entry;
    for (size_t i = 0; i < n; i++) {
        int64_t k = dg_ps_sparse_table_index(t->sparse, (int64_t)dg_ps_get64(q->payload + 8 * i));
        if (k < 0) { free(rows); return DG_ENOMEM; }
        dg_ps_row_meta *meta = dg_ps_sparse_table_meta_at(t->sparse, k);
        meta->last = t->version;
        if (meta->count < entry) memset(rows + i * dim, 0, dim * sizeof(float));   /* not entered yet */
        else memcpy(rows + i * dim, dg_ps_sparse_table_row_at(t->sparse, k), dim * sizeof(float));
    }
    int rc = reply_make(DG_PS_OK, t->version, rows, n * dim * sizeof(float), out, out_len);
    free(rows);
    return rc;
}

/* A push of rows (u64 n, n ids, n rows of the table's width) to sparse table t: *ok with *n set,
 * or not *ok and the error reply made (its status returned). */
static int rows_payload(const ps_table *t, const dg_ps_req *q, const char *op, uint64_t *n, bool *ok, void **out, size_t *out_len) {
    *ok = false;
    if (!t->made || !t->sparse) return reply_error(out, out_len, "%s: table %u is %s", op, q->table, t->made ? "dense" : "not made");
    size_t dim = dg_ps_sparse_table_settings(t->sparse)->dim;
    if (q->payload_len < 8) return reply_error(out, out_len, "%s: no id count", op);
    *n = dg_ps_get64(q->payload);
    if (*n > ((uint64_t)1 << 28) / dim || q->payload_len != 8 + *n * 8 + *n * dim * sizeof(float))
        return reply_error(out, out_len, "%s: table %u: %llu ids of %zu floats do not fill %zu bytes", op, q->table,
                           (unsigned long long)*n, dim, q->payload_len);
    *ok = true;
    return 0;
}

static int op_sparse_push(dg_ps_server *s, const dg_ps_req *q, void **out, size_t *out_len) {
    ps_table *t = &s->t[q->table];
    uint64_t n = 0;
    bool ok;
    int bad = rows_payload(t, q, "SPARSE_PUSH", &n, &ok, out, out_len);
    if (!ok) return bad;
    size_t dim = dg_ps_sparse_table_settings(t->sparse)->dim;
    if (t->init.mode == DG_PS_MODE_GEO)
        return reply_error(out, out_len, "SPARSE_PUSH: table %u is a geo table: it takes row deltas (SPARSE_GEO_PUSH)", q->table);
    bool sync = t->pending != NULL;
    if (sync && q->arg != t->version)
        return reply_error(out, out_len, "SPARSE_PUSH: table %u: worker %u pushed for version %llu; the table is at %llu", q->table,
                           q->worker, (unsigned long long)q->arg, (unsigned long long)t->version);
    if (sync && t->pushed[q->worker])
        return reply_error(out, out_len, "SPARSE_PUSH: table %u: worker %u pushed twice for version %llu", q->table, q->worker,
                           (unsigned long long)t->version);
    float *g = malloc(dim * sizeof(float));
    if (!g) return DG_ENOMEM;
    const unsigned char *ids = q->payload + 8, *grads = ids + n * 8;
    uint32_t entry = dg_ps_sparse_table_settings(t->sparse)->entry;
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        int64_t id = (int64_t)dg_ps_get64(ids + 8 * i), k = dg_ps_sparse_table_index(t->sparse, id);
        if (k < 0) { rc = DG_ENOMEM; break; }
        dg_ps_row_meta *meta = dg_ps_sparse_table_meta_at(t->sparse, k);
        meta->count++;
        meta->last = t->version;
        memcpy(g, grads + i * dim * sizeof(float), dim * sizeof(float));
        if (sync) {
            float *acc = dg_ps_sparse_table_row(t->pending, id);
            if (!acc) rc = DG_ENOMEM;
            else for (size_t j = 0; j < dim; j++) acc[j] += g[j];
        } else if (meta->count >= entry) {   /* a row below the entry threshold only counts */
            rc = dg_ps_sparse_table_step_at(t->sparse, k, g);
        }
    }
    if (!rc && !sync) t->version++;
    if (!rc && sync) {
        t->pushed[q->worker] = 1;
        if (++t->n_pushed == (uint32_t)s->n_workers) {
            float inv = 1.0f / (float)s->n_workers;
            for (int64_t k = 0; k < dg_ps_sparse_table_rows(t->pending) && !rc; k++) {
                const float *sum = dg_ps_sparse_table_row_at(t->pending, k);
                for (size_t j = 0; j < dim; j++) g[j] = sum[j] * inv;
                int64_t r = dg_ps_sparse_table_index(t->sparse, dg_ps_sparse_table_id(t->pending, k));
                if (r < 0) rc = DG_ENOMEM;
                else if (dg_ps_sparse_table_meta_at(t->sparse, r)->count >= entry) rc = dg_ps_sparse_table_step_at(t->sparse, r, g);
            }
            dg_ps_sparse_table *fresh = rc ? NULL : pending_new(dg_ps_sparse_table_settings(t->sparse));
            if (!rc && !fresh) rc = DG_ENOMEM;
            if (!rc) {
                dg_ps_sparse_table_free(t->pending);
                t->pending = fresh;
                memset(t->pushed, 0, (size_t)s->n_workers);
                t->n_pushed = 0;
                t->version++;
            }
        }
    }
    free(g);
    if (rc) return rc;
    return reply_make(DG_PS_OK, t->version, NULL, 0, out, out_len);
}

/* ---- geo mode: the workers step locally and send what their parameters moved ---- */

/* GEO_PUSH: payload = `len` f32 deltas, added to the shard's values (a worker sends its local
 * change since its last exchange, already divided by the number of workers, as Paddle's geo
 * communicator does). */
static int op_geo_push(dg_ps_server *s, const dg_ps_req *q, void **out, size_t *out_len) {
    ps_table *t = &s->t[q->table];
    if (!t->made || t->sparse || t->init.mode != DG_PS_MODE_GEO)
        return reply_error(out, out_len, "GEO_PUSH: table %u is %s", q->table,
                           !t->made ? "not made" : t->sparse ? "sparse" : "not a geo table");
    if (q->payload_len != t->init.len * 4)
        return reply_error(out, out_len, "GEO_PUSH: table %u: %zu delta bytes for a shard of %llu elements", q->table,
                           q->payload_len, (unsigned long long)t->init.len);
    float *v = dg_tensor_ptr(t->value);
    for (uint64_t i = 0; i < t->init.len; i++) {
        float d;
        memcpy(&d, q->payload + 4 * i, 4);
        v[i] += d;
    }
    t->version++;
    return reply_make(DG_PS_OK, t->version, NULL, 0, out, out_len);
}

/* SPARSE_GEO_PUSH: payload as SPARSE_PUSH's (u64 n, n ids, n rows), the rows being deltas. */
static int op_sparse_geo_push(dg_ps_server *s, const dg_ps_req *q, void **out, size_t *out_len) {
    ps_table *t = &s->t[q->table];
    uint64_t n = 0;
    bool ok;
    int bad = rows_payload(t, q, "SPARSE_GEO_PUSH", &n, &ok, out, out_len);
    if (!ok) return bad;
    if (t->init.mode != DG_PS_MODE_GEO)
        return reply_error(out, out_len, "SPARSE_GEO_PUSH: table %u is not a geo table", q->table);
    size_t dim = dg_ps_sparse_table_settings(t->sparse)->dim;
    const unsigned char *ids = q->payload + 8, *deltas = ids + n * 8;
    for (uint64_t i = 0; i < n; i++) {
        float *row = dg_ps_sparse_table_row(t->sparse, (int64_t)dg_ps_get64(ids + 8 * i));
        if (!row) return DG_ENOMEM;
        for (size_t j = 0; j < dim; j++) {
            float d;
            memcpy(&d, deltas + (i * dim + j) * sizeof(float), 4);
            row[j] += d;
        }
    }
    t->version++;
    return reply_make(DG_PS_OK, t->version, NULL, 0, out, out_len);
}

int dg_ps_server_handle(void *ctx, const void *msg, size_t len, void **reply, size_t *reply_len) {
    dg_ps_server *s = ctx;
    const unsigned char *b = msg;
    if (len < DG_PS_REQ_HEADER) return reply_error(reply, reply_len, "request of %zu bytes: shorter than the header", len);
    if (dg_ps_get32(b) != DG_PS_MAGIC) return reply_error(reply, reply_len, "not a parameter-server request (magic %08x)", dg_ps_get32(b));
    if (dg_ps_get16(b + 4) != DG_PS_VERSION)
        return reply_error(reply, reply_len, "protocol version %u; this server speaks %d", dg_ps_get16(b + 4), DG_PS_VERSION);
    dg_ps_req q = { dg_ps_get16(b + 6), dg_ps_get32(b + 8), dg_ps_get32(b + 12), dg_ps_get64(b + 16), b + DG_PS_REQ_HEADER,
                    len - DG_PS_REQ_HEADER };
    if (dg_ps_get32(b + 24) != 0) return reply_error(reply, reply_len, "reserved header bytes are not zero");
    if (q.worker >= (uint32_t)s->n_workers)
        return reply_error(reply, reply_len, "worker %u: this job has %d workers", q.worker, s->n_workers);
    if (q.op != DG_PS_OP_STOP && q.table >= DG_PS_MAX_TABLES)
        return reply_error(reply, reply_len, "table %u: at most %d tables", q.table, DG_PS_MAX_TABLES);
    switch (q.op) {
    case DG_PS_OP_INIT: return op_init(s, &q, reply, reply_len);
    case DG_PS_OP_PULL: return op_pull(s, &q, reply, reply_len);
    case DG_PS_OP_PUSH: return op_push(s, &q, reply, reply_len);
    case DG_PS_OP_SPARSE_INIT: return op_sparse_init(s, &q, reply, reply_len);
    case DG_PS_OP_SPARSE_PULL: return op_sparse_pull(s, &q, reply, reply_len);
    case DG_PS_OP_SPARSE_PUSH: return op_sparse_push(s, &q, reply, reply_len);
    case DG_PS_OP_GEO_PUSH: return op_geo_push(s, &q, reply, reply_len);
    case DG_PS_OP_EVICT: {
        uint64_t dropped = 0;
        for (int k = 0; k < DG_PS_MAX_TABLES; k++)
            if (s->t[k].made && s->t[k].sparse) dropped += (uint64_t)dg_ps_sparse_table_evict(s->t[k].sparse, s->t[k].version, q.arg);
        unsigned char b[8];
        dg_ps_put64(b, dropped);
        return reply_make(DG_PS_OK, 0, b, 8, reply, reply_len);
    }
    case DG_PS_OP_SPARSE_GEO_PUSH: return op_sparse_geo_push(s, &q, reply, reply_len);
    case DG_PS_OP_SAVE: {
        /* payload: u32 this server's index, u32 the server count, the directory */
        if (q.payload_len < 9 || q.payload_len > 8 + 4000)
            return reply_error(reply, reply_len, "SAVE: payload of %zu bytes", q.payload_len);
        char dir[4001];
        memcpy(dir, q.payload + 8, q.payload_len - 8);
        dir[q.payload_len - 8] = 0;
        if (strlen(dir) != q.payload_len - 8) return reply_error(reply, reply_len, "SAVE: the directory name holds a NUL byte");
        int idx = (int)dg_ps_get32(q.payload), cnt = (int)dg_ps_get32(q.payload + 4);
        if (idx < 0 || cnt < 1 || idx >= cnt || cnt > DG_PS_MAX_SERVERS)
            return reply_error(reply, reply_len, "SAVE: server %d of %d", idx, cnt);
        if (dg_ps_server_save(s, dir, idx, cnt) != 0) return reply_error(reply, reply_len, "SAVE: %s", dg_last_error());
        return reply_make(DG_PS_OK, 0, NULL, 0, reply, reply_len);
    }
    case DG_PS_OP_STOP:
        if (!s->stopped[q.worker]) { s->stopped[q.worker] = 1; s->n_stopped++; }
        return reply_make(DG_PS_OK, 0, NULL, 0, reply, reply_len);
    default: return reply_error(reply, reply_len, "unknown operation %u", q.op);
    }
}
