/* optim/grad_scaler.c — dynamic loss scaling for mixed precision (dygraph/amp.h): Paddle's
 * decorate / GradScaler. Scales the loss, unscales the gradients of the optimizer's parameters
 * once per step while looking for inf/NaN (Paddle's check_finite_and_unscale), agrees on that flag
 * over the ranks of a communicator, skips the step when it is set, and adapts the scale with
 * Paddle's update_loss_scaling rule in float32. The gradients are handled through the op API
 * (dg_scale_, dg_mul_scalar, dg_sum_all), so any float dtype the backends have works. */
#include "optim_internal.h"
#include <math.h>

struct dg_amp_scaler {
    dg_optimizer *opt;            /* borrowed */
    dg_comm *comm;                /* borrowed; NULL: this rank decides alone */
    dg_amp_params p;
    float scale;                  /* Paddle's loss_scaling: a float32 */
    int good, bad;                /* Paddle's incr_count / decr_count (in_good_steps / in_bad_steps) */
    bool unscaled;                /* dg_amp_unscale ran since the last step */
    bool found_inf;               /* of the last unscale (this rank) or step (agreed) */
};

dg_amp_params dg_amp_default_params(void) {
    return (dg_amp_params){ .params_tag = DG_PARAMS_TAG, .init_loss_scaling = 32768.0, .use_dynamic_loss_scaling = true, .incr_every_n_steps = 1000,
                            .decr_every_n_nan_or_inf = 2, .incr_ratio = 2.0, .decr_ratio = 0.8 };
}

int dg_amp_params_check(const char *op, dg_amp_params p) {
    DG_CHECK_PARAMS_INT("amp_params_check", p, dg_amp_default_params);
    if (!op) op = "amp_params_check";
    DG_CHECK_INT(isfinite(p.init_loss_scaling) && p.init_loss_scaling > 0 && isfinite((float)p.init_loss_scaling),
                 "%s: init_loss_scaling must be finite and > 0 (and fit a float32), got %g", op, p.init_loss_scaling);
    DG_CHECK_INT(p.incr_every_n_steps > 0, "%s: incr_every_n_steps must be > 0, got %d", op, p.incr_every_n_steps);
    DG_CHECK_INT(p.decr_every_n_nan_or_inf > 0, "%s: decr_every_n_nan_or_inf must be > 0, got %d", op,
                 p.decr_every_n_nan_or_inf);
    DG_CHECK_INT(isfinite(p.incr_ratio) && p.incr_ratio > 1, "%s: incr_ratio must be finite and > 1, got %g", op, p.incr_ratio);
    DG_CHECK_INT(p.decr_ratio > 0 && p.decr_ratio < 1, "%s: decr_ratio must be in (0, 1), got %g", op, p.decr_ratio);
    return 0;
}

dg_amp_scaler *dg_amp_decorate(dg_optimizer *opt, dg_amp_params p) {
    DG_CHECK_PARAMS("amp_decorate", p, dg_amp_default_params);
    DG_CHECK_HANDLE(opt, "amp_decorate: optimizer is NULL");
    if (dg_amp_params_check("amp_decorate", p)) return NULL;
    dg_amp_scaler *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "amp_decorate: out of memory"); return NULL; }
    s->opt = opt;
    s->p = p;
    s->scale = (float)p.init_loss_scaling;
    return s;
}

void dg_amp_scaler_free(dg_amp_scaler *s) { free(s); }

int dg_amp_set_comm(dg_amp_scaler *s, struct dg_comm *comm) {
    DG_CHECK_HANDLE_INT(s, "amp_set_comm: scaler is NULL");
    s->comm = comm;
    return 0;
}

dg_tensor *dg_amp_scale_loss(dg_amp_scaler *s, const dg_tensor *loss) {
    DG_CHECK_HANDLE(s, "amp_scale_loss: scaler is NULL");
    DG_CHECK_TENSOR("amp_scale_loss", loss);
    DG_CHECK(dg_dtype_is_float(dg_dtype_of(loss)), "amp_scale_loss: the loss must be a float tensor, got %s",
             dg_dtype_name(dg_dtype_of(loss)));
    return dg_mul_scalar(loss, (double)s->scale);
}

/* The status a failed callee recorded, DG_ENOMEM when it left none. */
static int failed_status(void) { return dg_last_status() ? dg_last_status() : DG_ENOMEM; }

/* Adds to *found whether g holds an inf or a NaN: sum(g * 0) is 0 for finite values and NaN for
 * any other, in every float dtype, with no overflow of the sum itself. The per-gradient sums of
 * one device are added on that device and read once (one synchronisation per device, not per
 * gradient). */
