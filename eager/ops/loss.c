/* eager/ops/loss.c — mse, l1, smooth_l1, huber, square_error_cost, cross_entropy (hard labels
 * incl. the seeds' [N,1] layout, soft labels, ignore_index, any class axis, class weights, label
 * smoothing), nll (weights), binary cross entropy on probabilities and with logits (weight,
 * pos_weight), kl_div, and top-k accuracy. The losses are compositions of ops, so each runs on
 * every backend; the reductions follow torch's, including its quirks, which are named where
 * they occur. */
#include "op_util.h"

typedef dg_nll_attr nll_attr;   /* op_attrs.h */

static dg_tensor *reduce_loss(dg_tensor *per, dg_reduction r) {
    if (!per) return NULL;
    switch (r) {
    case DG_REDUCE_MEAN: return dg_mean_all(per);
    case DG_REDUCE_SUM: return dg_sum_all(per);
    case DG_REDUCE_NONE: return per;
    case DG_REDUCE_BATCHMEAN: DG_ERR(DG_EINVAL, "loss: reduction BATCHMEAN is kl_div's only"); return NULL;
    }
    DG_ERR(DG_EINVAL, "loss: unknown reduction %d", (int)r);
    return NULL;
}

static const char *check_pair(const char *op, const dg_tensor *x, const dg_tensor *y) {
    if (!x || !y) return "NULL input";
    if (x->dtype != y->dtype) return "dtype";
    if (x->ndim != y->ndim) return "shape";
    for (int i = 0; i < x->ndim; i++) if (x->shape[i] != y->shape[i]) return "shape";
    return NULL;
}
#define CHECK_PAIR(op, x, y) do { DG_CHECK_INPUT(op, x); DG_CHECK_INPUT(op, y); const char *w_ = check_pair(op, x, y); \
    DG_CHECK(!w_, "%s: input %s %s and label %s %s differ in %s", op, DG_SHAPE_STR(x), dg_dtype_name((x)->dtype), \
             DG_SHAPE_STR(y), dg_dtype_name((y)->dtype), w_); } while (0)

static dg_tensor *square_error_cost_op(const dg_tensor *x, const dg_tensor *y) {
    CHECK_PAIR("square_error_cost", x, y);
    dg_scope *s = dg_scope_begin();
    dg_tensor *d = dg_sub(x, y);
    return dg_composite_end(s, dg_mul(d, d));
}
dg_tensor *dg_square_error_cost(const dg_tensor *x, const dg_tensor *y) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SQUARE_ERROR_COST, DG_OP_IN(x, y));
    return dg_op_leave(&f, square_error_cost_op(f.arg[0], f.arg[1]));
}
static dg_tensor *mse_loss_ext_op(const dg_tensor *x, const dg_tensor *y, dg_reduction r) {
    CHECK_PAIR("mse_loss", x, y);
    dg_scope *s = dg_scope_begin();
    dg_tensor *d = dg_sub(x, y);
    return dg_composite_end(s, reduce_loss(dg_mul(d, d), r));
}
dg_tensor *dg_mse_loss_ext(const dg_tensor *x, const dg_tensor *y, dg_reduction r) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_MSE_LOSS, DG_OP_IN(x, y));
    return dg_op_leave(&f, mse_loss_ext_op(f.arg[0], f.arg[1], r));
}
dg_tensor *dg_mse_loss(const dg_tensor *x, const dg_tensor *y) { return dg_mse_loss_ext(x, y, DG_REDUCE_MEAN); }
static dg_tensor *l1_loss_op(const dg_tensor *x, const dg_tensor *y, dg_reduction r) {
    CHECK_PAIR("l1_loss", x, y);
    dg_scope *s = dg_scope_begin();
    return dg_composite_end(s, reduce_loss(dg_abs(dg_sub(x, y)), r));
}
dg_tensor *dg_l1_loss(const dg_tensor *x, const dg_tensor *y, dg_reduction r) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_L1_LOSS, DG_OP_IN(x, y));
    return dg_op_leave(&f, l1_loss_op(f.arg[0], f.arg[1], r));
}

