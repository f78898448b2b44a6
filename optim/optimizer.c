/* optim/optimizer.c — what every optimizer shares: parameter validation, lifetime, the step
 * driver (clip, then one fused update per device and dtype over the parameters that have a
 * gradient, in no-grad mode), clearing
 * gradients, the learning rate, and the small tensor helpers the update rules use. */
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

dg_optimizer *dg_opt_new(dg_opt_kind kind, const dg_opt_kind_info *info, dg_tensor *const *params, int n,
                         double lr, double weight_decay, double grad_clip_norm) {
    const char *nm = info->name;
    DG_CHECK(params, "%s: params is NULL", nm);   /* the array is the caller's own, not a result */
    DG_CHECK(n > 0, "%s: no parameters (n = %d)", nm, n);
    DG_CHECK(lr >= 0 && isfinite(lr), "%s: lr must be >= 0, got %g", nm, lr);
    DG_CHECK(weight_decay >= 0 && isfinite(weight_decay), "%s: weight_decay must be >= 0, got %g", nm, weight_decay);
    DG_CHECK(grad_clip_norm >= 0, "%s: grad_clip_norm must be >= 0 (INFINITY: no clipping), got %g", nm, grad_clip_norm);
    for (int i = 0; i < n; i++) {
        const dg_tensor *p = params[i];
        char sh[96];
        if (!p) { DG_PROPAGATE(DG_EINVAL, "%s: parameter %d is NULL", nm, i); return NULL; }
        snprintf(sh, sizeof sh, "parameter %d", i);
        if (dg_tensor_check(nm, sh, p) != 0) return NULL;
        dg_shape_str(p, sh, sizeof sh);
        DG_CHECK(dg_is_leaf(p), "%s: parameter %d %s is not a leaf (made by %s); pass the tensors being trained",
                 nm, i, sh, dg_grad_fn_name(p) ? dg_grad_fn_name(p) : "an op");
        DG_CHECK(dg_dtype_of(p) == DG_F32 || dg_dtype_of(p) == DG_F64, "%s: parameter %d %s is %s; expects float32/float64",
                 nm, i, sh, dg_dtype_name(dg_dtype_of(p)));
        DG_CHECK(dg_requires_grad(p), "%s: parameter %d %s does not require grad", nm, i, sh);
        for (int j = 0; j < i; j++)
            DG_CHECK(params[j] != p, "%s: parameter %d is parameter %d again", nm, i, j);
    }
    dg_optimizer *o = calloc(1, sizeof *o);
    DG_CHECK(o, "%s: out of memory", nm);
    o->kind = kind;
    o->info = info;
    o->n = n;
    o->params = malloc(sizeof *o->params * (size_t)n);
    o->state = calloc((size_t)n, sizeof *o->state);
    o->lr = lr;
    uint64_t errs = dg_error_count();
    o->lr_t = dg_opt_cpu_scalar(lr, DG_F64);
    o->weight_decay = weight_decay;
    o->grad_clip_norm = grad_clip_norm;
    if (!o->params || !o->state || !o->lr_t) {
        dg_optimizer_free(o);
        if (!dg_error_since(errs)) DG_ERR(DG_ENOMEM, "%s: out of memory", nm);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        o->params[i] = params[i];
        dg_opt_state *s = &o->state[i];
        int k = 0;
        for (; k < info->n_slots; k++) snprintf(s->name[k], sizeof s->name[k], "%d.%s", i, info->slot[k]);
        if (info->has_step) snprintf(s->name[k], sizeof s->name[k], "%d.step", i);
    }
    return o;
}

