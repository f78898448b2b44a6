#!/usr/bin/python3
"""test/seq_parity.py — the ports of pytorch/examples (samples/mnist_pytorch.c, samples/mnist_rnn.c,
samples/time_sequence_prediction.c) against PyTorch, step for step.

usage: seq_parity.py BIN_DIR MNIST_DATA_DIR WORK_DIR

Each C sample runs its first steps with --threads 1, writing its initial weights (--save-init),
the batches and random draws it used (--dump-batches: the images and labels, the dropout masks,
the sine waves' random shifts) and its losses (--loss-log). This script builds each model as the
original Python program writes it, loads those weights with load_state_dict(strict=True),
replays the run with torch.optim's optimizer and scheduler (the dropout layers applying the
dumped masks), and requires every loss to agree: within 1e-4 for the two float32 MNIST models,
1e-9 for the float64 LSTM cells under LBFGS (each closure evaluation's loss and each step's
test loss). It prints each sample's worst difference; exit 1 names the first loss that does not
agree."""
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_read import read_safetensors  # noqa: E402

torch.set_num_threads(1)


def read_log(path):
    """{'train': [loss per step or closure evaluation], 'test': [test loss per step]}"""
    out = {"train": [], "test": []}
    for line in open(path):
        w = line.split()
        if w[0] == "test":
            out["test"].append(float(w[2]))
        else:
            out["train"].append(float(w[1]))
    return out


class MaskedDropout(nn.Module):
    """Dropout whose masks are the ones the C run drew: x * mask / (1 - p), as torch's dropout
    scales the kept values (noise.bernoulli_(1 - p).div_(1 - p); input * noise)."""

    def __init__(self, p, masks):
        super().__init__()
        self.p, self.masks, self.step = p, masks, 0

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        noise = self.masks[self.step].to(x.dtype).div_(1 - self.p)
        return x * noise


class Net(nn.Module):   # pytorch/examples mnist/main.py
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


class RnnNet(nn.Module):   # pytorch/examples mnist_rnn/main.py
    def __init__(self):
        super(RnnNet, self).__init__()
        self.rnn = nn.LSTM(input_size=28, hidden_size=64, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(64)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, input):
        input = input.reshape(-1, 28, 28)
        output, hidden = self.rnn(input)
        output = output[:, -1, :]
        output = self.batchnorm(output)
        output = self.dropout1(output)
        output = self.fc1(output)
        output = F.relu(output)
        output = self.dropout2(output)
        output = self.fc2(output)
        output = F.log_softmax(output, dim=1)
        return output


class Sequence(nn.Module):   # pytorch/examples time_sequence_prediction/train.py
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)
        self.dummy_param = nn.Parameter(torch.empty(0))

    def forward(self, input, future=0):
        outputs = []
        device = self.dummy_param.device
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double).to(device)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double).to(device)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double).to(device)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double).to(device)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


SEQ_STEPS, SEQ_LENGTH, SEQ_TOL = 2, 120, 1e-9