/* ---- negative log likelihood over [rows, cols] ---- */
static int nll_rows_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    nll_attr *a = dg_node_attr(n);
    const dg_tensor *label = dg_node_saved(n, 0);
    dg_tensor *gc = dg_contiguous(g);
    dg_tensor *gx = dg_empty_as(g, dg_node_input_shape(n, 0), g->dtype);
    if (!gc || !gx) return DG_ENOMEM;
    gi[0] = gx;
    return DG_KCALL(gx, nll_backward, DG_KV(gc), DG_KV(label), DG_KV(gx), a->rows, a->cols, a->ignore);
}

/* logp [rows, cols] contiguous-able, label [rows] int: per-row -logp[label] (0 where ignored) */
static dg_tensor *nll_rows(const dg_tensor *logp, const dg_tensor *label, int64_t ignore) {
    int64_t rows = logp->shape[0], cols = logp->shape[1];
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *lc = dg_contiguous(logp), *yc = dg_contiguous(label);
    dg_no_grad_end();
    dg_tensor *loss = (lc && yc) ? dg_new_on(logp, &rows, 1, logp->dtype) : NULL;
    if (loss && DG_KCALL(logp, nll, DG_KV(lc), DG_KV(yc), DG_KV(loss), rows, cols, ignore) != 0) loss = NULL;
    loss = dg_keep_in_parent(loss);
    dg_tensor *ykeep = dg_keep_in_parent(yc);
    dg_scope_end(s);
    if (loss) {
        const dg_tensor *in[1] = { logp };
        if (dg_needs_record(in, 1)) {
            dg_node *n = dg_record_op(DG_OP_NLL_LOSS, loss, in, 1, nll_rows_bw);
            if (!n || dg_node_save(n, ykeep)) {   /* record/save said why */
                dg_tensor_free(loss);
                loss = NULL;
            } else {
                nll_attr *a = dg_node_attr(n);
                a->rows = rows; a->cols = cols; a->ignore = ignore;
            }
        }
    }
    dg_tensor_free(ykeep);
    return loss;
}

/* Count of labels not equal to ignore_index, as a scalar of dtype dt (mean divides by it). */
static dg_tensor *valid_count(const dg_tensor *label, int64_t ignore, dg_dtype dt) {
    if (ignore == INT64_MIN) return dg_full_on(label, DG_SCALAR_SHAPE, (double)label->numel, dt);
    dg_tensor *ig = dg_full_on(label, DG_SCALAR_SHAPE, (double)ignore, label->dtype);
    dg_tensor *is_ig = dg_cast(dg_equal(label, ig), dt);
    return dg_rsub_scalar(dg_sum_all(is_ig), (double)label->numel);
}

static bool is_int(const dg_tensor *t) { return t->dtype == DG_I64 || t->dtype == DG_I32; }

/* A class weight fits logits with C classes: [C], their dtype and device. */
static int check_class_weight(const char *op, const dg_tensor *w, const dg_tensor *logits, int64_t C) {
    if (!w) return 0;
    if (!dg_tensor_live(w)) { DG_ERR(DG_EINVAL, "%s: weight is not a live tensor", op); return DG_EINVAL; }
    if (w->ndim != 1 || w->shape[0] != C || w->dtype != logits->dtype || dg_device_of(w).type != dg_device_of(logits).type) {
        char d1[16], d2[16];
        DG_ERR(DG_EINVAL, "%s: weight %s %s on %s must be [%lld] %s on %s (one per class of the input %s)", op, DG_SHAPE_STR(w),
               dg_dtype_name(w->dtype), dg_device_name(dg_device_of(w), d1, sizeof d1), (long long)C, dg_dtype_name(logits->dtype),
               dg_device_name(dg_device_of(logits), d2, sizeof d2), DG_SHAPE_STR(logits));
        return DG_EINVAL;
    }
    return 0;
}

/* logp [rows, C], y [rows]: per-row -w[y] logp[y] (0 for ignored rows; w NULL: 1) and, when den
 * is given, the denominator of torch's mean: the sum of w[y] over the rows counted. */
