/* test/gpu/test_gpu_losses.c — CPU vs gpu:0 for every loss op of ops.h: mse/l1 with each
 * reduction, square_error_cost, cross_entropy (hard labels [N] and [N,1], soft labels,
 * ignore_index with each reduction, probabilities as input, class axis 1 on [N,C,H,W], 1000
 * classes, class weights, label smoothing), nll_loss (weights), binary_cross_entropy on
 * probabilities and with logits (weight, pos_weight), smooth_l1, huber, kl_div, and accuracy
 * (top-1 and top-k). */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define GP(lo, hi, ...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), lo, hi }
#define C(lo, hi, ...) { GT_CONST, GT_SHAPE(__VA_ARGS__), lo, hi }
#define LAB(hi, ...) { GT_LABELS, GT_SHAPE(__VA_ARGS__), 0, hi }
#define SOFT(...) { GT_SOFT, GT_SHAPE(__VA_ARGS__), 0, 0 }

F(f_mse, dg_mse_loss(in[0], in[1]))
F(f_mse_sum, dg_mse_loss_ext(in[0], in[1], DG_REDUCE_SUM))
F(f_mse_none, dg_mse_loss_ext(in[0], in[1], DG_REDUCE_NONE))
F(f_l1_mean, dg_l1_loss(in[0], in[1], DG_REDUCE_MEAN))
F(f_l1_sum, dg_l1_loss(in[0], in[1], DG_REDUCE_SUM))
F(f_l1_none, dg_l1_loss(in[0], in[1], DG_REDUCE_NONE))
F(f_sq, dg_square_error_cost(in[0], in[1]))

/* the settings are assignments to p, which starts as dg_cross_entropy_default_params() */
#define CE(name, ...) static dg_tensor *name(dg_tensor *const *in) { \
        dg_cross_entropy_params p = dg_cross_entropy_default_params(); \
        __VA_ARGS__; \
        return dg_cross_entropy_ext(in[0], in[1], p); }
F(f_ce, dg_cross_entropy(in[0], in[1]))
CE(f_ce_sum, p.reduction = DG_REDUCE_SUM)
CE(f_ce_none, p.reduction = DG_REDUCE_NONE)
CE(f_ce_soft, p.soft_label = true)
CE(f_ce_soft_none, p.soft_label = true, p.reduction = DG_REDUCE_NONE)
CE(f_ce_ignore_mean, p.use_ignore_index = true, p.ignore_index = 1)
CE(f_ce_ignore_sum, p.use_ignore_index = true, p.ignore_index = 1, p.reduction = DG_REDUCE_SUM)
CE(f_ce_ignore_none, p.use_ignore_index = true, p.ignore_index = 1, p.reduction = DG_REDUCE_NONE)
CE(f_ce_axis1, p.axis = 1)
CE(f_ce_axis1_none, p.axis = 1, p.reduction = DG_REDUCE_NONE)
/* probabilities in (the log is taken inside): softmax first so the input is a distribution */
static dg_tensor *f_ce_probs(dg_tensor *const *in) {
    dg_cross_entropy_params cep = dg_cross_entropy_default_params();
    cep.input_is_probs = true;
    return dg_cross_entropy_ext(dg_softmax(in[0], -1), in[1], cep);
}
static dg_tensor *f_nll(dg_tensor *const *in) { return dg_nll_loss(dg_log_softmax(in[0], -1), in[1], DG_REDUCE_MEAN, -100); }
static dg_tensor *f_nll_sum(dg_tensor *const *in) { return dg_nll_loss(dg_log_softmax(in[0], -1), in[1], DG_REDUCE_SUM, -100); }
static dg_tensor *f_nll_none_ignore(dg_tensor *const *in) {
    return dg_nll_loss(dg_log_softmax(in[0], -1), in[1], DG_REDUCE_NONE, 2);
}
F(f_bce_mean, dg_binary_cross_entropy_with_logits(in[0], in[1], DG_REDUCE_MEAN))
F(f_bce_sum, dg_binary_cross_entropy_with_logits(in[0], in[1], DG_REDUCE_SUM))
F(f_bce_none, dg_binary_cross_entropy_with_logits(in[0], in[1], DG_REDUCE_NONE))
CE(f_ce_weight_smooth, p.weight = in[2], p.label_smoothing = 0.1)
CE(f_ce_weight_smooth_ignore_none, p.weight = in[2], p.label_smoothing = 0.2, p.use_ignore_index = true, p.ignore_index = 1,
   p.reduction = DG_REDUCE_NONE)
