#!/usr/bin/python3
# test/goldens/make_sort_goldens.py — PyTorch reference files for sort, topk, cumsum, prod,
# scatter_add and scatter (eager/ops/sort.c, scan.c, scatter.c), checked by test/test_golden_sort.c
# ("sort_*.txt").
#
# How to run:   make goldens   (or /usr/bin/python3 test/goldens/make_sort_goldens.py [OUT_DIR])
# Same file format and method as make_goldens.py (float32 inputs, float64 evaluation, gradients of
# sum(out * gout)); deterministic. Each file holds:
#   iparams (i64): kind (0 sort, 1 topk, 2 cumsum, 3 prod, 4 scatter_add, 5 scatter), axis,
#                  flag (descending / largest / keepdim), k (topk), n, then n axes (prod; 0: all)
#   x, [index, src], out, [indices (sort, topk)], gout, grad_x, [grad_src]
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens as mg  # noqa: E402  (write, run_f64, i64, randn; OUT_DIR from argv)

torch.manual_seed(20261127)
KIND = {"sort": 0, "topk": 1, "cumsum": 2, "prod": 3, "scatter_add": 4, "scatter": 5}


def case(fname, kind, x, fn, axis=0, flag=0, k=0, axes=(), index=None, src=None, indices=None):
    names = ["x"] + (["src"] if src is not None else [])
    out, gout, grads = mg.run_f64(fn, {"x": x, "index": index, "src": src}, names)
    recs = [("iparams", mg.i64(KIND[kind], axis, flag, k, len(axes), *axes)), ("x", x)]
    if index is not None:
        recs += [("index", index), ("src", src)]
    recs += [("out", out)]
    if indices is not None:
        recs += [("indices", indices)]
    mg.write(fname, recs + [("gout", gout)] + grads)


def prod_dims(x, dims, keepdim):
    """torch.prod over several dims (torch 1.13 takes one at a time), highest first."""
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, d, keepdim=keepdim)
    return x


def block(src, index):
    """src's leading block of index's shape: the entries scatter reads. torch 1.13 computes the
    same forward from the whole src but cannot take its gradient when index is smaller (its
    backward returns index's shape), so the reference slices first; the rest of src gets 0."""
    return src[tuple(slice(0, n) for n in index.shape)]


def unique_rows(rows, width, take):
    """An index [rows, take] whose rows name distinct positions in [0, width)."""
    return torch.stack([torch.randperm(width)[:take] for _ in range(rows)])


def main():
    os.makedirs(mg.OUT_DIR, exist_ok=True)
    # sort: ties (stable order), ascending and descending
    x = mg.randn(3, 5, 4)
    x[0, 1, 0] = x[0, 3, 0] = 0.25
    x[2, 0, 3] = x[2, 2, 3] = x[2, 4, 3] = -1.0
    case("sort_axis1_ties.txt", "sort", x, lambda x, index, src: torch.sort(x, dim=1, stable=True)[0], axis=1,
         indices=torch.sort(x, dim=1, stable=True)[1])
    x = mg.randn(4, 7)
    x[1, 2] = x[1, 5] = 0.5
    case("sort_desc_last.txt", "sort", x, lambda x, index, src: torch.sort(x, dim=-1, descending=True, stable=True)[0], axis=-1, flag=1,
         indices=torch.sort(x, dim=-1, descending=True, stable=True)[1])
    # topk: distinct values (torch leaves the order of ties unspecified)
    x = mg.randn(3, 8)
    case("sort_topk_largest.txt", "topk", x, lambda x, index, src: torch.topk(x, 3, -1)[0], axis=-1, flag=1, k=3,
         indices=torch.topk(x, 3, -1)[1])
    x = mg.randn(5, 3, 2)
    case("sort_topk_smallest_axis0.txt", "topk", x, lambda x, index, src: torch.topk(x, 2, 0, largest=False)[0], axis=0, flag=0, k=2,
         indices=torch.topk(x, 2, 0, largest=False)[1])
    # cumsum: lengths that are not powers of two
    x = mg.randn(3, 7, 2)
    case("sort_cumsum_axis1.txt", "cumsum", x, lambda x, index, src: torch.cumsum(x, 1), axis=1)
    x = mg.randn(2, 9)
    case("sort_cumsum_last.txt", "cumsum", x, lambda x, index, src: torch.cumsum(x, -1), axis=-1)
    # prod: one zero (its gradient is the product of the rest), two zeros (gradient 0 everywhere)
    x = mg.randn(3, 5, 2) * 0.5 + 1.0
    x[0, 1, 0] = 0.0
    x[1, 0, 1] = x[1, 3, 1] = 0.0
    case("sort_prod_axis1_zeros.txt", "prod", x, lambda x, index, src: torch.prod(x, 1), axes=(1,))
    x = mg.randn(2, 3, 3) * 0.5 + 1.0
    x[1, 2, 0] = 0.0
    case("sort_prod_0_2_keepdim.txt", "prod", x, lambda x, index, src: prod_dims(x, (0, 2), True), flag=1, axes=(0, 2))
    x = mg.randn(2, 3) * 0.5 + 1.0
    case("sort_prod_all.txt", "prod", x, lambda x, index, src: torch.prod(x))
    # scatter_add: repeats summed; index smaller than src and than x off the axis
    x, src = mg.randn(3, 5), mg.randn(3, 6)
    index = torch.randint(0, 5, (2, 4))
    case("sort_scatter_add_axis1.txt", "scatter_add", x, lambda x, index, src: x.scatter_add(1, index, block(src, index)), axis=1,
         index=index, src=src)
    x, src = mg.randn(4, 3), mg.randn(6, 3)
    index = torch.randint(0, 4, (6, 3))
    case("sort_scatter_add_axis0.txt", "scatter_add", x, lambda x, index, src: x.scatter_add(0, index, block(src, index)), axis=0,
         index=index, src=src)
    # scatter: no position written twice
    x, src = mg.randn(3, 6), mg.randn(3, 5)
    index = unique_rows(3, 6, 4)
    case("sort_scatter_axis1.txt", "scatter", x, lambda x, index, src: x.scatter(1, index, block(src, index)), axis=1, index=index, src=src)
    x, src = mg.randn(5, 3), mg.randn(3, 3)
    index = unique_rows(2, 5, 2).t().contiguous()
    case("sort_scatter_axis0.txt", "scatter", x, lambda x, index, src: x.scatter(0, index, block(src, index)), axis=0, index=index, src=src)


if __name__ == "__main__":
    main()
