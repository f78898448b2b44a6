/* optim/state.c — an optimizer's state as named tensors ("lr", "param_groups.<g>.lr",
 * "<i>.exp_avg", "<i>.step", …) for checkpoints: listing by index, and loading one entry by
 * name with shape checks. */
#include "lbfgs_internal.h"
#include <errno.h>
#include <math.h>

/* Entry k of the list: each group's lr first ("lr" is group 0's), then each parameter's entries
 * (o->entry: buffers, step, mu_product), in parameter order, then the master weights of the half
 * parameters that have them (*ent = DG_OPT_ENT_MASTER). *group >= 0 for an lr. */
static bool locate(const dg_optimizer *o, int k, int *group, int *param, int *ent) {
    *group = *param = -1;
    *ent = 0;
    if (k < o->n_groups) { *group = k; return true; }
    k -= o->n_groups;
    for (int i = 0; i < o->n; i++) {
        if (!o->state[i].has) continue;
        if (k < o->n_entries) { *param = i; *ent = k; return true; }
        k -= o->n_entries;
    }
    for (int i = 0; i < o->n; i++) {
        if (!o->state[i].master) continue;
        if (k == 0) { *param = i; *ent = DG_OPT_ENT_MASTER; return true; }
        k--;
    }
    return false;
}

int dg_optimizer_state_count(const dg_optimizer *o) {
    DG_CHECK_HANDLE_INT(o, "optimizer_state_count: optimizer is NULL");
    int c = o->n_groups;
    if (o->lbfgs) return c + dg_lbfgs_state_count(o);
    for (int i = 0; i < o->n; i++) c += (o->state[i].has ? o->n_entries : 0) + (o->state[i].master ? 1 : 0);
    return c;
}

const char *dg_optimizer_state_name(const dg_optimizer *o, int k) {
    DG_CHECK_HANDLE(o, "optimizer_state_name: optimizer is NULL");
    if (o->lbfgs && k >= o->n_groups) return dg_lbfgs_state_name(o, k - o->n_groups);
    int g, i, e;
    DG_CHECK(k >= 0 && locate(o, k, &g, &i, &e), "%s: state index %d out of range [0, %d)", o->info->name, k,
             dg_optimizer_state_count(o));
    return g >= 0 ? o->groups[g].lr_name : e == DG_OPT_ENT_MASTER ? o->state[i].master_name : o->state[i].name[e];
}

dg_tensor *dg_optimizer_state_tensor(const dg_optimizer *o, int k) {
    DG_CHECK_HANDLE(o, "optimizer_state_tensor: optimizer is NULL");
    if (o->lbfgs && k >= o->n_groups) return dg_lbfgs_state_tensor(o, k - o->n_groups);
    int g, i, e;
    DG_CHECK(k >= 0 && locate(o, k, &g, &i, &e), "%s: state index %d out of range [0, %d)", o->info->name, k,
             dg_optimizer_state_count(o));
    if (g >= 0) return o->groups[g].lr_t;
    if (e == DG_OPT_ENT_MASTER) return o->state[i].master;
    const dg_opt_entry *en = &o->entry[e];
    return en->kind == DG_ENT_BUF ? o->state[i].buf[en->slot] : en->kind == DG_ENT_STEP ? o->state[i].step_t : o->state[i].mu_t;
}

/* Parses a state name: a group's lr (*group >= 0), or "<i>.<entry>" against this optimizer's
 * entries (*param, *ent). DG_EINVAL naming what is wrong otherwise. */
int dg_opt_parse_state_name(const dg_optimizer *o, const char *name, int *group, int *param, int *ent) {
    const char *nm = o->info->name;
    *group = *param = -1;
    *ent = 0;
    for (int g = 0; g < o->n_groups; g++)
        if (strcmp(name, o->groups[g].lr_name) == 0) { *group = g; return 0; }
    if (strncmp(name, "param_groups.", 13) == 0) {
        DG_ERR(DG_EINVAL, "%s: load_state: '%s' is no group's lr here (group 0's is 'lr'; the optimizer has %d param "
               "group%s)", nm, name, o->n_groups, o->n_groups == 1 ? "" : "s");
        return DG_EINVAL;
    }
    char *end;
    errno = 0;
    long i = strtol(name, &end, 10);
    DG_CHECK_INT(end != name && *end == '.' && name[0] >= '0' && name[0] <= '9' && errno == 0,
                 "%s: load_state: unknown state name '%s'", nm, name);
    DG_CHECK_INT(i >= 0 && i < o->n, "%s: load_state: '%s' names parameter %ld; the optimizer has %d", nm, name, i, o->n);
    const char *sl = end + 1;
    if (strcmp(sl, "master_weight") == 0) {
        dg_dtype pd = dg_dtype_of(o->params[i]);
        DG_CHECK_INT(pd == DG_F16 || pd == DG_BF16, "%s: load_state: '%s': parameter %ld is %s; only float16/bfloat16 "
                     "parameters keep float32 master weights", nm, name, i, dg_dtype_name(pd));
        *param = (int)i;
        *ent = DG_OPT_ENT_MASTER;
        return 0;
    }
    for (int e = 0; e < o->n_entries; e++)
        if (strcmp(sl, o->entry[e].name) == 0) { *param = (int)i; *ent = e; return 0; }
    for (int k = 0; k < o->info->n_slots; k++)
        if (!o->slot_on[k] && strcmp(sl, o->info->slot[k]) == 0) {
            DG_ERR(DG_EINVAL, "%s: load_state: '%s': this %s keeps no '%s' (its settings: %s)", nm, name, nm, sl,
                   o->kind == DG_OPT_RMSPROP ? (k == 1 ? "momentum 0" : "not centered") : "amsgrad off");
            return DG_EINVAL;
        }
    DG_ERR(DG_EINVAL, "%s: load_state: '%s': %s has no state '%s'", nm, name, nm, sl);
    return DG_EINVAL;
}

