/* optim/lbfgs_state.c — LBFGS's state as named tensors, after the optimizer's "lr": torch keeps
 * it as the state of the first parameter, so the names are "0.<key>" with torch's keys, in its
 * order: "0.func_evals", "0.n_iter" (i64 0-d; from the first step on), then, once an iteration
 * has run, "0.d", "0.t", "0.old_dirs.<k>", "0.old_stps.<k>", "0.ro.<k>" (k = 0 .. history - 1,
 * oldest first), "0.H_diag", "0.prev_flat_grad", "0.prev_loss". Vectors are 1-D CPU tensors of
 * the parameters' dtype over every parameter flattened in order; t, ro, H_diag and prev_loss
 * are f64 0-d (torch's hold them as Python floats or 0-d tensors of the parameters' dtype).
 * torch's "al" is scratch and is not kept. */
#include "lbfgs_internal.h"
#include <errno.h>
#include <math.h>

enum { E_FUNC_EVALS, E_N_ITER, E_D, E_T, E_HIST, E_H_DIAG, E_PREV_FLAT_GRAD, E_PREV_LOSS };
static const char *const fixed_name[] = { "0.func_evals", "0.n_iter", "0.d", "0.t", NULL, "0.H_diag", "0.prev_flat_grad",
                                          "0.prev_loss" };

int dg_lbfgs_sync_scalars(dg_lbfgs_st *L) {
    int rc = dg_fill_(L->func_evals_t, (double)L->func_evals);
    if (!rc) rc = dg_fill_(L->n_iter_t, (double)L->n_iter);
    if (!rc) rc = dg_fill_(L->t_t, L->t);
    if (!rc) rc = dg_fill_(L->H_diag_t, L->H_diag);
    if (!rc) rc = dg_fill_(L->prev_loss_t, L->prev_loss);
    for (int k = 0; !rc && k < L->n_old; k++) {
        if (!L->ro_t[k] && !(L->ro_t[k] = dg_opt_cpu_scalar(0, DG_F64))) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
        rc = dg_fill_(L->ro_t[k], L->ro[k]);
    }
    return rc;
}

/* Entry k as (which, history index). */
static bool locate(const dg_lbfgs_st *L, int k, int *which, int *h) {
    *h = -1;
    if (L->func_evals == 0 && L->n_iter == 0) return false;
    if (k < 2) { *which = k; return true; }
    if (!L->d) return false;
    k -= 2;
    if (k < 2) { *which = E_D + k; return true; }
    k -= 2;
    if (k < 3 * L->n_old) { *which = E_HIST; *h = k; return true; }
    k -= 3 * L->n_old;
    if (k < 3) { *which = E_H_DIAG + k; return true; }
    return false;
}

int dg_lbfgs_state_count(const dg_optimizer *o) {
    const dg_lbfgs_st *L = o->lbfgs;
    if (L->func_evals == 0 && L->n_iter == 0) return 0;
    return L->d ? 7 + 3 * L->n_old : 2;
}

const char *dg_lbfgs_state_name(const dg_optimizer *o, int k) {
    const dg_lbfgs_st *L = o->lbfgs;
    int w, h;
    DG_CHECK(locate(L, k, &w, &h), "lbfgs: state index %d out of range", k);
    if (w != E_HIST) return fixed_name[w];
    return L->hist_name[h % L->n_old][h / L->n_old];
}

dg_tensor *dg_lbfgs_state_tensor(const dg_optimizer *o, int k) {
    const dg_lbfgs_st *L = o->lbfgs;
    int w, h;
    DG_CHECK(locate(L, k, &w, &h), "lbfgs: state index %d out of range", k);
    switch (w) {
    case E_FUNC_EVALS: return L->func_evals_t;
    case E_N_ITER: return L->n_iter_t;
    case E_D: return L->d;
    case E_T: return L->t_t;
    case E_H_DIAG: return L->H_diag_t;
    case E_PREV_FLAT_GRAD: return L->prev_flat_grad;
    case E_PREV_LOSS: return L->prev_loss_t;
    default: {
        int j = h % L->n_old, part = h / L->n_old;
        return part == 0 ? L->old_dirs[j] : part == 1 ? L->old_stps[j] : L->ro_t[j];
    }
    }
}

