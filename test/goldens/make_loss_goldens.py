#!/usr/bin/python3
# test/goldens/make_loss_goldens.py — PyTorch reference files for the losses' options
# (test/test_golden.c, "loss_*.txt"): cross-entropy with class weights and label smoothing (hard
# and soft labels, ignored rows), nll_loss with weights, binary cross-entropy on probabilities
# and with logits (weight, pos_weight, logits of exactly 0), smooth_l1, huber and kl_div.
#
# How to run:   make goldens   (or /usr/bin/python3 test/goldens/make_loss_goldens.py [OUT_DIR])
# Same file format and method as make_goldens.py (float32 inputs, float64 evaluation, gradients of
# sum(out * gout)); deterministic. Each file holds:
#   iparams (i64): kind (0 cross_entropy, 1 nll_loss, 2 binary_cross_entropy, 3 bce with logits,
#                  4 smooth_l1, 5 huber, 6 kl_div), reduction (0 mean, 1 sum, 2 none,
#                  3 batchmean), soft_label or log_target, use_ignore_index, ignore_index,
#                  has_weight, has_pos_weight
#   fparams (f32): label_smoothing, or beta / delta
#   x, label, [weight], [pos_weight], out, gout, grad_x
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens as mg  # noqa: E402  (write, run_f64, i64, randn; OUT_DIR from argv)

torch.manual_seed(20261125)
RED = {"mean": 0, "sum": 1, "none": 2, "batchmean": 3}


def case(fname, kind, reduction, x, label, fn, flag=0, ignore=None, weight=None, pos_weight=None, fparam=0.0):
    out, gout, grads = mg.run_f64(fn, {"x": x, "label": label, "weight": weight, "pos_weight": pos_weight}, ["x"])
    ip = mg.i64(kind, RED[reduction], flag, int(ignore is not None), -100 if ignore is None else ignore,
                int(weight is not None), int(pos_weight is not None))
    recs = [("iparams", ip), ("fparams", torch.tensor([fparam], dtype=torch.float32)), ("x", x), ("label", label)]
    recs += [("weight", weight)] if weight is not None else []
    recs += [("pos_weight", pos_weight)] if pos_weight is not None else []
    mg.write(fname, recs + [("out", out), ("gout", gout)] + grads)


def hard_labels(n, c, ignored=()):
    y = torch.randint(0, c, (n,), dtype=torch.int64)
    for r in ignored:
        y[r] = -100
    return y


def ce(fname, reduction, weight=False, smoothing=0.0, ignored=(), soft=False, shape=(6, 5)):
    x = mg.randn(*shape) * 2
    c = shape[1]
    w = torch.rand(c, dtype=torch.float32) + 0.25 if weight else None
    label = torch.softmax(mg.randn(*shape), dim=1) if soft else hard_labels(shape[0], c, ignored)

    def fn(x, label, weight, pos_weight):
        return F.cross_entropy(x, label, weight=weight, reduction=reduction, ignore_index=-100, label_smoothing=smoothing)

    case(fname, 0, reduction, x, label, fn, flag=int(soft), ignore=-100 if ignored else None, weight=w, fparam=smoothing)


def nll(fname, reduction, ignored=(), shape=(6, 5)):
    x = torch.log_softmax(mg.randn(*shape), dim=1)
    c = shape[1]
    w = torch.rand(c, dtype=torch.float32) + 0.25
    label = torch.randint(0, c, (shape[0],) + tuple(shape[2:]), dtype=torch.int64)
    for r in ignored:
        label.view(-1)[r] = -100

    def fn(x, label, weight, pos_weight):
        return F.nll_loss(x, label, weight=weight, reduction=reduction, ignore_index=-100)

    case(fname, 1, reduction, x, label, fn, ignore=-100, weight=w)


def bce(fname, reduction, weight=True):
    x = torch.rand(4, 3, dtype=torch.float32) * 0.98 + 0.01
    label = torch.rand(4, 3, dtype=torch.float32)
    w = torch.rand(4, 1, dtype=torch.float32) + 0.5 if weight else None

    def fn(x, label, weight, pos_weight):
        return F.binary_cross_entropy(x, label, weight=weight, reduction=reduction)

    case(fname, 2, reduction, x, label, fn, weight=w)


