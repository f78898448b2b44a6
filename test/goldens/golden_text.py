"""test/goldens/golden_text.py — the text record format that golden_load() in test/test_util.h
reads, shared by the golden scripts:
    tensor <name> <f32|i64> <ndim> <dims...>
    <values, %.9g for floats, PER_LINE per line>"""
import torch

PER_LINE = 8


def fmt_tensor(name, t):
    t = t.detach().cpu().contiguous()
    if t.dtype in (torch.int64, torch.int32):
        kind, vals = "i64", ["%d" % v for v in t.reshape(-1).tolist()]
    else:
        kind = "f32"
        vals = ["%.9g" % v for v in t.to(torch.float32).reshape(-1).tolist()]
    head = "tensor %s %s %d%s" % (name, kind, t.dim(), "".join(" %d" % d for d in t.shape))
    lines = [head]
    for i in range(0, len(vals), PER_LINE):
        lines.append(" ".join(vals[i:i + PER_LINE]))
    return "\n".join(lines) + "\n"
