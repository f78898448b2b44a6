"""bench/ops_torch.py — the same figures as bench/ops.c, measured with PyTorch (Debian's
python3-torch 1.13), one thread, printed in the same `<name> <value> <unit>` lines.
Run with /usr/bin/python3. bench/run_ops.sh alternates it with the C program."""
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.manual_seed(1)


def time_it(fn, min_s):
    fn()
    reps, t0 = 0, time.perf_counter()
    while True:
        fn()
        reps += 1
        t = time.perf_counter() - t0
        if t >= min_s:
            return t / reps


def tiny():
    a = torch.randn(4, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    best = 1e9
    for _ in range(3):
        n = 200000
        t0 = time.perf_counter()
        for _ in range(n):
            a + b
        best = min(best, (time.perf_counter() - t0) / n * 1e9)
    print(f"tiny_add_grad {best:.0f} ns", flush=True)


def sgemm():
    for n in (256, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = time_it(lambda: torch.matmul(a, b), 1.0)
        print(f"sgemm_{n} {2.0 * n ** 3 / t / 1e9:.1f} GFLOP/s", flush=True)


def conv(name, n, c, hw, oc, k, stride, pad):
    x = torch.randn(n, c, hw, hw)
    w = torch.randn(oc, c, k, k)
    oh = (hw + 2 * pad - k) // stride + 1
    flops = 2.0 * n * oc * oh * oh * c * k * k
    with torch.no_grad():
        t = time_it(lambda: F.conv2d(x, w, stride=stride, padding=pad), 1.0)
    print(f"conv_{name}_fwd {flops / t / 1e9:.1f} GFLOP/s", flush=True)
    x.requires_grad_(True)
    w.requires_grad_(True)

    def fb():
        F.conv2d(x, w, stride=stride, padding=pad).sum().backward()
        x.grad = None
        w.grad = None

    t = time_it(fb, 1.5)
    print(f"conv_{name}_fwdbwd {3 * flops / t / 1e9:.1f} GFLOP/s", flush=True)


tiny()
if len(sys.argv) > 1 and sys.argv[1] == "--tiny":
    sys.exit(0)
sgemm()
conv("stem7x7s2_3to64_224", 32, 3, 224, 64, 7, 2, 3)
conv("3x3_64_56", 32, 64, 56, 64, 3, 1, 1)
conv("3x3_128_28", 32, 128, 28, 128, 3, 1, 1)
conv("3x3_256_14", 32, 256, 14, 256, 3, 1, 1)
conv("3x3_512_7", 32, 512, 7, 512, 3, 1, 1)
conv("1x1s2_64to128_56", 32, 64, 56, 128, 1, 2, 0)
