#!/bin/sh
# bench/run_models.sh — bench/models (dygraph) and bench/models_torch.py (PyTorch) alternately,
# ROUNDS rounds (default 3), every workload at 1 and 2 threads; prints medians of images/s and
# peak RSS side by side with the ratio. PyTorch gets OpenBLAS's best (OPENBLAS_CORETYPE=SkylakeX
# where the CPU has AVX-512, bench_lib.sh's pt_env; its pool held to the thread count); dygraph
# gets no variable.
# BF16=1: bf16 convolutions inside f32 tensors (dygraph DG_CPU_BF16=1) vs PyTorch torch.autocast bf16.
# AMP=bf16: dygraph under dg_autocast (bf16 tensors; AMP_LEVEL=O2 for bf16 parameters) vs PyTorch
# torch.autocast bf16.
# Usage: sh bench/run_models.sh build/bin/bench_models [workload ...]
set -e
. "$(dirname "$0")/bench_lib.sh"
BIN=${1:-build/bin/bench_models}
shift || true
WORKLOADS=${*:-linear mnist cifar face resnet18_infer}
ROUNDS=${ROUNDS:-3}
DIR=$(mktemp -d)
TORCH_BF16=${BF16:-0}
[ -n "$AMP" ] && TORCH_BF16=1
dygraph() { env -u OPENBLAS_CORETYPE DG_CPU_BF16="${BF16:-0}" DG_BENCH_AMP="${AMP:-}" DG_BENCH_AMP_LEVEL="${AMP_LEVEL:-O1}" "$BIN" "$1" "$2"; }
pytorch() { OPENBLAS_NUM_THREADS=$2 BENCH_BF16="$TORCH_BF16" pt_env /usr/bin/python3 bench/models_torch.py "$1" "$2"; }
bench_header "$(dirname "$BIN")"
bench_rounds "$DIR" dygraph pytorch
bench_table "$DIR" <<'PY'
dg = load_rounds("dygraph")
pt = load_rounds("pytorch")
if os.environ.get("BF16") == "1": print("bf16: dygraph DG_CPU_BF16=1 (bf16 convolutions) vs PyTorch torch.autocast(cpu, bfloat16)")
if os.environ.get("AMP"): print(f"amp: dygraph dg_autocast {os.environ['AMP']} {os.environ.get('AMP_LEVEL', 'O1')} vs PyTorch torch.autocast(cpu, bfloat16)")
print(f"{'workload (median of %d)' % rounds:22s} {'dygraph /s':>10s} {'(min-max)':>17s} {'pytorch /s':>10s} {'(min-max)':>17s} {'ratio':>7s} {'dg RSS MB':>9s} {'pt RSS MB':>9s}  (img/s; linear: steps/s)")
for k in dg[0]:
    xa = [r[k][0] for r in dg]; xb = [r[k][0] for r in pt]
    a = statistics.median(xa); b = statistics.median(xb)
    ra = statistics.median(r[k][1] for r in dg); rb = statistics.median(r[k][1] for r in pt)
    print(f"{k:22s} {a:10.1f} {'(%.1f-%.1f)' % (min(xa), max(xa)):>17s} {b:10.1f} {'(%.1f-%.1f)' % (min(xb), max(xb)):>17s} {a / b:6.2f}x {ra:9.0f} {rb:9.0f}")
PY
