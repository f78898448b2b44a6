#!/usr/bin/python3
# test/goldens/make_nn_goldens.py — PyTorch reference files for the nn layer tests (test/test_nn.c).
#
# How to run:  /usr/bin/python3 test/goldens/make_nn_goldens.py [OUT_DIR]   (default test/goldens)
# Needs PyTorch 1.13 (Debian's python3-torch). Run from the repo root; commit the nn_*.txt files.
# The output is deterministic: running it twice writes byte-identical files.
#
# Format: as make_goldens.py (read by golden_load() in test/test_util.h), one record per tensor:
#   tensor <name> <f32|i64> <ndim> <d0> ... <dn-1>
#   <values in row-major order, whitespace separated; f32 printed with '%.9g'>
#
# Records whose name starts with a digit are the model's state_dict entries under torch's own
# names ("0.weight", "1.running_mean", "1.num_batches_tracked"): the C test loads them by the
# names its own layer tree reports, so any naming difference fails the test.
#
# Models are built in float32 (torch.manual_seed fixed), then evaluated on a float64 copy;
# outputs, gradients of sum(out * gout) and the updated running statistics are rounded to
# float32, so a golden value is the correctly rounded answer and the C side's float32 error is
# the only error measured.
import copy
import os
import sys

import torch
from golden_text import fmt_tensor  # noqa: E402  (test/goldens is the script folder)
import torch.nn as nn

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join("test", "goldens")


def write(fname, tensors):
    assert len(tensors) <= 32, fname  # golden_load holds at most 32 records
    names = [n for n, _ in tensors]
    assert len(set(names)) == len(names), fname
    for name, t in tensors:
        assert len(name) < 64 and t.numel() <= 4096, (fname, name)
    with open(os.path.join(OUT_DIR, fname), "w", newline="\n") as f:
        for name, t in tensors:
            f.write(fmt_tensor(name, t))


def weighting(shape):
    return torch.rand(shape, dtype=torch.float32) + 0.5


def state(model):
    return [(k, v.clone()) for k, v in model.state_dict().items()]


def run_f64(model, x, training):
    """Forward/backward of a float64 copy of the float32 model on x; returns
    (out, gout, grads by parameter name, grad of x, the f64 model after the call)."""
    m = copy.deepcopy(model).double()
    m.train(training)
    xd = x.to(torch.float64).requires_grad_(True)
    out = m(xd)
    gout = weighting(out.shape)
    (out * gout.to(torch.float64)).sum().backward()
    grads = [("grad_" + k, p.grad) for k, p in m.named_parameters()]
    return out.detach(), gout, grads, xd.grad, m


def linear_golden():
    """Sequential(Linear(5, 4), ReLU(), Linear(4, 3)) on a 2-D and a 3-D input."""
    torch.manual_seed(11)
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    x = torch.randn(6, 5)
    x3 = torch.randn(2, 3, 5)
    out, gout, grads, gx, _ = run_f64(model, x, True)
    out3 = run_f64(model, x3, True)[0]
    write("nn_linear.txt", state(model) + [("x", x), ("out", out), ("gout", gout), ("grad_x", gx)] + grads
          + [("x3", x3), ("out3", out3)])


def conv_block_golden():
    """Conv2d+BatchNorm2d+ReLU+MaxPool2d, then a grouped strided conv without bias,
    AdaptiveAvgPool2d, Flatten and Linear: one training step (batch statistics, running-stat
    update, gradients) and then eval mode with the updated statistics."""
    torch.manual_seed(12)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, bias=False), nn.AdaptiveAvgPool2d((1, 1)),
        nn.Flatten(), nn.Linear(6, 3))
    with torch.no_grad():  # non-trivial BN state, so loading it matters
        bn = model[1]
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
        bn.running_mean.uniform_(-0.3, 0.3)
        bn.running_var.uniform_(0.5, 2.0)
        bn.num_batches_tracked.fill_(3)
    x = torch.randn(2, 3, 8, 8)
    out, gout, grads, gx, m = run_f64(model, x, True)
    after = [("after_" + k, v) for k, v in m.state_dict().items() if k.startswith("1.r") or k.startswith("1.n")]
    m.eval()
    with torch.no_grad():
        out_eval = m(x.to(torch.float64))
    write("nn_conv_block.txt", state(model) + [("x", x), ("out_train", out), ("gout", gout), ("grad_x", gx)]
          + grads + after + [("out_eval", out_eval)])


def names_golden():
    """The state_dict names, shapes and parameter count of Sequential(Linear, BatchNorm1d,
    ReLU, Dropout, Linear); values are irrelevant."""
    torch.manual_seed(13)
    model = nn.Sequential(nn.Linear(10, 20), nn.BatchNorm1d(20), nn.ReLU(), nn.Dropout(0.5), nn.Linear(20, 2))
    count = sum(p.numel() for p in model.parameters())
    nparams = len(list(model.parameters()))
    write("nn_names.txt", state(model) + [("param_count", torch.tensor([count, nparams]))])


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    linear_golden()
    conv_block_golden()
    names_golden()


if __name__ == "__main__":
    main()
