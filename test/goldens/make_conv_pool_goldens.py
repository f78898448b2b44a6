#!/usr/bin/python3
# test/goldens/make_conv_pool_goldens.py — PyTorch reference files for the conv/pool parity ops
# (test/test_conv_pool_ext.c, "cpx_*.txt"): conv_transpose2d, conv1d, max_pool2d with dilation
# and indices, avg_pool2d with divisor_override, adaptive_max_pool2d and the 1-d pools.
#
# How to run:   make goldens   (or /usr/bin/python3 test/goldens/make_conv_pool_goldens.py [OUT_DIR])
# Same file format and method as make_goldens.py (float32 inputs, float64 evaluation, gradients of
# sum(out * gout)); deterministic. Each file holds:
#   iparams (i64): kind, then the op's parameters (see CASES below and the C reader)
#   x, [w], [b], out, gout, grad_x, [grad_w], [grad_b], [indices (i64, torch's return_indices)]
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens as mg  # noqa: E402  (write, run_f64, i64, randn; OUT_DIR from argv)

torch.manual_seed(20261125)
KIND = {"conv_transpose2d": 0, "conv1d": 1, "max_pool2d": 2, "avg_pool2d": 3, "adaptive_max_pool2d": 4,
        "max_pool1d": 5, "avg_pool1d": 6, "adaptive_max_pool1d": 7, "adaptive_avg_pool1d": 8}


def ties(*shape):
    """Values on a half-integer grid: many equal maxima, so the tie rule is tested."""
    return torch.round(mg.randn(*shape) * 2) / 2


def emit(fname, kind, params, inputs, fn, indices=None):
    names = [k for k, v in inputs.items() if v is not None]
    out, gout, grads = mg.run_f64(fn, inputs, names)
    recs = [("iparams", mg.i64(KIND[kind], *params))] + [(k, inputs[k]) for k in names]
    recs += [("out", out), ("gout", gout)] + grads
    if indices is not None:
        recs.append(("indices", indices))
    mg.write(fname, recs)


