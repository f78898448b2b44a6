/* optim/clip_grad.c — global L2-norm gradient clipping, torch.nn.utils.clip_grad_norm_ (also
 * what an optimizer's grad_clip_norm runs before its step), and clipping by value,
 * torch.nn.utils.clip_grad_value_. */
#include "optim_internal.h"
#include <math.h>

/* params checked as clip_grad_norm's: a count, the array, each a live tensor (named by index) */
static int check_params(const char *op, dg_tensor *const *params, int n) {
    if (n < 0 || (n > 0 && !params)) {
        DG_ERR(DG_EINVAL, "%s: %s", op, n < 0 ? "negative parameter count" : "params is NULL");
        return DG_EINVAL;
    }
    for (int i = 0; i < n; i++)
        if (dg_tensor_check(op, "parameter", params[i]) != 0) {
            char what[32];
            snprintf(what, sizeof what, "parameter %d", i);
            return dg_tensor_check(op, what, params[i]);   /* the same failure, named by index */
        }
    return 0;
}

/* Each gradient clamped in place to [-clip_value, clip_value] (torch's clamp_: NaN stays NaN).
 * torch does not check clip_value; a negative one there gives every element -clip_value's
 * clamp (min > max: all max), which dygraph refuses as a mistake, as it refuses NaN. */
int dg_clip_grad_value(dg_tensor *const *params, int n, double clip_value) {
    int rc = check_params("clip_grad_value", params, n);
    if (rc) return rc;
    if (!(clip_value >= 0)) {
        DG_ERR(DG_EINVAL, "clip_grad_value: clip_value must be >= 0 (infinity: no clipping), got %g", clip_value);
        return DG_EINVAL;
    }
    if (isinf(clip_value)) return 0;
    dg_no_grad_begin();
    for (int i = 0; i < n && rc == 0; i++) {
        dg_tensor *g = dg_grad(params[i]);
        if (!g) continue;
        dg_scope *sc = dg_scope_begin();
        dg_tensor *c = dg_clip(g, -clip_value, clip_value);   /* the clip kernel: NaN stays NaN */
        rc = c ? dg_copy_(g, c) : (dg_last_status() ? dg_last_status() : DG_EINVAL);
        dg_scope_end(sc);
    }
    dg_no_grad_end();
    return rc;
}

double dg_clip_grad_norm(dg_tensor *const *params, int n, double max_norm) {
    int rc0 = check_params("clip_grad_norm", params, n);
    if (rc0) return rc0;
    if (!(max_norm >= 0) || isinf(max_norm)) {
        DG_ERR(DG_EINVAL, "clip_grad_norm: max_norm must be finite and >= 0, got %g", max_norm);
        return DG_EINVAL;
    }
    /* Sum of squares in float64, whatever the gradients' dtype. */
    double sumsq = 0;
    bool any = false;
    int rc = 0;
    dg_no_grad_begin();
    for (int i = 0; i < n; i++) {
        const dg_tensor *g = dg_grad(params[i]);
        if (!g) continue;
        any = true;
        dg_scope *sc = dg_scope_begin();   /* per tensor: one float64 copy alive at a time */
        dg_tensor *g64 = dg_cast(g, DG_F64);
        dg_tensor *ss = dg_sum_all(dg_mul(g64, g64));
        if (!ss) rc = dg_last_status() ? dg_last_status() : DG_EINVAL;
        else sumsq += dg_item(ss);
        dg_scope_end(sc);
        if (rc) break;
    }
    double total = any ? sqrt(sumsq) : 0.0;
    /* As PyTorch: coef = max_norm / (total + 1e-6), clamped to 1; a NaN coef propagates. */
    double coef = max_norm / (total + 1e-6);
    if (rc == 0 && any && !(coef >= 1.0))
        for (int i = 0; i < n && rc == 0; i++) {
            dg_tensor *g = dg_grad(params[i]);
            if (g) rc = dg_scale_(g, coef);
        }
    dg_no_grad_end();
    return rc ? rc : total;
}
