"""bench/models_torch.py — the same workloads as bench/models.c in PyTorch 1.13 (Debian),
same batch sizes, optimizers and losses, one workload per process:
    /usr/bin/python3 bench/models_torch.py <workload> <threads>
prints `<workload>_t<threads> <images/s> img/s <peak RSS MB> MB`.
BENCH_BF16=1: forward and loss under torch.autocast("cpu", torch.bfloat16), the counterpart of
dygraph's DG_CPU_BF16=1 (bf16 convolutions, f32 weights)."""
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

from torch_nets import MnistCNN

name, threads = sys.argv[1], int(sys.argv[2])
BF16 = os.environ.get("BENCH_BF16") == "1"
torch.set_num_threads(threads)
torch.manual_seed(1)


class MyNet(nn.Module):  # Paddle's Fleet collective tutorial CIFAR
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.conv3 = nn.Conv2d(64, 64, 3)
        self.linear1 = nn.Linear(1024, 64)
        self.linear2 = nn.Linear(64, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = torch.flatten(F.relu(self.conv3(x)), 1)
        return self.linear2(F.relu(self.linear1(x)))


class FaceNet(nn.Module):  # Paddle's Fleet collective tutorial keypoints
    def __init__(self, num_keypoints=15):
        super().__init__()
        self.backbone = torchvision.models.resnet18()
        self.outLayer1 = nn.Sequential(nn.Linear(1000, 512), nn.ReLU(), nn.Dropout(0.1))
        self.outLayer2 = nn.Linear(512, num_keypoints * 2)

    def forward(self, x):
        return self.outLayer2(self.outLayer1(self.backbone(x)))


train, mse, per_step = True, False, False
if name == "linear":  # Paddle's dynamic-graph distributed quick start LinearNet
    net, batch, mse, per_step = nn.Sequential(nn.Linear(10, 10), nn.Linear(10, 1)), 10, True, True
    x, y = torch.randn(10, 10), torch.randn(10, 1)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
elif name == "mnist":
    net, batch = MnistCNN(), 100
    x, y = torch.randn(100, 1, 28, 28), torch.randint(0, 10, (100,))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
elif name == "cifar":
    net, batch = MyNet(10), 32
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
elif name == "face":
    net, batch, mse = FaceNet(15), 32, True
    x, y = torch.randn(32, 3, 96, 96), torch.rand(32, 30)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
elif name == "resnet18_infer":
    net, batch, train = torchvision.models.resnet18(), 32, False
    net.eval()
    x = torch.randn(32, 3, 224, 224)
else:
    sys.exit(f"unknown workload {name}")


def step():
    if train:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=BF16):
            out = net(x)
            loss = F.mse_loss(out, y) if mse else F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    else:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=BF16):
            net(x)


step()
step()
steps, t0 = 0, time.perf_counter()
while True:
    step()
    steps += 1
    t = time.perf_counter() - t0
    if t >= 4.0 and steps >= 3:
        break
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
if per_step:
    print(f"{name}_t{threads} {steps / t:.1f} steps/s {rss:.0f} MB", flush=True)
else:
    print(f"{name}_t{threads} {steps * batch / t:.1f} img/s {rss:.0f} MB", flush=True)
