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
# optim_<opt>.txt (sgd, momentum, adagrad, adam, adamw, rmsprop, adamax, nadam, adadelta): two float32 parameters p0 [3, 4] and
#   p1 [5], a fixed gradient per step g0 [10, 3, 4] and g1 [10, 5], and has_g1 [10] (i64): p1 has
#   no gradient (grad None) on the steps where it is 0, so it is skipped there — which also
#   exercises PyTorch's per-parameter step counts. For each configuration <cfg>:
#   hp_<cfg> (f32: the hyper-parameters, in the order of the C test's table, so the two sides
#   cannot drift), p0_<cfg> [10, 3, 4] and p1_<cfg> [10, 5]: the parameters after each step of
#   torch.optim.* run in float32 (foreach off, PyTorch 1.13's default). A configuration with
#   clip > 0 calls torch.nn.utils.clip_grad_norm_([p0, p1], clip) before each step. A
#   configuration named "groups..." puts p1 in a second parameter group with its own lr and
#   weight_decay, recorded as groups_<cfg> (f32 [2]: lr, weight_decay). NAdam's reference is
#   PyTorch 1.13's _single_tensor_nadam with PyTorch 2.0's fix of mu_product_next
#   (pytorch/pytorch#92699), written out below and checked against torch.optim.NAdam with the
#   bug put back.
#
# optim_clip.txt: gradients a [4, 6], b [7] and, per case <c>: max_norm_<c> (f32 [1]), the total
#   norm norm_<c> and the clipped gradients a_<c>, b_<c> from clip_grad_norm_. Case "one" clips
#   only a (b has no gradient).
#
# optim_lr.txt: lr_<name> [31]: the learning rate at construction and after each of 30
#   scheduler steps. PyTorch's StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LambdaLR,
#   OneCycleLR (with mom_<name> [31]: the momentum or beta1 it cycles) and SequentialLR, stepped
#   as in a training loop; Paddle's LinearWarmup, PiecewiseDecay and PolynomialDecay (PyTorch has
#   none of them; its PolynomialLR is PolynomialDecay with end_lr 0, checked below) by the
#   formulas of Paddle's get_lr, written out below.
#
# optim_lr_groups.txt: lr_<name> [2, 31]: the same for an optimizer with two parameter groups
#   (lr 0.1 and 0.02): each group follows the schedule from its own lr.
#
# optim_plateau.txt: metric [30] and, per configuration <c> of ReduceLROnPlateau over two groups
#   (lr 0.1, 0.02): lr_<c> [2, 31] (at construction, then after each step(metric)), and
#   bad_<c>, cool_<c> [30] (i64: num_bad_epochs and cooldown_counter after each step).
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
    """configs: (name, hyper-parameter list for the C side, factory, clip); a factory may return
    (optimizer, (group 1 lr, group 1 weight_decay)) for a configuration with two groups."""
    p0, p1, g0, g1, has_g1 = opt_inputs(seed)
    recs = [("p0", p0), ("p1", p1), ("g0", g0), ("g1", g1), ("has_g1", has_g1)]
    for name, hp, make, clip in configs:
        groups = []

        def factory(ps, make=make, groups=groups):
            o = make(ps)
            if isinstance(o, tuple):
                o, g = o
                groups.append(g)
            return o
        t0, t1 = trajectory(factory, p0, p1, g0, g1, has_g1, clip)
        recs += [("hp_" + name, f32(*hp)), ("p0_" + name, t0), ("p1_" + name, t1)]
        if groups:
            recs.append(("groups_" + name, f32(*groups[0])))
    write(fname, recs)


def two_groups(cls, g1_lr, g1_wd, **kw):
    """cls over [p0] (the constructor's lr and weight_decay) and [p1] (its own): the factory of a
    "groups" configuration."""
    return lambda ps: (cls([{"params": [ps[0]]}, {"params": [ps[1]], "lr": g1_lr, "weight_decay": g1_wd}], **kw),
                       (g1_lr, g1_wd))


