#!/usr/bin/env bash
# tests/run_suite.sh JOBS LOGDIR BIN FILE...: the doctest suite BIN, one process per test file,
# JOBS at a time (a queue, so a long file does not hold the others back; the slowest files start
# first). Each file's log goes to LOGDIR; a failing file's log is printed whole, and the totals at
# the end. Exits 1 if any file failed (a sanitizer finding exits non-zero too). The environment
# (SHARDLAB_BIN, sanitizer options) passes through to BIN.
set -uo pipefail
jobs=$1 logdir=$2 bin=$3; shift 3
# The files that take longest (measured with doctest -d): started first.
slow=(test_docs_commands test_readme_commands test_uneven test_lessons_dtype test_cmd_power test_lesson_reports test_sweep
      test_lesson_commands test_ffn test_hostile_input)
ordered=()
for s in "${slow[@]}"; do for f in "$@"; do [[ $f == */$s.cpp ]] && ordered+=("$f"); done; done
for f in "$@"; do [[ " ${slow[*]} " == *" $(basename "$f" .cpp) "* ]] || ordered+=("$f"); done
rm -rf "$logdir" && mkdir -p "$logdir" || exit 2
start=$SECONDS
printf '%s\n' "${ordered[@]}" | xargs -P "$jobs" -I{} sh -c \
  'log="$1/$(basename "$2" .cpp).log"; t=$(date +%s%N); "$0" --source-file="*/$(basename "$2")" >"$log" 2>&1; \
   echo "$? $(( ($(date +%s%N) - t) / 1000000 ))" >"$log.rc"' \
  "$bin" "$logdir" {}
cases=0 asserts=0 failed=0 times=""
for f in "${ordered[@]}"; do
  log="$logdir/$(basename "$f" .cpp).log"
  read -r rc ms <"$log.rc" 2>/dev/null || rc=missing ms=0
  times+="$ms $f"$'\n'
  c=$(sed -nE 's/^\[doctest\] test cases: *([0-9]+) \| *([0-9]+) passed.*/\2/p' "$log")
  a=$(sed -nE 's/^\[doctest\] assertions: *([0-9]+) \| *([0-9]+) passed.*/\2/p' "$log")
  cases=$((cases + ${c:-0})) asserts=$((asserts + ${a:-0}))
  if [ "$rc" != 0 ]; then
    failed=$((failed + 1))
    echo "== FAIL: $f (exit $rc), its log ($log):"
    cat "$log"
  fi
done
echo "== slowest files: $(printf '%s' "$times" | sort -rn | head -4 | awk '{printf "%s%s %.0f s", (NR > 1 ? ", " : ""), $2, $1 / 1000}')"
echo "== doctest: $cases test cases and $asserts assertions passed in ${#ordered[@]} files" \
     "($jobs at a time, $((SECONDS - start)) s); $failed files failed"
# Every test case the binary holds must have run in some file's process (a test whose file name the
# filter missed would otherwise drop out of the count unseen).
listed=$("$bin" --list-test-cases 2>/dev/null | sed -nE 's/.*passing the current filters: ([0-9]+).*/\1/p')
if [ "$failed" = 0 ] && [ "$cases" != "$listed" ]; then
  echo "== FAIL: $cases test cases passed but the binary holds ${listed:-none}"; exit 1
fi
[ "$failed" = 0 ]
