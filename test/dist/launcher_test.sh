#!/usr/bin/env bash
# test/dist/launcher_test.sh — end-to-end checks of the dgrun launcher (dist/launcher/dgrun.c) with
# the tiny worker programs of test/dist/workers: the trainer environment each rank gets, the logs,
# and above all that a failing or killed worker stops the whole job quickly and leaves no process
# behind, and that a slow or stopped terminal neither blocks a worker nor makes the launcher (or
# mpirun) hold its output. Installs nothing; needs Open MPI's mpirun for the CPU-mode checks.
# usage: test/dist/launcher_test.sh [BIN_DIR]   (default build/bin; holds dgrun and the workers)
set -euo pipefail

BIN=$(cd "${1:-build/bin}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)   # this script's folder (the test cds into its own)
DGRUN=$BIN/dgrun
for b in dgrun env_worker sleeper_worker failing_worker rendezvous_worker stall_worker flood_worker ps_env_check; do
    [[ -x $BIN/$b ]] || { echo "FAIL: $BIN/$b is not built" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (install openmpi-bin)" >&2; exit 1; }

# every worker's argv names this directory, so `pgrep -f $TMP` finds exactly this test's processes
TMP=$(mktemp -d /tmp/dgrun_test.XXXXXX)
BG=()   # the background launchers this script started, to stop by pid if a check fails midway
cleanup() {
    local p f
    for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${BG[@]}"; do wait "$p" 2>/dev/null || true; done
    for f in "$TMP"/pid.*; do [[ -e $f ]] && { kill -KILL "$(cat "$f")" 2>/dev/null || true; }; done
    rm -rf "$TMP"
}
trap cleanup EXIT
cd "$TMP"
unset DG_JOB_TOKEN   # each dgrun draws its own (one exported here would make every job one)

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }

now_ms() { date +%s%3N; }

# No process of this test may outlive dgrun: dgrun waits for every descendant before it exits.
no_orphans() {
    local what=$1 left
    left=$(pgrep -af "$TMP" || true)
    [[ -z $left ]] || fail "$what: processes left behind:"$'\n'"$left"
    local f
    for f in "$TMP"/pid.*; do
        [[ -e $f ]] || continue
        ! kill -0 "$(cat "$f")" 2>/dev/null || fail "$what: worker pid $(cat "$f") ($f) still runs"
    done
}

# runs dgrun with a safety timeout; sets RC and ELAPSED (ms); output in $TMP/out, $TMP/err
run_dgrun() {
    local t0
    t0=$(now_ms)
    RC=0
    timeout -k 5 40 "$DGRUN" "$@" >"$TMP/out" 2>"$TMP/err" || RC=$?
    ELAPSED=$(( $(now_ms) - t0 ))
}

# waits up to 10 s for a file to appear
wait_for_file() {
    local _
    for _ in $(seq 100); do
        [[ -s $1 ]] && return 0
        sleep 0.1
    done
    fail "$1 did not appear within 10 s"
}

field() { sed -n "s/^$2=//p" "$1"; }

# --- 1. CPU mode: two ranks, their environment, their logs, the terminal -----------------------
run_dgrun --nproc_per_node 2 --log_dir "$TMP/log1" "$BIN/env_worker" first "second arg"
[[ $RC -eq 0 ]] || fail "CPU mode env_worker: dgrun exited $RC"$'\n'"$(cat "$TMP/err")"
L=$TMP/log1
for r in 0 1; do
    [[ -f $L/workerlog.$r ]] || fail "CPU mode: $L/workerlog.$r missing"
    [[ $(field "$L/workerlog.$r" PADDLE_TRAINER_ID) == "$r" ]] || fail "CPU mode: workerlog.$r is not rank $r"
    [[ $(field "$L/workerlog.$r" PADDLE_TRAINERS_NUM) == 2 ]] || fail "CPU mode: workerlog.$r: world is not 2"
    [[ $(field "$L/workerlog.$r" PADDLE_LOCAL_RANK) == "$r" ]] || fail "CPU mode: workerlog.$r: local rank is not $r"
    [[ $(field "$L/workerlog.$r" FLAGS_selected_gpus) == "<unset>" ]] || fail "CPU mode: FLAGS_selected_gpus is set"
    grep -qx "arg2=second arg" "$L/workerlog.$r" || fail "CPU mode: program arguments not passed intact"
done
eps0=$(field "$L/workerlog.0" PADDLE_TRAINER_ENDPOINTS)
eps1=$(field "$L/workerlog.1" PADDLE_TRAINER_ENDPOINTS)
cur0=$(field "$L/workerlog.0" PADDLE_CURRENT_ENDPOINT)
cur1=$(field "$L/workerlog.1" PADDLE_CURRENT_ENDPOINT)
[[ -n $eps0 && $eps0 == "$eps1" ]] || fail "CPU mode: endpoint lists differ: '$eps0' vs '$eps1'"
[[ $cur0 != "$cur1" ]] || fail "CPU mode: both ranks have PADDLE_CURRENT_ENDPOINT $cur0"
[[ $eps0 == "$cur0,$cur1" ]] || fail "CPU mode: '$eps0' is not rank 0's then rank 1's endpoint"
[[ $(tail -n +2 "$L/endpoints.log" | paste -sd,) == "$eps0" ]] || fail "CPU mode: endpoints.log does not list $eps0"
grep -qx "rank: 0" "$TMP/out" || fail "CPU mode: rank 0's output is not on the terminal"
! grep -qx "rank: 1" "$TMP/out" || fail "CPU mode: rank 1's output is on the terminal"
grep -qx -- "-----------  Configuration Arguments -----------" "$TMP/out" || fail "no configuration block"
grep -qx "training_script_args: \['first', 'second arg'\]" "$TMP/out" || fail "training_script_args line is wrong"
grep -qx -- "------------------------------------------------" "$TMP/out" || fail "no line of 48 dashes"
grep -q "|                        Distributed Envs                      Value                    |" "$TMP/out" \
    || fail "no Distributed Envs header"
grep -q "|                PADDLE_TRAINER_ENDPOINTS" "$TMP/out" || fail "no PADDLE_TRAINER_ENDPOINTS row"
bad_width=$(grep -E '^    [|+]' "$TMP/out" | awk 'length($0) != 93' | head -1)
[[ -z $bad_width ]] || fail "Distributed Envs table is not 89 wide: '$bad_width'"
tok1=$(field "$L/workerlog.0" DG_JOB_TOKEN)
[[ $tok1 =~ ^[0-9a-f]{32}$ ]] || fail "CPU mode: DG_JOB_TOKEN '$tok1' is not 128 bits of hex"
[[ $(field "$L/workerlog.1" DG_JOB_TOKEN) == "$tok1" ]] || fail "CPU mode: the ranks got different job tokens"
! grep -q "^    |.*DG_JOB_TOKEN" "$TMP/out" || fail "CPU mode: the job token is printed in the table"
no_orphans "CPU mode env_worker"
pass "1. --nproc_per_node 2: ranks 0/1 of 2, one endpoint list, distinct current endpoints, one job token, logs, terminal, table"

# --- 2. a worker killed by SIGKILL mid-run stops the job ----------------------------------------
kill_one() { # mode args...
    local label=$1; shift
    rm -f "$TMP"/pid.*
    local t0 rc=0
    t0=$(now_ms)
    timeout -k 5 40 "$DGRUN" "$@" --log_dir "$TMP/log2" "$BIN/sleeper_worker" "$TMP/pid" >"$TMP/out" 2>"$TMP/err" &
    local dg=$!
    BG+=("$dg")
    wait_for_file "$TMP/pid.0"
    wait_for_file "$TMP/pid.1"
    # mid-run: rank 0 is printing steps
    local _
    for _ in $(seq 100); do grep -q "^step:2" "$TMP/log2/workerlog.0" 2>/dev/null && break; sleep 0.1; done
    local victim
    victim=$(cat "$TMP/pid.1")
    t0=$(now_ms)
    kill -9 "$victim"
    wait "$dg" || rc=$?
    local elapsed=$(( $(now_ms) - t0 ))
    [[ $rc -ne 0 ]] || fail "$label: dgrun exited 0 after worker 1 was killed"
    [[ $rc -ne 124 && $elapsed -lt 30000 ]] || fail "$label: dgrun took ${elapsed} ms to stop (rc $rc)"
    cat "$TMP/out" "$TMP/err" >"$TMP/all"
    grep -q "worker 1 (.*pid $victim) was killed by signal 9 (SIGKILL)" "$TMP/all" \
        || fail "$label: output does not name worker 1 and signal 9:"$'\n'"$(cat "$TMP/err")"
    grep -q "^step:" "$TMP/out" || fail "$label: rank 0's step lines are not on the terminal"
    no_orphans "$label"
    pass "2. $label: kill -9 of worker 1 stops the job in ${elapsed} ms (exit $rc), names signal 9, no orphans"
}
kill_one "CPU mode (--nproc_per_node 2)" --nproc_per_node 2
kill_one "GPU mode (--gpus 0,1)" --gpus 0,1

# --- 3. a worker exiting with status 3 stops the job --------------------------------------------
fail_one() {
    local label=$1; shift
    rm -f "$TMP"/pid.*
    run_dgrun "$@" --log_dir "$TMP/log3" "$BIN/failing_worker" "$TMP/pid"
    [[ $RC -ne 0 ]] || fail "$label: dgrun exited 0 though rank 1 failed"
    [[ $RC -ne 124 && $ELAPSED -lt 30000 ]] || fail "$label: dgrun took ${ELAPSED} ms (rc $RC)"
    grep -q "worker 1 (.*) exited with status 3" "$TMP/err" \
        || fail "$label: stderr does not name worker 1 and status 3:"$'\n'"$(cat "$TMP/err")"
    grep -q "rank 1: failing with status 3" "$TMP/log3/workerlog.1" || fail "$label: workerlog.1 lacks rank 1's output"
    no_orphans "$label"
    pass "3. $label: rank 1 exiting 3 stops the job in ${ELAPSED} ms (exit $RC), names rank 1 and status 3, no orphans"
}
fail_one "CPU mode (--nproc_per_node 3)" --nproc_per_node 3
fail_one "GPU mode (--gpus 0,1,2)" --gpus 0,1,2

# --- 4. bad flags: usage and exit 2 -------------------------------------------------------------
bad_flags() {
    local rc=0
    "$DGRUN" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    [[ $rc -eq 2 ]] || fail "dgrun $*: exit $rc, not 2"
    grep -q "^usage: dgrun" "$TMP/err" || fail "dgrun $*: no usage message"
}
bad_flags --bogus "$BIN/env_worker"
bad_flags --gpus 0,,1 "$BIN/env_worker"
bad_flags --gpus=a "$BIN/env_worker"
bad_flags --gpus= "$BIN/env_worker"
bad_flags --nproc_per_node 0 "$BIN/env_worker"
bad_flags --nproc_per_node=x "$BIN/env_worker"
bad_flags --started_port 70000 "$BIN/env_worker"
bad_flags --node_ip 10.0.0.9 "$BIN/env_worker"
bad_flags --nproc_per_node 2
bad_flags
# GPU mode on several nodes has one dgrun per node: they must be given one shared token
rc=0; env -u DG_JOB_TOKEN "$DGRUN" --ips 127.0.0.1,10.9.9.9 --gpus 0 "$BIN/env_worker" >"$TMP/out" 2>"$TMP/err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "needs one job token shared by every node" "$TMP/err" || fail "multi-node GPU mode without DG_JOB_TOKEN: exit $rc"
[[ ! -e $TMP/log ]] || fail "bad flags still created a log directory"
"$DGRUN" --help | grep -q "^usage: dgrun" || fail "--help prints no usage"
pass "4. bad flags (unknown option, bad --gpus, --nproc_per_node 0, no program, ...) exit 2 with usage"

# --- 5. GPU mode sets FLAGS_selected_gpus (no GPU needed: dgrun only sets the variable) ---------
run_dgrun --gpus 0,1 --log_dir "$TMP/log5" "$BIN/env_worker"
[[ $RC -eq 0 ]] || fail "GPU mode env_worker: dgrun exited $RC"$'\n'"$(cat "$TMP/err")"
for r in 0 1; do
    [[ $(field "$TMP/log5/workerlog.$r" FLAGS_selected_gpus) == "$r" ]] || fail "GPU mode: workerlog.$r: FLAGS_selected_gpus is not $r"
    [[ $(field "$TMP/log5/workerlog.$r" PADDLE_TRAINER_ID) == "$r" ]] || fail "GPU mode: workerlog.$r is not rank $r"
    [[ $(field "$TMP/log5/workerlog.$r" PADDLE_TRAINERS_NUM) == 2 ]] || fail "GPU mode: workerlog.$r: world is not 2"
done
grep -q "|                     FLAGS_selected_gpus                        0                      |" "$TMP/out" \
    || fail "GPU mode: the table has no FLAGS_selected_gpus row"
tok5=$(field "$TMP/log5/workerlog.0" DG_JOB_TOKEN)
[[ $tok5 =~ ^[0-9a-f]{32}$ && $(field "$TMP/log5/workerlog.1" DG_JOB_TOKEN) == "$tok5" ]] || fail "GPU mode: no shared job token"
[[ $tok5 != "$tok1" ]] || fail "two jobs got the same job token $tok5"
no_orphans "GPU mode env_worker"
pass "5. --gpus 0,1: FLAGS_selected_gpus=0/1 in the two logs, world of 2, a job token of its own"

# --- 6. SIGTERM to dgrun stops every worker ----------------------------------------------------
for mode in "--nproc_per_node 2" "--gpus 0,1"; do
    rm -f "$TMP"/pid.*
    rc=0
    # shellcheck disable=SC2086
    "$DGRUN" $mode --log_dir "$TMP/log6" "$BIN/sleeper_worker" "$TMP/pid" >"$TMP/out" 2>"$TMP/err" &
    dg=$!
    BG+=("$dg")
    # not under timeout(1), which would catch the SIGTERM itself: a watchdog instead
    ( sleep 40; kill -KILL "$dg" 2>/dev/null ) &
    watchdog=$!
    wait_for_file "$TMP/pid.0"
    wait_for_file "$TMP/pid.1"
    t0=$(now_ms)
    kill -TERM "$dg"
    wait "$dg" || rc=$?
    elapsed=$(( $(now_ms) - t0 ))
    kill "$watchdog" 2>/dev/null || true
    wait "$watchdog" 2>/dev/null || true
    [[ $rc -eq 143 ]] || fail "$mode: dgrun exited $rc after SIGTERM, not 143"
    [[ $elapsed -lt 30000 ]] || fail "$mode: dgrun took ${elapsed} ms to stop after SIGTERM"
    no_orphans "SIGTERM to dgrun ($mode)"
done
pass "6. SIGTERM to dgrun stops the workers of both modes (exit 143), no orphans"

# --- 7. a program that cannot be executed -------------------------------------------------------
for mode in "--nproc_per_node 2" "--gpus 0,1"; do
    # shellcheck disable=SC2086
    run_dgrun $mode --log_dir "$TMP/log7" "$TMP/no_such_program"
    [[ $RC -ne 0 && $RC -ne 124 ]] || fail "$mode: unexecutable program: dgrun exited $RC"
    grep -q "worker [0-9] (.*) exited with status 127" "$TMP/err" || fail "$mode: stderr does not name the worker"
    # the worker dgrun names is the one that failed first; the others may have been stopped
    # before they got as far as exec, so only the named worker's log must say why
    named=$(sed -n 's/.*worker \([0-9]\) (.*) exited with status 127.*/\1/p' "$TMP/err" | head -n 1)
    grep -q "cannot execute '$TMP/no_such_program': No such file or directory" "$TMP/log7/workerlog.$named" \
        || fail "$mode: workerlog.$named (the worker named on stderr) does not say why"
    no_orphans "unexecutable program ($mode)"
done
pass "7. an unexecutable program: the log says why, dgrun exits non-zero naming the worker"

# --- 8. the CPU-mode workers form one MPI world (needs mpi_worker, built with mpicc) -------------
if [[ -x $BIN/mpi_worker ]]; then
    run_dgrun --nproc_per_node 3 --log_dir "$TMP/log8" "$BIN/mpi_worker"
    [[ $RC -eq 0 ]] || fail "mpi_worker: dgrun exited $RC"$'\n'"$(cat "$TMP/err")"
    for r in 0 1 2; do
        grep -q "^mpi rank $r of 3, .* allreduce=6 ok$" "$TMP/log8/workerlog.$r" || fail "mpi_worker: rank $r is not in one world of 3"
    done
    no_orphans "mpi_worker"
    pass "8. --nproc_per_node 3: the workers form one MPI world of 3 whose ranks match PADDLE_TRAINER_ID"
else
    echo "SKIP: 8. $BIN/mpi_worker not built (build it with mpicc)"
fi

# --- 9. two jobs on the same ports: the second is refused, the first is unaffected ---------------
# Job A's rank 1 waits 4 s before it joins, so A's rank 0 holds its store open in the rendezvous
# when job B starts on the same --started_port. B's rank 1 reaches A's store first (B's rank 0
# waits 2 s, since its failure to listen would stop B before rank 1 got there): it must be
# refused (another job's token), never counted as A's rank 1.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DG_DIST_TIMEOUT=20
rcA=0 rcB=0
timeout -k 5 60 "$DGRUN" --nproc_per_node 2 --started_port "$PORT" --log_dir "$TMP/log9a" \
    "$BIN/rendezvous_worker" --delay-rank 1 --delay 4 >"$TMP/outA" 2>"$TMP/errA" &
dgA=$!
BG+=("$dgA")
for _ in $(seq 100); do grep -q "^rank 0: joining" "$TMP/log9a/workerlog.0" 2>/dev/null && break; sleep 0.1; done
grep -q "^rank 0: joining" "$TMP/log9a/workerlog.0" || fail "two jobs: job A's rank 0 did not reach the rendezvous"
sleep 1   # A's rank 0 now serves its store
timeout -k 5 60 "$DGRUN" --nproc_per_node 2 --started_port "$PORT" --log_dir "$TMP/log9b" \
    "$BIN/rendezvous_worker" --delay-rank 0 --delay 2 >"$TMP/outB" 2>"$TMP/errB" || rcB=$?
wait "$dgA" || rcA=$?
unset DG_DIST_TIMEOUT
cat "$TMP/log9a"/workerlog.* "$TMP/outA" "$TMP/errA" >"$TMP/allA"
cat "$TMP/log9b"/workerlog.* "$TMP/outB" "$TMP/errB" >"$TMP/allB"
show9() { echo "--- job A (exit $rcA):"; cat "$TMP/allA"; echo "--- job B (exit $rcB):"; cat "$TMP/allB"; }
[[ $rcA -eq 0 ]] || fail "two jobs: the first job failed (exit $rcA)"$'\n'"$(show9)"
for r in 0 1; do
    grep -q "^rank $r of 2: all_reduce ok (3)" "$TMP/log9a/workerlog.$r" || fail "two jobs: job A's rank $r did not finish"$'\n'"$(show9)"
done
! grep -q "joined twice" "$TMP/allA" || fail "two jobs: job B's rank joined job A's store"$'\n'"$(show9)"
[[ $rcB -ne 0 && $rcB -ne 124 ]] || fail "two jobs: the second job exited $rcB"$'\n'"$(show9)"
grep -q "store at 127.0.0.1:$PORT belongs to another job" "$TMP/log9b/workerlog.1" \
    || fail "two jobs: job B's rank 1 does not say the store belongs to another job"$'\n'"$(show9)"
grep -q "store at 127.0.0.1:$PORT (rank 0) refused .*rank 1.* another job" "$TMP/log9a/workerlog.0" \
    || fail "two jobs: job A's store does not report the refused client"$'\n'"$(show9)"
no_orphans "two jobs on the same ports"
pass "9. two jobs on port $PORT: the second is refused by the first's store (exit $rcB), the first finishes (exit 0)"

# --- 10. a stopped rank ends the job after DG_DIST_TIMEOUT; a short stop does not ---------------
# CPU mode (MPI). Rank 1 is stopped (SIGSTOP) once both ranks are a few steps in. With a 5 s
# timeout rank 0's collective gives up, names the collective and, from the heartbeats in the
# store, rank 1 as the silent one, and dgrun ends the job non-zero within the timeout + 10 s.
# With a 60 s timeout a 20 s stop (then SIGCONT) is merely slow: the job finishes and ends with
# the parameters of a run that was never stopped.
stall_run() {   # label timeout stop_seconds(0: none, -1: until the end) -> RC, ELAPSED, log in $TMP/log10.$label
    local label=$1 tmo=$2 stop=$3 t0 dg pid
    rm -f "$TMP"/pid.stall.*
    t0=$(now_ms)
    DG_DIST_TIMEOUT=$tmo timeout -k 5 90 "$DGRUN" --nproc_per_node 2 --log_dir "$TMP/log10.$label" \
        "$BIN/stall_worker" --dir "$TMP" --steps 60 >"$TMP/out10.$label" 2>&1 &
    dg=$!
    BG+=("$dg")
    if [[ $stop != 0 ]]; then
        for _ in $(seq 200); do grep -q "^rank 1 step 5 " "$TMP/log10.$label/workerlog.1" 2>/dev/null && break; sleep 0.05; done
        pid=$(cat "$TMP/pid.stall.1")
        kill -STOP "$pid"
        if [[ $stop -gt 0 ]]; then sleep "$stop"; kill -CONT "$pid"; fi
    fi
    RC=0
    wait "$dg" || RC=$?
    ELAPSED=$(( $(now_ms) - t0 ))
    [[ -f $TMP/pid.stall.1 ]] && kill -CONT "$(cat "$TMP/pid.stall.1")" 2>/dev/null || true
}
stall_run stopped 5 -1
cat "$TMP/log10.stopped"/workerlog.* "$TMP/out10.stopped" >"$TMP/all10"
[[ $RC -ne 0 && $RC -ne 124 ]] || fail "stopped rank: the job exited $RC"$'\n'"$(cat "$TMP/all10")"
[[ $ELAPSED -lt 25000 ]] || fail "stopped rank: the job took ${ELAPSED} ms (timeout 5 s + 10 s, from a start of ~1 s)"
grep -q "MPI_Allreduce did not finish within 5 s on rank 0 of 2, at collective #[0-9]* (.*)" "$TMP/log10.stopped/workerlog.0" \
    || fail "stopped rank: rank 0 does not say which collective timed out"$'\n'"$(cat "$TMP/all10")"
grep -q "Rank 1 is silent: its last heartbeat is [0-9.]* s old" "$TMP/log10.stopped/workerlog.0" \
    || fail "stopped rank: rank 0 does not name rank 1 as the silent one"$'\n'"$(cat "$TMP/all10")"
no_orphans "stopped rank"
pass "10a. a rank stopped mid-run (timeout 5 s): the job ends in ${ELAPSED} ms (exit $RC); rank 0 names the timed-out collective and rank 1 as silent"

stall_run plain 60 0
[[ $RC -eq 0 ]] || fail "undisturbed stall_worker run exited $RC"$'\n'"$(cat "$TMP/log10.plain"/workerlog.*)"
stall_run slow 60 20
[[ $RC -eq 0 ]] || fail "a 20 s stop under a 60 s timeout: the job failed (exit $RC)"$'\n'"$(cat "$TMP/log10.slow"/workerlog.*)"
for r in 0 1; do
    a=$(grep "^rank $r done" "$TMP/log10.plain/workerlog.$r"); b=$(grep "^rank $r done" "$TMP/log10.slow/workerlog.$r")
    [[ -n $a && $a == "$b" ]] || fail "a 20 s stop changed rank $r's result: '$a' vs '$b'"
done
no_orphans "slow rank"
pass "10b. a 20 s stop under a 60 s timeout is only slow: the job finishes (${ELAPSED} ms) with the undisturbed run's parameters"

# --- 10c. the same with a real training program: mnist_fleet, overlap on (its default) and off ---
# test/dist/stopped_rank.sh: rank 1 stopped for good under a 4 s timeout (rank 0 reports at 4 s,
# naming rank 1, and the job ends within 4 + 5 s), and for 3 s under 15 s (the undisturbed run's
# model). With overlap on, the buckets' all-reduces are polled by the reducer: it used to wait the
# timeout twice and then hang in MPI_Finalize. Needs the MNIST digits (make data).
bash "$HERE/stopped_rank.sh" cpu "$BIN" || fail "10c. stopped_rank.sh cpu (above)"
pass "10c. mnist_fleet, overlap on and off: a stopped rank ends the job at the timeout, a 3 s stop is only slow"

# --- 11. a terminal that reads nothing: the log has every byte, no one waits, memory stays small --
# Rank 0 prints 200 MiB while dgrun's stdout is a pipe whose reader never reads. The worker writes
# its own log, so it must finish about as fast as with stdout on /dev/null; the log must hold every
# byte; dgrun and mpirun must stay small (peak RSS, /proc VmHWM, sampled while rank 0 sleeps after
# printing: mpirun's forwarding used to queue all 200 MiB); and the job must end on its own, dgrun
# saying on stderr how much the terminal missed and where the full log is.
FLOOD_MB=200
RSS_LIMIT_KB=65536
hwm_kb() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$1/status" 2>/dev/null; }
wait_for_time() {   # rank 0 of flood_worker is done printing: up to 60 s
    local _
    for _ in $(seq 600); do [[ -s $TMP/pid_time ]] && return 0; sleep 0.1; done
    fail "$1: rank 0 did not finish printing within 60 s"
}
mkfifo "$TMP/term"
flood_unread() {   # label mode...
    local label=$1 rc=0 reader dg dgp mpp dg_kb mp_kb=0 fast_ms slow_ms t0 elapsed lines size
    shift
    rm -f "$TMP"/pid.* "$TMP"/pid_time
    timeout -k 5 60 "$DGRUN" "$@" --log_dir "$TMP/log11" "$BIN/flood_worker" "$TMP/pid" $FLOOD_MB >/dev/null 2>"$TMP/err" || rc=$?
    [[ $rc -eq 0 && -s $TMP/pid_time ]] || fail "$label: $FLOOD_MB MiB with stdout on /dev/null: exit $rc"$'\n'"$(cat "$TMP/err")"
    fast_ms=$(cat "$TMP/pid_time")
    rm -f "$TMP"/pid.* "$TMP"/pid_time
    sleep 120 <"$TMP/term" &   # holds the read end of the pipe and never reads
    reader=$!
    BG+=("$reader")
    timeout -k 5 90 "$DGRUN" "$@" --log_dir "$TMP/log11" "$BIN/flood_worker" "$TMP/pid" $FLOOD_MB 3 \
        >"$TMP/term" 2>"$TMP/err" &
    dg=$!
    BG+=("$dg")
    wait_for_time "$label (terminal not read)"
    slow_ms=$(cat "$TMP/pid_time")
    t0=$(now_ms)
    dgp=$(pgrep -P "$dg" -x dgrun) || fail "$label: no dgrun below timeout (pid $dg)"
    dg_kb=$(hwm_kb "$dgp")
    [[ -n $dg_kb ]] || fail "$label: no VmHWM for dgrun (pid $dgp)"
    if [[ $* == *nproc_per_node* ]]; then
        mpp=$(pgrep -P "$dgp" -x mpirun) || fail "$label: no mpirun below dgrun (pid $dgp)"
        mp_kb=$(hwm_kb "$mpp")
        [[ -n $mp_kb ]] || fail "$label: no VmHWM for mpirun (pid $mpp)"
    fi
    rc=0
    wait "$dg" || rc=$?
    elapsed=$(( $(now_ms) - t0 ))
    kill "$reader" 2>/dev/null || true
    wait "$reader" 2>/dev/null || true
    [[ $rc -eq 0 ]] || fail "$label: a terminal that does not read: dgrun exited $rc"$'\n'"$(cat "$TMP/err")"
    [[ $elapsed -lt 15000 ]] || fail "$label: the job took ${elapsed} ms to end after rank 0 was done printing"
    size=$(stat -c %s "$TMP/log11/workerlog.0")
    lines=$(( FLOOD_MB * 1048576 / 64 ))
    [[ $size -eq $(( FLOOD_MB * 1048576 )) ]] || fail "$label: workerlog.0 has $size bytes, not $(( FLOOD_MB * 1048576 ))"
    [[ $(wc -l <"$TMP/log11/workerlog.0") -eq $lines ]] || fail "$label: workerlog.0 does not have $lines lines"
    tail -n 1 "$TMP/log11/workerlog.0" | grep -qE "^0*$(( lines - 1 )) flood line \.+$" \
        || fail "$label: the last line of workerlog.0 is not line $(( lines - 1 ))"
    grep -qE "^dgrun: [0-9]+ bytes of rank 0's output were not shown here: the terminal did not keep up\. The full output is in $TMP/log11/workerlog\.0$" "$TMP/err" \
        || fail "$label: stderr does not say how much the terminal missed:"$'\n'"$(cat "$TMP/err")"
    [[ $dg_kb -lt $RSS_LIMIT_KB ]] || fail "$label: dgrun's peak RSS is $dg_kb KiB (limit $RSS_LIMIT_KB)"
    [[ $mp_kb -lt $RSS_LIMIT_KB ]] || fail "$label: mpirun's peak RSS is $mp_kb KiB (limit $RSS_LIMIT_KB)"
    # generous, for a shared machine: what matters is that the worker never waits for the terminal
    [[ $slow_ms -le $(( 3 * fast_ms + 2000 )) ]] \
        || fail "$label: rank 0 took $slow_ms ms to print $FLOOD_MB MiB to a terminal that does not read, $fast_ms ms to /dev/null"
    no_orphans "$label: a terminal that does not read"
    local mp_note=""
    [[ $* == *nproc_per_node* ]] && mp_note=", mpirun $mp_kb KiB"
    pass "11. $label: $FLOOD_MB MiB to a terminal that does not read: printed in $slow_ms ms ($fast_ms ms to /dev/null), log complete, peak RSS dgrun $dg_kb KiB$mp_note, job ended ${elapsed} ms after"
}
flood_unread "CPU mode (--nproc_per_node 2)" --nproc_per_node 2
flood_unread "GPU mode (--gpus 0,1)" --gpus 0,1

# --- 12. a slow terminal: it shows line after line, skips with a notice, ends with the last line --
# The reader takes 16 KiB every 10 ms while rank 0 prints 32 MiB at once. Every byte of the log is
# either shown or counted in a notice line that names the full log; what is shown is whole lines
# (after a skip the copy resumes at a line start); the end of the output reaches the terminal.
SLOW_READER='import os, sys, time
out = sys.stdout.buffer
while True:
    b = os.read(0, 16384)
    if not b:
        break
    out.write(b)
    time.sleep(0.01)'
flood_slow() {   # label mode...
    local label=$1 st shown gaps notices lines=$(( 32 * 1048576 / 64 ))
    shift
    rm -f "$TMP"/pid.* "$TMP"/pid_time
    set +e
    timeout -k 5 60 "$DGRUN" "$@" --log_dir "$TMP/log12" "$BIN/flood_worker" "$TMP/pid" 32 2>"$TMP/err" \
        | python3 -c "$SLOW_READER" >"$TMP/term12"
    st=("${PIPESTATUS[@]}")
    set -e
    [[ ${st[0]} -eq 0 && ${st[1]} -eq 0 ]] || fail "$label: slow terminal: dgrun exited ${st[0]}, the reader ${st[1]}"$'\n'"$(cat "$TMP/err")"
    notices=$(grep -cE "^dgrun: \[[0-9]+ bytes of rank 0's output skipped here: the terminal did not keep up; the full log is $TMP/log12/workerlog\.0\]$" "$TMP/term12" || true)
    [[ $notices -ge 1 ]] || fail "$label: no notice of skipped output on the slow terminal"
    gaps=$(sed -n "s/^dgrun: \[\([0-9]*\) bytes of rank 0's output skipped here.*/\1/p" "$TMP/term12" | awk '{s += $1} END {print s + 0}')
    shown=$(grep -E '^[0-9]{15} flood line \.+$' "$TMP/term12" | wc -c)
    [[ $(( shown + gaps )) -eq $(( 32 * 1048576 )) ]] \
        || fail "$label: shown ($shown bytes) + skipped ($gaps bytes) is not the log's $(( 32 * 1048576 ))"
    ! grep -vE '^[0-9]{15} flood line \.+$' "$TMP/term12" | grep -q "flood line" \
        || fail "$label: the slow terminal shows a broken line: $(grep -vE '^[0-9]{15} flood line \.+$' "$TMP/term12" | grep "flood line" | head -n 1)"
    tail -n 1 "$TMP/term12" | grep -qE "^0*$(( lines - 1 )) flood line \.+$" || fail "$label: the slow terminal does not end with the last line"
    grep -qx "dgrun: $gaps bytes of rank 0's output were not shown here: the terminal did not keep up. The full output is in $TMP/log12/workerlog.0" "$TMP/err" \
        || fail "$label: stderr does not say that $gaps bytes were not shown:"$'\n'"$(cat "$TMP/err")"
    [[ $(stat -c %s "$TMP/log12/workerlog.0") -eq $(( 32 * 1048576 )) ]] || fail "$label: workerlog.0 is not complete"
    no_orphans "$label: slow terminal"
    pass "12. $label: a slow terminal got $shown bytes and $notices notices of $gaps skipped, whole lines, the last line last"
}
flood_slow "CPU mode (--nproc_per_node 2)" --nproc_per_node 2
flood_slow "GPU mode (--gpus 0,1)" --gpus 0,1
# dgrun writes non-blocking through descriptions of its own: the one it shares with the shell (the
# pipe's write end here, a terminal's in real life) must keep its flags, or the next program
# writing to it would get EAGAIN. After dgrun has run, O_NONBLOCK (04000) must still be clear.
rm -f "$TMP"/pid.* "$TMP"/pid_time
set +e
{ timeout -k 5 60 "$DGRUN" --gpus 0 --log_dir "$TMP/log12" "$BIN/flood_worker" "$TMP/pid" 4 2>/dev/null
  echo "dgrun exit $?"; sed -n 's/^flags:[[:space:]]*//p' /proc/self/fdinfo/1; } | python3 -c "$SLOW_READER" >"$TMP/term12"
set -e
tail -n 2 "$TMP/term12" | head -n 1 | grep -qx "dgrun exit 0" || fail "the job whose stdout stays shared with the shell failed: $(tail -n 2 "$TMP/term12")"
flags=$(tail -n 1 "$TMP/term12")
[[ $flags =~ ^[0-7]+$ && $(( 8#$flags & 8#4000 )) -eq 0 ]] || fail "dgrun left O_NONBLOCK on the shell's stdout (flags $flags)"
pass "12. the description dgrun shares with the shell keeps its flags (O_NONBLOCK clear: $flags)"

# --- 13. Ctrl-C with a stopped terminal ends the job within seconds ------------------------------
# stdout and stderr both go to a pipe that nobody reads, and it is full: rank 0 printed 8 MiB and
# now sleeps. SIGINT to dgrun's process group (what Ctrl-C sends; job control gives the background
# job its own group and leaves SIGINT caught) must end the job promptly with exit 130, also when a
# worker ignores SIGTERM (SIGKILL after the 2 s grace).
ctrl_c_blocked() {   # label limit_ms mode... [ignore-term]
    local label=$1 limit=$2 extra=() rc=0 reader dg watchdog t0 elapsed
    shift 2
    if [[ ${*: -1} == ignore-term ]]; then extra=(ignore-term); set -- "${@:1:$#-1}"; fi
    rm -f "$TMP"/pid.* "$TMP"/pid_time
    sleep 120 <"$TMP/term" &
    reader=$!
    BG+=("$reader")
    set -m
    # a shell started as a background job of a non-interactive one ignores SIGINT, and dgrun
    # honours an ignore it inherits; Ctrl-C comes from a terminal, so the job starts with it at
    # its default (python execs dgrun in place: $! stays dgrun's pid and process group)
    python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
        "$DGRUN" "$@" --log_dir "$TMP/log13" "$BIN/flood_worker" "$TMP/pid" 8 60 "${extra[@]}" >"$TMP/term" 2>&1 &
    dg=$!
    set +m
    BG+=("$dg")
    ( sleep 40; kill -KILL "$dg" 2>/dev/null ) &
    watchdog=$!
    wait_for_time "$label"
    wait_for_file "$TMP/pid.1"
    t0=$(now_ms)
    kill -INT -- "-$dg"
    wait "$dg" || rc=$?
    elapsed=$(( $(now_ms) - t0 ))
    kill "$watchdog" "$reader" 2>/dev/null || true
    wait "$watchdog" "$reader" 2>/dev/null || true
    [[ $rc -eq 130 ]] || fail "$label: dgrun exited $rc after SIGINT with a stopped terminal, not 130"
    [[ $elapsed -lt $limit ]] || fail "$label: dgrun took ${elapsed} ms to stop after SIGINT with a stopped terminal (limit $limit ms)"
    no_orphans "$label: SIGINT with a stopped terminal"
    pass "13. $label: SIGINT with a stopped terminal ends the job in ${elapsed} ms (exit 130), no orphans"
}
ctrl_c_blocked "CPU mode (--nproc_per_node 2)" 4000 --nproc_per_node 2
ctrl_c_blocked "GPU mode (--gpus 0,1)" 4000 --gpus 0,1
ctrl_c_blocked "CPU mode, a worker ignoring SIGTERM" 5000 --nproc_per_node 2 ignore-term
ctrl_c_blocked "GPU mode, a worker ignoring SIGTERM" 5000 --gpus 0,1 ignore-term

# --- 14. parameter-server mode (dist/launcher/ps.c) ----------------------------------------------
# the variables each role gets (both naming schemes), the logs' names, the tables
run_dgrun --server_num 2 --worker_num 3 --log_dir "$TMP/log14" "$BIN/env_worker" "$TMP/ps"
[[ $RC -eq 0 ]] || fail "PS mode env_worker: dgrun exited $RC"$'\n'"$(cat "$TMP/err")"
L=$TMP/log14
[[ $(cd "$L" && ls | sort | paste -sd' ') == "endpoints.log serverlog.0 serverlog.1 workerlog.0 workerlog.1 workerlog.2" ]] \
    || fail "PS mode: logs are $(ls "$L")"
list=$(field "$L/serverlog.0" PADDLE_PSERVERS_IP_PORT_LIST)
[[ $list =~ ^127\.0\.0\.1:[0-9]+,127\.0\.0\.1:[0-9]+$ ]] || fail "PS mode: server list '$list'"
tok=$(field "$L/serverlog.0" DG_JOB_TOKEN)
[[ $tok =~ ^[0-9a-f]{32}$ ]] || fail "PS mode: DG_JOB_TOKEN '$tok'"
for s in 0 1; do
    f=$L/serverlog.$s
    [[ $(field "$f" TRAINING_ROLE) == PSERVER && $(field "$f" PADDLE_TRAINING_ROLE) == PSERVER ]] || fail "PS mode: server $s role"
    [[ $(field "$f" PADDLE_PSERVERS_IP_PORT_LIST) == "$list" ]] || fail "PS mode: server $s has another list"
    [[ $(field "$f" PADDLE_TRAINERS_NUM) == 3 && $(field "$f" PADDLE_TRAINERS) == 3 ]] || fail "PS mode: server $s: trainers"
    [[ $(field "$f" POD_IP) == 127.0.0.1 && $(field "$f" PADDLE_CURRENT_IP) == 127.0.0.1 ]] || fail "PS mode: server $s ip"
    ep=$(echo "$list" | cut -d, -f$((s + 1)))
    [[ $(field "$f" PADDLE_PORT) == "${ep#*:}" ]] || fail "PS mode: server $s: PADDLE_PORT is not its port ${ep#*:}"
    [[ $(field "$f" PADDLE_TRAINER_ID) == "<unset>" ]] || fail "PS mode: server $s has a PADDLE_TRAINER_ID"
    # two ports: the tutorial's one-port form cannot describe them
    [[ $(field "$f" PADDLE_PSERVER_IPS) == "<unset>" && $(field "$f" PADDLE_PSERVER_PORT) == "<unset>" ]] \
        || fail "PS mode: server $s got PADDLE_PSERVER_IPS/PORT although the ports differ"
    [[ $(field "$f" DG_JOB_TOKEN) == "$tok" ]] || fail "PS mode: server $s has another token"
done
for w in 0 1 2; do
    f=$L/workerlog.$w
    [[ $(field "$f" TRAINING_ROLE) == TRAINER && $(field "$f" PADDLE_TRAINING_ROLE) == TRAINER ]] || fail "PS mode: worker $w role"
    [[ $(field "$f" PADDLE_TRAINER_ID) == "$w" ]] || fail "PS mode: worker $w: PADDLE_TRAINER_ID"
    [[ $(field "$f" PADDLE_PSERVERS_IP_PORT_LIST) == "$list" ]] || fail "PS mode: worker $w has another list"
    [[ $(field "$f" PADDLE_TRAINERS_NUM) == 3 && $(field "$f" PADDLE_TRAINERS) == 3 ]] || fail "PS mode: worker $w: trainers"
    [[ $(field "$f" PADDLE_PORT) == "<unset>" ]] || fail "PS mode: worker $w has PADDLE_PORT"
    [[ $(field "$f" DG_JOB_TOKEN) == "$tok" ]] || fail "PS mode: worker $w has another token"
done
[[ $(tail -n +2 "$L/endpoints.log" | paste -sd,) == "$list" ]] || fail "PS mode: endpoints.log does not list $list"
grep -q "|                             Server Envs                      Value                    |" "$TMP/out" || fail "PS mode: no Server Envs table"
grep -q "|                             Worker Envs" "$TMP/out" || fail "PS mode: no Worker Envs table"
grep -qx "server_num: 2" "$TMP/out" && grep -qx "worker_num: 3" "$TMP/out" || fail "PS mode: configuration block"
bad_width=$(grep -E '^    [|+]' "$TMP/out" | awk 'length($0) != 93' | head -1)
[[ -z $bad_width ]] || fail "PS mode: a table is not 89 wide: '$bad_width'"
! grep -q "^    |.*DG_JOB_TOKEN" "$TMP/out" || fail "PS mode: the job token is printed in a table"
no_orphans "PS mode env_worker"
pass "14. --server_num 2 --worker_num 3: both schemes' variables per role, serverlog.0-1 workerlog.0-2, one token, the tables"

# a failing server is reported by role and index, and the job ends non-zero
run_dgrun --server_num 2 --worker_num 2 --log_dir "$TMP/log14b" "$BIN/env_worker" fail-server 1 "$TMP/ps"
[[ $RC -eq 1 ]] || fail "PS mode failing server: dgrun exited $RC, not 1"
grep -q "server 1 (127.0.0.1:[0-9]*, pid [0-9]*) exited with status 3" "$TMP/err" || fail "PS mode: the failing server is not named:"$'\n'"$(cat "$TMP/err")"
grep -q "$TMP/log14b/serverlog.1" "$TMP/err" || fail "PS mode: the failing server's log is not named"
no_orphans "PS mode failing server"
pass "14b. a server exiting 3: 'server 1 (127.0.0.1:port, pid) exited with status 3', dgrun exits 1"

# a server that outlives every worker by the grace period is stopped and reported; the job succeeded
run_dgrun --server_num 1 --worker_num 2 --server_grace 1 --log_dir "$TMP/log14c" "$BIN/env_worker" hang-server "$TMP/ps"
[[ $RC -eq 0 ]] || fail "PS mode hanging server: dgrun exited $RC, not 0"$'\n'"$(cat "$TMP/err")"
grep -q "server 0 (127.0.0.1:[0-9]*, pid [0-9]*) has not ended 1.0 s after every worker finished; stopping it" "$TMP/err" \
    || fail "PS mode: the lingering server is not reported:"$'\n'"$(cat "$TMP/err")"
[[ $ELAPSED -lt 6000 ]] || fail "PS mode: stopping a lingering server took $ELAPSED ms"
no_orphans "PS mode hanging server"
pass "14c. a server still running 1 s after the workers: stopped and named, dgrun exits 0 (${ELAPSED} ms)"

# several nodes: explicit --servers/--workers with one shared port; only this machine's processes start here
DG_JOB_TOKEN=ps-test-token run_dgrun --servers 127.0.0.1:7164,127.0.0.2:7164 --workers 127.0.0.1,127.0.0.3 \
    --log_dir "$TMP/log14d" "$BIN/env_worker" "$TMP/ps"
[[ $RC -eq 0 ]] || fail "PS mode --servers: dgrun exited $RC"$'\n'"$(cat "$TMP/err")"
[[ $(cd "$TMP/log14d" && ls | sort | paste -sd' ') == "endpoints.log serverlog.0 workerlog.0" ]] \
    || fail "PS mode --servers: started here: $(ls "$TMP/log14d")"
f=$TMP/log14d/serverlog.0
[[ $(field "$f" PADDLE_PSERVER_IPS) == "127.0.0.1,127.0.0.2" && $(field "$f" PADDLE_PSERVER_PORT) == 7164 ]] \
    || fail "PS mode --servers: a shared port must give PADDLE_PSERVER_IPS + PADDLE_PSERVER_PORT"
[[ $(field "$f" DG_JOB_TOKEN) == ps-test-token ]] || fail "PS mode --servers: the given token is not used"
[[ $(field "$TMP/log14d/workerlog.0" PADDLE_TRAINERS_NUM) == 2 ]] || fail "PS mode --workers: 2 workers in all"
run_dgrun --servers 127.0.0.1:7164,127.0.0.2:7164 --worker_num 1 --log_dir "$TMP/log14e" "$BIN/env_worker"
[[ $RC -eq 2 ]] && grep -q "needs one job token" "$TMP/err" || fail "PS mode on several nodes without DG_JOB_TOKEN: exit $RC"
no_orphans "PS mode --servers"
pass "14d. --servers ip:port,... --workers ip,...: this node's server 0 and worker 0, PADDLE_PSERVER_IPS + PORT, the given token; none: exit 2"

# usage errors: exit 2 with the usage text
for args in "--server_num 2 --nproc_per_node 2" "--worker_num 1 --gpus 0" "--server_num 0 --worker_num 1" \
            "--server_num 1" "--worker_num 1" "--server_num 2 --servers 127.0.0.1:7001 --worker_num 1" \
            "--servers 127.0.0.1 --worker_num 1" "--servers 127.0.0.1:7001,127.0.0.1:7001 --worker_num 1" \
            "--server_num 1 --worker_num 1 --server_grace x" "--server_num=1 --worker_num=1 --bogus" \
            "--nproc_per_node 1 --server_grace 3"; do
    # shellcheck disable=SC2086
    run_dgrun $args "$BIN/env_worker"
    [[ $RC -eq 2 ]] || fail "PS mode usage '$args': exit $RC, not 2"
    grep -q "^usage: dgrun" "$TMP/err" || fail "PS mode usage '$args': no usage line"
done
grep -q "cannot be combined" <(run_dgrun --server_num 2 --nproc_per_node 2 "$BIN/env_worker"; cat "$TMP/err") \
    || fail "PS mode with --nproc_per_node: the message does not say why"
pass "14e. PS mode's usage errors (collective flags, counts, lists, grace) exit 2 with the usage text"

# what dgrun exports is what dist/ps/env.c reads: every process knows its role and index
run_dgrun --server_num 3 --worker_num 2 --log_dir "$TMP/log14f" "$BIN/ps_env_check"
[[ $RC -eq 0 ]] || fail "PS mode ps_env_check: dgrun exited $RC"$'\n'"$(cat "$TMP/err")"$'\n'"$(cat "$TMP"/log14f/*log.*)"
for s in 0 1 2; do
    f=$TMP/log14f/serverlog.$s
    [[ $(field "$f" role) == server && $(field "$f" server_index) == "$s" && $(field "$f" servers) == 3 ]] \
        || fail "PS mode: server $s read its environment as:"$'\n'"$(cat "$f")"
    [[ $(field "$f" current) == $(field "$f" server$s) ]] || fail "PS mode: server $s: its endpoint is not entry $s"
done
for w in 0 1; do
    f=$TMP/log14f/workerlog.$w
    [[ $(field "$f" role) == worker && $(field "$f" worker_id) == "$w" && $(field "$f" workers) == 2 ]] \
        || fail "PS mode: worker $w read its environment as:"$'\n'"$(cat "$f")"
done
no_orphans "PS mode ps_env_check"
pass "14f. dist/ps/env.c reads what dgrun exports: servers 0-2 at their list positions, workers 0-1 of 2"