/* "0.<key>" -> which (and the history index for old_dirs / old_stps / ro, part 0, 1, 2). */
static int parse(const dg_lbfgs_st *L, const char *name, int *which, int *k, int *part) {
    *k = *part = -1;
    for (int w = 0; w < 8; w++)
        if (fixed_name[w] && strcmp(name, fixed_name[w]) == 0) { *which = w; return 0; }
    static const char *const hist[3] = { "0.old_dirs.", "0.old_stps.", "0.ro." };
    for (int p = 0; p < 3; p++) {
        size_t len = strlen(hist[p]);
        if (strncmp(name, hist[p], len) != 0) continue;
        const char *s = name + len;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        DG_CHECK_INT(end != s && *end == 0 && s[0] >= '0' && s[0] <= '9' && errno == 0, "lbfgs: load_state: '%s': bad "
                     "history index", name);
        DG_CHECK_INT(v < L->history_size, "lbfgs: load_state: '%s': history entry %ld, but history_size is %d", name, v,
                     L->history_size);
        *which = E_HIST;
        *k = (int)v;
        *part = p;
        return 0;
    }
    DG_ERR(DG_EINVAL, "lbfgs: load_state: unknown state name '%s' (LBFGS keeps 'lr' and '0.<key>' for torch's keys "
           "func_evals, n_iter, d, t, old_dirs.<k>, old_stps.<k>, ro.<k>, H_diag, prev_flat_grad, prev_loss)", name);
    return DG_EINVAL;
}

static int copy_into(dg_tensor *dst, const dg_tensor *value) {
    dg_scope *sc = dg_scope_begin();
    const dg_tensor *src = value;
    if (dg_device_of(value).type != DG_CPU) src = dg_to_device(value, dg_cpu());
    if (src && dg_ndim(src) != 1) src = dg_reshape(src, DG_SHAPE(dg_numel(src)));
    int rc = src ? dg_copy_(dst, src) : (dg_last_status() ? dg_last_status() : DG_EDEVICE);
    dg_scope_end(sc);
    return rc;
}

int dg_lbfgs_load_state(dg_optimizer *o, const char *name, const dg_tensor *value, bool check_only) {
    dg_lbfgs_st *L = o->lbfgs;
    int w, k, part, rc = parse(L, name, &w, &k, &part);
    if (rc) return rc;
    char sh[96];
    dg_shape_str(value, sh, sizeof sh);
    bool vec = w == E_D || w == E_PREV_FLAT_GRAD || (w == E_HIST && part < 2);
    if (vec) {
        DG_CHECK_INT(dg_numel(value) == L->numel && dg_ndim(value) == 1, "lbfgs: load_state: '%s' has shape %s; the "
                     "parameters flatten to [%lld]", name, sh, (long long)L->numel);
        DG_CHECK_INT(dg_dtype_is_float(dg_dtype_of(value)), "lbfgs: load_state: '%s' is %s; expects a float tensor", name,
                     dg_dtype_name(dg_dtype_of(value)));
    } else {
        DG_CHECK_INT(dg_numel(value) == 1, "lbfgs: load_state: '%s' must have one element, got shape %s", name, sh);
    }
    if (check_only) return 0;
    double x = vec ? 0 : dg_item(value);
    if (w == E_FUNC_EVALS || w == E_N_ITER) {
        DG_CHECK_INT(x >= 0 && x == floor(x) && x < 9.0e15, "lbfgs: load_state: '%s' = %g is not a count", name, x);
        if (w == E_FUNC_EVALS) L->func_evals = (int64_t)x;
        else L->n_iter = (int64_t)x;
        return dg_lbfgs_sync_scalars(L);
    }
    if (w == E_T || w == E_H_DIAG || w == E_PREV_LOSS || (w == E_HIST && part == 2)) {
        if (w == E_HIST && (rc = dg_lbfgs_reserve(L, k + 1)) != 0) return rc;
        if (w == E_T) L->t = x;
        else if (w == E_H_DIAG) L->H_diag = x;
        else if (w == E_PREV_LOSS) L->prev_loss = x;
        else {
            L->ro[k] = x;
            if (k >= L->n_old) L->n_old = k + 1;
        }
        return dg_lbfgs_sync_scalars(L);
    }
    dg_tensor **slot = w == E_D ? &L->d : w == E_PREV_FLAT_GRAD ? &L->prev_flat_grad : NULL;
    if (w == E_HIST) {
        if ((rc = dg_lbfgs_reserve(L, k + 1)) != 0) return rc;
        slot = part == 0 ? &L->old_dirs[k] : &L->old_stps[k];
    }
    bool made = false;
    if (!*slot) {
        if (!(*slot = dg_lbfgs_vec(L))) return dg_last_status();
        made = true;
    }
    rc = copy_into(*slot, value);
    if (rc && made) { dg_tensor_free(*slot); *slot = NULL; }
    if (!rc && w == E_HIST && k >= L->n_old) {
        L->n_old = k + 1;
        rc = dg_lbfgs_sync_scalars(L);
    }
    return rc;
}
