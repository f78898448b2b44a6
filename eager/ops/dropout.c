/* eager/ops/dropout.c — inverted dropout (paddle's upscale_in_train, torch's F.dropout).
 *
 * Training with 0 < p < 1: a mask holding 1/(1-p) where an element is kept (probability 1-p)
 * and 0 elsewhere is drawn from a generator's Philox stream (the one given, else the calling
 * thread's) by the backend's `random` entry, so a seed gives the same mask on every backend and
 * thread count; y = x * mask and the gradient is
 * g * mask. p = 1 zeroes everything. Eval or p = 0 copies x; it stays a recorded op so a graph
 * has the same shape in train and eval. */
#include "op_util.h"

#define OP "dropout"

static int dropout_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *mask = dg_node_saved(n, 0);
    gi[0] = mask ? dg_mul(g, mask) : (dg_tensor *)g;
    return gi[0] ? 0 : DG_ENOMEM;
}

dg_tensor *dg_dropout(const dg_tensor *x, double p, bool training) {
    dg_dropout_params dp = dg_dropout_default_params();
    dp.p = p;
    dp.training = training;
    return dg_dropout_ext(x, dp);
}

dg_dropout_params dg_dropout_default_params(void) { return (dg_dropout_params){ .params_tag = DG_PARAMS_TAG, .p = 0.5, .training = true, .generator = NULL }; }

/* The end both dropouts share: the node (saving the mask, NULL when nothing was dropped) and the
 * failure path; y or NULL. */
static dg_tensor *dropout_finish(dg_op_id id, dg_backward_fn bw, const dg_tensor *x, dg_tensor *y, dg_tensor *mask, int rc,
                                 uint64_t errs) {
    const dg_tensor *in[1] = { x };
    if (!rc && dg_op_records()) {
        dg_node *n = dg_record_op(id, y, in, 1, bw);
        if (!n) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;   /* record said why */
        else if (mask) rc = dg_node_save(n, mask);
    }
    dg_tensor_free(mask);
    if (rc) {
        if (!dg_error_since(errs)) DG_ERR(rc, "%s: failed for input %s", dg_op_name(id), DG_SHAPE_STR(x));
        dg_tensor_free(y);
        return NULL;
    }
    return y;
}

static dg_tensor *dropout_ext_op(const dg_tensor *x, dg_dropout_params prm) {
    DG_CHECK_PARAMS("dropout_ext", prm, dg_dropout_default_params);
    double p = prm.p;
    bool training = prm.training;
    DG_CHECK_INPUT(OP, x);
    DG_CHECK_FLOAT(OP, x);
    DG_CHECK(p >= 0 && p <= 1, OP ": p must be in [0, 1], got %g (input %s)", p, DG_SHAPE_STR(x));
    const dg_backend *be = dg_backend_of(x);
    uint64_t errs = dg_error_count();
    dg_tensor *y = dg_new_like(x), *mask = NULL;
    if (!y) return NULL;
    int rc;
    if (!training || p == 0) {
        rc = be->copy(be, DG_KV(x), DG_KV(y));
    } else {
        mask = dg_new_like(x);
        if (!mask) rc = DG_ENOMEM;
        else if (p == 1) {
            rc = be->fill(be, DG_KV(mask), 0.0);
            if (!rc) rc = be->fill(be, DG_KV(y), 0.0);   /* zeros even where x is inf or nan */
        } else {
            /* same reservation as dg_rand: element i uses counter ctr + i/2 */
            uint64_t seed, ctr = dg_generator_reserve(prm.generator, (uint64_t)mask->numel * 2, &seed);
            rc = be->random(be, DG_RAND_BERNOULLI_KEEP, DG_KV(mask), 1.0 - p, 1.0 / (1.0 - p), seed, ctr);
            if (!rc) rc = be->binary(be, DG_BIN_MUL, DG_KV(x), DG_KV(mask), DG_KV(y), 0, 0);
        }
    }
    return dropout_finish(DG_OP_DROPOUT, dropout_bw, x, y, mask, rc, errs);
}
dg_tensor *dg_dropout_ext(const dg_tensor *x, dg_dropout_params prm) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_DROPOUT, DG_OP_IN(x));
    return dg_op_leave(&f, dropout_ext_op(f.arg[0], prm));
}

