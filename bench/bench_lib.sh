# bench/bench_lib.sh — what run_models.sh and run_before_after.sh share, sourced by both: two
# programs alternated over the same rounds, so drift on the machine hits both alike, and the
# loading of the lines they print for the medians table.
# Each program prints one line per run: <workload>_t<threads> <figure> <unit> <peak RSS MB> MB.

# What PyTorch's OpenBLAS is given: Debian's 0.3.21 takes Sapphire Rapids for Prescott, and
# OPENBLAS_CORETYPE=SkylakeX gives it its AVX-512 kernels back; on a CPU without AVX-512 that
# kernel dies with SIGILL, so the variable is set only where /proc/cpuinfo lists avx512f.
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then PT_CORETYPE=SkylakeX; else PT_CORETYPE=; fi
# Runs a command with PT_CORETYPE in OPENBLAS_CORETYPE, or without the variable where it is empty.
pt_env() { if [ -n "$PT_CORETYPE" ]; then OPENBLAS_CORETYPE=$PT_CORETYPE "$@"; else env -u OPENBLAS_CORETYPE "$@"; fi; }

# The header of every bench's results: the CPU model, its count and its measured single-core FMA
# peak (bench/fma_peak.c, next to the bench binaries in BIN_DIR), and the OpenBLAS setting.
# Usage: bench_header BIN_DIR
bench_header() {
    echo "CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1) (family $(sed -n 's/^cpu family[^:]*: //p' /proc/cpuinfo | head -1), model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(nproc) CPUs; $("$1/bench_fma_peak" 2>/dev/null || echo "fma peak: not measured ($1/bench_fma_peak missing)")"
    if [ -n "$PT_CORETYPE" ]; then echo "PyTorch's OpenBLAS: OPENBLAS_CORETYPE=$PT_CORETYPE (this CPU has AVX-512)"
    else echo "PyTorch's OpenBLAS: as it detects the CPU (no AVX-512 here, so no OPENBLAS_CORETYPE)"; fi
}

# ROUNDS rounds of every workload in WORKLOADS at 1 and 2 threads, each time the
# shell function (or command) SIDE_A and then SIDE_B with arguments workload and threads; their
# lines go to DIR/SIDE_A.<round> and DIR/SIDE_B.<round>.
# Usage: bench_rounds DIR SIDE_A SIDE_B
bench_rounds() {
    i=1
    while [ $i -le "$ROUNDS" ]; do
        for w in $WORKLOADS; do
            for t in 1 2; do
                echo "round $i/$ROUNDS: $w, $t thread(s)" >&2
                "$2" "$w" "$t" >> "$1/$2.$i"
                "$3" "$w" "$t" >> "$1/$3.$i"
            done
        done
        i=$((i + 1))
    done
}

# Runs the Python table script read from stdin after a prelude in which rounds is ROUNDS and
# load_rounds(side) gives, for each round, {workload: (figure, peak RSS MB)} of DIR/side.*.
# Usage: bench_table DIR <<'PY' ... PY
bench_table() {
    { cat <<'PY'
import os, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def load(p):
    out = {}
    for line in open(p):
        k, ips, _, rss, _ = line.split()
        out[k] = (float(ips), float(rss))
    return out
def load_rounds(side):
    return [load(os.path.join(d, f"{side}.{i}")) for i in range(1, rounds + 1)]
PY
      cat; } | /usr/bin/python3 - "$1" "$ROUNDS"
}
