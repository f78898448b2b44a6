#!/bin/sh
# bench/run_rnn.sh — bench/rnn (dygraph) and bench/rnn_torch.py (PyTorch) alternately, ROUNDS
# rounds (default 3), every workload at 1 and 2 threads; medians of the figure and the peak RSS
# side by side with the ratio (the acceptance lines of the recurrent layers: an LSTM layer's
# forward + backward at (35, 20, 650) and (100, 64, 256), word_language_model's training tokens/s).
# PyTorch gets OpenBLAS's best (bench_lib.sh's pt_env, its pool held to the thread count).
# Usage: sh bench/run_rnn.sh build/bin/bench_rnn [workload ...]
set -e
. "$(dirname "$0")/bench_lib.sh"
BIN=${1:-build/bin/bench_rnn}
shift || true
WORKLOADS=${*:-lstm650 lstm256 wlm}
ROUNDS=${ROUNDS:-3}
DIR=$(mktemp -d)
dygraph() { env -u OPENBLAS_CORETYPE "$BIN" "$1" "$2"; }
pytorch() { OPENBLAS_NUM_THREADS=$2 pt_env /usr/bin/python3 bench/rnn_torch.py "$1" "$2"; }
bench_header "$(dirname "$BIN")"
bench_rounds "$DIR" dygraph pytorch
bench_table "$DIR" <<'PY'
dg = load_rounds("dygraph")
pt = load_rounds("pytorch")
print(f"{'workload (median of %d)' % rounds:22s} {'dygraph':>10s} {'(min-max)':>17s} {'pytorch':>10s} {'(min-max)':>17s} {'ratio':>7s} {'dg RSS MB':>9s} {'pt RSS MB':>9s}  (it/s; wlm: tokens/s)")
for k in dg[0]:
    xa = [r[k][0] for r in dg]; xb = [r[k][0] for r in pt]
    a = statistics.median(xa); b = statistics.median(xb)
    ra = statistics.median(r[k][1] for r in dg); rb = statistics.median(r[k][1] for r in pt)
    print(f"{k:22s} {a:10.1f} {'(%.1f-%.1f)' % (min(xa), max(xa)):>17s} {b:10.1f} {'(%.1f-%.1f)' % (min(xb), max(xb)):>17s} {a / b:6.2f}x {ra:9.0f} {rb:9.0f}")
PY
