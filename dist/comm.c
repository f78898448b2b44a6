/* dist/comm.c — the communicator: picks a transport for the world the environment describes
 * (local for a world of one, NCCL for GPU tensors, MPI otherwise), runs the rendezvous, and
 * turns tensor collectives into transport calls, staging GPU tensors through pinned host
 * memory for transports that take host buffers. */
#include "dist_internal.h"

/* ---- local transport: a world of one, every collective is the identity ---- */
static int local_all_reduce(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, dg_comm_op op) { return 0; }
static int local_broadcast(dg_comm *c, void *buf, int64_t n, dg_dtype dt, int root) { return 0; }
static int local_all_gather(dg_comm *c, const void *send, void *recv, int64_t n, dg_dtype dt) {
    if (send != recv) memmove(recv, send, (size_t)n * dg_dtype_size(dt));
    return 0;
}
static int local_barrier(dg_comm *c) { return 0; }
static void local_destroy(dg_comm *c) {}
const dg_comm_backend dg_comm_local_backend = {
    .name = "local", .all_reduce = local_all_reduce, .broadcast = local_broadcast,
    .all_gather = local_all_gather, .barrier = local_barrier, .destroy = local_destroy,
};

/* A communicator abandoned after a timeout refuses further collectives at once. */
static int usable(const dg_comm *c) {
    if (!c->abandoned) return 0;
    DG_ERR(DG_ECOMM, "comm: rank %d of %d: this communicator was abandoned after a collective timed out; end the program",
           c->rank, c->size);
    return DG_ECOMM;
}

int dg_comm_start_all_reduce_raw(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, void **handle) {
    if (usable(c)) return DG_ECOMM;
    pthread_mutex_lock(&c->lock);
    int rc = c->be->start_all_reduce(c, ch, buf, n, dt, handle);
    pthread_mutex_unlock(&c->lock);
    return rc;
}
int dg_comm_poll_raw(dg_comm *c, void *handle, bool *done) {
    pthread_mutex_lock(&c->lock);
    int rc = c->be->poll(c, handle, done);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* ---- rendezvous ---- */
int dg_dist_store_params(const dg_dist_env *env, double timeout_s, dg_store_params *sp, char *host, size_t hlen,
                         char *token, size_t tlen) {
    char ep0[DG_DIST_MAX_ENDPOINT];
    int port, rc;
    if ((rc = dg_dist_env_endpoint(env, 0, ep0, sizeof ep0)) || (rc = dg_dist_split_endpoint(ep0, host, hlen, &port)) ||
        (rc = dg_dist_job_token(token, tlen)))
        return rc;
    *sp = dg_store_default_params();
    sp->host = host;
    sp->port = port;
    sp->is_server = false;
    sp->timeout_s = timeout_s;
    sp->token = token;   /* another job's ranks on the same ports are refused by the store */
    sp->rank = env->rank;
    return 0;
}

dg_store *dg_dist_rendezvous(const dg_dist_env *env, double timeout_s) {
    char ep0[DG_DIST_MAX_ENDPOINT], host[DG_DIST_MAX_ENDPOINT];
    char token[DG_STORE_MAX_TOKEN + 1];
    dg_store_params sp;
    if (dg_dist_env_endpoint(env, 0, ep0, sizeof ep0) ||
        dg_dist_store_params(env, timeout_s, &sp, host, sizeof host, token, sizeof token))
        return NULL;
    sp.is_server = env->rank == 0;
    dg_store *st = dg_store_new(sp);
    if (!st) return NULL;
    /* every rank checks in once: a rank started twice is caught by its second arrival, a
     * missing one by the bounded wait below (on every rank that did arrive) */
    char key[64];
    snprintf(key, sizeof key, "rank/%d", env->rank);
    int64_t seen = 0, joined = 0;
    int rc = dg_store_add(st, key, 1, &seen);
    if (!rc && seen != 1) {
        DG_ERR(DG_EINVAL, "rendezvous at %s: rank %d joined twice (PADDLE_TRAINER_ID repeated?)", ep0, env->rank);
        rc = DG_EINVAL;
    }
    if (!rc) rc = dg_store_add(st, "joined", 1, &joined);
    if (!rc && joined > env->world_size) {
        DG_ERR(DG_EINVAL, "rendezvous at %s: %lld ranks joined a world of %d", ep0, (long long)joined, env->world_size);
        rc = DG_EINVAL;
    }
    if (!rc && dg_store_wait_at_least(st, "joined", env->world_size) != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dg_last_error());
        DG_ERR(DG_ETIMEOUT, "rendezvous: rank %d of %d waited %.0f s at %s but not every rank arrived (%s)", env->rank,
               env->world_size, dg_dist_timeout(timeout_s), ep0, msg);
        rc = DG_ETIMEOUT;
    }
    if (rc) { dg_store_free(st); return NULL; }
    return st;
}

