#!/bin/sh
# bench/run_recompute.sh — recompute on ResNet50 training steps (batch BATCH, default 16, 224x224,
# SGD): peak RSS and step time without and with every Bottleneck block checkpointed, the two
# alternating for ROUNDS rounds (default 3), one process per run; medians and the RSS saving
# (the issue's target: >= 30% lower).
# Usage: sh bench/run_recompute.sh build/bin
set -eu
BIN=${1:-build/bin}
. "$(dirname "$0")/bench_lib.sh"
bench_header "$BIN"
ROUNDS=${ROUNDS:-3}
BATCH=${BATCH:-16}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for r in $(seq "$ROUNDS"); do
    for m in 0 1; do
        echo "round $r/$ROUNDS: recompute $m" >&2
        "$BIN/bench_recompute" --batch "$BATCH" --steps 3 --recompute $m | tee -a "$TMP/r$m"
    done
done
python3 - "$TMP" <<'PY'
import re, statistics, sys
d = sys.argv[1]
med = {}
for m in ("0", "1"):
    rows = [re.search(r"peak RSS (\d+) MB, peak allocated (\d+) MB, step median ([\d.]+) s", l).groups() for l in open(f"{d}/r{m}")]
    med[m] = [statistics.median(float(r[i]) for r in rows) for i in range(3)]
p, c = med["0"], med["1"]
print(f"ResNet50 medians: without recompute peak RSS {p[0]:.0f} MB, allocated {p[1]:.0f} MB, step {p[2]:.2f} s; "
      f"every Bottleneck recomputed {c[0]:.0f} MB, {c[1]:.0f} MB, {c[2]:.2f} s")
print(f"peak RSS {100 * (1 - c[0] / p[0]):.1f}% lower (target >= 30%), step time x{c[2] / p[2]:.2f}")
PY
