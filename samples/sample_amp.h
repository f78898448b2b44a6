/* samples/sample_amp.h — the mixed-precision flags every training sample takes, as Paddle's
 * collective tutorial trains with --fp16: --amp bf16|fp16 (autocast, O1), --amp-level O1|O2
 * (O2: the model's parameters in the low type but for normalisation layers, f32 master weights
 * in the optimizer), --init-loss-scaling S (fp16's dynamic loss scaling starts there; Paddle's
 * decorate default 2^15, the tutorial passes 128). bf16 needs no loss scaling. */
#ifndef DG_SAMPLE_AMP_H
#define DG_SAMPLE_AMP_H

#include "sample_util.h"
#include <math.h>

typedef struct su_amp {
    dg_dtype dtype;            /* DG_F32: mixed precision off */
    int level;                 /* 1 or 2 */
    double init_scale;
    dg_amp_scaler *scaler;     /* fp16 only */
} su_amp;

/* The flags, checked as argparse does: a bad value is a usage error (exit 2). */
static inline su_amp su_amp_flags(int argc, char **argv) {
    su_amp a = { .dtype = DG_F32, .level = 1, .init_scale = 32768.0 };
    const char *amp = su_flag(argc, argv, "--amp", NULL), *lv = su_flag(argc, argv, "--amp-level", "O1");
    if (amp && strcmp(amp, "bf16") == 0) a.dtype = DG_BF16;
    else if (amp && strcmp(amp, "fp16") == 0) a.dtype = DG_F16;
    else if (amp) { fprintf(stderr, "%s: error: argument --amp: invalid choice: '%s' (choose from 'bf16', 'fp16')\n", argv[0], amp); exit(2); }
    if (strcmp(lv, "O1") == 0) a.level = 1;
    else if (strcmp(lv, "O2") == 0) a.level = 2;
    else { fprintf(stderr, "%s: error: argument --amp-level: invalid choice: '%s' (choose from 'O1', 'O2')\n", argv[0], lv); exit(2); }
    a.init_scale = su_flag_num(argc, argv, "--init-loss-scaling", a.init_scale);
    if (!(a.init_scale > 0) || isinf(a.init_scale)) {
        fprintf(stderr, "%s: error: argument --init-loss-scaling: must be a positive number, got %g\n", argv[0], a.init_scale);
        exit(2);
    }
    return a;
}

/* Before the optimizer is made: O2 casts the model. */
static inline int su_amp_model(su_amp *a, dg_layer *net) {
    return a->dtype != DG_F32 && a->level == 2 ? dg_layer_to_dtype(net, a->dtype, true) : 0;
}
/* After: fp16 gets its dynamic loss scaler (on the ranks' comm when there are several). */
static inline int su_amp_optimizer(su_amp *a, dg_optimizer *opt, dg_comm *comm) {
    if (a->dtype != DG_F16) return 0;
    dg_amp_params p = dg_amp_default_params();
    p.init_loss_scaling = a->init_scale;
    if (!(a->scaler = dg_amp_decorate(opt, p))) return -1;
    return comm ? dg_amp_set_comm(a->scaler, comm) : 0;
}
/* The forward and the loss run in a region (evaluation too: O2's parameters are half). */
static inline int su_amp_begin(const su_amp *a) { return a->dtype == DG_F32 ? 0 : dg_autocast_begin(a->dtype); }
static inline int su_amp_end(const su_amp *a) { return a->dtype == DG_F32 ? 0 : dg_autocast_end(); }
/* backward and step (through the scaler for fp16: a step with inf/NaN gradients is skipped);
 * `between` (may be NULL) runs after backward, before the step: DataParallel's all-reduce */
static inline int su_amp_backward_step(su_amp *a, dg_tensor *loss, dg_optimizer *opt, int (*between)(void *), void *user) {
    if (!a->scaler) return dg_backward(loss) || (between && between(user)) || dg_optimizer_step(opt) ? -1 : 0;
    if (dg_backward(dg_amp_scale_loss(a->scaler, loss)) || (between && between(user))) return -1;
    return dg_amp_step(a->scaler) < 0 ? -1 : 0;
}
static inline void su_amp_free(su_amp *a) { dg_amp_scaler_free(a->scaler); a->scaler = NULL; }

#endif
