/* optim/checkpoint.c — an optimizer's state ("lr", "<i>.<slot>", "<i>.step") to and from
 * safetensors. Every entry is checked against the optimizer's kind and parameters before the
 * first one is loaded, so a bad file changes nothing. */
#include "optim_internal.h"
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

static bool slot_allowed(const char *kind, const char *slot) {
    if (strcmp(slot, "momentum_buffer") == 0) return strcmp(kind, "momentum") == 0;
    if (strcmp(slot, "sum") == 0) return strcmp(kind, "adagrad") == 0;
    if (strcmp(slot, "exp_avg") == 0 || strcmp(slot, "exp_avg_sq") == 0) return strncmp(kind, "adam", 4) == 0;
    if (strcmp(slot, "step") == 0) return strcmp(kind, "adagrad") == 0 || strncmp(kind, "adam", 4) == 0;
    return false;
}

/* Why entry (name, t) cannot load into opt, or NULL when it can. */
static const char *check_entry(const dg_optimizer *opt, const char *name, const dg_tensor *t, char *why, size_t cap) {
    if (strcmp(name, "lr") == 0) return dg_numel(t) == 1 ? NULL : "lr must hold one value";
    char *end;
    errno = 0;
    long idx = strtol(name, &end, 10);
    if (end == name || *end != '.' || errno || idx < 0 || idx >= dg_optimizer_num_params(opt)) {
        snprintf(why, cap, "not 'lr' nor '<param index>.<slot>' with an index below %d", dg_optimizer_num_params(opt));
        return why;
    }
    const char *slot = end + 1;
    if (!slot_allowed(dg_optimizer_name(opt), slot)) {
        snprintf(why, cap, "slot '%s' does not belong to %s", slot, dg_optimizer_name(opt));
        return why;
    }
    if (strcmp(slot, "step") == 0) return dg_numel(t) == 1 ? NULL : "step must hold one value";
    dg_tensor *p = dg_optimizer_param(opt, (int)idx);
    bool same = dg_ndim(p) == dg_ndim(t);
    for (int k = 0; same && k < dg_ndim(p); k++) same = dg_dim(p, k) == dg_dim(t, k);
    if (!same) {
        char a[64], b[64];
        snprintf(why, cap, "shape %s, parameter %ld is %s", dg_shape_str(t, a, sizeof a), idx, dg_shape_str(p, b, sizeof b));
        return why;
    }
    return NULL;
}

int dg_optimizer_load_dict(dg_optimizer *opt, const dg_tensor_dict *d) {
    DG_CHECK_HANDLE_INT(opt, "optimizer_load: optimizer is NULL");
    DG_CHECK_HANDLE_INT(d, "optimizer_load: state is NULL");
    char why[160];
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
