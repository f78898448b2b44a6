/* nn/loss_layers.c — loss layers with a two-input forward, run by dg_loss_forward(loss, input,
 * label): MSELoss, L1Loss, CrossEntropyLoss, BCEWithLogitsLoss (the ops of ops.h as layers). */
#include "nn_internal.h"

typedef struct { dg_reduction r; dg_cross_entropy_params ce; } loss_state;

static const dg_layer_class mse_loss_class = DG_LAYER_CLASS("MSELoss");
const dg_layer_class *dg_nn_mse_loss_class(void) { return &mse_loss_class; }
static const dg_layer_class l1_loss_class = DG_LAYER_CLASS("L1Loss");
const dg_layer_class *dg_nn_l1_loss_class(void) { return &l1_loss_class; }
static const dg_layer_class bce_loss_class = DG_LAYER_CLASS("BCEWithLogitsLoss");
const dg_layer_class *dg_nn_bce_with_logits_loss_class(void) { return &bce_loss_class; }
static const dg_layer_class cross_entropy_loss_class = DG_LAYER_CLASS("CrossEntropyLoss");
const dg_layer_class *dg_nn_cross_entropy_loss_class(void) { return &cross_entropy_loss_class; }

static dg_tensor *mse_fw(dg_layer *self, const dg_tensor *x, const dg_tensor *y) {
    return dg_mse_loss_ext(x, y, ((loss_state *)dg_layer_user(self))->r);
}
static dg_tensor *l1_fw(dg_layer *self, const dg_tensor *x, const dg_tensor *y) {
    return dg_l1_loss(x, y, ((loss_state *)dg_layer_user(self))->r);
}
static dg_tensor *bce_fw(dg_layer *self, const dg_tensor *x, const dg_tensor *y) {
    return dg_binary_cross_entropy_with_logits(x, y, ((loss_state *)dg_layer_user(self))->r);
}
static dg_tensor *ce_fw(dg_layer *self, const dg_tensor *x, const dg_tensor *y) {
    return dg_cross_entropy_ext(x, y, ((loss_state *)dg_layer_user(self))->ce);
}

static dg_layer *loss_new(const dg_layer_class *cls, dg_loss_forward_fn fn, loss_state st) {
    if ((unsigned)st.r > DG_REDUCE_NONE) {
        DG_ERR(DG_EINVAL, "%s: bad reduction %d", cls->name, (int)st.r);
        return NULL;
    }
    loss_state *s = malloc(sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    *s = st;
    return dg_loss_layer_new(cls, fn, s, free);   /* torch prints losses with no arguments */
}

dg_layer *dg_nn_mse_loss(dg_reduction r) { return loss_new(&mse_loss_class, mse_fw, (loss_state){ .r = r }); }
dg_layer *dg_nn_l1_loss(dg_reduction r) { return loss_new(&l1_loss_class, l1_fw, (loss_state){ .r = r }); }
dg_layer *dg_nn_bce_with_logits_loss(dg_reduction r) { return loss_new(&bce_loss_class, bce_fw, (loss_state){ .r = r }); }
dg_layer *dg_nn_cross_entropy_loss(dg_cross_entropy_params p) {
    DG_CHECK_PARAMS("nn_cross_entropy_loss", p, dg_cross_entropy_default_params);
    return loss_new(&cross_entropy_loss_class, ce_fw, (loss_state){ .r = p.reduction, .ce = p });
}