CE(f_ce_soft_weight_smooth, p.soft_label = true, p.weight = in[2], p.label_smoothing = 0.3)
static dg_tensor *f_nll_weight(dg_tensor *const *in) {
    dg_nll_loss_params p = dg_nll_loss_default_params();
    p.weight = in[2];
    p.ignore_index = 2;
    return dg_nll_loss_ext(dg_log_softmax(in[0], -1), in[1], p);
}
static dg_tensor *f_bce_probs_weight(dg_tensor *const *in) {
    dg_bce_params p = dg_bce_default_params();
    p.weight = in[2];
    return dg_binary_cross_entropy(in[0], in[1], p);
}
static dg_tensor *f_bce_logits_pos_weight(dg_tensor *const *in) {
    dg_bce_params p = dg_bce_default_params();
    p.pos_weight = in[2];
    p.reduction = DG_REDUCE_NONE;
    return dg_binary_cross_entropy_with_logits_ext(in[0], in[1], p);
}
F(f_smooth_l1, dg_smooth_l1_loss(in[0], in[1], DG_REDUCE_MEAN, 0.5))
F(f_huber_none, dg_huber_loss(in[0], in[1], DG_REDUCE_NONE, 1.5))
F(f_kl_batchmean, dg_kl_div(dg_log_softmax(in[0], -1), dg_softmax(in[1], -1), DG_REDUCE_BATCHMEAN, false))
F(f_kl_log_target, dg_kl_div(dg_log_softmax(in[0], -1), dg_log_softmax(in[1], -1), DG_REDUCE_SUM, true))
F(f_acc1, dg_accuracy(in[0], in[1], 1))
F(f_acc3, dg_accuracy(in[0], in[1], 3))

