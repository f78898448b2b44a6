/* eager/ops/feature_norm.c — layer_norm and group_norm (torch.nn.functional's): per-sample
 * normalisation over features, built from the differentiable reductions and arithmetic, so they
 * run on every backend in f32 and f64 with exact gradients (and gradients of gradients). Both
 * use the biased variance and eps inside the square root, as torch. */
#include "op_util.h"
#include <math.h>

/* (x - mean) / sqrt(var + eps) over the last k axes of x. */
static dg_tensor *standardize_last(const dg_tensor *x, int k, double eps) {
    if (!x) return NULL;   /* the failed op before said why */
    int axes[DG_MAX_DIMS];
    for (int i = 0; i < k; i++) axes[i] = x->ndim - k + i;
    dg_tensor *xc = dg_sub(x, dg_mean(x, axes, k, true));
    dg_tensor *var = dg_mean(dg_mul(xc, xc), axes, k, true);
    return dg_mul(xc, dg_rdiv_scalar(dg_sqrt(dg_add_scalar(var, eps)), 1.0));
}

static bool same_shape(const dg_tensor *t, dg_shape s) {
    if (t->ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++) if (t->shape[i] != s.d[i]) return false;
    return true;
}

/* weight and bias, when given, must be float tensors of shape s on x's device and dtype. */
#define CHECK_AFFINE(op, x, t, s) do { if (t) {                                                         \
    DG_CHECK_INPUT(op, t);                                                                             \
    DG_CHECK(same_shape(t, s), "%s: %s %s must be %s", op, #t, DG_SHAPE_STR(t), dg_shape_fmt(s.d, s.ndim, (char[96]){0}, 96)); \
    DG_CHECK_SAME_DTYPE(op, x, t);                                                                     \
    DG_CHECK_SAME_DEVICE(op, x, t);                                                                    \
} } while (0)

static dg_tensor *layer_norm_op(const dg_tensor *x, dg_shape normalized_shape, const dg_tensor *weight, const dg_tensor *bias,
                         double eps) {
    DG_CHECK_INPUT("layer_norm", x);
    DG_CHECK_FLOAT("layer_norm", x);
    int k = normalized_shape.ndim;
    bool fits = k >= 1 && k <= x->ndim;
    for (int i = 0; fits && i < k; i++) fits = x->shape[x->ndim - k + i] == normalized_shape.d[i];
    DG_CHECK(fits, "layer_norm: input %s does not end in normalized_shape %s", DG_SHAPE_STR(x),
             dg_shape_fmt(normalized_shape.d, k > 0 && k <= DG_MAX_DIMS ? k : 0, (char[96]){0}, 96));
    DG_CHECK(eps >= 0 && isfinite(eps), "layer_norm: eps %g must be >= 0", eps);
    CHECK_AFFINE("layer_norm", x, weight, normalized_shape);
    CHECK_AFFINE("layer_norm", x, bias, normalized_shape);
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = standardize_last(x, k, eps);
    if (weight) y = dg_mul(y, weight);
    if (bias) y = dg_add(y, bias);
    dg_trace_composite(DG_OP_LAYER_NORM, y, (const dg_tensor *[]){ x, weight, bias }, 3, &(dg_ln_trace_attr){ k, eps },
                       sizeof(dg_ln_trace_attr));   /* an exporter's LayerNormalization */
    return dg_composite_end(s, y);
}
dg_tensor *dg_layer_norm(const dg_tensor *x, dg_shape normalized_shape, const dg_tensor *weight, const dg_tensor *bias,
                         double eps) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_LAYER_NORM, DG_OP_IN(x, weight, bias));
    return dg_op_leave(&f, layer_norm_op(f.arg[0], normalized_shape, f.arg[1], f.arg[2], eps));
}

static dg_tensor *group_norm_op(const dg_tensor *x, int64_t num_groups, const dg_tensor *weight, const dg_tensor *bias, double eps) {
    DG_CHECK_INPUT("group_norm", x);
    DG_CHECK_FLOAT("group_norm", x);
    DG_CHECK(x->ndim >= 2, "group_norm: input %s must be [N, C, ...]", DG_SHAPE_STR(x));
    int64_t c = x->shape[1];
    DG_CHECK(num_groups > 0 && c % num_groups == 0, "group_norm: %lld channels of input %s are not divisible into %lld groups",
             (long long)c, DG_SHAPE_STR(x), (long long)num_groups);
    DG_CHECK(eps >= 0 && isfinite(eps), "group_norm: eps %g must be >= 0", eps);
    CHECK_AFFINE("group_norm", x, weight, DG_SHAPE(c));
    CHECK_AFFINE("group_norm", x, bias, DG_SHAPE(c));
    /* [N, G, C / G * spatial], the group's size stated rather than inferred: an empty batch has
     * no elements to infer it from (and gives the empty tensor, as torch) */
    int64_t group = c / num_groups;
    for (int i = 2; i < x->ndim; i++) group *= x->shape[i];
    dg_scope *s = dg_scope_begin();
    dg_tensor *y = dg_reshape(standardize_last(dg_reshape(x, DG_SHAPE(x->shape[0], num_groups, group)), 1, eps), dg_shape_of(x));
    /* weight and bias per channel: [1, C, 1, ...] against x's rank */
    dg_shape per_c = { .ndim = x->ndim };
    for (int i = 0; i < x->ndim; i++) per_c.d[i] = i == 1 ? c : 1;
    if (weight) y = dg_mul(y, dg_reshape(weight, per_c));
    if (bias) y = dg_add(y, dg_reshape(bias, per_c));
    return dg_composite_end(s, y);
}
dg_tensor *dg_group_norm(const dg_tensor *x, int64_t num_groups, const dg_tensor *weight, const dg_tensor *bias, double eps) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_GROUP_NORM, DG_OP_IN(x, weight, bias));
    return dg_op_leave(&f, group_norm_op(f.arg[0], num_groups, f.arg[1], f.arg[2], eps));
}
