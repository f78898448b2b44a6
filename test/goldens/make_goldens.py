#!/usr/bin/python3
# test/goldens/make_goldens.py — PyTorch reference ("golden") files for test/test_golden.c and
# test/test_mlp_train.c.
#
# How to run:   make goldens
#          or:  /usr/bin/python3 test/goldens/make_goldens.py [OUT_DIR]     (default test/goldens)
# Needs Debian's python3-torch (PyTorch 1.13 CPU). Run from the repo root; commit the .txt files.
# The output is deterministic: running it twice writes byte-identical files.
#
# File format (read by golden_load() in test/test_util.h), one record per tensor:
#   tensor <name> <f32|i64> <ndim> <d0> ... <dn-1>
#   <values in row-major order, whitespace separated; f32 printed with '%.9g' (round-trip exact)>
#
# Every op case holds its inputs, its parameters (small i64 tensors, so the C side cannot drift
# from the script), the output "out", a random weighting "gout" shaped like out, and the
# gradients "grad_<input>" of sum(out * gout) with respect to each float input.
#
# Inputs are drawn in float32 (torch.manual_seed fixed). Outputs and gradients of the op cases
# are computed in float64 from those float32 inputs and then rounded to float32, so a golden
# value is the correctly rounded answer, not PyTorch's own float32 rounding; the C side's f32
# error is then the only error measured. The training golden (mlp_train.txt) is a float32 run,
# exactly what PyTorch reaches in float32.
#
# Layout conventions of the C API (see include/dygraph/ops.h):
#   conv2d weight [OC, C/groups, KH, KW] (as F.conv2d); linear weight [in, out] (Paddle layout,
#   i.e. the transpose of torch's nn.Linear.weight); pools/batch_norm as torch.nn.functional.
import os
import sys

import torch
from golden_text import fmt_tensor  # noqa: E402  (test/goldens is the script folder)
import torch.nn.functional as F

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join("test", "goldens")


def write(fname, tensors):
    assert len(tensors) <= 32, fname  # golden_load holds at most 32 records
    for name, t in tensors:
        assert len(name) < 64 and t.numel() <= 4096, (fname, name)
    path = os.path.join(OUT_DIR, fname)
    with open(path, "w", newline="\n") as f:
        for name, t in tensors:
            f.write(fmt_tensor(name, t))


def i64(*vals):
    return torch.tensor(vals, dtype=torch.int64)


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def weighting(shape):
    """A random weighting in [0.5, 1.5), so every output element matters in the gradient."""
    return torch.rand(shape, dtype=torch.float32) + 0.5


def run_f64(fn, inputs, grad_names):
    """Evaluates fn on float64 copies of the float32 inputs; returns (out, gout, grads), the
    gradients being those of sum(out * gout) w.r.t. the inputs named in grad_names."""
    leaves = {}
    for k, v in inputs.items():
        if v is not None and v.is_floating_point():
            leaves[k] = v.to(torch.float64).requires_grad_(k in grad_names)
        else:
            leaves[k] = v
    out = fn(**leaves)
    gout = weighting(out.shape)
    (out * gout.to(torch.float64)).sum().backward()
    grads = [("grad_" + k, leaves[k].grad) for k in grad_names]
    return out.detach(), gout, grads


# ---------------------------------------------------------------------------- conv2d
def conv_case(fname, n, c, h, w, oc, kh, kw, stride, padding, dilation, groups, bias):
    x = randn(n, c, h, w)
    wt = randn(oc, c // groups, kh, kw) * 0.5
    b = randn(oc) if bias else None
    inputs = {"x": x, "w": wt, "b": b}
    names = ["x", "w"] + (["b"] if bias else [])

    def fn(x, w, b):
        return F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)

    out, gout, grads = run_f64(fn, inputs, names)
    # params: stride_h stride_w pad_h pad_w dil_h dil_w groups has_bias
    params = i64(stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups, int(bias))
    recs = [("params", params), ("x", x), ("w", wt)] + ([("b", b)] if bias else [])
    write(fname, recs + [("out", out), ("gout", gout)] + grads)


# ---------------------------------------------------------------------------- pooling
def pool_case(fname, kind, n, c, h, w, kernel, stride, padding, ceil_mode=False, count_include_pad=False):
    x = randn(n, c, h, w)

    def fn(x):
        if kind == "max":
            return F.max_pool2d(x, kernel, stride, padding, ceil_mode=ceil_mode)
        return F.avg_pool2d(x, kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad)

    out, gout, grads = run_f64(fn, {"x": x}, ["x"])
    # params: kh kw sh sw ph pw ceil_mode count_include_pad
    params = i64(kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], int(ceil_mode), int(count_include_pad))
    write(fname, [("params", params), ("x", x), ("out", out), ("gout", gout)] + grads)


def adaptive_case(fname, n, c, h, w, oh, ow):
    x = randn(n, c, h, w)
    out, gout, grads = run_f64(lambda x: F.adaptive_avg_pool2d(x, (oh, ow)), {"x": x}, ["x"])
    write(fname, [("params", i64(oh, ow)), ("x", x), ("out", out), ("gout", gout)] + grads)


