/* optim/optimizer.c — what every optimizer shares: parameter validation, parameter groups,
 * lifetime, the step driver (clip, then one fused update per group, device and dtype over the
 * parameters that have a gradient, in no-grad mode), clearing gradients, the learning rates,
 * and the small tensor helpers the update rules use. */
#include "optim_internal.h"
#include <math.h>

dg_tensor *dg_opt_cpu_scalar(double v, dg_dtype dt) {
    dg_tensor *t = dg_keep(dg_scalar(v, dt));
    if (t && dg_device_of(t).type != DG_CPU) {
        dg_tensor *c = dg_keep(dg_to_device(t, dg_cpu()));
        dg_tensor_free(t);
        t = c;
    }
    return t;
}

/* Checks params[0..n) for a group of `nm`: non-NULL live leaves of a float dtype that require
 * grad, none twice and none already in o (o may be NULL). `base` numbers them in messages. */
static int check_params(const char *nm, const dg_optimizer *o, dg_tensor *const *params, int n, int base) {
    for (int i = 0; i < n; i++) {
        const dg_tensor *p = params[i];
        char sh[96];
        int k = base + i;
        if (!p) { DG_PROPAGATE(DG_EINVAL, "%s: parameter %d is NULL", nm, k); return DG_EINVAL; }
        snprintf(sh, sizeof sh, "parameter %d", k);
        int rc = dg_tensor_check(nm, sh, p);
        if (rc) return rc;
        dg_shape_str(p, sh, sizeof sh);
        DG_CHECK_INT(dg_is_leaf(p), "%s: parameter %d %s is not a leaf (made by %s); pass the tensors being trained",
                     nm, k, sh, dg_grad_fn_name(p) ? dg_grad_fn_name(p) : "an op");
        DG_CHECK_INT(dg_dtype_is_float(dg_dtype_of(p)), "%s: parameter %d %s is %s; expects a float tensor",
                     nm, k, sh, dg_dtype_name(dg_dtype_of(p)));
        DG_CHECK_INT(dg_requires_grad(p), "%s: parameter %d %s does not require grad", nm, k, sh);
        for (int j = 0; j < i; j++)
            DG_CHECK_INT(params[j] != p, "%s: parameter %d is parameter %d again", nm, k, base + j);
        for (int j = 0; o && j < o->n; j++)
            DG_CHECK_INT(o->params[j] != p, "%s: parameter %d is parameter %d again (of group %d; a parameter belongs to "
                         "one group)", nm, k, j, o->group_of[j]);
    }
    return 0;
}

static int check_group_values(const char *nm, double lr, double weight_decay) {
    DG_CHECK_INT(lr >= 0 && isfinite(lr), "%s: lr must be >= 0, got %g", nm, lr);
    DG_CHECK_INT(weight_decay >= 0 && isfinite(weight_decay), "%s: weight_decay must be >= 0, got %g", nm, weight_decay);
    return 0;
}

/* Room for n more parameters and one more group; the new slots are zeroed. */
static int grow(dg_optimizer *o, int n) {
    if (o->n + n > o->cap) {
        int cap = o->cap * 2 > o->n + n ? o->cap * 2 : o->n + n;
        dg_tensor **p = realloc(o->params, sizeof *p * (size_t)cap);
        if (p) o->params = p;
        int *gi = p ? realloc(o->group_of, sizeof *gi * (size_t)cap) : NULL;
        if (gi) o->group_of = gi;
        dg_opt_state *st = gi ? realloc(o->state, sizeof *st * (size_t)cap) : NULL;
        if (!st) return DG_ENOMEM;
        o->state = st;
        memset(st + o->cap, 0, sizeof *st * (size_t)(cap - o->cap));
        o->cap = cap;
    }
    dg_opt_group *g = realloc(o->groups, sizeof *g * (size_t)(o->n_groups + 1));
    if (!g) return DG_ENOMEM;
    o->groups = g;
    memset(&g[o->n_groups], 0, sizeof *g);
    return 0;
}

