# Emulated hosts for mpiexec -f hosts, sourced by tests/cluster/*.sh (bash, as root).
#
# A cluster of H hosts is H+1 network namespaces named after the script's pid, so two runs never
# share one and a dead run's are recognised:
#   shardlab-<pid>-sw    the switch: a bridge br0 and one veth port pN per host
#   shardlab-<pid>-hN    host N: its end of the veth, named shl0, with address 10.231.7.(N+1)/24
# Nothing is created in the machine's own namespace (no bridge, no address, no route there), so
# the subnet cannot clash with the machine's networks, and deleting the namespaces removes every
# link. mpiexec itself runs on host 0, as on a real cluster's first node: its control connections
# to the other hosts' proxies cross the bridge too (-iface shl0).
#
# cluster_up H RATE  makes the namespaces and writes $CLUSTER_DIR/hosts; RATE is a tc rate
#                    (100mbit) for each host's outgoing link, or none; tc's tbf keeps at most
#                    $CLUSTER_TBF_LATENCY (100ms) of it queued
# cluster_mpiexec H CMD...   mpiexec -n H, one rank per host, UCX over TCP on shl0
# cluster_down       kills what runs in this run's namespaces and deletes them (the EXIT trap)
# cluster_reap_stale deletes namespaces left by runs whose pid is dead (a kill -9, a power cut)

CLUSTER_PREFIX="shardlab-$$"
CLUSTER_NET=10.231.7
CLUSTER_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_DIR=$(mktemp -d /tmp/shardlab_cluster.XXXXXX)
CLUSTER_HOSTS=0
# This machine's cores, as the binaries count them (nproc would honour OMP_NUM_THREADS).
CLUSTER_CORES=$(getconf _NPROCESSORS_ONLN)

# Why namespaces cannot be made here, in one sentence, or nothing when they can.
cluster_cannot() {
  [ "$(id -u)" = 0 ] || { echo "not root (network namespaces need root)"; return; }
  command -v ip >/dev/null || { echo "no ip command (iproute2)"; return; }
  command -v mpiexec >/dev/null || { echo "no mpiexec (MPICH)"; return; }
  local probe="shardlab-$$-probe"
  ip netns add "$probe" 2>/dev/null || { echo "ip netns add fails here (no network namespaces)"; return; }
  ip netns del "$probe"
}

# Namespaces of our naming whose pid is no longer running: a killed run's leftovers.
cluster_reap_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^shardlab-[0-9]+-(sw|h[0-9]+)$'); do
    pid=${ns#shardlab-}
    pid=${pid%%-*}
    if [ "$pid" != "$$" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "   removing $ns, left by a run (pid $pid) that is gone"
      cluster_kill_ns "$ns"
      ip netns del "$ns" 2>/dev/null
    fi
  done
}

# Kills every process whose network namespace is $1 (ranks, hydra proxies, anything they started).
cluster_kill_ns() {
  local p
  for p in $(ip netns pids "$1" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
}

# Processes still running in this run's host namespaces (pid:namespace), for "nothing left".
cluster_left() {
  local h p
  for ((h = 0; h < CLUSTER_HOSTS; h++)); do
    for p in $(ip netns pids "$CLUSTER_PREFIX-h$h" 2>/dev/null); do echo -n "$p:h$h "; done
  done
}

cluster_down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$CLUSTER_PREFIX-(sw|h[0-9]+)\$"); do
    cluster_kill_ns "$ns"
  done
  sleep 0.2
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$CLUSTER_PREFIX-(sw|h[0-9]+)\$"); do
    ip netns del "$ns"
  done
  CLUSTER_HOSTS=0
}

cluster_up() {
  local hosts=$1 rate=$2 h sw="$CLUSTER_PREFIX-sw"
  cluster_down
  ip netns add "$sw" || return 1
  ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || return 1
  : >"$CLUSTER_DIR/hosts"
  for ((h = 0; h < hosts; h++)); do
    local ns="$CLUSTER_PREFIX-h$h"
    ip netns add "$ns" || return 1
    CLUSTER_HOSTS=$((h + 1))
    ip -n "$sw" link add "p$h" type veth peer name shl0 netns "$ns" || return 1
    ip -n "$sw" link set "p$h" master br0 up || return 1
    ip -n "$ns" addr add "$CLUSTER_NET.$((h + 1))/24" dev shl0 || return 1
    ip -n "$ns" link set shl0 up && ip -n "$ns" link set lo up || return 1
    if [ "$rate" != none ]; then  # each host's upload; burst of 64 KiB, at most 100 ms queued
      ip netns exec "$ns" tc qdisc add dev shl0 root tbf rate "$rate" burst 64kb latency ${CLUSTER_TBF_LATENCY:-100ms} || return 1
    fi
    echo "$ns" >>"$CLUSTER_DIR/hosts"
  done
}

# The environment of every run on the hosts:
#   UCX over TCP only (no shared memory, no loopback device), on the veth.
#   UCX_RNDV_THRESH=inf: every message eager. With UCX's rendezvous over TCP our ring all_reduce
#     took 1.5x its two halves at 200mbit on 2 hosts (262 ms for 4 MiB against 175 ms for MPICH's,
#     whose all_gather and reduce_scatter took 88 ms each), and MPICH's too with UCX_RNDV_SCHEME=
#     get_zcopy; eager, both take 176 ms. Real hosts on TCP want the same setting.
#   SHARDLAB_CROWDED=1 when there are more hosts than cores: the hosts share this machine's cores,
#     which hydra cannot know (one rank per host), so their waits must yield (collectives/mpi_world.cpp).
cluster_env() {
  local n=$1
  echo "UCX_TLS=tcp,self UCX_NET_DEVICES=shl0 UCX_RNDV_THRESH=inf$([ "$n" -gt "$CLUSTER_CORES" ] && echo " SHARDLAB_CROWDED=1")"
}

# mpiexec -n N on the hosts, one rank per host, at most $CLUSTER_TIMEOUT s (300). --foreground:
# mpiexec stays in the caller's process group, so a Ctrl-C reaches it (and the launchers) and the
# caller's trap runs once it has stopped them.
cluster_mpiexec() {
  local n=$1
  shift
  # shellcheck disable=SC2046  # the variables are words without spaces
  timeout --foreground -k 5 "${CLUSTER_TIMEOUT:-300}" ip netns exec "$CLUSTER_PREFIX-h0" env $(cluster_env "$n") OPENBLAS_NUM_THREADS=1 \
    mpiexec -iface shl0 -f "$CLUSTER_DIR/hosts" -n "$n" -ppn 1 \
    -launcher ssh -launcher-exec "$CLUSTER_HERE/netns_exec" "$@"
}

# The line a user would type for it (printed before each run; it runs as printed while the hosts exist).
cluster_command_text() {
  local n=$1
  shift
  echo "ip netns exec $CLUSTER_PREFIX-h0 env $(cluster_env "$n") mpiexec -iface shl0" \
    "-f $CLUSTER_DIR/hosts -n $n -ppn 1 -launcher ssh -launcher-exec tests/cluster/netns_exec $*"
}

# Runs on EXIT, INT and TERM: a Ctrl-C must leave nothing.
cluster_trap() {
  trap 'cluster_down; rm -rf "$CLUSTER_DIR"' EXIT
  trap 'echo "   interrupted: removing the hosts"; exit 130' INT
  trap 'echo "   terminated: removing the hosts"; exit 143' TERM
}