static dg_tensor *weighted_nll_rows(const dg_tensor *logp, const dg_tensor *y, int64_t ignore, const dg_tensor *w, dg_tensor **den) {
    if (!w) {
        if (den) *den = valid_count(y, ignore, logp->dtype);
        return nll_rows(logp, y, ignore);
    }
    int64_t rows = logp->shape[0], C = logp->shape[1];
    const dg_tensor *wr = dg_reshape(w, DG_SHAPE(1, C));
    dg_tensor *per = nll_rows(dg_mul(logp, wr), y, ignore);   /* -(w * logp)[y] = -w[y] logp[y] */
    if (den) {
        dg_no_grad_begin();
        *den = dg_sum_all(nll_rows(dg_neg(dg_expand(wr, DG_SHAPE(rows, C))), y, ignore));   /* w[y] */
        dg_no_grad_end();
    }
    return per;
}

/* Put axis a last keeping the others in order, so rows come out in the labels' order. */
static const dg_tensor *move_axis_last(const dg_tensor *x, int a) {
    if (a == x->ndim - 1) return x;
    int perm[DG_MAX_DIMS], k = 0;
    for (int i = 0; i < x->ndim; i++) if (i != a) perm[k++] = i;
    perm[k] = a;
    return dg_permute(x, perm);
}

/* Move the class axis last and flatten to [rows, C]; labels follow (hard: [rows]). */
static int to_rows(const dg_tensor *x, const dg_tensor *label, int axis, bool soft, dg_tensor **xr, dg_tensor **yr, const char *op) {
    int a = dg_norm_axis(axis, x->ndim);
    if (a < 0 || x->ndim < 1) { DG_ERR(DG_EINVAL, "%s: class axis %d out of range for %s", op, axis, DG_SHAPE_STR(x)); return DG_EINVAL; }
    int64_t C = x->shape[a];
    const dg_tensor *xt = move_axis_last(x, a);
    *xr = dg_reshape(xt, DG_SHAPE(-1, C));
    if (soft) {
        bool same = label->ndim == x->ndim;
        for (int i = 0; same && i < x->ndim; i++) same = label->shape[i] == x->shape[i];
        if (!same || !dg_dtype_is_float(label->dtype)) {
            DG_ERR(DG_EINVAL, "%s: soft label %s %s must match logits %s %s", op, DG_SHAPE_STR(label), dg_dtype_name(label->dtype),
                   DG_SHAPE_STR(x), dg_dtype_name(x->dtype));
            return DG_EINVAL;
        }
        const dg_tensor *lt = move_axis_last(label, a);
        *yr = dg_reshape(lt, DG_SHAPE(-1, C));
    } else {
        /* hard labels: logits' shape without the class axis, optionally with a size-1 class axis
         * ([N,1] for [N,C] logits, as in the seeds) */
        int64_t rows = x->numel / (C ? C : 1);
        bool ok = is_int(label) && label->numel == rows;
        if (ok) {
            if (label->ndim == x->ndim) ok = label->shape[a] == 1;
            else ok = label->ndim == x->ndim - 1;
            for (int i = 0, j = 0; ok && i < x->ndim; i++) {
                if (i == a) { if (label->ndim == x->ndim) j++; continue; }
                ok = label->shape[j++] == x->shape[i];
            }
        }
        if (!ok) {
            DG_ERR(DG_EINVAL, "%s: label %s %s does not fit logits %s (expected int64 class ids shaped like the logits "
                   "without the class axis %d, or with it of size 1)", op, DG_SHAPE_STR(label), dg_dtype_name(label->dtype), DG_SHAPE_STR(x), a);
            return DG_EINVAL;
        }
        *yr = dg_reshape(label, DG_SHAPE(rows));
    }
    return (*xr && *yr) ? 0 : DG_EINVAL;
}