class NAdamRef:
    """torch.optim.NAdam as PyTorch 1.13's _single_tensor_nadam, operation for operation, except
    mu_product_next, which is PyTorch 2.0's (pytorch/pytorch#92699): 1.13 multiplies mu into it a
    second time. bug=True puts 1.13's line back (checked equal to torch.optim.NAdam below)."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3, bug=False):
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay)
        self.param_groups = [dict(defaults, **g) for g in groups]
        self.state = {}
        self.bug = bug

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay, momentum_decay = group["lr"], group["eps"], group["weight_decay"], group["momentum_decay"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                st = self.state.setdefault(id(param), {
                    "step": torch.tensor(0.), "mu_product": torch.tensor(1.),
                    "exp_avg": torch.zeros_like(param), "exp_avg_sq": torch.zeros_like(param)})
                grad, exp_avg, exp_avg_sq, mu_product, step_t = (
                    param.grad, st["exp_avg"], st["exp_avg_sq"], st["mu_product"], st["step"])
                step_t += 1
                step = step_t.item()
                bias_correction2 = 1 - beta2 ** step
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                mu = beta1 * (1. - 0.5 * (0.96 ** (step * momentum_decay)))
                mu_next = beta1 * (1. - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                mu_product *= mu
                if self.bug:
                    mu_product_next = (mu_product * mu * mu_next).item()
                else:
                    mu_product_next = mu_product.item() * mu_next
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
                param.addcdiv_(grad, denom, value=-lr * (1. - mu) / (1. - mu_product.item()))
                param.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1. - mu_product_next))


def check_nadam_reference():
    """With 1.13's line put back, NAdamRef is torch.optim.NAdam bit for bit: the reference differs
    from PyTorch 1.13 in that line only."""
    p0, p1, g0, g1, has_g1 = opt_inputs(18)
    for kw in ({}, dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)):
        a = trajectory(lambda ps: torch.optim.NAdam(ps, **kw), p0, p1, g0, g1, has_g1)
        b = trajectory(lambda ps: NAdamRef(ps, bug=True, **kw), p0, p1, g0, g1, has_g1)
        c = trajectory(lambda ps: NAdamRef(ps, **kw), p0, p1, g0, g1, has_g1)
        assert all(torch.equal(x, y) for x, y in zip(a, b)), "NAdamRef(bug=True) is not torch.optim.NAdam"
        assert not torch.equal(a[0], c[0]), "the mu_product_next fix changes nothing"


def optimizers():
    O = torch.optim
    # hp order per optimizer (the C test's tables read the same order):
    #   sgd: lr, weight_decay, clip
    #   momentum: lr, momentum, nesterov, weight_decay, dampening
    #   adagrad: lr, lr_decay, eps, initial_accumulator_value, weight_decay
    #   adam / adamw: lr, beta1, beta2, eps, weight_decay, clip, amsgrad
    #   rmsprop: lr, alpha, eps, weight_decay, momentum, centered
    #   adamax: lr, beta1, beta2, eps, weight_decay, clip
    #   nadam: lr, beta1, beta2, eps, weight_decay, momentum_decay
    #   adadelta: lr, rho, eps, weight_decay, clip
    optimizer_file("optim_sgd.txt", 11, [
        ("plain", (0.1, 0, 0), lambda ps: O.SGD(ps, lr=0.1), 0.0),
        ("wd", (0.1, 0.05, 0), lambda ps: O.SGD(ps, lr=0.1, weight_decay=0.05), 0.0),
        ("clip", (0.1, 0, 1.5), lambda ps: O.SGD(ps, lr=0.1), 1.5),
        ("groups", (0.1, 0.05, 0), two_groups(O.SGD, 0.03, 0.0, lr=0.1, weight_decay=0.05), 0.0),
    ])
    optimizer_file("optim_momentum.txt", 12, [
        ("plain", (0.05, 0.9, 0, 0, 0), lambda ps: O.SGD(ps, lr=0.05, momentum=0.9), 0.0),
        ("wd", (0.05, 0.8, 0, 0.01, 0), lambda ps: O.SGD(ps, lr=0.05, momentum=0.8, weight_decay=0.01), 0.0),
        ("nesterov", (0.05, 0.9, 1, 0, 0), lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, nesterov=True), 0.0),
        ("nesterov_wd", (0.05, 0.9, 1, 0.02, 0),
         lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.02), 0.0),
        ("dampening", (0.05, 0.9, 0, 0, 0.3), lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3), 0.0),
        ("dampening_wd", (0.05, 0.8, 0, 0.01, 0.9),
         lambda ps: O.SGD(ps, lr=0.05, momentum=0.8, dampening=0.9, weight_decay=0.01), 0.0),
        ("groups", (0.05, 0.9, 0, 0.01, 0), two_groups(O.SGD, 0.2, 0.0, lr=0.05, momentum=0.9, weight_decay=0.01), 0.0),
    ])
    optimizer_file("optim_adagrad.txt", 13, [
        ("default", (0.01, 0, 1e-10, 0, 0), lambda ps: O.Adagrad(ps), 0.0),
        ("plain", (0.1, 0, 1e-10, 0, 0), lambda ps: O.Adagrad(ps, lr=0.1), 0.0),
        ("wd", (0.1, 0, 1e-10, 0, 0.05), lambda ps: O.Adagrad(ps, lr=0.1, weight_decay=0.05), 0.0),
        ("decay_acc", (0.1, 0.1, 1e-6, 0.5, 0),
         lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.1, eps=1e-6, initial_accumulator_value=0.5), 0.0),
        ("groups", (0.1, 0, 1e-10, 0, 0.05), two_groups(O.Adagrad, 0.3, 0.0, lr=0.1, weight_decay=0.05), 0.0),
    ])
    optimizer_file("optim_adam.txt", 14, [
        ("default", (1e-3, 0.9, 0.999, 1e-8, 0, 0, 0), lambda ps: O.Adam(ps), 0.0),
        ("plain", (0.05, 0.8, 0.99, 1e-6, 0, 0, 0), lambda ps: O.Adam(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6), 0.0),
        ("wd", (0.05, 0.9, 0.999, 1e-8, 0.1, 0, 0), lambda ps: O.Adam(ps, lr=0.05, weight_decay=0.1), 0.0),
        ("clip", (0.05, 0.9, 0.999, 1e-8, 0, 1.0, 0), lambda ps: O.Adam(ps, lr=0.05), 1.0),
        ("amsgrad", (0.05, 0.8, 0.9, 1e-8, 0, 0, 1), lambda ps: O.Adam(ps, lr=0.05, betas=(0.8, 0.9), amsgrad=True), 0.0),
        ("amsgrad_wd", (0.05, 0.9, 0.99, 1e-8, 0.1, 0, 1),
         lambda ps: O.Adam(ps, lr=0.05, betas=(0.9, 0.99), weight_decay=0.1, amsgrad=True), 0.0),
        ("groups", (0.05, 0.9, 0.999, 1e-8, 0.1, 0, 0), two_groups(O.Adam, 0.01, 0.0, lr=0.05, weight_decay=0.1), 0.0),
    ])
    optimizer_file("optim_adamw.txt", 15, [
        ("default", (1e-3, 0.9, 0.999, 1e-8, 0.01, 0, 0), lambda ps: O.AdamW(ps), 0.0),
        ("wd", (0.05, 0.9, 0.99, 1e-8, 0.5, 0, 0), lambda ps: O.AdamW(ps, lr=0.05, betas=(0.9, 0.99), weight_decay=0.5), 0.0),
        ("nowd", (0.05, 0.9, 0.999, 1e-8, 0, 0, 0), lambda ps: O.AdamW(ps, lr=0.05, weight_decay=0.0), 0.0),
        ("amsgrad", (0.05, 0.8, 0.9, 1e-8, 0.5, 0, 1),
         lambda ps: O.AdamW(ps, lr=0.05, betas=(0.8, 0.9), weight_decay=0.5, amsgrad=True), 0.0),
        # the usual split: decay on the weights (group 0), none on biases and norms (group 1)
        ("groups", (0.05, 0.9, 0.999, 1e-8, 0.5, 0, 0), two_groups(O.AdamW, 0.05, 0.0, lr=0.05, weight_decay=0.5), 0.0),
    ])
    optimizer_file("optim_rmsprop.txt", 16, [
        ("default", (1e-2, 0.99, 1e-8, 0, 0, 0), lambda ps: O.RMSprop(ps), 0.0),
        ("plain", (0.01, 0.9, 1e-6, 0, 0, 0), lambda ps: O.RMSprop(ps, lr=0.01, alpha=0.9, eps=1e-6), 0.0),
        ("centered", (0.01, 0.9, 1e-8, 0, 0, 1), lambda ps: O.RMSprop(ps, lr=0.01, alpha=0.9, centered=True), 0.0),
        ("momentum", (0.01, 0.99, 1e-8, 0.05, 0.9, 0),
         lambda ps: O.RMSprop(ps, lr=0.01, weight_decay=0.05, momentum=0.9), 0.0),
        ("centered_momentum", (0.005, 0.95, 1e-8, 0.01, 0.8, 1),
         lambda ps: O.RMSprop(ps, lr=0.005, alpha=0.95, weight_decay=0.01, momentum=0.8, centered=True), 0.0),
        ("groups", (0.01, 0.99, 1e-8, 0.05, 0.9, 1),
         two_groups(O.RMSprop, 0.002, 0.0, lr=0.01, weight_decay=0.05, momentum=0.9, centered=True), 0.0),
    ])
    optimizer_file("optim_adamax.txt", 17, [
        ("default", (2e-3, 0.9, 0.999, 1e-8, 0, 0), lambda ps: O.Adamax(ps), 0.0),
        ("plain", (0.05, 0.8, 0.99, 1e-6, 0, 0), lambda ps: O.Adamax(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6), 0.0),
        ("wd", (0.05, 0.9, 0.999, 1e-8, 0.1, 0), lambda ps: O.Adamax(ps, lr=0.05, weight_decay=0.1), 0.0),
        ("clip", (0.05, 0.9, 0.999, 1e-8, 0, 1.0), lambda ps: O.Adamax(ps, lr=0.05), 1.0),
        ("groups", (0.05, 0.9, 0.999, 1e-8, 0.1, 0), two_groups(O.Adamax, 0.01, 0.0, lr=0.05, weight_decay=0.1), 0.0),
    ])
    optimizer_file("optim_adadelta.txt", 20, [
        ("default", (1.0, 0.9, 1e-6, 0, 0), lambda ps: O.Adadelta(ps), 0.0),
        ("plain", (0.5, 0.8, 1e-4, 0, 0), lambda ps: O.Adadelta(ps, lr=0.5, rho=0.8, eps=1e-4), 0.0),
        ("wd", (1.0, 0.9, 1e-6, 0.1, 0), lambda ps: O.Adadelta(ps, weight_decay=0.1), 0.0),
        ("clip", (1.0, 0.95, 1e-3, 0.05, 1.0), lambda ps: O.Adadelta(ps, rho=0.95, eps=1e-3, weight_decay=0.05), 1.0),
        ("groups", (1.0, 0.9, 1e-3, 0.1, 0), two_groups(O.Adadelta, 0.3, 0.0, eps=1e-3, weight_decay=0.1), 0.0),
    ])
    check_nadam_reference()
    # the settings these files test must change the trajectory, or the C tests could not fail
    p0, p1, g0, g1, has_g1 = opt_inputs(19)
    for a, b in ((lambda ps: O.Adam(ps, lr=0.05, betas=(0.8, 0.9), amsgrad=True), lambda ps: O.Adam(ps, lr=0.05, betas=(0.8, 0.9))),
                 (lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3), lambda ps: O.SGD(ps, lr=0.05, momentum=0.9)),
                 (lambda ps: O.RMSprop(ps, lr=0.01, centered=True), lambda ps: O.RMSprop(ps, lr=0.01))):
        ta, tb = trajectory(a, p0, p1, g0, g1, has_g1), trajectory(b, p0, p1, g0, g1, has_g1)
        assert (ta[0] - tb[0]).abs().max() > 1e-3, "a setting under test barely changes the trajectory"
    optimizer_file("optim_nadam.txt", 18, [
        ("default", (2e-3, 0.9, 0.999, 1e-8, 0, 4e-3), lambda ps: NAdamRef(ps), 0.0),
        ("plain", (0.05, 0.8, 0.99, 1e-6, 0, 4e-3), lambda ps: NAdamRef(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6), 0.0),
        ("wd", (0.05, 0.9, 0.999, 1e-8, 0.1, 4e-3), lambda ps: NAdamRef(ps, lr=0.05, weight_decay=0.1), 0.0),
        ("momentum_decay", (0.05, 0.9, 0.999, 1e-8, 0, 0.05), lambda ps: NAdamRef(ps, lr=0.05, momentum_decay=0.05), 0.0),
        ("groups", (0.05, 0.9, 0.999, 1e-8, 0.1, 4e-3), two_groups(NAdamRef, 0.01, 0.0, lr=0.05, weight_decay=0.1), 0.0),
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


def torch_sequence(make_sched, base_lr, n=N_LR):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    s = make_sched(opt)
    lrs = [s.get_last_lr()[0]]
    for _ in range(n):
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


def paddle_polynomial(base_lr, decay_steps, end_lr=1e-4, power=1.0, cycle=False):
    """paddle.optimizer.lr.PolynomialDecay.get_lr."""
    out = []
    for e in range(N_LR + 1):
        tmp_epoch_num, tmp_decay_steps = e, decay_steps
        if cycle:
            div_res = math.ceil(float(e) / float(decay_steps))
            if e == 0:
                div_res = 1
            tmp_decay_steps = decay_steps * div_res
        else:
            tmp_epoch_num = min(e, decay_steps)
        out.append((base_lr - end_lr) * ((1 - float(tmp_epoch_num) / float(tmp_decay_steps)) ** power) + end_lr)
    return out


def lambda_decay(e, k=0.3):
    """LambdaLR's factor in the C test too: 1 / (1 + k e), k passed as the user pointer there."""
    return 1.0 / (1.0 + k * e)


