/* eager/ops/loss.c — mse, l1, square_error_cost, cross_entropy (hard labels incl. the seeds'
 * [N,1] layout, soft labels, ignore_index, any class axis), nll, binary cross entropy with
 * logits, and top-k accuracy. */
#include "op_util.h"

typedef struct { int64_t rows, cols, ignore; } nll_attr;

static dg_tensor *reduce_loss(dg_tensor *per, dg_reduction r) {
    if (!per) return NULL;
    switch (r) {
    case DG_REDUCE_MEAN: return dg_mean_all(per);
    case DG_REDUCE_SUM: return dg_sum_all(per);
    case DG_REDUCE_NONE: return per;
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

dg_tensor *dg_square_error_cost(const dg_tensor *x, const dg_tensor *y) {
    CHECK_PAIR("square_error_cost", x, y);
    dg_scope *s = dg_scope_begin();
    dg_tensor *d = dg_sub(x, y);
    return dg_composite_end(s, dg_mul(d, d));
}
dg_tensor *dg_mse_loss_ext(const dg_tensor *x, const dg_tensor *y, dg_reduction r) {
    CHECK_PAIR("mse_loss", x, y);
    dg_scope *s = dg_scope_begin();
    dg_tensor *d = dg_sub(x, y);
    return dg_composite_end(s, reduce_loss(dg_mul(d, d), r));
}
dg_tensor *dg_mse_loss(const dg_tensor *x, const dg_tensor *y) { return dg_mse_loss_ext(x, y, DG_REDUCE_MEAN); }
dg_tensor *dg_l1_loss(const dg_tensor *x, const dg_tensor *y, dg_reduction r) {
    CHECK_PAIR("l1_loss", x, y);
    dg_scope *s = dg_scope_begin();
    return dg_composite_end(s, reduce_loss(dg_abs(dg_sub(x, y)), r));
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
            dg_node *n = dg_record("nll_loss", loss, in, 1, nll_rows_bw);
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

static dg_tensor *nll_loss(const dg_tensor *logp, const dg_tensor *label, dg_reduction r, int64_t ignore_index);
dg_tensor *dg_nll_loss(const dg_tensor *logp, const dg_tensor *label, dg_reduction r, int64_t ignore_index) {
    DG_CHECK_INPUT("nll_loss", logp);
    DG_CHECK_INPUT("nll_loss", label);
    DG_CHECK_FLOAT("nll_loss", logp);
    DG_CHECK_SAME_DEVICE("nll_loss", logp, label);
    dg_scope *s = dg_scope_begin();
    return dg_composite_end(s, nll_loss(logp, label, r, ignore_index));
}
static dg_tensor *nll_loss(const dg_tensor *logp, const dg_tensor *label, dg_reduction r, int64_t ignore_index) {
    int axis = logp->ndim >= 3 ? 1 : -1;   /* torch layout: [N, C, d1, ...] */
    dg_tensor *xr, *yr;
    if (to_rows(logp, label, axis, false, &xr, &yr, "nll_loss")) return NULL;
    dg_tensor *per = nll_rows(xr, yr, ignore_index);
    if (r == DG_REDUCE_MEAN) return dg_div(dg_sum_all(per), valid_count(yr, ignore_index, logp->dtype));
    if (r == DG_REDUCE_NONE && per) {
        dg_shape s = dg_shape_of(label);
        if (label->ndim == logp->ndim) { s.ndim = 0; for (int i = 0; i < logp->ndim; i++) if (i != (axis < 0 ? logp->ndim - 1 : axis)) s.d[s.ndim++] = logp->shape[i]; }
        return dg_reshape(per, s);
    }
    return reduce_loss(per, r);
}

dg_cross_entropy_params dg_cross_entropy_default_params(void) {
    return (dg_cross_entropy_params){ .reduction = DG_REDUCE_MEAN, .soft_label = false, .use_ignore_index = false,
                                      .ignore_index = -100, .input_is_probs = false, .axis = -1 };
}

static dg_tensor *cross_entropy(const dg_tensor *logits, const dg_tensor *label, dg_cross_entropy_params p);
dg_tensor *dg_cross_entropy_ext(const dg_tensor *logits, const dg_tensor *label, dg_cross_entropy_params p) {
    DG_CHECK_INPUT("cross_entropy", logits);
    DG_CHECK_INPUT("cross_entropy", label);
    DG_CHECK_FLOAT("cross_entropy", logits);
    DG_CHECK_SAME_DEVICE("cross_entropy", logits, label);
    DG_CHECK(p.reduction >= DG_REDUCE_MEAN && p.reduction <= DG_REDUCE_NONE, "cross_entropy: unknown reduction %d", (int)p.reduction);
    dg_scope *s = dg_scope_begin();
    return dg_composite_end(s, cross_entropy(logits, label, p));
}
static dg_tensor *cross_entropy(const dg_tensor *logits, const dg_tensor *label, dg_cross_entropy_params p) {
    int axis = p.axis;
    int64_t ignore = p.use_ignore_index ? p.ignore_index : INT64_MIN;
    dg_tensor *xr, *yr;
    if (to_rows(logits, label, axis, p.soft_label, &xr, &yr, "cross_entropy")) return NULL;
    dg_tensor *logp = p.input_is_probs ? dg_log(xr) : dg_log_softmax(xr, -1);
    dg_tensor *per;
    if (p.soft_label) {
        int last = -1;
        per = dg_neg(dg_sum(dg_mul(yr, logp), &last, 1, false));
    } else {
        per = nll_rows(logp, yr, ignore);
        if (p.reduction == DG_REDUCE_MEAN) return dg_div(dg_sum_all(per), valid_count(yr, ignore, logits->dtype));
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

dg_tensor *dg_binary_cross_entropy_with_logits(const dg_tensor *x, const dg_tensor *y, dg_reduction r) {
    CHECK_PAIR("binary_cross_entropy_with_logits", x, y);
    /* max(x,0) - x*y + log(1 + exp(-|x|)): stable for large |x|. At x = 0 both max(x,0) and |x|
     * have a kink; relu and abs would give each the subgradient 0, and the sum -y instead of
     * sigmoid(0) - y. Both are taken as their x >= 0 branch instead (slopes 1 and 1), whose
     * contributions 1 - 1/2 add up to the true derivative. */
    dg_scope *s = dg_scope_begin();
    dg_tensor *neg = dg_greater(dg_zeros_like(x), x);
    dg_tensor *pos_part = dg_where(neg, dg_zeros_like(x), x), *abs_x = dg_where(neg, dg_neg(x), x);
    dg_tensor *per = dg_add(dg_sub(pos_part, dg_mul(x, y)), dg_log(dg_add_scalar(dg_exp(dg_neg(abs_x)), 1.0)));
    return dg_composite_end(s, reduce_loss(per, r));
}

dg_tensor *dg_accuracy(const dg_tensor *scores, const dg_tensor *label, int k) {
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
