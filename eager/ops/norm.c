/* eager/ops/norm.c — batch normalisation over x [N, C, ...] (torch.nn.functional.batch_norm /
 * paddle's BatchNorm), alone or with the ReLU after it fused (dg_batch_norm_relu: one pass and one
 * buffer fewer in forward and backward, ResNet's every block): argument checks, the backend
 * call, the running-statistics update and the backward rule.
 *
 * Training normalises with the batch mean and biased variance and, when running stats are
 * given, updates them in place with PyTorch's convention:
 *   running = (1 - momentum) * running + momentum * batch_stat,
 * using the unbiased variance (M / (M - 1), M = values per channel) for running_var.
 * Eval normalises with the running stats. The running stats are buffers: the update is not
 * recorded on the tape. */
#include "op_util.h"
#include <math.h>

typedef dg_bn_attr bn_attr;   /* eager/ops/op_attrs.h */

/* A fresh contiguous copy of t (the backend copies; nothing is recorded). */
static dg_tensor *fresh_copy(const dg_tensor *t) {
    dg_tensor *c = dg_new_like(t);
    if (c && DG_KCALL(t, copy, DG_KV(t), DG_KV(c)) != 0) { dg_tensor_free(c); c = NULL; }
    return c;
}

/* relu(y) gradient gy * (y > 0), for a backend without the fused entry (NaN in gy masked too) */
static dg_tensor *relu_mask(const dg_tensor *gy, const dg_tensor *y) {
    dg_tensor *gm = dg_new_like(gy);
    if (gm && DG_KCALL(gy, binary, DG_BIN_RELU_GRAD, DG_KV(gy), DG_KV(y), DG_KV(gm), 0, 0) != 0) { dg_tensor_free(gm); gm = NULL; }
    return gm;
}

static int bn_bw(dg_node *nd, const dg_tensor *g, dg_tensor **gi) {
    const bn_attr *a = dg_node_attr(nd);
    const dg_tensor *x = dg_node_saved(nd, 0), *mean = dg_node_saved(nd, 1), *invstd = dg_node_saved(nd, 2);
    const dg_tensor *w = a->has_weight ? dg_node_saved(nd, 3) : NULL;
    const dg_tensor *y = a->relu ? dg_node_saved(nd, a->has_weight ? 4 : 3) : NULL;
    const dg_backend *be = dg_backend_of(x);
    dg_tensor *gc = dg_dense(g);
    if (!gc) return DG_ENOMEM;
    if (y && !be->batch_norm_relu_backward && !(gc = relu_mask(gc, y))) return DG_ENOMEM;
    bool nx = dg_node_needs_grad(nd, 0), nw = dg_node_needs_grad(nd, 1), nb = dg_node_needs_grad(nd, 2);
    dg_tensor *gx = nx ? dg_new_like(x) : NULL;
    dg_tensor *gw = nw ? dg_new_on(x, &a->c, 1, dg_node_input_dtype(nd, 1)) : NULL;
    dg_tensor *gb = nb ? dg_new_on(x, &a->c, 1, dg_node_input_dtype(nd, 2)) : NULL;
    if ((nx && !gx) || (nw && !gw) || (nb && !gb)) return DG_ENOMEM;
    gi[0] = gx;
    gi[1] = gw;
    gi[2] = gb;
    if (y && be->batch_norm_relu_backward)
        return be->batch_norm_relu_backward(be, DG_KV(x), DG_KV(y), DG_KV(gc), DG_KV_OPT(w), DG_KV(mean), DG_KV(invstd), a->training,
                                            DG_KV_OPT(gx), DG_KV_OPT(gw), DG_KV_OPT(gb), a->n, a->c, a->inner);
    return DG_KCALL(x, batch_norm_backward, DG_KV(x), DG_KV(gc), DG_KV_OPT(w), DG_KV(mean), DG_KV(invstd), a->training, DG_KV_OPT(gx), DG_KV_OPT(gw), DG_KV_OPT(gb), a->n, a->c, a->inner);
}

/* weight, bias and the running stats are each NULL or [C] of x's dtype and device; with a
 * float16 / bfloat16 input they may be float32 (normalisation layers keep f32 parameters under
 * mixed precision, as torch's and Paddle's do). */
