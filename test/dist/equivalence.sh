#!/bin/sh
# test/dist/equivalence.sh — N-rank DataParallel equals 1-process training on the concatenated
# batch: LinearNet and the MNIST CNN, 20 steps of Adam, 2 ranks (dgrun --nproc_per_node 2, i.e.
# MPI) with batch B against one process with batch 2B, for buckets tiny (one per parameter),
# default (25 MB) and huge (one bucket), overlap off and on. dist_equiv itself checks that the
# ranks end bit-identical (checksums all-gathered) and the comparison allows rel. 1e-5.
set -eu
BIN=${1:-build/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DG_NUM_THREADS=1 DG_DIST_TIMEOUT=60
fail=0
for model in linear mnist; do
    B=8; [ "$model" = mnist ] && B=16
    "$BIN/dist_equiv" --model $model --batch $B --world-batch 2 --out "$TMP/$model-single.st" >/dev/null
    for buckets in "tiny 1e-9 1e-9" "default 25 1" "huge 1e6 1e6"; do
        set -- $buckets
        for overlap in 0 1; do
            name="$model buckets=$1 overlap=$overlap"
            if ! "$BIN/dgrun" --nproc_per_node 2 --log_dir "$TMP/log" "$BIN/dist_equiv" --model $model --batch $B \
                   --world-batch 2 --bucket-mb $2 --first-bucket-mb $3 --overlap $overlap --out "$TMP/$model-dp.st" \
                   >"$TMP/out" 2>&1; then
                echo "FAIL: $name: the 2-rank run failed"; tail -20 "$TMP/out"; cat "$TMP"/log/workerlog.* | tail -20; fail=1; continue
            fi
            grep -q "parameters identical on all ranks" "$TMP/out" || { echo "FAIL: $name: ranks differ"; fail=1; continue; }
            if res=$("$BIN/dist_equiv" --compare "$TMP/$model-dp.st" "$TMP/$model-single.st" 2>&1); then
                echo "PASS: $name: ranks bit-identical; $(echo "$res" | tail -1 | sed 's/.*tensors, //')"
            else
                echo "FAIL: $name: $res"; fail=1
            fi
        done
    done
done
exit $fail
