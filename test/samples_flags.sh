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
for p in cifar10 face_keypoints mnist mnist_fleet eval_offline linear_single linear_fleet langid housing_ps; do
    expect 0 "$BIN/$p" --help
    expect 2 "$BIN/$p" --no-such-flag 1
    expect 2 "$BIN/$p" stray
done
for p in cifar10 face_keypoints mnist mnist_fleet langid housing_ps; do
    expect 2 "$BIN/$p" --epochs
    expect 2 "$BIN/$p" --epochs two
    expect 2 "$BIN/$p" --lr 1e-3x
done
for p in cifar10 face_keypoints mnist mnist_fleet; do
    expect 2 "$BIN/$p" --amp fp8
    expect 2 "$BIN/$p" --amp bf16 --amp-level O3
    expect 2 "$BIN/$p" --amp fp16 --init-loss-scaling -1
done
expect 2 "$BIN/langid" --optimizer lbfgs
expect 2 "$BIN/langid" --per-lang 2.5
expect 2 "$BIN/housing_ps" --batch-size 0
expect 1 "$BIN/housing_ps" --data /nonexistent/housing.data
[ $fail -eq 0 ] && echo "samples_flags: --help, unknown flags, missing values and bad numbers handled as argparse does"
exit $fail
