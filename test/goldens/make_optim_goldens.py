#!/usr/bin/python3
# test/goldens/make_optim_goldens.py — PyTorch reference files for test/test_optim.c: optimizer
# trajectories, gradient clipping and learning-rate schedules.
#
# How to run:   /usr/bin/python3 test/goldens/make_optim_goldens.py [OUT_DIR]   (default test/goldens)
# Needs Debian's python3-torch (PyTorch 1.13 CPU). Run from the repo root; commit the .txt files.
# The output is deterministic: running it twice writes byte-identical files.
#
# Format: the one read by golden_load() in test/test_util.h (see make_goldens.py):
#   tensor <name> <f32|i64> <ndim> <d0> ... <dn-1>
#   <values, row-major, f32 printed with '%.9g'>
#
# optim_<opt>.txt (sgd, momentum, adagrad, adam, adamw): two float32 parameters p0 [3, 4] and
#   p1 [5], a fixed gradient per step g0 [10, 3, 4] and g1 [10, 5], and has_g1 [10] (i64): p1 has
#   no gradient (grad None) on the steps where it is 0, so it is skipped there — which also
#   exercises PyTorch's per-parameter step counts. For each configuration <cfg>:
#   hp_<cfg> (f32: the hyper-parameters, in the order of the C test's table, so the two sides
#   cannot drift), p0_<cfg> [10, 3, 4] and p1_<cfg> [10, 5]: the parameters after each step of
#   torch.optim.* run in float32 (foreach off, PyTorch 1.13's default). A configuration with
#   clip > 0 calls torch.nn.utils.clip_grad_norm_([p0, p1], clip) before each step.
#
# optim_clip.txt: gradients a [4, 6], b [7] and, per case <c>: max_norm_<c> (f32 [1]), the total
#   norm norm_<c> and the clipped gradients a_<c>, b_<c> from clip_grad_norm_. Case "one" clips
#   only a (b has no gradient).
#
# optim_lr.txt: lr_<name> [31]: the learning rate at construction and after each of 30
#   scheduler steps. PyTorch's StepLR, MultiStepLR, ExponentialLR and CosineAnnealingLR, stepped
#   as in a training loop; Paddle's LinearWarmup and PiecewiseDecay (PyTorch has neither) by the
#   formulas in Paddle's documentation, written out below.
import math
import os
import sys

import torch
from golden_text import fmt_tensor  # noqa: E402  (test/goldens is the script folder)

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join("test", "goldens")
STEPS = 10


def write(fname, tensors):
    assert len(tensors) <= 32, fname  # golden_load holds at most 32 records
    for name, t in tensors:
        assert len(name) < 64 and t.numel() <= 4096, (fname, name)
    with open(os.path.join(OUT_DIR, fname), "w", newline="\n") as f:
        for name, t in tensors:
            f.write(fmt_tensor(name, t))


def f32(*vals):
    return torch.tensor(vals, dtype=torch.float32)


# ---- optimizers -------------------------------------------------------------------------------

def opt_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    p0 = torch.randn(3, 4, generator=g)
    p1 = torch.randn(5, generator=g)
    g0 = torch.randn(STEPS, 3, 4, generator=g)
    g1 = torch.randn(STEPS, 5, generator=g) * 0.5
    has_g1 = torch.tensor([0 if k in (2, 5, 6) else 1 for k in range(STEPS)], dtype=torch.int64)
    g1 = g1 * has_g1.to(torch.float32)[:, None]
    return p0, p1, g0, g1, has_g1


def trajectory(make_opt, p0, p1, g0, g1, has_g1, clip=0.0):
    a = p0.clone().requires_grad_(True)
    b = p1.clone().requires_grad_(True)
    opt = make_opt([a, b])
    ta, tb = [], []
    for k in range(STEPS):
        a.grad = g0[k].clone()
        b.grad = g1[k].clone() if has_g1[k] else None
        if clip > 0:
            torch.nn.utils.clip_grad_norm_([a, b], clip)
        opt.step()
        ta.append(a.detach().clone())
        tb.append(b.detach().clone())
        opt.zero_grad(set_to_none=True)
    return torch.stack(ta), torch.stack(tb)


