#!/usr/bin/python3
# test/goldens/make_models_goldens.py — PyTorch reference files for the model zoo tests
# (test/test_models.c, include/dygraph/models.h).
#
# How to run:  /usr/bin/python3 test/goldens/make_models_goldens.py [OUT_DIR]   (default test/goldens)
# Needs PyTorch 1.13 and torchvision 0.14 (Debian's python3-torch, python3-torchvision). Run from
# the repo root; commit the two files it writes. The output is deterministic: running it twice
# writes byte-identical files.
#
# models_names.txt — for each model, torch's state_dict() in order, every entry with its kind
# (p: parameter, b: buffer), dtype and shape; values are irrelevant, so no weights are stored:
#   model <tag> params <sum of p.numel() over parameters()> entries <len(state_dict())>
#   <p|b> <name> <f32|i64> <ndim> <d0> ... <dn-1>          (one line per entry)
#
# models_numeric.safetensors — small models with their weights and PyTorch's answers (float32,
# little endian; read with dg_load_safetensors). Each tensor name is "<tag>.<what>":
#   <tag>.<state_dict name>   the model's weights and buffers under torch's names: the C test
#                             loads them by the names its own layer tree reports, so any naming
#                             difference fails the test
#   <tag>.x, <tag>.gout       input and the weighting of the loss sum(out * gout)
#   <tag>.out                 forward output (training mode for the blocks: batch statistics)
#   <tag>.grad_x, <tag>.grad.<parameter name>   gradients of sum(out * gout)
#   <tag>.after.<buffer>      running statistics after that training forward (blocks)
#   <tag>.out_eval            eval-mode output with the updated statistics (blocks)
# Models are built in float32 (torch.manual_seed fixed), evaluated on a float64 copy, and the
# results rounded to float32, so a golden value is the correctly rounded answer and the C side's
# float32 error is the only error measured.
import collections
import copy
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torchvision
from torchvision.models.resnet import BasicBlock, Bottleneck

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join("test", "goldens")


# ---- the Paddle tutorials' networks, in PyTorch, with the Paddle tutorials' attribute names ----

class MNIST(nn.Module):
    """Paddle's multi-GPU MNIST tutorial: conv(1->20, 5, p2)+relu, maxpool 2, conv(20->20, 5, p2)+relu, maxpool 2, fc(980->10).
    Returns logits (the tutorial's softmax is folded into the loss)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, stride=1, padding=2)
        self.pool1 = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(20, 20, 5, stride=1, padding=2)
        self.pool2 = nn.MaxPool2d(2, 2)
        self.fc = nn.Linear(980, 10)

    def forward(self, x):
        x = self.pool1(torch.relu(self.conv1(x)))
        x = self.pool2(torch.relu(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


class MyNet(nn.Module):
    """Paddle's Fleet collective tutorial's CIFAR-10 network."""

    def __init__(self, num_classes=1):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3)
        self.pool1 = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.pool2 = nn.MaxPool2d(2, 2)
        self.conv3 = nn.Conv2d(64, 64, 3)
        self.flatten = nn.Flatten()
        self.linear1 = nn.Linear(1024, 64)
        self.linear2 = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.pool1(torch.relu(self.conv1(x)))
        x = self.pool2(torch.relu(self.conv2(x)))
        x = torch.relu(self.conv3(x))
        x = torch.relu(self.linear1(self.flatten(x)))
        return self.linear2(x)


class FaceNet(nn.Module):
    """Paddle's Fleet collective tutorial's face keypoint network."""

    def __init__(self, num_keypoints):
        super().__init__()
        self.backbone = torchvision.models.resnet18()
        self.outLayer1 = nn.Sequential(nn.Linear(1000, 512), nn.ReLU(), nn.Dropout(0.1))
        self.outLayer2 = nn.Linear(512, num_keypoints * 2)

    def forward(self, x):
        return self.outLayer2(self.outLayer1(self.backbone(x)))


# ---- models_names.txt ----

def names_records(tag, model):
    params = dict(model.named_parameters())
    sd = model.state_dict()
    count = sum(p.numel() for p in model.parameters())
    lines = ["model %s params %d entries %d" % (tag, count, len(sd))]
    for k, v in sd.items():
        kind = "p" if k in params else "b"
        dt = "i64" if v.dtype == torch.int64 else "f32"
        assert v.dtype in (torch.int64, torch.float32), (tag, k, v.dtype)
        lines.append("%s %s %s %d%s" % (kind, k, dt, v.dim(), "".join(" %d" % d for d in v.shape)))
    return lines


def names_file():
    torch.manual_seed(1)
    models = [
        ("resnet18_10", torchvision.models.resnet18(num_classes=10)),
        ("resnet34_10", torchvision.models.resnet34(num_classes=10)),
        ("resnet50_10", torchvision.models.resnet50(num_classes=10)),
        ("mnist_cnn", MNIST()),
        ("cifar_mynet_10", MyNet(num_classes=10)),
        ("facenet_15", FaceNet(num_keypoints=15)),
    ]
    lines = ["# written by make_models_goldens.py: torch state_dict() entries (p parameter, b buffer)"]
    for tag, m in models:
        lines += names_records(tag, m)
    with open(os.path.join(OUT_DIR, "models_names.txt"), "w", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


# ---- models_numeric.safetensors ----

def weighting(shape):
    return torch.rand(shape, dtype=torch.float32) + 0.5


def run_f64(model, x, training):
    m = copy.deepcopy(model).double()
    m.train(training)
    xd = x.to(torch.float64).requires_grad_(True)
    out = m(xd)
    gout = weighting(out.shape)
    (out * gout.to(torch.float64)).sum().backward()
    grads = [("grad." + k, p.grad) for k, p in m.named_parameters()]
    return out.detach(), gout, grads, xd.grad, m


def randomise_bn(model):
    """Non-trivial BatchNorm state, so that loading it matters."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
                mod.running_mean.uniform_(-0.3, 0.3)
                mod.running_var.uniform_(0.5, 2.0)
                mod.num_batches_tracked.fill_(3)