typedef struct probe { dg_tensor *acc; } probe;
static int probe_flush(probe *pr, bool *found) {
    if (!pr->acc) return 0;
    double v = dg_item(pr->acc);
    pr->acc = NULL;   /* scope-owned */
    if (!isfinite(v)) *found = true;
    return 0;
}
static int probe_add(probe *pr, const dg_tensor *g, bool *found) {
    dg_tensor *z = dg_cast(dg_sum_all(dg_mul_scalar(g, 0.0)), DG_F64);
    if (!z) return failed_status();
    dg_device a = pr->acc ? dg_device_of(pr->acc) : dg_device_of(z), b = dg_device_of(z);
    if (a.type != b.type || a.index != b.index) probe_flush(pr, found);
    pr->acc = pr->acc ? dg_add(pr->acc, z) : z;
    return pr->acc ? 0 : failed_status();
}

int dg_amp_unscale(dg_amp_scaler *s) {
    DG_CHECK_HANDLE_INT(s, "amp_unscale: scaler is NULL");
    if (s->unscaled) return 0;
    int n = dg_optimizer_num_params(s->opt);
    if (n < 0) return n;
    /* Paddle: inverse_scale = 1 / scale in float32, out = in * inverse_scale */
    double inv = (double)(1.0f / s->scale);
    bool found = false;
    int rc = 0;
    probe pr = { NULL };
    dg_no_grad_begin();
    dg_scope *sc = dg_scope_begin();
    for (int i = 0; i < n && !rc; i++) {
        dg_tensor *g = dg_grad(dg_optimizer_param(s->opt, i));
        if (!g) continue;
        if (!dg_dtype_is_float(dg_dtype_of(g))) {
            DG_ERR(DG_EINVAL, "amp_unscale: the gradient of parameter %d is %s, not a float tensor", i,
                   dg_dtype_name(dg_dtype_of(g)));
            rc = DG_EINVAL;
            break;
        }
        rc = probe_add(&pr, g, &found);
        if (!rc) rc = dg_scale_(g, inv);
    }
    if (!rc) rc = probe_flush(&pr, &found);
    dg_scope_end(sc);
    dg_no_grad_end();
    if (rc) return rc;
    s->found_inf = found;
    s->unscaled = true;
    return 0;
}

/* found_inf as every rank sees it: the MAX of the ranks' flags, on the device of the parameters
 * (the NCCL transport takes GPU tensors only). */
static int agree(dg_amp_scaler *s, bool *found) {
    if (!s->comm) return 0;
    dg_device dev = dg_cpu();
    if (dg_optimizer_num_params(s->opt) > 0) dev = dg_device_of(dg_optimizer_param(s->opt, 0));
    float f = *found ? 1.0f : 0.0f;
    dg_tensor *t = dg_empty_on(DG_SHAPE(1), DG_F32, dev);
    int rc = t ? dg_copy_from_host(t, &f, sizeof f) : failed_status();
    if (!rc) rc = dg_comm_all_reduce(s->comm, t, DG_COMM_MAX);
    if (!rc) rc = dg_to_host(t, &f, sizeof f);
    dg_tensor_free(t);
    if (!rc) *found = f != 0.0f;
    return rc;
}

/* Paddle's update_loss_scaling (phi/kernels/impl/amp_kernel_impl.h, Update), in float32. */
static void update_scale(dg_amp_scaler *s, bool found) {
    if (found) {
        s->good = 0;
        if (++s->bad == s->p.decr_every_n_nan_or_inf) {
            float ns = s->scale * (float)s->p.decr_ratio;
            s->scale = ns < 1.0f ? 1.0f : ns;
            s->bad = 0;
        }
    } else {
        s->bad = 0;
        if (++s->good == s->p.incr_every_n_steps) {
            float ns = s->scale * (float)s->p.incr_ratio;
            if (isfinite(ns)) s->scale = ns;
            s->good = 0;
        }
    }
}

int dg_amp_step(dg_amp_scaler *s) {
    DG_CHECK_HANDLE_INT(s, "amp_step: scaler is NULL");
    int rc = dg_amp_unscale(s);
    if (rc) return rc;
    bool found = s->found_inf;
    if ((rc = agree(s, &found))) return rc;
    if (!found && (rc = dg_optimizer_step(s->opt)) < 0) return rc;
    if (s->p.use_dynamic_loss_scaling) update_scale(s, found);
    s->found_inf = found;
    s->unscaled = false;
    return found ? 0 : 1;
}

