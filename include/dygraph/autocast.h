/* dygraph/autocast.h — automatic mixed precision for ops: torch.autocast /
 * paddle.amp.auto_cast. Between dg_autocast_begin and dg_autocast_end (on the calling thread;
 * regions nest), ops on Paddle's white list run in the low dtype, ops on its black list in
 * float32, and the rest follow their inputs:
 *   white: conv2d, matmul, linear
 *   black: exp, log, mean, sum, softmax, log_softmax, cross_entropy (softmax with cross entropy),
 *          binary_cross_entropy_with_logits (sigmoid cross entropy), nll_loss, mse_loss
 * "Run in dtype" means: the op's float32 / float16 / bfloat16 inputs are cast to it first
 * (float64 and integer inputs are left as they are), the casts are recorded, so a float32
 * parameter gets its gradient in float32. An op that follows its inputs promotes mixed ones as
 * torch does (bf16 + f32 -> f32): a bf16 activation plus a bf16 residual stays bf16, batch norm
 * on a bf16 input with f32 parameters gives bf16.
 *
 * Custom lists (paddle's custom_white_list / custom_black_list) move ops between the lists.
 * Ops that take part, and so may be named: the two lists above plus conv1d, conv_transpose2d,
 * batch_norm, layer_norm, group_norm, relu, sigmoid, tanh, gelu, embedding. A name outside them
 * is refused by dg_autocast_begin_ext.
 *
 * O1 is autocast alone. O2 also keeps the parameters in the low dtype (dg_layer_to_dtype with
 * keep_norm_f32, nn.h) and the optimizer steps f32 master copies of them (automatic for
 * half parameters, optim.h). Float16 needs loss scaling (amp.h); bfloat16 does not. */
#ifndef DYGRAPH_AUTOCAST_H
#define DYGRAPH_AUTOCAST_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_autocast_params {
    dg_dtype dtype;                          /* DG_BF16 (default) or DG_F16 */
    const char *const *custom_white_list;    /* op names to run in dtype; may be NULL */
    int n_white;
    const char *const *custom_black_list;    /* op names to run in float32; may be NULL */
    int n_black;
    uint32_t params_tag;     /* set by dg_autocast_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_autocast_params;
DG_API dg_autocast_params dg_autocast_default_params(void);

/* Opens a region on this thread; 0 or an error (a dtype other than f16/bf16, an unknown op
 * name, a name on both custom lists). */
DG_API int dg_autocast_begin(dg_dtype dtype);
DG_API int dg_autocast_begin_ext(dg_autocast_params p);
/* Closes the innermost region; an error when none is open. */
DG_API int dg_autocast_end(void);
DG_API bool dg_autocast_enabled(void);
/* The innermost region's low dtype; DG_F32 when no region is open. */
DG_API dg_dtype dg_autocast_dtype(void);

#ifdef __cplusplus
}
#endif
#endif