def conv_transpose(fname, n, cin, h, w, cout, kh, kw, stride, pad, opad, dil, groups, bias):
    x, wt = mg.randn(n, cin, h, w), mg.randn(cin, cout // groups, kh, kw)
    b = mg.randn(cout) if bias else None
    emit(fname, "conv_transpose2d", (*stride, *pad, *opad, *dil, groups, int(bias)), {"x": x, "w": wt, "b": b},
         lambda x, w, b: F.conv_transpose2d(x, w, b, stride, pad, opad, groups, dil))


def conv1d(fname, n, c, l, oc, k, stride, pad, dil, groups, bias):
    x, wt = mg.randn(n, c, l), mg.randn(oc, c // groups, k)
    b = mg.randn(oc) if bias else None
    emit(fname, "conv1d", (stride, pad, dil, groups, int(bias)), {"x": x, "w": wt, "b": b},
         lambda x, w, b: F.conv1d(x, w, b, stride, pad, dil, groups))


def max_pool2d(fname, x, k, s, p, d, ceil):
    _, idx = F.max_pool2d(x.double(), k, s, p, d, ceil_mode=ceil, return_indices=True)
    emit(fname, "max_pool2d", (*k, *s, *p, *d, int(ceil)), {"x": x},
         lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil), idx)


def main():
    os.makedirs(mg.OUT_DIR, exist_ok=True)
    # conv_transpose2d: stride sh sw, pad ph pw, output_padding oph opw, dilation dh dw, groups, bias
    conv_transpose("cpx_conv_transpose2d_s21_op.txt", 2, 3, 5, 4, 2, 3, 3, (2, 1), (1, 0), (1, 0), (1, 1), 1, True)
    conv_transpose("cpx_conv_transpose2d_groups_dil.txt", 1, 4, 3, 5, 6, 2, 3, (1, 2), (0, 1), (0, 1), (2, 1), 2, True)
    # output_padding >= stride (allowed below the dilation): rows no tap reaches
    conv_transpose("cpx_conv_transpose2d_op_dil.txt", 2, 2, 4, 3, 3, 3, 2, (1, 1), (1, 1), (1, 2), (2, 3), 1, False)
    # conv1d: stride, pad, dilation, groups, bias
    conv1d("cpx_conv1d.txt", 2, 4, 9, 6, 3, 2, 1, 2, 2, True)
    conv1d("cpx_conv1d_plain.txt", 3, 2, 7, 3, 2, 1, 0, 1, 1, False)
    # max_pool2d: kh kw sh sw ph pw dh dw ceil_mode
    max_pool2d("cpx_max_pool2d_dil.txt", ties(2, 3, 7, 8), (3, 2), (2, 1), (1, 1), (2, 2), False)
    max_pool2d("cpx_max_pool2d_dil_ceil.txt", mg.randn(1, 2, 9, 7), (2, 2), (2, 2), (1, 1), (2, 3), True)
    max_pool2d("cpx_max_pool2d_indices.txt", ties(2, 2, 5, 7), (3, 3), (2, 2), (1, 1), (1, 1), True)
    # avg_pool2d: kh kw sh sw ph pw ceil_mode count_include_pad divisor_override
    x = mg.randn(2, 2, 7, 6)
    emit("cpx_avg_pool2d_divisor.txt", "avg_pool2d", (3, 2, 2, 2, 1, 1, 1, 1, 5), {"x": x},
         lambda x: F.avg_pool2d(x, (3, 2), (2, 2), (1, 1), True, True, 5))
    x = mg.randn(1, 3, 5, 5)
    emit("cpx_avg_pool2d_divisor_excl.txt", "avg_pool2d", (2, 2, 1, 1, 0, 0, 0, 0, 3), {"x": x},
         lambda x: F.avg_pool2d(x, 2, 1, 0, False, False, 3))
    # adaptive_max_pool2d: oh ow
    for fname, shape, o in (("cpx_adaptive_max_pool2d_7x5_to_3x4.txt", (2, 3, 7, 5), (3, 4)),
                            ("cpx_adaptive_max_pool2d_4x6_to_3x5.txt", (1, 2, 4, 6), (3, 5))):
        x = ties(*shape)
        _, idx = F.adaptive_max_pool2d(x.double(), o, return_indices=True)
        emit(fname, "adaptive_max_pool2d", o, {"x": x}, lambda x: F.adaptive_max_pool2d(x, o), idx)
    # max_pool1d: k s p d ceil_mode
    x = ties(2, 3, 11)
    _, idx = F.max_pool1d(x.double(), 3, 2, 1, 2, ceil_mode=True, return_indices=True)
    emit("cpx_max_pool1d.txt", "max_pool1d", (3, 2, 1, 2, 1), {"x": x},
         lambda x: F.max_pool1d(x, 3, 2, 1, 2, ceil_mode=True), idx)
    # avg_pool1d: k s p ceil_mode count_include_pad
    x = mg.randn(2, 3, 10)
    emit("cpx_avg_pool1d.txt", "avg_pool1d", (4, 3, 2, 1, 1), {"x": x}, lambda x: F.avg_pool1d(x, 4, 3, 2, True, True))
    x = mg.randn(2, 3, 10)
    emit("cpx_avg_pool1d_excl.txt", "avg_pool1d", (3, 2, 1, 0, 0), {"x": x}, lambda x: F.avg_pool1d(x, 3, 2, 1, False, False))
    # adaptive 1-d: out_l
    x = ties(2, 3, 10)
    _, idx = F.adaptive_max_pool1d(x.double(), 4, return_indices=True)
    emit("cpx_adaptive_max_pool1d.txt", "adaptive_max_pool1d", (4,), {"x": x}, lambda x: F.adaptive_max_pool1d(x, 4), idx)
    x = mg.randn(2, 3, 10)
    emit("cpx_adaptive_avg_pool1d.txt", "adaptive_avg_pool1d", (4,), {"x": x}, lambda x: F.adaptive_avg_pool1d(x, 4))


if __name__ == "__main__":
    main()
