#!/usr/bin/env bash
# One rank stopped (SIGSTOP) at each point of a run where a rank can hang, from MPI_Init to
# MPI_Finalize (SHARDLAB_STOP_AT=<point>:<rank>, collectives/stop_point.hpp): before MPI_Init,
# right after it, before the group communicators are made, in its first collective step, after the
# run while rank 0 verifies, at exit before its goodbye, after every goodbye, and right before
# MPI_Finalize. Each time the other ranks' watchdog must end the job: mpiexec exits 3 within the
# timeout plus a few seconds, a watchdog sentence on stderr names the stopped rank, and no process
# is left, the stopped one included. The points run on 2 ranks; group creation runs on 4 ranks too
# (ring-attention, rank 3 stopped). make test-mpi runs this (fault_test.sh).
# Usage: tests/mpi/stop_test.sh [BIN_DIR]   (default build/bin)
set -u
BIN=${1:-build/bin}
[ -x "$BIN/shardlab" ] || { echo "stop_test: $BIN/shardlab is not built" >&2; exit 2; }
DIR=$(mktemp -d /tmp/shardlab_stop.XXXXXX)
ln -s "$(cd "$BIN" && pwd)/shardlab" "$DIR/shardlab"
ME="$DIR/shardlab"
trap 'for p in $(pgrep -f "$ME"); do kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; done; rm -rf "$DIR"' EXIT
export OPENBLAS_NUM_THREADS=1
MATMUL="matmul --mesh X=2 --a-spec _,X --b-spec X,_ --out-spec _,_ --backend mpi --collective-timeout 1"
RING="ring-attention --backend mpi --collective-timeout 1"
failed=0
fail() { echo "   FAIL: $*"; failed=1; }
# mpiexec -n N with rank R stopped at POINT: its exit in rc, its seconds in took, processes left.
stopped_run() {
  local point=$1 rank=$2 n=$3 start
  shift 3
  start=$(date +%s.%N)
  SHARDLAB_STOP_AT=$point:$rank timeout -k 5 60 mpiexec -n "$n" "$ME" "$@" >"$DIR/out" 2>"$DIR/err"
  rc=$?
  took=$(echo "$(date +%s.%N) - $start" | bc | xargs printf '%.1f')
  left=""
  for _ in $(seq 50); do left=$(pgrep -f "$ME" | tr '\n' ' '); [ -z "$left" ] && break; sleep 0.1; done
}
# Exit 3 within 6 s (the timeout is 1 s), a sentence naming device $1, nothing left.
judge() {
  local said
  said=$(grep "collective timeout (--collective-timeout 1 s)" "$DIR/err" | grep -c "device $1\b")
  echo "   rank $1 stopped at $2: mpiexec exit $rc after $took s, sentences naming it $said, left: ${left:-none}"
  [ $rc = 3 ] || fail "exit $rc, expected 3"
  [ "$(echo "$took < 6" | bc)" = 1 ] || fail "took 6 s or more"
  [ "$said" -ge 1 ] || { fail "no watchdog sentence names device $1"; sed 's/^/   stderr: /' "$DIR/err"; }
  [ -z "$left" ] || fail "processes left"
}
for point in init start groups collective verify finalize goodbye mpi_finalize; do
  stopped_run $point 1 2 $MATMUL
  judge 1 $point
done
# After every goodbye the run's verdict is out before the finalize that hangs.
grep -q '^PASS matmul' "$DIR/out" || fail "the run's verdict is lost"
stopped_run groups 3 4 $RING
judge 3 "groups (4 ranks)"
[ $failed = 0 ] && echo "   stop test: all passed" || { echo "   stop test: FAILED"; exit 1; }
