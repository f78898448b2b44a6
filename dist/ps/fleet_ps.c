/* dist/ps/fleet_ps.c — fleet's parameter-server mode (fleet.init(is_collective=False)): the role
 * from the environment (env.c), a server's run loop over the ZeroMQ transport (server.c answers),
 * and a worker's connection, its dense table (client.c) behind dg_optimizer_step, and its stop.
 *
 *   server: dg_fleet_init_server(NULL); dg_fleet_run_server();   returns when every worker stopped
 *   worker: dg_fleet_init_worker(); opt = dg_fleet_distributed_optimizer(opt);
 *           ... dg_backward(loss); dg_optimizer_step(opt); dg_optimizer_clear_grad(opt); ...
 *           dg_fleet_stop_worker();                                (Paddle's exe.close()) */
#include "../dist_internal.h"
#include "../../optim/optim_internal.h"
#include "client.h"
#include "env.h"
#include "fleet_ps.h"
#include "server.h"
#include "transport.h"
#include <errno.h>
#include <sys/stat.h>

static struct {
    bool on;
    dg_ps_env env;
    dg_ps_mode mode;
    double timeout_s;
    dg_ps_transport *tr;       /* a worker's (connected) or a server's (bound in run_server) */
    dg_ps_server *server;
    dg_ps_dense *dense;
    bool stopped;
    /* the sparse embedding layers made on this worker, in order (table i + 1), and their tables
     * once dg_fleet_distributed_optimizer made them */
    struct sparse_layer **sparse;
    int n_sparse;
} g_ps;

typedef struct sparse_layer {
    int64_t dim;
    dg_fleet_sparse_params p;
    dg_ps_sparse *table;     /* NULL until distributed_optimizer; NULL again after shutdown */
    int index;
} sparse_layer;

static dg_ps_transport *open_connected(void);

int dg_fleet_ps_init(const dg_fleet_strategy *st) {
    if (g_ps.on) return 0;
    DG_CHECK_INT(st->k_steps >= 0, "fleet_init: strategy k_steps must be >= 0, got %d", st->k_steps);
    DG_CHECK_INT(!(st->sync_mode && st->k_steps > 0), "fleet_init: strategy k_steps %d (geo mode) needs sync_mode false "
                 "(Paddle's a_sync = True with a_sync_configs k_steps)", st->k_steps);
    dg_ps_env e;
    int rc = dg_ps_env_read(&e);
    if (rc) return rc;
    g_ps.env = e;
    g_ps.mode = (dg_ps_mode){ st->sync_mode ? DG_PS_MODE_SYNC : st->k_steps > 0 ? DG_PS_MODE_GEO : DG_PS_MODE_ASYNC, st->k_steps,
                              open_connected };
    g_ps.timeout_s = dg_dist_timeout(st->timeout_s);
    g_ps.on = true;
    return 0;
}

bool dg_fleet_ps_on(void) { return g_ps.on; }
int dg_fleet_ps_worker_index(void) { return g_ps.env.role == DG_PS_WORKER ? g_ps.env.worker_id : -1; }
int dg_fleet_ps_worker_num(void) { return g_ps.env.n_workers; }

bool dg_fleet_is_server(void) { return g_ps.on && g_ps.env.role == DG_PS_SERVER; }
bool dg_fleet_is_worker(void) { return !g_ps.on || g_ps.env.role == DG_PS_WORKER; }
int dg_fleet_server_index(void) { return g_ps.on && g_ps.env.role == DG_PS_SERVER ? g_ps.env.server_index : -1; }
int dg_fleet_server_num(void) { return g_ps.on ? g_ps.env.n_servers : 0; }
const char *dg_fleet_server_endpoint(int i) {
    return g_ps.on && i >= 0 && i < g_ps.env.n_servers ? g_ps.env.servers[i] : NULL;
}

int dg_fleet_init_server(const char *dirname) {
    DG_CHECK_INT(dg_fleet_is_server(), "fleet_init_server: this process is not a server (call dg_fleet_init(false, ...) "
                 "in a process whose TRAINING_ROLE / PADDLE_TRAINING_ROLE is PSERVER)");
    if (g_ps.server) return 0;
    g_ps.server = dg_ps_server_new(g_ps.env.n_workers);
    if (!g_ps.server) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    int rc = dirname ? dg_ps_server_load(g_ps.server, dirname, g_ps.env.server_index, g_ps.env.n_servers) : 0;
    if (rc) {
        dg_ps_server_free(g_ps.server);
        g_ps.server = NULL;
    }
    return rc;
}