static dg_tensor *nll_loss(const dg_tensor *logp, const dg_tensor *label, dg_nll_loss_params p);
dg_nll_loss_params dg_nll_loss_default_params(void) {
    return (dg_nll_loss_params){ .params_tag = DG_PARAMS_TAG, .reduction = DG_REDUCE_MEAN, .ignore_index = -100, .weight = NULL };
}
static dg_tensor *nll_loss_ext_op(const dg_tensor *logp, const dg_tensor *label, dg_nll_loss_params p) {
    DG_CHECK_PARAMS("nll_loss_ext", p, dg_nll_loss_default_params);
    DG_CHECK_INPUT("nll_loss", logp);
    DG_CHECK_INPUT("nll_loss", label);
    DG_CHECK_FLOAT("nll_loss", logp);
    DG_CHECK_SAME_DEVICE("nll_loss", logp, label);
    DG_CHECK(p.reduction >= DG_REDUCE_MEAN && p.reduction <= DG_REDUCE_NONE, "nll_loss: reduction %d is not MEAN, SUM or NONE",
             (int)p.reduction);
    DG_CHECK(logp->ndim >= 1, "nll_loss: input %s has no class axis", DG_SHAPE_STR(logp));
    if (check_class_weight("nll_loss", p.weight, logp, logp->shape[logp->ndim >= 2 ? 1 : 0])) return NULL;
    dg_scope *s = dg_scope_begin();
    return dg_composite_end(s, nll_loss(logp, label, p));
}
dg_tensor *dg_nll_loss_ext(const dg_tensor *logp, const dg_tensor *label, dg_nll_loss_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_NLL_LOSS, DG_OP_IN(logp, label));
    return dg_op_leave(&f, nll_loss_ext_op(f.arg[0], f.arg[1], p));
}
dg_tensor *dg_nll_loss(const dg_tensor *logp, const dg_tensor *label, dg_reduction r, int64_t ignore_index) {
    dg_nll_loss_params p = dg_nll_loss_default_params();
    p.reduction = r;
    p.ignore_index = ignore_index;
    return dg_nll_loss_ext(logp, label, p);
}
static dg_tensor *nll_loss(const dg_tensor *logp, const dg_tensor *label, dg_nll_loss_params p) {
    int axis = logp->ndim >= 3 ? 1 : -1;   /* torch layout: [N, C, d1, ...] */
    dg_reduction r = p.reduction;
    dg_tensor *xr, *yr, *den = NULL;
    if (to_rows(logp, label, axis, false, &xr, &yr, "nll_loss")) return NULL;
    dg_tensor *per = weighted_nll_rows(xr, yr, p.ignore_index, p.weight, r == DG_REDUCE_MEAN ? &den : NULL);
    if (r == DG_REDUCE_MEAN) return dg_div(dg_sum_all(per), den);
    if (r == DG_REDUCE_NONE && per) {
        dg_shape s = dg_shape_of(label);
        if (label->ndim == logp->ndim) { s.ndim = 0; for (int i = 0; i < logp->ndim; i++) if (i != (axis < 0 ? logp->ndim - 1 : axis)) s.d[s.ndim++] = logp->shape[i]; }
        return dg_reshape(per, s);
    }
    return reduce_loss(per, r);
}

dg_cross_entropy_params dg_cross_entropy_default_params(void) {
    return (dg_cross_entropy_params){ .params_tag = DG_PARAMS_TAG, .reduction = DG_REDUCE_MEAN, .soft_label = false, .use_ignore_index = false,
                                      .ignore_index = -100, .input_is_probs = false, .axis = -1, .weight = NULL,
                                      .label_smoothing = 0 };
}

