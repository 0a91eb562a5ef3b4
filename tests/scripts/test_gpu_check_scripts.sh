#!/usr/bin/env bash
# The GPU check's scripts on a machine without a GPU: the shell scripts parse (bash -n) and shellcheck finds nothing
# in them (where it is installed), and the Python ones parse. The check's time budget is tested by
# test_gpu_check_budget.py, its behaviour end to end by test_gpu_check_rehearsal.py.
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
for f in scripts/gpu_check.py scripts/gpu-check-verdict.py scripts/gpu-torch-compare.py; do
  check "python3 parses $f" python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$f"
done
# shellcheck disable=SC2016  # the line as it is written in the script
check "scripts/gpu-check.sh runs scripts/gpu_check.py" grep -q '^exec python3 "$(dirname "$0")/gpu_check.py" "$@"$' \
  scripts/gpu-check.sh
exit $status
