/* dist/sync_batch_norm.c — SyncBatchNorm (torch.nn.SyncBatchNorm / paddle.nn.SyncBatchNorm):
 * BatchNorm whose training statistics are those of every rank's batch together, and the
 * converter that puts one in the place of each BatchNorm1d/2d of a model.
 *
 * Training over more than one rank is one op written with the custom-op API: forward sums x
 * and x^2 per channel, all-reduces them with the count (one collective, in float64) and
 * normalises with the global mean and biased variance; backward sums dy and dy * xhat per
 * channel, all-reduces those (one collective) and forms the input gradient of BatchNorm on the
 * concatenated batch. The weight and bias gradients stay this rank's own sums, as torch's: the
 * DataParallel reducer adds them up like every other parameter's. Eval mode and a world of one
 * are dg_batch_norm itself, so a world of one is BatchNorm bit for bit. */
#include "dist_internal.h"
#include <dygraph/custom_op.h>

typedef struct {
    int64_t c;
    double momentum, eps;
    bool cumulative;
    dg_comm *comm;   /* borrowed */
    dg_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;   /* borrowed from the layer; NULL when absent */
} sbn_state;

/* what backward needs besides the saved tensors */
typedef struct {
    dg_comm *comm;
    double count;    /* values per channel over every rank */
    bool has_weight;
} sbn_attr;

static const dg_layer_class sync_batch_norm_class = DG_LAYER_CLASS("SyncBatchNorm");
const dg_layer_class *dg_nn_sync_batch_norm_class(void) { return &sync_batch_norm_class; }

/* every axis but the channel's, and the shape [1, C, 1, ...] that broadcasts a [C] over x */
static int reduce_axes(const dg_tensor *x, int *axes, dg_shape *bshape) {
    int nd = dg_ndim(x), na = 0;
    *bshape = (dg_shape){ .ndim = nd };
    for (int i = 0; i < nd; i++) {
        bshape->d[i] = i == 1 ? dg_dim(x, 1) : 1;
        if (i != 1) axes[na++] = i;
    }
    return na;
}

/* t in dtype dt: t itself when it already is */
static dg_tensor *as_dtype(const dg_tensor *t, dg_dtype dt) {
    return t && dg_dtype_of(t) != dt ? dg_cast(t, dt) : (dg_tensor *)t;
}

/* the statistics of half inputs are float32, as dg_batch_norm's */
static dg_dtype stat_dtype(const dg_tensor *x) {
    dg_dtype d = dg_dtype_of(x);
    return d == DG_F16 || d == DG_BF16 ? DG_F32 : d;
}

/* [2C (+1)] of float64 on t's device: a then b (then one more value), all-reduced over comm in
 * place — one collective for both sums (and the count) */
static dg_tensor *all_reduce_pair(dg_comm *comm, const dg_tensor *a, const dg_tensor *b, const double *extra) {
    dg_tensor *parts[3] = { as_dtype(a, DG_F64), as_dtype(b, DG_F64), NULL };
    int n = 2;
    if (extra) {
        parts[2] = dg_empty_on(DG_SHAPE(1), DG_F64, dg_device_of(a));
        if (!parts[2] || dg_copy_from_host(parts[2], extra, sizeof *extra)) return NULL;
        n = 3;
    }
    if (!parts[0] || !parts[1]) return NULL;
    dg_tensor *all = dg_concat(parts, n, 0);
    if (!all || dg_comm_all_reduce(comm, all, DG_COMM_SUM)) return NULL;
    return all;
}

