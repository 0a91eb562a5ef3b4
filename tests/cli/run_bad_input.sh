#!/usr/bin/env bash
# Runs every row of bad_input.tsv against the lins binary: each must exit non-zero within a bounded time and print
# the expected message (exactly once when run on several ranks); a row whose message starts with "exit 0: " must
# instead finish with exit 0 and print the rest. Rows without mpirun run under a 4 GiB address-space limit, so an
# input that would take the machine's memory fails the row instead. Usage: run_bad_input.sh LINS MPIEXEC TABLE
set -uo pipefail
# Rows without mpirun run under a 4 GiB address-space limit, except under AddressSanitizer (LINS_TEST_SANITIZED=1, set
# by the sanitizer build), whose shadow memory alone reserves terabytes of address space. There the rows that make an
# allocation fail on purpose (--no-memory-check) are skipped too: its operator new aborts instead of throwing.
limit=(prlimit --as=$((4 << 30)))
sanitized=${LINS_TEST_SANITIZED:-0}
[ "$sanitized" = 1 ] && limit=()
# Each row's bound in seconds; the sanitizers slow a run several times over, so their bound is longer.
single_bound=60
mpi_bound=120
[ "$sanitized" = 1 ] && single_bound=180 && mpi_bound=240
lins=$1
mpiexec=$2
table=$3
failed=0
total=0
failures=""
while IFS=$'\t' read -r ranks args expected; do
  [[ -z "$ranks" || "$ranks" == \#* ]] && continue
  if [ "$sanitized" = 1 ] && [[ "$args" == *--no-memory-check* ]]; then
    echo "skip lins $args (under AddressSanitizer a failed allocation aborts)"
    continue
  fi
  total=$((total + 1))
  # shellcheck disable=SC2086
  want_ok=0
  if [[ "$expected" == "exit 0: "* ]]; then
    want_ok=1
    expected=${expected#exit 0: }
  fi
  if [ "$ranks" = 0 ]; then
    out=$(cd "$(dirname "$table")/../.." && timeout "$single_bound" "${limit[@]}" "$lins" $args 2>&1 </dev/null)
  else
    out=$(cd "$(dirname "$table")/../.." && timeout "$mpi_bound" "$mpiexec" --oversubscribe --allow-run-as-root -np "$ranks" "$lins" $args 2>&1 </dev/null)
  fi
  rc=$?
  count=$(grep -cF -- "$expected" <<<"$out")
  if [ "$want_ok" = 1 ] && [ "$rc" -eq 0 ]; then
    rc_ok=1
  elif [ "$want_ok" = 0 ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then
    rc_ok=1
  else
    rc_ok=0
  fi
  if [ "$rc_ok" = 0 ] || [ "$count" -lt 1 ] || { [ "$ranks" != 0 ] && [ "$count" -ne 1 ]; }; then
    echo "FAIL: lins $args (ranks $ranks): exit $rc, expected message '$expected' $count times"
    timed_out=""
    [ "$rc" -eq 124 ] && timed_out=" (timed out)"
    failures+="FAIL: lins $args (ranks $ranks): exit $rc$timed_out"$'\n'
    echo "$out" | head -5 | sed 's/^/    /'
    failed=$((failed + 1))
  else
    printf 'ok   exit %-3s %-60s -> %s\n' "$rc" "lins $args" "$(grep -F -- "$expected" <<<"$out" | head -1 | cut -c1-150)"
  fi
done <"$table"
echo "$((total - failed)) passed, $failed failed"
# The failures again, last, where a log cut to its tail still shows them.
[ -n "$failures" ] && printf '%s' "$failures"
[ "$failed" -eq 0 ]
