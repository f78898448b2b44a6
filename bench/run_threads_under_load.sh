#!/bin/sh
# bench/run_threads_under_load.sh — does the default thread setting hold up when other work
# keeps a core busy? bench/threads_under_load (MNIST CNN, batch 64, Adam) at the default setting
# and at 1 thread, with the machine idle and with one busy-loop process beside it; ROUNDS rounds
# (default 3), the two settings alternating first within a round; medians of seconds per step.
# OpenMP and dygraph variables are cleared so "default" is what a program gets without any.
# Usage: sh bench/run_threads_under_load.sh [build/bin/bench_threads_under_load]
#        ROUNDS=3 STEPS=300 MAX_SECONDS=20 (per run: whichever of STEPS or MAX_SECONDS comes first)
set -e
BIN=${1:-build/bin/bench_threads_under_load}
. "$(dirname "$0")/bench_lib.sh"
bench_header "$(dirname "$BIN")"
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-300}
MAX_SECONDS=${MAX_SECONDS:-20}
OUT=$(mktemp)
HOG=
stop_hog() { if [ -n "$HOG" ]; then kill "$HOG" 2>/dev/null || true; wait "$HOG" 2>/dev/null || true; HOG=; fi; }
trap 'stop_hog; rm -f "$OUT"' EXIT INT TERM

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs available"
run() {   # load setting
    line=$(env -u OMP_NUM_THREADS -u DG_NUM_THREADS -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_DYNAMIC \
           "$BIN" "$2" "$STEPS" "$MAX_SECONDS")
    echo "  $1 $line" >&2
    echo "$1 $line" >> "$OUT"
}
i=1
while [ "$i" -le "$ROUNDS" ]; do
    if [ $((i % 2)) -eq 1 ]; then order="default 1"; else order="1 default"; fi
    for load in idle loaded; do
        echo "round $i/$ROUNDS, $load" >&2
        if [ "$load" = loaded ]; then
            sh -c 'while :; do :; done' &
            HOG=$!
            sleep 0.5
        fi
        for s in $order; do run "$load" "$s"; done
        stop_hog
    done
    i=$((i + 1))
done

/usr/bin/python3 - "$OUT" "$ROUNDS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()   # load setting s/step "s/step" steps "steps" threads "threads" others "others"
    rows.setdefault((f[0], f[1]), []).append((float(f[2]), int(f[6]), float(f[8])))
print(f"{'machine':8s} {'threads':8s} {'s/step median of %s' % sys.argv[2]:>20s} {'(min-max)':>19s}  "
      "threads at the end; CPUs busy with other work per run (the busy loop included)")
med = {}
for load in ("idle", "loaded"):
    for s in ("default", "1"):
        v = rows.get((load, s), [])
        if not v: continue
        xs = [x for x, _, _ in v]
        med[(load, s)] = statistics.median(xs)
        print(f"{load:8s} {s:8s} {med[(load, s)]:20.5f} ({min(xs):.5f}-{max(xs):.5f})  "
              f"{' '.join(str(t) for _, t, _ in v)}; {' '.join('%.2f' % o for _, _, o in v)}")
if ("loaded", "default") in med and ("loaded", "1") in med:
    r = med[("loaded", "default")] / med[("loaded", "1")]
    print(f"loaded: default / 1 thread = {r:.2f} ({'no slower' if r <= 1.05 else 'SLOWER'} than 1 thread, 5% noise allowed)")
PY
