/* nn/norm.c — BatchNorm1d and BatchNorm2d (torch.nn.BatchNorm*d / paddle.nn.BatchNorm*D).
 * Parameters weight (ones) and bias (zeros) when affine; buffers running_mean (zeros),
 * running_var (ones) and num_batches_tracked (i64 scalar) when track_running_stats — the names,
 * shapes and update rules of torch, so state dicts load as they are. */
#include "nn_internal.h"
#include <math.h>

typedef struct {
    int64_t c;
    int ndim_lo, ndim_hi;               /* accepted input ranks */
    double momentum, eps;
    bool cumulative;
    dg_dtype dtype;                     /* as made; the tensors' own dtype once there are any (layer_to_dtype) */
    dg_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
} bn_state;

static const dg_layer_class batch_norm1d_class = DG_LAYER_CLASS("BatchNorm1d");
const dg_layer_class *dg_nn_batch_norm1d_class(void) { return &batch_norm1d_class; }
static const dg_layer_class batch_norm2d_class = DG_LAYER_CLASS("BatchNorm2d");
const dg_layer_class *dg_nn_batch_norm2d_class(void) { return &batch_norm2d_class; }

bool dg_nn_batch_norm_parts(const dg_layer *l, double *eps, dg_tensor **weight, dg_tensor **bias,
                            dg_tensor **running_mean, dg_tensor **running_var) {
    if (!dg_layer_is(l, &batch_norm1d_class) && !dg_layer_is(l, &batch_norm2d_class)) return false;
    bn_state *s = dg_layer_user(l);
    *eps = s->eps;
    *weight = s->weight;
    *bias = s->bias;
    *running_mean = s->running_mean;
    *running_var = s->running_var;
    return true;
}

int dg_nn_batch_norm_settings(const dg_layer *l, dg_nn_batch_norm_params *p, int64_t *num_features) {
    DG_CHECK_HANDLE_INT(l, "batch_norm_settings: layer is NULL");
    DG_CHECK_INT(p, "batch_norm_settings: params is NULL");
    DG_CHECK_INT(dg_layer_is(l, &batch_norm1d_class) || dg_layer_is(l, &batch_norm2d_class),
                 "batch_norm_settings: layer is a %s, not a BatchNorm1d/BatchNorm2d", dg_layer_type(l));
    bn_state *s = dg_layer_user(l);
    const dg_tensor *ref = s->weight ? s->weight : s->running_mean;
    *p = dg_nn_batch_norm_default_params();   /* tagged: what it gives can make a layer again */
    p->momentum = s->momentum;
    p->eps = s->eps;
    p->cumulative_average = s->cumulative;
    p->affine = s->weight != NULL;
    p->track_running_stats = s->running_mean != NULL;
    p->dtype = ref ? dg_dtype_of(ref) : s->dtype;
    if (num_features) *num_features = s->c;
    return 0;
}

/* The layer's forward; `relu` fuses the ReLU after it (dg_batch_norm_relu). */
static dg_tensor *bn_run(dg_layer *self, const dg_tensor *x, bool relu) {
    bn_state *s = dg_layer_user(self);
    char sh[96];
    int nd = dg_ndim(x);
    if (nd < s->ndim_lo || nd > s->ndim_hi || dg_dim(x, 1) != s->c)
        return DG_LAYER_ERROR(self, "input %s must be %s", dg_shape_str(x, sh, sizeof sh),
                              s->ndim_lo == 4 ? "[N, C, H, W] with C = num_features" : "[N, C] or [N, C, L] with C = num_features");
    const dg_tensor *ref = s->weight ? s->weight : s->running_mean;
    /* a half input with f32 tensors is mixed precision's case (O2 keeps norm layers f32) */
    bool half_x = dg_dtype_of(x) == DG_F16 || dg_dtype_of(x) == DG_BF16;
    if (ref && dg_dtype_of(x) != dg_dtype_of(ref) && !(half_x && dg_dtype_of(ref) == DG_F32))
        return DG_LAYER_ERROR(self, "input %s is %s but the layer's tensors are %s", dg_shape_str(x, sh, sizeof sh),
                              dg_dtype_name(dg_dtype_of(x)), dg_dtype_name(dg_dtype_of(ref)));
    int64_t per_channel = dg_numel(x) / (s->c ? s->c : 1);
    bool training = dg_layer_is_training(self);
    /* as torch: batch statistics in training, or always when there are no running stats */
    bool use_batch = training || !s->running_mean;
    if (use_batch && per_channel <= 1)
        return DG_LAYER_ERROR(self, "expected more than 1 value per channel when training, got input %s",
                              dg_shape_str(x, sh, sizeof sh));
    double momentum = s->momentum;
    /* a forward run again by recompute's backward saw this batch already: its statistics went
     * into the running ones the first time */
    bool again = dg_is_recomputing();
    if (training && s->num_batches_tracked && !again) {
        double n = dg_item(s->num_batches_tracked) + 1;
        if (dg_fill_(s->num_batches_tracked, n)) return NULL;
        if (s->cumulative) momentum = 1.0 / n;
    }
    /* the running stats are read in eval and updated in training (when tracked) */
    dg_batch_norm_params bp = dg_batch_norm_default_params();
    bp.training = use_batch;
    bp.momentum = momentum;
    bp.eps = s->eps;
    dg_tensor *rm = s->running_mean, *rv = s->running_var;
    if (again && training) rm = rv = NULL;   /* training with no running stats: batch statistics, no update */
    return (relu ? dg_batch_norm_relu : dg_batch_norm)(x, rm, rv, s->weight, s->bias, bp);
}

