/* nn/fuse.c — inference-time folding of Conv2d + BatchNorm (ResNet's every conv): in eval mode
 * batch norm is an affine map per channel, so conv(x, w) + b followed by it is one convolution
 * with w' = w * s and b' = beta + (b - running_mean) * s, s = gamma / sqrt(running_var + eps).
 * That removes a full pass over every activation and its buffer; a ReLU after it is applied to
 * the convolution's output in place (so the convolution's output and the ReLU's never coexist).
 * Training, or any pass that records gradients, runs the convolution, then the batch norm with
 * its relu fused into the same pass (dg_batch_norm_relu). */
#include "nn_internal.h"

dg_tensor *dg_nn_conv_bn(dg_layer *conv, dg_layer *bn, const dg_tensor *x, bool relu) {
    dg_conv2d_params cp;
    dg_tensor *w, *b, *gamma, *beta, *rm, *rv;
    double eps;
    bool fold = !dg_is_grad_enabled() && !dg_layer_is_training(bn) && dg_nn_conv2d_parts(conv, &cp, &w, &b) &&
                dg_nn_batch_norm_parts(bn, &eps, &gamma, &beta, &rm, &rv) && rm && rv;
    if (!fold) {   /* training: the batch norm and its relu in one pass */
        dg_tensor *y = dg_forward(conv, x);
        return dg_advance(y, relu ? dg_nn_batch_norm_relu_forward(bn, y) : dg_forward(bn, y));
    }
    int64_t c = dg_numel(rm);
    dg_scope *sc = dg_scope_begin();   /* the folded weight and shift die here */
    dg_tensor *s = dg_rdiv_scalar(dg_sqrt(dg_add_scalar(rv, eps)), 1.0);   /* 1 / sqrt(var + eps) */
    if (gamma) s = dg_mul(s, gamma);
    dg_tensor *wf = dg_mul(w, dg_reshape(s, DG_SHAPE(c, 1, 1, 1)));
    dg_tensor *shift = dg_mul(b ? dg_sub(b, rm) : dg_neg(rm), s);
    if (beta) shift = dg_add(shift, beta);
    /* mixed precision: the fold is computed where the BN parameters are (f32), and the conv then
     * runs in autocast's dtype (conv2d is on its white list), or in the input's */
    dg_dtype dt = dg_autocast_enabled() ? dg_autocast_dtype() : dg_dtype_of(x);
    if (dg_dtype_of(x) != dt) x = dg_cast(x, dt);
    if (dg_dtype_of(wf) != dt) wf = dg_cast(wf, dt);
    if (dg_dtype_of(shift) != dt) shift = dg_cast(shift, dt);
    dg_tensor *y = dg_keep_in_parent(relu ? dg_conv2d_relu_nograd(x, wf, shift, cp) : dg_conv2d(x, wf, shift, cp));
    dg_scope_end(sc);
    return y;
}
