#!/bin/sh
# bench/run_ops.sh — runs bench/ops (dygraph) and bench/ops_torch.py (PyTorch) alternately for
# ROUNDS rounds (default 3) and prints the median of each figure side by side with the ratio.
# PyTorch runs with OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512 (its best GEMM there;
# bench_lib.sh's pt_env), as detected elsewhere; one extra PyTorch round as installed (no
# CORETYPE) is printed for the record. torch.set_num_threads(1) does not
# reach OpenBLAS's own thread pool, so PyTorch also gets OPENBLAS_NUM_THREADS=1 to keep the
# comparison at one thread. dygraph gets no variable at all.
# Usage: sh bench/run_ops.sh build/bin/bench_ops [--tiny]
set -e
. "$(dirname "$0")/bench_lib.sh"
BIN=${1:-build/bin/bench_ops}
shift || true
bench_header "$(dirname "$BIN")"
ROUNDS=${ROUNDS:-3}
DIR=$(mktemp -d)
i=1
while [ $i -le "$ROUNDS" ]; do
    echo "round $i/$ROUNDS: dygraph" >&2
    env -u OPENBLAS_CORETYPE "$BIN" "$@" > "$DIR/dg.$i"
    echo "round $i/$ROUNDS: pytorch" >&2
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 pt_env /usr/bin/python3 bench/ops_torch.py "$@" > "$DIR/pt.$i"
    i=$((i + 1))
done
echo "pytorch as installed (no OPENBLAS_CORETYPE)" >&2
env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 bench/ops_torch.py "$@" > "$DIR/pt_plain"
/usr/bin/python3 - "$DIR" "$ROUNDS" <<'PY'
import statistics, sys, os
d, rounds = sys.argv[1], int(sys.argv[2])
def load(path):
    out = {}
    for line in open(path):
        name, val, unit = line.split()
        out[name] = (float(val), unit)
    return out
dg = [load(os.path.join(d, f"dg.{i}")) for i in range(1, rounds + 1)]
pt = [load(os.path.join(d, f"pt.{i}")) for i in range(1, rounds + 1)]
plain = load(os.path.join(d, "pt_plain"))
print(f"{'figure (1 thread, median of %d)' % rounds:42s} {'dygraph':>10s} {'pytorch':>10s} {'pt-as-inst':>10s}  unit      dygraph/pytorch")
for name in dg[0]:
    a = statistics.median(r[name][0] for r in dg)
    b = statistics.median(r[name][0] for r in pt if name in r)
    unit = dg[0][name][1]
    ratio = (b / a) if unit == "ns" else (a / b)   # >1 means dygraph is better
    print(f"{name:42s} {a:10.1f} {b:10.1f} {plain.get(name, (float('nan'),))[0]:10.1f}  {unit:8s}  {ratio:6.2f}x {'(faster)' if ratio > 1 else ''}")
PY
rm -rf "$DIR"
