#!/usr/bin/python3
# test/wlm_parity.py — samples/word_language_model.c against PyTorch 1.13 running pytorch/examples'
# word_language_model the way its main.py and model.py write it.
#
#   wlm_parity.py steps BINARY WORKDIR [DATA_DIR]    (make test)
#       For each mode (LSTM, GRU, RNN_TANH, RNN_RELU, and LSTM with --tied) the sample trains
#       STEPS batches with dropout 0 on one thread, writing its initial state dict (--save-init),
#       the batches (--dump-batches) and the losses (--loss-log); PyTorch loads the state dict
#       with strict=True and replays the same batches (hidden state carried and detached, the
#       gradient clipped to norm 0.25, p -= lr grad). Every loss must agree within TOL. Then
#       word_language_model_generate samples 40 words from the saved LSTM (all must be corpus words).
#   wlm_parity.py epochs BINARY WORKDIR [DATA_DIR] [EPOCHS] [SEED] [DROPOUT]
#       The acceptance run: the default LSTM (2 layers of 200, dropout 0.2) trained EPOCHS (2)
#       epochs by the sample and by PyTorch from the same initial weights on the same corpus;
#       prints both validation perplexities per epoch (dropout masks differ: PyTorch draws its own).
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_read import read_safetensors  # noqa: E402

torch.set_num_threads(1)
STEPS = 30
TOL = 1e-4


