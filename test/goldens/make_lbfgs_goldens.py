#!/usr/bin/python3
# test/goldens/make_lbfgs_goldens.py — PyTorch 1.13 reference for test/test_optim_lbfgs.c:
# torch.optim.LBFGS on a small non-linear least-squares model, loss = mse(tanh(X W + b), Y),
# with W [3, 2] and b [2] as two parameters (so the flat vector spans both).
#
# How to run:   /usr/bin/python3 test/goldens/make_lbfgs_goldens.py [OUT_DIR]   (default test/goldens)
# Writes optim_lbfgs.txt: one record per line, "<name> <count> <values...>", values printed with
# '%.17g' (float64 round-trips exactly). X [8, 3], Y [8, 2], W0, b0: the data and start. Per
# configuration <c>: hp_<c> (lr, max_iter, max_eval, history_size, strong_wolfe, dtype bits,
# steps), then after each of the steps: loss_<c> (what step(closure) returned), W_<c>, b_<c>
# (the parameters), evals_<c> and niter_<c> (state func_evals and n_iter).
import os
import sys

import torch

torch.set_num_threads(1)
OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join("test", "goldens")

g = torch.Generator().manual_seed(32)
X = torch.randn(8, 3, generator=g, dtype=torch.float64)
Y = torch.tanh(X @ torch.randn(3, 2, generator=g, dtype=torch.float64)) * 0.8
W0 = torch.randn(3, 2, generator=g, dtype=torch.float64) * 0.5
b0 = torch.randn(2, generator=g, dtype=torch.float64) * 0.5

# name, lr, max_iter, max_eval (None: torch's default), history_size, line search, dtype, steps
CONFIGS = [
    ("fixed", 1.0, 5, None, 3, None, torch.float64, 5),
    ("wolfe", 1.0, 5, None, 3, "strong_wolfe", torch.float64, 5),
    ("wolfe_long", 1.0, 20, None, 100, "strong_wolfe", torch.float64, 3),
    ("fixed_lr", 0.8, 4, 6, 100, None, torch.float64, 4),
    ("f32", 0.8, 5, None, 3, None, torch.float32, 4),
    ("f32_wolfe", 1.0, 5, None, 3, "strong_wolfe", torch.float32, 4),
]


def run(lr, max_iter, max_eval, history, ls, dtype, steps):
    W = W0.to(dtype).clone().requires_grad_(True)
    b = b0.to(dtype).clone().requires_grad_(True)
    x, y = X.to(dtype), Y.to(dtype)
    opt = torch.optim.LBFGS([W, b], lr=lr, max_iter=max_iter, max_eval=max_eval, history_size=history,
                            line_search_fn=ls)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(torch.tanh(x @ W + b), y)
        loss.backward()
        return loss

    out = {"loss": [], "W": [], "b": [], "evals": [], "niter": []}
    for _ in range(steps):
        out["loss"].append(float(opt.step(closure)))
        out["W"] += W.detach().double().reshape(-1).tolist()
        out["b"] += b.detach().double().reshape(-1).tolist()
        st = opt.state[opt._params[0]]
        out["evals"].append(st["func_evals"])
        out["niter"].append(st["n_iter"])
    return out


def main():
    lines = []

    def rec(name, vals):
        lines.append("%s %d %s" % (name, len(vals), " ".join("%.17g" % float(v) for v in vals)))
    rec("X", X.reshape(-1).tolist())
    rec("Y", Y.reshape(-1).tolist())
    rec("W0", W0.reshape(-1).tolist())
    rec("b0", b0.tolist())
    for name, lr, max_iter, max_eval, history, ls, dtype, steps in CONFIGS:
        out = run(lr, max_iter, max_eval, history, ls, dtype, steps)
        rec("hp_" + name, [lr, max_iter, -1 if max_eval is None else max_eval, history, 1 if ls else 0,
                           64 if dtype == torch.float64 else 32, steps])
        for k in ("loss", "W", "b", "evals", "niter"):
            rec(k + "_" + name, out[k])
    with open(os.path.join(OUT_DIR, "optim_lbfgs.txt"), "w", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
