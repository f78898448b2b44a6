# test/safetensors_read.py — the parity scripts' reader of the safetensors files the samples write
# (--save-init, --dump-batches): every record as a torch tensor, by name.
import json
import struct

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "BOOL": torch.bool, "U8": torch.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        dt = DTYPES[h["dtype"]]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dt) if b > a else torch.empty(0, dtype=dt)
        out[name] = t.reshape(h["shape"]).clone()
    return out
