#!/bin/sh
# test/dist/ps_jobs.sh — parameter-server jobs for real: dgrun --server_num S --worker_num 2 over
# the ZeroMQ transport.
#  1. the tutorial's housing regression, sync mode, 20 steps: the parameters equal one process
#     trained on the two workers' concatenated batches (batch 16) within 1e-5, and differ from one
#     worker's batches alone (so the comparison can fail);
#  2. a small CTR model (test/dist/ps_ctr_check.c: a sparse embedding table on the servers, dense
#     layers), sync, 20 steps, SGD over 2 servers and Adagrad over 3: equal to one process with a
#     local embedding whose rows start as the servers' do;
#  3. housing, sync and async, the tutorial's 30 epochs: the held-out squared error falls below a
#     quarter of the untrained model's, and every server reports that every worker stopped;
#  4. the CTR-DNN sample, async, 2 servers x 2 workers on its SYNTHETIC Criteo-like data: the
#     held-out AUC within 0.02 of the planted model's own;
#  5. tables saved and restored (the small CTR model, Adagrad, sync): 10 steps, save, then a
#     worker killed with SIGKILL -> dgrun ends the job non-zero naming it; a new job loading the
#     save has the same tables bit for bit with 2 servers and with 3 (re-sharded), and 10 more
#     steps from the save over 3 servers end bit for bit where 20 uninterrupted steps over 2 do.
# "Within 1e-5": |a - b| <= 1e-5 * the largest |b| of that tensor (Adagrad's normalised steps
# make a near-zero element's own relative error meaningless).
# Usage: sh test/dist/ps_jobs.sh build/bin
set -eu
BIN=$1
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; for f in "$DIR"/log/*; do [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done; exit 1; }
compare() {   # compare A B TOL: the largest relative difference of two safetensors files' f32 entries
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k != '__metadata__':
            s, e = v['data_offsets']; out[k] = struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
worst = max(max(abs(x - y) for x, y in zip(a[k], b[k])) / max(max(abs(y) for y in b[k]), 1e-30) for k in a)
print("%.3g" % worst)
sys.exit(0 if worst <= float(sys.argv[3]) else 1)
PY
}
job() {   # job NAME ARGS...: a 2 servers x 2 workers run of housing_ps
    name=$1; shift
    rm -rf "$DIR/log"
    "$BIN/dgrun" --server_num 2 --worker_num 2 --log_dir "$DIR/log" "$BIN/housing_ps" "$@" > "$DIR/$name.out" 2>&1 ||
        fail "$name: dgrun exited $?"
    for i in 0 1; do grep -q "server $i: every worker stopped" "$DIR/log/serverlog.$i" || fail "$name: server $i did not see every worker stop"; done
}
ctr() {   # ctr SERVERS [adagrad]: S servers x 2 workers (batch 8) against one process (batch 16), 20 steps
    rm -rf "$DIR/log"
    "$BIN/dgrun" --server_num "$1" --worker_num 2 --log_dir "$DIR/log" "$BIN/ps_ctr_check" "$DIR/ctr_ps.st" 20 8 ${2:-} \
        > "$DIR/ctr.out" 2>&1 || fail "ctr $*: dgrun exited $?"
    "$BIN/ps_ctr_check" "$DIR/ctr_one.st" 20 16 ${2:-} > /dev/null 2>&1 || fail "ctr $*: one process"
    d=$(compare "$DIR/ctr_ps.st" "$DIR/ctr_one.st" 1e-5) || fail "ctr $*: $1 servers x 2 workers differ from one process by $d"
    echo "PASS: small CTR model (sparse table + dense layers), ${2:-sgd}, sync, $1 servers x 2 workers, 20 steps = one process (worst $d of the largest)"
}

job sync20 --max-steps 20 --save-params "$DIR/ps.safetensors"
"$BIN/housing_ps" --batch-size 16 --max-steps 20 --save-params "$DIR/one.safetensors" > /dev/null 2>&1 || fail "one process, batch 16"
"$BIN/housing_ps" --batch-size 8 --max-steps 20 --save-params "$DIR/half.safetensors" > /dev/null 2>&1 || fail "one process, batch 8"
d=$(compare "$DIR/ps.safetensors" "$DIR/one.safetensors" 1e-5) || fail "sync 2x2 differs from one process on the concatenated batches by $d (relative)"
echo "PASS: sync, 2 servers x 2 workers, 20 steps = one process on the concatenated batches (worst $d of the largest)"
d=$(compare "$DIR/ps.safetensors" "$DIR/half.safetensors" 1e-3) && fail "sync 2x2 equals one worker's batches alone ($d): the comparison cannot fail"
echo "PASS: ... and differs from one worker's batches alone ($d)"

ctr 2
ctr 3 adagrad
"$BIN/ps_ctr_check" "$DIR/ctr_half.st" 20 8 > /dev/null 2>&1 || fail "ctr: one process, batch 8"
ctr 2
d=$(compare "$DIR/ctr_ps.st" "$DIR/ctr_half.st" 1e-3) && fail "the CTR job equals one worker's batches alone ($d): the comparison cannot fail"
echo "PASS: ... and differs from one worker's batches alone ($d)"

for mode in sync async; do
    job "$mode" $([ "$mode" = async ] && echo --async)
    for w in 0 1; do
        line=$(grep "^train loss:" "$DIR/log/workerlog.$w") || fail "$mode: worker $w printed no loss summary"
        before=$(echo "$line" | sed 's/.*test loss \([0-9.]*\) before.*/\1/')
        after=$(echo "$line" | sed 's/.* before training, \([0-9.]*\) after.*/\1/')
        awk -v a="$before" -v b="$after" 'BEGIN { exit !(b < a / 4) }' || fail "$mode: worker $w's held-out loss went $before -> $after"
        echo "PASS: $mode, worker $w: held-out squared error $before before training, $after after 30 epochs; $(echo "$line" | sed 's/;.*//')"
    done