def bce_logits(fname, reduction, weight=True, pos_weight=True):
    x = mg.randn(4, 3) * 3
    x[0, :] = 0.0          # logits of exactly 0: where relu/abs kinks meet
    label = (torch.rand(4, 3) > 0.5).to(torch.float32)
    w = torch.rand(4, 1, dtype=torch.float32) + 0.5 if weight else None
    pw = torch.rand(3, dtype=torch.float32) * 3 + 0.2 if pos_weight else None

    def fn(x, label, weight, pos_weight):
        return F.binary_cross_entropy_with_logits(x, label, weight=weight, pos_weight=pos_weight, reduction=reduction)

    case(fname, 3, reduction, x, label, fn, weight=w, pos_weight=pw)


def quad_linear(fname, kind, reduction, knee):
    x = mg.randn(5, 4) * 2
    label = x + mg.randn(5, 4) * 1.5
    if knee > 0:
        label[0, 0] = x[0, 0]   # a zero difference (with beta 0 torch's kernel gives it -1, l1_loss 0: not compared)

    def fn(x, label, weight, pos_weight):
        if kind == 4:
            return F.smooth_l1_loss(x, label, reduction=reduction, beta=knee)
        return F.huber_loss(x, label, reduction=reduction, delta=knee)

    case(fname, kind, reduction, x, label, fn, fparam=knee)


def kl(fname, reduction, log_target=False):
    x = torch.log_softmax(mg.randn(4, 5), dim=1)
    t = torch.softmax(mg.randn(4, 5) * 2, dim=1)
    t[1, 2] = 0.0   # a zero target: 0 log 0 = 0
    if log_target:
        t = torch.log_softmax(mg.randn(4, 5), dim=1)

    def fn(x, label, weight, pos_weight):
        return F.kl_div(x, label, reduction=reduction, log_target=log_target)

    case(fname, 6, reduction, x, t, fn, flag=int(log_target))


def main():
    os.makedirs(mg.OUT_DIR, exist_ok=True)
    ce("loss_ce_weight_mean.txt", "mean", weight=True)
    ce("loss_ce_weight_ignore_mean.txt", "mean", weight=True, ignored=(1,))
    ce("loss_ce_smooth_ignore_mean.txt", "mean", smoothing=0.1, ignored=(3,))
    ce("loss_ce_weight_smooth_ignore_mean.txt", "mean", weight=True, smoothing=0.2, ignored=(0,))
    ce("loss_ce_weight_smooth_sum.txt", "sum", weight=True, smoothing=0.15)
    ce("loss_ce_weight_smooth_none.txt", "none", weight=True, smoothing=0.3, ignored=(2,))
    ce("loss_ce_soft_weight_smooth_mean.txt", "mean", weight=True, smoothing=0.1, soft=True)
    nll("loss_nll_weight_ignore_mean.txt", "mean", ignored=(4,))
    nll("loss_nll_weight_none.txt", "none")
    nll("loss_nll_weight_3d_mean.txt", "mean", shape=(2, 4, 3))
    bce("loss_bce_weight_mean.txt", "mean")
    bce("loss_bce_none.txt", "none", weight=False)
    bce_logits("loss_bce_logits_weight_pos_weight_mean.txt", "mean")
    bce_logits("loss_bce_logits_pos_weight_none.txt", "none", weight=False)
    quad_linear("loss_smooth_l1_beta05_mean.txt", 4, "mean", 0.5)
    quad_linear("loss_smooth_l1_beta0_sum.txt", 4, "sum", 0.0)
    quad_linear("loss_huber_delta2_none.txt", 5, "none", 2.0)
    kl("loss_kl_div_batchmean.txt", "batchmean")
    kl("loss_kl_div_none.txt", "none")
    kl("loss_kl_div_log_target_mean.txt", "mean", log_target=True)


if __name__ == "__main__":
    main()