double dg_amp_get_scale(const dg_amp_scaler *s) { return s ? (double)s->scale : NAN; }
int dg_amp_good_steps(const dg_amp_scaler *s) { return s ? s->good : -1; }
int dg_amp_bad_steps(const dg_amp_scaler *s) { return s ? s->bad : -1; }
bool dg_amp_found_inf(const dg_amp_scaler *s) { return s && s->found_inf; }
dg_amp_params dg_amp_get_params(const dg_amp_scaler *s) { return s ? s->p : dg_amp_default_params(); }
dg_optimizer *dg_amp_optimizer(const dg_amp_scaler *s) { return s ? s->opt : NULL; }

/* ---- state (Paddle's GradScaler.state_dict names) ---- */

static int put(dg_tensor_dict *d, const char *name, dg_dtype dt, const void *v) {
    dg_tensor *t = dg_from_data(DG_SHAPE(1), dt, v);
    if (!t) return failed_status();
    int rc = dg_tensor_dict_set(d, name, t);
    dg_tensor_free(t);
    return rc;
}

dg_tensor_dict *dg_amp_state_dict(const dg_amp_scaler *s) {
    DG_CHECK_HANDLE(s, "amp_state_dict: scaler is NULL");
    dg_tensor_dict *d = dg_tensor_dict_new();
    int64_t good = s->good, bad = s->bad;
    int rc = d ? 0 : failed_status();
    if (!rc) rc = put(d, "scale", DG_F32, &s->scale);
    if (!rc) rc = put(d, "incr_count", DG_I64, &good);
    if (!rc) rc = put(d, "decr_count", DG_I64, &bad);
    if (rc) { dg_tensor_dict_free(d); return NULL; }
    return d;
}

/* One element of dtype dt under name, or an error naming where. */
static int get_one(const dg_tensor_dict *d, const char *where, const char *name, dg_dtype dt, void *out, size_t sz) {
    dg_tensor *t = dg_tensor_dict_get(d, name);
    if (!t || dg_dtype_of(t) != dt || dg_numel(t) != 1) {
        DG_ERR(DG_EFORMAT, "%s: loss scaler entry '%s' %s", where, name,
               !t ? "is missing" : dt == DG_F32 ? "is not one float32" : "is not one int64");
        return DG_EFORMAT;
    }
    return dg_to_host(t, out, sz);
}

int dg_amp_load_dict_checked(dg_amp_scaler *s, const dg_tensor_dict *d, const char *where, bool check_only) {
    float scale = 0;
    int64_t good = 0, bad = 0;
    for (int i = 0; i < dg_tensor_dict_size(d); i++) {
        const char *n = dg_tensor_dict_name(d, i);
        if (strcmp(n, "scale") && strcmp(n, "incr_count") && strcmp(n, "decr_count")) {
            DG_ERR(DG_EFORMAT, "%s: unknown loss scaler entry '%s' (scale, incr_count, decr_count)", where, n);
            return DG_EFORMAT;
        }
    }
    int rc = get_one(d, where, "scale", DG_F32, &scale, sizeof scale);
    if (!rc) rc = get_one(d, where, "incr_count", DG_I64, &good, sizeof good);
    if (!rc) rc = get_one(d, where, "decr_count", DG_I64, &bad, sizeof bad);
    if (rc) return rc;
    if (!isfinite(scale) || !(scale > 0)) {
        DG_ERR(DG_EFORMAT, "%s: loss scale %g is not finite and > 0", where, (double)scale);
        return DG_EFORMAT;
    }
    if (good < 0 || good >= s->p.incr_every_n_steps || bad < 0 || bad >= s->p.decr_every_n_nan_or_inf) {
        DG_ERR(DG_EFORMAT, "%s: loss scaler counters incr_count %lld, decr_count %lld do not fit this scaler "
               "(incr_every_n_steps %d, decr_every_n_nan_or_inf %d)", where, (long long)good, (long long)bad,
               s->p.incr_every_n_steps, s->p.decr_every_n_nan_or_inf);
        return DG_EFORMAT;
    }
    if (check_only) return 0;
    s->scale = scale;
    s->good = (int)good;
    s->bad = (int)bad;
    s->unscaled = false;
    s->found_inf = false;
    return 0;
}

int dg_amp_load_state_dict(dg_amp_scaler *s, const dg_tensor_dict *state) {
    DG_CHECK_HANDLE_INT(s, "amp_load_state_dict: scaler is NULL");
    DG_CHECK_INT(state, "amp_load_state_dict: state is NULL");
    return dg_amp_load_dict_checked(s, state, "amp_load_state_dict", false);
}