static dg_tensor *bn_forward(dg_layer *self, const dg_tensor *x) { return bn_run(self, x, false); }

dg_tensor *dg_nn_batch_norm_relu_forward(dg_layer *bn, const dg_tensor *x) {
    if (!x || (!dg_layer_is(bn, &batch_norm1d_class) && !dg_layer_is(bn, &batch_norm2d_class))) {   /* NULL: forward says why */
        dg_tensor *y = dg_forward(bn, x);
        return dg_advance(y, dg_relu(y));
    }
    return bn_run(bn, x, true);
}

dg_nn_batch_norm_params dg_nn_batch_norm_default_params(void) {
    return (dg_nn_batch_norm_params){ .params_tag = DG_PARAMS_TAG, .momentum = 0.1, .eps = 1e-5, .cumulative_average = false, .affine = true,
                                      .track_running_stats = true, .dtype = DG_F32 };
}

static dg_layer *bn_new(const dg_layer_class *cls, int lo, int hi, int64_t c, dg_nn_batch_norm_params p) {
    DG_CHECK_PARAMS(cls->name, p, dg_nn_batch_norm_default_params);
    bn_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    dg_layer *l = dg_layer_new(cls, bn_forward, s, free);
    if (!l) return NULL;
    *s = (bn_state){ .c = c, .ndim_lo = lo, .ndim_hi = hi, .momentum = p.momentum, .eps = p.eps,
                     .cumulative = p.cumulative_average,
                     .dtype = p.dtype };
    if (p.cumulative_average)
        dg_layer_set_extra_repr(l, "%lld, eps=%g, momentum=None, affine=%s, track_running_stats=%s", (long long)c, s->eps,
                                p.affine ? "True" : "False", p.track_running_stats ? "True" : "False");
    else
        dg_layer_set_extra_repr(l, "%lld, eps=%g, momentum=%g, affine=%s, track_running_stats=%s", (long long)c, s->eps,
                                s->momentum, p.affine ? "True" : "False", p.track_running_stats ? "True" : "False");
    if (c <= 0 || !(s->eps > 0 && isfinite(s->eps)) || !(s->momentum >= 0 && s->momentum <= 1) ||
        (p.dtype != DG_F32 && p.dtype != DG_F64)) {
        DG_LAYER_ERROR(l, "bad configuration: need num_features > 0, eps > 0, momentum in [0, 1] and dtype "
                          "float32/float64 (num_features %lld, eps %g, momentum %g, dtype %s; dg_nn_batch_norm_default_params() "
                          "has the defaults)", (long long)c, p.eps,
                       p.momentum, dg_dtype_name(p.dtype));
        dg_layer_free(l);
        return NULL;
    }
    int rc = 0;
    if (p.affine) {
        rc = dg_layer_add_parameter(l, "weight", s->weight = dg_ones(DG_SHAPE(c), p.dtype));
        if (!rc) rc = dg_layer_add_parameter(l, "bias", s->bias = dg_zeros(DG_SHAPE(c), p.dtype));
    }
    if (!rc && p.track_running_stats) {
        rc = dg_layer_add_buffer(l, "running_mean", s->running_mean = dg_zeros(DG_SHAPE(c), p.dtype));
        if (!rc) rc = dg_layer_add_buffer(l, "running_var", s->running_var = dg_ones(DG_SHAPE(c), p.dtype));
        if (!rc) rc = dg_layer_add_buffer(l, "num_batches_tracked", s->num_batches_tracked = dg_scalar(0, DG_I64));
    }
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

dg_layer *dg_nn_batch_norm1d(int64_t c, dg_nn_batch_norm_params p) { return bn_new(&batch_norm1d_class, 2, 3, c, p); }
dg_layer *dg_nn_batch_norm2d(int64_t c, dg_nn_batch_norm_params p) { return bn_new(&batch_norm2d_class, 4, 4, c, p); }
