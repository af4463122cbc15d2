#!/usr/bin/env bash
# Several hosts on one machine: network namespaces on a bridge (tests/cluster/cluster_lib.sh),
# each host's link shaped with tc, one MPICH rank per host over UCX's TCP transport, launched by
# `mpiexec -f hosts -launcher ssh -launcher-exec tests/cluster/netns_exec`.
#
# tests/cluster/cluster_test.sh [BIN_DIR]          make cluster: on 2 and 4 hosts, unshaped and at
#     $CLUSTER_RATE (100mbit): the MPI suite (unshaped), lessons 02, 08, 14 and bench collectives,
#     each against the same command under mpiexec -n H on one host (verdict, collectives, bytes per
#     device, #wrong); a link taken down mid-collective (exit 3 within --collective-timeout, the
#     silent device named, nothing left); Ctrl-C and kill -9 of a run (nothing left, the next run
#     works); the link rate that sweep --what machine fits on 2 hosts, within 10% of tc's, and its
#     model beside every collective and size (bench collectives --machine), within 15% from 1 MiB
#     up on 2 hosts and on 4 (timed by the fastest call where hosts outnumber cores). Exit 0 only
#     if all of it holds.
# tests/cluster/cluster_test.sh --smoke [BIN_DIR]  make test: 2 hosts, lesson 02, the launcher's
#     refusals, Ctrl-C and kill -9 clean-up (about 10 s); skipped, with the reason, where network
#     namespaces cannot be made (not root, no ip).
set -u
cd "$(dirname "$0")/../.."
MODE=full
[ "${1:-}" = --smoke ] && { MODE=smoke; shift; }
[ "${1:-}" = --hold ] && { MODE=hold; shift; }  # internal: hosts up, one long run (the kill tests)
BIN=${1:-build/bin}
RATE=${CLUSTER_RATE:-100mbit}
MODEL_ERR=${CLUSTER_MODEL_ERR:-15}
source tests/cluster/cluster_lib.sh
[[ $MODEL_ERR =~ ^[0-9]+$ ]] || { echo "cluster: CLUSTER_MODEL_ERR is '$MODEL_ERR'; give a whole percentage" >&2; exit 2; }
[[ ${RATE,,} =~ ^[0-9]+(kbit|mbit|gbit)$ ]] ||
  { echo "cluster: CLUSTER_RATE is '$RATE'; give a tc rate such as 100mbit (the calibration needs one)" >&2; exit 2; }

why=$(cluster_cannot)
if [ -n "$why" ]; then
  rm -rf "$CLUSTER_DIR"
  if [ $MODE = full ]; then echo "make cluster: cannot emulate hosts here: $why" >&2; exit 2; fi
  echo "== cluster smoke test: skipped: $why"
  exit 0
fi
for b in shardlab 02_reduction_allreduce mpi_tests; do
  [ -x "$BIN/$b" ] || { echo "cluster: $BIN/$b is not built (make all)" >&2; rm -rf "$CLUSTER_DIR"; exit 2; }
done
cluster_trap
export OPENBLAS_NUM_THREADS=1
MPI_SAME='"(pass|op|axes|tensor|group_size|messages|bytes_per_device|predicted_bytes_per_device)"'
failures=0
fail() { echo "   FAIL: $*"; failures=$((failures + 1)); }
# OUT ERR HOSTS CMD...: cluster_mpiexec with stdout to OUT and stderr to ERR (they may be the same
# file). Run once: a run that hangs in MPI_Finalize fails (collectives/mpi_ucx_close.cpp says why
# it no longer does), and says so.
cluster_run() {
  local out=$1 err=$2 rc
  shift 2
  if [ "$out" = "$err" ]; then cluster_mpiexec "$@" >"$out" 2>&1; else cluster_mpiexec "$@" >"$out" 2>"$err"; fi
  rc=$?
  if [ $rc != 0 ] && grep -q "inside MPI_Finalize" "$err"; then echo "   (exit $rc: MPI_Finalize hung after the run)"; fi
  return $rc
}