def warmup_lambda(e):
    return (e + 1) / 5.0 if e < 4 else 1.0


def torch_momentum_sequence(make_sched, opt):
    """lr and the cycled momentum (SGD's momentum or Adam's beta1) of group 0 over N_LR steps."""
    key = "betas" if "betas" in opt.defaults else "momentum"

    def mom():
        m = opt.param_groups[0][key]
        return m[0] if key == "betas" else m
    s = make_sched(opt)
    lrs, moms = [s.get_last_lr()[0]], [mom()]
    for _ in range(N_LR):
        opt.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
        moms.append(mom())
    return lrs, moms


def lr_file():
    S = torch.optim.lr_scheduler
    cos = torch_sequence(lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 0.1)
    # PyTorch steps CosineAnnealingLR recursively; the closed form (what the C side and Paddle's
    # step(epoch) compute) agrees to far below float32 resolution:
    closed = [0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * e / 10)) / 2 for e in range(N_LR + 1)]
    assert max(abs(x - y) for x, y in zip(cos, closed)) < 1e-12
    # torch's PolynomialLR is Paddle's PolynomialDecay with end_lr 0 (and no cycle):
    tp = torch_sequence(lambda o: S.PolynomialLR(o, total_iters=12, power=2.0), 0.1)
    assert max(abs(x - y) for x, y in zip(tp, paddle_polynomial(0.1, 12, end_lr=0.0, power=2.0))) < 1e-12

    def p_():
        return [torch.zeros(1, requires_grad=True)]
    oc_sgd, oc_sgd_mom = torch_momentum_sequence(
        lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=N_LR), torch.optim.SGD(p_(), lr=0.01, momentum=0.9))
    oc_adam, oc_adam_mom = torch_momentum_sequence(
        lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=N_LR, pct_start=0.25, anneal_strategy="linear",
                               div_factor=10., final_div_factor=100., three_phase=True, base_momentum=0.8,
                               max_momentum=0.9), torch.optim.Adam(p_(), lr=0.01))
    oc_nomom, _ = torch_momentum_sequence(
        lambda o: S.OneCycleLR(o, max_lr=0.2, total_steps=N_LR + 5, cycle_momentum=False), torch.optim.SGD(p_(), lr=0.01))

    def seq_exp_cos_step(o):
        return S.SequentialLR(o, [S.ExponentialLR(o, gamma=0.8), S.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
                                  S.StepLR(o, step_size=4, gamma=0.5)], milestones=[6, 16])

    def seq_warmup_cos(o):
        return S.SequentialLR(o, [S.LambdaLR(o, warmup_lambda), S.CosineAnnealingLR(o, T_max=20)], milestones=[4])
    def seq_linear_cos(o):   # what dg_linear_warmup_lr(start 0.02, end 0.1, 5 steps) wrapping cosine(T_max 10) is
        return S.SequentialLR(o, [S.LinearLR(o, start_factor=0.2, end_factor=1.0, total_iters=5),
                                  S.CosineAnnealingLR(o, T_max=10)], milestones=[5])
    seqs = [
        ("warmup_seq_linear_cosine", torch_sequence(seq_linear_cos, 0.1, n=20)),
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
        ("lambda", torch_sequence(lambda o: S.LambdaLR(o, lambda_decay), 0.1)),
        ("poly", paddle_polynomial(0.1, 12, end_lr=0.001, power=2.0)),
        ("poly_default", paddle_polynomial(0.05, 20)),
        ("poly_cycle", paddle_polynomial(0.1, 7, end_lr=0.01, power=1.5, cycle=True)),
        ("onecycle", oc_sgd),
        ("onecycle_3phase_linear", oc_adam),
        ("onecycle_no_momentum", oc_nomom),
        ("sequential", torch_sequence(seq_exp_cos_step, 0.1)),
        ("sequential_warmup", torch_sequence(seq_warmup_cos, 0.1)),
    ]
    moms = [("onecycle", oc_sgd_mom), ("onecycle_3phase_linear", oc_adam_mom)]
    write("optim_lr.txt", [("lr_" + name, torch.tensor(v, dtype=torch.float64)) for name, v in seqs] +
          [("mom_" + name, torch.tensor(v, dtype=torch.float64)) for name, v in moms])


