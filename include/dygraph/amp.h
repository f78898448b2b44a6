/* dygraph/amp.h — dynamic loss scaling for mixed-precision training: Paddle's
 * fluid.contrib.mixed_precision.decorate / paddle.amp.GradScaler, torch.cuda.amp.GradScaler.
 *
 * Half-precision (f16) gradients underflow to zero for small values; the loss is multiplied by a
 * large scale before backward, so every gradient carries that factor, and the gradients are divided
 * by it again before the optimizer uses them. A step whose gradients hold an inf or a NaN (the
 * scale was too large) is skipped, and the scale is then adapted with Paddle's update_loss_scaling
 * rule:
 *   bad step (inf/NaN):  good = 0, bad += 1; when bad reaches decr_every_n_nan_or_inf:
 *                        scale = max(scale * decr_ratio, 1), bad = 0
 *   good step:           bad = 0, good += 1; when good reaches incr_every_n_steps:
 *                        scale = scale * incr_ratio if that is finite (else unchanged), good = 0
 * The scale is a float32, as Paddle's, and so is its arithmetic.
 *
 * The scaler works on whatever float dtype the gradients have (f32, f64, f16); bf16 has f32's
 * exponent range and needs no loss scaling (use_dynamic_loss_scaling = false and
 * init_loss_scaling = 1 make the scaler a pass-through that still skips inf/NaN steps).
 *
 * A loop (DataParallel optional):
 *     dg_amp_scaler *sc = dg_amp_decorate(opt, dg_amp_default_params());
 *     dg_amp_set_comm(sc, dg_dp_comm(dp));            // only for several ranks
 *     ...
 *     dg_backward(dg_amp_scale_loss(sc, loss));       // loss * scale
 *     dg_dp_apply_collective_grads(dp);
 *     dg_amp_unscale(sc);                             // grads / scale, records found_inf
 *     dg_clip_grad_norm(params, n, 1.0);              // clipping sees the true gradients
 *     dg_amp_step(sc);                                // optimizer step unless inf/NaN; scale update
 *     dg_optimizer_clear_grad(opt);
 * Gradients are left in place on a skipped step (as Paddle's dygraph scaler and PyTorch's): the
 * loop clears them as usual. */
#ifndef DYGRAPH_AMP_H
#define DYGRAPH_AMP_H

#include "core.h"
#include "tensor.h"
#include "io.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults are Paddle's static-graph fluid.contrib.mixed_precision.decorate: 2^15, dynamic, 1000,
 * 2, 2.0, 0.8. (Paddle's AMP tutorial passes init_loss_scaling = 128; PyTorch's GradScaler
 * is init_scale 2^16, growth_interval 2000, growth_factor 2, backoff_factor 0.5, and one inf step
 * already lowers its scale: decr_every_n_nan_or_inf 1.) */
typedef struct dg_amp_params {
    double init_loss_scaling;        /* finite, >= 1 is usual; > 0 required; held as float32 */
    bool use_dynamic_loss_scaling;   /* false: the scale never changes (inf/NaN steps are still skipped) */
    int incr_every_n_steps;          /* > 0: consecutive good steps before the scale grows */
    int decr_every_n_nan_or_inf;     /* > 0: consecutive bad steps before the scale falls */
    double incr_ratio;               /* finite, > 1 */
    double decr_ratio;               /* in (0, 1) */
    uint32_t params_tag;     /* set by dg_amp_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_amp_params;
DG_API dg_amp_params dg_amp_default_params(void);
/* 0, or DG_EINVAL with a message that starts with `op` (NULL: "amp_params_check") and names the
 * field. dg_amp_decorate and dg_fleet_init (strategy.amp) run it. */
DG_API int dg_amp_params_check(const char *op, dg_amp_params p);

typedef struct dg_amp_scaler dg_amp_scaler;
struct dg_comm;   /* dygraph/dist.h */
/* A scaler bound to opt (borrowed: opt must outlive the scaler; its parameters' gradients are the
 * ones unscaled). NULL with an error naming the field for bad params. */
DG_API dg_amp_scaler *dg_amp_decorate(dg_optimizer *opt, dg_amp_params p);
DG_API void dg_amp_scaler_free(dg_amp_scaler *s);   /* not the optimizer */

/* Several ranks (DataParallel): the found_inf flag is all-reduced (MAX) over comm in every
 * dg_amp_step, so every rank skips or steps together and the scales stay equal. comm is borrowed
 * (dg_dp_comm(dp) or dg_fleet_comm()); NULL detaches. */
DG_API int dg_amp_set_comm(dg_amp_scaler *s, struct dg_comm *comm);

/* loss * scale, a new tensor the graph goes through (backward it instead of loss). */
DG_API dg_tensor *dg_amp_scale_loss(dg_amp_scaler *s, const dg_tensor *loss);
/* Divides every gradient of the optimizer's parameters by the scale and records whether any
 * holds an inf or a NaN (this rank's view). Once per step: a second call before dg_amp_step is a
 * no-op returning 0. Call it before gradient clipping; dg_amp_step calls it if the loop did not. */
DG_API int dg_amp_unscale(dg_amp_scaler *s);
/* Unscales if not done yet, agrees on found_inf over the communicator (if one is set), runs the
 * optimizer's step unless found_inf, then updates the scale (the rule above). 1: stepped,
 * 0: skipped (inf/NaN), < 0: error (nothing stepped; the scale is unchanged). */
DG_API int dg_amp_step(dg_amp_scaler *s);

DG_API double dg_amp_get_scale(const dg_amp_scaler *s);        /* NAN for NULL */
DG_API int dg_amp_good_steps(const dg_amp_scaler *s);          /* Paddle's incr_count; -1 for NULL */
DG_API int dg_amp_bad_steps(const dg_amp_scaler *s);           /* Paddle's decr_count; -1 for NULL */
DG_API bool dg_amp_found_inf(const dg_amp_scaler *s);          /* of the last unscale/step (agreed over ranks after a step) */
DG_API dg_amp_params dg_amp_get_params(const dg_amp_scaler *s);
DG_API dg_optimizer *dg_amp_optimizer(const dg_amp_scaler *s); /* borrowed */

/* The scaler's state as Paddle's GradScaler.state_dict names it: "scale" (f32), "incr_count"
 * and "decr_count" (i64), a new dict the caller frees; what dg_train_checkpoint_save writes as
 * "scaler.<name>". Loading checks every entry first (all three present, right dtypes, a finite
 * scale > 0, counters in [0, n)) and changes nothing when one is wrong. */
DG_API dg_tensor_dict *dg_amp_state_dict(const dg_amp_scaler *s);
DG_API int dg_amp_load_state_dict(dg_amp_scaler *s, const dg_tensor_dict *state);

#ifdef __cplusplus
}
#endif
#endif