/* The serve loop's stop flag: polled by the transport at least every 100 ms; set once every
 * worker has said STOP (after that request's reply has been sent). */
typedef struct { dg_ps_server *s; volatile bool *stop; } serve_ctx;
static int handle_then_check(void *ctx, const void *msg, size_t len, void **reply, size_t *reply_len) {
    serve_ctx *c = ctx;
    int rc = dg_ps_server_handle(c->s, msg, len, reply, reply_len);
    if (dg_ps_server_done(c->s)) *c->stop = true;
    return rc;
}

int dg_fleet_run_server(void) {
    DG_CHECK_INT(g_ps.server, "fleet_run_server: call dg_fleet_init_server first");
    dg_ps_transport *tr = dg_ps_zmq_transport(DG_PS_MAX_MSG_DEFAULT);
    if (!tr) return dg_last_status() ? dg_last_status() : DG_ECOMM;
    int rc = tr->ops->bind(tr, g_ps.env.current);
    volatile bool stop = false;
    serve_ctx c = { g_ps.server, &stop };
    if (!rc) rc = tr->ops->serve(tr, handle_then_check, &c, &stop);
    tr->ops->destroy(tr);
    return rc;
}

/* A ZeroMQ transport connected to every server; NULL with the error set. */
static dg_ps_transport *open_connected(void) {
    dg_ps_transport *tr = dg_ps_zmq_transport(DG_PS_MAX_MSG_DEFAULT);
    if (!tr) return NULL;
    const char **eps = malloc(sizeof *eps * (size_t)g_ps.env.n_servers);
    int rc = eps ? 0 : DG_ENOMEM;
    for (int i = 0; !rc && i < g_ps.env.n_servers; i++) eps[i] = g_ps.env.servers[i];
    if (!rc) rc = tr->ops->connect(tr, g_ps.env.n_servers, eps);
    free(eps);
    if (rc) { tr->ops->destroy(tr); return NULL; }
    return tr;
}

int dg_fleet_init_worker(void) {
    DG_CHECK_INT(g_ps.on && g_ps.env.role == DG_PS_WORKER, "fleet_init_worker: this process is not a parameter-server "
                 "worker (call dg_fleet_init(false, ...) in a process whose role is TRAINER)");
    if (g_ps.tr) return 0;
    g_ps.tr = open_connected();
    return g_ps.tr ? 0 : dg_last_status() ? dg_last_status() : DG_ECOMM;
}

/* the step: every sparse table's row gradients, then the dense push and pull */
static int remote_step(void *ctx) {
    for (int i = 0; i < g_ps.n_sparse; i++) {
        int rc = g_ps.sparse[i]->table ? dg_ps_sparse_push(g_ps.sparse[i]->table) : 0;
        if (rc) return rc;
    }
    return dg_ps_dense_step(ctx);
}

static const dg_layer_class sparse_embedding_class = DG_LAYER_CLASS("SparseEmbedding");

static dg_tensor *sparse_forward(dg_layer *self, const dg_tensor *ids) {
    sparse_layer *s = dg_layer_user(self);
    if (!s->table)
        return DG_LAYER_ERROR(self, "its table is made on the servers by dg_fleet_distributed_optimizer: call that first");
    return dg_ps_sparse_lookup(s->table, ids);
}

static void sparse_free(void *user) {
    sparse_layer *s = user;
    for (int i = 0; i < g_ps.n_sparse; i++)
        if (g_ps.sparse[i] == s) g_ps.sparse[i] = NULL;
    dg_ps_sparse_free(s->table);
    free(s);
}

dg_fleet_sparse_params dg_fleet_sparse_default_params(void) {
    return (dg_fleet_sparse_params){ .params_tag = DG_PARAMS_TAG, .seed = 0, .init_range = 0.05, .entry_count = 0 };
}

