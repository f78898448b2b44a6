#!/bin/sh
# test/dist/amp_scaler.sh — dynamic loss scaling over 2 ranks (dgrun --nproc_per_node 2, i.e. MPI):
# dist_amp injects inf into a gradient on rank 1 only, after the gradient all-reduce; both ranks
# must skip those steps together, follow Paddle's update_loss_scaling rule step by step, end with
# identical parameters, and a resume from the mid-run train checkpoint must end where the
# uninterrupted run did. Each rank checks itself; here both ranks' scale sequences are compared.
set -eu
BIN=${1:-build/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DG_NUM_THREADS=1 DG_DIST_TIMEOUT=60
if ! "$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/dist_amp" --ckpt "$TMP/ck" >"$TMP/out" 2>&1; then
    echo "FAIL: amp 2 ranks: the run failed"; tail -20 "$TMP/out"; tail -20 "$TMP"/log/workerlog.*; exit 1
fi
grep -q "both ranks skipped together" "$TMP/out" || { echo "FAIL: amp 2 ranks: no verdict"; tail -20 "$TMP/out"; exit 1; }
seq0=$(grep "^rank 0 step" "$TMP/log/workerlog.0" | sed 's/^rank 0 //')
seq1=$(grep "^rank 1 step" "$TMP/log/workerlog.1" | sed 's/^rank 1 //')
[ -n "$seq0" ] && [ "$seq0" = "$seq1" ] || { echo "FAIL: amp 2 ranks: the ranks' scale sequences differ"; exit 1; }
echo "PASS: amp 2 ranks: inf on rank 1 only skipped on both, scale sequence $(echo "$seq0" | head -12 | awk '{print $5}' | tr '\n' ' ')equal on both ranks, resume identical"
