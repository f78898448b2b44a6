#!/bin/sh
# bench/run_before_after.sh — two builds of bench/models (say, main before and after a change)
# alternately, ROUNDS rounds (default 3), every workload at 1 and 2 threads on the same machine in
# the same run; prints the medians and after/before. With run_models.sh's PyTorch figures from the
# same machine this tells whether the ratios to PyTorch moved.
# Usage: sh bench/run_before_after.sh BEFORE_BIN AFTER_BIN [workload ...]
set -e
. "$(dirname "$0")/bench_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BIN AFTER_BIN [workload ...]" >&2; exit 2; }
A=$1; B=$2; shift 2
WORKLOADS=${*:-linear mnist cifar face resnet18_infer}
ROUNDS=${ROUNDS:-3}
DIR=$(mktemp -d)
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
before() { "$A" "$@"; }
after() { "$B" "$@"; }
bench_rounds "$DIR" before after
bench_table "$DIR" <<'PY'
a = load_rounds("before")
b = load_rounds("after")
print(f"{'workload (median of %d)' % rounds:24s} {'before /s':>10s} {'after /s':>10s} {'after/before':>12s} {'RSS before':>10s} {'RSS after':>10s}")
for k in a[0]:
    xa = statistics.median(r[k][0] for r in a); xb = statistics.median(r[k][0] for r in b)
    ra = statistics.median(r[k][1] for r in a); rb = statistics.median(r[k][1] for r in b)
    print(f"{k:24s} {xa:10.1f} {xb:10.1f} {xb / xa:11.3f}x {ra:9.0f}M {rb:9.0f}M")
PY
rm -rf "$DIR"