/* ---- communicator ---- */
/* ---- the transport modules (libdygraph-mpi.so.0, libdygraph-nccl.so.0) ---- */
bool dg_comm_mpi_built(void) { return dg_module_present("mpi"); }

/* The NCCL transport shares its unique id over MPI under plain mpirun: it asks the core, which
 * asks the MPI module, so the NCCL module never links MPI. */
static int mpi_broadcast_bytes(void *buf, size_t n, int root) {
    int (*fn)(void *, size_t, int) = (int (*)(void *, size_t, int))dg_module_symbol("mpi", "dg_mpi_broadcast_bytes");
    return fn ? fn(buf, n, root) : dg_last_status();
}

static pthread_once_t g_provide_once = PTHREAD_ONCE_INIT;
static int g_provide_rc;
static void provide_to_modules(void) {
    g_provide_rc = dg_module_provide("dg_store_set", (void *)dg_store_set);
    if (!g_provide_rc) g_provide_rc = dg_module_provide("dg_store_get", (void *)dg_store_get);
    if (!g_provide_rc) g_provide_rc = dg_module_provide("dg_mpi_broadcast_bytes", (void *)mpi_broadcast_bytes);
    if (!g_provide_rc) g_provide_rc = dg_module_provide("dg_comm_mpi_built", (void *)dg_comm_mpi_built);
    if (!g_provide_rc) g_provide_rc = dg_module_provide("dg_comm_timed_out", (void *)dg_comm_timed_out);
}

static int transport_make(const char *module, const char *entry, dg_comm *c, const dg_dist_env *env) {
    pthread_once(&g_provide_once, provide_to_modules);
    if (g_provide_rc) return g_provide_rc;
    int (*make)(dg_comm *, const dg_dist_env *) = (int (*)(dg_comm *, const dg_dist_env *))dg_module_symbol(module, entry);
    if (!make) return dg_last_status() ? dg_last_status() : DG_EUNSUPPORTED;
    return make(c, env);
}

dg_comm_params dg_comm_default_params(void) {
    return (dg_comm_params){ .params_tag = DG_PARAMS_TAG, .kind = DG_COMM_AUTO, .timeout_s = DG_FROM_ENV, .hierarchical = false, .ranks_per_node = 0,
                             .comm_num = 1 };
}

