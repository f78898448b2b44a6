#!/bin/sh
# test/dist/sync_bn.sh — SyncBatchNorm over 2 CPU ranks (dgrun --nproc_per_node 2, MPI):
# test/dist/sync_bn_check.c compares the synced layer, a converted conv-bn net under
# DataParallel and a converted resnet18 with BatchNorm on the concatenated batch (outputs,
# gradients, running statistics, eval mode) and prints the largest differences.
set -eu
BIN=${1:-build/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DG_NUM_THREADS=1 DG_DIST_TIMEOUT=60
fail() { echo "FAIL: $*"; for f in "$TMP"/log/workerlog.*; do [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done; exit 1; }
"$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/sync_bn_check" > "$TMP/out" 2>&1 || fail "sync_bn_check: dgrun exited $?"
for w in 0 1; do grep -q "sync_bn_check: ok" "$TMP/log/workerlog.$w" || fail "sync_bn_check: rank $w did not finish"; done
echo "PASS: $(grep -h "sync_bn_check: ok" "$TMP/log/workerlog.0" | sed 's/sync_bn_check: ok //')"
