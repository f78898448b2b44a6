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

static struct {
    bool on;
    dg_ps_env env;
    bool sync;
    double timeout_s;
    dg_ps_transport *tr;       /* a worker's (connected) or a server's (bound in run_server) */
    dg_ps_server *server;
    dg_ps_dense *dense;
    bool stopped;
} g_ps;

int dg_fleet_ps_init(const dg_fleet_strategy *st) {
    if (g_ps.on) return 0;
    dg_ps_env e;
    int rc = dg_ps_env_read(&e);
    if (rc) return rc;
    g_ps.env = e;
    g_ps.sync = st->sync_mode;
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
    DG_CHECK_INT(!dirname, "fleet_init_server: loading tables from '%s' is not supported yet: servers start empty and take "
                 "the first worker's values", dirname);
    if (g_ps.server) return 0;
    g_ps.server = dg_ps_server_new(g_ps.env.n_workers);
    return g_ps.server ? 0 : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
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

int dg_fleet_init_worker(void) {
    DG_CHECK_INT(g_ps.on && g_ps.env.role == DG_PS_WORKER, "fleet_init_worker: this process is not a parameter-server "
                 "worker (call dg_fleet_init(false, ...) in a process whose role is TRAINER)");
    if (g_ps.tr) return 0;
    dg_ps_transport *tr = dg_ps_zmq_transport(DG_PS_MAX_MSG_DEFAULT);
    if (!tr) return dg_last_status() ? dg_last_status() : DG_ECOMM;
    const char **eps = malloc(sizeof *eps * (size_t)g_ps.env.n_servers);
    int rc = eps ? 0 : DG_ENOMEM;
    for (int i = 0; !rc && i < g_ps.env.n_servers; i++) eps[i] = g_ps.env.servers[i];
    if (!rc) rc = tr->ops->connect(tr, g_ps.env.n_servers, eps);
    free(eps);
    if (rc) { tr->ops->destroy(tr); return rc; }
    g_ps.tr = tr;
    return 0;
}

static int remote_step(void *ctx) { return dg_ps_dense_step(ctx); }

int dg_fleet_ps_distributed_optimizer(dg_optimizer *opt) {
    DG_CHECK_INT(g_ps.tr, "fleet_distributed_optimizer: call dg_fleet_init_worker first (parameter-server mode)");
    DG_CHECK_INT(!g_ps.dense, "fleet_distributed_optimizer: this worker already has its dense table (one optimizer per job)");
    dg_ps_dense *d = dg_ps_dense_new(g_ps.tr, g_ps.env.n_servers, g_ps.env.worker_id, g_ps.env.n_workers, 0, g_ps.sync,
                                     g_ps.timeout_s, opt);
    if (!d) return dg_last_status() ? dg_last_status() : DG_ECOMM;
    g_ps.dense = d;
    opt->remote_step = remote_step;
    opt->remote_ctx = d;
    return 0;
}

int dg_fleet_stop_worker(void) {
    DG_CHECK_INT(g_ps.tr, "fleet_stop_worker: call dg_fleet_init_worker first");
    if (g_ps.stopped) return 0;
    g_ps.stopped = true;
    return dg_ps_stop_worker(g_ps.tr, g_ps.env.n_servers, g_ps.env.worker_id, g_ps.timeout_s);
}

void dg_fleet_ps_shutdown(void) {
    dg_ps_dense_free(g_ps.dense);
    if (g_ps.tr) g_ps.tr->ops->destroy(g_ps.tr);
    dg_ps_server_free(g_ps.server);
    dg_ps_env_clear(&g_ps.env);
    memset(&g_ps, 0, sizeof g_ps);
}
