/* dist/data_parallel.c — the DataParallel layer (paddle.DataParallel): a layer whose only
 * sublayer is the wrapped net ("_layers", Paddle's attribute name), which at wrap time makes
 * every rank start from rank 0's parameters and buffers, and owns the gradient reducer that
 * scale_loss / apply_collective_grads drive. */
#include "dist_internal.h"
#include "reducer.h"

typedef struct dp_state {
    dg_layer *net;                /* the sublayer, plus a reference of our own: a layer frees its
                                     sublayers before its user state, and the reducer's release
                                     still touches the net's parameters (their grad hooks) */
    dg_comm *comm;                /* borrowed */
    dg_layer *net_ref;            /* that reference; NULL until the net is the sublayer */
    dg_reducer *reducer;
    /* Local SGD: k > 1 trains each rank alone and averages every k-th step; user_no_sync is what
     * dg_dp_no_sync asked for (local steps keep the reducer off whatever it says) */
    int local_k;
    bool average_buffers, user_no_sync;
    int64_t local_steps;          /* since the last averaging */
    int64_t averagings;
} dp_state;

static const dg_layer_class data_parallel_class = DG_LAYER_CLASS("DataParallel");
const dg_layer_class *dg_data_parallel_class(void) { return &data_parallel_class; }

static void dp_state_free(void *u) {
    dp_state *s = u;
    if (!s) return;
    dg_reducer_free(s->reducer);
    dg_layer_free(s->net_ref);
    free(s);
}

/* as many inputs as the wrapped net takes */
static dg_tensor *dp_forward(dg_layer *self, const dg_tensor *const *in, int n) {
    dp_state *s = dg_layer_user(self);
    return dg_forward_multi(s->net, in, n);
}

static dp_state *state_of(const dg_layer *dp, const char *op) {
    if (!dp) { DG_ERR(DG_EINVAL, "%s: layer is NULL", op); return NULL; }
    if (!dg_layer_is(dp, &data_parallel_class)) {   /* only then is the user state a dp_state */
        DG_ERR(DG_EINVAL, "%s: layer is a %s, not a DataParallel (wrap it with dg_data_parallel)", op, dg_layer_type(dp));
        return NULL;
    }
    return dg_layer_user(dp);
}

/* Every rank starts from rank 0's parameters and buffers. */
static int broadcast_state(dg_layer *net, dg_comm *comm) {
    if (comm->size == 1) return 0;
    int n = 0, rc = 0;
    dg_named_tensor *sd = dg_layer_state_dict(net, &n);
    if (!sd) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    dg_no_grad_begin();
    for (int i = 0; i < n && !rc; i++) {
        dg_tensor *t = sd[i].tensor;
        if (!dg_is_contiguous(t)) {
            DG_ERR(DG_EINVAL, "data_parallel: '%s' is a non-contiguous view; cannot broadcast it in place", sd[i].name);
            rc = DG_EINVAL;
        } else if ((rc = dg_comm_broadcast(comm, t, 0)) != 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", dg_last_error());
            DG_ERR(rc, "data_parallel: broadcasting '%s' from rank 0: %s", sd[i].name, msg);
        }
    }
    dg_no_grad_end();
    free(sd);
    return rc;
}

dg_dp_params dg_dp_default_params(void) {
    return (dg_dp_params){ .params_tag = DG_PARAMS_TAG, .bucket_mb = 25, .first_bucket_mb = 1, .overlap = false, .find_unused_parameters = false };
}

dg_layer *dg_data_parallel(dg_layer *net, dg_comm *comm, dg_dp_params p) {
    DG_CHECK_PARAMS("data_parallel", p, dg_dp_default_params);
    DG_CHECK_HANDLE(net, "data_parallel: net is NULL");
    if (!(p.bucket_mb > 0 && isfinite(p.bucket_mb)) || !(p.first_bucket_mb > 0 && isfinite(p.first_bucket_mb))) {
        dg_layer_free(net);
        DG_ERR(DG_EINVAL, "data_parallel: bucket_mb and first_bucket_mb must be > 0, got %g and %g (dg_dp_default_params() "
                          "has 25 and 1)", p.bucket_mb, p.first_bucket_mb);
        return NULL;
    }
    if (!comm) { dg_layer_free(net); DG_ERR(DG_EINVAL, "data_parallel: communicator is NULL (dg_fleet_init or dg_comm_new first)"); return NULL; }
    dp_state *s = calloc(1, sizeof *s);
    if (!s) { dg_layer_free(net); DG_ERR(DG_ENOMEM, "data_parallel: out of memory"); return NULL; }
    s->net = net;
    s->comm = comm;
    s->local_k = 1;
    int n_in = dg_layer_num_inputs(net);
    dg_layer *dp = dg_layer_new_multi(&data_parallel_class, dp_forward, n_in > 0 ? n_in : 1, s, dp_state_free);
    if (!dp) { dg_layer_free(net); return NULL; }
    if (dg_layer_add_sublayer(dp, "_layers", net) != 0) { dg_layer_free(dp); return NULL; }
    s->net_ref = dg_layer_ref(net);
    int rc = broadcast_state(net, comm);
    int np = 0;
    dg_named_tensor *named = rc ? NULL : dg_layer_named_parameters(net, &np);
    if (!rc && !named) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    if (!rc) {
        dg_tensor **params = malloc(sizeof *params * (size_t)(np ? np : 1));
        char **names = malloc(sizeof *names * (size_t)(np ? np : 1));
        if (params && names) {
            for (int i = 0; i < np; i++) { params[i] = named[i].tensor; names[i] = (char *)named[i].name; }
            s->reducer = dg_reducer_new(comm, params, names, np, p);
        }
        if (!s->reducer) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
        free(params);
        free(names);
    }
    free(named);
    if (rc) { dg_layer_free(dp); return NULL; }
    dg_layer_set_extra_repr(dp, "world_size=%d, backend=%s, buckets=%d, overlap=%s", comm->size, comm->be->name,
                            dg_reducer_num_buckets(s->reducer), p.overlap ? "True" : "False");
    return dp;
}