static dg_tensor *cross_entropy(const dg_tensor *logits, const dg_tensor *label, dg_cross_entropy_params p);
static dg_tensor *cross_entropy_ext_op(const dg_tensor *logits, const dg_tensor *label, dg_cross_entropy_params p) {
    DG_CHECK_PARAMS("cross_entropy_ext", p, dg_cross_entropy_default_params);
    DG_CHECK_INPUT("cross_entropy", logits);
    DG_CHECK_INPUT("cross_entropy", label);
    DG_CHECK_FLOAT("cross_entropy", logits);
    DG_CHECK_SAME_DEVICE("cross_entropy", logits, label);
    DG_CHECK(p.reduction >= DG_REDUCE_MEAN && p.reduction <= DG_REDUCE_NONE, "cross_entropy: reduction %d is not MEAN, SUM or NONE",
             (int)p.reduction);
    DG_CHECK(p.label_smoothing >= 0 && p.label_smoothing <= 1, "cross_entropy: label_smoothing must be in [0, 1], got %g",
             p.label_smoothing);
    int a = dg_norm_axis(p.axis, logits->ndim);
    DG_CHECK(a >= 0, "cross_entropy: class axis %d out of range for %s", p.axis, DG_SHAPE_STR(logits));
    if (check_class_weight("cross_entropy", p.weight, logits, logits->shape[a])) return NULL;
    dg_scope *s = dg_scope_begin();
    return dg_composite_end(s, cross_entropy(logits, label, p));
}
dg_tensor *dg_cross_entropy_ext(const dg_tensor *logits, const dg_tensor *label, dg_cross_entropy_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_CROSS_ENTROPY, DG_OP_IN(logits, label));
    return dg_op_leave(&f, cross_entropy_ext_op(f.arg[0], f.arg[1], p));
}
static dg_tensor *cross_entropy(const dg_tensor *logits, const dg_tensor *label, dg_cross_entropy_params p) {
    int axis = p.axis;
    int64_t ignore = p.use_ignore_index ? p.ignore_index : INT64_MIN;
    dg_tensor *xr, *yr;
    if (to_rows(logits, label, axis, p.soft_label, &xr, &yr, "cross_entropy")) return NULL;
    dg_tensor *logp = p.input_is_probs ? dg_log(xr) : dg_log_softmax(xr, -1);
    int64_t C = xr->shape[1];
    double e = p.label_smoothing;
    int last = -1;
    const dg_tensor *wlogp = p.weight ? dg_mul(logp, dg_reshape(p.weight, DG_SHAPE(1, C))) : logp;
    dg_tensor *per;
    if (p.soft_label) {
        /* -sum_c w_c y'_c logp_c with y' = (1 - e) y + e / C; a mean divides by the rows */
        const dg_tensor *y = e > 0 ? dg_add_scalar(dg_mul_scalar(yr, 1 - e), e / (double)C) : yr;
        per = dg_neg(dg_sum(dg_mul(y, wlogp), &last, 1, false));
    } else {
        dg_tensor *den = NULL;
        per = weighted_nll_rows(logp, yr, ignore, p.weight, p.reduction == DG_REDUCE_MEAN ? &den : NULL);
        if (e > 0) {
            /* torch: (1 - e) nll + e / C * smooth, smooth_i = -sum_c w_c logp_ic (0 on ignored rows);
             * with MEAN both terms are divided by the weights of the rows counted (their number
             * without weights) */
            dg_tensor *smooth = dg_neg(dg_sum(wlogp, &last, 1, false));
            if (ignore != INT64_MIN)
                smooth = dg_mul(smooth, dg_cast(dg_rsub_scalar(dg_cast(dg_equal(yr, dg_full_on(yr, DG_SCALAR_SHAPE, (double)ignore, yr->dtype)),
                                                                       logits->dtype), 1.0), logits->dtype));
            if (p.reduction == DG_REDUCE_MEAN) {
                return dg_div(dg_add(dg_mul_scalar(dg_sum_all(per), 1 - e), dg_mul_scalar(dg_sum_all(smooth), e / (double)C)), den);
            }
            per = dg_add(dg_mul_scalar(per, 1 - e), dg_mul_scalar(smooth, e / (double)C));
        } else if (p.reduction == DG_REDUCE_MEAN) {
            return dg_div(dg_sum_all(per), den);
        }
    }
    if (p.reduction == DG_REDUCE_NONE) {
        /* shaped like the logits without the class axis */
        dg_shape s = { .ndim = 0 };
        int a = dg_norm_axis(axis, logits->ndim);
        for (int i = 0; i < logits->ndim; i++) if (i != a) s.d[s.ndim++] = logits->shape[i];
        return dg_reshape(per, s);
    }
    return reduce_loss(per, p.reduction);
}

dg_tensor *dg_cross_entropy(const dg_tensor *logits, const dg_tensor *label) {
    return dg_cross_entropy_ext(logits, label, dg_cross_entropy_default_params());
}

dg_bce_params dg_bce_default_params(void) { return (dg_bce_params){ .params_tag = DG_PARAMS_TAG, .reduction = DG_REDUCE_MEAN, .weight = NULL, .pos_weight = NULL }; }

