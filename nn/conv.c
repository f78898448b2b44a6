/* nn/conv.c — Conv2d (torch.nn.Conv2d / paddle.nn.Conv2D), NCHW, square kernel:
 * weight [out_channels, in_channels/groups, k, k], bias [out_channels].
 * Default init as torch: weight kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * with fan_in = in_channels/groups * k * k. */
#include "nn_internal.h"
#include <math.h>

typedef struct { int64_t in, out; dg_conv2d_params conv; dg_tensor *weight, *bias; } conv_state;

static const dg_layer_class conv2d_class = DG_LAYER_CLASS("Conv2d");
const dg_layer_class *dg_nn_conv2d_class(void) { return &conv2d_class; }

static dg_tensor *conv_forward(dg_layer *self, const dg_tensor *x) {
    conv_state *s = dg_layer_user(self);
    char sh[96];
    if (dg_ndim(x) != 4 || dg_dim(x, 1) != s->in)
        return DG_LAYER_ERROR(self, "input %s must be [N, %lld, H, W]", dg_shape_str(x, sh, sizeof sh), (long long)s->in);
    /* dtypes are the op's to check, after autocast's casts; its message names this layer */
    int64_t k = dg_dim(s->weight, 2);
    for (int a = 0; a < 2; a++) {
        int64_t span = (int64_t)s->conv.dilation[a] * (k - 1) + 1, padded = dg_dim(x, 2 + a) + 2 * s->conv.padding[a];
        if (padded < span)
            return DG_LAYER_ERROR(self, "input %s is too small: padded %s %lld < kernel extent %lld",
                                  dg_shape_str(x, sh, sizeof sh), a ? "width" : "height", (long long)padded, (long long)span);
    }
    return dg_conv2d(x, s->weight, s->bias, s->conv);
}

bool dg_nn_conv2d_parts(const dg_layer *l, dg_conv2d_params *p, dg_tensor **weight, dg_tensor **bias) {
    if (!dg_layer_is(l, &conv2d_class)) return false;
    conv_state *s = dg_layer_user(l);
    *p = s->conv;
    *weight = s->weight;
    *bias = s->bias;
    return true;
}

dg_nn_conv2d_params dg_nn_conv2d_default_params(void) {
    return (dg_nn_conv2d_params){ .params_tag = DG_PARAMS_TAG, .stride = 1, .padding = 0, .dilation = 1, .groups = 1, .bias = true, .dtype = DG_F32 };
}

dg_layer *dg_nn_conv2d(int64_t in, int64_t out, int k, dg_nn_conv2d_params p) {
    DG_CHECK_PARAMS("nn_conv2d", p, dg_nn_conv2d_default_params);
    conv_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "Conv2d: out of memory"); return NULL; }
    dg_layer *l = dg_layer_new(&conv2d_class, conv_forward, s, free);
    if (!l) return NULL;
    int stride = p.stride, dil = p.dilation, groups = p.groups;
    s->in = in;
    s->out = out;
    s->conv = dg_conv2d_default_params();
    s->conv.stride[0] = s->conv.stride[1] = stride;
    s->conv.padding[0] = s->conv.padding[1] = p.padding;
    s->conv.dilation[0] = s->conv.dilation[1] = dil;
    s->conv.groups = groups;
    /* torch's repr: defaults (padding 0, dilation 1, groups 1, bias) are left out */
    char extra[256];
    int at = snprintf(extra, sizeof extra, "%lld, %lld, kernel_size=(%d, %d), stride=(%d, %d)", (long long)in,
                      (long long)out, k, k, stride, stride);
    if (p.padding) at += snprintf(extra + at, sizeof extra - (size_t)at, ", padding=(%d, %d)", p.padding, p.padding);
    if (dil != 1) at += snprintf(extra + at, sizeof extra - (size_t)at, ", dilation=(%d, %d)", dil, dil);
    if (groups != 1) at += snprintf(extra + at, sizeof extra - (size_t)at, ", groups=%d", groups);
    if (!p.bias) snprintf(extra + at, sizeof extra - (size_t)at, ", bias=False");
    dg_layer_set_extra_repr(l, "%s", extra);
    if (in <= 0 || out <= 0 || k <= 0 || stride < 1 || p.padding < 0 || dil < 1 || groups < 1 ||
        in % groups || out % groups || (p.dtype != DG_F32 && p.dtype != DG_F64)) {
        DG_LAYER_ERROR(l, "bad configuration: need positive channels, kernel, stride, dilation, groups dividing both "
                          "channel counts, padding >= 0 and dtype float32/float64 (stride %d, dilation %d, groups %d, "
                          "padding %d, dtype %s; dg_nn_conv2d_default_params() has the defaults)", stride, dil, groups, p.padding,
                       dg_dtype_name(p.dtype));
        dg_layer_free(l);
        return NULL;
    }
    int64_t fan_in = in / groups * k * k;
    double bound = 1.0 / sqrt((double)fan_in);
    int rc = dg_layer_add_parameter(l, "weight", s->weight = dg_empty(DG_SHAPE(out, in / groups, k, k), p.dtype));
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