/* ---- dropout2d (torch 1.13's F.dropout2d, which is feature_dropout): one draw per (x[0], x[1])
 * pair, a mask [N, C, 1, ...] broadcast over the remaining dims; x of 2 or more dims (3-D is
 * [N, C, L] there, as 1.13 reads it). The gradient is g times the mask. ---- */
#undef OP
#define OP "dropout2d"

static int dropout2d_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const dg_tensor *mask = dg_node_saved(n, 0);
    gi[0] = mask ? dg_mul(g, mask) : (dg_tensor *)g;
    return gi[0] ? 0 : DG_ENOMEM;
}

static dg_tensor *dropout2d_op(const dg_tensor *x, dg_dropout_params prm) {
    DG_CHECK_PARAMS("dropout2d_ext", prm, dg_dropout_default_params);
    double p = prm.p;
    DG_CHECK_INPUT(OP, x);
    DG_CHECK_FLOAT(OP, x);
    DG_CHECK(p >= 0 && p <= 1, OP ": p must be in [0, 1], got %g (input %s)", p, DG_SHAPE_STR(x));
    DG_CHECK(x->ndim >= 2, OP ": feature dropout needs at least 2 dimensions ([N, C, ...]), got %s", DG_SHAPE_STR(x));
    const dg_backend *be = dg_backend_of(x);
    uint64_t errs = dg_error_count();
    dg_tensor *y = dg_new_like(x), *mask = NULL;
    if (!y) return NULL;
    int rc;
    if (!prm.training || p == 0) {
        rc = be->copy(be, DG_KV(x), DG_KV(y));
    } else {
        int64_t ms[DG_MAX_DIMS];
        for (int i = 0; i < x->ndim; i++) ms[i] = i < 2 ? x->shape[i] : 1;
        mask = dg_new_on(x, ms, x->ndim, x->dtype);
        if (!mask) rc = DG_ENOMEM;
        else {
            if (p == 1) rc = be->fill(be, DG_KV(mask), 0.0);   /* x * 0, as torch 1.13's feature dropout (NaN where x is inf) */
            else {   /* same reservation as dropout: mask element i uses counter ctr + i/2 */
                uint64_t seed, ctr = dg_generator_reserve(prm.generator, (uint64_t)mask->numel * 2, &seed);
                rc = be->random(be, DG_RAND_BERNOULLI_KEEP, DG_KV(mask), 1.0 - p, 1.0 / (1.0 - p), seed, ctr);
            }
            if (!rc) {   /* y = x * mask, the mask broadcast over the trailing dims */
                dg_kview mv;
                dg_kview_set(&mv, mask);
                for (int i = 2; i < x->ndim; i++) { mv.shape[i] = x->shape[i]; mv.stride[i] = 0; }
                mv.numel = x->numel;
                rc = be->binary(be, DG_BIN_MUL, DG_KV(x), &mv, DG_KV(y), 0, 0);
            }
        }
    }
    return dropout_finish(DG_OP_DROPOUT2D, dropout2d_bw, x, y, mask, rc, errs);
}
dg_tensor *dg_dropout2d_ext(const dg_tensor *x, dg_dropout_params prm) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_DROPOUT2D, DG_OP_IN(x));
    return dg_op_leave(&f, dropout2d_op(f.arg[0], prm));
}
dg_tensor *dg_dropout2d(const dg_tensor *x, double p, bool training) {
    dg_dropout_params dp = dg_dropout_default_params();
    dp.p = p;
    dp.training = training;
    return dg_dropout2d_ext(x, dp);
}
