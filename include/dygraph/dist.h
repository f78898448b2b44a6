/* dygraph/dist.h — data-parallel training over several processes, as paddle.distributed.fleet:
 * the trainer environment a launcher sets, a TCP rendezvous store, communicators (MPI on CPUs,
 * NCCL on GPUs, and a local one for a world of 1), the DataParallel wrapper with bucketed
 * gradient all-reduce, and the fleet facade. A program that is not launched sees a world of one
 * and runs unchanged. */
#ifndef DYGRAPH_DIST_H
#define DYGRAPH_DIST_H

#include "core.h"
#include "tensor.h"
#include "nn.h"
#include "optim.h"
#include "amp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- trainer environment ----
 * From PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT
 * and FLAGS_selected_gpus (what dgrun and paddle.distributed.launch set), else from Open MPI's
 * OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (mpirun), else a world of 1. */
#define DG_DIST_MAX_ENDPOINT 64
typedef struct dg_dist_env {
    int rank, world_size, local_rank;
    int gpu;                          /* FLAGS_selected_gpus, -1 when unset */
    bool launched;                    /* some launcher set the variables */
    bool under_mpirun;                /* Open MPI's variables are present */
    char current_endpoint[DG_DIST_MAX_ENDPOINT];   /* "ip:port", "" when unknown */
    char *endpoints;                  /* "ip:port,ip:port,...", malloc'd; NULL when unknown */
} dg_dist_env;
/* Reads and checks the environment (rank < world size, endpoint list of world_size entries
 * that contains the current endpoint at position rank, ...). 0 or a negative status. */
DG_API int dg_dist_env_read(dg_dist_env *env);
DG_API void dg_dist_env_clear(dg_dist_env *env);
/* Endpoint i of env->endpoints into buf; 0 or negative. */
DG_API int dg_dist_env_endpoint(const dg_dist_env *env, int i, char *buf, size_t len);

/* ---- rendezvous store: a small key/value server on rank 0's endpoint ----
 * The server listens on host's own address. A store belongs to one job: every connection first
 * presents a job token, and the server refuses a client whose token differs from its own (both
 * sides report it; the store goes on serving its own job). The rendezvous (dg_comm_new) passes
 * $DG_JOB_TOKEN, which dgrun sets. */
