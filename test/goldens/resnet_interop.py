"""test/goldens/resnet_interop.py — PyTorch side of the ResNet18 interop test.

  /usr/bin/python3 test/goldens/resnet_interop.py make  OUTDIR
      torchvision resnet18(num_classes=10), seed 0: writes OUTDIR/resnet18_init.safetensors (its
      state_dict, torchvision names) and OUTDIR/resnet18_io.safetensors: the input batch, labels,
      eval-mode logits, and every state entry after one SGD-momentum step in train mode, under
      "after.<name>".
  /usr/bin/python3 test/goldens/resnet_interop.py check OUTDIR
      reads OUTDIR/from_dygraph.safetensors (written by the C test from the loaded model) with
      this file's reader and checks it equals the state PyTorch started from.

Debian has no `safetensors` package, so this file carries a small reader/writer of the format
(8-byte little-endian header length, JSON header, raw little-endian data). `make test` runs
both steps around the C suite (test/test_interop.c)."""
import json
import struct
import sys

import torch
import torchvision

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}
BACK = {v: k for k, v in DTYPES.items()}


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base, out = 8 + n, {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        buf = bytearray(raw[base + a:base + b])
        t = torch.frombuffer(buf, dtype=BACK[e["dtype"]]) if b > a else torch.empty(0, dtype=BACK[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out


def model():
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10)


def make(outdir):
    m = model()
    write_safetensors(f"{outdir}/resnet18_init.safetensors", m.state_dict())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 64, 64, generator=g)
    y = torch.tensor([3, 7, 0, 9])
    io = {"x": x, "y": y}
    m.eval()
    with torch.no_grad():
        io["logits_eval"] = m(x)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    io["loss_train"] = loss.detach().reshape(1)
    for k, v in m.state_dict().items():
        io["after." + k] = v
    write_safetensors(f"{outdir}/resnet18_io.safetensors", io)


def check(outdir):
    ours = read_safetensors(f"{outdir}/from_dygraph.safetensors")
    ref = model().state_dict()
    assert list(ours) == list(ref), f"names/order differ: {set(ours) ^ set(ref)}"
    for k, v in ref.items():
        assert ours[k].dtype == v.dtype and ours[k].shape == v.shape, f"{k}: {ours[k].dtype} {ours[k].shape} vs {v.dtype} {v.shape}"
        assert torch.equal(ours[k], v), f"{k}: values differ"
    print(f"interop: {len(ref)} tensors written by dygraph read back equal to torchvision's")


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](sys.argv[2])
