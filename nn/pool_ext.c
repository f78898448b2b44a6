/* nn/pool_ext.c — MaxPool1d, AvgPool1d (x [N, C, L]; torch's defaults, dg_pool1d_params) and
 * AdaptiveMaxPool2d (x [N, C, H, W]) layers, no parameters. */
#include "nn_internal.h"

typedef struct { int kind; dg_pool1d_params p; int out_h, out_w; } poolx_state;
enum { PX_MAX1, PX_AVG1, PX_AMAX2 };

static const dg_layer_class max_pool1d_class = DG_LAYER_CLASS("MaxPool1d");
const dg_layer_class *dg_nn_max_pool1d_class(void) { return &max_pool1d_class; }
static const dg_layer_class avg_pool1d_class = DG_LAYER_CLASS("AvgPool1d");
const dg_layer_class *dg_nn_avg_pool1d_class(void) { return &avg_pool1d_class; }
static const dg_layer_class adaptive_max_pool2d_class = DG_LAYER_CLASS("AdaptiveMaxPool2d");
const dg_layer_class *dg_nn_adaptive_max_pool2d_class(void) { return &adaptive_max_pool2d_class; }

static dg_tensor *poolx_forward(dg_layer *self, const dg_tensor *x) {
    poolx_state *s = dg_layer_user(self);
    char sh[96];
    int nd = s->kind == PX_AMAX2 ? 4 : 3;
    if (dg_ndim(x) != nd)
        return DG_LAYER_ERROR(self, "input %s must be %s", dg_shape_str(x, sh, sizeof sh), nd == 4 ? "[N, C, H, W]" : "[N, C, L]");
    if (s->kind == PX_AMAX2) return dg_adaptive_max_pool2d(x, s->out_h, s->out_w, NULL);
    return s->kind == PX_MAX1 ? dg_max_pool1d(x, s->p) : dg_avg_pool1d(x, s->p);
}

static dg_layer *poolx_new(const dg_layer_class *cls, poolx_state st, bool bad, const char *why) {
    poolx_state *s = malloc(sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    *s = st;
    dg_layer *l = dg_layer_new(cls, poolx_forward, s, free);
    if (!l) return NULL;
    if (st.kind == PX_AMAX2) dg_layer_set_extra_repr(l, "output_size=(%d, %d)", st.out_h, st.out_w);
    else if (st.kind == PX_MAX1)
        dg_layer_set_extra_repr(l, "kernel_size=%d, stride=%d, padding=%d, dilation=%d, ceil_mode=%s", st.p.kernel, st.p.stride,
                                st.p.padding, st.p.dilation, st.p.ceil_mode ? "True" : "False");
    else dg_layer_set_extra_repr(l, "kernel_size=(%d,), stride=(%d,), padding=(%d,)", st.p.kernel, st.p.stride, st.p.padding);
    if (bad) {
        DG_LAYER_ERROR(l, "bad configuration: %s", why);
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

static dg_layer *pool1d(int kind, dg_pool1d_params p) {
    DG_CHECK_PARAMS(kind == PX_AVG1 ? "AvgPool1d" : "MaxPool1d", p, dg_pool1d_default_params);
    if (p.stride == DG_STRIDE_KERNEL) p.stride = p.kernel;
    bool bad = p.kernel <= 0 || p.stride <= 0 || p.padding < 0 || 2 * p.padding > p.kernel || p.dilation < 1 ||
               (kind == PX_AVG1 && p.dilation != 1);
    char why[200];
    snprintf(why, sizeof why, "need kernel_size > 0, stride > 0, 0 <= padding <= kernel_size/2 and dilation >= 1 "
             "(1 for average pooling); got kernel %d, stride %d, padding %d, dilation %d (dg_pool1d_default_params() has "
             "the defaults)", p.kernel, p.stride, p.padding, p.dilation);
    return poolx_new(kind == PX_MAX1 ? &max_pool1d_class : &avg_pool1d_class, (poolx_state){ .kind = kind, .p = p }, bad, why);
}

dg_layer *dg_nn_max_pool1d(dg_pool1d_params p) { return pool1d(PX_MAX1, p); }
dg_layer *dg_nn_avg_pool1d(dg_pool1d_params p) { return pool1d(PX_AVG1, p); }

dg_layer *dg_nn_adaptive_max_pool2d(int out_h, int out_w) {
    return poolx_new(&adaptive_max_pool2d_class, (poolx_state){ .kind = PX_AMAX2, .out_h = out_h, .out_w = out_w },
                     out_h <= 0 || out_w <= 0, "output size must be positive");
}
