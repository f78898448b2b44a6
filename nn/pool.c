/* nn/pool.c — MaxPool2d, AvgPool2d and AdaptiveAvgPool2d layers over NCHW input (no
 * parameters). Defaults as torch except AvgPool2d's count_include_pad, which defaults to false
 * (Paddle's exclusive=True), as the functional op does. */
#include "nn_internal.h"

typedef struct { bool avg; dg_pool2d_params pool; int out_h, out_w; } pool_state;

static const dg_layer_class max_pool2d_class = DG_LAYER_CLASS("MaxPool2d");
const dg_layer_class *dg_nn_max_pool2d_class(void) { return &max_pool2d_class; }
static const dg_layer_class avg_pool2d_class = DG_LAYER_CLASS("AvgPool2d");
const dg_layer_class *dg_nn_avg_pool2d_class(void) { return &avg_pool2d_class; }
static const dg_layer_class adaptive_avg_pool2d_class = DG_LAYER_CLASS("AdaptiveAvgPool2d");
const dg_layer_class *dg_nn_adaptive_avg_pool2d_class(void) { return &adaptive_avg_pool2d_class; }

static dg_tensor *check_nchw(dg_layer *self, const dg_tensor *x) {
    char sh[96];
    if (dg_ndim(x) != 4) return DG_LAYER_ERROR(self, "input %s must be [N, C, H, W]", dg_shape_str(x, sh, sizeof sh));
    return (dg_tensor *)x;
}

static dg_tensor *pool_forward(dg_layer *self, const dg_tensor *x) {
    pool_state *s = dg_layer_user(self);
    if (!check_nchw(self, x)) return NULL;
    char sh[96];
    for (int a = 0; a < 2; a++)
        if (dg_dim(x, 2 + a) + 2 * s->pool.padding[a] < (int64_t)s->pool.dilation[a] * (s->pool.kernel[a] - 1) + 1)
            return DG_LAYER_ERROR(self, "input %s is smaller than the kernel (%d) after padding",
                                  dg_shape_str(x, sh, sizeof sh), s->pool.kernel[a]);
    return s->avg ? dg_avg_pool2d(x, s->pool) : dg_max_pool2d(x, s->pool);
}

static dg_tensor *adaptive_forward(dg_layer *self, const dg_tensor *x) {
    pool_state *s = dg_layer_user(self);
    if (!check_nchw(self, x)) return NULL;
    return dg_adaptive_avg_pool2d(x, s->out_h, s->out_w);
}

static dg_layer *pool_new(const dg_layer_class *cls, dg_layer_forward_fn fn, pool_state st) {
    pool_state *s = malloc(sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    *s = st;
    return dg_layer_new(cls, fn, s, free);
}

dg_nn_pool2d_params dg_nn_pool2d_default_params(void) {
    return (dg_nn_pool2d_params){ .params_tag = DG_PARAMS_TAG, .stride = DG_STRIDE_KERNEL, .padding = 0, .ceil_mode = false, .count_include_pad = false,
                                  .dilation = 1, .divisor_override = 0 };
}

static dg_layer *pool2d(bool avg, int k, dg_nn_pool2d_params p) {
    DG_CHECK_PARAMS(avg ? "AvgPool2d" : "MaxPool2d", p, dg_nn_pool2d_default_params);
    int stride = p.stride == DG_STRIDE_KERNEL ? k : p.stride;
    int dil = p.dilation;
    dg_pool2d_params pp = dg_pool2d_default_params();
    pp.kernel[0] = pp.kernel[1] = k;
    pp.stride[0] = pp.stride[1] = stride;
    pp.padding[0] = pp.padding[1] = p.padding;
    pp.ceil_mode = p.ceil_mode;
    pp.count_include_pad = p.count_include_pad;
    pp.dilation[0] = pp.dilation[1] = dil;
    pp.divisor_override = p.divisor_override;
    dg_layer *l = pool_new(avg ? &avg_pool2d_class : &max_pool2d_class, pool_forward, (pool_state){ .avg = avg, .pool = pp });
    if (!l) return NULL;
    if (avg)
        dg_layer_set_extra_repr(l, "kernel_size=%d, stride=%d, padding=%d", k, stride, p.padding);   /* as torch prints it */
    else
        dg_layer_set_extra_repr(l, "kernel_size=%d, stride=%d, padding=%d, dilation=%d, ceil_mode=%s", k, stride, p.padding,
                                dil, p.ceil_mode ? "True" : "False");
    /* torch: padding at most half the kernel */
    if (k <= 0 || stride <= 0 || p.padding < 0 || 2 * p.padding > k || dil < 1 || (avg && dil != 1) ||
        p.divisor_override < 0 || (!avg && p.divisor_override)) {
        DG_LAYER_ERROR(l, "bad configuration: need kernel_size > 0, stride > 0 (or DG_STRIDE_KERNEL) and "
                          "0 <= padding <= kernel_size/2, dilation >= 1 (max pool only) and divisor_override >= 0 (avg pool only) "
                          "(stride %d, padding %d, dilation %d, divisor_override %d; dg_nn_pool2d_default_params() has the defaults)",
                       p.stride, p.padding, p.dilation,
                       p.divisor_override);
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

dg_layer *dg_nn_max_pool2d(int k, dg_nn_pool2d_params p) { return pool2d(false, k, p); }
dg_layer *dg_nn_avg_pool2d(int k, dg_nn_pool2d_params p) { return pool2d(true, k, p); }

dg_layer *dg_nn_adaptive_avg_pool2d(int out_h, int out_w) {
    dg_layer *l = pool_new(&adaptive_avg_pool2d_class, adaptive_forward, (pool_state){ .out_h = out_h, .out_w = out_w });
    if (!l) return NULL;
    dg_layer_set_extra_repr(l, "output_size=(%d, %d)", out_h, out_w);
    if (out_h <= 0 || out_w <= 0) {
        DG_LAYER_ERROR(l, "output size must be positive");
        dg_layer_free(l);
        return NULL;
    }
    return l;
}
