"""bench/gpu_models_torch.py — the workloads of bench/gpu_models.c in PyTorch eager, fp32 on
cuda:0, for bench/run_gpu.sh to compare against:
    resnet18_b32_96    torchvision resnet18 (1000 classes), batch 32 at 96x96, SGD momentum, cross-entropy
    resnet18_b128_224  the same at batch 128, 224x224
    resnet18_b16_224   the same at batch 16
    mnist_cnn_b100     Paddle's multi-GPU MNIST tutorial's MNIST CNN, batch 100, SGD momentum, cross-entropy
    linearnet          Paddle's dynamic-graph distributed quick start's LinearNet, Linear(10,10) -> Linear(10,1), MSE, Adam 1e-3, fresh batch each step
Usage: python3 bench/gpu_models_torch.py [workload ...]   (no workload: all four)
cudnn.benchmark is on (PyTorch's best convolution algorithms) and TF32 is off for matmul and
cuDNN, as dygraph's default. Warm-up, then a timed run sized from the warm-up to last about
BENCH_SECONDS (default 3), with torch.cuda.synchronize() before each clock read. Prints, like
bench_gpu_models,
    <workload> <figure> img/s|steps/s device_mallocs <cudaMalloc calls during the timed steps>
(the caching allocator's segment.all.allocated count). Without CUDA it prints one skip line and
exits 0."""
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the comparison then shows PyTorch as n/a
    print(f"gpu_models_torch.py: torch not importable ({e}): skipped")
    sys.exit(0)

if not torch.cuda.is_available():
    print("gpu_models_torch.py: torch.cuda.is_available() is false: skipped")
    sys.exit(0)

import torchvision  # noqa: E402  (only needed once CUDA is known to be there)

from torch_nets import MnistCNN  # noqa: E402

torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda:0")
SECONDS = float(os.environ.get("BENCH_SECONDS", "3")) or 3.0

WORKLOADS = {  # name: (batch, side, warm-up steps); batch 0 is LinearNet
    "resnet18_b32_96": (32, 96, 5),
    "resnet18_b128_224": (128, 224, 5),
    "resnet18_b16_224": (16, 224, 5),
    "mnist_cnn_b100": (100, 28, 20),
    "linearnet": (0, 0, 50),
}


def mallocs():
    return torch.cuda.memory_stats(dev).get("segment.all.allocated", 0)


def bench(name):
    batch, side, warmup = WORKLOADS[name]
    torch.manual_seed(1)
    if batch:
        net = (MnistCNN() if side == 28 else torchvision.models.resnet18(num_classes=1000)).to(dev)
        classes = 10 if side == 28 else 1000
        x = torch.randn(batch, 1 if side == 28 else 3, side, side, device=dev)
        y = torch.randint(0, classes, (batch,), device=dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

        def step():
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:
        net = nn.Sequential(nn.Linear(10, 10), nn.Linear(10, 1)).to(dev)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)

        def step():
            xs = torch.randn(10, 10, device=dev)
            ys = torch.randn(10, 1, device=dev)
            loss = F.mse_loss(net(xs), ys)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    net.train()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize(dev)
    probe = 3 if batch else 20
    t0 = time.perf_counter()
    for _ in range(probe):
        step()
    torch.cuda.synchronize(dev)
    per_step = (time.perf_counter() - t0) / probe
    steps = max(10, int(SECONDS / per_step) if per_step > 0 else 1000)

    m0 = mallocs()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize(dev)
    t = time.perf_counter() - t0
    dm = mallocs() - m0
    if batch:
        print(f"{name} {steps * batch / t:.1f} img/s device_mallocs {dm}", flush=True)
    else:
        print(f"{name} {steps / t:.1f} steps/s device_mallocs {dm}", flush=True)


def main():
    names = sys.argv[1:] or list(WORKLOADS)
    for n in names:
        if n not in WORKLOADS:
            sys.exit(f"unknown workload {n} (known: {' '.join(WORKLOADS)})")
    for n in names:
        bench(n)
        torch.cuda.empty_cache()  # the next workload starts from an empty cache, as on dygraph's side


if __name__ == "__main__":
    main()
