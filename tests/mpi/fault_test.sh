#!/usr/bin/env bash
# Faults under mpiexec and on the sim backend (make test-mpi runs this; about 35 s):
#   a) kill -9 of one rank of a 3-process run: mpiexec ends promptly, non-zero, no process left;
#   b) SIGSTOP of one rank with --collective-timeout 2: the other ranks each print the watchdog's
#      sentence, the run exits 3 within 10 s, and no process is left (the stopped one included);
#   c) SIGINT and SIGTERM to a sim run exit 130 and 143, and to mpiexec too (tests/mpi/signal_test.sh);
#   d) one rank stopped at seven points from MPI_Init to MPI_Finalize, group creation included:
#      exit 3 naming it, nothing left (tests/mpi/stop_test.sh).
# Usage: tests/mpi/fault_test.sh [BIN_DIR]   (default build/bin)
set -u
BIN=${1:-build/bin}
[ -x "$BIN/shardlab" ] || { echo "fault_test: $BIN/shardlab is not built" >&2; exit 2; }
# The binary under a path of this test's own, so that pgrep finds this test's processes only
# (another shardlab may be running on this machine).
DIR=$(mktemp -d /tmp/shardlab_fault.XXXXXX)
ln -s "$(cd "$BIN" && pwd)/shardlab" "$DIR/shardlab"
ME="$DIR/shardlab"
trap 'for p in $(pgrep -f "$ME"); do kill -KILL $p 2>/dev/null; done; rm -rf "$DIR"' EXIT
export OPENBLAS_NUM_THREADS=1
# Far more collectives than any case waits for (16 MiB all-reduces, one after another): every case
# ends the run by a signal or the watchdog, so it must still be running when the signal comes (400
# calls on 2 ranks once finished within the second before SIGINT).
LONG="bench collectives --ops all_reduce --min 16M --max 16M --iters 20000 --warmup 0"
failed=0
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc | xargs printf '%.1f'; }
fail() { echo "   FAIL: $*"; failed=1; }

# This test's processes (mpiexec, its proxy, the ranks); "" when none is left. Waits up to 5 s.
leftovers() {
  for _ in $(seq 50); do
    local left
    left=$(pgrep -f "$ME" | tr '\n' ' ')
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "$left"
}
# The pid of rank $1 of the running job (from the rank's environment); waits up to 5 s for it.
rank_pid() {
  for _ in $(seq 50); do
    for p in $(pgrep -f "$ME"); do
      tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMI_RANK=$1" && { echo "$p"; return 0; }
    done
    sleep 0.1
  done
  return 1
}

echo "== a) kill -9 one rank: mpiexec -n 3 shardlab $LONG --backend mpi"
start=$(now)
timeout -k 5 60 mpiexec -n 3 "$ME" $LONG --backend mpi >"$DIR/a.out" 2>"$DIR/a.err" &
job=$!
victim=$(rank_pid 1) || fail "rank 1 did not start"
sleep 1
kill -9 "$victim" 2>/dev/null
killed=$(now)
wait $job; rc=$?
echo "   mpiexec exit $rc, $(since "$killed") s after the kill (run started $(since "$start") s ago)"
[ $rc -ne 0 ] || fail "exit 0 after a rank was killed"
[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "the run hung until timeout killed it"
[ "$(echo "$(since "$killed") < 5" | bc)" = 1 ] || fail "took more than 5 s to end"
left=$(leftovers)
[ -z "$left" ] && echo "   no process left" || fail "processes left: $left"

echo "== b) SIGSTOP one rank: mpiexec -n 3 shardlab $LONG --backend mpi --collective-timeout 2"
start=$(now)
timeout -k 5 60 mpiexec -n 3 "$ME" $LONG --backend mpi --collective-timeout 2 >"$DIR/b.out" 2>"$DIR/b.err" &
job=$!
victim=$(rank_pid 1) || fail "rank 1 did not start"
sleep 2
kill -STOP "$victim" 2>/dev/null
stopped=$(now)
wait $job; rc=$?
took=$(since "$stopped")
sed 's/^/   stderr: /' "$DIR/b.err"
echo "   mpiexec exit $rc, $took s after the SIGSTOP"
[ $rc = 3 ] || fail "exit $rc, expected 3"
[ "$(echo "$took < 10" | bc)" = 1 ] || fail "took more than 10 s to end"
# Each live rank's own sentence: a timeout of its own, or what it was doing when another timed out.
for r in 0 2; do
  grep -E "^(collective timeout \(--collective-timeout 2 s\): )?device $r " "$DIR/b.err" |
    grep -q -- "--collective-timeout 2 s" || fail "no sentence from device $r"
done
lines=$(wc -l <"$DIR/b.err")
[ "$lines" -le 2 ] || fail "$lines lines on stderr, expected one sentence from each of the 2 live ranks"
# mpiexec may return before the kernel has finished the SIGKILLed rank: it has 5 s to go.
gone() { [ ! -d "/proc/$victim" ] || grep -q zombie "/proc/$victim/status" 2>/dev/null; }
for _ in $(seq 50); do gone && break; sleep 0.1; done
if gone; then
  echo "   the stopped rank is gone: mpiexec's abort killed it"
else
  fail "the stopped rank $victim is still there 5 s on (state: $(grep State /proc/$victim/status)); killing it"
  kill -CONT "$victim"; kill -KILL "$victim"
fi
left=$(leftovers)
[ -z "$left" ] && echo "   no process left" || fail "processes left: $left"

for s in INT:130 TERM:143; do
  sig=${s%:*} want=${s#*:}
  echo "== c) SIG$sig to a sim run: shardlab $LONG (must exit $want)"
  "$ME" $LONG >/dev/null 2>"$DIR/c.err" &
  job=$!
  sleep 1
  kill -$sig $job
  sent=$(now)
  wait $job; rc=$?
  echo "   exit $rc, $(since "$sent") s after the signal"
  [ $rc = "$want" ] || fail "exit $rc, expected $want"
done

echo "== c) SIGINT and SIGTERM to mpiexec -n 2 shardlab (twice each; make soak: 20 times)"
"$(dirname "$0")/signal_test.sh" "$BIN" 2 || fail "mpiexec's status after a signal"

echo "== d) one rank stopped at each point from MPI_Init to MPI_Finalize"
"$(dirname "$0")/stop_test.sh" "$BIN" || fail "a stopped rank"

[ $failed = 0 ] && echo "   fault test: all passed" || { echo "   fault test: FAILED"; exit 1; }
