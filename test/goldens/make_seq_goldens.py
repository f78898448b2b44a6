#!/usr/bin/python3
# test/goldens/make_seq_goldens.py — PyTorch reference files for embedding, layer_norm and
# group_norm (test/test_golden_seq.c, "seq_*.txt").
#
# How to run:   make goldens   (or /usr/bin/python3 test/goldens/make_seq_goldens.py [OUT_DIR])
# Same file format and method as make_goldens.py (float32 inputs, float64 evaluation, gradients of
# sum(out * gout)); deterministic. Each file holds:
#   iparams (i64): kind (0 embedding, 1 layer_norm, 2 group_norm), a, b, n, then n ints:
#                  embedding: a = has padding_idx, b = padding_idx as passed (may be negative)
#                  layer_norm: a = affine, then the n dims of normalized_shape
#                  group_norm: a = affine, b = num_groups
#   fparams (f32): eps (norms) or max_norm (embedding; 0 = off), norm_type
#   x or ids, [w, b], out, gout, grad_x / grad_w / grad_b, and for max_norm "w_after" (the
#   table after torch's in-place renormalisation)
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens as mg  # noqa: E402  (write, i64, randn, weighting; OUT_DIR from argv)

torch.manual_seed(20261125)


def embedding(fname, ids, w, padding_idx=None, max_norm=0.0, norm_type=2.0):
    w64 = w.to(torch.float64).requires_grad_(True)
    out = F.embedding(ids, w64, padding_idx=padding_idx, max_norm=max_norm if max_norm > 0 else None, norm_type=norm_type)
    gout = mg.weighting(out.shape)
    (out * gout.to(torch.float64)).sum().backward()
    ip = mg.i64(0, padding_idx is not None, padding_idx if padding_idx is not None else 0, 0)
    recs = [("iparams", ip), ("fparams", torch.tensor([max_norm, norm_type], dtype=torch.float32)), ("ids", ids), ("w", w)]
    recs += [("out", out.detach()), ("gout", gout), ("grad_w", w64.grad)]
    if max_norm > 0:
        recs.append(("w_after", w64.detach()))
    mg.write(fname, recs)


def norm_case(fname, kind, x, fn, affine_shape, a_ints, b=0, eps=1e-5):
    inputs = {"x": x, "w": None, "b": None}
    if affine_shape is not None:
        inputs["w"] = mg.randn(*affine_shape) * 0.5 + 1.0
        inputs["b"] = mg.randn(*affine_shape) * 0.5
    names = ["x"] + (["w", "b"] if affine_shape is not None else [])
    out, gout, grads = mg.run_f64(fn, inputs, names)
    ip = mg.i64(kind, affine_shape is not None, b, len(a_ints), *a_ints)
    recs = [("iparams", ip), ("fparams", torch.tensor([eps, 0.0], dtype=torch.float32)), ("x", x)]
    recs += [(k, inputs[k]) for k in ("w", "b") if inputs[k] is not None]
    mg.write(fname, recs + [("out", out), ("gout", gout)] + grads)


def main():
    os.makedirs(mg.OUT_DIR, exist_ok=True)
    ids = torch.tensor([[1, 2, 6, 2], [0, 2, 1, 5], [6, 6, 3, 2]], dtype=torch.int64)
    embedding("seq_embedding_pad2.txt", ids, mg.randn(7, 5), padding_idx=2)
    ids = torch.tensor([[4, 0, 5], [5, 5, 1]], dtype=torch.int64)
    embedding("seq_embedding_pad_neg.txt", ids, mg.randn(6, 3), padding_idx=-1)
    ids = torch.tensor([3, 1, 3, 0, 2], dtype=torch.int64)
    embedding("seq_embedding_plain.txt", ids, mg.randn(4, 6))
    ids = torch.tensor([[0, 3, 3], [1, 4, 0]], dtype=torch.int64)
    w = mg.randn(5, 4) * 1.5
    w[2] *= 0.1   # a row under max_norm: left alone
    embedding("seq_embedding_max_norm.txt", ids, w, max_norm=1.25)
    embedding("seq_embedding_max_norm_p1.txt", ids, w, max_norm=2.0, norm_type=1.0)

    x = mg.randn(3, 4, 5) * 2 + 0.5
    norm_case("seq_layer_norm_2d_affine.txt", 1, x,
              lambda x, w, b: F.layer_norm(x, (4, 5), w, b, 1e-5), (4, 5), (4, 5))
    x = mg.randn(6, 7)
    x[2, :] = 0.25   # a constant row: the gradient is bounded by eps
    norm_case("seq_layer_norm_last_plain.txt", 1, x,
              lambda x, w, b: F.layer_norm(x, (7,), None, None, 1e-3), None, (7,), eps=1e-3)
    x = mg.randn(2, 6, 3, 3)
    norm_case("seq_group_norm_3_affine.txt", 2, x,
              lambda x, w, b: F.group_norm(x, 3, w, b, 1e-5), (6,), (), b=3)
    x = mg.randn(4, 6)
    norm_case("seq_group_norm_2d_plain.txt", 2, x,
              lambda x, w, b: F.group_norm(x, 2, None, None, 1e-5), None, (), b=2)
    x = mg.randn(2, 4, 5)
    norm_case("seq_group_norm_1_affine.txt", 2, x,
              lambda x, w, b: F.group_norm(x, 1, w, b, 1e-5), (4,), (), b=1)


if __name__ == "__main__":
    main()