if [ $MODE = hold ]; then  # hosts up, then one run long enough to be interrupted
  cluster_up 2 "$RATE" || exit 1
  echo "hosts up"
  cluster_mpiexec 2 "$BIN/shardlab" bench collectives --backend mpi --ops all_reduce --min 16M --max 16M \
    --iters 1000 >/dev/null
  exit 0
fi

# Up to 5 s for processes to go; prints what is still there.
wait_gone() {
  local left="" i
  for i in $(seq 25); do
    left=$(for p in "$@"; do kill -0 "$p" 2>/dev/null && echo -n "$p "; done)
    [ -z "$left" ] && return 0
    sleep 0.2
  done
  echo "$left"
}

# LESSON ARGS...: the JSON verdict and collectives on the hosts must equal mpiexec -n H on one host.
same_as_one_host() {
  local hosts=$1 label=$2 one many rc
  shift 2
  echo "== $label: $* --backend mpi --json"
  one=$(timeout -k 5 120 mpiexec -n "$hosts" "$@" --backend mpi --json | grep -E "$MPI_SAME")
  CLUSTER_TIMEOUT=120 cluster_run "$CLUSTER_DIR/many.json" "$CLUSTER_DIR/many.err" "$hosts" "$@" --backend mpi --json
  rc=$?  # mpiexec's own (a pipe's last command would hide it)
  many=$(grep -E "$MPI_SAME" "$CLUSTER_DIR/many.json")
  local total ops
  total=$(grep -E '^  "bytes_per_device"' <<<"$many" | grep -oE '[0-9]+')
  ops=$(grep -c '"op"' <<<"$many")
  if [ "$rc" = 0 ] && grep -q '"pass": true' <<<"$many" && [ "$one" = "$many" ]; then
    echo "   pass true, $ops collectives, ${total:-?} B per device: the same as on one host"
  else
    fail "exit $rc; differs from mpiexec -n $hosts on one host:"
    diff <(echo "$one") <(echo "$many") | head -20
  fi
}

# bench collectives: every #wrong 0 and the same rows (collective, size, count, #wrong) as one host.
bench_same() {
  local hosts=$1 label=$2 max=$3 rc
  echo "== $label: $BIN/shardlab bench collectives --backend mpi --min 1K --max $max --iters 5 --warmup 1"
  timeout -k 5 120 mpiexec -n "$hosts" "$BIN/shardlab" bench collectives --backend mpi --min 1K --max "$max" \
    --iters 5 --warmup 1 --csv "$CLUSTER_DIR/one.csv" >/dev/null
  CLUSTER_TIMEOUT=300 cluster_run "$CLUSTER_DIR/many.out" "$CLUSTER_DIR/many.err" "$hosts" "$BIN/shardlab" \
    bench collectives --backend mpi --min 1K --max "$max" --iters 5 --warmup 1 --csv "$CLUSTER_DIR/many.csv"
  rc=$?
  local one many
  one=$(grep -v '^#' "$CLUSTER_DIR/one.csv" | cut -d, -f1-3,7,11)
  many=$(grep -v '^#' "$CLUSTER_DIR/many.csv" | cut -d, -f1-3,7,11)
  if [ $rc = 0 ] && [ -n "$many" ] && [ "$one" = "$many" ] && grep -q '^# total #wrong: 0' "$CLUSTER_DIR/many.out"; then
    echo "   $(wc -l <<<"$many") rows, #wrong 0, the same rows as on one host; largest size, ours and MPICH's:"
    grep -E "^[a-z_]+ +$(numfmt --from=iec "$max") " "$CLUSTER_DIR/many.out" | awk '{printf "   %-15s %10s B  %11s us  busbw %s  native %11s us\n", $1, $2, $3, $4, $6}'
  else
    fail "exit $rc, or rows or #wrong differ from one host:"
    diff <(echo "$one") <(echo "$many") | head -10
  fi
}

