#!/bin/sh
# test/samples_resume.sh — a resumed run is the run without the break: face_keypoints (ResNet18
# keypoint head with dropout) trained 2 epochs at once, and 1 epoch then --resume for the 2nd,
# give the same losses bit for bit (the checkpoint carries the generator's position) and one
# metrics log whose step column continues. A model-only file given to --resume is refused. Runs
# on the first 96 rows of the synthetic keypoints file so that it takes seconds, with a constant
# learning rate (the cosine schedule spans --epochs, which the two halves set differently).
# usage: samples_resume.sh BIN_DIR DATA_CSV
BIN=$1; CSV=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
head -n 97 "$CSV" > "$T/tiny.csv"
run() { "$BIN/face_keypoints" --data "$T/tiny.csv" --batch-size 16 --seed 3 --threads 1 --workers 2 --lr-schedule constant "$@" >>"$T/log" 2>&1; }
run --epochs 2 --save "$T/full" --metrics "$T/full.csv" || { echo "FAIL: uninterrupted run"; cat "$T/log"; exit 1; }
run --epochs 1 --save "$T/part" --metrics "$T/part.csv" || { echo "FAIL: first half"; cat "$T/log"; exit 1; }
run --epochs 2 --resume "$T/part" --save "$T/part" --metrics "$T/part.csv" || { echo "FAIL: resumed half"; cat "$T/log"; exit 1; }
# step, epoch and loss columns (img/s differs from run to run)
cut -d, -f1-3 "$T/full.csv" > "$T/a"; cut -d, -f1-3 "$T/part.csv" > "$T/b"
if cmp -s "$T/a" "$T/b"; then
    echo "samples_resume: 1 epoch + --resume gives the uninterrupted run's $(($(wc -l < "$T/a") - 1)) losses bit for bit, one log"
else
    echo "FAIL: resumed losses differ from the uninterrupted run"; diff "$T/a" "$T/b" | head -10; fail=1
fi
cmp -s "$T/full.ckpt.safetensors" "$T/part.ckpt.safetensors" || { echo "FAIL: the final checkpoints differ"; fail=1; }
"$BIN/face_keypoints" --data "$T/tiny.csv" --epochs 1 --resume "$T/full.ckpt" >"$T/bad" 2>&1 && { echo "FAIL: a missing checkpoint was accepted"; fail=1; }
exit $fail
