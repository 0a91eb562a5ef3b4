#!/usr/bin/env bash
# The GPU check's scripts on a machine without a GPU: they parse (bash -n), shellcheck finds nothing (where it is
# installed), and scripts/gpu-check.sh's stage budgets hold what its header promises: the table there is the one the
# script uses, and with every stage taking all the time it may (min(cap, budget left - the later floors)), the run
# ends within GPU_CHECK_BUDGET_S (420, and scaled budgets) with every stage given at least its floor.
#   test_gpu_check_scripts.sh SOURCE_DIR
set -uo pipefail
ROOT=${1:?usage: test_gpu_check_scripts.sh SOURCE_DIR}
cd "$ROOT" || exit 1
# shellcheck source=tests/scripts/check.sh
source "$ROOT/tests/scripts/check.sh"
for f in scripts/gpu-check.sh scripts/gpu-carry.sh scripts/gpu-deps.sh; do
  check "bash -n $f" bash -n "$f"
  if command -v shellcheck >/dev/null 2>&1; then
    check "shellcheck -x $f" shellcheck -x "$f"
  fi
done
command -v shellcheck >/dev/null 2>&1 || echo "note shellcheck is not installed: not run"
check "python3 parses scripts/gpu-check-verdict.py" python3 -c \
  'import ast, sys; ast.parse(open(sys.argv[1]).read())' scripts/gpu-check-verdict.py

# The stage arrays of the script, and its header's table.
caps=$(sed -n 's/^STAGE_CAP=(\(.*\))$/\1/p' scripts/gpu-check.sh)
floors=$(sed -n 's/^STAGE_FLOOR=(\(.*\))$/\1/p' scripts/gpu-check.sh)
names=$(sed -n 's/^STAGES=(\(.*\))$/\1/p' scripts/gpu-check.sh)
table=$(sed -n 's/^#   \([a-z]*\) \{2,\}\([0-9]\{1,\}\) \{2,\}\([0-9]\{1,\}\)  .*/\1 \2 \3/p' scripts/gpu-check.sh)
check "the stage arrays are defined (STAGES, STAGE_CAP, STAGE_FLOOR)" test -n "$caps" -a -n "$floors" -a -n "$names"
from_arrays=$(paste -d' ' <(tr ' ' '\n' <<<"$names") <(tr ' ' '\n' <<<"$caps") <(tr ' ' '\n' <<<"$floors"))
check "the header's stage table is the one the script uses" test "$table" = "$from_arrays"
[ "$table" = "$from_arrays" ] || diff <(echo "$table") <(echo "$from_arrays")
# shellcheck disable=SC2016  # a literal ${ in the pattern
default=$(sed -n 's/^TOTAL_S=\${GPU_CHECK_BUDGET_S:-\([0-9]*\)}$/\1/p' scripts/gpu-check.sh)
check "the default budget is 420 s" test "$default" = 420

# Every stage takes all it may, in order (the script's stage_begin, scaled as the script scales).
simulate() { # $1: budget; prints the end time, or FAIL lines
  awk -v B="$1" -v caps="$caps" -v floors="$floors" -v names="$names" 'BEGIN {
    n = split(caps, c, " "); split(floors, f, " "); split(names, s, " ")
    for (i = 1; i <= n; i++) { c[i] = int(c[i] * B / 420); f[i] = int(f[i] * B / 420) }
    t = 0; bad = 0
    for (i = 1; i <= n; i++) {
      later = 0
      for (j = i + 1; j <= n; j++) later += f[j]
      lim = B - t - later
      if (lim > c[i]) lim = c[i]
      if (lim < f[i]) { printf "FAIL %s gets %d s, under its floor %d s\n", s[i], lim, f[i]; bad = 1 }
      if (lim > 0) t += lim
    }
    if (t > B) { printf "FAIL the stages end at %d s, past the budget %d s\n", t, B; bad = 1 }
    if (!bad) printf "%d\n", t
  }'
}
for b in 420 300 600 1200; do
  end=$(simulate "$b")
  check "budget $b s: every stage taking its whole limit ends at ${end} s, each at least its floor" \
    test "$end" -le "$b" 2>/dev/null
  grep FAIL <<<"$end"
done
exit $status
