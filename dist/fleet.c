/* dist/fleet.c — the fleet facade (paddle.distributed.fleet): collective mode's one world
 * communicator per process made by dg_fleet_init, the worker queries, distributed_model /
 * distributed_optimizer, and saving on the first worker only (Paddle's collective FleetAPI guide);
 * parameter-server mode (is_collective false) lives in ps/fleet_ps.c. */
#include "dist_internal.h"
#include "../optim/optim_internal.h"
#include "ps/fleet_ps.h"

static dg_comm *g_comm;
static dg_fleet_strategy g_strategy;
static char *g_endpoints;
static dg_amp_scaler *g_scaler;   /* strategy.amp: made by distributed_optimizer */
static dg_layer *g_dp;            /* the last dg_fleet_distributed_model (borrowed): Local SGD's */
static int local_sgd_step(void *ctx);

dg_fleet_strategy dg_fleet_default_strategy(void) {
    return (dg_fleet_strategy){ .fuse_grad_size_in_MB = 25, .first_bucket_mb = 1, .overlap = false,
                                .find_unused_parameters = false, .timeout_s = DG_FROM_ENV, .amp = false,
                                .amp_configs = dg_amp_default_params(), .sync_mode = true,
                                .use_local_sgd = false, .local_sgd_steps = 1, .local_sgd_is_warm_steps = 0,
                                .use_hierarchical_allreduce = false, .hierarchical_allreduce_inter_nranks = 0,
                                .nccl_comm_num = 1 };
}

int dg_fleet_init(bool is_collective, const dg_fleet_strategy *strategy) {
    if (g_comm) return 0;   /* idempotent, like fleet.init */
    dg_fleet_strategy st = strategy ? *strategy : dg_fleet_default_strategy();
    if (!is_collective) {
        DG_CHECK_INT((st.timeout_s > 0 && isfinite(st.timeout_s)) || st.timeout_s == DG_FROM_ENV,
                     "fleet_init: strategy timeout_s must be > 0 or DG_FROM_ENV, got %g", st.timeout_s);
        DG_CHECK_INT(!st.amp, "fleet_init: strategy.amp is for collective mode; parameter servers keep float32 tables");
        g_strategy = st;
        return dg_fleet_ps_init(&st);
    }
    DG_CHECK_INT(st.fuse_grad_size_in_MB > 0 && isfinite(st.fuse_grad_size_in_MB),
                 "fleet_init: strategy fuse_grad_size_in_MB must be > 0, got %g", st.fuse_grad_size_in_MB);
    DG_CHECK_INT(st.first_bucket_mb > 0 && isfinite(st.first_bucket_mb),
                 "fleet_init: strategy first_bucket_mb must be > 0, got %g", st.first_bucket_mb);
    DG_CHECK_INT((st.timeout_s > 0 && isfinite(st.timeout_s)) || st.timeout_s == DG_FROM_ENV,
                 "fleet_init: strategy timeout_s must be > 0 or DG_FROM_ENV, got %g", st.timeout_s);
    if (st.amp && dg_amp_params_check("fleet_init: strategy amp_configs", st.amp_configs)) return DG_EINVAL;
    DG_CHECK_INT(st.n_recompute_checkpoints >= 0 && (st.n_recompute_checkpoints == 0 || st.recompute_checkpoints),
                 "fleet_init: strategy n_recompute_checkpoints is %d with recompute_checkpoints %s", st.n_recompute_checkpoints,
                 st.recompute_checkpoints ? "given" : "NULL");
    DG_CHECK_INT(!st.recompute || st.n_recompute_checkpoints > 0,
                 "fleet_init: strategy.recompute is on but recompute_checkpoints names no sublayer");
    DG_CHECK_INT(st.local_sgd_steps >= 1 && st.local_sgd_is_warm_steps >= 0, "fleet_init: strategy local_sgd_steps must be >= 1 "
                 "and local_sgd_is_warm_steps >= 0, got %d and %d", st.local_sgd_steps, st.local_sgd_is_warm_steps);
    DG_CHECK_INT(st.nccl_comm_num >= 1 && st.nccl_comm_num <= DG_COMM_MAX_NUM, "fleet_init: strategy nccl_comm_num must be in "
                 "1..%d, got %d", DG_COMM_MAX_NUM, st.nccl_comm_num);
    DG_CHECK_INT(st.hierarchical_allreduce_inter_nranks >= 0, "fleet_init: strategy hierarchical_allreduce_inter_nranks must "
                 "be >= 0 (0: the real nodes), got %d", st.hierarchical_allreduce_inter_nranks);
    g_strategy = st;
    dg_dist_env env;
    int rc = dg_dist_env_read(&env);
    if (rc) return rc;
    free(g_endpoints);
    g_endpoints = env.endpoints ? strdup(env.endpoints) : NULL;
    int env_world = env.world_size;
    dg_dist_env_clear(&env);
    dg_comm_params cp = dg_comm_default_params();
    cp.timeout_s = st.timeout_s;
    cp.hierarchical = st.use_hierarchical_allreduce;
    cp.ranks_per_node = st.hierarchical_allreduce_inter_nranks;
    cp.comm_num = st.nccl_comm_num;
    if (cp.hierarchical && cp.ranks_per_node > 0 && env_world % cp.ranks_per_node != 0) {
        DG_ERR(DG_EINVAL, "fleet_init: strategy hierarchical_allreduce_inter_nranks %d does not divide the world of %d ranks "
               "into whole nodes", cp.ranks_per_node, env_world);
        return DG_EINVAL;
    }
    g_comm = dg_comm_new(cp);
    if (!g_comm) {
        char msg[768];
        snprintf(msg, sizeof msg, "%s", dg_last_error());
        int st = dg_last_status() ? dg_last_status() : DG_ECOMM;
        DG_ERR(st, "fleet_init: %s", msg);
        return st;
    }
    return 0;
}

