#!/usr/bin/env bash
# Kills a `lins step` sweep part-way and resumes it (issue: nothing lost). Checks that the killed run leaves only
# step.csv.partial (which the analysis loader ignores), that --resume keeps the rows already written (byte for byte)
# and runs only what is missing, and that the finished step.csv has every (strategy, step) row exactly once.
# usage: step_resume_test.sh LINS MPIEXEC SOURCE_DIR
set -uo pipefail
lins=$1
mpiexec=$2
src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$work/out"
strategies=ddp,zero1,zero2,zero3,mics
args=(step --model small --seq 256 --gpus-per-node 2 --strategies "$strategies" --warmup 1 --steps 4 --out "$out")
launch=(timeout 300 "$mpiexec" --oversubscribe --allow-run-as-root -x OPENBLAS_NUM_THREADS=1 -np 4 "$lins")
fail() { echo "FAIL: $*"; exit 1; }

# 1. Start the sweep and kill it once the second strategy has written a row.
# timeout passes the TERM on to mpirun, which ends every rank.
"${launch[@]}" "${args[@]}" >"$work/first.log" 2>&1 &
launcher=$!
rows=0
for _ in $(seq 1 1200); do
  [ -f "$out/step.csv.partial" ] && rows=$(($(wc -l <"$out/step.csv.partial") - 1))
  [ "$rows" -ge 5 ] && break
  kill -0 $launcher 2>/dev/null || break
  sleep 0.05
done
kill -TERM $launcher 2>/dev/null
wait $launcher
echo "killed the sweep after $rows rows"
[ "$rows" -ge 5 ] || fail "the sweep ended before it could be interrupted (rows: $rows)"
[ -f "$out/step.csv" ] && fail "a killed run left step.csv, which looks complete"
[ -f "$out/step.csv.partial" ] || fail "no step.csv.partial after the kill"
kept=$(($(wc -l <"$out/step.csv.partial") - 1))
head -n $((kept + 1)) "$out/step.csv.partial" >"$work/before.csv"

# 2. The analysis loader must not read the unfinished file as a result.
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import pandas" 2>/dev/null; then
  n=$(PYTHONPATH="$src/analysis" /usr/bin/python3 -c \
    "from lins_analysis import load; print(len(load.load('$out').steps))")
  [ "$n" = 0 ] || fail "the analysis loader read $n rows from an unfinished run"
fi

# 3. Resume: the rows written before are kept as they were; the rest is run; every row appears once.
"${launch[@]}" "${args[@]}" --resume >"$work/second.log" 2>&1 || { cat "$work/second.log"; fail "the resumed sweep failed"; }
grep -E "resuming|kept from the earlier run" "$work/second.log"
[ -f "$out/step.csv" ] || fail "the resumed sweep did not finish step.csv"
[ -f "$out/step.csv.partial" ] && fail "step.csv.partial is left after the resumed sweep finished"
head -n $((kept + 1)) "$out/step.csv" | cmp -s - "$work/before.csv" || fail "the kept rows changed on resume"
total=$(($(wc -l <"$out/step.csv") - 1))
[ "$total" -eq 20 ] || fail "expected 5 strategies x 4 steps = 20 rows, got $total"
dups=$(python3 -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = [(r["strategy"], r["step"]) for r in rows]
print(len(keys) - len(set(keys)))' "$out/step.csv")
[ "$dups" -eq 0 ] || fail "$dups (strategy, step) rows appear twice"
echo "resumed: $kept rows kept, $((total - kept)) rows added, $total in all, no duplicates"