static int sbn_backward(dg_node *nd, const dg_tensor *gy, dg_tensor **gi) {
    const sbn_attr *a = dg_node_attr(nd);
    const dg_tensor *x = dg_node_saved(nd, 0), *mean = dg_node_saved(nd, 1), *invstd = dg_node_saved(nd, 2);
    const dg_tensor *w = a->has_weight ? dg_node_saved(nd, 3) : NULL;
    dg_dtype sd = dg_dtype_of(mean);
    int axes[DG_MAX_DIMS];
    dg_shape bs;
    int na = reduce_axes(x, axes, &bs);
    int64_t c = dg_dim(x, 1);
    dg_tensor *g = as_dtype(gy, sd);
    dg_tensor *xhat = dg_mul(dg_sub(as_dtype(x, sd), dg_reshape(mean, bs)), dg_reshape(invstd, bs));
    dg_tensor *sdy = dg_sum(g, axes, na, false), *sdyx = dg_sum(dg_mul(g, xhat), axes, na, false);
    if (!sdy || !sdyx) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    if (dg_node_needs_grad(nd, 1) && !(gi[1] = as_dtype(sdyx, dg_node_input_dtype(nd, 1)))) return dg_last_status();
    if (dg_node_needs_grad(nd, 2) && !(gi[2] = as_dtype(sdy, dg_node_input_dtype(nd, 2)))) return dg_last_status();
    if (!dg_node_needs_grad(nd, 0)) return 0;   /* no rank needs the sums then: the graph is the same on every rank */
    dg_tensor *sums = all_reduce_pair(a->comm, sdy, sdyx, NULL);
    if (!sums) return dg_last_status() ? dg_last_status() : DG_ECOMM;
    /* BatchNorm's input gradient on the whole batch: w invstd (dy - mean(dy) - xhat mean(dy xhat)) */
    dg_tensor *mdy = dg_reshape(as_dtype(dg_div_scalar(dg_slice(sums, 0, 0, c, 1), a->count), sd), bs);
    dg_tensor *mdyx = dg_reshape(as_dtype(dg_div_scalar(dg_slice(sums, 0, c, 2 * c, 1), a->count), sd), bs);
    dg_tensor *scale = dg_reshape(w ? dg_mul(invstd, as_dtype(w, sd)) : (dg_tensor *)invstd, bs);
    dg_tensor *gx = dg_mul(dg_sub(dg_sub(g, mdy), dg_mul(xhat, mdyx)), scale);
    gi[0] = as_dtype(gx, dg_node_input_dtype(nd, 0));
    return gi[0] ? 0 : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
}

/* running = (1 - m) running + m batch, with the unbiased variance of the count over every rank:
 * the rule of dg_batch_norm, so every rank's running statistics stay equal */
static int update_running(sbn_state *s, const dg_tensor *mean64, const dg_tensor *var64, double count, double m) {
    dg_tensor *mean = as_dtype(mean64, dg_dtype_of(s->running_mean));
    dg_tensor *var = as_dtype(dg_mul_scalar(var64, count / (count - 1)), dg_dtype_of(s->running_var));
    if (!mean || !var) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    int rc = dg_scale_(s->running_mean, 1.0 - m);
    if (!rc) rc = dg_axpy_(s->running_mean, m, mean);
    if (!rc) rc = dg_scale_(s->running_var, 1.0 - m);
    if (!rc) rc = dg_axpy_(s->running_var, m, var);
    return rc;
}

/* Training over the ranks of s->comm: every rank must call it for the same layers in the same
 * order (it runs a collective, and its backward another). */