int dg_fleet_worker_index(void) { return dg_fleet_ps_on() ? dg_fleet_ps_worker_index() : g_comm ? g_comm->rank : 0; }
int dg_fleet_worker_num(void) { return dg_fleet_ps_on() ? dg_fleet_ps_worker_num() : g_comm ? g_comm->size : 1; }
const char *dg_fleet_worker_endpoints(void) { return g_endpoints ? g_endpoints : ""; }
bool dg_fleet_is_first_worker(void) { return dg_fleet_worker_index() == 0; }
dg_comm *dg_fleet_comm(void) { return g_comm; }

dg_layer *dg_fleet_distributed_model(dg_layer *net) {
    if (dg_fleet_ps_on()) return net;   /* the servers hold the parameters: no gradient all-reduce */
    if (!g_comm) { dg_layer_free(net); DG_ERR(DG_ESTATE, "fleet_distributed_model: call dg_fleet_init first"); return NULL; }
    for (int i = 0; g_strategy.recompute && i < g_strategy.n_recompute_checkpoints; i++) {
        const char *name = g_strategy.recompute_checkpoints[i];
        dg_layer *sub = name ? dg_layer_sublayer(net, name) : NULL;
        if (!sub || dg_layer_set_recompute(sub, true)) {
            if (!sub) DG_ERR(DG_EINVAL, "fleet_distributed_model: strategy recompute_checkpoints[%d] '%s' is no sublayer of the %s",
                             i, name ? name : "(null)", dg_layer_type(net));
            dg_layer_free(net);
            return NULL;
        }
    }
    dg_dp_params p = dg_dp_default_params();
    p.bucket_mb = g_strategy.fuse_grad_size_in_MB;
    p.first_bucket_mb = g_strategy.first_bucket_mb;
    p.overlap = g_strategy.overlap;
    p.find_unused_parameters = g_strategy.find_unused_parameters;
    dg_layer *dp = dg_data_parallel(net, g_comm, p);
    if (dp && g_strategy.use_local_sgd) {   /* pass 0's K; dg_fleet_local_sgd_begin_pass moves it on */
        int rc = dg_dp_set_local_sgd(dp, dg_fleet_get_local_sgd_steps(0, g_strategy.local_sgd_steps,
                                                                        g_strategy.local_sgd_is_warm_steps), false);
        if (rc) { dg_layer_free(dp); return NULL; }
    }
    if (dp) g_dp = dp;
    return dp;
}

dg_optimizer *dg_fleet_distributed_optimizer(dg_optimizer *opt) {
    DG_CHECK_HANDLE(opt, "fleet_distributed_optimizer: optimizer is NULL");
    if (dg_fleet_ps_on()) return dg_fleet_ps_distributed_optimizer(opt) ? NULL : opt;
    DG_CHECK(g_comm, "fleet_distributed_optimizer: call dg_fleet_init first");
    if (g_strategy.amp) {
        dg_amp_scaler *sc = dg_amp_decorate(opt, g_strategy.amp_configs);
        if (!sc) return NULL;
        dg_amp_set_comm(sc, g_comm);
        dg_amp_scaler_free(g_scaler);
        g_scaler = sc;
    }
    if (g_strategy.use_local_sgd) {
        DG_CHECK(!opt->remote_step, "fleet_distributed_optimizer: this optimizer's step is already taken over");
        opt->remote_step = local_sgd_step;
        opt->remote_ctx = opt;
    }
    return opt;
}

dg_amp_scaler *dg_fleet_amp_scaler(void) { return g_scaler; }

/* Local SGD's optimizer step: the rank's own step, then the DataParallel's count (and averaging) */
static int local_sgd_step(void *ctx) {
    int rc = dg_opt_step_here(ctx);
    if (rc) return rc;
    DG_CHECK_INT(g_dp, "optimizer_step: strategy.use_local_sgd averages the model of dg_fleet_distributed_model: make it first");
    rc = dg_dp_local_sgd_step(g_dp);
    return rc < 0 ? rc : 0;
}

int dg_fleet_local_sgd_begin_pass(int pass_id) {
    DG_CHECK_INT(g_strategy.use_local_sgd, "fleet_local_sgd_begin_pass: strategy.use_local_sgd is off");
    DG_CHECK_INT(g_dp, "fleet_local_sgd_begin_pass: make the model with dg_fleet_distributed_model first");
    return dg_dp_set_local_sgd(g_dp, dg_fleet_get_local_sgd_steps(pass_id, g_strategy.local_sgd_steps,
                                                                  g_strategy.local_sgd_is_warm_steps), false);
}

int dg_fleet_save(const dg_layer *net, const char *path) {
    DG_CHECK_HANDLE_INT(net, "fleet_save: layer is NULL");
    DG_CHECK_INT(path, "fleet_save: path is NULL");
    if (!dg_fleet_is_first_worker()) return 0;
    return dg_layer_save(net, path);
}

void dg_fleet_shutdown(void) {
    g_dp = NULL;
    dg_fleet_ps_shutdown();
    dg_amp_scaler_free(g_scaler);
    g_scaler = NULL;
    dg_comm_free(g_comm);
    g_comm = NULL;
    free(g_endpoints);
    g_endpoints = NULL;
}
