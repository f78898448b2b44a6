"""bench/rnn_torch.py — bench/rnn.c's workloads in PyTorch 1.13 (Debian), one per process:
    /usr/bin/python3 bench/rnn_torch.py <workload> <threads>
prints `<workload>_t<threads> <figure> <unit> <peak RSS MB> MB`. The wlm model is
pytorch/examples' word_language_model RNNModel (test/wlm_parity.py), stepped as its main.py does."""
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
from wlm_parity import RNNModel, repackage_hidden  # noqa: E402

name, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(1)


def lstm_layer(T, N, H, min_s):
    lstm = torch.nn.LSTM(H, H)
    x = torch.randn(T, N, H, requires_grad=True)
    reps, t0, i = 0, 0.0, 0
    while True:
        if i == 2:
            t0 = time.time()
        y, _ = lstm(x)
        y.sum().backward()
        lstm.zero_grad(set_to_none=True)
        x.grad = None
        if i >= 2:
            reps += 1
            if time.time() - t0 >= min_s:
                break
        i += 1
    return reps / (time.time() - t0)


def wlm(min_s):
    ntok, bsz, bptt = 11993, 20, 35
    model = RNNModel("LSTM", ntok, 200, 200, 2, 0.2, False)
    model.train()
    data, target = torch.randint(ntok, (bptt, bsz)), torch.randint(ntok, (bptt * bsz,))
    hidden = model.init_hidden(bsz)
    reps, t0, i = 0, 0.0, 0
    while True:
        if i == 2:
            t0 = time.time()
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = F.nll_loss(output, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-20)
        if i >= 2:
            reps += 1
            if time.time() - t0 >= min_s:
                break
        i += 1
    return reps * bptt * bsz / (time.time() - t0)


if name == "lstm650":
    v, unit = lstm_layer(35, 20, 650, 3.0), "it/s"
elif name == "lstm256":
    v, unit = lstm_layer(100, 64, 256, 3.0), "it/s"
elif name == "wlm":
    v, unit = wlm(6.0), "tok/s"
else:
    sys.exit("unknown workload " + name)
print(f"{name}_t{threads} {v:.2f} {unit} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
