/* optim/checkpoint.c — an optimizer's state ("lr", "param_groups.<g>.lr", "<i>.<slot>",
 * "<i>.step") to and from safetensors. Every entry is checked against the optimizer's kind and parameters before the
 * first one is loaded, so a bad file changes nothing. */
#include "lbfgs_internal.h"
#include <dygraph/checkpoint.h>
#include <errno.h>

int dg_optimizer_save(const dg_optimizer *opt, const char *path) {
    DG_CHECK_HANDLE_INT(opt, "optimizer_save: optimizer is NULL");
    DG_CHECK_INT(path, "optimizer_save: path is NULL");
    dg_tensor_dict *d = dg_tensor_dict_new();
    int rc = d ? 0 : DG_ENOMEM;
    for (int i = 0; !rc && i < dg_optimizer_state_count(opt); i++)
        rc = dg_tensor_dict_set(d, dg_optimizer_state_name(opt, i), dg_optimizer_state_tensor(opt, i));
    if (!rc) rc = dg_save_safetensors(path, d);
    dg_tensor_dict_free(d);
    return rc;
}

/* Why entry (name, t) cannot load into opt, or NULL when it can: the name against the
 * optimizer's groups, parameters and the slots its settings keep, then the value's shape. */
static const char *check_entry(const dg_optimizer *opt, const char *name, const dg_tensor *t, char *why, size_t cap) {
    int g, i, e;
    dg_error_saved before;
    dg_error_save(&before);
    bool lbfgs_entry = opt->lbfgs && strcmp(name, "lr") != 0;
    if (lbfgs_entry ? dg_lbfgs_load_state((dg_optimizer *)opt, name, t, true) != 0
                    : dg_opt_parse_state_name(opt, name, &g, &i, &e) != 0) {
        snprintf(why, cap, "%s", dg_last_error());
        char *at = strrchr(why, '(');   /* the parser's " (file:line)": the caller adds its own */
        if (at && at > why && at[-1] == ' ' && strstr(at, ".c:")) at[-1] = '\0';
        dg_error_restore(&before);
        return why;
    }
    if (lbfgs_entry) return NULL;
    if (g >= 0) return dg_numel(t) == 1 ? NULL : "a group's lr must hold one value";
    if (e != DG_OPT_ENT_MASTER && opt->entry[e].kind != DG_ENT_BUF) {
        snprintf(why, cap, "%s must hold one value", opt->entry[e].name);
        return dg_numel(t) == 1 ? NULL : why;
    }
    if (e == DG_OPT_ENT_MASTER && !dg_dtype_is_float(dg_dtype_of(t))) {
        snprintf(why, cap, "master weights must be a float tensor, not %s", dg_dtype_name(dg_dtype_of(t)));
        return why;
    }
    dg_tensor *p = dg_optimizer_param(opt, i);
    bool same = dg_ndim(p) == dg_ndim(t);
    for (int k = 0; same && k < dg_ndim(p); k++) same = dg_dim(p, k) == dg_dim(t, k);
    if (!same) {
        char a[64], b[64];
        snprintf(why, cap, "shape %s, parameter %d is %s", dg_shape_str(t, a, sizeof a), i, dg_shape_str(p, b, sizeof b));
        return why;
    }
    return NULL;
}

int dg_optimizer_load_dict(dg_optimizer *opt, const dg_tensor_dict *d) {
    DG_CHECK_HANDLE_INT(opt, "optimizer_load: optimizer is NULL");
    DG_CHECK_HANDLE_INT(d, "optimizer_load: state is NULL");
    char why[256];
    for (int i = 0; i < dg_tensor_dict_size(d); i++) {
        const char *bad = check_entry(opt, dg_tensor_dict_name(d, i), dg_tensor_dict_tensor(d, i), why, sizeof why);
        if (bad) {
            DG_ERR(DG_EFORMAT, "optimizer_load (%s): entry '%s': %s; nothing was loaded", dg_optimizer_name(opt), dg_tensor_dict_name(d, i), bad);
            return DG_EFORMAT;
        }
    }
    for (int i = 0; i < dg_tensor_dict_size(d); i++) {
        int rc = dg_optimizer_load_state(opt, dg_tensor_dict_name(d, i), dg_tensor_dict_tensor(d, i));
        if (rc) return rc;
    }
    /* a set without a half parameter's master weights (saved before it stepped, or by an older
     * version) leaves none: the next step makes them from the parameter as loaded, never from
     * the values of before the load */
    for (int i = 0; i < opt->n; i++)
        if (opt->state[i].master && !dg_tensor_dict_get(d, opt->state[i].master_name)) {
            dg_tensor_free(opt->state[i].master);
            opt->state[i].master = NULL;
        }
    return 0;
}

int dg_optimizer_load(dg_optimizer *opt, const char *path) {
    DG_CHECK_HANDLE_INT(opt, "optimizer_load: optimizer is NULL");
    DG_CHECK_INT(path, "optimizer_load: path is NULL");
    dg_tensor_dict *d = dg_load_safetensors(path);
    if (!d) return dg_last_status() ? dg_last_status() : DG_EIO;
    int rc = dg_optimizer_load_dict(opt, d);
    dg_tensor_dict_free(d);
    return rc;
}
