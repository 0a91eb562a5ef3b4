#!/usr/bin/env bash
# Runs the analysis pytest suite for ctest: exit 77 (skipped) when the Python lacks pandas/matplotlib/pytest or when
# pytest collects nothing (its exit 5); otherwise pytest's own exit status.
set -uo pipefail
python=$1
tests=$2
if ! "$python" -c "import pandas, matplotlib, pytest" 2>/dev/null; then
  echo "SKIP: $python lacks pandas, matplotlib or pytest (apt-get install python3-pandas python3-matplotlib python3-pytest)"
  exit 77
fi
# pytest's temporary folders in one of our own, removed afterwards (left to itself, pytest keeps its last three runs'
# under the temporary directory)
basetemp=$(mktemp -d "${TMPDIR:-/tmp}/lins-pytest.XXXXXX")
trap 'rm -rf "$basetemp"' EXIT
"$python" -m pytest -q -p no:cacheprovider --basetemp "$basetemp/t" "$tests"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "SKIP: pytest collected no tests in $tests"
  exit 77
fi
exit "$rc"
