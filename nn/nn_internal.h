/* nn/nn_internal.h — what the files of nn/ share: the public headers they are written against
 * (dygraph.h and dygraph/extension.h, like a user's layer), and what they read from each
 * other's layers (not public): the settings the inference-time folding of nn/fuse.c needs. */
#ifndef DG_NN_INTERNAL_H
#define DG_NN_INTERNAL_H

#include <dygraph.h>
#include <dygraph/extension.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DG_ERR DG_RAISE
/* a tensor's shape for a message, e.g. "[2, 3]" */
#define DG_SHAPE_STR(t) dg_shape_str((t), (char[96]){0}, 96)

/* A Conv2d's convolution settings, weight and bias (NULL when none); false for another layer. */
bool dg_nn_conv2d_parts(const dg_layer *l, dg_conv2d_params *p, dg_tensor **weight, dg_tensor **bias);
/* A BatchNorm's eps, affine tensors (NULL when not affine) and running statistics (NULL when
 * not tracked); false for another layer. */
bool dg_nn_batch_norm_parts(const dg_layer *l, double *eps, dg_tensor **weight, dg_tensor **bias,
                            dg_tensor **running_mean, dg_tensor **running_var);
/* conv then bn (then ReLU when relu): in eval mode with gradients off, one convolution with
 * the batch norm folded into its weight and bias; otherwise the two layers as they are. */
dg_tensor *dg_nn_conv_bn(dg_layer *conv, dg_layer *bn, const dg_tensor *x, bool relu);
/* relu(bn(x)) in one fused pass when bn is a BatchNorm layer (dg_batch_norm_relu), else the two */
dg_tensor *dg_nn_batch_norm_relu_forward(dg_layer *bn, const dg_tensor *x);

/* The text dg_layer_set_extra_repr gave the layer ("" when none), for printing (layer_print.c). */
const char *dg_nn_layer_extra_repr(const dg_layer *l);
/* The recurrent layers' and cells' parameters (nn/rnn.c): weight_ih<suffix>, weight_hh<suffix>
 * and (bias) bias_ih<suffix>, bias_hh<suffix> registered on l and initialised as torch does;
 * and the four read back through the tree (biases NULL when absent). */
int dg_nn_rnn_add_weights(dg_layer *l, dg_rnn_mode mode, int64_t in, int64_t hidden, bool bias, dg_dtype dt, const char *suffix);
void dg_nn_rnn_weights(const dg_layer *l, const char *suffix, dg_tensor **w);

#endif