class RNNModel(nn.Module):
    """model.py's RNNModel."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def repackage_hidden(h):
    return h.detach() if isinstance(h, torch.Tensor) else tuple(repackage_hidden(v) for v in h)


def model_from(state, mode, nlayers, dropout, tied):
    ntoken, ninp = state["encoder.weight"].shape
    nhid = state["rnn.weight_hh_l0"].shape[1]
    m = RNNModel(mode, ntoken, ninp, nhid, nlayers, dropout, tied)
    m.load_state_dict(state, strict=True)
    return m


def steps(binary, work, data_dir):
    worst_all = 0.0
    # lr 2, not main.py's 20: at lr 20 a float32 run diverges from the same run in float64 by 1e-4 within
    # 5 steps (PyTorch's own float32 and float64 replays of these batches differ as much as dygraph and
    # PyTorch do), so the comparison would measure the chaos of the step, not the implementation
    # (RNN_RELU's unbounded units blow the loss up at lr 2: 0.1 there)
    configs = [("LSTM", []), ("GRU", []), ("RNN_TANH", []), ("RNN_RELU", ["--lr", "0.1"]), ("LSTM", ["--tied"])]
    for mode, extra in configs:
        name = mode + ("_tied" if "--tied" in extra else "")
        init, batches, log = (os.path.join(work, f"{name}.{k}") for k in ("init.safetensors", "batches.safetensors", "loss.txt"))
        lr = float(extra[extra.index("--lr") + 1]) if "--lr" in extra else 2.0
        cmd = [binary, "--data", data_dir, "--model", mode, "--emsize", "24", "--nhid", "24", "--nlayers", "2", "--bptt", "12",
               "--batch_size", "6", "--dropout", "0", "--lr", str(lr), "--epochs", "1", "--max-steps", str(STEPS), "--threads", "1",
               "--save", os.path.join(work, name + ".model.safetensors"), "--save-init", init, "--dump-batches", batches,
               "--loss-log", log] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        state, data = read_safetensors(init), read_safetensors(batches)
        c_losses = [float(line.split()[1]) for line in open(log)]
        model = model_from(state, mode, 2, 0.0, "--tied" in extra)
        model.train()
        hidden = model.init_hidden(6)
        worst = 0.0
        for step in range(STEPS):
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            output, hidden = model(data[f"input.{step}"], hidden)
            loss = F.nll_loss(output, data[f"target.{step}"])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            d = abs(loss.item() - c_losses[step])
            worst = max(worst, d)
            assert d <= TOL, f"{name} step {step}: dygraph {c_losses[step]:.9g} PyTorch {loss.item():.9g} (|diff| {d:.3g})"
        print(f"wlm parity {name:9s}: {STEPS} steps, worst loss difference {worst:.3g}")
        worst_all = max(worst_all, worst)
    print(f"wlm parity: all {len(configs)} configurations within {TOL} (worst {worst_all:.3g})")
    # generate.py's part: 40 words sampled from the LSTM the steps above saved
    gen = os.path.join(os.path.dirname(binary), "word_language_model_generate")
    outf = os.path.join(work, "generated.txt")
    subprocess.run([gen, "--data", data_dir, "--checkpoint", os.path.join(work, "LSTM.model.safetensors"), "--outf", outf,
                    "--words", "40", "--threads", "1"], check=True, stdout=subprocess.DEVNULL)
    vocab = set(w for f in ("train", "valid", "test") for line in open(os.path.join(data_dir, f + ".txt"), encoding="utf8")
                for w in line.split() + ["<eos>"])
    got = open(outf, encoding="utf8").read().split()
    assert len(got) == 40 and all(w in vocab for w in got), f"generate: {len(got)} words, some not in the corpus: {got}"
    print("wlm generate: 40 words, all from the corpus")


# ---- the acceptance run: main.py's loop in PyTorch from the sample's initial weights ----

def tokenize(dictionary, path):
    ids = []
    with open(path, "r", encoding="utf8") as f:
        for line in f:
            for w in line.split() + ["<eos>"]:
                ids.append(dictionary.setdefault(w, len(dictionary)))
    return torch.tensor(ids, dtype=torch.int64)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def epochs(binary, work, data_dir, n_epochs, seed, dropout):
    init = os.path.join(work, "epochs.init.safetensors")
    cmd = [binary, "--data", data_dir, "--epochs", str(n_epochs), "--seed", str(seed), "--dropout", str(dropout), "--save-init", init,
           "--save", os.path.join(work, "epochs.model.safetensors")]
    print("dygraph:", " ".join(cmd), flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True)
    print(f"dygraph wall time {time.time() - t0:.1f} s", flush=True)
    d = {}
    train, valid = (tokenize(d, os.path.join(data_dir, f + ".txt")) for f in ("train", "valid"))
    tokenize(d, os.path.join(data_dir, "test.txt"))
    bptt, bsz, clip, lr = 35, 20, 0.25, 20.0
    train_data, val_data = batchify(train, bsz), batchify(valid, 10)
    model = model_from(read_safetensors(init), "LSTM", 2, dropout, False)
    ntokens = len(d)

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)

    def evaluate(src):
        model.eval()
        total, hidden = 0.0, model.init_hidden(10)
        with torch.no_grad():
            for i in range(0, src.size(0) - 1, bptt):
                data, targets = get_batch(src, i)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total += len(data) * F.nll_loss(output, targets).item()
        return total / (len(src) - 1)

    torch.manual_seed(seed)
    best = None
    t0 = time.time()
    for epoch in range(1, n_epochs + 1):
        model.train()
        hidden = model.init_hidden(bsz)
        start = time.time()
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i)
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            output, hidden = model(data, hidden)
            loss = F.nll_loss(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
        val = evaluate(val_data)
        print(f"| PyTorch end of epoch {epoch:3d} | time: {time.time() - start:5.2f}s | valid loss {val:5.2f} | valid ppl {math.exp(val):8.2f}",
              flush=True)
        if best is None or val < best:
            best = val
        else:
            lr /= 4.0
    print(f"PyTorch wall time {time.time() - t0:.1f} s")


def main():
    mode, binary, work = sys.argv[1], sys.argv[2], sys.argv[3]
    data_dir = sys.argv[4] if len(sys.argv) > 4 else "build/data/fortunes-wlm"
    os.makedirs(work, exist_ok=True)
    if mode == "steps":
        steps(binary, work, data_dir)
    else:
        epochs(binary, work, data_dir, int(sys.argv[5]) if len(sys.argv) > 5 else 2, int(sys.argv[6]) if len(sys.argv) > 6 else 1111,
               float(sys.argv[7]) if len(sys.argv) > 7 else 0.2)


if __name__ == "__main__":
    main()