/* value as a host double when it has one element; an error otherwise. */
static int scalar_of(const dg_optimizer *o, const char *name, const dg_tensor *v, double *out) {
    DG_CHECK_INT(dg_numel(v) == 1, "%s: load_state: '%s' must have one element, got shape %s", o->info->name, name,
                 dg_shape_str(v, (char[96]){0}, 96));
    *out = dg_item(v);
    return 0;
}

/* A buffer-like entry for parameter i: the parameter's shape, a float dtype. */
static int check_like_param(const dg_optimizer *o, int i, const char *name, const dg_tensor *value) {
    const char *nm = o->info->name;
    char a[96], b[96];
    dg_shape_str(value, a, sizeof a);
    dg_shape_str(o->params[i], b, sizeof b);
    DG_CHECK_INT(strcmp(a, b) == 0, "%s: load_state: '%s' has shape %s; parameter %d is %s", nm, name, a, i, b);
    DG_CHECK_INT(dg_dtype_is_float(dg_dtype_of(value)), "%s: load_state: '%s' is %s; expects a float tensor", nm, name,
                 dg_dtype_name(dg_dtype_of(value)));
    return 0;
}

/* "<i>.master_weight": the value, in float32 on the parameter's device, becomes the copy the
 * rule updates (made here when the parameter has taken no step yet). */
static int load_master(dg_optimizer *o, int i, const char *name, const dg_tensor *value) {
    const dg_tensor *p = o->params[i];
    int bad = check_like_param(o, i, name, value);
    if (bad) return bad;
    dg_scope *sc = dg_scope_begin();
    dg_no_grad_begin();   /* the copy is the optimizer's, outside any graph (as the step makes it) */
    dg_tensor *m = o->state[i].master;
    bool made = false;
    if (!m) {
        m = dg_keep(dg_cast(p, DG_F32));
        made = m != NULL;
    }
    dg_device dv = dg_device_of(value), dd = m ? dg_device_of(m) : dv;
    const dg_tensor *src = value;
    if (m && (dv.type != dd.type || dv.index != dd.index)) src = dg_to_device(value, dd);
    int rc = m && src ? dg_copy_(m, src) : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
    dg_no_grad_end();
    dg_scope_end(sc);
    if (rc && made) dg_tensor_free(m);
    else if (!rc) o->state[i].master = m;
    return rc;
}

int dg_optimizer_load_state(dg_optimizer *o, const char *name, const dg_tensor *value) {
    DG_CHECK_HANDLE_INT(o, "optimizer_load_state: optimizer is NULL");
    const char *nm = o->info->name;
    DG_CHECK_INT(name, "%s: load_state: name is NULL", nm);
    char what[160];
    snprintf(what, sizeof what, "tensor for '%s'", name);
    int bad = dg_tensor_check(nm, what, value);
    if (bad) return bad;
    if (o->lbfgs && strcmp(name, o->groups[0].lr_name) != 0) return dg_lbfgs_load_state(o, name, value, false);
    int g, i, e, rc = dg_opt_parse_state_name(o, name, &g, &i, &e);
    if (rc) return rc;
    double x;
    if (g >= 0) {   /* a group's lr: the one the next step uses; the group's base lr stays */
        if ((rc = scalar_of(o, name, value, &x))) return rc;
        return dg_opt_set_current_lr(o, g, x);
    }
    if (e == DG_OPT_ENT_MASTER) return load_master(o, i, name, value);
    const dg_opt_entry *en = &o->entry[e];
    if (en->kind == DG_ENT_STEP) {
        if ((rc = scalar_of(o, name, value, &x))) return rc;
        DG_CHECK_INT(x >= 0 && x == floor(x) && x < 9.0e15, "%s: load_state: '%s' = %g is not a step count", nm, name, x);
        if ((rc = dg_opt_ensure_state(o, i))) return rc;
        o->state[i].step = (int64_t)x;
        return dg_fill_(o->state[i].step_t, x);
    }
    if (en->kind == DG_ENT_MU) {
        if ((rc = scalar_of(o, name, value, &x))) return rc;
        /* a product of factors in (0, 1]: anything else is another file's number */
        DG_CHECK_INT(x > 0 && x <= 1, "%s: load_state: '%s' = %g is not a product of momentum factors (in (0, 1])", nm,
                     name, x);
        if ((rc = dg_opt_ensure_state(o, i))) return rc;
        o->state[i].mu_product = (float)x;
        return dg_fill_(o->state[i].mu_t, o->state[i].mu_product);
    }
    if ((rc = check_like_param(o, i, name, value))) return rc;
    if ((rc = dg_opt_ensure_state(o, i))) return rc;
    dg_tensor *dst = o->state[i].buf[en->slot];
    dg_device dv = dg_device_of(value), dd = dg_device_of(dst);
    dg_scope *sc = dg_scope_begin();
    const dg_tensor *src = value;
    if (dv.type != dd.type || dv.index != dd.index) src = dg_to_device(value, dd);
    rc = src ? dg_copy_(dst, src) : (dg_last_status() ? dg_last_status() : DG_EDEVICE);
    dg_scope_end(sc);
    if (rc == 0) o->state[i].fresh = false;
    return rc;
}
