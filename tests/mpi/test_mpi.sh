#!/usr/bin/env bash
# make test-mpi: the MPI suite, lessons and shardlab on processes, then faults. Each part prints
# what it runs and stops the script (exit 1) at its first failure.
#   1. the MPI suite (mpi_tests) at 2 and 8 ranks, then its "mpi binaries" cases (rank 0 runs
#      lessons and shardlab under a nested mpiexec) on one rank: in a 2-rank suite the idle rank
#      busy-polled a core away from the nested runs (77 s at 2 ranks, 58 s as 6 s + one rank's 52 s);
#   2. lesson 02 on 8 processes must give the sim run's verdict and bytes per device;
#   3. a derived backward, lessons and shardlab commands on 8, 4 and 3 processes must pass;
#   4. lesson 01 on the wrong process count must say so in one sentence, print nothing else, exit 2;
#   5. faults (tests/mpi/fault_test.sh, ~30 s): a rank killed, a rank stopped past
#      --collective-timeout (exit 3), SIGINT/SIGTERM (130/143); no process may be left behind;
#      then the cluster test's smoke run (tests/cluster/cluster_test.sh --smoke).
# Usage: tests/mpi/test_mpi.sh BIN_DIR   (the build's bin directory, e.g. build/bin; files the
# checks write go beside it, in BIN_DIR/..)
set -u
BIN=${1:?usage: tests/mpi/test_mpi.sh BIN_DIR}
BUILD=$(dirname "$BIN")
SHARDLAB=$BIN/shardlab
MPI_TESTS=$BIN/mpi_tests
export OPENBLAS_NUM_THREADS=1
# The fields of lesson 02's --json that must not differ between the sim run and the MPI run.
MPI_SAME="(pass|op|axes|tensor|group_size|messages|bytes_per_device|predicted_bytes_per_device)"

# Runs "mpiexec -n N command..." with its output indented; a non-zero exit fails with `what`.
must_pass() {
  local n=$1 limit=$2 what=$3
  shift 3
  timeout "$limit" mpiexec -n "$n" "$@" | sed 's/^/   /'
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { echo "   FAIL: exit $rc ($what)"; exit 1; }
}

if [ -x "$MPI_TESTS" ]; then
  for n in 2 8; do
    echo "== MPI suite: mpiexec -n $n $MPI_TESTS -tse=\"mpi binaries\""
    SHARDLAB_BIN=$BIN timeout 900 mpiexec -n $n "$MPI_TESTS" -tse="mpi binaries" || exit 1
  done
  echo "== MPI suite: mpiexec -n 1 $MPI_TESTS -ts=\"mpi binaries\"  (rank 0 starts nested mpiexec runs)"
  SHARDLAB_BIN=$BIN timeout 900 mpiexec -n 1 "$MPI_TESTS" -ts="mpi binaries" || exit 1
else
  echo "== no MPI suite yet: skipping"
fi

l=$BIN/02_reduction_allreduce
if [ -x "$l" ]; then
  echo "== mpiexec -n 8 $l --backend mpi --json  (against the sim run)"
  sim=$("$l" --json | grep -E '"'$MPI_SAME'"')
  mpi=$(timeout 120 mpiexec -n 8 "$l" --backend mpi --json | grep -E '"'$MPI_SAME'"')
  if grep -q '"pass": true' <<<"$mpi" && [ "$sim" = "$mpi" ]; then
    echo "   pass true, same bytes per device as sim"
  else
    echo "   FAIL: differs from the sim run:"
    diff <(echo "$sim") <(echo "$mpi")
    exit 1
  fi
else
  echo "== $l not built: skipping its MPI check"
fi

echo "== mpiexec -n 8 $SHARDLAB run harness/cases/gspmd_ffn_backward.toml --backend mpi --quiet"
must_pass 8 120 "the derived backward on 8 processes" \
  "$SHARDLAB" run harness/cases/gspmd_ffn_backward.toml --backend mpi --quiet
for l in 12_attention 13_transformer_layer 14_data_parallel 17_3d_parallelism; do
  echo "== mpiexec -n 8 $BIN/$l --backend mpi --quiet"
  must_pass 8 300 "$l on 8 processes" "$BIN/$l" --backend mpi --quiet
done
for c in "$BIN/16_pipeline --backend mpi --quiet" \
  "$SHARDLAB pipeline --stages 4 --chunks 4 --schedule 1f1b --backend mpi --quiet" \
  "$BIN/18_sequence_parallel --backend mpi --quiet" \
  "$BIN/19_context_parallel --backend mpi --quiet"; do
  echo "== mpiexec -n 4 $c"
  # shellcheck disable=SC2086  # $c is a command line
  must_pass 4 120 "$c on 4 processes" $c
done
echo "== mpiexec -n 3 $BIN/15_zero --backend mpi --quiet --trace $BUILD/15_zero_trace.json"
must_pass 3 120 "15_zero on 3 processes" "$BIN/15_zero" --backend mpi --quiet --trace "$BUILD/15_zero_trace.json"
echo "== mpiexec -n 3 $BIN/17_3d_parallelism --backend mpi --mesh D=3,P=1,T=1 --uneven pad --quiet"
must_pass 3 120 "17_3d_parallelism, 8 rows padded over 3 processes" \
  "$BIN/17_3d_parallelism" --backend mpi --mesh D=3,P=1,T=1 --uneven pad --quiet
# Paths only MPI takes: ring messages over 1 MiB (4 MiB here), and MPICH's own max in bfloat16.
for dt in "float64" "bfloat16 --collectives native"; do
  echo "== mpiexec -n 2 $BIN/shardlab run harness/cases/max_over_split.toml --backend mpi --dtype $dt --quiet"
  must_pass 2 120 "max_over_split.toml, $dt, on 2 processes" \
    "$BIN/shardlab" run harness/cases/max_over_split.toml --backend mpi --dtype $dt --quiet
done

l=$BIN/01_mesh_and_layout
if [ -x "$l" ]; then
  echo "== mpiexec -n 6 $l --backend mpi  (mesh of 8: must exit 2 with one sentence)"
  timeout 60 mpiexec -n 6 "$l" --backend mpi >"$BUILD/mpi_misuse.out" 2>"$BUILD/mpi_misuse.err"
  rc=$?
  sed 's/^/   /' "$BUILD/mpi_misuse.err"
  if [ $rc = 2 ] && [ "$(wc -l <"$BUILD/mpi_misuse.err")" = 1 ] && [ ! -s "$BUILD/mpi_misuse.out" ]; then
    echo "   exit 2, one sentence, nothing on stdout"
  else
    echo "   FAIL: exit $rc, $(wc -l <"$BUILD/mpi_misuse.err") lines on stderr, $(wc -l <"$BUILD/mpi_misuse.out") on stdout"
    exit 1
  fi
else
  echo "== $l not built: skipping its MPI check"
fi

"$(dirname "$0")/fault_test.sh" "$BIN" || exit 1
"$(dirname "$0")/../cluster/cluster_test.sh" --smoke "$BIN" || exit 1
