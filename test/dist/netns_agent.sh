#!/bin/sh
# test/dist/netns_agent.sh — what ssh is to mpirun, for hosts that are network namespaces on this
# machine (test/dist/multinode.sh): Open MPI's rsh launcher runs `AGENT [options] HOST COMMAND...`
# (OMPI_MCA_plm_rsh_agent) to start its daemon on HOST; this enters HOST's namespace instead,
# with a UTS namespace of its own named after it (so each "host" has its own host name, as real
# ones do), and runs COMMAND there as ssh would (the words joined, given to sh -c).
# DG_NETNS_HOSTS names a file of "address namespace" lines.
while [ $# -gt 0 ]; do
    case "$1" in
    -*) shift ;;   # ssh options Open MPI may add (-x): meaningless here
    *) break ;;
    esac
done
host=${1:?usage: netns_agent.sh HOST COMMAND...}
shift
ns=$(awk -v h="$host" '$1 == h { print $2 }' "${DG_NETNS_HOSTS:?DG_NETNS_HOSTS is not set}")
[ -n "$ns" ] || { echo "netns_agent.sh: no namespace for host $host in $DG_NETNS_HOSTS" >&2; exit 255; }
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$ns" "$*"