#define DG_STORE_MAX_TOKEN 128
typedef struct dg_store dg_store;
typedef struct dg_store_params {
    const char *host;         /* rank 0's address; no default (NULL) */
    int port;                 /* 1..65535; no default (0) */
    bool is_server;           /* rank 0: serve on host:port (and be a client of itself); default false */
    double timeout_s;         /* connect and wait limit, > 0; DG_FROM_ENV (default): $DG_DIST_TIMEOUT, else 300 */
    const char *token;        /* the job's token, at most DG_STORE_MAX_TOKEN characters; NULL or "" (default):
                                 none, which meets only stores and clients without one */
    int rank;                 /* this process's rank, named in messages on both sides; -1 (default): not said */
    uint32_t params_tag;     /* set by dg_store_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_store_params;
DG_API dg_store_params dg_store_default_params(void);
DG_API dg_store *dg_store_new(dg_store_params p);
DG_API int dg_store_set(dg_store *s, const char *key, const void *value, size_t len);
/* Waits until key exists (or the timeout), then returns a malloc'd copy in *value. */
DG_API int dg_store_get(dg_store *s, const char *key, void **value, size_t *len);
/* Atomically adds delta to the integer under key (0 when absent) and returns the new value
 * in *out. */
DG_API int dg_store_add(dg_store *s, const char *key, int64_t delta, int64_t *out);
/* Blocks until the integer under key reaches at least target (or the timeout). */
DG_API int dg_store_wait_at_least(dg_store *s, const char *key, int64_t target);
DG_API void dg_store_free(dg_store *s);

/* ---- communicators ---- */
typedef enum dg_comm_kind { DG_COMM_AUTO, DG_COMM_LOCAL, DG_COMM_MPI, DG_COMM_NCCL } dg_comm_kind;
typedef enum dg_comm_op { DG_COMM_SUM, DG_COMM_AVG, DG_COMM_MAX } dg_comm_op;
typedef struct dg_comm dg_comm;
typedef struct dg_comm_params {
    dg_comm_kind kind;        /* AUTO (default): world 1 -> LOCAL; GPU tensors and NCCL built -> NCCL; else MPI */
    double timeout_s;         /* the rendezvous' and every collective's limit: past it a collective fails
                                 with DG_ETIMEOUT naming the ranks whose heartbeat went silent, and the
                                 communicator is abandoned; > 0; DG_FROM_ENV (default): $DG_DIST_TIMEOUT,
                                 else 300 */
    bool hierarchical;        /* all-reduce in three stages (Paddle's use_hierarchical_allreduce): reduce inside each
                                 node to its first rank, all-reduce among those (one rank per node), broadcast inside
                                 each node; default false */
    int ranks_per_node;       /* with hierarchical: > 0 makes ranks r / ranks_per_node one node (Paddle's
                                 hierarchical_allreduce_inter_nranks; must divide the world size); 0 (default): the
                                 real nodes (MPI: ranks sharing memory; NCCL: ranks whose endpoint in
                                 PADDLE_TRAINER_ENDPOINTS has the same IP, as Paddle) */
    int comm_num;             /* communicators the all-reduce rotates over (Paddle's nccl_comm_num), each NCCL one on
                                 a CUDA stream of its own; DataParallel's bucket k uses number k % comm_num;
                                 1..DG_COMM_MAX_NUM; default 1 */
    uint32_t params_tag;     /* set by dg_comm_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_comm_params;
#define DG_COMM_MAX_NUM 8
DG_API dg_comm_params dg_comm_default_params(void);
/* A communicator over the world the environment describes (rendezvous included). */
DG_API dg_comm *dg_comm_new(dg_comm_params p);
DG_API void dg_comm_free(dg_comm *c);
DG_API int dg_comm_rank(const dg_comm *c);
DG_API int dg_comm_size(const dg_comm *c);
DG_API const char *dg_comm_backend_name(const dg_comm *c);   /* "local", "mpi", "nccl" */
/* The node layout the hierarchical all-reduce works with: how many nodes, this rank's index and
 * the rank count inside its node. A flat communicator (hierarchical off) reports 0 nodes, local
 * rank -1 and local size 0. 0, or an error for a NULL communicator. */
DG_API int dg_comm_topology(const dg_comm *c, int *nodes, int *local_rank, int *local_size);
DG_API int dg_comm_num(const dg_comm *c);                   /* comm_num: communicators in rotation */
/* In place on contiguous float tensors (any device: host memory stages device tensors for MPI). */
DG_API int dg_comm_all_reduce(dg_comm *c, dg_tensor *t, dg_comm_op op);
DG_API int dg_comm_broadcast(dg_comm *c, dg_tensor *t, int root);
/* [world_size, ...t's shape] with every rank's t, on t's device. */
DG_API dg_tensor *dg_comm_all_gather(dg_comm *c, const dg_tensor *t);
DG_API int dg_comm_barrier(dg_comm *c);

/* ---- DataParallel ---- */
/* paddle.DataParallel / torch DistributedDataParallel; defaults are theirs. */
typedef struct dg_dp_params {
    double bucket_mb;             /* > 0; default 25 (Paddle's comm_buffer_size, torch's bucket_cap_mb) */
    double first_bucket_mb;       /* the first bucket to fill (last layers' grads) is small so
                                     communication starts early; > 0; default 1 (Paddle's
                                     last_comm_buffer_size, torch's first bucket) */
    bool overlap;                 /* all-reduce buckets during backward (MPI: started and polled from
                                     the grad-ready hooks); default false */
    bool find_unused_parameters;  /* parameters without a gradient count as zero instead of being
                                     reported by name; default false */
    uint32_t params_tag;     /* set by dg_dp_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_dp_params;
DG_API dg_dp_params dg_dp_default_params(void);
/* Wraps net (takes a reference): broadcasts parameters and buffers from rank 0, then forward
 * runs net. The wrapper's parameters are net's, named "_layers.<name>" (Paddle's attribute);
 * save net itself for checkpoints that load into a single-process program. comm is borrowed
 * and must outlive the wrapper. */
DG_API dg_layer *dg_data_parallel(dg_layer *net, dg_comm *comm, dg_dp_params p);
/* The wrapper's class ("DataParallel"): the dg_dp_* calls below refuse any other layer. */
DG_API const dg_layer_class *dg_data_parallel_class(void);
/* loss / world_size (a new tensor; the graph goes through it). */
DG_API dg_tensor *dg_dp_scale_loss(dg_layer *dp, const dg_tensor *loss);
/* Sums every gradient over the ranks (bucketed; with overlap on, finishes the buckets backward
 * already started). Errors name parameters that got no gradient unless find_unused_parameters.
 * Every rank must make the same collectives in the same order: with overlap on, buckets start
 * during backward, so no other collective may use this communicator between backward and
 * apply; and an error here on one rank leaves the others waiting for it until their timeout:
 * end the process, and the launcher stops the job. A reduction that outlives the communicator's
 * timeout fails with DG_ETIMEOUT naming the bucket and the ranks that went silent; the
 * communicator is then abandoned. */
DG_API int dg_dp_apply_collective_grads(dg_layer *dp);
/* Gradient accumulation: while on, backward passes only accumulate locally and
 * apply_collective_grads is a no-op; the first step after no_sync(false) reduces the sum. */
DG_API int dg_dp_no_sync(dg_layer *dp, bool on);
/* Local SGD (Paddle's use_local_sgd, after Lin et al.): with k > 1 each rank steps alone —
 * scale_loss leaves its loss as it is, apply_collective_grads reduces nothing — and
 * dg_dp_local_sgd_step, called after every optimizer step, averages the net's parameters (and,
 * with average_buffers, its float buffers such as BN running statistics) over the ranks on
 * every k-th call. k = 1 (the default) is ordinary DataParallel. Changing k after local steps
 * averages first, so every rank enters the new schedule from the same parameters. */
DG_API int dg_dp_set_local_sgd(dg_layer *dp, int k, bool average_buffers);
/* 1 when this call averaged, 0 when not, or a DG_E* code. */
DG_API int dg_dp_local_sgd_step(dg_layer *dp);
DG_API int64_t dg_dp_local_sgd_averagings(const dg_layer *dp);   /* how many so far */
/* The collective guide's schedules, as it writes them. get_local_sgd_steps: 1 for the first
 * `warmup` passes, then 1, 2, 4, ... (powers of two up to local_sgd_steps), then local_sgd_steps.
 * adaptive_local_step (Wang & Joshi): int(base_step * sqrt(ini_lr (cur_loss - 0.6) /
 * (cur_lr max(ini_loss - 0.6, 1e-12)))), at least 1, and pre_step when it would jump by more
 * than 20; a current loss at or below 0.6 (where the guide's Python raises) gives 1. The loss is
 * the ranks' mean (all-reduce it first); the rule needs a global learning rate, so it suits SGD
 * and Momentum, not Adam. */
DG_API int dg_fleet_get_local_sgd_steps(int pass_id, int local_sgd_steps, int local_sgd_warmup);
DG_API int dg_fleet_adaptive_local_step(double ini_loss, double ini_lr, double cur_loss, double cur_lr, int base_step,
                                        int pre_step);
DG_API dg_comm *dg_dp_comm(const dg_layer *dp);
DG_API dg_layer *dg_dp_module(const dg_layer *dp);           /* the wrapped net, borrowed */

/* ---- SyncBatchNorm (torch.nn.SyncBatchNorm / paddle.nn.SyncBatchNorm) ----
 * BatchNorm over x [N, C, ...] (any rank >= 2) whose training statistics are those of every
 * rank's batch together: the per-channel sums of x and x^2 and the count are all-reduced over
 * comm in forward, the per-channel sums of dy and dy * xhat in backward, so outputs, input
 * gradients and running statistics equal BatchNorm's on the concatenated batch. The weight and
 * bias gradients are this rank's own (DataParallel adds them up, as torch's DDP does). Eval mode
 * uses the running statistics and communicates nothing; a world of one is BatchNorm exactly.
 * Settings, parameters and buffers are BatchNorm's (nn.h: weight, bias, running_mean,
 * running_var, num_batches_tracked), so state dicts interchange. comm is borrowed and must
 * outlive the layer. In training every rank must run the same SyncBatchNorm layers in the same
 * order, and an input error on one rank (wrong channels) leaves the others waiting for it until
 * the communicator's timeout, as any collective does. The backward's collective runs inside
 * dg_backward at the same point of the graph on every rank, so it may share the communicator
 * with DataParallel's buckets, overlapped or not. */
DG_API const dg_layer_class *dg_nn_sync_batch_norm_class(void);   /* "SyncBatchNorm" */
DG_API dg_layer *dg_nn_sync_batch_norm(int64_t num_features, dg_nn_batch_norm_params p, dg_comm *comm);
/* torch's SyncBatchNorm.convert_sync_batchnorm: every BatchNorm1d/2d in model becomes a
 * SyncBatchNorm over comm in its place (dg_layer_replace_sublayer), with its settings, its
 * train/eval mode and the very same parameter and buffer tensors (so an optimizer made before
 * still steps them). Takes over model's reference and returns the converted model: model itself,
 * or a new layer when model is a BatchNorm; NULL on failure (model released). Convert before
 * wrapping in DataParallel: a model holding a DataParallel is refused. */
DG_API dg_layer *dg_nn_convert_sync_batch_norm(dg_layer *model, dg_comm *comm);

/* ---- fleet facade (paddle.distributed.fleet) ---- */
/* fleet.DistributedStrategy's data-parallel settings (the fields of dg_dp_params) and its AMP
 * loss-scaling switch (strategy.amp = True, strategy.amp_configs = {...}). */
typedef struct dg_fleet_strategy {
    double fuse_grad_size_in_MB;  /* bucket size, > 0; default 25 (Paddle's) */
    double first_bucket_mb;       /* > 0; default 1 */
    bool overlap;                 /* overlap all-reduce with backward; default false */
    bool find_unused_parameters;  /* default false */
    double timeout_s;             /* the collective watchdog's limit (torch's init_process_group timeout):
                                     a collective or the rendezvous that waits longer fails with
                                     DG_ETIMEOUT naming the silent rank; > 0, or DG_FROM_ENV (default):
                                     $DG_DIST_TIMEOUT, else 300 */
    bool use_hierarchical_allreduce;  /* dg_comm_params.hierarchical; default false */
    int hierarchical_allreduce_inter_nranks;   /* dg_comm_params.ranks_per_node: ranks per node, >= 0; default 0
                                                  (the real nodes) */
    int nccl_comm_num;            /* dg_comm_params.comm_num, 1..DG_COMM_MAX_NUM; default 1 */
    bool amp;                     /* dynamic loss scaling (dygraph/amp.h); default false */
    dg_amp_params amp_configs;    /* its settings; default dg_amp_default_params() */
    bool sync_mode;               /* parameter-server mode: true (default): every step waits for the
                                     servers to have applied the mean of all workers' gradients;
                                     false: async, each push applied as it arrives */
    bool use_local_sgd;           /* Local SGD on the DataParallel of dg_fleet_distributed_model
                                     (dg_dp_set_local_sgd), its averaging done by the distributed
                                     optimizer's step; default false */
    int local_sgd_steps;          /* K once warmed up, >= 1; default 1 */
    int local_sgd_is_warm_steps;  /* passes of ordinary DataParallel first, >= 0; default 0 */
    int k_steps;                  /* with sync_mode false, > 0 is geo mode (Paddle's a_sync_configs
                                     k_steps): each worker steps its own copy with its optimizer and
                                     every k_steps steps adds its change / worker count on the
                                     servers and pulls the sums back; default 0 */
    bool recompute;               /* strategy.recompute: dg_fleet_distributed_model marks the sublayers
                                     named in recompute_checkpoints (dotted names, "layer1.0") for
                                     recompute (dg_layer_set_recompute); default false */
    const char *const *recompute_checkpoints;   /* recompute_configs' checkpoints: read by
                                     dg_fleet_distributed_model; a name that is no sublayer is an error */
    int n_recompute_checkpoints;  /* default 0 */
} dg_fleet_strategy;
DG_API dg_fleet_strategy dg_fleet_default_strategy(void);
/* fleet.init(is_collective=True[, strategy]): reads the environment, makes the world
 * communicator (rendezvous with a timeout; errors name the endpoint). strategy NULL means
 * dg_fleet_default_strategy(); a bad strategy is an error naming the field.
 * is_collective false: a parameter-server job (Paddle's launch_ps, dgrun --server_num): the role
 * and the servers come from the environment in either of Paddle's naming schemes (an
 * inconsistent one is an error naming the variable); then, on a server,
 *   dg_fleet_init_server(NULL); dg_fleet_run_server();      (returns when every worker stopped)
 * and on a worker
 *   dg_fleet_init_worker(); opt = dg_fleet_distributed_optimizer(opt);
 *   loop { forward; dg_backward(loss); dg_optimizer_step(opt); dg_optimizer_clear_grad(opt); }
 *   dg_fleet_stop_worker();                                   (the tutorial's exe.close())
 * where the optimizer's float32 parameters become one table split evenly over the servers, each
 * server runs the optimizer's rule (SGD, Momentum, Adagrad, Adam) on its part, and
 * dg_optimizer_step pushes the gradients and pulls the new values (strategy.sync_mode). */
DG_API int dg_fleet_init(bool is_collective, const dg_fleet_strategy *strategy);
DG_API bool dg_fleet_is_server(void);
DG_API bool dg_fleet_is_worker(void);      /* true in collective mode */
DG_API int dg_fleet_server_index(void);    /* -1 on a worker */
DG_API int dg_fleet_server_num(void);      /* 0 in collective mode */
DG_API const char *dg_fleet_server_endpoint(int i);   /* "ip:port" of server i, or NULL */
/* dirname NULL: the tables start empty and take the first worker's values; else they are read
 * from a dg_fleet_save_persistables directory (any number of servers then: the tables are
 * re-sharded; the same number restores them bit for bit). */
DG_API int dg_fleet_init_server(const char *dirname);
/* Worker 0 has every server write its tables (values and optimizer state) into dirname (made if
 * missing), each file atomically, then a manifest; other workers return 0 at once. */
DG_API int dg_fleet_save_persistables(const char *dirname);
DG_API int dg_fleet_run_server(void);
DG_API int dg_fleet_init_worker(void);
DG_API int dg_fleet_stop_worker(void);
/* An embedding whose table lives on the parameter servers (Paddle's is_distributed sparse
 * table): rows of `dim` floats keyed by any int64 id >= 0 (row id on server id % S), each made
 * on its first lookup from (seed, id) alone, uniform in [-init_range, init_range) — the same row
 * whatever the number of servers (dg_fleet_sparse_initial_row gives it). forward(ids) pulls the
 * batch's unique ids and returns ids.shape + [dim]; dg_optimizer_step of the distributed
 * optimizer pushes the rows' gradients, and the servers step each row with that optimizer's
 * rule (SGD, Adagrad, or Adam with each row's own step count as Paddle's sparse Adam) and settings
 * (sync mode: the mean over the workers, as for dense tables).
 * Make these layers on a worker after dg_fleet_init_worker and before
 * dg_fleet_distributed_optimizer (which makes their tables). */
typedef struct dg_fleet_sparse_params {
    uint64_t seed;          /* default 0 */
    double init_range;      /* >= 0; default 0.05 */
    int64_t entry_count;    /* Paddle's CountFilterEntry: an id's row is looked up as zeros and not
                               trained until pushes from this many steps named it; default 0 (at once) */
    uint32_t params_tag;     /* set by dg_fleet_sparse_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_fleet_sparse_params;
DG_API dg_fleet_sparse_params dg_fleet_sparse_default_params(void);
DG_API dg_layer *dg_fleet_sparse_embedding(int64_t dim, dg_fleet_sparse_params p);
DG_API void dg_fleet_sparse_initial_row(uint64_t seed, double init_range, int64_t id, int64_t dim, float *out);
/* Async mode: starts pulling the rows of ids (the next batch's, announced before this step's
 * forward) in the background, so the pull overlaps this step; the layer's next forward with the
 * same ids takes them, with this worker's own row gradients pushed in between added (SGD) or
 * pulled again (other rules); with other ids they are dropped. Sync and geo modes: returns 0 and
 * does nothing. */
DG_API int dg_fleet_sparse_prefetch(dg_layer *emb, const dg_tensor *ids);
/* Paddle's fleet.shrink: every server drops the sparse rows not looked up or pushed in the last
 * max_age versions of their table (sync: steps; async: pushes) — their values and optimizer state;
 * a later lookup makes them anew from (seed, id). Returns the rows dropped over every server, or a
 * DG_E* code. */
DG_API int64_t dg_fleet_shrink(int64_t max_age);
/* What this worker's requests to the parameter servers moved so far: the bytes sent, the bytes
 * their replies brought (message headers included) and the requests (waits for a version
 * included). For measuring a job's traffic per step. */
typedef struct dg_fleet_traffic { uint64_t bytes_sent, bytes_received, requests; } dg_fleet_traffic;
DG_API dg_fleet_traffic dg_fleet_ps_traffic(void);
DG_API int dg_fleet_worker_index(void);
DG_API int dg_fleet_worker_num(void);
DG_API const char *dg_fleet_worker_endpoints(void);          /* "ip:port,..." or "" */
DG_API bool dg_fleet_is_first_worker(void);
DG_API dg_comm *dg_fleet_comm(void);
/* DataParallel with the strategy's settings (takes a reference to net). */
DG_API dg_layer *dg_fleet_distributed_model(dg_layer *net);
/* The optimizer itself: gradients are already reduced by apply_collective_grads. With strategy.amp
 * on it also makes a loss scaler (amp_configs) bound to opt and to the world communicator (the
 * found_inf flag is agreed over the ranks); a later call replaces it. */
DG_API dg_optimizer *dg_fleet_distributed_optimizer(dg_optimizer *opt);
/* That scaler (owned by fleet, freed by dg_fleet_shutdown; its optimizer must outlive its use);
 * NULL when strategy.amp is off or before dg_fleet_distributed_optimizer. The loop is then
 *   dg_backward(dg_amp_scale_loss(sc, loss)); dg_dp_apply_collective_grads(dp);
 *   dg_amp_unscale(sc); [clip]; dg_amp_step(sc) instead of dg_optimizer_step; clear_grad. */
DG_API dg_amp_scaler *dg_fleet_amp_scaler(void);
/* strategy.use_local_sgd: sets K for pass pass_id by dg_fleet_get_local_sgd_steps (call it as each
 * pass begins); 0, or an error without dg_fleet_distributed_model or Local SGD. */
DG_API int dg_fleet_local_sgd_begin_pass(int pass_id);
/* As Paddle's fleet.save in the collective guide: only rank 0 writes (others return 0 at once). */
DG_API int dg_fleet_save(const dg_layer *net, const char *path);
/* Frees the world communicator (MPI_Finalize where MPI was started here). */
DG_API void dg_fleet_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