static bool check_param(const char *op, const dg_tensor *x, const dg_tensor *t, const char *name) {
    if (!t) return true;
    if (!dg_tensor_live(t)) { dg_tensor_bad(op, name, t); return false; }
    char xs[96], ts[96];
    dg_shape_fmt(x->shape, x->ndim, xs, sizeof xs);
    dg_shape_fmt(t->shape, t->ndim, ts, sizeof ts);
    if (t->ndim != 1 || t->shape[0] != x->shape[1]) {
        DG_ERR(DG_EINVAL, "%s: %s must be [%lld] (channels of input %s), got %s", op, name, (long long)x->shape[1], xs, ts);
        return false;
    }
    if (t->dtype != x->dtype && !(dg_dtype_is_half(x->dtype) && t->dtype == DG_F32)) {
        DG_ERR(DG_EINVAL, "%s: %s is %s but input %s is %s", op, name, dg_dtype_name(t->dtype), xs, dg_dtype_name(x->dtype));
        return false;
    }
    if (t->storage->device.type != x->storage->device.type || t->storage->device.index != x->storage->device.index) {
        char dt[16], dx[16];
        DG_ERR(DG_EDEVICE, "%s: %s is on %s but input %s is on %s", op, name, dg_device_name(t->storage->device, dt, sizeof dt),
               xs, dg_device_name(x->storage->device, dx, sizeof dx));
        return false;
    }
    return true;
}

/* running = (1-m) * running + m * batch for mean and (unbiased) var; called in no-grad mode
 * with the kernel's batch mean and inverse std (var = 1/invstd^2 - eps, biased). */
static int update_running(dg_tensor *rm, dg_tensor *rv, const dg_tensor *mean, const dg_tensor *invstd,
                          double m, double eps, int64_t count) {
    double unbias = (double)count / (double)(count - 1);
    dg_tensor *var = dg_mul_scalar(dg_sub_scalar(dg_rdiv_scalar(dg_mul(invstd, invstd), 1.0), eps), unbias);
    if (var && var->dtype != rv->dtype) var = dg_cast(var, rv->dtype);
    if (var && mean->dtype != rm->dtype) mean = dg_cast(mean, rm->dtype);
    if (!var || !mean) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    int rc = dg_scale_(rm, 1.0 - m);
    if (!rc) rc = dg_axpy_(rm, m, mean);
    if (!rc) rc = dg_scale_(rv, 1.0 - m);
    if (!rc) rc = dg_axpy_(rv, m, var);
    return rc;
}

dg_batch_norm_params dg_batch_norm_default_params(void) {
    return (dg_batch_norm_params){ .params_tag = DG_PARAMS_TAG, .training = false, .momentum = 0.1, .eps = 1e-5 };
}

/* The normalisation (and the relu when `relu`) by the backend, in no-grad mode: y and its stats. */
static int bn_kernel(const dg_backend *be, bool relu, const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_tensor *y,
                     dg_tensor *mean, dg_tensor *stat2, bool training, double eps, int64_t n, int64_t c, int64_t inner) {
    if (relu && be->batch_norm_relu)
        return be->batch_norm_relu(be, DG_KV(x), DG_KV_OPT(w), DG_KV_OPT(b), DG_KV(y), DG_KV(mean), DG_KV(stat2), training, eps, n, c, inner);
    int rc = be->batch_norm(be, DG_KV(x), DG_KV_OPT(w), DG_KV_OPT(b), DG_KV(y), DG_KV(mean), DG_KV(stat2), training, eps, n, c, inner);
    return rc || !relu ? rc : be->unary(be, DG_UN_RELU, DG_KV(y), DG_KV(y), 0, 0);
}

