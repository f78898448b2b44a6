/* nn/init.c — parameter initialisers as torch.nn.init: constant, uniform, normal, xavier and
 * kaiming (uniform and normal), with torch's fan and gain rules. They write in place under
 * no_grad, so they work on parameters that require grad; draws come from the calling thread's
 * generator, or for kaiming from the one its params name. */
#include "nn_internal.h"
#include <dygraph/nn.h>
#include <math.h>

static int check(const dg_tensor *t, const char *op) {
    int rc = dg_tensor_check(op, "t", t);
    if (rc) return rc;
    if (dg_dtype_of(t) != DG_F32 && dg_dtype_of(t) != DG_F64) {
        DG_ERR(DG_EINVAL, "%s: expects a float32/float64 tensor, got %s %s", op, dg_dtype_name(dg_dtype_of(t)), DG_SHAPE_STR(t));
        return DG_EINVAL;
    }
    return 0;
}

double dg_nn_init_calculate_gain(dg_nonlinearity nl, double param) {
    switch (nl) {
    case DG_NONLIN_LEAKY_RELU: return sqrt(2.0 / (1.0 + param * param));
    case DG_NONLIN_RELU: return sqrt(2.0);
    case DG_NONLIN_TANH: return 5.0 / 3.0;
    case DG_NONLIN_SELU: return 0.75;
    case DG_NONLIN_LINEAR:
    case DG_NONLIN_SIGMOID: return 1.0;
    }
    return 1.0;
}

int dg_nn_init_calculate_fans(const dg_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    DG_CHECK_TENSOR_INT("calculate_fans", t);
    dg_shape ts = dg_shape_of(t);
    if (ts.ndim < 2) {
        DG_ERR(DG_EINVAL, "calculate_fans: fan in and fan out need a tensor of at least 2 dims, got %s", DG_SHAPE_STR(t));
        return DG_EINVAL;
    }
    int64_t receptive = 1;
    for (int i = 2; i < ts.ndim; i++) receptive *= ts.d[i];
    if (fan_in) *fan_in = ts.d[1] * receptive;
    if (fan_out) *fan_out = ts.d[0] * receptive;
    return 0;
}

/* Runs an in-place fill from g (NULL: the calling thread's generator) with recording off. */
static int no_grad_rand(dg_tensor *t, bool normal, double a, double b, dg_generator *g) {
    dg_no_grad_begin();
    int rc = normal ? dg_generator_normal_(g, t, a, b) : dg_generator_uniform_(g, t, a, b);
    dg_no_grad_end();
    return rc;
}

int dg_nn_init_constant_(dg_tensor *t, double value) {
    int rc = check(t, "init_constant_");
    if (rc) return rc;
    dg_no_grad_begin();
    rc = dg_fill_(t, value);
    dg_no_grad_end();
    return rc;
}
int dg_nn_init_zeros_(dg_tensor *t) { return dg_nn_init_constant_(t, 0.0); }
int dg_nn_init_ones_(dg_tensor *t) { return dg_nn_init_constant_(t, 1.0); }

int dg_nn_init_uniform_(dg_tensor *t, double low, double high) {
    int rc = check(t, "init_uniform_");
    if (rc) return rc;
    if (!(low <= high) || !isfinite(low) || !isfinite(high)) {
        DG_ERR(DG_EINVAL, "init_uniform_: need finite low <= high, got [%g, %g) for %s", low, high, DG_SHAPE_STR(t));
        return DG_EINVAL;
    }
    return no_grad_rand(t, false, low, high, NULL);
}

int dg_nn_init_normal_(dg_tensor *t, double mean, double std) {
    int rc = check(t, "init_normal_");
    if (rc) return rc;
    if (!(std >= 0) || !isfinite(mean) || !isfinite(std)) {
        DG_ERR(DG_EINVAL, "init_normal_: need finite mean and std >= 0, got mean %g std %g for %s", mean, std, DG_SHAPE_STR(t));
        return DG_EINVAL;
    }
    return no_grad_rand(t, true, mean, std, NULL);
}

static int xavier(dg_tensor *t, double gain, bool normal, const char *op) {
    int rc = check(t, op);
    if (rc) return rc;
    int64_t fi, fo;
    if ((rc = dg_nn_init_calculate_fans(t, &fi, &fo))) return rc;
    if (fi + fo == 0) { DG_ERR(DG_EINVAL, "%s: tensor %s has zero fans", op, DG_SHAPE_STR(t)); return DG_EINVAL; }
    if (!(gain >= 0 && isfinite(gain))) { DG_ERR(DG_EINVAL, "%s: gain must be >= 0, got %g", op, gain); return DG_EINVAL; }
    double std = gain * sqrt(2.0 / (double)(fi + fo));
    return normal ? no_grad_rand(t, true, 0.0, std, NULL) : no_grad_rand(t, false, -sqrt(3.0) * std, sqrt(3.0) * std, NULL);
}
int dg_nn_init_xavier_uniform_(dg_tensor *t, double gain) { return xavier(t, gain, false, "init_xavier_uniform_"); }
int dg_nn_init_xavier_normal_(dg_tensor *t, double gain) { return xavier(t, gain, true, "init_xavier_normal_"); }

dg_nn_kaiming_params dg_nn_kaiming_default_params(void) {
    return (dg_nn_kaiming_params){ .params_tag = DG_PARAMS_TAG, .a = 0, .mode = DG_FAN_IN, .nonlinearity = DG_NONLIN_LEAKY_RELU };
}

static int kaiming(dg_tensor *t, dg_nn_kaiming_params p, bool normal, const char *op) {
    DG_CHECK_PARAMS_INT(op, p, dg_nn_kaiming_default_params);
    int rc = check(t, op);
    if (rc) return rc;
    if (p.mode != DG_FAN_IN && p.mode != DG_FAN_OUT) { DG_ERR(DG_EINVAL, "%s: bad fan mode %d", op, (int)p.mode); return DG_EINVAL; }
    if ((unsigned)p.nonlinearity > DG_NONLIN_SELU) {
        DG_ERR(DG_EINVAL, "%s: bad nonlinearity %d", op, (int)p.nonlinearity);
        return DG_EINVAL;
    }
    int64_t fi, fo;
    if ((rc = dg_nn_init_calculate_fans(t, &fi, &fo))) return rc;
    int64_t fan = p.mode == DG_FAN_IN ? fi : fo;
    if (fan == 0) { DG_ERR(DG_EINVAL, "%s: tensor %s has a zero fan", op, DG_SHAPE_STR(t)); return DG_EINVAL; }
    double std = dg_nn_init_calculate_gain(p.nonlinearity, p.a) / sqrt((double)fan);
    return normal ? no_grad_rand(t, true, 0.0, std, p.generator)
                  : no_grad_rand(t, false, -sqrt(3.0) * std, sqrt(3.0) * std, p.generator);
}
int dg_nn_init_kaiming_uniform_(dg_tensor *t, dg_nn_kaiming_params p) { return kaiming(t, p, false, "init_kaiming_uniform_"); }
int dg_nn_init_kaiming_normal_(dg_tensor *t, dg_nn_kaiming_params p) { return kaiming(t, p, true, "init_kaiming_normal_"); }