dg_layer *dg_fleet_sparse_embedding(int64_t dim, dg_fleet_sparse_params p) {
    DG_CHECK_PARAMS("fleet_sparse_embedding", p, dg_fleet_sparse_default_params);
    DG_CHECK(g_ps.on && g_ps.env.role == DG_PS_WORKER, "fleet_sparse_embedding: a table on parameter servers needs a worker of "
             "a parameter-server job (dg_fleet_init(false, ...) with the role TRAINER)");
    DG_CHECK(dim >= 1 && dim <= 65536, "fleet_sparse_embedding: dim %lld (1..65536)", (long long)dim);
    DG_CHECK(p.init_range >= 0 && isfinite(p.init_range), "fleet_sparse_embedding: init_range %g must be >= 0", p.init_range);
    DG_CHECK(p.entry_count >= 0 && p.entry_count <= UINT32_MAX, "fleet_sparse_embedding: entry_count %lld (0..%u)",
             (long long)p.entry_count, UINT32_MAX);
    DG_CHECK(!g_ps.dense, "fleet_sparse_embedding: make the sparse layers before dg_fleet_distributed_optimizer");
    DG_CHECK(g_ps.n_sparse < DG_PS_MAX_TABLES - 1, "fleet_sparse_embedding: at most %d sparse tables", DG_PS_MAX_TABLES - 1);
    sparse_layer *s = calloc(1, sizeof *s);
    struct sparse_layer **list = realloc(g_ps.sparse, sizeof *list * (size_t)(g_ps.n_sparse + 1));
    if (!s || !list) { free(s); if (list) g_ps.sparse = list; DG_ERR(DG_ENOMEM, "fleet_sparse_embedding: out of memory"); return NULL; }
    g_ps.sparse = list;
    *s = (sparse_layer){ dim, p, NULL, g_ps.n_sparse };
    dg_layer *l = dg_layer_new(&sparse_embedding_class, sparse_forward, s, sparse_free);
    if (!l) { free(s); return NULL; }
    g_ps.sparse[g_ps.n_sparse++] = s;
    return l;
}

int dg_fleet_sparse_prefetch(dg_layer *emb, const dg_tensor *ids) {
    DG_CHECK_INT(emb && dg_layer_class_of(emb) == &sparse_embedding_class, "fleet_sparse_prefetch: the layer is not a "
                 "dg_fleet_sparse_embedding");
    DG_CHECK_TENSOR_INT("fleet_sparse_prefetch", ids);
    sparse_layer *s = dg_layer_user(emb);
    DG_CHECK_INT(s->table, "fleet_sparse_prefetch: the table is made by dg_fleet_distributed_optimizer: call that first");
    return dg_ps_sparse_prefetch(s->table, ids);
}

void dg_fleet_sparse_initial_row(uint64_t seed, double init_range, int64_t id, int64_t dim, float *out) {
    dg_ps_sparse_init_row(seed, init_range, id, dim, out);
}

int dg_fleet_ps_distributed_optimizer(dg_optimizer *opt) {
    DG_CHECK_INT(g_ps.tr, "fleet_distributed_optimizer: call dg_fleet_init_worker first (parameter-server mode)");
    DG_CHECK_INT(!g_ps.dense, "fleet_distributed_optimizer: this worker already has its dense table (one optimizer per job)");
    /* the sparse tables take the optimizer's rule (SGD, Adagrad or Adam) and settings for their rows */
    DG_CHECK_INT(!g_ps.n_sparse || opt->kind == DG_OPT_SGD || opt->kind == DG_OPT_ADAGRAD || opt->kind == DG_OPT_ADAM,
                 "fleet_distributed_optimizer: %s cannot step sparse rows on the servers (SGD, Adagrad and Adam can)", opt->info->name);
    DG_CHECK_INT(!g_ps.n_sparse || opt->kind != DG_OPT_ADAM || (!opt->amsgrad && opt->groups[0].weight_decay == 0),
                 "fleet_distributed_optimizer: sparse rows are stepped by plain Adam (no amsgrad, no weight_decay)");
    for (int i = 0; i < g_ps.n_sparse; i++) {
        sparse_layer *s = g_ps.sparse[i];
        if (!s || s->table) continue;
        dg_ps_sparse_msg m = { .dim = (uint32_t)s->dim,
                               .kind = opt->kind == DG_OPT_ADAGRAD ? DG_PS_SPARSE_ADAGRAD : opt->kind == DG_OPT_ADAM ? DG_PS_SPARSE_ADAM
                                                                                                              : DG_PS_SPARSE_SGD,
                               .seed = s->p.seed, .lr = opt->groups[0].lr, .eps = opt->eps, .init_acc = opt->init_acc,
                               .init_range = s->p.init_range, .entry = (uint32_t)s->p.entry_count,
                               .beta1 = opt->kind == DG_OPT_ADAM ? opt->beta1 : 0, .beta2 = opt->kind == DG_OPT_ADAM ? opt->beta2 : 0 };
        s->table = dg_ps_sparse_new(g_ps.tr, g_ps.env.n_servers, g_ps.env.worker_id, g_ps.env.n_workers, (uint32_t)(i + 1),
                                    g_ps.mode, g_ps.timeout_s, &m);
        if (!s->table) return dg_last_status() ? dg_last_status() : DG_ECOMM;
    }
    dg_ps_dense *d = dg_ps_dense_new(g_ps.tr, g_ps.env.n_servers, g_ps.env.worker_id, g_ps.env.n_workers, 0, g_ps.mode,
                                     g_ps.timeout_s, opt);
    if (!d) return dg_last_status() ? dg_last_status() : DG_ECOMM;
    g_ps.dense = d;
    for (int i = 0; i < g_ps.n_sparse; i++)   /* async: their pushes and prefetches ride the communicator */
        if (g_ps.sparse[i] && g_ps.sparse[i]->table) dg_ps_sparse_post_through(g_ps.sparse[i]->table, d);
    opt->remote_step = remote_step;
    opt->remote_ctx = d;
    return 0;
}

