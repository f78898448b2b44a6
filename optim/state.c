/* optim/state.c — an optimizer's state as named tensors ("lr", "<i>.exp_avg", "<i>.step", …)
 * for checkpoints: listing by index, and loading one entry by name with shape checks. */
#include "optim_internal.h"
#include <errno.h>
#include <math.h>

/* Entry k of the list: "lr" first, then each parameter's slots and step, in parameter order. */
static bool locate(const dg_optimizer *o, int k, int *param, int *slot) {
    if (k == 0) { *param = -1; *slot = 0; return true; }
    k--;
    int per = o->info->n_slots + (o->info->has_step ? 1 : 0);
    for (int i = 0; i < o->n; i++) {
        if (!o->state[i].has) continue;
        if (k < per) { *param = i; *slot = k; return true; }
        k -= per;
    }
    return false;
}

int dg_optimizer_state_count(const dg_optimizer *o) {
    DG_CHECK_HANDLE_INT(o, "optimizer_state_count: optimizer is NULL");
    int per = o->info->n_slots + (o->info->has_step ? 1 : 0), c = 1;
    for (int i = 0; i < o->n; i++) c += o->state[i].has ? per : 0;
    return c;
}

const char *dg_optimizer_state_name(const dg_optimizer *o, int k) {
    DG_CHECK_HANDLE(o, "optimizer_state_name: optimizer is NULL");
    int i, s;
    DG_CHECK(k >= 0 && locate(o, k, &i, &s), "%s: state index %d out of range [0, %d)", o->info->name, k,
             dg_optimizer_state_count(o));
    return i < 0 ? "lr" : o->state[i].name[s];
}

dg_tensor *dg_optimizer_state_tensor(const dg_optimizer *o, int k) {
    DG_CHECK_HANDLE(o, "optimizer_state_tensor: optimizer is NULL");
    int i, s;
    DG_CHECK(k >= 0 && locate(o, k, &i, &s), "%s: state index %d out of range [0, %d)", o->info->name, k,
             dg_optimizer_state_count(o));
    if (i < 0) return o->lr_t;
    return s < o->info->n_slots ? o->state[i].buf[s] : o->state[i].step_t;
}

/* Parses "<i>.<slot>" against this kind's slots: param index, slot (n_slots = "step"). */
static int parse_name(const dg_optimizer *o, const char *name, int *param, int *slot) {
    const char *nm = o->info->name;
    if (strcmp(name, "lr") == 0) { *param = -1; *slot = 0; return 0; }
    char *end;
    errno = 0;
    long i = strtol(name, &end, 10);
    DG_CHECK_INT(end != name && *end == '.' && name[0] >= '0' && name[0] <= '9' && errno == 0,
                 "%s: load_state: unknown state name '%s'", nm, name);
    DG_CHECK_INT(i >= 0 && i < o->n, "%s: load_state: '%s' names parameter %ld; the optimizer has %d", nm, name, i, o->n);
    const char *sl = end + 1;
    for (int k = 0; k < o->info->n_slots; k++)
        if (strcmp(sl, o->info->slot[k]) == 0) { *param = (int)i; *slot = k; return 0; }
    if (o->info->has_step && strcmp(sl, "step") == 0) { *param = (int)i; *slot = o->info->n_slots; return 0; }
    DG_ERR(DG_EINVAL, "%s: load_state: '%s': %s has no state '%s'", nm, name, nm, sl);
    return DG_EINVAL;
}

/* value as a host double when it has one element; NAN and an error otherwise. */
static int scalar_of(const dg_optimizer *o, const char *name, const dg_tensor *v, double *out) {
    DG_CHECK_INT(dg_numel(v) == 1, "%s: load_state: '%s' must have one element, got shape %s", o->info->name, name,
                 dg_shape_str(v, (char[96]){0}, 96));
    *out = dg_item(v);
    return 0;
}

int dg_optimizer_load_state(dg_optimizer *o, const char *name, const dg_tensor *value) {
    DG_CHECK_HANDLE_INT(o, "optimizer_load_state: optimizer is NULL");
    const char *nm = o->info->name;
    DG_CHECK_INT(name, "%s: load_state: name is NULL", nm);
    char what[160];
    snprintf(what, sizeof what, "tensor for '%s'", name);
    int bad = dg_tensor_check(nm, what, value);
    if (bad) return bad;
    int i, s, rc = parse_name(o, name, &i, &s);
    if (rc) return rc;
    double x;
    if (i < 0) {   /* lr */
        if ((rc = scalar_of(o, name, value, &x))) return rc;
        return dg_optimizer_set_lr(o, x);
    }
    if (s == o->info->n_slots) {   /* step */
        if ((rc = scalar_of(o, name, value, &x))) return rc;
        DG_CHECK_INT(x >= 0 && x == floor(x) && x < 9.0e15, "%s: load_state: '%s' = %g is not a step count", nm, name, x);
        if ((rc = dg_opt_ensure_state(o, i))) return rc;
        o->state[i].step = (int64_t)x;
        return dg_fill_(o->state[i].step_t, x);
    }
    const dg_tensor *p = o->params[i];
    char a[96], b[96];
    dg_shape_str(value, a, sizeof a);
    dg_shape_str(p, b, sizeof b);
    DG_CHECK_INT(strcmp(a, b) == 0, "%s: load_state: '%s' has shape %s; parameter %d is %s", nm, name, a, i, b);
    DG_CHECK_INT(dg_dtype_is_float(dg_dtype_of(value)), "%s: load_state: '%s' is %s; expects a float tensor", nm, name,
                 dg_dtype_name(dg_dtype_of(value)));
    if ((rc = dg_opt_ensure_state(o, i))) return rc;
    dg_tensor *dst = o->state[i].buf[s];
    dg_device dv = dg_device_of(value), dd = dg_device_of(dst);
    dg_scope *sc = dg_scope_begin();
    const dg_tensor *src = value;
    if (dv.type != dd.type || dv.index != dd.index) src = dg_to_device(value, dd);
    rc = src ? dg_copy_(dst, src) : (dg_last_status() ? dg_last_status() : DG_EDEVICE);
    dg_scope_end(sc);
    if (rc == 0) o->state[i].fresh = false;
    return rc;
}