def optimizer_file(fname, seed, configs):
    """configs: (name, hyper-parameter list for the C side, factory, clip)."""
    p0, p1, g0, g1, has_g1 = opt_inputs(seed)
    recs = [("p0", p0), ("p1", p1), ("g0", g0), ("g1", g1), ("has_g1", has_g1)]
    for name, hp, make, clip in configs:
        t0, t1 = trajectory(make, p0, p1, g0, g1, has_g1, clip)
        recs += [("hp_" + name, f32(*hp)), ("p0_" + name, t0), ("p1_" + name, t1)]
    write(fname, recs)


def optimizers():
    O = torch.optim
    # hp order per optimizer (the C test's tables read the same order):
    #   sgd: lr, weight_decay, clip
    #   momentum: lr, momentum, nesterov, weight_decay
    #   adagrad: lr, lr_decay, eps, initial_accumulator_value, weight_decay
    #   adam / adamw: lr, beta1, beta2, eps, weight_decay, clip
    optimizer_file("optim_sgd.txt", 11, [
        ("plain", (0.1, 0, 0), lambda ps: O.SGD(ps, lr=0.1), 0.0),
        ("wd", (0.1, 0.05, 0), lambda ps: O.SGD(ps, lr=0.1, weight_decay=0.05), 0.0),
        ("clip", (0.1, 0, 1.5), lambda ps: O.SGD(ps, lr=0.1), 1.5),
    ])
    optimizer_file("optim_momentum.txt", 12, [
        ("plain", (0.05, 0.9, 0, 0), lambda ps: O.SGD(ps, lr=0.05, momentum=0.9), 0.0),
        ("wd", (0.05, 0.8, 0, 0.01), lambda ps: O.SGD(ps, lr=0.05, momentum=0.8, weight_decay=0.01), 0.0),
        ("nesterov", (0.05, 0.9, 1, 0), lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, nesterov=True), 0.0),
        ("nesterov_wd", (0.05, 0.9, 1, 0.02),
         lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.02), 0.0),
    ])
    optimizer_file("optim_adagrad.txt", 13, [
        ("default", (0.01, 0, 1e-10, 0, 0), lambda ps: O.Adagrad(ps), 0.0),
        ("plain", (0.1, 0, 1e-10, 0, 0), lambda ps: O.Adagrad(ps, lr=0.1), 0.0),
        ("wd", (0.1, 0, 1e-10, 0, 0.05), lambda ps: O.Adagrad(ps, lr=0.1, weight_decay=0.05), 0.0),
        ("decay_acc", (0.1, 0.1, 1e-6, 0.5, 0),
         lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.1, eps=1e-6, initial_accumulator_value=0.5), 0.0),
    ])
    optimizer_file("optim_adam.txt", 14, [
        ("default", (1e-3, 0.9, 0.999, 1e-8, 0, 0), lambda ps: O.Adam(ps), 0.0),
        ("plain", (0.05, 0.8, 0.99, 1e-6, 0, 0), lambda ps: O.Adam(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6), 0.0),
        ("wd", (0.05, 0.9, 0.999, 1e-8, 0.1, 0), lambda ps: O.Adam(ps, lr=0.05, weight_decay=0.1), 0.0),
        ("clip", (0.05, 0.9, 0.999, 1e-8, 0, 1.0), lambda ps: O.Adam(ps, lr=0.05), 1.0),
    ])
    optimizer_file("optim_adamw.txt", 15, [
        ("default", (1e-3, 0.9, 0.999, 1e-8, 0.01, 0), lambda ps: O.AdamW(ps), 0.0),
        ("wd", (0.05, 0.9, 0.99, 1e-8, 0.5, 0), lambda ps: O.AdamW(ps, lr=0.05, betas=(0.9, 0.99), weight_decay=0.5), 0.0),
        ("nowd", (0.05, 0.9, 0.999, 1e-8, 0, 0), lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0.0), 0.0),
    ])


# ---- clip_grad_norm_ --------------------------------------------------------------------------