def block_records(tag, block, x):
    randomise_bn(block)
    out, gout, grads, gx, m = run_f64(block, x, True)
    after = [("after." + k, v) for k, v in m.state_dict().items() if ".running_" in k or ".num_batches" in k]
    m.eval()
    with torch.no_grad():
        out_eval = m(x.to(torch.float64))
    recs = list(block.state_dict().items()) + [("x", x), ("out", out), ("gout", gout), ("grad_x", gx)]
    recs += grads + after + [("out_eval", out_eval)]
    return [(tag + "." + k, v) for k, v in recs]


def numeric_file():
    recs = []
    # Paddle's multi-GPU MNIST tutorial's MNIST network: weights, logits and gradients
    torch.manual_seed(21)
    mnist = MNIST()
    x = torch.randn(3, 1, 28, 28)
    out, gout, grads, gx, _ = run_f64(mnist, x, True)
    recs += [("mnist." + k, v) for k, v in
             list(mnist.state_dict().items()) + [("x", x), ("out", out), ("gout", gout), ("grad_x", gx)] + grads]
    # torchvision's residual blocks as _make_layer builds them, in training mode
    torch.manual_seed(22)

    def ds(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    recs += block_records("basic_ds", BasicBlock(8, 16, 2, ds(8, 16, 2)), torch.randn(2, 8, 6, 6))
    recs += block_records("basic", BasicBlock(8, 8, 1), torch.randn(2, 8, 5, 5))
    recs += block_records("bottleneck_ds", Bottleneck(8, 4, 2, ds(8, 16, 2)), torch.randn(2, 8, 6, 6))
    recs += block_records("bottleneck", Bottleneck(16, 4, 1), torch.randn(2, 16, 5, 5))
    write_safetensors(os.path.join(OUT_DIR, "models_numeric.safetensors"), recs)


def write_safetensors(path, recs, keep_f64=False):
    """keep_f64: float64 tensors stay F64 (else every float is written as F32)."""
    header = collections.OrderedDict()
    blobs = []
    at = 0
    for name, t in recs:
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.int64:
            dt, data = "I64", struct.pack("<%dq" % t.numel(), *t.reshape(-1).tolist())
        elif keep_f64 and t.dtype == torch.float64:
            dt, data = "F64", struct.pack("<%dd" % t.numel(), *t.reshape(-1).tolist())
        else:
            t = t.to(torch.float32)
            dt, data = "F32", struct.pack("<%df" % t.numel(), *t.reshape(-1).tolist())
        assert name not in header, name
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    names_file()
    numeric_file()


if __name__ == "__main__":
    main()
