#!/usr/bin/python3
# test/goldens/make_op_goldens.py — PyTorch reference files for the composite ops of
# eager/ops/compose.c (test/test_golden.c, "op_*.txt"): flip, tile (Tensor.repeat), masked_fill,
# logsumexp, var/std, vector norm (p 1, 2, inf) and pad (constant, reflect, replicate).
#
# How to run:   make goldens   (or /usr/bin/python3 test/goldens/make_op_goldens.py [OUT_DIR])
# Same file format and method as make_goldens.py (float32 inputs, float64 evaluation, gradients of
# sum(out * gout)); deterministic. Each file holds:
#   iparams (i64): kind (0 flip, 1 tile, 2 masked_fill, 3 logsumexp, 4 var, 5 std, 6 norm, 7 pad),
#                  flag (keepdim; for pad the mode: 0 constant, 1 reflect, 2 replicate),
#                  unbiased, n, then the n axes / reps / pads
#   fparams (f32): value (masked_fill, pad) or p (norm; inf for the max norm)
#   x, [mask], out, gout, grad_x
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens as mg  # noqa: E402  (write, run_f64, i64, randn; OUT_DIR from argv)

torch.manual_seed(20261126)
KIND = {"flip": 0, "tile": 1, "masked_fill": 2, "logsumexp": 3, "var": 4, "std": 5, "norm": 6, "pad": 7}
PAD_MODE = {"constant": 0, "reflect": 1, "replicate": 2}


def case(fname, kind, x, fn, ints=(), flag=0, unbiased=0, fparam=0.0, mask=None):
    out, gout, grads = mg.run_f64(fn, {"x": x, "mask": mask}, ["x"])
    ip = mg.i64(KIND[kind], flag, unbiased, len(ints), *ints)
    recs = [("iparams", ip), ("fparams", torch.tensor([fparam], dtype=torch.float32)), ("x", x)]
    recs += [("mask", mask.to(torch.int64))] if mask is not None else []
    mg.write(fname, recs + [("out", out), ("gout", gout)] + grads)


def main():
    os.makedirs(mg.OUT_DIR, exist_ok=True)
    x = mg.randn(2, 3, 4)
    case("op_flip_0_2.txt", "flip", x, lambda x, mask: torch.flip(x, (0, -1)), ints=(0, -1))
    x = mg.randn(2, 3)
    case("op_tile_repeat_2_1_3.txt", "tile", x, lambda x, mask: x.repeat(2, 1, 3), ints=(2, 1, 3))
    x = mg.randn(3, 4)
    case("op_tile_short_reps.txt", "tile", x, lambda x, mask: torch.tile(x, (2,)), ints=(2,))
    x = mg.randn(3, 4)
    m = torch.rand(1, 4) > 0.5
    case("op_masked_fill_bcast.txt", "masked_fill", x, lambda x, mask: x.masked_fill(mask, -2.5), fparam=-2.5, mask=m)
    x = mg.randn(3, 4, 5) * 4
    x[0, 0, :] = 30.0   # equal large entries: the max taken out matters
    case("op_logsumexp_1_2.txt", "logsumexp", x, lambda x, mask: torch.logsumexp(x, (1, 2)), ints=(1, 2))
    x = mg.randn(4, 6)
    case("op_logsumexp_last_keepdim.txt", "logsumexp", x, lambda x, mask: torch.logsumexp(x, -1, keepdim=True), ints=(-1,), flag=1)
    x = mg.randn(3, 5, 2)
    case("op_var_unbiased_1.txt", "var", x, lambda x, mask: torch.var(x, 1, unbiased=True), ints=(1,), unbiased=1)
    x = mg.randn(3, 5)
    case("op_var_biased_all_keepdim.txt", "var", x, lambda x, mask: torch.var(x, (0, 1), unbiased=False, keepdim=True),
         ints=(0, 1), flag=1)
    x = mg.randn(4, 5)
    x[1, :] = 0.75   # a row of equal values: std 0, gradient 0 (torch's)
    case("op_std_unbiased_last.txt", "std", x, lambda x, mask: torch.std(x, -1, unbiased=True), ints=(-1,), unbiased=1)
    x = mg.randn(3, 4)
    x[0, 1] = 0.0
    case("op_norm_p1_1.txt", "norm", x, lambda x, mask: torch.linalg.vector_norm(x, 1, dim=1), ints=(1,), fparam=1.0)
    x = mg.randn(3, 4)
    x[2, :] = 0.0    # a zero row: gradient 0, not NaN
    case("op_norm_p2_1.txt", "norm", x, lambda x, mask: torch.linalg.vector_norm(x, 2, dim=1), ints=(1,), fparam=2.0)
    x = mg.randn(3, 4)
    x[1, 0], x[1, 3] = 2.5, -2.5   # a tie for the max: the gradient shared
    case("op_norm_inf_0_keepdim.txt", "norm", x, lambda x, mask: torch.linalg.vector_norm(x, float("inf"), dim=1, keepdim=True),
         ints=(1,), flag=1, fparam=float("inf"))
    x = mg.randn(2, 3, 4)
    case("op_norm_p2_all.txt", "norm", x, lambda x, mask: torch.linalg.vector_norm(x, 2), fparam=2.0)
    x = mg.randn(2, 2, 3, 4)
    case("op_pad_constant.txt", "pad", x, lambda x, mask: F.pad(x, (1, 2, 0, 1), mode="constant", value=0.5),
         ints=(1, 2, 0, 1), flag=0, fparam=0.5)
    x = mg.randn(2, 3, 5)
    case("op_pad_constant_crop.txt", "pad", x, lambda x, mask: F.pad(x, (-1, 2, 1, -1), mode="constant", value=-1.0),
         ints=(-1, 2, 1, -1), flag=0, fparam=-1.0)
    x = mg.randn(2, 2, 3, 4)
    case("op_pad_reflect.txt", "pad", x, lambda x, mask: F.pad(x, (3, 1, 2, 2), mode="reflect"), ints=(3, 1, 2, 2), flag=1)
    x = mg.randn(2, 2, 3, 4)
    case("op_pad_replicate.txt", "pad", x, lambda x, mask: F.pad(x, (2, 3, 1, 0), mode="replicate"), ints=(2, 3, 1, 0), flag=2)


if __name__ == "__main__":
    main()
