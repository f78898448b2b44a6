#!/usr/bin/python3
# test/goldens/make_elementwise_goldens.py — PyTorch reference files for the elementwise ops of
# issue 32 (test/test_golden_elementwise.c, "ew_*.txt"): elu, softplus (with torch's threshold
# rule), silu, log1p, rsqrt, sin, cos, tril and triu.
#
# How to run:   make goldens   (or /usr/bin/python3 test/goldens/make_elementwise_goldens.py [OUT_DIR])
# Same file format and method as make_goldens.py (float32 inputs, float64 evaluation, gradients of
# sum(out * gout)); deterministic. Each file holds:
#   iparams (i64): kind (0 elu, 1 softplus, 2 silu, 3 log1p, 4 rsqrt, 5 sin, 6 cos, 7 tril, 8 triu),
#                  diagonal (tril / triu)
#   fparams (f32): p0, p1 (elu: alpha; softplus: beta, threshold)
#   x, out, gout, grad_x
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens as mg  # noqa: E402  (write, run_f64, i64, randn; OUT_DIR from argv)

torch.manual_seed(20260321)
KIND = {"elu": 0, "softplus": 1, "silu": 2, "log1p": 3, "rsqrt": 4, "sin": 5, "cos": 6, "tril": 7, "triu": 8}


def case(fname, kind, x, fn, diagonal=0, p0=0.0, p1=0.0):
    out, gout, grads = mg.run_f64(lambda x: fn(x), {"x": x}, ["x"])
    recs = [("iparams", mg.i64(KIND[kind], diagonal)), ("fparams", torch.tensor([p0, p1], dtype=torch.float32)), ("x", x)]
    mg.write(fname, recs + [("out", out), ("gout", gout)] + grads)


def main():
    os.makedirs(mg.OUT_DIR, exist_ok=True)
    x = mg.randn(3, 5) * 2
    x[0, 0] = 0.0   # the kink: torch's gradient at 0 is alpha (x <= 0 branch)
    case("ew_elu_alpha1.txt", "elu", x, lambda x: F.elu(x, 1.0), p0=1.0)
    x = mg.randn(2, 3, 4) * 3
    case("ew_elu_alpha0.5.txt", "elu", x, lambda x: F.elu(x, 0.5), p0=0.5)
    x = mg.randn(4, 5) * 4
    x[0, 0], x[0, 1] = 25.0, -30.0   # past the default threshold: x itself
    case("ew_softplus_default.txt", "softplus", x, lambda x: F.softplus(x, 1, 20), p0=1.0, p1=20.0)
    x = mg.randn(4, 5)
    case("ew_softplus_beta2_thr1.txt", "softplus", x, lambda x: F.softplus(x, 2, 1), p0=2.0, p1=1.0)
    x = mg.randn(3, 4) * 4
    case("ew_silu.txt", "silu", x, lambda x: F.silu(x))
    x = torch.rand(3, 4) * 5 - 0.95
    case("ew_log1p.txt", "log1p", x, lambda x: torch.log1p(x))
    x = torch.rand(3, 4) * 4 + 0.05
    case("ew_rsqrt.txt", "rsqrt", x, lambda x: torch.rsqrt(x))
    x = mg.randn(3, 4) * 3
    case("ew_sin.txt", "sin", x, lambda x: torch.sin(x))
    x = mg.randn(3, 4) * 3
    case("ew_cos.txt", "cos", x, lambda x: torch.cos(x))
    x = mg.randn(2, 3, 4)
    case("ew_tril_0.txt", "tril", x, lambda x: torch.tril(x, 0), diagonal=0)
    x = mg.randn(4, 3)
    case("ew_tril_m1.txt", "tril", x, lambda x: torch.tril(x, -1), diagonal=-1)
    x = mg.randn(2, 2, 3, 4)
    case("ew_triu_1.txt", "triu", x, lambda x: torch.triu(x, 1), diagonal=1)
    x = mg.randn(3, 5)
    case("ew_triu_m2.txt", "triu", x, lambda x: torch.triu(x, -2), diagonal=-2)
    x = mg.randn(3, 5)
    case("ew_triu_past_end.txt", "triu", x, lambda x: torch.triu(x, 7), diagonal=7)


if __name__ == "__main__":
    main()