# ---------------------------------------------------------------------------- batch norm
def bn_case(fname, shape, training, momentum=0.1, eps=1e-5):
    c = shape[1]
    bshape = [1, c] + [1] * (len(shape) - 2)
    x = randn(*shape) * (torch.rand(bshape) * 2 + 0.5) + randn(*bshape)  # per-channel scale and shift
    weight = torch.rand(c) + 0.5
    bias = randn(c)
    rmean = randn(c) * 0.5
    rvar = torch.rand(c) + 0.5
    rm64, rv64 = rmean.to(torch.float64), rvar.to(torch.float64)  # updated in place by F.batch_norm

    def fn(x, weight, bias):
        return F.batch_norm(x, rm64, rv64, weight, bias, training=training, momentum=momentum, eps=eps)

    out, gout, grads = run_f64(fn, {"x": x, "weight": weight, "bias": bias}, ["x", "weight", "bias"])
    # params: training; momentum and eps as f32 scalars
    recs = [("training", i64(int(training))), ("momentum", torch.tensor(momentum, dtype=torch.float32)),
            ("eps", torch.tensor(eps, dtype=torch.float32)),
            ("x", x), ("weight", weight), ("bias", bias), ("running_mean", rmean), ("running_var", rvar),
            ("out", out), ("running_mean_after", rm64), ("running_var_after", rv64), ("gout", gout)]
    write(fname, recs + grads)


# ---------------------------------------------------------------------------- losses, softmax
def ce_case(fname, logits_shape, reduction="mean", soft=False, ignore_rows=(), axis=-1):
    x = randn(*logits_shape) * 2
    c = logits_shape[1] if len(logits_shape) > 2 else logits_shape[-1]
    if soft:
        label = torch.softmax(randn(*logits_shape), dim=1 if len(logits_shape) > 2 else -1)
        names = ["x", "label"]
    else:
        lshape = [logits_shape[0]] + list(logits_shape[2:])
        label = torch.randint(0, c, lshape, dtype=torch.int64)
        for r in ignore_rows:
            label.view(-1)[r] = -100
        names = ["x"]

    def fn(x, label):
        return F.cross_entropy(x, label, reduction=reduction, ignore_index=-100)

    out, gout, grads = run_f64(fn, {"x": x, "label": label}, names)
    red = {"mean": 0, "sum": 1, "none": 2}[reduction]
    # params: reduction (0 mean, 1 sum, 2 none), soft_label, use_ignore_index, ignore_index, axis
    params = i64(red, int(soft), int(len(ignore_rows) > 0), -100, axis)
    write(fname, [("params", params), ("x", x), ("label", label), ("out", out), ("gout", gout)] + grads)


def log_softmax_case(fname, shape, axis):
    x = randn(*shape) * 3
    out, gout, grads = run_f64(lambda x: F.log_softmax(x, dim=axis), {"x": x}, ["x"])
    write(fname, [("params", i64(axis)), ("x", x), ("out", out), ("gout", gout)] + grads)


# ---------------------------------------------------------------------------- matmul, linear
def matmul_case(fname, ashape, bshape, ta, tb):
    a, b = randn(*ashape), randn(*bshape)

    def fn(a, b):
        return torch.matmul(a.transpose(-1, -2) if ta else a, b.transpose(-1, -2) if tb else b)

    out, gout, grads = run_f64(fn, {"a": a, "b": b}, ["a", "b"])
    write(fname, [("params", i64(int(ta), int(tb))), ("a", a), ("b", b), ("out", out), ("gout", gout)] + grads)


def linear_case(fname, xshape, fin, fout, bias=True):
    x = randn(*xshape, fin)
    w = randn(fin, fout) * 0.3  # Paddle layout [in, out]
    b = randn(fout) if bias else None

    def fn(x, w, b):
        return F.linear(x, w.t(), b)  # torch wants [out, in]

    names = ["x", "w"] + (["b"] if bias else [])
    out, gout, grads = run_f64(fn, {"x": x, "w": w, "b": b}, names)
    recs = [("x", x), ("w", w)] + ([("b", b)] if bias else [])
    write(fname, recs + [("out", out), ("gout", gout)] + grads)


