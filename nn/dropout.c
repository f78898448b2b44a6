/* nn/dropout.c — Dropout and Dropout2d: inverted dropout in training mode (mask from the
 * layer's generator, else the generator of the thread running forward; kept values scaled by
 * 1/(1-p)), one draw per element (Dropout) or per (N, C) channel (Dropout2d, dg_dropout2d); a
 * copy of the input in eval mode. */
#include "nn_internal.h"

static const dg_layer_class dropout_class = DG_LAYER_CLASS("Dropout");
const dg_layer_class *dg_nn_dropout_class(void) { return &dropout_class; }

static const dg_layer_class dropout2d_class = DG_LAYER_CLASS("Dropout2d");
const dg_layer_class *dg_nn_dropout2d_class(void) { return &dropout2d_class; }

static dg_dropout_params op_params(dg_layer *self) {
    dg_nn_dropout_params *p = dg_layer_user(self);
    dg_dropout_params dp = dg_dropout_default_params();
    dp.p = p->p;
    dp.training = dg_layer_is_training(self);
    dp.generator = p->generator;
    return dp;
}
static dg_tensor *dropout_fw(dg_layer *self, const dg_tensor *x) { return dg_dropout_ext(x, op_params(self)); }
static dg_tensor *dropout2d_fw(dg_layer *self, const dg_tensor *x) { return dg_dropout2d_ext(x, op_params(self)); }

dg_nn_dropout_params dg_nn_dropout_default_params(void) { return (dg_nn_dropout_params){ .params_tag = DG_PARAMS_TAG, .p = 0.5, .generator = NULL }; }
dg_layer *dg_nn_dropout(double p) {
    dg_nn_dropout_params dp = dg_nn_dropout_default_params();
    dp.p = p;
    return dg_nn_dropout_ext(dp);
}

static dg_layer *make(const dg_layer_class *cls, dg_layer_forward_fn fw, dg_nn_dropout_params prm) {
    dg_nn_dropout_params *s = malloc(sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    *s = prm;
    double p = prm.p;
    dg_layer *l = dg_layer_new(cls, fw, s, free);
    if (!l) return NULL;
    dg_layer_set_extra_repr(l, "p=%g, inplace=False", p);
    if (!(p >= 0 && p <= 1)) {
        DG_LAYER_ERROR(l, "p must be in [0, 1], got %g", p);
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

dg_layer *dg_nn_dropout_ext(dg_nn_dropout_params prm) {
    DG_CHECK_PARAMS("nn_dropout_ext", prm, dg_nn_dropout_default_params);
    return make(&dropout_class, dropout_fw, prm);
}

dg_layer *dg_nn_dropout2d(double p) {
    dg_nn_dropout_params dp = dg_nn_dropout_default_params();
    dp.p = p;
    return dg_nn_dropout2d_ext(dp);
}
dg_layer *dg_nn_dropout2d_ext(dg_nn_dropout_params prm) {
    DG_CHECK_PARAMS("nn_dropout2d_ext", prm, dg_nn_dropout_default_params);
    return make(&dropout2d_class, dropout2d_fw, prm);
}