dg_comm *dg_comm_new(dg_comm_params p) {
    DG_CHECK_PARAMS("comm_new", p, dg_comm_default_params);
    DG_CHECK((p.timeout_s > 0 && isfinite(p.timeout_s)) || p.timeout_s == DG_FROM_ENV,
             "comm_new: timeout_s must be > 0 or DG_FROM_ENV, got %g", p.timeout_s);
    DG_CHECK(p.kind >= DG_COMM_AUTO && p.kind <= DG_COMM_NCCL, "comm_new: unknown kind %d", (int)p.kind);
    DG_CHECK(p.comm_num >= 1 && p.comm_num <= DG_COMM_MAX_NUM, "comm_new: comm_num must be in 1..%d, got %d (dg_comm_default_params() "
             "has 1)", DG_COMM_MAX_NUM, p.comm_num);
    DG_CHECK(p.ranks_per_node >= 0, "comm_new: ranks_per_node must be >= 0 (0: the real nodes), got %d", p.ranks_per_node);
    dg_dist_env env;
    if (dg_dist_env_read(&env) != 0) return NULL;
    if (p.hierarchical && p.ranks_per_node > 0 && env.world_size % p.ranks_per_node != 0) {
        DG_ERR(DG_EINVAL, "comm_new: ranks_per_node %d does not divide the world of %d ranks into whole nodes", p.ranks_per_node,
               env.world_size);
        dg_dist_env_clear(&env);
        return NULL;
    }
    dg_comm *c = calloc(1, sizeof *c);
    if (!c) { dg_dist_env_clear(&env); DG_ERR(DG_ENOMEM, "comm_new: out of memory"); return NULL; }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->progress_lock, NULL);
    c->rank = env.rank;
    c->size = env.world_size;
    c->timeout_s = dg_dist_timeout(p.timeout_s);
    c->comm_num = p.comm_num;
    c->hierarchical = p.hierarchical;
    c->ranks_per_node = p.ranks_per_node;
    c->local_rank = -1;
    dg_comm_kind kind = p.kind;
    if (kind == DG_COMM_AUTO) {
        if (env.world_size == 1) kind = DG_COMM_LOCAL;
        else if (dg_get_device().type == DG_CUDA && dg_module_present("nccl")) kind = DG_COMM_NCCL;
        else kind = DG_COMM_MPI;
    }
    int rc = 0;
    if (env.world_size > 1 && env.endpoints && kind != DG_COMM_LOCAL) {
        c->store = dg_dist_rendezvous(&env, c->timeout_s);
        if (!c->store) rc = dg_last_status() ? dg_last_status() : DG_ECOMM;
    }
    if (!rc) {
        switch (kind) {
        case DG_COMM_LOCAL:
            if (env.world_size != 1) {
                DG_ERR(DG_EINVAL, "comm_new: the local transport serves a world of 1, not %d", env.world_size);
                rc = DG_EINVAL;
            } else {
                c->be = &dg_comm_local_backend;
                if (c->hierarchical) { c->nodes = 1; c->local_rank = 0; c->local_size = 1; }
            }
            break;
        case DG_COMM_MPI:
            if (!env.under_mpirun && env.world_size > 1) {
                DG_ERR(DG_EINVAL, "comm_new: rank %d of %d on CPUs uses MPI but was not started by mpirun: start CPU workers "
                       "with `dgrun --nproc_per_node N prog` (which runs mpirun) or `mpirun -np N prog`", env.rank, env.world_size);
                rc = DG_EINVAL;
            } else rc = transport_make("mpi", "dg_comm_mpi_make", c, &env);
            break;
        case DG_COMM_NCCL:
            /* NCCL splits its communicators by the nodes the endpoints name (MPI asks MPI) */
            if (c->hierarchical) {
                dg_node_layout L;
                rc = dg_dist_node_layout(&env, c->ranks_per_node, &L);
                if (!rc) {
                    c->node = L.node; c->nodes = L.nodes; c->local_rank = L.local_rank; c->local_size = L.local_size;
                    c->nodes_uniform = L.uniform;
                }
            }
            if (!rc) rc = transport_make("nccl", "dg_comm_nccl_make", c, &env);
            break;
        default: DG_ERR(DG_EINVAL, "comm_new: unknown transport %d", (int)kind); rc = DG_EINVAL;
        }
    }
    if (!rc) c->watchdog = dg_watchdog_start(c, &env);
    dg_dist_env_clear(&env);
    if (rc) {
        dg_store_free(c->store);
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->progress_lock);
        free(c);
        return NULL;
    }
    return c;
}

void dg_comm_free(dg_comm *c) {
    if (!c) return;
    dg_watchdog_stop(c->watchdog);
    if (c->be && c->be->destroy) c->be->destroy(c);
    dg_store_free(c->store);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->progress_lock);
    free(c);
}

int dg_comm_rank(const dg_comm *c) { return c ? c->rank : -1; }
int dg_comm_size(const dg_comm *c) { return c ? c->size : -1; }
const char *dg_comm_backend_name(const dg_comm *c) { return c && c->be ? c->be->name : NULL; }
int dg_comm_num(const dg_comm *c) { return c ? c->comm_num : -1; }

