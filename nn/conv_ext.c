/* nn/conv_ext.c — Conv1d (torch.nn.Conv1d: weight [out, in/groups, k], bias [out]) and
 * ConvTranspose2d (torch.nn.ConvTranspose2d: weight [in, out/groups, k, k], bias [out]), square
 * kernels. Init as torch: weight kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * with fan_in = weight.size(1) * k (* k): for the transposed conv that is out/groups, torch's
 * own reading of its transposed layout. */
#include "nn_internal.h"
#include <math.h>

typedef struct {
    bool transposed;
    int64_t in, out;
    dg_conv1d_params c1;
    dg_conv_transpose2d_params ct;
    dg_tensor *weight, *bias;
} convx_state;

static const dg_layer_class conv1d_class = DG_LAYER_CLASS("Conv1d");
const dg_layer_class *dg_nn_conv1d_class(void) { return &conv1d_class; }
static const dg_layer_class conv_transpose2d_class = DG_LAYER_CLASS("ConvTranspose2d");
const dg_layer_class *dg_nn_conv_transpose2d_class(void) { return &conv_transpose2d_class; }

static dg_tensor *convx_forward(dg_layer *self, const dg_tensor *x) {
    convx_state *s = dg_layer_user(self);
    char sh[96];
    int nd = s->transposed ? 4 : 3;
    if (dg_ndim(x) != nd || dg_dim(x, 1) != s->in)
        return DG_LAYER_ERROR(self, "input %s must be [N, %lld, %s]", dg_shape_str(x, sh, sizeof sh), (long long)s->in,
                              s->transposed ? "H, W" : "L");
    return s->transposed ? dg_conv_transpose2d(x, s->weight, s->bias, s->ct) : dg_conv1d(x, s->weight, s->bias, s->c1);
}

dg_nn_conv_transpose2d_params dg_nn_conv_transpose2d_default_params(void) {
    return (dg_nn_conv_transpose2d_params){ .params_tag = DG_PARAMS_TAG, .stride = 1, .padding = 0, .output_padding = 0, .dilation = 1, .groups = 1,
                                            .bias = true, .dtype = DG_F32 };
}

