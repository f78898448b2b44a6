/* nn/layer_dtype.c — a layer's parameters and buffers to another float dtype in place (torch's
 * module.to(dtype), .half(), .bfloat16()), and the O2 form of it that mixed precision uses:
 * normalisation layers keep float32 (Paddle's amp.decorate(level='O2')), because their
 * statistics and scale need f32's precision and the kernels take a half input with f32
 * parameters. Handles stay, so optimizers holding them follow. */
#include <dygraph.h>
#include <dygraph/extension.h>
#include <stdlib.h>

static bool is_norm(const dg_layer *l) {
    return dg_layer_is(l, dg_nn_batch_norm1d_class()) || dg_layer_is(l, dg_nn_batch_norm2d_class()) ||
           dg_layer_is(l, dg_nn_sync_batch_norm_class()) || dg_layer_is(l, dg_nn_layer_norm_class()) ||
           dg_layer_is(l, dg_nn_group_norm_class());
}

typedef struct keep { dg_tensor **t; int n, cap; bool oom; } keep;

static int collect_norm(dg_layer *l, void *user) {
    keep *k = user;
    if (!is_norm(l)) return 0;
    int n = 0;
    dg_named_tensor *st = dg_layer_state_dict(l, &n);
    if (!st) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    for (int i = 0; i < n; i++) {
        if (k->n == k->cap) {
            dg_tensor **t = realloc(k->t, sizeof *t * (size_t)(k->cap = k->cap ? 2 * k->cap : 16));
            if (!t) { free(st); k->oom = true; return DG_ENOMEM; }
            k->t = t;
        }
        k->t[k->n++] = st[i].tensor;
    }
    free(st);
    return 0;
}

int dg_layer_to_dtype(dg_layer *layer, dg_dtype dtype, bool keep_norm_f32) {
    if (!layer) { DG_RAISE(DG_EINVAL, "layer_to_dtype: layer is NULL"); return DG_EINVAL; }
    if (dtype != DG_F32 && dtype != DG_F64 && dtype != DG_F16 && dtype != DG_BF16) {
        DG_RAISE(DG_EINVAL, "layer_to_dtype: %s is not a float dtype", dg_dtype_name(dtype));
        return DG_EINVAL;
    }
    keep k = { 0 };
    int rc = keep_norm_f32 ? dg_layer_apply(layer, collect_norm, &k) : 0;
    if (k.oom) DG_RAISE(DG_ENOMEM, "layer_to_dtype: out of memory");
    int n = 0;
    dg_named_tensor *st = rc ? NULL : dg_layer_state_dict(layer, &n);
    if (!rc && !st) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    for (int i = 0; i < n && !rc; i++) {
        dg_tensor *t = st[i].tensor;
        dg_dtype d = dg_dtype_of(t);
        if (d != DG_F32 && d != DG_F64 && d != DG_F16 && d != DG_BF16) continue;   /* counters stay integers */
        bool kept = false;
        for (int j = 0; j < k.n && !kept; j++) kept = k.t[j] == t;
        if (!kept) rc = dg_tensor_cast_(t, dtype);   /* a tied entry listed twice is already there: no-op */
    }
    free(st);
    free(k.t);
    return rc;
}