def seq_run(binary, work):
    """time_sequence_prediction: --steps 2 on waves of length 120 (the original's 1000 trains
    about 8x slower; the model, LBFGS and the 1000-step future are the original's). Compares
    every closure evaluation's loss and each step's test loss; also checks that the dumped data
    is generate_sine_wave.py's formula applied to the dumped shifts (numpy's sin)."""
    t0 = time.time()
    init, batches, log = (os.path.join(work, f"seq.{k}") for k in ("init.safetensors", "batches.safetensors", "loss.txt"))
    cmd = [binary, "--steps", str(SEQ_STEPS), "--length", str(SEQ_LENGTH), "--threads", "1", "--no-plot", "--save-init", init,
           "--dump-batches", batches, "--loss-log", log]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
    t1 = time.time()
    state = read_safetensors(init)
    d = read_safetensors(batches)
    c = read_log(log)
    # generate_sine_wave.py with the C run's shifts
    T, L, N = 20, SEQ_LENGTH, 100
    shifts = d["shifts"].numpy()
    if not (shifts.shape == (N,) and shifts.min() >= -4 * T and shifts.max() < 4 * T):
        print(f"seq_parity time_sequence_prediction: shifts outside [-80, 80): {shifts}")
        return False
    x = np.empty((N, L), "int64")
    x[:] = np.array(range(L)) + shifts.reshape(N, 1)
    data_np = np.sin(x / 1.0 / T).astype("float64")
    data_diff = float(np.abs(data_np - d["data"].numpy()).max())
    if data_diff > 1e-15:
        print(f"seq_parity time_sequence_prediction: the dumped waves differ from numpy's by {data_diff:.3g}")
        return False
    # train.py, on the C run's data (as torch.load('traindata.pt') would give them)
    data = d["data"]
    input = data[3:, :-1]
    target = data[3:, 1:]
    test_input = data[:3, :-1]
    test_target = data[:3, 1:]
    seq = Sequence().double()
    seq.load_state_dict(state, strict=True)
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
    losses, test_losses = [], []
    for i in range(SEQ_STEPS):
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            future = 1000
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            test_losses.append(loss.item())
    if len(losses) != len(c["train"]) or len(test_losses) != len(c["test"]):
        print(f"seq_parity time_sequence_prediction: {len(c['train'])} closure evaluations and {len(c['test'])} tests in dygraph, "
              f"{len(losses)} and {len(test_losses)} in PyTorch")
        return False
    worst = 0.0
    for kind, mine, theirs in (("evaluation", c["train"], losses), ("test", c["test"], test_losses)):
        for k, (a, b) in enumerate(zip(mine, theirs)):
            diff = abs(a - b)
            worst = max(worst, diff)
            if diff > SEQ_TOL:
                print(f"seq_parity time_sequence_prediction: {kind} {k + 1}: dygraph loss {a:.17g}, PyTorch {b:.17g} "
                      f"(|diff| {diff:.3g} > {SEQ_TOL})")
                return False
    print(f"seq_parity time_sequence_prediction: {SEQ_STEPS} LBFGS steps, {len(losses)} closure evaluations, losses "
          f"{losses[0]:.6g} -> {losses[-1]:.6g}, test losses {', '.join(f'{v:.6g}' for v in test_losses)}, "
          f"worst |dygraph - PyTorch| {worst:.2e} (waves max |dygraph - numpy| {data_diff:.1e}; C {t1 - t0:.1f} s, "
          f"PyTorch {time.time() - t1:.1f} s)")
    return True


def mnist_run(name, binary, data_dir, work, make_model, lr, steps, batch, extra=()):
    """Runs one of the MNIST samples for `steps` steps and replays them: Adadelta + StepLR as
    the originals, nll_loss; returns (ok, worst)."""
    t0 = time.time()
    init, batches, log = (os.path.join(work, f"{name}.{k}") for k in ("init.safetensors", "batches.safetensors", "loss.txt"))
    cmd = [binary, "--dataset", "mnist", "--data", data_dir, "--batch-size", str(batch), "--test-batch-size", "1000",
           "--max-steps", str(steps), "--threads", "1", "--save-init", init, "--dump-batches", batches, "--loss-log", log] + list(extra)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t1 = time.time()
    state = read_safetensors(init)
    d = read_safetensors(batches)
    c_losses = read_log(log)["train"]
    model = make_model()
    masks = {k: d[k] for k in ("dropout1", "dropout2") if k in d}
    for k in ("dropout1", "dropout2"):   # the model's own dropout layers, their masks the dumped ones
        p = getattr(model, k).p
        setattr(model, k, MaskedDropout(p if k in masks else 0.0, masks.get(k)))
    model.load_state_dict(state, strict=True)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    model.train()
    worst = 0.0
    for step in range(steps):
        model.dropout1.step = model.dropout2.step = step
        data, target = d["data"][step], d["target"][step]
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        diff = abs(loss.item() - c_losses[step])
        worst = max(worst, diff)
        if diff > 1e-4:
            print(f"seq_parity {name}: step {step + 1}: dygraph loss {c_losses[step]:.9g}, PyTorch {loss.item():.9g} "
                  f"(|diff| {diff:.3g} > 1e-4)")
            return False
    del scheduler
    print(f"seq_parity {name}: {steps} steps (batch {batch}, dropout masks {'replayed' if masks else 'off'}), losses "
          f"{c_losses[0]:.6f} -> {c_losses[steps - 1]:.6f}, worst |dygraph - PyTorch| {worst:.2e} "
          f"(C {t1 - t0:.1f} s, PyTorch {time.time() - t1:.1f} s)")
    return True


def main():
    bindir, data_dir, work = (os.path.abspath(a) for a in sys.argv[1:4])
    os.makedirs(work, exist_ok=True)
    only = sys.argv[4:]   # names to run (all when empty)
    ok = True
    if not only or "mnist_pytorch" in only:
        ok &= mnist_run("mnist_pytorch", os.path.join(bindir, "mnist_pytorch"), data_dir, work, Net, 1.0, 40, 32)
    if not only or "mnist_rnn" in only:
        ok &= mnist_run("mnist_rnn", os.path.join(bindir, "mnist_rnn"), data_dir, work, RnnNet, 0.1, 50, 64)
    if not only or "time_sequence_prediction" in only:
        ok &= seq_run(os.path.join(bindir, "time_sequence_prediction"), work)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
