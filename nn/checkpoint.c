/* nn/checkpoint.c — a layer's state (parameters and buffers by hierarchical name) to and from
 * safetensors. Strict loading checks every name, shape and dtype before copying anything, so a
 * failed load leaves the layer as it was; the message names each offending entry. */
#include "nn_internal.h"
#include <dygraph/checkpoint.h>

dg_tensor_dict *dg_layer_state_to_dict(const dg_layer *layer) {
    DG_CHECK_HANDLE(layer, "layer_state_to_dict: layer is NULL");
    int n = 0;
    dg_named_tensor *sd = dg_layer_state_dict(layer, &n);
    if (!sd) return NULL;
    dg_tensor_dict *d = dg_tensor_dict_new();
    for (int i = 0; d && i < n; i++)
        if (dg_tensor_dict_set(d, sd[i].name, sd[i].tensor) != 0) { dg_tensor_dict_free(d); d = NULL; }
    free(sd);
    return d;
}

int dg_layer_save(const dg_layer *layer, const char *path) {
    dg_tensor_dict *d = dg_layer_state_to_dict(layer);
    if (!d) return dg_last_status() ? dg_last_status() : DG_EINVAL;
    int rc = dg_save_safetensors(path, d);
    dg_tensor_dict_free(d);
    return rc;
}

/* Appends "name" to a bounded list in a message buffer. */
static void note(char *buf, size_t cap, int *count, const char *fmt, const char *name, const char *extra) {
    if ((*count)++ >= 6) return;
    size_t o = strlen(buf);
    if (o + 4 < cap) snprintf(buf + o, cap - o, fmt, name, extra ? extra : "");
}

static bool same_shape(const dg_tensor *a, const dg_tensor *b) {
    if (dg_ndim(a) != dg_ndim(b)) return false;
    for (int i = 0; i < dg_ndim(a); i++) if (dg_dim(a, i) != dg_dim(b, i)) return false;
    return true;
}

dg_load_params dg_load_default_params(void) { return (dg_load_params){ .params_tag = DG_PARAMS_TAG, .strict = true }; }

static int load_dict(dg_layer *layer, const dg_tensor_dict *state, dg_load_params p, dg_load_report *rep, const char *src) {
    DG_CHECK_HANDLE_INT(layer, "layer_load: layer is NULL");
    DG_CHECK_HANDLE_INT(state, "layer_load: state is NULL");
    int n = 0;
    dg_named_tensor *sd = dg_layer_state_dict(layer, &n);
    if (!sd) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    dg_load_report r = {0};
    char missing[512] = "", unexpected[512] = "", mismatch[1024] = "";
    bool *ok = calloc((size_t)(n ? n : 1), sizeof *ok);
    if (!ok) { free(sd); DG_ERR(DG_ENOMEM, "layer_load: out of memory"); return DG_ENOMEM; }
    for (int i = 0; i < n; i++) {
        dg_tensor *src_t = dg_tensor_dict_get(state, sd[i].name), *dst = sd[i].tensor;
        if (!src_t) { note(missing, sizeof missing, &r.missing, " %s%s", sd[i].name, NULL); continue; }
        if (!same_shape(src_t, dst) || dg_dtype_of(src_t) != dg_dtype_of(dst)) {
            char what[160], a[64], b[64];
            snprintf(what, sizeof what, " (file %s %s, model %s %s)", dg_shape_str(src_t, a, sizeof a), dg_dtype_name(dg_dtype_of(src_t)),
                     dg_shape_str(dst, b, sizeof b), dg_dtype_name(dg_dtype_of(dst)));
            note(mismatch, sizeof mismatch, &r.mismatched, " %s%s", sd[i].name, what);
            continue;
        }
        ok[i] = true;
    }
    for (int j = 0; j < dg_tensor_dict_size(state); j++) {
        const char *name = dg_tensor_dict_name(state, j);
        bool known = false;
        for (int i = 0; i < n && !known; i++) known = strcmp(sd[i].name, name) == 0;
        if (!known) note(unexpected, sizeof unexpected, &r.unexpected, " %s%s", name, NULL);
    }
    bool fail = p.strict && (r.missing || r.unexpected || r.mismatched);
    int rc = 0;
    if (fail) {
        DG_ERR(DG_EFORMAT, "layer_load from %s: %d missing key(s)%s%s; %d unexpected key(s)%s%s; %d shape/dtype mismatch(es)%s%s; "
               "nothing was loaded (pass strict = false to load what matches)", src,
               r.missing, r.missing ? ":" : "", missing, r.unexpected, r.unexpected ? ":" : "", unexpected,
               r.mismatched, r.mismatched ? ":" : "", mismatch);
        rc = DG_EFORMAT;
    } else {
        dg_scope *s = dg_scope_begin();
        dg_no_grad_begin();
        for (int i = 0; i < n && !rc; i++) {
            if (!ok[i]) continue;
            dg_tensor *src_t = dg_tensor_dict_get(state, sd[i].name), *dst = sd[i].tensor;
            dg_device dd = dg_device_of(dst), ds = dg_device_of(src_t);
            if (dd.type != ds.type || dd.index != ds.index) src_t = dg_to_device(src_t, dd);
            rc = src_t ? dg_copy_(dst, src_t) : DG_EDEVICE;
            if (!rc) r.loaded++;
        }
        dg_no_grad_end();
        dg_scope_end(s);
    }
    if (rep) *rep = r;
    free(ok);
    free(sd);
    return rc;
}

int dg_layer_load_dict(dg_layer *layer, const dg_tensor_dict *state, dg_load_params p, dg_load_report *rep) {
    DG_CHECK_PARAMS_INT("layer_load_dict", p, dg_load_default_params);
    return load_dict(layer, state, p, rep, "a tensor dict");
}

int dg_layer_load(dg_layer *layer, const char *path, dg_load_params p, dg_load_report *rep) {
    DG_CHECK_PARAMS_INT("layer_load", p, dg_load_default_params);
    DG_CHECK_HANDLE_INT(layer, "layer_load: layer is NULL");
    DG_CHECK_INT(path, "layer_load: path is NULL");
    dg_tensor_dict *d = dg_load_safetensors(path);
    if (!d) return dg_last_status() ? dg_last_status() : DG_EIO;
    char src[600];
    snprintf(src, sizeof src, "'%s'", path);
    int rc = load_dict(layer, d, p, rep, src);
    dg_tensor_dict_free(d);
    return rc;
}
