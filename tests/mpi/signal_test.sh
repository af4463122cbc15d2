#!/usr/bin/env bash
# SIGINT and SIGTERM to mpiexec, N times each: mpiexec must return 130 and 143 every time, within
# 5 s of the signal, with no process left (docs/cli.md, Exit status). Under MPICH 4.0.2's hydra a rank
# that _exits on a signal may be reported as 0; shardlab's ranks end the job with MPI_Abort(128 +
# signal) instead (collectives/exit_signals.hpp). make test-mpi runs this twice per signal (in
# fault_test.sh), make soak 20 times.
# Usage: tests/mpi/signal_test.sh [BIN_DIR] [N]   (default build/bin, 20)
set -u
BIN=${1:-build/bin}
N=${2:-20}
[ -x "$BIN/shardlab" ] || { echo "signal_test: $BIN/shardlab is not built" >&2; exit 2; }
DIR=$(mktemp -d /tmp/shardlab_signal.XXXXXX)
ln -s "$(cd "$BIN" && pwd)/shardlab" "$DIR/shardlab"
ME="$DIR/shardlab"
trap 'for p in $(pgrep -f "$ME"); do kill -KILL $p 2>/dev/null; done; rm -rf "$DIR"' EXIT
export OPENBLAS_NUM_THREADS=1
# Job control: a background job starts with SIGINT at its default, as from a terminal (without it
# bash starts background jobs with SIGINT ignored).
set -m
LONG="bench collectives --ops all_reduce --min 16M --max 16M --iters 20000 --warmup 0 --backend mpi"
failed=0
ranks_up() {  # both ranks have started (their environment names their rank); waits up to 10 s
  for _ in $(seq 100); do
    local n=0
    for p in $(pgrep -f "$ME"); do
      tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q "^PMI_RANK=" && n=$((n + 1))
    done
    [ $n -ge 2 ] && return 0
    sleep 0.1
  done
  return 1
}
for s in INT:130 TERM:143; do
  sig=${s%:*} want=${s#*:} got="" slow=0
  for _ in $(seq "$N"); do
    mpiexec -n 2 "$ME" $LONG >/dev/null 2>&1 &
    job=$!
    ranks_up || { echo "   FAIL: the ranks did not start"; failed=1; }
    sleep 1  # past MPI_Init
    kill -$sig $job
    sent=$(date +%s.%N)
    wait $job; rc=$?
    [ "$(echo "$(date +%s.%N) - $sent < 5" | bc)" = 1 ] || slow=$((slow + 1))
    got="$got $rc"
    [ $rc = "$want" ] || failed=1
    for _ in $(seq 50); do [ -z "$(pgrep -f "$ME")" ] && break; sleep 0.1; done
    [ -z "$(pgrep -f "$ME")" ] || { echo "   FAIL: processes left after SIG$sig"; failed=1; }
  done
  echo "   SIG$sig to mpiexec -n 2, $N times: statuses$got (want $want every time)"
  [ $slow = 0 ] || { echo "   FAIL: $slow runs took 5 s or more to end"; failed=1; }
done
[ $failed = 0 ] && echo "   signal test: all passed" || { echo "   signal test: FAILED"; exit 1; }