/* An optional weight of a BCE loss: broadcasts to the input, its dtype and device. */
static int check_bce_weight(const char *op, const char *field, const dg_tensor *w, const dg_tensor *x) {
    if (!w) return 0;
    int64_t shp[DG_MAX_DIMS];
    int nd;
    if (!dg_tensor_live(w)) { DG_ERR(DG_EINVAL, "%s: %s is not a live tensor", op, field); return DG_EINVAL; }
    bool fits = w->dtype == x->dtype && dg_device_of(w).type == dg_device_of(x).type && dg_broadcast_shape(x, w, shp, &nd) && nd == x->ndim;
    for (int i = 0; fits && i < nd; i++) fits = shp[i] == x->shape[i];
    if (!fits) {
        DG_ERR(DG_EINVAL, "%s: %s %s %s does not broadcast to the input %s %s on its device", op, field, DG_SHAPE_STR(w),
               dg_dtype_name(w->dtype), DG_SHAPE_STR(x), dg_dtype_name(x->dtype));
        return DG_EINVAL;
    }
    return 0;
}

static dg_tensor *binary_cross_entropy_with_logits_ext_op(const dg_tensor *x, const dg_tensor *y, dg_bce_params p) {
    DG_CHECK_PARAMS("binary_cross_entropy_with_logits_ext", p, dg_bce_default_params);
    CHECK_PAIR("binary_cross_entropy_with_logits", x, y);
    DG_CHECK_FLOAT("binary_cross_entropy_with_logits", x);
    DG_CHECK(p.reduction >= DG_REDUCE_MEAN && p.reduction <= DG_REDUCE_NONE,
             "binary_cross_entropy_with_logits: reduction %d is not MEAN, SUM or NONE", (int)p.reduction);
    if (check_bce_weight("binary_cross_entropy_with_logits", "weight", p.weight, x) ||
        check_bce_weight("binary_cross_entropy_with_logits", "pos_weight", p.pos_weight, x))
        return NULL;
    /* torch's form: (1 - y) x + (1 + (pw - 1) y) (log(1 + exp(-|x|)) + max(-x, 0)), stable for large
     * |x|. At x = 0, |x| and max(-x, 0) have kinks; abs and relu would give each the subgradient 0
     * and the derivative -y instead of sigmoid(0) - y. Both are taken as their x >= 0 branch
     * (slopes 1 and 0), whose contributions -1/2 + 0 give the true derivative of softplus(-x). */
    dg_scope *s = dg_scope_begin();
    dg_tensor *neg = dg_greater(dg_zeros_like(x), x), *minus_x = dg_neg(x);
    dg_tensor *abs_x = dg_where(neg, minus_x, x), *pos_of_minus_x = dg_where(neg, minus_x, dg_zeros_like(x));
    dg_tensor *softplus_minus_x = dg_add(dg_log(dg_add_scalar(dg_exp(dg_neg(abs_x)), 1.0)), pos_of_minus_x);
    const dg_tensor *lw = p.pos_weight ? dg_add_scalar(dg_mul(dg_sub_scalar(p.pos_weight, 1.0), y), 1.0) : NULL;
    dg_tensor *per = dg_add(dg_mul(dg_rsub_scalar(y, 1.0), x), lw ? dg_mul(lw, softplus_minus_x) : softplus_minus_x);
    if (p.weight) per = dg_mul(per, p.weight);
    return dg_composite_end(s, reduce_loss(per, p.reduction));
}
dg_tensor *dg_binary_cross_entropy_with_logits_ext(const dg_tensor *x, const dg_tensor *y, dg_bce_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_BCE_WITH_LOGITS, DG_OP_IN(x, y));
    return dg_op_leave(&f, binary_cross_entropy_with_logits_ext_op(f.arg[0], f.arg[1], p));
}

dg_tensor *dg_binary_cross_entropy_with_logits(const dg_tensor *x, const dg_tensor *y, dg_reduction r) {
    dg_bce_params p = dg_bce_default_params();
    p.reduction = r;
    return dg_binary_cross_entropy_with_logits_ext(x, y, p);
}