int dg_comm_topology(const dg_comm *c, int *nodes, int *local_rank, int *local_size) {
    DG_CHECK_HANDLE_INT(c, "comm_topology: communicator is NULL");
    if (nodes) *nodes = c->nodes;
    if (local_rank) *local_rank = c->local_rank;
    if (local_size) *local_size = c->local_size;
    return 0;
}

static int check_buffer(const char *op, const dg_comm *c, const dg_tensor *t, bool need_float) {
    DG_CHECK_HANDLE_INT(c, "%s: communicator is NULL", op);
    DG_CHECK_TENSOR_INT(op, t);
    char sh[96];
    dg_dtype dt = dg_dtype_of(t);
    dg_shape_str(t, sh, sizeof sh);
    DG_CHECK_INT(dg_is_contiguous(t), "%s: tensor %s must be contiguous", op, sh);
    DG_CHECK_INT(!need_float || dt == DG_F32 || dt == DG_F64 || dt == DG_I64 || dt == DG_I32,
                 "%s: tensor %s of dtype %s: collectives take f32/f64/i32/i64", op, sh, dg_dtype_name(dt));
    if (c->be->device_buffers) {
        char d[16];
        DG_CHECK_INT(dg_device_of(t).type == DG_CUDA, "%s: the %s transport takes GPU tensors; %s is on %s", op,
                     c->be->name, sh, dg_device_name(dg_device_of(t), d, sizeof d));
    }
    return 0;
}

/* For a host transport and a GPU tensor: a pinned host copy, else the tensor's own memory. */
typedef struct staged { void *host; bool copied; } staged;
static size_t tensor_bytes(const dg_tensor *t) { return (size_t)dg_numel(t) * dg_dtype_size(dg_dtype_of(t)); }
static int stage_in(const dg_comm *c, const dg_tensor *t, staged *s, bool fill) {
    size_t nb = tensor_bytes(t);
    s->copied = !c->be->device_buffers && dg_device_of(t).type != DG_CPU;
    if (!s->copied) { s->host = dg_tensor_ptr(t); return 0; }
    uint64_t errs = dg_error_count();
    s->host = dg_pinned_alloc(nb ? nb : 1, NULL);
    if (!s->host) { if (!dg_error_since(errs)) DG_ERR(DG_ENOMEM, "comm: staging %zu bytes", nb); return DG_ENOMEM; }
    int rc = fill ? dg_to_host(t, s->host, nb) : 0;
    if (rc) {   /* the caller only releases what stage_in returned successfully */
        dg_pinned_free(s->host, NULL);
        s->host = NULL;
    }
    return rc;
}
static int stage_out(const dg_tensor *t, staged *s, bool write_back) {
    if (!s->copied) return 0;
    int rc = write_back ? dg_copy_from_host((dg_tensor *)t, s->host, tensor_bytes(t)) : 0;
    /* the upload is ordered on the stream; the pinned buffer's release waits for it */
    dg_synchronize(dg_device_of(t));
    dg_pinned_free(s->host, NULL);
    return rc;
}

static void scale_host(void *buf, int64_t n, dg_dtype dt, double f) {
    if (dt == DG_F32) { float *p = buf; for (int64_t i = 0; i < n; i++) p[i] = (float)(p[i] * f); }
    else if (dt == DG_F64) { double *p = buf; for (int64_t i = 0; i < n; i++) p[i] *= f; }
}

int dg_comm_all_reduce_raw(dg_comm *c, int ch, void *buf, int64_t n, dg_dtype dt, dg_comm_op op) {
    if (usable(c)) return DG_ECOMM;
    pthread_mutex_lock(&c->lock);
    /* AVG is a sum and a scale on transports without a native average */
    int rc = c->be->all_reduce(c, ch, buf, n, dt, op == DG_COMM_AVG && !c->be->device_buffers ? DG_COMM_SUM : op);
    pthread_mutex_unlock(&c->lock);
    if (!rc && op == DG_COMM_AVG && !c->be->device_buffers && c->size > 1) scale_host(buf, n, dt, 1.0 / c->size);
    return rc;
}