/* Parameters and init shared by both layers; wshape is the weight's shape. */
static dg_layer *convx_new(const dg_layer_class *cls, convx_state st, int k, dg_shape wshape, bool bias, dg_dtype dt,
                           const char *extra, bool bad) {
    convx_state *s = malloc(sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    *s = st;
    s->weight = s->bias = NULL;
    dg_layer *l = dg_layer_new(cls, convx_forward, s, free);
    if (!l) return NULL;
    dg_layer_set_extra_repr(l, "%s", extra);
    if (bad) {
        DG_LAYER_ERROR(l, "bad configuration: need positive channels, kernel, stride, dilation, groups dividing both "
                          "channel counts, padding >= 0, output_padding below stride or dilation, dtype float32/float64 (%s; %s() has "
                          "the defaults)", extra, cls == &conv1d_class ? "dg_nn_conv2d_default_params" : "dg_nn_conv_transpose2d_default_params");
        dg_layer_free(l);
        return NULL;
    }
    int64_t fan_in = wshape.d[1];
    for (int i = 2; i < wshape.ndim; i++) fan_in *= wshape.d[i];
    double bound = 1.0 / sqrt((double)fan_in);
    int rc = dg_layer_add_parameter(l, "weight", s->weight = dg_empty(wshape, dt));
    dg_nn_kaiming_params kp = dg_nn_kaiming_default_params();
    kp.a = sqrt(5.0);
    if (!rc) rc = dg_nn_init_kaiming_uniform_(s->weight, kp);
    if (!rc && bias) {
        rc = dg_layer_add_parameter(l, "bias", s->bias = dg_empty(DG_SHAPE(st.out), dt));
        if (!rc) rc = dg_nn_init_uniform_(s->bias, -bound, bound);
    }
    if (rc) { dg_layer_free(l); return NULL; }
    (void)k;
    return l;
}

static bool bad_common(int64_t in, int64_t out, int k, int stride, int padding, int dil, int groups, dg_dtype dt) {
    return in <= 0 || out <= 0 || k <= 0 || stride < 1 || padding < 0 || dil < 1 || groups < 1 || in % groups ||
           out % groups || (dt != DG_F32 && dt != DG_F64);
}

dg_layer *dg_nn_conv1d(int64_t in, int64_t out, int k, dg_nn_conv2d_params p) {
    DG_CHECK_PARAMS("nn_conv1d", p, dg_nn_conv2d_default_params);
    char extra[256];
    int at = snprintf(extra, sizeof extra, "%lld, %lld, kernel_size=(%d,), stride=(%d,)", (long long)in, (long long)out, k,
                      p.stride);
    if (p.padding) at += snprintf(extra + at, sizeof extra - (size_t)at, ", padding=(%d,)", p.padding);
    if (p.dilation != 1) at += snprintf(extra + at, sizeof extra - (size_t)at, ", dilation=(%d,)", p.dilation);
    if (p.groups != 1) at += snprintf(extra + at, sizeof extra - (size_t)at, ", groups=%d", p.groups);
    if (!p.bias) snprintf(extra + at, sizeof extra - (size_t)at, ", bias=False");
    bool bad = bad_common(in, out, k, p.stride, p.padding, p.dilation, p.groups, p.dtype);
    convx_state st = { .in = in, .out = out,
                       .c1 = { .stride = p.stride, .padding = p.padding, .dilation = p.dilation, .groups = p.groups,
                               .params_tag = DG_PARAMS_TAG } };   /* every field set */
    return convx_new(&conv1d_class, st, k, DG_SHAPE(out, bad ? 1 : in / p.groups, k), p.bias, p.dtype, extra, bad);
}

dg_layer *dg_nn_conv_transpose2d(int64_t in, int64_t out, int k, dg_nn_conv_transpose2d_params p) {
    DG_CHECK_PARAMS("nn_conv_transpose2d", p, dg_nn_conv_transpose2d_default_params);
    char extra[256];
    int at = snprintf(extra, sizeof extra, "%lld, %lld, kernel_size=(%d, %d), stride=(%d, %d)", (long long)in, (long long)out,
                      k, k, p.stride, p.stride);
    if (p.padding) at += snprintf(extra + at, sizeof extra - (size_t)at, ", padding=(%d, %d)", p.padding, p.padding);
    if (p.output_padding)
        at += snprintf(extra + at, sizeof extra - (size_t)at, ", output_padding=(%d, %d)", p.output_padding, p.output_padding);
    if (p.dilation != 1) at += snprintf(extra + at, sizeof extra - (size_t)at, ", dilation=(%d, %d)", p.dilation, p.dilation);
    if (p.groups != 1) at += snprintf(extra + at, sizeof extra - (size_t)at, ", groups=%d", p.groups);
    if (!p.bias) snprintf(extra + at, sizeof extra - (size_t)at, ", bias=False");
    bool bad = bad_common(in, out, k, p.stride, p.padding, p.dilation, p.groups, p.dtype) || p.output_padding < 0 ||
               (p.output_padding >= p.stride && p.output_padding >= p.dilation);
    convx_state st = { .transposed = true, .in = in, .out = out,
                       .ct = { .stride = { p.stride, p.stride }, .padding = { p.padding, p.padding },
                               .output_padding = { p.output_padding, p.output_padding },
                               .dilation = { p.dilation, p.dilation }, .groups = p.groups,
                               .params_tag = DG_PARAMS_TAG } };   /* every field set */
    return convx_new(&conv_transpose2d_class, st, k, DG_SHAPE(in, bad ? 1 : out / p.groups, k, k), p.bias, p.dtype, extra, bad);
}
