#!/usr/bin/python3
# test/goldens/make_rnn_goldens.py — PyTorch 1.13 reference values for the recurrent layers and
# cells (test/test_rnn.c): rnn_goldens.safetensors, every tensor float64 (the test runs our
# layers in float64 against them to ~1e-12, and in float32 to float32's tolerance).
#
# How to run:   make goldens   (or /usr/bin/python3 test/goldens/make_rnn_goldens.py [OUT_DIR])
# Per case <c>: c.cfg (int64: mode 0 tanh 1 relu 2 lstm 3 gru, num_layers, bidirectional,
# batch_first, bias, has h0, has c0, has lengths, enforce_sorted, input_size, hidden_size, cell),
# c.x, c.h0, c.c0, c.lengths (when given), c.p.<name> (the state dict), c.out, c.hn, c.cn, the
# weightings c.gout / c.ghn / c.gcn, and the gradients of sum(out gout) + sum(hn ghn) +
# sum(cn gcn): c.grad_x, c.grad_h0, c.grad_c0, c.grad.<name>.
import os
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_models_goldens import write_safetensors  # noqa: E402

OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20261207)
MODES = {"tanh": 0, "relu": 1, "lstm": 2, "gru": 3}


def make_layer(mode, inp, hid, layers, bidir, batch_first, bias, cell):
    if cell:
        cls = {"lstm": torch.nn.LSTMCell, "gru": torch.nn.GRUCell}.get(mode)
        if cls is None:
            return torch.nn.RNNCell(inp, hid, bias=bias, nonlinearity=mode)
        return cls(inp, hid, bias=bias)
    kw = dict(num_layers=layers, bias=bias, batch_first=batch_first, bidirectional=bidir)
    if mode == "lstm":
        return torch.nn.LSTM(inp, hid, **kw)
    if mode == "gru":
        return torch.nn.GRU(inp, hid, **kw)
    return torch.nn.RNN(inp, hid, nonlinearity=mode, **kw)


def case(recs, name, mode, inp, hid, T=5, N=3, layers=1, bidir=False, batch_first=False, bias=True, h0=False, c0=False,
         lengths=None, enforce_sorted=True, cell=False, unbatched=False):
    m = make_layer(mode, inp, hid, layers, bidir, batch_first, bias, cell).double()
    with torch.no_grad():
        for p in m.parameters():   # wider than torch's init, so the gates leave their linear range
            p.uniform_(-0.8, 0.8)
    D = 2 if bidir else 1
    if cell:
        xs = (N, inp) if not unbatched else (inp,)
        hs = (N, hid) if not unbatched else (hid,)
    else:
        xs = ((N, T, inp) if batch_first else (T, N, inp)) if not unbatched else (T, inp)
        hs = (layers * D, N, hid) if not unbatched else (layers * D, hid)
    x = torch.randn(*xs, dtype=torch.float64, requires_grad=True)
    h = torch.randn(*hs, dtype=torch.float64, requires_grad=True) if h0 else None
    c = torch.randn(*hs, dtype=torch.float64, requires_grad=True) if c0 else None
    if cell:
        if mode == "lstm":
            hn, cn = m(x, (h, c) if h is not None else None)
        else:
            hn, cn = m(x, h), None
        out = hn
    else:
        state = (h, c) if mode == "lstm" and h is not None else h
        if lengths is not None:
            L = torch.tensor(lengths, dtype=torch.int64)
            packed = pack_padded_sequence(x, L, batch_first=batch_first, enforce_sorted=enforce_sorted)
            po, st = m(packed, state)
            out, _ = pad_packed_sequence(po, batch_first=batch_first, total_length=T)
        else:
            out, st = m(x, state)
        hn, cn = (st if mode == "lstm" else (st, None))
    gout = torch.rand(out.shape, dtype=torch.float64) + 0.5
    ghn = torch.rand(hn.shape, dtype=torch.float64) + 0.5
    loss = (out * gout).sum() + (0 if cell else (hn * ghn).sum())
    gcn = None
    if cn is not None:
        gcn = torch.rand(cn.shape, dtype=torch.float64) + 0.5
        loss = loss + (cn * gcn).sum()
    loss.backward()
    cfg = [MODES[mode], layers, int(bidir), int(batch_first), int(bias), int(h0), int(c0), int(lengths is not None),
           int(enforce_sorted), inp, hid, int(cell)]
    recs.append((name + ".cfg", torch.tensor(cfg, dtype=torch.int64)))
    recs.append((name + ".x", x.detach()))
    if h is not None:
        recs += [(name + ".h0", h.detach()), (name + ".grad_h0", h.grad)]
    if c is not None:
        recs += [(name + ".c0", c.detach()), (name + ".grad_c0", c.grad)]
    if lengths is not None:
        recs.append((name + ".lengths", torch.tensor(lengths, dtype=torch.int64)))
    for k, p in m.named_parameters():
        recs += [(name + ".p." + k, p.detach()), (name + ".grad." + k, p.grad)]
    recs += [(name + ".out", out.detach()), (name + ".gout", gout), (name + ".grad_x", x.grad)]
    if not cell:
        recs += [(name + ".hn", hn.detach()), (name + ".ghn", ghn)]
    if cn is not None:
        recs += [(name + ".cn", cn.detach()), (name + ".gcn", gcn)]


def main():
    recs = []
    case(recs, "lstm_1l", "lstm", 5, 4, h0=True, c0=True)
    case(recs, "lstm_2l_bi_bf_len", "lstm", 5, 4, T=6, layers=2, bidir=True, batch_first=True, lengths=[6, 4, 2])
    case(recs, "lstm_unbatched", "lstm", 3, 4, T=4, h0=True, c0=True, unbatched=True)
    case(recs, "gru_2l_bi_unsorted", "gru", 3, 5, T=6, N=4, layers=2, bidir=True, h0=True, lengths=[3, 6, 1, 5],
         enforce_sorted=False)
    case(recs, "gru_1l_nobias", "gru", 4, 3, bias=False)
    case(recs, "rnn_tanh_2l_nobias", "tanh", 4, 3, layers=2, bias=False, h0=True)
    case(recs, "rnn_relu_bi", "relu", 4, 3, bidir=True)
    case(recs, "rnn_tanh_len", "tanh", 2, 3, T=4, N=3, lengths=[4, 3, 3])
    case(recs, "cell_lstm", "lstm", 4, 3, h0=True, c0=True, cell=True)
    case(recs, "cell_lstm_zero", "lstm", 4, 3, cell=True)
    case(recs, "cell_gru", "gru", 4, 3, h0=True, cell=True)
    case(recs, "cell_tanh", "tanh", 4, 3, h0=True, cell=True)
    case(recs, "cell_relu_unbatched", "relu", 4, 3, h0=True, cell=True, unbatched=True)
    write_safetensors(os.path.join(OUT_DIR, "rnn_goldens.safetensors"), recs, keep_f64=True)


if __name__ == "__main__":
    main()
