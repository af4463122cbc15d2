#!/usr/bin/env bash
# One rank stopped (SIGSTOP) at each point of a run where a rank can hang: right after MPI_Init, in
# its first collective step, after the run while rank 0 verifies, and at exit before MPI_Finalize
# (SHARDLAB_STOP_AT=<point>:1, collectives/stop_point.hpp). Each time the other rank's watchdog
# must end the job: mpiexec exits 3 within 10 s of the start, the watchdog's sentence on stderr, and
# no process is left, the stopped one included. make test-mpi runs this (fault_test.sh).
# Usage: tests/mpi/stop_test.sh [BIN_DIR]   (default build/bin)
set -u
BIN=${1:-build/bin}
[ -x "$BIN/shardlab" ] || { echo "stop_test: $BIN/shardlab is not built" >&2; exit 2; }
DIR=$(mktemp -d /tmp/shardlab_stop.XXXXXX)
ln -s "$(cd "$BIN" && pwd)/shardlab" "$DIR/shardlab"
ME="$DIR/shardlab"
trap 'for p in $(pgrep -f "$ME"); do kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; done; rm -rf "$DIR"' EXIT
export OPENBLAS_NUM_THREADS=1
RUN="matmul --mesh X=2 --a-spec _,X --b-spec X,_ --out-spec _,_ --backend mpi --collective-timeout 1"
failed=0
# Rank 1 stopped at POINT: mpiexec's exit in rc, its seconds in took, processes left in left.
stopped_run() {
  local start
  start=$(date +%s.%N)
  SHARDLAB_STOP_AT=$1:1 timeout -k 5 60 mpiexec -n 2 "$ME" $RUN >"$DIR/out" 2>"$DIR/err"
  rc=$?
  took=$(echo "$(date +%s.%N) - $start" | bc | xargs printf '%.1f')
  left=""
  for _ in $(seq 50); do left=$(pgrep -f "$ME" | tr '\n' ' '); [ -z "$left" ] && break; sleep 0.1; done
}
for point in start collective verify finalize; do
  stopped_run $point
  said=$(grep -c "collective timeout (--collective-timeout 1 s)" "$DIR/err")
  echo "   rank 1 stopped at $point: mpiexec exit $rc after $took s, watchdog sentences $said, left: ${left:-none}"
  [ $rc = 3 ] || { echo "   FAIL: exit $rc, expected 3"; failed=1; }
  [ "$(echo "$took < 10" | bc)" = 1 ] || { echo "   FAIL: took 10 s or more"; failed=1; }
  [ "$said" -ge 1 ] || { echo "   FAIL: no watchdog sentence"; cat "$DIR/err"; failed=1; }
  [ -z "$left" ] || { echo "   FAIL: processes left"; failed=1; }
done
# Stopped after every goodbye, inside the exit: the run is over and its status settled. Past
# min(--collective-timeout, 10 s) the others' finalize gives up with a note, and rank 0 ends the
# job (MPI_Abort): exit non-zero (hydra's 5 for a killed rank), the verdict printed, nothing left.
# (MPICH 4.0.2's finalize hangs there by itself at times over UCX's TCP: tests/cluster, docs/mpi.md.)
stopped_run goodbye
said=$(grep -c "MPI_Finalize hung" "$DIR/err")
echo "   rank 1 stopped after its goodbye: mpiexec exit $rc after $took s, notes $said," \
  "'$(grep -m1 '^PASS matmul' "$DIR/out" | cut -c1-12)' printed, left: ${left:-none}"
[ $rc != 0 ] || { echo "   FAIL: exit 0 with a rank stopped"; failed=1; }
[ "$(echo "$took < 10" | bc)" = 1 ] || { echo "   FAIL: took 10 s or more"; failed=1; }
[ "$said" -ge 1 ] || { echo "   FAIL: no note"; cat "$DIR/err"; failed=1; }
grep -q '^PASS matmul' "$DIR/out" || { echo "   FAIL: the run's verdict is lost"; failed=1; }
[ -z "$left" ] || { echo "   FAIL: processes left"; failed=1; }
[ $failed = 0 ] && echo "   stop test: all passed" || { echo "   stop test: FAILED"; exit 1; }