def clip_file():
    g = torch.Generator().manual_seed(21)
    a = torch.randn(4, 6, generator=g)
    b = torch.randn(7, generator=g) * 3
    recs = [("a", a), ("b", b)]
    for case, max_norm, with_b in (("clip", 2.0, True), ("noclip", 100.0, True), ("one", 1.0, False)):
        pa = torch.zeros(4, 6, requires_grad=True)
        pb = torch.zeros(7, requires_grad=True)
        pa.grad = a.clone()
        pb.grad = b.clone() if with_b else None
        norm = torch.nn.utils.clip_grad_norm_([pa, pb], max_norm)
        recs += [("max_norm_" + case, f32(max_norm)), ("norm_" + case, norm.reshape(1)), ("a_" + case, pa.grad)]
        if with_b:
            recs.append(("b_" + case, pb.grad))
    write("optim_clip.txt", recs)


# ---- learning-rate schedules ------------------------------------------------------------------

N_LR = 30


def torch_sequence(make_sched, base_lr):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    s = make_sched(opt)
    lrs = [s.get_last_lr()[0]]
    for _ in range(N_LR):
        opt.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
    assert opt.param_groups[0]["lr"] == lrs[-1]
    return lrs


def paddle_linear_warmup(warmup_steps, start_lr, end_lr, after):
    """paddle.optimizer.lr.LinearWarmup.get_lr: linear from start_lr to end_lr over warmup_steps,
    then `after` (a float, or a list: the wrapped scheduler's lr at its own epoch e - warmup_steps)."""
    out = []
    for e in range(N_LR + 1):
        if e < warmup_steps:
            out.append((end_lr - start_lr) * float(e) / float(warmup_steps) + start_lr)
        else:
            out.append(after if isinstance(after, float) else after[e - warmup_steps])
    return out


def paddle_piecewise(boundaries, values):
    """paddle.optimizer.lr.PiecewiseDecay.get_lr."""
    out = []
    for e in range(N_LR + 1):
        for i, b in enumerate(boundaries):
            if e < b:
                out.append(values[i])
                break
        else:
            out.append(values[-1])
    return out


def lr_file():
    S = torch.optim.lr_scheduler
    cos = torch_sequence(lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 0.1)
    # PyTorch steps CosineAnnealingLR recursively; the closed form (what the C side and Paddle's
    # step(epoch) compute) agrees to far below float32 resolution:
    closed = [0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * e / 10)) / 2 for e in range(N_LR + 1)]
    assert max(abs(x - y) for x, y in zip(cos, closed)) < 1e-12
    seqs = [
        ("step", torch_sequence(lambda o: S.StepLR(o, step_size=3, gamma=0.5), 0.1)),
        ("step_default_gamma", torch_sequence(lambda o: S.StepLR(o, step_size=7), 0.5)),
        ("multi_step", torch_sequence(lambda o: S.MultiStepLR(o, milestones=[12, 5, 12, 20], gamma=0.3), 0.2)),
        ("exponential", torch_sequence(lambda o: S.ExponentialLR(o, gamma=0.9), 0.1)),
        ("cosine", cos),
        ("cosine_eta0", torch_sequence(lambda o: S.CosineAnnealingLR(o, T_max=7), 0.05)),
        ("warmup_const", paddle_linear_warmup(5, 0.0, 0.1, 0.1)),
        ("warmup_cosine", paddle_linear_warmup(
            8, 0.01, 0.1, torch_sequence(lambda o: S.CosineAnnealingLR(o, T_max=15, eta_min=0.0), 0.1))),
        ("warmup_step", paddle_linear_warmup(4, 0.0, 0.2, torch_sequence(lambda o: S.StepLR(o, step_size=5, gamma=0.5), 0.2))),
        ("piecewise", paddle_piecewise([3, 10, 20], [0.1, 0.05, 0.01, 0.001])),
    ]
    write("optim_lr.txt", [("lr_" + name, torch.tensor(v, dtype=torch.float64)) for name, v in seqs])


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    optimizers()
    clip_file()
    lr_file()


if __name__ == "__main__":
    main()
