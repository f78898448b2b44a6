#!/bin/sh
# test/dist/recompute.sh — recompute under DataParallel's grad-ready hooks: mnist_fleet over 2
# CPU ranks (dgrun, MPI) with the all-reduce overlapping backward (buckets started from the
# hooks, which recompute fires from its second forward), 30 SGD steps with and without
# --recompute: the saved models are identical byte for byte.
set -eu
BIN=${1:-build/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DG_NUM_THREADS=1 DG_DIST_TIMEOUT=60
fail() { echo "FAIL: $*"; for f in "$TMP"/log*/workerlog.*; do [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done; exit 1; }
for mode in plain recompute; do
    extra=""
    [ $mode = recompute ] && extra="--recompute"
    "$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log_$mode" "$BIN/mnist_fleet" --dataset mnist --epochs 1 --max-steps 30 \
        --optimizer sgd --lr 0.05 --overlap 1 --save "$TMP/$mode" $extra > "$TMP/out" 2>&1 || fail "mnist_fleet $extra: dgrun exited $?"
done
grep -q "^recompute: conv1 1, conv2 1" "$TMP/log_recompute/workerlog.0" || fail "mnist_fleet --recompute did not mark conv1 and conv2"
cmp -s "$TMP/plain.model.safetensors" "$TMP/recompute.model.safetensors" ||
    fail "the model trained with --recompute differs from the one trained without"
echo "PASS: mnist_fleet, 2 ranks, overlap on, 30 SGD steps: the model with --recompute equals the model without byte for byte ($(wc -c < "$TMP/plain.model.safetensors") bytes)"
