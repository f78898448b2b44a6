#!/bin/sh
# bench/run_ps.sh — what the parameter server costs on this machine:
#  1. pull and push round trips of 1k / 10k / 100k sparse rows (bench_ps_latency, 1 server x 1
#     worker over the ZeroMQ transport);
#  2. the CTR-DNN sample (SYNTHETIC Criteo-like data, batch 100, STEPS steps per worker, 1 compute
#     thread per process) alternating for ROUNDS rounds (default 3): one process with its local
#     table; async 1 server x 1 worker; sync 1 x 1; async 2 x 2 (the job's examples/s = the sum of
#     its workers'). Medians, and the PS overhead at 1 x 1 = how much longer a step takes than
#     the local one (target <= 25% async);
#  3. the bytes a 1 x 1 worker moves per step against the model unique ids x row bytes + dense
#     bytes (target within 10%).
# Usage: sh bench/run_ps.sh build/bin
set -eu
BIN=${1:-build/bin}
. "$(dirname "$0")/bench_lib.sh"
bench_header "$BIN"
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-300}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$BIN/dgrun" --server_num 1 --worker_num 1 --log_dir "$TMP/log" "$BIN/bench_ps_latency" >/dev/null 2>&1 ||
    { echo "bench_ps_latency failed:"; tail -5 "$TMP/log/workerlog.0"; exit 1; }
sed -n '/round trips/,$p' "$TMP/log/workerlog.0"

rate() { sed -n 's/^train: [0-9]* steps, \([0-9.]*\) examples\/s.*/\1/p' "$@" | awk '{ s += $1 } END { print s }'; }
ARGS="--threads 1 --max-steps $STEPS"
for r in $(seq "$ROUNDS"); do
    echo "round $r/$ROUNDS" >&2
    "$BIN/ctr_dnn" $ARGS > "$TMP/local" 2>&1 || { tail -3 "$TMP/local"; exit 1; }
    rate "$TMP/local" >> "$TMP/local.r"
    for job in "async11:1:1:--async" "sync11:1:1:" "async22:2:2:--async"; do
        name=${job%%:*}; rest=${job#*:}; s=${rest%%:*}; rest=${rest#*:}; w=${rest%%:*}; flag=${rest#*:}
        rm -rf "$TMP/log"
        "$BIN/dgrun" --server_num "$s" --worker_num "$w" --log_dir "$TMP/log" "$BIN/ctr_dnn" $ARGS $flag > "$TMP/job" 2>&1 ||
            { echo "$name failed:"; tail -3 "$TMP/log"/workerlog.*; exit 1; }
        rate "$TMP/log"/workerlog.* >> "$TMP/$name.r"
        [ "$name" = async11 ] && grep "^ps traffic" "$TMP/log/workerlog.0" >> "$TMP/traffic"
    done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
L=$(median "$TMP/local.r"); A=$(median "$TMP/async11.r"); S=$(median "$TMP/sync11.r"); Q=$(median "$TMP/async22.r")
echo "CTR-DNN (SYNTHETIC data), batch 100, $STEPS steps per worker, 1 thread per process, medians of $ROUNDS rounds (examples/s):"
awk -v l="$L" -v a="$A" -v s="$S" -v q="$Q" 'BEGIN {
    printf "  one process, local table           %8.0f\n", l
    printf "  async, 1 server x 1 worker         %8.0f   PS overhead %+.1f%% of the local step (target <= 25%%)\n", a, (l/a - 1) * 100
    printf "  sync,  1 server x 1 worker         %8.0f   PS overhead %+.1f%%\n", s, (l/s - 1) * 100
    printf "  async, 2 servers x 2 workers (job) %8.0f   %.2fx one process\n", q, q / l
}'
echo "bytes per step (async 1 x 1, last round):"
tail -1 "$TMP/traffic" | sed 's/^ps traffic per step: /  /'
tail -1 "$TMP/traffic" | /usr/bin/python3 -c '
import re, sys
l = sys.stdin.read()
s, r = map(float, re.search(r"(\d+) B sent, (\d+) B received", l).groups())
mr, ms = map(float, re.search(r": (\d+) B received, (\d+) B sent", l).groups())
print("  received %+.1f%% of the model, sent %+.1f%% (target within 10%%)" % ((r / mr - 1) * 100, (s / ms - 1) * 100))'