# A run is killed by SIG (INT: Ctrl-C; KILL: nothing can clean up) while mpiexec runs on its hosts.
# After INT, its trap must have removed its namespaces and every process in them; after KILL, the
# next run's cluster_reap_stale must.
killed_run() {
  local sig=$1 child pids ns left
  # Background jobs ignore SIGINT in a script; perl restores the default so the trap sees Ctrl-C,
  # and setsid gives the run a process group of its own, which gets the INT as a terminal's would.
  setsid perl -e '$SIG{INT} = "DEFAULT"; exec @ARGV' "$0" --hold "$BIN" >"$CLUSTER_DIR/hold.out" 2>&1 &
  child=$!
  for _ in $(seq 100); do grep -q "hosts up" "$CLUSTER_DIR/hold.out" && break; sleep 0.1; done
  sleep 1.5  # mpiexec and both ranks started, inside an all_reduce
  pids=$(for ns in $(ip netns list | awk '{print $1}' | grep -E "^shardlab-$child-"); do ip netns pids "$ns"; done)
  echo "== a run with 2 hosts killed by SIG$sig during a collective ($(wc -w <<<"$pids") processes in its hosts)"
  [ -n "$pids" ] || fail "the run had started nothing to kill"
  if [ "$sig" = INT ]; then kill -INT -- -"$child"; else kill -KILL "$child"; fi
  wait "$child" 2>/dev/null
  if [ "$sig" = KILL ]; then
    cluster_reap_stale
  fi
  left=$(wait_gone $pids)
  ns=$(ip netns list | awk '{print $1}' | grep -E "^shardlab-$child-" | tr '\n' ' ')
  if [ -z "$left" ] && [ -z "$ns" ]; then
    echo "   no namespace and no process left"
  else
    fail "left: namespaces ${ns:-none}, processes ${left:-none}"
  fi
}

# tc's rate (200mbit, 1gbit, 500kbit) in bits per second.
rate_bits() {
  local r=${1,,} n
  n=${r%%[a-z]*}
  case ${r#"$n"} in
    kbit) echo "$n * 1000" ;; mbit) echo "$n * 1000000" ;; gbit) echo "$n * 1000000000" ;; *) echo "$n" ;;
  esac | bc
}

start=$(date +%s)
echo "== removing hosts left by earlier runs that are gone (shardlab-<pid>-*)"
cluster_reap_stale

echo "== the launcher refuses what is not a host of ours, in one sentence, exit 2"
for args in "" "-x" "-x shardlab-no-such-host true"; do
  err=$(tests/cluster/netns_exec $args 2>&1 >/dev/null); rc=$?
  echo "   netns_exec $args -> exit $rc: $err"
  [ $rc = 2 ] && [ "$(wc -l <<<"$err")" = 1 ] || fail "netns_exec $args: exit $rc"
done

if [ $MODE = smoke ]; then
  cluster_up 2 none || { fail "could not make 2 hosts"; exit 1; }
  echo "   2 hosts: $(tr '\n' ' ' <"$CLUSTER_DIR/hosts"); each run is: $(cluster_command_text 2 CMD)"
  same_as_one_host 2 "2 hosts" "$BIN/02_reduction_allreduce" --mesh mesh_rows=1,mesh_cols=2
  cluster_down
  killed_run INT
  killed_run KILL
  [ $failures = 0 ] && echo "   cluster smoke test: all passed in $(($(date +%s) - start)) s" ||
    { echo "   cluster smoke test: $failures FAILED"; exit 1; }
  exit 0
fi

