#!/bin/sh
# test/dist/hierarchical.sh — the hierarchical all-reduce and several communicators over 4 CPU
# ranks (dgrun --nproc_per_node 4, MPI), played as 2 nodes x 2 ranks (inter-nranks 2):
#  1. test/dist/hier_check.c: the node layout the communicator reports, and SUM / MAX / AVG of
#     rank-dependent i32, i64, f32, f64 equal to the flat all-reduce exactly, with 1 and 3
#     communicators; and the real nodes (MPI's shared-memory split: 1 node of 4 here);
#  2. dist_equiv (LinearNet and the MNIST CNN, 20 Adam steps, one bucket per parameter): the flat
#     all-reduce's parameters against hierarchical, comm_num 3, and both, overlap off and on
#     (rel. 1e-6), every run's ranks bit-identical.
set -eu
BIN=${1:-build/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DG_NUM_THREADS=1 DG_DIST_TIMEOUT=60
fail=0
bad() { echo "FAIL: $*"; for f in "$TMP"/log/workerlog.*; do [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done; fail=1; }
for args in "2 1 2" "2 3 2" "0 1 1"; do
    set -- $args
    rm -rf "$TMP/log"
    if "$BIN/dgrun" --nproc_per_node 4 --log_dir "$TMP/log" "$BIN/hier_check" --inter-nranks $1 --comm-num $2 --expect-nodes $3 \
           >"$TMP/out" 2>&1 && [ "$(grep -h -c ': ok$' "$TMP"/log/workerlog.* | paste -sd+ | bc)" = 4 ]; then
        echo "PASS: $(grep -h 'hier_check: rank 0' "$TMP/log/workerlog.0" | sed 's/hier_check: rank 0: //')"
    else
        bad "hier_check --inter-nranks $1 --comm-num $2"
    fi
done
for model in linear mnist; do
    B=4; [ "$model" = mnist ] && B=8
    run() {   # label out extra-args...
        label=$1 out=$2
        shift 2
        rm -rf "$TMP/log"
        if ! "$BIN/dgrun" --nproc_per_node 4 --log_dir "$TMP/log" "$BIN/dist_equiv" --model $model --batch $B --world-batch 4 \
               --bucket-mb 1e-9 --first-bucket-mb 1e-9 --out "$out" "$@" >"$TMP/out" 2>&1; then
            bad "$model $label: the 4-rank run failed"; return 1
        fi
        grep -q "parameters identical on all ranks" "$TMP/out" || { bad "$model $label: ranks differ"; return 1; }
    }
    run flat "$TMP/$model-flat.st" || continue
    for overlap in 0 1; do
        for variant in "hierarchical:--hierarchical 1 --inter-nranks 2 --expect-nodes 2" "comm_num=3:--comm-num 3" \
                       "hierarchical,comm_num=3:--hierarchical 1 --inter-nranks 2 --expect-nodes 2 --comm-num 3"; do
            label="${variant%%:*} overlap=$overlap"
            run "$label" "$TMP/$model-v.st" --overlap $overlap ${variant#*:} || continue
            if res=$("$BIN/dist_equiv" --rtol 1e-6 --compare "$TMP/$model-v.st" "$TMP/$model-flat.st" 2>&1); then
                echo "PASS: $model $label: ranks bit-identical; against flat: $(echo "$res" | tail -1 | sed 's/.*tensors, //')"
            else
                bad "$model $label against flat: $res"
            fi
        done
    done
done

# collectives of the program's own during backward (SyncBatchNorm's) beside overlapped
# hierarchical buckets: they must not wait behind a bucket stage nobody polls
for cn in 1 3; do
    rm -rf "$TMP/sbn"
    if "$BIN/dgrun" --nproc_per_node 4 --log_dir "$TMP/sbn" "$BIN/hier_sbn_check" 1 1 $cn > "$TMP/sbn.out" 2>&1 &&
       [ "$(cat "$TMP"/sbn/workerlog.* | grep -c 'hier_sbn_check: rank [0-3]: ok')" = 4 ]; then
        echo "PASS: SyncBatchNorm under overlapped hierarchical buckets, comm_num $cn: 3 steps on 4 ranks"
    else
        tail -3 "$TMP"/sbn/workerlog.*; bad "SyncBatchNorm under overlapped hierarchical buckets, comm_num $cn"
    fi
done
exit $fail
