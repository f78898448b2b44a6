/* nn/linear.c — Linear (torch.nn.Linear / paddle.nn.Linear with torch's weight layout):
 * y = x @ weight^T + bias, weight [out_features, in_features], bias [out_features].
 * Default init as torch: weight kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(in), 1/sqrt(in)). */
#include "nn_internal.h"
#include <math.h>

typedef struct { int64_t in, out; dg_tensor *weight, *bias; } linear_state;

static const dg_layer_class linear_class = DG_LAYER_CLASS("Linear");
const dg_layer_class *dg_nn_linear_class(void) { return &linear_class; }

static dg_tensor *linear_forward(dg_layer *self, const dg_tensor *x) {
    linear_state *s = dg_layer_user(self);
    char sh[96];
    if (dg_ndim(x) < 1 || dg_dim(x, -1) != s->in)
        return DG_LAYER_ERROR(self, "input %s has %lld features in its last dim, expected %lld",
                              dg_shape_str(x, sh, sizeof sh), (long long)(dg_ndim(x) < 1 ? 0 : dg_dim(x, -1)),
                              (long long)s->in);
    /* dtypes are the op's to check, after autocast's casts; its message names this layer */
    /* the parameters through the tree, so a tied weight (dg_layer_set_parameter) is the one used */
    return dg_linear(x, dg_layer_parameter(self, "weight"), s->bias ? dg_layer_parameter(self, "bias") : NULL);
}

dg_nn_linear_params dg_nn_linear_default_params(void) { return (dg_nn_linear_params){ .params_tag = DG_PARAMS_TAG, .bias = true, .dtype = DG_F32 }; }

dg_layer *dg_nn_linear_ext(int64_t in, int64_t out, dg_nn_linear_params p) {
    DG_CHECK_PARAMS("nn_linear_ext", p, dg_nn_linear_default_params);
    linear_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "Linear: out of memory"); return NULL; }
    dg_layer *l = dg_layer_new(&linear_class, linear_forward, s, free);
    if (!l) return NULL;
    s->in = in;
    s->out = out;
    dg_layer_set_extra_repr(l, "in_features=%lld, out_features=%lld, bias=%s", (long long)in, (long long)out,
                            p.bias ? "True" : "False");
    if (in <= 0 || out <= 0 || (p.dtype != DG_F32 && p.dtype != DG_F64)) {
        DG_LAYER_ERROR(l, "need in_features > 0, out_features > 0 and dtype float32/float64, got %lld, %lld, %s",
                       (long long)in, (long long)out, dg_dtype_name(p.dtype));
        dg_layer_free(l);
        return NULL;
    }
    double bound = 1.0 / sqrt((double)in);
    int rc = dg_layer_add_parameter(l, "weight", s->weight = dg_empty(DG_SHAPE(out, in), p.dtype));
    dg_nn_kaiming_params kp = dg_nn_kaiming_default_params();
    kp.a = sqrt(5.0);
    if (!rc) rc = dg_nn_init_kaiming_uniform_(s->weight, kp);
    if (!rc && p.bias) {
        rc = dg_layer_add_parameter(l, "bias", s->bias = dg_empty(DG_SHAPE(out), p.dtype));
        if (!rc) rc = dg_nn_init_uniform_(s->bias, -bound, bound);
    }
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

dg_layer *dg_nn_linear(int64_t in, int64_t out) { return dg_nn_linear_ext(in, out, dg_nn_linear_default_params()); }
