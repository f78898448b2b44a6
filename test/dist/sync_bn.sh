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
# the ResNet sample with every BatchNorm synchronised, with and without its blocks recomputed
# (SyncBatchNorm's collectives then run again inside backward, between DataParallel's buckets):
# the same model byte for byte
T2=$TMP/resnet
mkdir -p "$T2"
for extra in "" "--recompute"; do
    DG_NUM_THREADS=1 "$BIN/dgrun" --nproc_per_node 2 --log_dir "$T2/log$extra" "$BIN/resnet_fleet" --epochs 1 --max-steps 3 \
        --batch-size 8 --sync-bn --overlap 1 --save "$T2/m$extra" $extra > "$T2/out" 2>&1 ||
        { tail -5 "$T2/log$extra"/workerlog.*; echo "FAIL: resnet_fleet --sync-bn $extra"; exit 1; }
done
grep -q "SyncBatchNorm" "$T2/log--recompute/workerlog.0" && grep -q "8 blocks recomputed" "$T2/log--recompute/workerlog.0" ||
    { echo "FAIL: resnet_fleet did not convert or did not recompute"; exit 1; }
cmp -s "$T2/m.model.safetensors" "$T2/m--recompute.model.safetensors" ||
    { echo "FAIL: resnet_fleet --sync-bn: the model with --recompute differs from the one without"; exit 1; }
echo "PASS: resnet_fleet, 2 ranks, --sync-bn, 3 steps: with --recompute the same model byte for byte"
