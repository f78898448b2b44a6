/* nn/feature_norm.c — LayerNorm and GroupNorm (torch.nn's): per-sample normalisation with
 * parameters "weight" (ones) and "bias" (zeros) when affine, torch's names and shapes. */
#include "nn_internal.h"
#include <math.h>

typedef struct {
    dg_shape shape;        /* LayerNorm: normalized_shape; GroupNorm: [num_channels] */
    int64_t groups;        /* GroupNorm only */
    double eps;
    dg_tensor *weight, *bias;
} feature_norm_state;

static const dg_layer_class layer_norm_class = DG_LAYER_CLASS("LayerNorm");
const dg_layer_class *dg_nn_layer_norm_class(void) { return &layer_norm_class; }
static const dg_layer_class group_norm_class = DG_LAYER_CLASS("GroupNorm");
const dg_layer_class *dg_nn_group_norm_class(void) { return &group_norm_class; }

dg_nn_layer_norm_params dg_nn_layer_norm_default_params(void) {
    return (dg_nn_layer_norm_params){ .params_tag = DG_PARAMS_TAG, .eps = 1e-5, .elementwise_affine = true, .dtype = DG_F32 };
}

static dg_tensor *layer_norm_forward(dg_layer *self, const dg_tensor *x) {
    feature_norm_state *s = dg_layer_user(self);
    return dg_layer_norm(x, s->shape, s->weight, s->bias, s->eps);
}
static dg_tensor *group_norm_forward(dg_layer *self, const dg_tensor *x) {
    feature_norm_state *s = dg_layer_user(self);
    char sh[96];
    if (dg_ndim(x) < 2 || dg_dim(x, 1) != s->shape.d[0])
        return DG_LAYER_ERROR(self, "input %s must be [N, %lld, ...]", dg_shape_str(x, sh, sizeof sh), (long long)s->shape.d[0]);
    return dg_group_norm(x, s->groups, s->weight, s->bias, s->eps);
}

static dg_layer *feature_norm_new(const dg_layer_class *cls, dg_layer_forward_fn fwd, dg_shape shape, int64_t groups,
                                  dg_nn_layer_norm_params p, const char *repr) {
    feature_norm_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    dg_layer *l = dg_layer_new(cls, fwd, s, free);
    if (!l) return NULL;
    *s = (feature_norm_state){ .shape = shape, .groups = groups, .eps = p.eps };
    dg_layer_set_extra_repr(l, "%s, eps=%g, %s=%s", repr, p.eps, cls == &group_norm_class ? "affine" : "elementwise_affine",
                            p.elementwise_affine ? "True" : "False");
    bool dims_ok = shape.ndim >= 1 && shape.ndim <= DG_MAX_DIMS;
    for (int i = 0; dims_ok && i < shape.ndim; i++) dims_ok = shape.d[i] > 0;
    if (!dims_ok || (cls == &group_norm_class && (groups <= 0 || shape.d[0] % groups != 0)) || !(p.eps >= 0 && isfinite(p.eps)) ||
        (p.dtype != DG_F32 && p.dtype != DG_F64)) {
        DG_LAYER_ERROR(l, "bad configuration: need positive sizes%s, eps >= 0 and dtype float32/float64 (got eps %g, %s)",
                       cls == &group_norm_class ? " and num_channels divisible by num_groups" : "", p.eps, dg_dtype_name(p.dtype));
        dg_layer_free(l);
        return NULL;
    }
    int rc = 0;
    if (p.elementwise_affine) {
        rc = dg_layer_add_parameter(l, "weight", s->weight = dg_ones(shape, p.dtype));
        if (!rc) rc = dg_layer_add_parameter(l, "bias", s->bias = dg_zeros(shape, p.dtype));
    }
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

dg_layer *dg_nn_layer_norm(dg_shape shape, dg_nn_layer_norm_params p) {
    DG_CHECK_PARAMS("nn_layer_norm", p, dg_nn_layer_norm_default_params);
    char repr[128] = "(";
    size_t len = 1;
    for (int i = 0; i < shape.ndim && i < DG_MAX_DIMS && len < sizeof repr - 24; i++)
        len += (size_t)snprintf(repr + len, sizeof repr - len, "%s%lld", i ? ", " : "", (long long)shape.d[i]);
    snprintf(repr + len, sizeof repr - len, shape.ndim == 1 ? ",)" : ")");
    return feature_norm_new(&layer_norm_class, layer_norm_forward, shape, 0, p, repr);
}

dg_layer *dg_nn_group_norm(int64_t groups, int64_t channels, dg_nn_layer_norm_params p) {
    DG_CHECK_PARAMS("nn_group_norm", p, dg_nn_layer_norm_default_params);
    char repr[64];
    snprintf(repr, sizeof repr, "%lld, %lld", (long long)groups, (long long)channels);
    return feature_norm_new(&group_norm_class, group_norm_forward, DG_SHAPE(channels), groups, p, repr);
}