static dg_tensor *sync_train(dg_layer *self, sbn_state *s, const dg_tensor *x, double momentum) {
    char sh[96];
    const dg_tensor *in[3] = { x, s->weight, s->bias };
    bool record = dg_needs_record(in, 3);
    dg_dtype sd = stat_dtype(x);
    int axes[DG_MAX_DIMS];
    dg_shape bs;
    int na = reduce_axes(x, axes, &bs);
    double local = (double)(dg_numel(x) / s->c);
    uint64_t errs = dg_error_count();
    /* temporaries die with this scope; the node keeps references to what it saves */
    dg_scope *sc = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *xs = as_dtype(x, sd), *y = NULL, *mean = NULL, *invstd = NULL;
    dg_tensor *stats = all_reduce_pair(s->comm, dg_sum(xs, axes, na, false), dg_sum(dg_mul(xs, xs), axes, na, false), &local);
    double count = stats ? dg_item(dg_slice(stats, 0, 2 * s->c, 2 * s->c + 1, 1)) : NAN;
    int rc = !stats ? (dg_last_status() ? dg_last_status() : DG_ECOMM) : isfinite(count) ? 0 : DG_ECOMM;
    if (!rc && count <= 1) {   /* every rank sees the same count, so every rank stops here */
        DG_LAYER_ERROR(self, "expected more than 1 value per channel over all ranks when training, got %.0f (input %s on "
                             "rank %d)", count, dg_shape_str(x, sh, sizeof sh), dg_comm_rank(s->comm));
        rc = DG_EINVAL;
    }
    if (!rc) {
        dg_tensor *mean64 = dg_div_scalar(dg_slice(stats, 0, 0, s->c, 1), count);
        /* E[x^2] - E[x]^2 in float64 from float64-accumulated sums; clipped at 0 against rounding */
        dg_tensor *var64 = dg_clip(dg_sub(dg_div_scalar(dg_slice(stats, 0, s->c, 2 * s->c, 1), count), dg_mul(mean64, mean64)),
                                   0.0, INFINITY);
        mean = dg_contiguous(as_dtype(mean64, sd));
        dg_tensor *var = dg_contiguous(as_dtype(var64, sd));
        invstd = as_dtype(dg_rdiv_scalar(dg_sqrt(dg_add_scalar(var64, s->eps)), 1.0), sd);
        dg_batch_norm_params bp = dg_batch_norm_default_params();
        bp.training = false;   /* normalise with the given (global) statistics */
        bp.eps = s->eps;
        y = mean && var && invstd ? dg_batch_norm(x, mean, var, s->weight, s->bias, bp) : NULL;
        if (!y) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
        /* a forward run again by recompute's backward saw this batch already */
        if (!rc && s->running_mean && !dg_is_recomputing()) rc = update_running(s, mean64, var64, count, momentum);
    }
    dg_no_grad_end();
    if (!rc && record) {
        dg_node *nd = dg_record("sync_batch_norm", y, in, 3, sbn_backward);
        if (!nd) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
        else {
            *(sbn_attr *)dg_node_attr(nd) = (sbn_attr){ .comm = s->comm, .count = count, .has_weight = s->weight != NULL };
            rc = dg_node_save(nd, x);
            if (!rc) rc = dg_node_save(nd, mean);
            if (!rc) rc = dg_node_save(nd, invstd);
            if (!rc && s->weight) rc = dg_node_save(nd, s->weight);
        }
    }
    if (rc) {
        if (!dg_error_since(errs)) DG_LAYER_ERROR(self, "failed for input %s on rank %d of %d", dg_shape_str(x, sh, sizeof sh),
                                                  dg_comm_rank(s->comm), dg_comm_size(s->comm));
        y = NULL;   /* freed with the scope */
    }
    y = dg_keep_in_parent(y);
    dg_scope_end(sc);
    return y;
}

static dg_tensor *sbn_forward(dg_layer *self, const dg_tensor *x) {
    sbn_state *s = dg_layer_user(self);
    char sh[96];
    if (dg_ndim(x) < 2 || dg_dim(x, 1) != s->c)
        return DG_LAYER_ERROR(self, "input %s must be [N, C, ...] with C = num_features = %lld", dg_shape_str(x, sh, sizeof sh),
                              (long long)s->c);
    const dg_tensor *ref = s->weight ? s->weight : s->running_mean;
    /* a half input with f32 tensors is mixed precision's case (O2 keeps norm layers f32) */
    bool half_x = dg_dtype_of(x) == DG_F16 || dg_dtype_of(x) == DG_BF16;
    if (!dg_dtype_is_float(dg_dtype_of(x)) ||
        (ref && dg_dtype_of(x) != dg_dtype_of(ref) && !(half_x && dg_dtype_of(ref) == DG_F32)))
        return DG_LAYER_ERROR(self, "input %s is %s but the layer's tensors are %s", dg_shape_str(x, sh, sizeof sh),
                              dg_dtype_name(dg_dtype_of(x)), ref ? dg_dtype_name(dg_dtype_of(ref)) : "float");
    bool training = dg_layer_is_training(self);
    /* as torch: batch statistics in training, or always when there are no running stats; they
     * are synchronised in training only */
    bool use_batch = training || !s->running_mean;
    bool sync = training && dg_comm_size(s->comm) > 1;
    if (use_batch && !sync && dg_numel(x) / s->c <= 1)
        return DG_LAYER_ERROR(self, "expected more than 1 value per channel when training, got input %s",
                              dg_shape_str(x, sh, sizeof sh));
    if (sync && dg_numel(x) == 0)
        return DG_LAYER_ERROR(self, "input %s is empty; every rank needs values to synchronise", dg_shape_str(x, sh, sizeof sh));
    double momentum = s->momentum;
    bool again = dg_is_recomputing();
    if (training && s->num_batches_tracked && !again) {
        double n = dg_item(s->num_batches_tracked) + 1;
        if (dg_fill_(s->num_batches_tracked, n)) return NULL;
        if (s->cumulative) momentum = 1.0 / n;
    }
    if (sync) return sync_train(self, s, x, momentum);
    dg_batch_norm_params bp = dg_batch_norm_default_params();
    bp.training = use_batch;
    bp.momentum = momentum;
    bp.eps = s->eps;
    bool no_update = again && training;   /* batch statistics, running ones left as the first run left them */
    return dg_batch_norm(x, no_update ? NULL : s->running_mean, no_update ? NULL : s->running_var, s->weight, s->bias, bp);
}