done

rm -rf "$DIR/log"
"$BIN/dgrun" --server_num 2 --worker_num 2 --log_dir "$DIR/log" "$BIN/ctr_dnn" --async --threads 1 > "$DIR/ctr_dnn.out" 2>&1 ||
    fail "ctr_dnn async: dgrun exited $?"
for w in 0 1; do
    line=$(grep "^train:" "$DIR/log/workerlog.$w") || fail "ctr_dnn async: worker $w printed no result"
    auc=$(echo "$line" | sed 's/.*test auc \([0-9.]*\).*/\1/')
    planted=$(echo "$line" | sed "s/.*planted model's: \([0-9.]*\).*/\1/")
    awk -v a="$auc" -v p="$planted" 'BEGIN { exit !(a > p - 0.02) }' || fail "ctr_dnn async: worker $w's test AUC $auc, the planted model's $planted"
    echo "PASS: CTR-DNN, async, 2 servers x 2 workers, worker $w: test AUC $auc, the planted model's $planted"
done

# 5. save -> kill -> restore
rm -rf "$DIR/log" "$DIR/save"
PS_CHECK_SAVE="$DIR/save" PS_CHECK_STALL=1 "$BIN/dgrun" --server_num 2 --worker_num 2 --log_dir "$DIR/log" \
    "$BIN/ps_ctr_check" "$DIR/a10.st" 10 8 adagrad > "$DIR/kill.out" 2>&1 &
dg=$!
n=0
until [ -f "$DIR/save/manifest" ] && [ -f "$DIR/a10.st" ] && grep -q "step 9 " "$DIR/log/workerlog.1" 2>/dev/null; do
    n=$((n + 1)); [ $n -gt 300 ] && { kill $dg; fail "save: no manifest after 30 s"; }
    sleep 0.1
done
victim=
for p in $(pgrep -f "ps_ctr_check $DIR/a10.st"); do   # a worker, not a server: its role is in its environment
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "TRAINING_ROLE=TRAINER" && { victim=$p; break; }
done
[ -n "$victim" ] || { kill $dg; fail "save: no worker process found to kill"; }
kill -9 "$victim"
rc=0; wait $dg || rc=$?
[ $rc -ne 0 ] || fail "dgrun exited 0 after a worker was killed"
grep -q "killed by signal 9" "$DIR/kill.out" || fail "dgrun did not name the killed process: $(tail -3 "$DIR/kill.out")"
echo "PASS: tables saved after 10 steps; a worker killed (SIGKILL): dgrun ended the job with exit $rc naming it"
load() {   # load S STEPS FIRST OUT
    rm -rf "$DIR/log"
    PS_CHECK_LOAD="$DIR/save" PS_CHECK_FIRST_STEP=$3 "$BIN/dgrun" --server_num "$1" --worker_num 2 --log_dir "$DIR/log" \
        "$BIN/ps_ctr_check" "$4" "$2" 8 adagrad > "$DIR/load.out" 2>&1 || fail "load into $1 servers: dgrun exited $?"
}
load 2 0 0 "$DIR/l2.st"
cmp -s "$DIR/a10.st" "$DIR/l2.st" || fail "the tables loaded into 2 servers differ from the saved job's"
load 3 0 0 "$DIR/l3.st"
cmp -s "$DIR/a10.st" "$DIR/l3.st" || fail "the tables loaded into 3 servers differ from the saved job's"
echo "PASS: a new job loading the save: tables bit-identical with 2 servers and re-sharded over 3"
load 3 10 10 "$DIR/r20.st"
rm -rf "$DIR/log"
"$BIN/dgrun" --server_num 2 --worker_num 2 --log_dir "$DIR/log" "$BIN/ps_ctr_check" "$DIR/c20.st" 20 8 adagrad > /dev/null 2>&1 ||
    fail "20 uninterrupted steps"
cmp -s "$DIR/c20.st" "$DIR/r20.st" || fail "10 steps resumed over 3 servers differ from 20 uninterrupted over 2"
echo "PASS: 10 steps resumed from the save over 3 servers = 20 uninterrupted steps over 2, bit for bit (Adagrad state restored)"