for hosts in 2 4; do
  for rate in none "$RATE"; do
    label="$hosts hosts, $([ $rate = none ] && echo unshaped || echo "$rate each")"
    cluster_up "$hosts" "$rate" || { fail "could not make $label"; continue; }
    echo "===== $label: $(tr '\n' ' ' <"$CLUSTER_DIR/hosts")"
    echo "   each run is: $(cluster_command_text "$hosts" CMD)"
    if [ $rate = none ]; then
      echo "== $label: SHARDLAB_BIN=$BIN $BIN/mpi_tests"
      t0=$(date +%s)
      CLUSTER_TIMEOUT=900 cluster_run "$CLUSTER_DIR/suite.out" "$CLUSTER_DIR/suite.out" "$hosts" \
        env SHARDLAB_BIN="$BIN" "$BIN/mpi_tests"
      rc=$?
      grep -E '^mpi_tests on|test cases:' "$CLUSTER_DIR/suite.out" | sed 's/^/   /'
      echo "   exit $rc after $(($(date +%s) - t0)) s"
      [ $rc = 0 ] || { fail "the MPI suite on $label"; tail -30 "$CLUSTER_DIR/suite.out"; }
    fi
    if [ $hosts = 2 ]; then m02=mesh_rows=1,mesh_cols=2 m08=X=1,Y=2; else m02=mesh_rows=2,mesh_cols=2 m08=X=2,Y=2; fi
    same_as_one_host "$hosts" "$label" "$BIN/02_reduction_allreduce" --mesh $m02
    same_as_one_host "$hosts" "$label" "$BIN/08_gspmd_ffn" --mesh $m08
    same_as_one_host "$hosts" "$label" "$BIN/14_data_parallel" --mesh X=$hosts
    bench_same "$hosts" "$label" $([ $rate = none ] && echo 16K || echo 1M)
    if [ $rate != none ] && [ $hosts = 2 ]; then  # each rank waits 1.4 s on a step in flight
      echo "== $label: $BIN/shardlab bench collectives --backend mpi --ops all_reduce --min 32M --max 32M" \
        "--iters 2 --warmup 0  (16 MiB ring steps: slow, not deadlocked)"
      CLUSTER_TIMEOUT=120 cluster_run "$CLUSTER_DIR/slow.out" "$CLUSTER_DIR/slow.err" 2 "$BIN/shardlab" \
        bench collectives --backend mpi --ops all_reduce --min 32M --max 32M --iters 2 --warmup 0
      rc=$?
      grep -E '^all_reduce' "$CLUSTER_DIR/slow.out" | sed 's/^/   /'
      [ $rc = 0 ] && echo "   exit 0" || { fail "exit $rc"; cat "$CLUSTER_DIR/slow.err"; }
    fi
  done
done

# A link taken down while the ranks are inside an all_reduce of 16 MiB (1.4 s each at 100mbit).
cluster_up 2 "$RATE"
echo "===== 2 hosts, $RATE each: host 1's link taken down during a collective"
cmd="$BIN/shardlab bench collectives --backend mpi --ops all_reduce --min 16M --max 16M --iters 1000 --collective-timeout 3"
echo "== $cmd; after 3 s: ip -n $CLUSTER_PREFIX-sw link set p1 down"
t0=$(date +%s.%N)
(sleep 3; ip -n "$CLUSTER_PREFIX-sw" link set p1 down) &
CLUSTER_TIMEOUT=60 cluster_mpiexec 2 $cmd >/dev/null 2>"$CLUSTER_DIR/down.err"
rc=$?
took=$(echo "$(date +%s.%N) - $t0 - 3" | bc)
wait
left=$(wait_gone $(ip netns pids "$CLUSTER_PREFIX-h0") $(ip netns pids "$CLUSTER_PREFIX-h1"))
sed 's/^/   /' "$CLUSTER_DIR/down.err"
printf '   exit %s, %.1f s after the link went down (--collective-timeout 3), processes left: %s\n' "$rc" "$took" "${left:-none}"
[ $rc = 3 ] || fail "exit $rc, expected 3"
[ "$(echo "$took < 3 + 5" | bc)" = 1 ] || fail "took $took s, more than the timeout and 5 s"
grep -q "collective timeout (--collective-timeout 3 s): device 0 .*device 1" "$CLUSTER_DIR/down.err" ||
  fail "no sentence naming device 1, the one not heard from"
[ -z "$left" ] || fail "processes left in the hosts: $left"