# ---------------------------------------------------------------------------- training run
def mlp_train(fname, steps=200, nbatches=20, lr=0.01):
    """Paddle's dynamic-graph distributed quick start's LinearNet (Linear(10,10) -> Linear(10,1), no activation), MSE loss, plain SGD
    (p -= lr * grad) for `steps` steps over `nbatches` fixed batches cycled (batch = step % nbatches).
    Everything in float32, as a PyTorch user would run it."""
    torch.manual_seed(1)
    l1, l2 = torch.nn.Linear(10, 10), torch.nn.Linear(10, 1)
    init = {"w1": l1.weight.detach().t().clone(), "b1": l1.bias.detach().clone(),
            "w2": l2.weight.detach().t().clone(), "b2": l2.bias.detach().clone()}
    w_true = randn(10, 1)
    xs = randn(nbatches, 10, 10)
    ys = xs @ w_true + 0.5 + 0.1 * randn(nbatches, 10, 1)
    params = list(l1.parameters()) + list(l2.parameters())
    losses = torch.empty(steps, dtype=torch.float32)
    for step in range(steps):
        x, y = xs[step % nbatches], ys[step % nbatches]
        loss = F.mse_loss(l2(l1(x)), y)
        losses[step] = loss.detach()
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
    final = {"w1_final": l1.weight.detach().t(), "b1_final": l1.bias.detach(),
             "w2_final": l2.weight.detach().t(), "b2_final": l2.bias.detach()}
    recs = [("lr", torch.tensor(lr, dtype=torch.float32)), ("steps", i64(steps))]
    recs += list(init.items()) + [("xs", xs), ("ys", ys), ("losses", losses)] + list(final.items())
    write(fname, recs)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    torch.manual_seed(20240611)
    # conv2d: (file, N, C, H, W, OC, KH, KW, stride, padding, dilation, groups, bias)
    conv_case("conv2d_plain.txt", 2, 3, 6, 6, 4, 3, 3, (1, 1), (1, 1), (1, 1), 1, False)
    conv_case("conv2d_stride2.txt", 2, 3, 7, 7, 4, 3, 3, (2, 2), (1, 1), (1, 1), 1, False)
    conv_case("conv2d_groups2.txt", 2, 4, 5, 5, 6, 3, 3, (1, 1), (1, 1), (1, 1), 2, False)
    conv_case("conv2d_dilation2.txt", 2, 2, 7, 7, 3, 3, 3, (1, 1), (2, 2), (2, 2), 1, False)
    conv_case("conv2d_bias.txt", 2, 3, 5, 5, 4, 3, 3, (1, 1), (1, 1), (1, 1), 1, True)
    conv_case("conv2d_rect.txt", 2, 3, 7, 6, 4, 3, 2, (2, 1), (1, 0), (1, 1), 1, True)
    # pooling
    pool_case("max_pool2d_k3s2p1.txt", "max", 2, 3, 7, 7, (3, 3), (2, 2), (1, 1))
    pool_case("max_pool2d_k2s2.txt", "max", 2, 3, 6, 8, (2, 2), (2, 2), (0, 0))
    pool_case("max_pool2d_ceil.txt", "max", 2, 2, 6, 6, (3, 3), (2, 2), (0, 0), ceil_mode=True)
    pool_case("avg_pool2d_k3s2p1_excl.txt", "avg", 2, 3, 7, 7, (3, 3), (2, 2), (1, 1), count_include_pad=False)
    pool_case("avg_pool2d_k3s2p1_incl.txt", "avg", 2, 3, 7, 7, (3, 3), (2, 2), (1, 1), count_include_pad=True)
    pool_case("avg_pool2d_ceil.txt", "avg", 2, 2, 6, 6, (3, 3), (2, 2), (0, 0), ceil_mode=True)
    pool_case("avg_pool2d_ceil_pad_incl.txt", "avg", 2, 2, 6, 6, (3, 3), (2, 2), (1, 1), ceil_mode=True,
              count_include_pad=True)
    adaptive_case("adaptive_avg_pool2d_5x7_to_3x2.txt", 2, 3, 5, 7, 3, 2)
    # batch norm
    bn_case("batch_norm_train.txt", (4, 3, 5, 5), training=True)
    bn_case("batch_norm_train_2d.txt", (8, 4), training=True)
    bn_case("batch_norm_eval.txt", (4, 3, 5, 5), training=False)
    # cross entropy
    ce_case("cross_entropy_mean.txt", (6, 5), "mean")
    ce_case("cross_entropy_sum.txt", (6, 5), "sum")
    ce_case("cross_entropy_none.txt", (6, 5), "none")
    ce_case("cross_entropy_soft.txt", (6, 5), "mean", soft=True)
    ce_case("cross_entropy_ignore.txt", (6, 5), "mean", ignore_rows=(2,))
    ce_case("cross_entropy_ignore_none.txt", (6, 5), "none", ignore_rows=(0, 4))
    ce_case("cross_entropy_axis1.txt", (2, 4, 3, 3), "mean", axis=1)
    # log_softmax
    log_softmax_case("log_softmax_last.txt", (3, 5, 4), -1)
    log_softmax_case("log_softmax_axis1.txt", (3, 5, 4), 1)
    # matmul / linear: (file, a shape, b shape, transpose_a, transpose_b)
    matmul_case("matmul_2d.txt", (5, 7), (7, 4), False, False)
    matmul_case("matmul_batched_bcast.txt", (3, 5, 7), (1, 7, 4), False, False)
    matmul_case("matmul_batched_2d_rhs.txt", (3, 5, 7), (7, 4), False, False)
    matmul_case("matmul_transposed.txt", (7, 5), (4, 7), True, True)
    matmul_case("matmul_transposed_b_batched.txt", (2, 5, 7), (2, 4, 7), False, True)
    linear_case("linear.txt", (4, 3), 8, 5)
    linear_case("linear_2d_nobias.txt", (6,), 10, 3, bias=False)
    # training
    mlp_train("mlp_train.txt")


if __name__ == "__main__":
    main()