int dg_opt_ensure_state(dg_optimizer *o, int i) {
    dg_opt_state *s = &o->state[i];
    if (s->has) return 0;
    dg_tensor *buf[DG_OPT_MAX_SLOTS] = { 0 }, *step_t = NULL;
    bool ok = true;
    uint64_t errs = dg_error_count();
    for (int k = 0; k < o->info->n_slots && ok; k++) {
        buf[k] = dg_keep(dg_zeros_like(o->params[i]));
        ok = buf[k] && (o->init_acc == 0 || dg_fill_(buf[k], o->init_acc) == 0);
    }
    if (ok && o->info->has_step) ok = (step_t = dg_opt_cpu_scalar(0, DG_I64)) != NULL;
    if (!ok) {
        for (int k = 0; k < DG_OPT_MAX_SLOTS; k++) dg_tensor_free(buf[k]);
        dg_tensor_free(step_t);
        if (!dg_error_since(errs)) DG_ERR(DG_ENOMEM, "%s: cannot make the state of parameter %d", o->info->name, i);
        return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    memcpy(s->buf, buf, sizeof buf);
    s->step_t = step_t;
    s->step = 0;
    s->has = true;
    s->fresh = true;
    return 0;
}

void dg_optimizer_free(dg_optimizer *o) {
    if (!o) return;
    if (o->state)
        for (int i = 0; i < o->n; i++) {
            for (int k = 0; k < DG_OPT_MAX_SLOTS; k++) dg_tensor_free(o->state[i].buf[k]);
            dg_tensor_free(o->state[i].step_t);
        }
    dg_tensor_free(o->lr_t);
    free(o->state);
    free(o->params);
    free(o);
}

static bool same_device(dg_device a, dg_device b) { return a.type == b.type && a.index == b.index; }

int dg_optimizer_step(dg_optimizer *o) {
    DG_CHECK_HANDLE_INT(o, "optimizer_step: optimizer is NULL");
    const char *nm = o->info->name;
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
        .kind = o->info->rule, .lr = o->lr, .weight_decay = o->weight_decay, .momentum = o->momentum,
        .nesterov = o->nesterov, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
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
    for (int i = 0; i < o->n && rc == 0; i++) {
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
        if (o->info->n_slots > 0 || o->info->has_step) rc = dg_opt_ensure_state(o, i);
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
        t[n] = (dg_update_tensor){
            .p = dg_tensor_ptr(p), .g = dg_tensor_ptr(g), .n = dg_numel(p),
            .s0 = s->buf[0] ? dg_tensor_ptr(s->buf[0]) : NULL, .s1 = s->buf[1] ? dg_tensor_ptr(s->buf[1]) : NULL,
        };
        idx[n++] = i;
    }
    /* per-step scalars (this advances step counts), then one fused call per device and dtype (a
     * gradient that was not contiguous was copied above; the copy lives until the call is done) */
    for (int k = 0; k < n && rc == 0; k++) o->info->prepare(o, idx[k], &t[k]);
    int start = 0;
    for (int k = 1; k <= n && rc == 0; k++) {
        const dg_tensor *a = o->params[idx[start]];
        if (k < n && same_device(dg_device_of(o->params[idx[k]]), dg_device_of(a)) &&
            dg_dtype_of(o->params[idx[k]]) == dg_dtype_of(a)) continue;
        rc = dg_fused_update(dg_device_of(a), dg_dtype_of(a), &u, t + start, k - start);
        start = k;
    }
    for (int k = 0; k < n && rc == 0; k++) {
        dg_opt_state *s = &o->state[idx[k]];
        s->fresh = false;
        if (s->step_t) rc = dg_fill_(s->step_t, (double)s->step);
    }
    dg_scope_end(sc);
    dg_no_grad_end();
    free(t);
    free(idx);
    return rc;
}

int dg_optimizer_clear_grad(dg_optimizer *o) {
    DG_CHECK_HANDLE_INT(o, "optimizer_clear_grad: optimizer is NULL");
    for (int i = 0; i < o->n; i++) dg_clear_grad(o->params[i]);
    return 0;
}

int dg_optimizer_set_lr(dg_optimizer *o, double lr) {
    DG_CHECK_HANDLE_INT(o, "optimizer_set_lr: optimizer is NULL");
    DG_CHECK_INT(lr >= 0 && isfinite(lr), "%s: lr must be >= 0, got %g", o->info->name, lr);
    o->lr = lr;
    return dg_fill_(o->lr_t, lr);
}

double dg_optimizer_get_lr(const dg_optimizer *o) {
    if (!o) { DG_PROPAGATE(DG_EINVAL, "optimizer_get_lr: optimizer is NULL"); return NAN; }
    return o->lr;
}

const char *dg_optimizer_name(const dg_optimizer *o) { return o ? o->info->name : NULL; }
int dg_optimizer_num_params(const dg_optimizer *o) { return o ? o->n : 0; }

dg_tensor *dg_optimizer_param(const dg_optimizer *o, int i) {
    DG_CHECK_HANDLE(o, "optimizer_param: optimizer is NULL");
    DG_CHECK(i >= 0 && i < o->n, "%s: parameter index %d out of range [0, %d)", o->info->name, i, o->n);
    return o->params[i];
}