GROUP_LRS = (0.1, 0.02)


def torch_groups(make_sched, momentum=0.0):
    """Both groups' lr at construction and after each of N_LR steps: an SGD over two groups
    with the lrs GROUP_LRS."""
    a, b = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([{"params": [a], "lr": GROUP_LRS[0]}, {"params": [b], "lr": GROUP_LRS[1]}], lr=1.0,
                          momentum=momentum)
    s = make_sched(opt)
    lrs = [list(s.get_last_lr())]
    for _ in range(N_LR):
        opt.step()
        s.step()
        lrs.append(list(s.get_last_lr()))
    return torch.tensor(lrs, dtype=torch.float64).t().contiguous()


def lr_groups_file():
    S = torch.optim.lr_scheduler

    def per_group(f):
        return torch.tensor([f(lr) for lr in GROUP_LRS], dtype=torch.float64)
    recs = [
        ("step", torch_groups(lambda o: S.StepLR(o, step_size=3, gamma=0.5))),
        ("cosine", torch_groups(lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001))),
        ("lambda", torch_groups(lambda o: S.LambdaLR(o, lambda_decay))),
        ("onecycle", torch_groups(lambda o: S.OneCycleLR(o, max_lr=list(GROUP_LRS), total_steps=N_LR), momentum=0.9)),
        ("sequential", torch_groups(lambda o: S.SequentialLR(
            o, [S.LambdaLR(o, warmup_lambda), S.CosineAnnealingLR(o, T_max=20)], milestones=[4]))),
        # Paddle's schedules from each group's own lr (end_lr / start_lr apply to every group)
        ("poly", per_group(lambda lr: paddle_polynomial(lr, 12, end_lr=0.001, power=2.0))),
        ("warmup_cosine", per_group(lambda lr: paddle_linear_warmup(
            8, 0.0, lr, [0.001 + (lr - 0.001) * (1 + math.cos(math.pi * e / 15)) / 2 for e in range(N_LR + 1)]))),
    ]
    write("optim_lr_groups.txt", [("lr_" + name, t) for name, t in recs])