static dg_tensor *batch_norm(dg_op_id id, bool relu, const dg_tensor *x, dg_tensor *running_mean, dg_tensor *running_var,
                             const dg_tensor *weight, const dg_tensor *bias, dg_batch_norm_params p) {
    const char *op = dg_op_name(id);
    DG_CHECK_INPUT(op, x);
    DG_CHECK(x->ndim >= 2, "%s: input must be [N, C, ...], got %s", op, DG_SHAPE_STR(x));
    uint64_t errs = dg_error_count();
    DG_CHECK_FLOAT(op, x);
    if (!check_param(op, x, weight, "weight") || !check_param(op, x, bias, "bias") ||
        !check_param(op, x, running_mean, "running_mean") || !check_param(op, x, running_var, "running_var"))
        return NULL;
    DG_CHECK(!running_mean == !running_var, "%s: give both running_mean and running_var or neither", op);
    DG_CHECK(p.training || running_mean, "%s: eval mode needs running_mean and running_var (input %s)", op, DG_SHAPE_STR(x));
    double m = p.momentum, eps = p.eps;
    DG_CHECK(m >= 0 && m <= 1, "%s: momentum must be in [0, 1], got %g", op, p.momentum);
    DG_CHECK(eps > 0 && isfinite(eps), "%s: eps must be positive, got %g", op, p.eps);
    int64_t n = x->shape[0], c = x->shape[1], inner = 1;
    for (int i = 2; i < x->ndim; i++) inner *= x->shape[i];
    /* one value per channel has no variance (PyTorch refuses the same) */
    DG_CHECK(!p.training || n * inner > 1, "%s: training needs more than one value per channel, input is %s", op,
             DG_SHAPE_STR(x));

    const dg_tensor *in[3] = { x, weight, bias };
    bool record = dg_op_records();
    /* temporaries (copies, stats) die with this scope; the node keeps its own references to
     * what it saves, and x itself is never freed here (dg_dense() returns it when contiguous) */
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *xc = dg_dense(x), *wc = dg_dense(weight), *bc = dg_dense(bias);
    dg_tensor *y = xc ? dg_new_like(xc) : NULL, *mean = NULL, *invstd = NULL;
    int rc = (!y || (weight && !wc) || (bias && !bc)) ? DG_ENOMEM : 0;
    const dg_backend *be = dg_backend_of(x);
    if (!rc && p.training) {
        dg_dtype sd = dg_dtype_is_half(x->dtype) ? DG_F32 : x->dtype;   /* the batch statistics: f32 for half inputs */
        mean = dg_new_on(x, &c, 1, sd);
        invstd = dg_new_on(x, &c, 1, sd);
        rc = (!mean || !invstd) ? DG_ENOMEM : bn_kernel(be, relu, xc, wc, bc, y, mean, invstd, true, eps, n, c, inner);
        if (!rc && running_mean) rc = update_running(running_mean, running_var, mean, invstd, m, eps, n * inner);
    } else if (!rc) {
        dg_tensor *rmc = dg_dense(running_mean), *rvc = dg_dense(running_var);
        rc = (!rmc || !rvc) ? DG_ENOMEM : bn_kernel(be, relu, xc, wc, bc, y, rmc, rvc, false, eps, n, c, inner);
        /* backward gets a copy of the stats as they are now (a later training step may update
         * them in place) and the inverse std it needs, since its entry has no eps */
        if (!rc && record) {
            mean = fresh_copy(rmc);
            invstd = dg_rdiv_scalar(dg_sqrt(dg_add_scalar(rvc, eps)), 1.0);
            if (!mean || !invstd) rc = DG_ENOMEM;
        }
    }
    dg_no_grad_end();
    if (!rc && record) {
        dg_node *nd = dg_record_op(id, y, in, 3, bn_bw);
        if (!nd) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;   /* record said why */
        else {
            *(bn_attr *)dg_node_attr(nd) = (bn_attr){ p.training, weight != NULL, relu, n, c, inner, eps };
            dg_trace_extra(nd, running_mean, running_var);   /* an exporter names the statistics it normalised with */
            rc = dg_node_save(nd, xc);
            if (!rc) rc = dg_node_save(nd, mean);
            if (!rc) rc = dg_node_save(nd, invstd);
            if (!rc && wc) rc = dg_node_save(nd, wc);
            if (!rc && relu) rc = dg_node_save(nd, y);   /* the mask (y > 0); the next layer keeps y anyway */
        }
    }
    if (rc) {
        if (!dg_error_since(errs)) DG_ERR(rc, "%s: failed for input %s", op, DG_SHAPE_STR(x));
        y = NULL;   /* freed with the scope */
    }
    y = dg_keep_in_parent(y);
    dg_scope_end(s);
    return y;
}

static dg_tensor *batch_norm_op(const dg_tensor *x, dg_tensor *running_mean, dg_tensor *running_var,
                         const dg_tensor *weight, const dg_tensor *bias, dg_batch_norm_params p) {
    DG_CHECK_PARAMS("batch_norm", p, dg_batch_norm_default_params);
    return batch_norm(DG_OP_BATCH_NORM, false, x, running_mean, running_var, weight, bias, p);
}
dg_tensor *dg_batch_norm(const dg_tensor *x, dg_tensor *running_mean, dg_tensor *running_var,
                         const dg_tensor *weight, const dg_tensor *bias, dg_batch_norm_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_BATCH_NORM, DG_OP_IN(x, weight, bias));
    return dg_op_leave(&f, batch_norm_op(f.arg[0], running_mean, running_var, f.arg[1], f.arg[2], p));
}

static dg_tensor *batch_norm_relu_op(const dg_tensor *x, dg_tensor *running_mean, dg_tensor *running_var,
                              const dg_tensor *weight, const dg_tensor *bias, dg_batch_norm_params p) {
    DG_CHECK_PARAMS("batch_norm_relu", p, dg_batch_norm_default_params);
    return batch_norm(DG_OP_BATCH_NORM_RELU, true, x, running_mean, running_var, weight, bias, p);
}
dg_tensor *dg_batch_norm_relu(const dg_tensor *x, dg_tensor *running_mean, dg_tensor *running_var,
                              const dg_tensor *weight, const dg_tensor *bias, dg_batch_norm_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_BATCH_NORM_RELU, DG_OP_IN(x, weight, bias));
    return dg_op_leave(&f, batch_norm_relu_op(f.arg[0], running_mean, running_var, f.arg[1], f.arg[2], p));
}