/* The layer over the given tensors (references taken over; NULL ones are made as BatchNorm
 * makes them when the settings ask for them). */
typedef struct { dg_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked; } sbn_tensors;

static dg_layer *sbn_make(int64_t c, dg_nn_batch_norm_params p, dg_comm *comm, sbn_tensors t) {
    sbn_state *s = calloc(1, sizeof *s);
    dg_layer *l = s ? dg_layer_new(&sync_batch_norm_class, sbn_forward, s, free) : NULL;
    if (!l) {
        if (!s) DG_ERR(DG_ENOMEM, "SyncBatchNorm: out of memory");
        dg_tensor *all[5] = { t.weight, t.bias, t.running_mean, t.running_var, t.num_batches_tracked };
        for (int i = 0; i < 5; i++) dg_tensor_free(all[i]);
        return NULL;
    }
    *s = (sbn_state){ .c = c, .momentum = p.momentum, .eps = p.eps, .cumulative = p.cumulative_average, .comm = comm };
    const char *mom = p.cumulative_average ? "None" : NULL;
    char mbuf[32];
    if (!mom) { snprintf(mbuf, sizeof mbuf, "%g", p.momentum); mom = mbuf; }
    dg_layer_set_extra_repr(l, "%lld, eps=%g, momentum=%s, affine=%s, track_running_stats=%s", (long long)c, p.eps, mom,
                            p.affine ? "True" : "False", p.track_running_stats ? "True" : "False");
    int rc = 0;
    bool dtype_ok = p.dtype == DG_F32 || p.dtype == DG_F64 || (t.weight || t.running_mean);
    if (!comm || c <= 0 || !(p.eps > 0 && isfinite(p.eps)) || !(p.momentum >= 0 && p.momentum <= 1) || !dtype_ok) {
        DG_LAYER_ERROR(l, "bad configuration: need a communicator, num_features > 0, eps > 0, momentum in [0, 1] and dtype "
                          "float32/float64 (communicator %s, num_features %lld, eps %g, momentum %g, dtype %s)",
                       comm ? "given" : "NULL", (long long)c, p.eps, p.momentum, dg_dtype_name(p.dtype));
        rc = DG_EINVAL;
    }
    if (!rc && p.affine) {   /* BatchNorm's where none were given */
        if (!t.weight) t.weight = dg_ones(DG_SHAPE(c), p.dtype);
        if (!t.bias) t.bias = dg_zeros(DG_SHAPE(c), p.dtype);
    }
    if (!rc && p.track_running_stats) {
        if (!t.running_mean) t.running_mean = dg_zeros(DG_SHAPE(c), p.dtype);
        if (!t.running_var) t.running_var = dg_ones(DG_SHAPE(c), p.dtype);
        if (!t.num_batches_tracked) t.num_batches_tracked = dg_scalar(0, DG_I64);
    }
    if (!rc && ((p.affine && (!t.weight || !t.bias)) ||
                (p.track_running_stats && (!t.running_mean || !t.running_var || !t.num_batches_tracked))))
        rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    const char *names[5] = { "weight", "bias", "running_mean", "running_var", "num_batches_tracked" };
    dg_tensor *given[5] = { t.weight, t.bias, t.running_mean, t.running_var, t.num_batches_tracked };
    dg_tensor **slot[5] = { &s->weight, &s->bias, &s->running_mean, &s->running_var, &s->num_batches_tracked };
    for (int i = 0; i < 5; i++) {
        if (!given[i]) continue;
        /* each add takes over its tensor whatever happens; after a failure the rest are released */
        if (rc) { dg_tensor_free(given[i]); continue; }
        *slot[i] = given[i];
        rc = i < 2 ? dg_layer_add_parameter(l, names[i], given[i]) : dg_layer_add_buffer(l, names[i], given[i]);
    }
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

dg_layer *dg_nn_sync_batch_norm(int64_t num_features, dg_nn_batch_norm_params p, dg_comm *comm) {
    DG_CHECK_PARAMS("nn_sync_batch_norm", p, dg_nn_batch_norm_default_params);
    return sbn_make(num_features, p, comm, (sbn_tensors){ 0 });
}

/* A SyncBatchNorm over bn's own tensors (shared: the same handles, so optimizers and anything
 * else that holds them follow), with its settings and mode. */
static dg_layer *from_batch_norm(dg_layer *bn, dg_comm *comm) {
    dg_nn_batch_norm_params p;
    int64_t c;
    if (dg_nn_batch_norm_settings(bn, &p, &c)) return NULL;
    sbn_tensors t = { dg_tensor_ref(dg_layer_parameter(bn, "weight")), dg_tensor_ref(dg_layer_parameter(bn, "bias")),
                      dg_tensor_ref(dg_layer_buffer(bn, "running_mean")), dg_tensor_ref(dg_layer_buffer(bn, "running_var")),
                      dg_tensor_ref(dg_layer_buffer(bn, "num_batches_tracked")) };
    dg_layer *l = sbn_make(c, p, comm, t);
    if (l && (dg_layer_is_training(bn) ? dg_layer_train(l) : dg_layer_eval(l))) { dg_layer_free(l); return NULL; }
    return l;
}

/* old BatchNorm -> its SyncBatchNorm, so a BatchNorm shared by two parents stays one layer */
typedef struct { dg_layer *old, *made; } conv_pair;
typedef struct { conv_pair *pairs; int n, cap; dg_comm *comm; } conv_map;

static int convert_children(dg_layer *l, conv_map *m) {
    if (dg_layer_is(l, dg_data_parallel_class())) {
        DG_ERR(DG_EINVAL, "convert_sync_batch_norm: the model holds a DataParallel, whose net is fixed at wrap time; convert "
                          "the net first, then wrap it (dg_data_parallel)");
        return DG_EINVAL;
    }
    for (int i = 0; i < dg_layer_num_children(l); i++) {
        dg_layer *ch = dg_layer_child(l, i);
        bool bn = dg_layer_is(ch, dg_nn_batch_norm1d_class()) || dg_layer_is(ch, dg_nn_batch_norm2d_class());
        if (!bn) {
            if (dg_layer_is(ch, &sync_batch_norm_class)) continue;
            int rc = convert_children(ch, m);
            if (rc) return rc;
            continue;
        }
        dg_layer *made = NULL;
        for (int k = 0; k < m->n && !made; k++) if (m->pairs[k].old == ch) made = m->pairs[k].made;
        if (!made) {
            if (m->n == m->cap) {
                int cap = m->cap ? 2 * m->cap : 8;
                conv_pair *np = realloc(m->pairs, sizeof *np * (size_t)cap);
                if (!np) { DG_ERR(DG_ENOMEM, "convert_sync_batch_norm: out of memory"); return DG_ENOMEM; }
                m->pairs = np, m->cap = cap;
            }
            if (!(made = from_batch_norm(ch, m->comm))) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
            /* the map holds both: the old one stays alive (its address cannot be reused) until the walk ends */
            m->pairs[m->n++] = (conv_pair){ dg_layer_ref(ch), made };
        }
        int rc = dg_layer_replace_sublayer(l, dg_layer_child_name(l, i), dg_layer_ref(made));
        if (rc) return rc;
    }
    return 0;
}

dg_layer *dg_nn_convert_sync_batch_norm(dg_layer *model, dg_comm *comm) {
    DG_CHECK_HANDLE(model, "convert_sync_batch_norm: model is NULL");
    if (!comm) {
        dg_layer_free(model);
        DG_ERR(DG_EINVAL, "convert_sync_batch_norm: communicator is NULL (dg_fleet_init or dg_comm_new first)");
        return NULL;
    }
    if (dg_layer_is(model, dg_nn_batch_norm1d_class()) || dg_layer_is(model, dg_nn_batch_norm2d_class())) {
        dg_layer *l = from_batch_norm(model, comm);
        dg_layer_free(model);
        return l;
    }
    conv_map m = { .comm = comm };
    int rc = convert_children(model, &m);
    for (int k = 0; k < m.n; k++) { dg_layer_free(m.pairs[k].old); dg_layer_free(m.pairs[k].made); }
    free(m.pairs);
    if (rc) {   /* releasing the model could record a failure of its own: ours is the one to report */
        dg_error_saved sv;
        dg_error_save(&sv);
        dg_layer_free(model);
        dg_error_restore(&sv);
        return NULL;
    }
    return model;
}