# Calibration: the link rate that sweep --what machine fits on 2 hosts must be tc's within 10%,
# and the model it makes must predict every collective from 1 MiB up within $CLUSTER_MODEL_ERR %
# (15), on 2 hosts and on 4 (which it was not fitted on). Why 100mbit: at 200mbit, 4 ranks and
# their TCP traffic on this 2-core machine were short of CPU, not of link (all_to_all of 16 MiB:
# 0.018-0.021 GB/s busbw in three runs against tc's 0.0239, no packet dropped), and the 4-host rows
# missed the model by 22-40%. At 100mbit the link binds (busbw 0.011-0.012 against 0.0120; no
# drops), but 4 ranks on 2 cores still spin in MPICH's and UCX's progress: with the median of 9
# calls a size the worst 4-host row was 20%, 10%, 5%, 12%, 5%, 4%, 16% over seven runs (all_to_all
# of 16 MiB, mostly). Contention only ever adds time to a call, so where the hosts outnumber the
# cores each size is timed by its fastest call (--statistic min): worst 7%, 10% and 8% in three
# runs (1 MiB rows at 0.90-0.94, a call's first bytes riding tc's burst; 16 MiB at 0.98-1.05).
cluster_up 2 "$RATE"
echo "===== 2 hosts, $RATE each: $BIN/shardlab sweep --what machine --backend mpi --out $CLUSTER_DIR"
CLUSTER_TIMEOUT=600 cluster_mpiexec 2 "$BIN/shardlab" sweep --what machine --backend mpi --out "$CLUSTER_DIR" \
  >"$CLUSTER_DIR/sweep.out" 2>&1
rc=$?
sed 's/^/   /' "$CLUSTER_DIR/sweep.out" | grep -v 'wrote'
# The link_GBps column, found by its name in the "# columns: 1 gemm_n, 2 ..." row.
fit=$(awk '/^# columns:/ { for (i = 2; i <= NF; i++) if ($i ~ /^link_GBps,?$/) col = $(i - 1) + 0 }
           !/^#/ && NF && col { print $col; exit }' "$CLUSTER_DIR/machine.dat" 2>/dev/null)
# tc counts whole frames; MPI moves the TCP payload: 1448 of every 1514 bytes at MTU 1500.
want=$(echo "$(rate_bits "$RATE") / 8 / 1000000000 * 1448 / 1514" | bc -l)
if [ $rc = 0 ] && [ -n "$fit" ]; then
  err=$(echo "($fit - $want) / $want * 100" | bc -l)
  printf '   fitted link %s GB/s; tc rate %s carries %.4f GB/s of TCP payload: %+.1f%% (at most 10%%)\n' \
    "$fit" "$RATE" "$want" "$err"
  [ "$(echo "${err#-} <= 10" | bc -l)" = 1 ] || fail "the fitted link is more than 10% from tc's rate"
else
  fail "sweep --what machine: exit $rc, no link fitted"
fi
if [ -f "$CLUSTER_DIR/machine.dat" ]; then
  for hosts in 2 4; do
    cluster_up "$hosts" "$RATE"
    statistic=median
    [ "$hosts" -gt "$CLUSTER_CORES" ] && statistic=min
    echo "== $hosts hosts, $RATE each: $BIN/shardlab bench collectives --backend mpi --machine" \
      "$CLUSTER_DIR/machine.dat --min 64K --max 16M --iters 9 --warmup 1 --statistic $statistic"
    CLUSTER_TIMEOUT=300 cluster_run "$CLUSTER_DIR/model.out" "$CLUSTER_DIR/model.out" "$hosts" "$BIN/shardlab" \
      bench collectives --backend mpi --collective-timeout 60 --machine "$CLUSTER_DIR/machine.dat" --min 64K \
      --max 16M --iters 9 --warmup 1 --statistic "$statistic"
    rc=$?
    sed -n '/# the cost model of/,$p' "$CLUSTER_DIR/model.out" | sed 's/^/   /'
    worst=$(grep -oE '^# model vs measured at >= 1M: median \|error\| [0-9]+%, worst [0-9]+%' "$CLUSTER_DIR/model.out" |
      grep -oE '[0-9]+%$' | tr -d %)
    [ $rc = 0 ] || fail "bench collectives --machine on $hosts hosts: exit $rc"
    if [ -z "$worst" ] || [ "$worst" -gt "$MODEL_ERR" ]; then
      fail "on $hosts hosts the model misses a collective of 1 MiB or more by ${worst:-?}% (at most $MODEL_ERR%)"
    fi
  done
fi
cluster_down

killed_run INT
killed_run KILL

if [ $failures = 0 ]; then
  echo "PASS make cluster: 2 and 4 hosts match one host, link-down fault, clean-up" \
    "($(($(date +%s) - start)) s)"
else
  echo "FAIL make cluster: $failures checks failed ($(($(date +%s) - start)) s)"
  exit 1
fi
