#!/usr/bin/env bash
# bench/run_gpu.sh — dygraph (bench_gpu_models) against PyTorch (bench/gpu_models_torch.py) on the
# GPU: ROUNDS rounds (default 3), each workload run by one and then the other, so drift in clocks
# or temperature hits both alike; then the median of each side per workload, the ratio
# dygraph/PyTorch and the target beside it (ResNet18 >= 1.0x, MNIST CNN >= 2x, LinearNet >= 5x),
# and the cudaMalloc calls each side made during its timed steps (dygraph's must be 0).
# The table also goes to $OUT_DIR/gpu-<date>.txt, or bench/results/gpu-<date>.txt when OUT_DIR is
# unset. PyTorch runs under $PYTHON (default: the python3 on PATH, i.e. the GPU machine's own, not
# Debian's CPU-only /usr/bin/python3); where it has no CUDA its column reads n/a.
# Usage: bash bench/run_gpu.sh [build/bin/bench_gpu_models [workload ...]]
# Without a usable GPU it prints the skip line and exits 0. Exit status 1 when a run failed or
# dygraph called cudaMalloc in a steady loop.
set -u
BIN=${1:-build/bin/bench_gpu_models}
shift || true
WORKLOADS=${*:-resnet18_b32_96 resnet18_b16_224 resnet18_b128_224 mnist_cnn_b100 linearnet}
ROUNDS=${ROUNDS:-3}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)

if [ ! -x "$BIN" ]; then
    echo "run_gpu.sh: $BIN is not built (make $BIN)" >&2
    exit 1
fi
probe=$("$BIN" --probe)
rc=$?
if [ "$rc" -eq 3 ]; then
    echo "$probe"
    echo "run_gpu.sh: no usable GPU: skipped"
    exit 0
elif [ "$rc" -ne 0 ]; then
    echo "$probe"
    echo "run_gpu.sh: $BIN --probe failed (exit $rc)" >&2
    exit "$rc"
fi

DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
status=0
for i in $(seq 1 "$ROUNDS"); do
    for w in $WORKLOADS; do
        echo "round $i/$ROUNDS: $w" >&2
        "$BIN" "$w" >> "$DIR/dg.$i" || { echo "run_gpu.sh: bench_gpu_models $w failed" >&2; status=1; }
        "$PYTHON" "$HERE/gpu_models_torch.py" "$w" >> "$DIR/pt.$i" || { echo "run_gpu.sh: gpu_models_torch.py $w failed" >&2; status=1; }
    done
done

# median of the figures that side printed for workload $2 across the rounds (files $1.*): "n/a" if none
median() {
    cat "$1".* 2>/dev/null | awk -v w="$2" '$1 == w && $4 == "device_mallocs" { print $2 }' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# largest malloc count over the rounds, "n/a" if none
max_mallocs() {
    cat "$1".* 2>/dev/null | awk -v w="$2" '$1 == w && $4 == "device_mallocs" { if (!seen || $5 > m) m = $5; seen = 1 }
        END { if (seen) print m; else print "n/a" }'
}
unit_of() { cat "$1".* 2>/dev/null | awk -v w="$2" '$1 == w && $4 == "device_mallocs" { print $3; exit }'; }
target_of() {
    case "$1" in
        resnet18*) echo 1.0 ;;
        mnist_cnn*) echo 2.0 ;;
        linearnet) echo 5.0 ;;
        *) echo 0 ;;
    esac
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
torch_version=$("$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo "not importable")
pt_skip=$(grep -h "skipped" "$DIR"/pt.* 2>/dev/null | head -1)

report() {
    echo "GPU training throughput, median of $ROUNDS alternating rounds, f32 with TF32 off ($(date '+%Y-%m-%d %H:%M'))"
    echo "device: ${gpu:-unknown}; PyTorch: $torch_version via $PYTHON${pt_skip:+ ($pt_skip)}"
    printf '%-20s %16s %16s %8s %8s %7s %11s %11s\n' workload dygraph pytorch ratio target "" "dg mallocs" "pt mallocs"
    for w in $WORKLOADS; do
        a=$(median "$DIR/dg" "$w")
        b=$(median "$DIR/pt" "$w")
        u=$(unit_of "$DIR/dg" "$w")
        t=$(target_of "$w")
        ratio=n/a
        verdict=""
        if [ "$a" != n/a ] && [ "$b" != n/a ]; then
            ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2fx", a / b }')
            verdict=$(awk -v a="$a" -v b="$b" -v t="$t" 'BEGIN { print (a / b >= t ? "met" : "BELOW") }')
        fi
        fa=$a; fb=$b
        [ "$a" = n/a ] || fa="$a $u"
        [ "$b" = n/a ] || fb="$b $u"
        printf '%-20s %16s %16s %8s %8s %7s %11s %11s\n' "$w" "$fa" "$fb" "$ratio" ">=${t}x" "$verdict" \
            "$(max_mallocs "$DIR/dg" "$w")" "$(max_mallocs "$DIR/pt" "$w")"
    done
}

if [ -n "${OUT_DIR:-}" ]; then out_dir=$OUT_DIR; else out_dir=$HERE/results; fi
mkdir -p "$out_dir"
result="$out_dir/gpu-$(date +%Y%m%d-%H%M%S).txt"
report | tee "$result"
echo "written to $result"
exit "$status"
