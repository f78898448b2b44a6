#!/usr/bin/python3
"""tools/rda_housing.py — the UCI Boston housing data out of Debian's r-cran-mlbench, without R:
reads the package's data/BostonHousing.rda (R's XDR serialization, xz/gzip/bzip2-compressed) and
writes UCI's housing.data layout: 506 rows of 14 whitespace-separated numbers (crim zn indus chas
nox rm age dis rad tax ptratio b lstat medv; chas, an R factor there, as its 0/1 label).

Only what a data frame of numeric and factor columns needs is read; anything else in the file is
an error naming the byte offset. Usage: rda_housing.py BostonHousing.rda OUT/housing.data"""
import bz2
import gzip
import lzma
import struct
import sys

COLUMNS = ["crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio", "b", "lstat", "medv"]
NILSXP, SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 0, 1, 2, 9, 10, 13, 14, 16, 19
REFSXP, NILVALUE_SXP = 255, 254


class Reader:
    def __init__(self, b):
        self.b, self.at, self.refs = b, 0, []

    def fail(self, why):
        raise SystemExit("rda_housing: byte %d of the decompressed data: %s" % (self.at, why))

    def int(self):
        if self.at + 4 > len(self.b):
            self.fail("truncated")
        v = struct.unpack_from(">i", self.b, self.at)[0]
        self.at += 4
        return v

    def item(self):
        flags = self.int()
        t, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if t == NILVALUE_SXP:
            return None
        if t == REFSXP:
            i = (flags >> 8) or self.int()
            return self.refs[i - 1]
        if t == SYMSXP:
            name = self.item()
            self.refs.append(("sym", name))
            return ("sym", name)
        if t == CHARSXP:
            n = self.int()
            if n == -1:
                return None
            s = self.b[self.at:self.at + n].decode("latin-1")
            self.at += n
            return s
        if t == LISTSXP:
            attr = self.item() if has_attr else None
            tag = self.item() if has_tag else None
            car = self.item()
            cdr = self.item()
            return [(tag[1] if tag else None, car)] + (cdr if isinstance(cdr, list) else [])
        if t in (INTSXP, LGLSXP, REALSXP, STRSXP, VECSXP):
            n = self.int()
            if t in (INTSXP, LGLSXP):
                v = list(struct.unpack_from(">%di" % n, self.b, self.at))
                self.at += 4 * n
            elif t == REALSXP:
                v = list(struct.unpack_from(">%dd" % n, self.b, self.at))
                self.at += 8 * n
            else:
                v = [self.item() for _ in range(n)]
            attrs = dict(self.item()) if has_attr else {}
            return {"type": t, "v": v, "attrs": attrs}
        self.fail("R object type %d is not read here" % t)


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: rda_housing.py BostonHousing.rda OUT")
    raw = open(sys.argv[1], "rb").read()
    for unpack in (lzma.decompress, gzip.decompress, bz2.decompress, lambda b: b):
        try:
            b = unpack(raw)
            break
        except Exception:
            continue
    if not b.startswith(b"RDX2\nX\n") and not b.startswith(b"RDX3\nX\n"):
        raise SystemExit("rda_housing: %s is not an XDR R data file" % sys.argv[1])
    r = Reader(b)
    r.at = 7
    version = r.int()
    r.int(), r.int()
    if version == 3:
        r.at += r.int()   # the native encoding's name
    top = r.item()
    frames = [obj for tag, obj in top if tag == "BostonHousing"]
    if not frames:
        raise SystemExit("rda_housing: no BostonHousing in %s" % sys.argv[1])
    df = frames[0]
    names = df["attrs"]["names"]["v"]
    if names != COLUMNS:
        raise SystemExit("rda_housing: columns %s, expected %s" % (names, COLUMNS))
    cols = []
    for name, col in zip(names, df["v"]):
        if col["type"] == INTSXP and "levels" in col["attrs"]:   # a factor: its labels are the values
            levels = [float(x) for x in col["attrs"]["levels"]["v"]]
            cols.append([levels[k - 1] for k in col["v"]])
        elif col["type"] in (REALSXP, INTSXP):
            cols.append([float(x) for x in col["v"]])
        else:
            raise SystemExit("rda_housing: column %s has R type %d" % (name, col["type"]))
    n = len(cols[0])
    if n != 506 or any(len(c) != n for c in cols):
        raise SystemExit("rda_housing: %d rows (UCI housing has 506)" % n)
    with open(sys.argv[2] + ".tmp", "w") as f:
        for i in range(n):
            f.write(" ".join("%.10g" % c[i] for c in cols) + "\n")
    import os
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])


main()