dg_tensor *dg_dp_scale_loss(dg_layer *dp, const dg_tensor *loss) {
    dp_state *s = state_of(dp, "scale_loss");
    if (!s) return NULL;
    DG_CHECK_TENSOR("scale_loss", loss);
    /* Paddle divides by the number of ranks so that summed gradients are the mean's; a Local SGD
     * step keeps its rank's own gradient */
    return s->comm->size == 1 || s->local_k > 1 ? dg_mul_scalar(loss, 1.0) : dg_div_scalar(loss, (double)s->comm->size);
}

int dg_dp_apply_collective_grads(dg_layer *dp) {
    dp_state *s = state_of(dp, "apply_collective_grads");
    if (!s) return dg_last_status();
    uint64_t t0 = dg_profiler_span_begin();
    int rc = dg_reducer_apply(s->reducer);
    dg_profiler_span_end(t0, DG_PROFILER_COLLECTIVE, "apply_collective_grads", -1, -1);
    return rc;
}

int dg_dp_no_sync(dg_layer *dp, bool on) {
    dp_state *s = state_of(dp, "no_sync");
    if (!s) return dg_last_status();
    s->user_no_sync = on;
    s->reducer->no_sync = on || s->local_k > 1;
    return 0;
}

/* The mean over the ranks of every parameter (and buffer, when asked) of the net, in place. */
static int average_state(dp_state *s) {
    int n = 0, rc = 0;
    dg_named_tensor *sd = s->average_buffers ? dg_layer_state_dict(s->net, &n) : dg_layer_named_parameters(s->net, &n);
    if (!sd) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    dg_no_grad_begin();
    for (int i = 0; i < n && !rc; i++) {
        dg_tensor *t = sd[i].tensor;
        dg_dtype dt = dg_dtype_of(t);
        if (dt != DG_F32 && dt != DG_F64 && dt != DG_F16 && dt != DG_BF16) continue;   /* counters stay each rank's */
        rc = dg_comm_all_reduce(s->comm, t, DG_COMM_AVG);
        if (rc) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", dg_last_error());
            DG_ERR(rc, "local_sgd: averaging '%s' over %d ranks: %s", sd[i].name, s->comm->size, msg);
        }
    }
    dg_no_grad_end();
    free(sd);
    if (!rc) s->averagings++, s->local_steps = 0;
    return rc;
}

int dg_dp_set_local_sgd(dg_layer *dp, int k, bool average_buffers) {
    dp_state *s = state_of(dp, "set_local_sgd");
    if (!s) return dg_last_status();
    DG_CHECK_INT(k >= 1, "set_local_sgd: k must be >= 1 (1: ordinary DataParallel), got %d", k);
    s->average_buffers = average_buffers;
    /* ranks that stepped alone since the last averaging must agree before the schedule changes */
    int rc = s->local_steps > 0 && k != s->local_k ? average_state(s) : 0;
    if (rc) return rc;
    s->local_k = k;
    s->reducer->no_sync = s->user_no_sync || k > 1;
    return 0;
}

int dg_dp_local_sgd_step(dg_layer *dp) {
    dp_state *s = state_of(dp, "local_sgd_step");
    if (!s) return dg_last_status();
    if (s->local_k == 1 || s->comm->size == 1) return 0;
    if (++s->local_steps < s->local_k) return 0;
    int rc = average_state(s);
    return rc ? rc : 1;
}

int64_t dg_dp_local_sgd_averagings(const dg_layer *dp) {
    dp_state *s = state_of(dp, "local_sgd_averagings");
    return s ? s->averagings : dg_last_status();
}

int dg_fleet_get_local_sgd_steps(int pass_id, int local_sgd_steps, int local_sgd_warmup) {
    int offset = pass_id - local_sgd_warmup;
    if (offset < 0) return 1;
    /* the warm-up doubles the step: 1, 2, 4, ... while it stays <= local_sgd_steps */
    int n = 0;
    for (long long p = 1; p <= local_sgd_steps && n < 31; p *= 2) {
        if (n == offset) return (int)p;
        n++;
    }
    return local_sgd_steps;
}

int dg_fleet_adaptive_local_step(double ini_loss, double ini_lr, double cur_loss, double cur_lr, int base_step, int pre_step) {
    const double inf_loss = 0.6;   /* the guide's (from arXiv:1810.08313) */
    double fir = ini_lr * (cur_loss - inf_loss), sec = cur_lr * fmax(ini_loss - inf_loss, 1e-12);
    double ratio = fir / sec;
    /* the current loss at or below the guide's floor makes ratio <= 0, where Python's
     * math.sqrt raises: K is 1 there (the parameters change fast relative to what is left) */
    if (!(ratio > 0)) return 1;
    double st = base_step * sqrt(ratio);
    if (st >= (double)pre_step + 21) return pre_step;   /* also +inf */
    int step = (int)st;                                  /* Python's int(): toward zero */
    if (step < 1) step = 1;
    if (step > pre_step + 20) step = pre_step;
    return step;
}

dg_comm *dg_dp_comm(const dg_layer *dp) { dp_state *s = state_of(dp, "dp_comm"); return s ? s->comm : NULL; }
dg_layer *dg_dp_module(const dg_layer *dp) { dp_state *s = state_of(dp, "dp_module"); return s ? s->net : NULL; }