int dg_comm_all_reduce(dg_comm *c, dg_tensor *t, dg_comm_op op) {
    int rc = check_buffer("all_reduce", c, t, true);
    if (rc) return rc;
    DG_CHECK_INT(op != DG_COMM_AVG || dg_dtype_is_float(dg_dtype_of(t)), "all_reduce: AVG needs a float tensor, got %s",
                 dg_dtype_name(dg_dtype_of(t)));
    staged s;
    uint64_t t0 = dg_profiler_span_begin();
    if ((rc = stage_in(c, t, &s, true))) return rc;
    dg_comm_progress(c, "all_reduce of %lld values", (long long)dg_numel(t));
    rc = dg_comm_all_reduce_raw(c, DG_COMM_CH_USER, s.host, dg_numel(t), dg_dtype_of(t), op);
    int rc2 = stage_out(t, &s, rc == 0);
    if (!rc && c->be->wait) rc = c->be->wait(c);
    dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "all_reduce", (int64_t)tensor_bytes(t), -1);
    return rc ? rc : rc2;
}

int dg_comm_broadcast(dg_comm *c, dg_tensor *t, int root) {
    int rc = check_buffer("broadcast", c, t, false);
    if (rc) return rc;
    DG_CHECK_INT(root >= 0 && root < c->size, "broadcast: root %d outside the world of %d", root, c->size);
    if (usable(c)) return DG_ECOMM;
    staged s;
    uint64_t t0 = dg_profiler_span_begin();
    if ((rc = stage_in(c, t, &s, c->rank == root))) return rc;
    dg_comm_progress(c, "broadcast of %zu bytes from rank %d", tensor_bytes(t), root);
    pthread_mutex_lock(&c->lock);
    rc = c->be->broadcast(c, s.host, (int64_t)tensor_bytes(t), DG_BOOL, root);  /* as bytes */
    pthread_mutex_unlock(&c->lock);
    int rc2 = stage_out(t, &s, rc == 0);
    if (!rc && c->be->wait) rc = c->be->wait(c);
    dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "broadcast", (int64_t)tensor_bytes(t), -1);
    return rc ? rc : rc2;
}

dg_tensor *dg_comm_all_gather(dg_comm *c, const dg_tensor *t) {
    if (check_buffer("all_gather", c, t, false) || usable(c)) return NULL;
    dg_shape ts = dg_shape_of(t), ys = { .ndim = ts.ndim + 1 };
    DG_CHECK(ts.ndim < DG_MAX_DIMS, "all_gather: tensor has %d dims; the result needs one more", ts.ndim);
    ys.d[0] = c->size;
    memcpy(ys.d + 1, ts.d, sizeof(int64_t) * (size_t)ts.ndim);
    dg_tensor *y = dg_empty_on(ys, dg_dtype_of(t), dg_device_of(t));
    if (!y) return NULL;
    staged si, so;
    uint64_t t0 = dg_profiler_span_begin();
    int rc = stage_in(c, t, &si, true);
    if (!rc && (rc = stage_in(c, y, &so, false))) stage_out(t, &si, false);
    if (rc) { dg_tensor_free(y); return NULL; }
    dg_comm_progress(c, "all_gather of %zu bytes", tensor_bytes(t));
    pthread_mutex_lock(&c->lock);
    rc = c->be->all_gather(c, si.host, so.host, (int64_t)tensor_bytes(t), DG_BOOL);
    pthread_mutex_unlock(&c->lock);
    stage_out(t, &si, false);
    int rc2 = stage_out(y, &so, rc == 0);
    if (!rc && c->be->wait) rc = c->be->wait(c);
    dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "all_gather", (int64_t)tensor_bytes(t), -1);
    if (rc || rc2) { dg_tensor_free(y); return NULL; }
    return y;
}

int dg_comm_barrier(dg_comm *c) {
    DG_CHECK_HANDLE_INT(c, "barrier: communicator is NULL");
    if (usable(c)) return DG_ECOMM;
    dg_comm_progress(c, "barrier");
    uint64_t t0 = dg_profiler_span_begin();
    pthread_mutex_lock(&c->lock);
    int rc = c->be->barrier(c);
    pthread_mutex_unlock(&c->lock);
    dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "barrier", -1, -1);
    return rc;
}