def plateau_file():
    """ReduceLROnPlateau over two groups, fed one metric sequence: falling, then flat, then
    noisy-flat, then falling again (so improvements, patience, cooldown and min_lr all act)."""
    S = torch.optim.lr_scheduler
    metric = [1.0, 0.8, 0.7, 0.69, 0.695, 0.7, 0.71, 0.6999, 0.7, 0.5, 0.45, 0.46, 0.47, 0.48, 0.44, 0.45,
              0.46, 0.47, 0.47, 0.3, 0.31, 0.32, 0.33, 0.34, 0.35, 0.36, 0.2, 0.21, 0.22, 0.23]
    assert len(metric) == N_LR
    configs = [
        # name, mode, factor, patience, threshold, threshold_mode, cooldown, min_lr, eps
        ("min_rel", "min", 0.5, 2, 1e-4, "rel", 0, 0.0, 1e-8),
        ("min_abs_cooldown", "min", 0.3, 1, 0.02, "abs", 2, 0.005, 1e-8),
        ("max_rel", "max", 0.5, 1, 0.01, "rel", 1, 0.0, 1e-8),
        ("min_eps", "min", 0.5, 0, 1e-4, "rel", 0, 0.0, 0.004),
    ]
    recs = [("metric", torch.tensor(metric, dtype=torch.float64))]
    for name, mode, factor, patience, threshold, tmode, cooldown, min_lr, eps in configs:
        a, b = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([{"params": [a], "lr": GROUP_LRS[0]}, {"params": [b], "lr": GROUP_LRS[1]}], lr=1.0)
        s = S.ReduceLROnPlateau(opt, mode=mode, factor=factor, patience=patience, threshold=threshold,
                                threshold_mode=tmode, cooldown=cooldown, min_lr=min_lr, eps=eps)
        lrs, bad, cool = [[g["lr"] for g in opt.param_groups]], [], []
        for m in metric:
            opt.step()
            s.step(m if mode == "min" else -m)
            lrs.append([g["lr"] for g in opt.param_groups])
            bad.append(s.num_bad_epochs)
            cool.append(s.cooldown_counter)
        assert lrs[-1] != lrs[0], name + ": the lr never drops"
        recs += [("hp_" + name, f32(0 if mode == "min" else 1, factor, patience, threshold, 0 if tmode == "rel" else 1,
                                     cooldown, min_lr, eps)),
                 ("lr_" + name, torch.tensor(lrs, dtype=torch.float64).t().contiguous()),
                 ("bad_" + name, torch.tensor(bad, dtype=torch.int64)),
                 ("cool_" + name, torch.tensor(cool, dtype=torch.int64))]
    write("optim_plateau.txt", recs)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    optimizers()
    clip_file()
    lr_file()
    lr_groups_file()
    plateau_file()


if __name__ == "__main__":
    main()