static const gt_op_case cases[] = {
    { "mse_loss mean", f_mse, 2, IN(G(4, 3), G(4, 3)), GT_RED, GT_EW },
    { "mse_loss sum", f_mse_sum, 2, IN(G(4, 3), G(4, 3)), GT_RED, GT_EW },
    { "mse_loss none", f_mse_none, 2, IN(G(4, 3), G(4, 3)), GT_EW, GT_EW },
    { "mse_loss mean [256,300]", f_mse, 2, IN(G(256, 300), G(256, 300)), GT_RED, GT_EW },
    { "l1_loss mean", f_l1_mean, 2, IN(G(4, 3), G(4, 3)), GT_RED, GT_EW },
    { "l1_loss sum", f_l1_sum, 2, IN(G(4, 3), G(4, 3)), GT_RED, GT_EW },
    { "l1_loss none", f_l1_none, 2, IN(G(4, 3), G(4, 3)), GT_EW, GT_EW },
    { "square_error_cost", f_sq, 2, IN(G(5, 2), G(5, 2)), GT_EW, GT_EW },
    { "cross_entropy labels [N]", f_ce, 2, IN(GP(-2, 2, 8, 5), LAB(5, 8)), GT_RED, GT_RED },
    { "cross_entropy labels [N,1]", f_ce, 2, IN(GP(-2, 2, 8, 5), LAB(5, 8, 1)), GT_RED, GT_RED },
    { "cross_entropy 1000 classes", f_ce, 2, IN(GP(-3, 3, 64, 1000), LAB(1000, 64)), GT_RED, GT_RED },
    { "cross_entropy sum", f_ce_sum, 2, IN(GP(-2, 2, 8, 5), LAB(5, 8)), GT_RED, GT_RED },
    { "cross_entropy none", f_ce_none, 2, IN(GP(-2, 2, 8, 5), LAB(5, 8)), GT_RED, GT_RED },
    { "cross_entropy soft labels", f_ce_soft, 2, IN(GP(-2, 2, 6, 4), SOFT(6, 4)), GT_RED, GT_RED },
    { "cross_entropy soft labels none", f_ce_soft_none, 2, IN(GP(-2, 2, 6, 4), SOFT(6, 4)), GT_RED, GT_RED },
    { "cross_entropy ignore_index mean", f_ce_ignore_mean, 2, IN(GP(-2, 2, 12, 4), LAB(4, 12)), GT_RED, GT_RED },
    { "cross_entropy ignore_index sum", f_ce_ignore_sum, 2, IN(GP(-2, 2, 12, 4), LAB(4, 12)), GT_RED, GT_RED },
    { "cross_entropy ignore_index none", f_ce_ignore_none, 2, IN(GP(-2, 2, 12, 4), LAB(4, 12, 1)), GT_RED, GT_RED },
    { "cross_entropy probabilities", f_ce_probs, 2, IN(GP(-2, 2, 8, 5), LAB(5, 8)), GT_RED, GT_RED },
    { "cross_entropy axis 1 [N,C,H,W]", f_ce_axis1, 2, IN(GP(-2, 2, 2, 4, 3, 5), LAB(4, 2, 3, 5)), GT_RED, GT_RED },
    { "cross_entropy axis 1 none", f_ce_axis1_none, 2, IN(GP(-2, 2, 2, 4, 3), LAB(4, 2, 3)), GT_RED, GT_RED },
    { "nll_loss mean", f_nll, 2, IN(GP(-2, 2, 8, 5), LAB(5, 8)), GT_RED, GT_RED },
    { "nll_loss sum", f_nll_sum, 2, IN(GP(-2, 2, 8, 5), LAB(5, 8)), GT_RED, GT_RED },
    { "nll_loss none ignore_index 2", f_nll_none_ignore, 2, IN(GP(-2, 2, 10, 3), LAB(3, 10)), GT_RED, GT_RED },
    { "bce_with_logits mean", f_bce_mean, 2, IN(GP(-4, 4, 4, 3), C(0, 1, 4, 3)), GT_RED, GT_EW },
    { "bce_with_logits sum", f_bce_sum, 2, IN(GP(-4, 4, 4, 3), C(0, 1, 4, 3)), GT_RED, GT_EW },
    { "bce_with_logits none", f_bce_none, 2, IN(GP(-30, 30, 4, 3), C(0, 1, 4, 3)), GT_EW, GT_EW },
    { "cross_entropy weight, label_smoothing 0.1", f_ce_weight_smooth, 3, IN(GP(-2, 2, 8, 5), LAB(5, 8), C(0.5, 1.5, 5)), GT_RED, GT_RED },
    { "cross_entropy weight, smoothing, ignore_index none", f_ce_weight_smooth_ignore_none, 3,
      IN(GP(-2, 2, 12, 4), LAB(4, 12), C(0.5, 1.5, 4)), GT_RED, GT_RED },
    { "cross_entropy soft labels, weight, smoothing", f_ce_soft_weight_smooth, 3, IN(GP(-2, 2, 6, 4), SOFT(6, 4), C(0.5, 1.5, 4)),
      GT_RED, GT_RED },
    { "nll_loss weight, ignore_index 2", f_nll_weight, 3, IN(GP(-2, 2, 10, 3), LAB(3, 10), C(0.5, 1.5, 3)), GT_RED, GT_RED },
    { "binary_cross_entropy weight", f_bce_probs_weight, 3, IN(GP(0.05, 0.95, 4, 3), C(0, 1, 4, 3), C(0.5, 1.5, 4, 1)), GT_RED, GT_EW },
    { "bce_with_logits pos_weight none", f_bce_logits_pos_weight, 3, IN(GP(-4, 4, 4, 3), C(0, 1, 4, 3), C(0.2, 3, 3)), GT_EW, GT_EW },
    { "smooth_l1 beta 0.5", f_smooth_l1, 2, IN(G(5, 4), G(5, 4)), GT_RED, GT_EW },
    { "huber delta 1.5 none", f_huber_none, 2, IN(G(5, 4), G(5, 4)), GT_EW, GT_EW },
    { "kl_div batchmean", f_kl_batchmean, 2, IN(G(4, 5), G(4, 5)), GT_RED, GT_RED },
    { "kl_div log_target sum", f_kl_log_target, 2, IN(G(4, 5), G(4, 5)), GT_RED, GT_RED },
    { "accuracy top-1", f_acc1, 2, IN(C(-1, 1, 50, 10), LAB(10, 50)), GT_EXACT, GT_EXACT },
    { "accuracy top-3 labels [N,1]", f_acc3, 2, IN(C(-1, 1, 50, 10), LAB(10, 50, 1)), GT_EXACT, GT_EXACT },
};

GT_TABLE_TESTS(gpu_losses, cases, gt_expect_op_matches_cpu, 4000)
