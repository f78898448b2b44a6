#!/usr/bin/python3
"""test/text_parity.py — the text classifier of samples/langid.c against PyTorch, step for step.

usage: text_parity.py LANGID_BIN WORK_DIR

For each configuration the C sample trains 50 steps from its own initial weights, writing them
(--save-init), the batches it drew (--dump-batches) and its losses (--loss-log). This script
builds the same model in PyTorch (Embedding with padding_idx 0, mean over the word's n-grams,
LayerNorm, Linear; the module's names are the state dict's), loads those weights, replays those
batches with torch.optim's optimizer, and requires every step's loss to agree within 1e-4.
Exit 1 names the first step that does not."""
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_read import read_safetensors  # noqa: E402

torch.set_num_threads(1)
STEPS = 50
TOL = 1e-4


class BagOfNgrams(torch.nn.Module):
    def __init__(self, buckets, dim, classes):
        super().__init__()
        self.embedding = torch.nn.Embedding(buckets + 1, dim, padding_idx=0)
        self.norm = torch.nn.LayerNorm(dim)
        self.fc = torch.nn.Linear(dim, classes)

    def forward(self, ids):
        e = self.embedding(ids)
        count = (ids > 0).to(e.dtype).sum(1, keepdim=True).clamp(min=1)
        return self.fc(self.norm(e.sum(1) / count))


def run(binary, work, name, extra, make_opt):
    init, batches, log = (os.path.join(work, f"{name}.{k}") for k in ("init.safetensors", "batches.safetensors", "loss.txt"))
    cmd = [binary, "--per-lang", "600", "--batch-size", "32", "--dim", "16", "--buckets", "2048", "--max-ngrams", "40",
           "--max-steps", str(STEPS), "--threads", "1", "--save-init", init, "--dump-batches", batches, "--loss-log", log] + extra
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    state = read_safetensors(init)
    data = read_safetensors(batches)
    c_losses = [float(line.split()[1]) for line in open(log)]
    buckets, dim = state["embedding.weight"].shape[0] - 1, state["embedding.weight"].shape[1]
    model = BagOfNgrams(buckets, dim, state["fc.weight"].shape[0])
    model.load_state_dict(state, strict=True)
    opt = make_opt(model.parameters())
    worst = 0.0
    for step in range(STEPS):
        loss = F.cross_entropy(model(data["ids"][step]), data["labels"][step])
        opt.zero_grad()
        loss.backward()
        opt.step()
        d = abs(loss.item() - c_losses[step])
        worst = max(worst, d)
        if d > TOL:
            print(f"text_parity {name}: step {step + 1}: dygraph loss {c_losses[step]:.9g}, PyTorch {loss.item():.9g} "
                  f"(|diff| {d:.3g} > {TOL})")
            return False
    print(f"text_parity {name}: {STEPS} steps, losses {c_losses[0]:.6f} -> {c_losses[-1]:.6f}, "
          f"worst |dygraph - PyTorch| {worst:.2e}")
    return True


def main():
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ok = run(binary, work, "adam", ["--optimizer", "adam", "--lr", "0.01"], lambda p: torch.optim.Adam(p, lr=0.01))
    ok &= run(binary, work, "adam_sparse", ["--optimizer", "adam", "--lr", "0.01", "--sparse"],
              lambda p: torch.optim.Adam(p, lr=0.01))
    ok &= run(binary, work, "momentum", ["--optimizer", "sgd", "--lr", "0.5", "--momentum", "0.9"],
              lambda p: torch.optim.SGD(p, lr=0.5, momentum=0.9))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