static dg_tensor *binary_cross_entropy_op(const dg_tensor *pr, const dg_tensor *y, dg_bce_params p) {
    DG_CHECK_PARAMS("binary_cross_entropy", p, dg_bce_default_params);
    CHECK_PAIR("binary_cross_entropy", pr, y);
    DG_CHECK_FLOAT("binary_cross_entropy", pr);
    DG_CHECK(p.reduction >= DG_REDUCE_MEAN && p.reduction <= DG_REDUCE_NONE, "binary_cross_entropy: reduction %d is not MEAN, SUM or NONE",
             (int)p.reduction);
    DG_CHECK(!p.pos_weight, "binary_cross_entropy: pos_weight is for the logits form (binary_cross_entropy_with_logits_ext), as in torch");
    if (check_bce_weight("binary_cross_entropy", "weight", p.weight, pr)) return NULL;
    if (pr->numel > 0) {   /* torch refuses probabilities outside [0, 1]; so does this, naming them */
        dg_scope *c = dg_scope_begin();
        dg_no_grad_begin();
        double lo = dg_item(dg_min(pr, NULL, 0, false)), hi = dg_item(dg_max(pr, NULL, 0, false));
        dg_no_grad_end();
        dg_scope_end(c);
        DG_CHECK(lo >= 0 && hi <= 1, "binary_cross_entropy: input %s holds values in [%g, %g]; probabilities must lie in [0, 1] "
                 "(logits go to binary_cross_entropy_with_logits)", DG_SHAPE_STR(pr), lo, hi);
    }
    dg_scope *s = dg_scope_begin();
    /* torch clamps each log at -100, so p = 0 or 1 gives a finite loss */
    dg_tensor *log_p = dg_clip(dg_log(pr), -100, INFINITY), *log_1mp = dg_clip(dg_log(dg_rsub_scalar(pr, 1.0)), -100, INFINITY);
    dg_tensor *per = dg_neg(dg_add(dg_mul(y, log_p), dg_mul(dg_rsub_scalar(y, 1.0), log_1mp)));
    if (p.weight) per = dg_mul(per, p.weight);
    return dg_composite_end(s, reduce_loss(per, p.reduction));
}
dg_tensor *dg_binary_cross_entropy(const dg_tensor *pr, const dg_tensor *y, dg_bce_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_BCE, DG_OP_IN(pr, y));
    return dg_op_leave(&f, binary_cross_entropy_op(f.arg[0], f.arg[1], p));
}

/* 0.5 d^2 / scale below `knee`, slope * (|d| - knee / 2) above: smooth_l1 (scale = knee = beta,
 * slope 1) and huber (scale 1, knee = slope = delta). The quadratic side is written in d, not
 * |d|, so its gradient is d / scale with no kink at 0. */
static dg_tensor *quad_linear_loss(const char *op, const dg_tensor *x, const dg_tensor *y, dg_reduction r, double knee, double scale,
                                   double slope) {
    DG_CHECK(r >= DG_REDUCE_MEAN && r <= DG_REDUCE_NONE, "%s: reduction %d is not MEAN, SUM or NONE", op, (int)r);
    dg_scope *s = dg_scope_begin();
    dg_tensor *d = dg_sub(x, y), *ad = dg_abs(d);
    dg_tensor *per = knee == 0 ? ad
        : dg_where(dg_greater(dg_full_on(x, DG_SCALAR_SHAPE, knee, x->dtype), ad), dg_mul_scalar(dg_mul(d, d), 0.5 / scale),
                   dg_mul_scalar(dg_sub_scalar(ad, 0.5 * knee), slope));
    return dg_composite_end(s, reduce_loss(per, r));
}
static dg_tensor *smooth_l1_loss_op(const dg_tensor *x, const dg_tensor *y, dg_reduction r, double beta) {
    CHECK_PAIR("smooth_l1_loss", x, y);
    DG_CHECK_FLOAT("smooth_l1_loss", x);
    DG_CHECK(beta >= 0 && isfinite(beta), "smooth_l1_loss: beta must be >= 0, got %g", beta);
    return quad_linear_loss("smooth_l1_loss", x, y, r, beta, beta, 1.0);
}
dg_tensor *dg_smooth_l1_loss(const dg_tensor *x, const dg_tensor *y, dg_reduction r, double beta) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_SMOOTH_L1_LOSS, DG_OP_IN(x, y));
    return dg_op_leave(&f, smooth_l1_loss_op(f.arg[0], f.arg[1], r, beta));
}
static dg_tensor *huber_loss_op(const dg_tensor *x, const dg_tensor *y, dg_reduction r, double delta) {
    CHECK_PAIR("huber_loss", x, y);
    DG_CHECK_FLOAT("huber_loss", x);
    DG_CHECK(delta > 0 && isfinite(delta), "huber_loss: delta must be > 0, got %g", delta);
    return quad_linear_loss("huber_loss", x, y, r, delta, 1.0, delta);
}
dg_tensor *dg_huber_loss(const dg_tensor *x, const dg_tensor *y, dg_reduction r, double delta) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_HUBER_LOSS, DG_OP_IN(x, y));
    return dg_op_leave(&f, huber_loss_op(f.arg[0], f.arg[1], r, delta));
}

