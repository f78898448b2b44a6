/* nn/activation.c — parameter-free activation layers: ReLU, LeakyReLU, Sigmoid, Tanh, GELU,
 * Softmax (torch.nn / paddle.nn spellings of the ops in ops.h). */
#include "nn_internal.h"

typedef struct { double slope; bool approximate; int axis; } act_state;

static const dg_layer_class relu_class = DG_LAYER_CLASS("ReLU");
const dg_layer_class *dg_nn_relu_class(void) { return &relu_class; }
static const dg_layer_class leaky_relu_class = DG_LAYER_CLASS("LeakyReLU");
const dg_layer_class *dg_nn_leaky_relu_class(void) { return &leaky_relu_class; }
static const dg_layer_class sigmoid_class = DG_LAYER_CLASS("Sigmoid");
const dg_layer_class *dg_nn_sigmoid_class(void) { return &sigmoid_class; }
static const dg_layer_class tanh_class = DG_LAYER_CLASS("Tanh");
const dg_layer_class *dg_nn_tanh_class(void) { return &tanh_class; }
static const dg_layer_class gelu_class = DG_LAYER_CLASS("GELU");
const dg_layer_class *dg_nn_gelu_class(void) { return &gelu_class; }
static const dg_layer_class softmax_class = DG_LAYER_CLASS("Softmax");
const dg_layer_class *dg_nn_softmax_class(void) { return &softmax_class; }

static dg_tensor *relu_fw(dg_layer *self, const dg_tensor *x) { return dg_relu(x); }
static dg_tensor *sigmoid_fw(dg_layer *self, const dg_tensor *x) { return dg_sigmoid(x); }
static dg_tensor *tanh_fw(dg_layer *self, const dg_tensor *x) { return dg_tanh(x); }
static dg_tensor *leaky_fw(dg_layer *self, const dg_tensor *x) {
    return dg_leaky_relu(x, ((act_state *)dg_layer_user(self))->slope);
}
static dg_tensor *gelu_fw(dg_layer *self, const dg_tensor *x) {
    return dg_gelu(x, ((act_state *)dg_layer_user(self))->approximate);
}
static dg_tensor *softmax_fw(dg_layer *self, const dg_tensor *x) {
    int axis = ((act_state *)dg_layer_user(self))->axis, nd = dg_ndim(x);
    char sh[96];
    if (axis < -nd || axis >= nd || nd == 0)
        return DG_LAYER_ERROR(self, "axis %d is out of range for input %s", axis, dg_shape_str(x, sh, sizeof sh));
    return dg_softmax(x, axis);
}

static dg_layer *act_new(const dg_layer_class *cls, dg_layer_forward_fn fn, act_state st) {
    act_state *s = malloc(sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    *s = st;
    return dg_layer_new(cls, fn, s, free);
}

dg_layer *dg_nn_relu(void) { return act_new(&relu_class, relu_fw, (act_state){0}); }
dg_layer *dg_nn_sigmoid(void) { return act_new(&sigmoid_class, sigmoid_fw, (act_state){0}); }
dg_layer *dg_nn_tanh(void) { return act_new(&tanh_class, tanh_fw, (act_state){0}); }

dg_layer *dg_nn_leaky_relu(double slope) {
    dg_layer *l = act_new(&leaky_relu_class, leaky_fw, (act_state){ .slope = slope });
    if (l) dg_layer_set_extra_repr(l, "negative_slope=%g", slope);
    return l;
}
dg_layer *dg_nn_gelu(bool approximate_tanh) {
    dg_layer *l = act_new(&gelu_class, gelu_fw, (act_state){ .approximate = approximate_tanh });
    if (l) dg_layer_set_extra_repr(l, "approximate='%s'", approximate_tanh ? "tanh" : "none");
    return l;
}
dg_layer *dg_nn_softmax(int axis) {
    dg_layer *l = act_new(&softmax_class, softmax_fw, (act_state){ .axis = axis });
    if (l) dg_layer_set_extra_repr(l, "dim=%d", axis);
    return l;
}