/* Appends a group of already checked parameters. */
static int add_group(dg_optimizer *o, dg_tensor *const *params, int n, double lr, double weight_decay) {
    const char *nm = o->info->name;
    if (grow(o, n) != 0) { DG_ERR(DG_ENOMEM, "%s: out of memory", nm); return DG_ENOMEM; }
    int gi = o->n_groups;
    dg_opt_group *g = &o->groups[gi];
    uint64_t errs = dg_error_count();
    g->lr_t = dg_opt_cpu_scalar(lr, DG_F64);
    if (!g->lr_t) {
        if (!dg_error_since(errs)) DG_ERR(DG_ENOMEM, "%s: out of memory", nm);
        return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    g->first = o->n;
    g->n = n;
    g->lr = g->base_lr = lr;
    g->weight_decay = weight_decay;
    if (gi == 0) snprintf(g->lr_name, sizeof g->lr_name, "lr");
    else snprintf(g->lr_name, sizeof g->lr_name, "param_groups.%d.lr", gi);
    for (int i = 0; i < n; i++) {
        int k = o->n + i;
        o->params[k] = params[i];
        o->group_of[k] = gi;
        memset(&o->state[k], 0, sizeof o->state[k]);
        for (int e = 0; e < o->n_entries; e++)
            snprintf(o->state[k].name[e], sizeof o->state[k].name[e], "%d.%s", k, o->entry[e].name);
        snprintf(o->state[k].master_name, sizeof o->state[k].master_name, "%d.master_weight", k);
    }
    o->n_groups++;
    o->n += n;
    return 0;
}

dg_optimizer *dg_opt_new(dg_opt_kind kind, const dg_opt_kind_info *info, dg_tensor *const *params, int n,
                         double lr, double weight_decay, double grad_clip_norm) {
    const char *nm = info->name;
    DG_CHECK(params, "%s: params is NULL", nm);   /* the array is the caller's own, not a result */
    DG_CHECK(n > 0, "%s: no parameters (n = %d)", nm, n);
    if (check_group_values(nm, lr, weight_decay) != 0) return NULL;
    DG_CHECK(grad_clip_norm >= 0, "%s: grad_clip_norm must be >= 0 (INFINITY: no clipping), got %g", nm, grad_clip_norm);
    if (check_params(nm, NULL, params, n, 0) != 0) return NULL;
    dg_optimizer *o = calloc(1, sizeof *o);
    DG_CHECK(o, "%s: out of memory", nm);
    o->kind = kind;
    o->info = info;
    for (int k = 0; k < info->n_slots; k++) o->slot_on[k] = true;
    o->default_lr = lr;
    o->default_weight_decay = weight_decay;
    o->grad_clip_norm = grad_clip_norm;
    /* the group is added by dg_opt_finish, once the constructor has settled the slots */
    o->params = malloc(sizeof *o->params * (size_t)n);
    o->group_of = malloc(sizeof *o->group_of * (size_t)n);
    o->state = calloc((size_t)n, sizeof *o->state);
    if (!o->params || !o->group_of || !o->state) {
        dg_optimizer_free(o);
        DG_ERR(DG_ENOMEM, "%s: out of memory", nm);
        return NULL;
    }
    o->cap = n;
    memcpy(o->params, params, sizeof *params * (size_t)n);   /* held until dg_opt_finish makes the group */
    o->n = n;
    return o;
}

dg_optimizer *dg_opt_finish(dg_optimizer *o) {
    if (!o) return NULL;
    const dg_opt_kind_info *info = o->info;
    int e = 0;
    for (int k = 0; k < info->n_slots; k++)
        if (o->slot_on[k]) o->entry[e++] = (dg_opt_entry){ DG_ENT_BUF, k, info->slot[k] };
    if (info->has_step) o->entry[e++] = (dg_opt_entry){ DG_ENT_STEP, 0, "step" };
    if (info->has_mu_product) o->entry[e++] = (dg_opt_entry){ DG_ENT_MU, 0, "mu_product" };
    o->n_entries = e;
    int n = o->n;
    o->n = 0;   /* the parameters stored by dg_opt_new become group 0 */
    dg_tensor **params = malloc(sizeof *params * (size_t)n);
    if (!params) { o->n = 0; dg_optimizer_free(o); DG_ERR(DG_ENOMEM, "%s: out of memory", info->name); return NULL; }
    memcpy(params, o->params, sizeof *params * (size_t)n);
    int rc = add_group(o, params, n, o->default_lr, o->default_weight_decay);
    free(params);
    for (int i = 0; rc == 0 && info->state_at_construction && i < o->n; i++) rc = dg_opt_ensure_state(o, i);
    if (rc) { dg_optimizer_free(o); return NULL; }
    return o;
}

dg_param_group_params dg_param_group_default_params(void) {
    return (dg_param_group_params){ .params_tag = DG_PARAMS_TAG, .lr = DG_OPTIMIZER_DEFAULT, .weight_decay = DG_OPTIMIZER_DEFAULT };
}

int dg_optimizer_add_param_group(dg_optimizer *o, dg_tensor *const *params, int n, dg_param_group_params p) {
    DG_CHECK_PARAMS_INT("optimizer_add_param_group", p, dg_param_group_default_params);
    DG_CHECK_HANDLE_INT(o, "optimizer_add_param_group: optimizer is NULL");
    const char *nm = o->info->name;
    DG_CHECK_INT(!o->lbfgs, "lbfgs: add_param_group: LBFGS keeps one parameter group (as torch.optim.LBFGS); pass every "
                 "parameter to dg_lbfgs");
    DG_CHECK_INT(params, "%s: add_param_group: params is NULL", nm);
    DG_CHECK_INT(n > 0, "%s: add_param_group: no parameters (n = %d)", nm, n);
    double lr = p.lr == DG_OPTIMIZER_DEFAULT ? o->default_lr : p.lr;
    double wd = p.weight_decay == DG_OPTIMIZER_DEFAULT ? o->default_weight_decay : p.weight_decay;
    char what[64];
    snprintf(what, sizeof what, "%s: param group %d", nm, o->n_groups);
    int rc = check_group_values(what, lr, wd);
    if (!rc) rc = check_params(nm, o, params, n, o->n);
    if (!rc) rc = add_group(o, params, n, lr, wd);
    for (int i = o->n - n; rc == 0 && o->info->state_at_construction && i < o->n; i++) rc = dg_opt_ensure_state(o, i);
    return rc;
}

int dg_optimizer_num_groups(const dg_optimizer *o) {
    DG_CHECK_HANDLE_INT(o, "optimizer_num_groups: optimizer is NULL");
    return o->n_groups;
}

static bool half(const dg_tensor *p) { dg_dtype d = dg_dtype_of(p); return d == DG_F16 || d == DG_BF16; }
/* the dtype the update rule runs in for parameter p: f32 for a half parameter (its master copy) */
static dg_dtype rule_dtype(const dg_tensor *p) { return half(p) ? DG_F32 : dg_dtype_of(p); }

int dg_opt_ensure_state(dg_optimizer *o, int i) {
    dg_opt_state *s = &o->state[i];
    if (s->has) return 0;
    dg_tensor *buf[DG_OPT_MAX_SLOTS] = { 0 }, *step_t = NULL, *mu_t = NULL;
    bool ok = true;
    uint64_t errs = dg_error_count();
    for (int k = 0; k < o->info->n_slots && ok; k++) {
        if (!o->slot_on[k]) continue;
        /* a half parameter's buffers are f32, next to its f32 master weights */
        dg_tensor *z = dg_zeros_like(o->params[i]);
        buf[k] = dg_keep(z && half(o->params[i]) ? dg_cast(z, DG_F32) : z);
        if (z != buf[k]) dg_tensor_free(z);
        ok = buf[k] && (o->init_acc == 0 || dg_fill_(buf[k], o->init_acc) == 0);
    }
    if (ok && o->info->has_step) ok = (step_t = dg_opt_cpu_scalar(0, DG_I64)) != NULL;
    if (ok && o->info->has_mu_product) ok = (mu_t = dg_opt_cpu_scalar(1, DG_F32)) != NULL;
    if (!ok) {
        for (int k = 0; k < DG_OPT_MAX_SLOTS; k++) dg_tensor_free(buf[k]);
        dg_tensor_free(step_t);
        dg_tensor_free(mu_t);
        if (!dg_error_since(errs)) DG_ERR(DG_ENOMEM, "%s: cannot make the state of parameter %d", o->info->name, i);
        return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    memcpy(s->buf, buf, sizeof buf);
    s->step_t = step_t;
    s->mu_t = mu_t;
    s->step = 0;
    s->mu_product = 1;
    s->has = true;
    s->fresh = true;
    return 0;
}

void dg_optimizer_free(dg_optimizer *o) {
    if (!o) return;
    if (o->state)
        for (int i = 0; i < o->n; i++) {
            for (int k = 0; k < DG_OPT_MAX_SLOTS; k++) dg_tensor_free(o->state[i].buf[k]);
            dg_tensor_free(o->state[i].master);
            dg_tensor_free(o->state[i].step_t);
            dg_tensor_free(o->state[i].mu_t);
        }
    for (int g = 0; o->groups && g < o->n_groups; g++) dg_tensor_free(o->groups[g].lr_t);
    dg_lbfgs_free(o->lbfgs);
    free(o->groups);
    free(o->state);
    free(o->group_of);
    free(o->params);
    free(o);
}

static bool same_device(dg_device a, dg_device b) { return a.type == b.type && a.index == b.index; }

/* Whether parameter i's step may touch only the rows of its row gradient (a sparse embedding's):
 * where the rule leaves an element with a zero gradient exactly as it is — SGD without momentum
 * and Adagrad, both without weight decay, on a float parameter (torch's sparse SGD and Adagrad).
 * The result is the dense step's, bit for bit; the cost is the rows', not the table's. */
static bool steps_rows(const dg_optimizer *o, int i) {
    const dg_tensor *p = o->params[i];
    dg_update_kind r = o->info->rule;
    return (r == DG_UPD_SGD || r == DG_UPD_ADAGRAD) && o->groups[o->group_of[i]].weight_decay == 0 && !half(p) &&
           dg_is_contiguous(p) && dg_ndim(p) >= 2 && dg_grad_is_rows(p);
}

/* That step: one update tensor per row, the rule's scalars prepared once for the parameter. */
static int step_rows(dg_optimizer *o, int i, const dg_update_params *u0) {
    dg_tensor *p = o->params[i], *ids = NULL, *rows = NULL;
    int64_t k = dg_sparse_grad(p, &ids, &rows);
    int64_t width = dg_numel(p) / dg_shape_of(p).d[0], vocab = dg_shape_of(p).d[0];
    int rc = o->n_entries > 0 ? dg_opt_ensure_state(o, i) : 0;
    if (rc) return rc;
    if (!dg_is_contiguous(rows) && !(rows = dg_contiguous(rows))) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    int64_t *id = malloc(sizeof(int64_t) * (size_t)(k ? k : 1));
    dg_update_tensor *t = malloc(sizeof *t * (size_t)(k ? k : 1));
    if (!id || !t || dg_to_host(ids, id, sizeof(int64_t) * (size_t)k)) {
        free(id), free(t);
        return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    dg_opt_state *s = &o->state[i];
    size_t row_bytes = (size_t)width * dg_dtype_size(dg_dtype_of(p));
    char *pp = dg_tensor_ptr(p), *gp = dg_tensor_ptr(rows), *sp = s->buf[0] ? dg_tensor_ptr(s->buf[0]) : NULL;
    dg_update_tensor one = { 0 };
    o->info->prepare(o, i, &one);   /* once: it advances the parameter's step count */
    for (int64_t r = 0; r < k && !rc; r++) {
        if (id[r] < 0 || id[r] >= vocab) {
            DG_ERR(DG_EINVAL, "%s: parameter %d's row gradient names row %lld of %lld", o->info->name, i, (long long)id[r],
                   (long long)vocab);
            rc = DG_EINVAL;
            break;
        }
        t[r] = one;
        t[r].p = pp + (size_t)id[r] * row_bytes;
        t[r].g = gp + (size_t)r * row_bytes;
        t[r].s0 = sp ? sp + (size_t)id[r] * row_bytes : NULL;
        t[r].n = width;
    }
    dg_update_params u = *u0;
    u.lr = o->groups[o->group_of[i]].lr;
    u.weight_decay = 0;
    if (!rc && k) rc = dg_fused_update(dg_device_of(p), dg_dtype_of(p), &u, t, (int)k);
    if (!rc && s->step_t) rc = dg_fill_(s->step_t, (double)s->step);
    s->fresh = false;
    free(id);
    free(t);
    return rc;
}

/* The profiler's name for o's call `what` ("adam.step"), made only while it records. */
static void prof_end(uint64_t t0, const dg_optimizer *o, const char *what) {
    if (!t0) return;
    char name[48];
    snprintf(name, sizeof name, "%s.%s", o->info->name, what);
    dg_profiler_span_end(t0, DG_PROFILER_OPTIMIZER, name, -1, -1);
}

int dg_optimizer_step(dg_optimizer *o) {
    DG_CHECK_HANDLE_INT(o, "optimizer_step: optimizer is NULL");
    uint64_t t0 = dg_profiler_span_begin();
    int rc = o->remote_step ? o->remote_step(o->remote_ctx) : dg_opt_step_here(o);
    prof_end(t0, o, "step");
    return rc;
}

int dg_opt_step_here(dg_optimizer *o) {
    const char *nm = o->info->name;
    DG_CHECK_INT(!o->lbfgs, "lbfgs: a step needs the closure that re-evaluates the loss: call dg_lbfgs_step(opt, "
                 "closure, user, &loss) instead of dg_optimizer_step");
    for (int i = 0; i < o->n; i++)
        if (dg_tensor_check(nm, "parameter", o->params[i]) != 0) {
            char what[32];
            snprintf(what, sizeof what, "parameter %d", i);
            return dg_tensor_check(nm, what, o->params[i]);   /* freed with its layer? named by index */
        }
    if (isfinite(o->grad_clip_norm)) {   /* 0 clips to 0, as torch's clip_grad_norm_(max_norm=0) */
        double norm = dg_clip_grad_norm(o->params, o->n, o->grad_clip_norm);
        if (norm < 0) return (int)norm;
    }
    dg_update_params u = {
        .kind = o->info->rule, .momentum = o->momentum, .nesterov = o->nesterov, .beta1 = o->beta1, .beta2 = o->beta2,
        .eps = o->eps, .dampening = o->dampening, .amsgrad = o->amsgrad, .alpha = o->alpha, .centered = o->centered,
        .rho = o->rho,
    };
    dg_update_tensor *t = malloc(sizeof *t * (size_t)o->n);
    int *idx = malloc(sizeof *idx * (size_t)o->n);
    if (!t || !idx) {
        free(t); free(idx);
        DG_ERR(DG_ENOMEM, "%s: step: out of memory", nm);
        return DG_ENOMEM;
    }
    int rc = 0, n = 0;
    dg_no_grad_begin();
    dg_scope *sc = dg_scope_begin();   /* contiguous copies of gradients */
    /* validate and collect every parameter with a gradient before touching any, so a bad one
     * leaves all parameters and states as they were */
    bool *rows_later = calloc((size_t)(o->n ? o->n : 1), sizeof *rows_later);
    if (!rows_later) rc = DG_ENOMEM;
    for (int i = 0; i < o->n && rc == 0; i++) {
        if (steps_rows(o, i)) { rows_later[i] = true; continue; }
        dg_tensor *p = o->params[i], *g = dg_grad(p);
        if (!g) continue;
        char a[96], b[96], da[16], db[16];
        if (dg_numel(g) != dg_numel(p) || dg_ndim(g) != dg_ndim(p) || dg_dtype_of(g) != dg_dtype_of(p)) {
            DG_ERR(DG_EINVAL, "%s: gradient %s %s does not match parameter %d %s %s", nm, dg_shape_str(g, a, sizeof a),
                   dg_dtype_name(dg_dtype_of(g)), i, dg_shape_str(p, b, sizeof b), dg_dtype_name(dg_dtype_of(p)));
            rc = DG_EINVAL;
            break;
        }
        if (!same_device(dg_device_of(g), dg_device_of(p))) {
            DG_ERR(DG_EDEVICE, "%s: parameter %d %s is on %s but its gradient is on %s", nm, i, dg_shape_str(p, a, sizeof a),
                   dg_device_name(dg_device_of(p), da, sizeof da), dg_device_name(dg_device_of(g), db, sizeof db));
            rc = DG_EDEVICE;
            break;
        }
        if (!dg_is_contiguous(p)) {
            DG_ERR(DG_EINVAL, "%s: parameter %d %s is a non-contiguous view; optimizers update whole tensors",
                   nm, i, dg_shape_str(p, a, sizeof a));
            rc = DG_EINVAL;
            break;
        }
        if (!dg_is_contiguous(g) && !(g = dg_contiguous(g))) { rc = dg_last_status() ? dg_last_status() : DG_ENOMEM; break; }
        if (o->n_entries > 0) rc = dg_opt_ensure_state(o, i);
        if (rc) break;
        dg_opt_state *s = &o->state[i];
        /* state made before the parameter moved (dg_layer_to) is still on the old device */
        for (int k = 0; k < o->info->n_slots && rc == 0; k++)
            if (s->buf[k] && !same_device(dg_device_of(s->buf[k]), dg_device_of(p))) {
                DG_ERR(DG_EDEVICE, "%s: parameter %d %s is on %s but its state '%s' is on %s (the parameter moved after "
                       "the optimizer made its state: make the optimizer after moving the layer)", nm, i,
                       dg_shape_str(p, a, sizeof a), dg_device_name(dg_device_of(p), da, sizeof da), o->info->slot[k],
                       dg_device_name(dg_device_of(s->buf[k]), db, sizeof db));
                rc = DG_EDEVICE;
            }
        if (rc) break;
        dg_tensor *target = p;   /* what the rule updates: the parameter, or a half one's f32 master copy */
        if (half(p)) {
            if (!s->master && !(s->master = dg_keep(dg_cast(p, DG_F32)))) { rc = dg_last_status() ? dg_last_status() : DG_ENOMEM; break; }
            target = s->master;
            if (!(g = dg_cast(g, DG_F32))) { rc = dg_last_status() ? dg_last_status() : DG_ENOMEM; break; }
        }
        t[n] = (dg_update_tensor){
            .p = dg_tensor_ptr(target), .g = dg_tensor_ptr(g), .n = dg_numel(p),
            .s0 = s->buf[0] ? dg_tensor_ptr(s->buf[0]) : NULL, .s1 = s->buf[1] ? dg_tensor_ptr(s->buf[1]) : NULL,
            .s2 = s->buf[2] ? dg_tensor_ptr(s->buf[2]) : NULL,
        };
        idx[n++] = i;
    }
    /* per-step scalars (this advances step counts), then one fused call per group, device and
     * dtype: lr and weight decay are the group's (a gradient that was not contiguous was copied
     * above; the copy lives until the call is done) */
    for (int k = 0; k < n && rc == 0; k++) o->info->prepare(o, idx[k], &t[k]);
    int start = 0;
    for (int k = 1; k <= n && rc == 0; k++) {
        const dg_tensor *a = o->params[idx[start]];
        int grp = o->group_of[idx[start]];
        if (k < n && o->group_of[idx[k]] == grp && same_device(dg_device_of(o->params[idx[k]]), dg_device_of(a)) &&
            rule_dtype(o->params[idx[k]]) == rule_dtype(a)) continue;
        u.lr = o->groups[grp].lr;
        u.weight_decay = o->groups[grp].weight_decay;
        rc = dg_fused_update(dg_device_of(a), rule_dtype(a), &u, t + start, k - start);
        start = k;
    }
    /* half parameters take their master copy's new value, rounded once */
    for (int k = 0; k < n && rc == 0; k++)
        if (o->state[idx[k]].master) rc = dg_copy_(o->params[idx[k]], o->state[idx[k]].master);
    for (int k = 0; k < n && rc == 0; k++) {
        dg_opt_state *s = &o->state[idx[k]];
        s->fresh = false;
        if (s->step_t) rc = dg_fill_(s->step_t, (double)s->step);
        if (!rc && s->mu_t) rc = dg_fill_(s->mu_t, s->mu_product);
    }
    for (int i = 0; i < o->n && rc == 0; i++)
        if (rows_later && rows_later[i]) rc = step_rows(o, i, &u);
    free(rows_later);
    dg_scope_end(sc);
    dg_no_grad_end();
    free(t);
    free(idx);
    return rc;
}

int dg_optimizer_clear_grad(dg_optimizer *o) {
    DG_CHECK_HANDLE_INT(o, "optimizer_clear_grad: optimizer is NULL");
    uint64_t t0 = dg_profiler_span_begin();
    for (int i = 0; i < o->n; i++) dg_clear_grad(o->params[i]);
    prof_end(t0, o, "clear_grad");
    return 0;
}

int dg_opt_set_current_lr(dg_optimizer *o, int g, double lr) {
    DG_CHECK_HANDLE_INT(o, "optimizer_set_lr: optimizer is NULL");
    DG_CHECK_INT(g >= 0 && g < o->n_groups, "%s: group %d out of range [0, %d)", o->info->name, g, o->n_groups);
    DG_CHECK_INT(lr >= 0 && isfinite(lr), "%s: lr must be >= 0, got %g%s", o->info->name, lr, g ? " (param group)" : "");
    o->groups[g].lr = lr;
    return dg_fill_(o->groups[g].lr_t, lr);
}

double dg_opt_base_lr(const dg_optimizer *o, int g) { return o->groups[g].base_lr; }

int dg_optimizer_set_group_lr(dg_optimizer *o, int g, double lr) {
    int rc = dg_opt_set_current_lr(o, g, lr);
    if (!rc) o->groups[g].base_lr = lr;
    return rc;
}

int dg_optimizer_set_lr(dg_optimizer *o, double lr) {
    DG_CHECK_HANDLE_INT(o, "optimizer_set_lr: optimizer is NULL");
    DG_CHECK_INT(lr >= 0 && isfinite(lr), "%s: lr must be >= 0, got %g", o->info->name, lr);
    for (int g = 0; g < o->n_groups; g++) {
        int rc = dg_optimizer_set_group_lr(o, g, lr);
        if (rc) return rc;
    }
    return 0;
}

double dg_optimizer_get_lr(const dg_optimizer *o) {
    if (!o) { DG_PROPAGATE(DG_EINVAL, "optimizer_get_lr: optimizer is NULL"); return NAN; }
    return o->groups[0].lr;
}

double dg_optimizer_get_group_lr(const dg_optimizer *o, int g) {
    if (!o) { DG_PROPAGATE(DG_EINVAL, "optimizer_get_group_lr: optimizer is NULL"); return NAN; }
    if (g < 0 || g >= o->n_groups) {
        DG_ERR(DG_EINVAL, "%s: group %d out of range [0, %d)", o->info->name, g, o->n_groups);
        return NAN;
    }
    return o->groups[g].lr;
}

double dg_optimizer_get_group_weight_decay(const dg_optimizer *o, int g) {
    if (!o) { DG_PROPAGATE(DG_EINVAL, "optimizer_get_group_weight_decay: optimizer is NULL"); return NAN; }
    if (g < 0 || g >= o->n_groups) {
        DG_ERR(DG_EINVAL, "%s: group %d out of range [0, %d)", o->info->name, g, o->n_groups);
        return NAN;
    }
    return o->groups[g].weight_decay;
}

int dg_optimizer_param_group(const dg_optimizer *o, int i) {
    DG_CHECK_HANDLE_INT(o, "optimizer_param_group: optimizer is NULL");
    DG_CHECK_INT(i >= 0 && i < o->n, "%s: parameter index %d out of range [0, %d)", o->info->name, i, o->n);
    return o->group_of[i];
}

/* OneCycleLR's momentum: SGD momentum and RMSprop's momentum, the Adam family's beta1 */
const char *dg_opt_momentum_missing(const dg_optimizer *o) {
    switch (o->kind) {
    case DG_OPT_SGD: return "sgd has no momentum (use dg_momentum, or set cycle_momentum = false)";
    case DG_OPT_ADAGRAD: return "adagrad has no momentum (set cycle_momentum = false)";
    case DG_OPT_ADADELTA: return "adadelta has no momentum (set cycle_momentum = false)";
    case DG_OPT_LBFGS: return "lbfgs has no momentum (set cycle_momentum = false)";
    case DG_OPT_RMSPROP:
        return o->momentum > 0 ? NULL : "rmsprop was made with momentum 0, so it keeps no momentum buffer "
                                        "(make it with momentum > 0, or set cycle_momentum = false)";
    default: return NULL;
    }
}

int dg_opt_set_cycled_momentum(dg_optimizer *o, double m) {
    if (o->kind == DG_OPT_MOMENTUM || o->kind == DG_OPT_RMSPROP) o->momentum = m;
    else o->beta1 = m;
    return 0;
}

double dg_opt_cycled_momentum(const dg_optimizer *o) {
    return o->kind == DG_OPT_MOMENTUM || o->kind == DG_OPT_RMSPROP ? o->momentum : o->beta1;
}

const char *dg_optimizer_name(const dg_optimizer *o) { return o ? o->info->name : NULL; }
int dg_optimizer_num_params(const dg_optimizer *o) { return o ? o->n : 0; }

dg_tensor *dg_optimizer_param(const dg_optimizer *o, int i) {
    DG_CHECK_HANDLE(o, "optimizer_param: optimizer is NULL");
    DG_CHECK(i >= 0 && i < o->n, "%s: parameter index %d out of range [0, %d)", o->info->name, i, o->n);
    return o->params[i];
}