static dg_tensor *kl_div_op(const dg_tensor *x, const dg_tensor *t, dg_reduction r, bool log_target) {
    CHECK_PAIR("kl_div", x, t);
    DG_CHECK_FLOAT("kl_div", x);
    DG_CHECK(r >= DG_REDUCE_MEAN && r <= DG_REDUCE_BATCHMEAN, "kl_div: unknown reduction %d", (int)r);
    dg_scope *s = dg_scope_begin();
    dg_tensor *per;
    if (log_target) {
        per = dg_mul(dg_exp(t), dg_sub(t, x));
    } else {
        /* t log t taken as 0 at t = 0 (torch's xlogy): the log of 1 there, so neither the value nor
         * a gradient of the target sees log 0 */
        dg_tensor *pos = dg_greater(t, dg_zeros_like(t));
        dg_tensor *t_log_t = dg_mul(t, dg_log(dg_where(pos, t, dg_full_on(t, DG_SCALAR_SHAPE, 1.0, t->dtype))));
        per = dg_sub(t_log_t, dg_mul(t, x));
    }
    dg_tensor *out = r == DG_REDUCE_BATCHMEAN ? dg_div_scalar(dg_sum_all(per), x->ndim ? (double)x->shape[0] : 1.0) : reduce_loss(per, r);
    return dg_composite_end(s, out);
}
dg_tensor *dg_kl_div(const dg_tensor *x, const dg_tensor *t, dg_reduction r, bool log_target) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_KL_DIV, DG_OP_IN(x, t));
    return dg_op_leave(&f, kl_div_op(f.arg[0], f.arg[1], r, log_target));
}

static dg_tensor *accuracy_op(const dg_tensor *scores, const dg_tensor *label, int k) {
    DG_CHECK_INPUT("accuracy", scores);
    DG_CHECK_INPUT("accuracy", label);
    DG_CHECK_FLOAT("accuracy", scores);
    DG_CHECK(scores->ndim == 2 && k >= 1, "accuracy: scores must be [N, C] and k >= 1, got %s, k=%d", DG_SHAPE_STR(scores), k);
    int64_t n = scores->shape[0];
    DG_CHECK(is_int(label) && label->numel == n && (label->ndim == 1 || (label->ndim == 2 && label->shape[1] == 1)),
             "accuracy: label %s %s must be [N] or [N,1] int for scores %s", DG_SHAPE_STR(label), dg_dtype_name(label->dtype), DG_SHAPE_STR(scores));
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    /* a row is right when fewer than k classes score strictly higher than its label */
    dg_tensor *lab = dg_reshape(label, DG_SHAPE(n, 1));
    dg_tensor *mine = dg_gather(scores, lab, 1);
    int one = 1;
    dg_tensor *higher = dg_sum(dg_cast(dg_greater(scores, mine), scores->dtype), &one, 1, false);
    dg_tensor *hit = dg_cast(dg_greater(dg_full_on(scores, DG_SCALAR_SHAPE, k - 0.5, scores->dtype), higher), scores->dtype);
    dg_tensor *acc = dg_mean_all(hit);
    dg_no_grad_end();
    acc = dg_keep_in_parent(acc);
    dg_scope_end(s);
    return acc;
}
dg_tensor *dg_accuracy(const dg_tensor *scores, const dg_tensor *label, int k) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_ACCURACY, DG_OP_IN(scores, label));
    return dg_op_leave(&f, accuracy_op(f.arg[0], f.arg[1], k));
}
