#!/bin/sh
# bench/run_dist.sh — what data parallelism costs on this machine (CPU ranks over MPI):
#  1. all-reduce bandwidth of the MPI transport for 1-64 MB (2 ranks);
#  2. the MNIST CNN training step at batch 100 per rank, alternating for ROUNDS rounds (default 3):
#     one process alone; two independent processes side by side (the same load on the cores as
#     two ranks, without any communication); DataParallel over 2 ranks with overlap off; and on.
#     Medians are printed with the DataParallel overhead over both single-process figures and
#     the fraction of communication hidden (1 - exposed apply time with overlap on / apply time
#     with overlap off). The CNN's 80 KB of gradients fit one default (25 MB) bucket, which
#     cannot start before backward ends, so the comparison uses one bucket per parameter
#     (BUCKET_MB=1e-9; set BUCKET_MB=25 for the default bucket size);
#  3. Local SGD over 2 ranks at K = 1, 2, 4 (dg_dp_set_local_sgd): the step time (medians) and
#     how many all-reduce rounds the steps made.
set -eu
BIN=${1:-build/bin}
. "$(dirname "$0")/bench_lib.sh"
bench_header "$BIN"
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-60}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DG_NUM_THREADS=1
BUCKET_MB=${BUCKET_MB:-1e-9}
ARGS="--batch 100 --steps $STEPS --warmup 10"

"$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/bench_dist_allreduce" 2>/dev/null | \
    sed -n '/all-reduce/,$p' | grep -v "^\s*$" | grep -v "Distributed\|+==\|+--\|^|"

field() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" | head -1; }
for r in $(seq "$ROUNDS"); do
    "$BIN/bench_dist_step" $ARGS | field step_ms >>"$TMP/alone"
    "$BIN/bench_dist_step" $ARGS >"$TMP/p1" & "$BIN/bench_dist_step" $ARGS >"$TMP/p2"; wait
    echo "$(field step_ms <"$TMP/p1") $(field step_ms <"$TMP/p2")" | awk '{ print ($1 + $2) / 2 }' >>"$TMP/pair"
    for o in 0 1; do
        "$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/bench_dist_step" $ARGS --bucket-mb "$BUCKET_MB" --overlap $o >"$TMP/dp" 2>&1
        field step_ms <"$TMP/dp" >>"$TMP/dp$o.step"
        field apply_ms <"$TMP/dp" >>"$TMP/dp$o.apply"
    done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
A=$(median "$TMP/alone"); P=$(median "$TMP/pair")
S0=$(median "$TMP/dp0.step"); S1=$(median "$TMP/dp1.step")
C0=$(median "$TMP/dp0.apply"); C1=$(median "$TMP/dp1.apply")
echo "MNIST CNN step, batch 100 per rank, 1 thread per rank, buckets of $BUCKET_MB MB, medians of $ROUNDS rounds x $STEPS steps (ms):"
echo "  one process alone                    $A"
echo "  two independent processes (each)     $P"
awk -v a="$A" -v p="$P" -v s0="$S0" -v s1="$S1" -v c0="$C0" -v c1="$C1" 'BEGIN {
    printf "  DataParallel 2 ranks, overlap off    %s   (apply %s)   overhead %+.1f%% vs alone, %+.1f%% vs two processes\n", s0, c0, (s0/a-1)*100, (s0/p-1)*100
    printf "  DataParallel 2 ranks, overlap on     %s   (apply %s)   overhead %+.1f%% vs alone, %+.1f%% vs two processes\n", s1, c1, (s1/a-1)*100, (s1/p-1)*100
    printf "  communication hidden by overlap: %.0f%% (target >= 50%%); overhead target <= 10%%\n", (c0 > 0 ? (1 - c1/c0) * 100 : 0)
}'

for r in $(seq "$ROUNDS"); do
    for k in 1 2 4; do
        "$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/bench_dist_step" $ARGS --local-sgd $k >"$TMP/lsgd" 2>&1
        field step_ms <"$TMP/lsgd" >>"$TMP/lsgd$k.step"
        sed -n 's/^local_sgd [0-9]*: \([0-9]*\) all-reduce rounds.*/\1/p' "$TMP/lsgd" | head -1 >"$TMP/lsgd$k.rounds"
    done
done
echo "Local SGD, MNIST CNN, batch 100 per rank, 2 ranks, medians of $ROUNDS rounds x $STEPS steps:"
for k in 1 2 4; do
    echo "  K = $k: step $(median "$TMP/lsgd$k.step") ms, $(cat "$TMP/lsgd$k.rounds") all-reduce rounds in $((STEPS + 10)) steps"
done