/* Whatever a worker still holds goes to the servers now: geo mode's changes since the last
 * exchange, async mode's gradients queued for the communicator. */
static int flush_tables(void) {
    int rc = 0;
    for (int i = 0; i < g_ps.n_sparse && !rc; i++)
        if (g_ps.sparse[i] && g_ps.sparse[i]->table) rc = dg_ps_sparse_geo_exchange(g_ps.sparse[i]->table);
    if (!rc && g_ps.dense) rc = dg_ps_dense_geo_exchange(g_ps.dense);
    if (!rc && g_ps.dense) rc = dg_ps_dense_flush(g_ps.dense);
    return rc;
}

int dg_fleet_save_persistables(const char *dirname) {
    DG_CHECK_INT(dirname && *dirname, "fleet_save_persistables: no directory");
    DG_CHECK_INT(g_ps.tr, "fleet_save_persistables: call dg_fleet_init_worker first");
    int rc = flush_tables();
    if (rc) return rc;
    if (g_ps.env.worker_id != 0) return 0;   /* the first worker asks, as Paddle's fleet does */
    if (mkdir(dirname, 0777) != 0 && errno != EEXIST) {
        DG_ERR(DG_EIO, "fleet_save_persistables: mkdir %s: %s", dirname, strerror(errno));
        return DG_EIO;
    }
    return dg_ps_save(g_ps.tr, g_ps.env.n_servers, g_ps.env.worker_id, g_ps.timeout_s, dirname);
}

int64_t dg_fleet_shrink(int64_t max_age) {
    DG_CHECK_INT(g_ps.tr, "fleet_shrink: call dg_fleet_init_worker first");
    DG_CHECK_INT(max_age >= 0, "fleet_shrink: max_age %lld must be >= 0", (long long)max_age);
    int64_t dropped = 0;
    for (int s = 0; s < g_ps.env.n_servers; s++) {
        int64_t n = dg_ps_evict(g_ps.tr, s, g_ps.env.worker_id, g_ps.timeout_s, (uint64_t)max_age);
        if (n < 0) return n;
        dropped += n;
    }
    return dropped;
}

dg_fleet_traffic dg_fleet_ps_traffic(void) {
    dg_fleet_traffic t;
    dg_ps_traffic(&t.bytes_sent, &t.bytes_received, &t.requests);
    return t;
}

int dg_fleet_stop_worker(void) {
    DG_CHECK_INT(g_ps.tr, "fleet_stop_worker: call dg_fleet_init_worker first");
    if (g_ps.stopped) return 0;
    g_ps.stopped = true;
    int rc = flush_tables();
    if (rc) return rc;
    return dg_ps_stop_worker(g_ps.tr, g_ps.env.n_servers, g_ps.env.worker_id, g_ps.timeout_s);
}

void dg_fleet_ps_shutdown(void) {
    for (int i = 0; i < g_ps.n_sparse; i++)   /* the layers may outlive fleet: their tables do not */
        if (g_ps.sparse[i]) {
            dg_ps_sparse_free(g_ps.sparse[i]->table);
            g_ps.sparse[i]->table = NULL;
        }
    free(g_ps.sparse);
    dg_ps_dense_free(g_ps.dense);
    if (g_ps.tr) g_ps.tr->ops->destroy(g_ps.tr);
    dg_ps_server_free(g_ps.server);
    dg_ps_env_clear(&g_ps.env);
    memset(&g_ps, 0, sizeof g_ps);
}
