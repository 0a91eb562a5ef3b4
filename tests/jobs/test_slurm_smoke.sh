#!/usr/bin/env bash
# The Slurm job scripts tested for real: starts a single-node Slurm cluster on this machine (slurm_cluster.sh),
# validates every job script at one-node scale with `sbatch --test-only` through jobs/submit_all.sh, submits the smoke
# job through submit_all.sh, polls squeue every 0.5 s (bounded), and checks the job's exit code, its CSV and the
# provenance beside it. Exit 77 (skipped) only when slurmctld is not installed.
# usage: tests/jobs/test_slurm_smoke.sh [path/to/lins]   (default: build/lins)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
bin=${1:-build/lins}
limit_s=${LINS_SLURM_TEST_TIMEOUT:-90}
py=${LINS_PYTHON:-/usr/bin/python3}  # Debian's Python, where pandas and matplotlib are installed

if ! command -v slurmctld >/dev/null 2>&1 && [ ! -x /usr/sbin/slurmctld ]; then
  echo "SKIP: slurmctld is not installed (apt-get install slurm-wlm munge), so no Slurm cluster can be started"
  exit 77
fi
[ "$(id -u)" -eq 0 ] || { echo "FAIL: starting slurmd and munged for the test needs root" >&2; exit 1; }
[ -x "$bin" ] || { echo "FAIL: lins binary $bin not found" >&2; exit 1; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

# shellcheck source=tests/jobs/slurm_cluster.sh
source "$here/slurm_cluster.sh"
trap slurm_stop EXIT
slurm_start

d=$SLURM_TEST_DIR
slurm_site_env "$d" "$bin" "LINS_SMOKE_FIGURES=${LINS_SMOKE_FIGURES:-0}"
# more ranks than cores: ranks must yield while they wait (mpirun --oversubscribe does this itself; srun does not)
export LINS_SITE_ENV=$d/site.env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1

fail() {
  echo "FAIL: $*" >&2
  for f in "$d"/raw/logs/*.out; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }; done
  tail -n 15 "$d/slurmctld.log" >&2
  exit 1
}

echo "== every job script at one-node scale, validated by slurmctld (sbatch --test-only)"
out=$(timeout 60 jobs/submit_all.sh --test-only --max-nodes 1 2>&1) || fail "submit_all.sh --test-only: $out"
echo "$out"
for name in smoke fig2 fig11_13 fig16_17 table4 project figures; do
  grep -q "^$name.*to start at" <<<"$out" || fail "Slurm did not accept the $name job script"
done
grep -qi "error" <<<"$out" && fail "sbatch --test-only reported an error"

echo "== smoke job, then the projection job after it (afterok), through submit_all.sh"
submitted=$(timeout 30 jobs/submit_all.sh --only smoke,project) || fail "submit_all.sh: $submitted"
echo "$submitted"
id=$(awk '/ smoke / {print $1}' <<<"$submitted")
pid=$(awk '/ project / {print $1}' <<<"$submitted")
[[ "$id" =~ ^[0-9]+$ && "$pid" =~ ^[0-9]+$ ]] || fail "no job ids from submit_all.sh (got '$submitted')"
grep -q "Dependency=afterok:$id" <<<"$(scontrol show job "$pid")" ||
  fail "the projection job does not depend on the smoke job"
start=$SECONDS
while [ -n "$(timeout 5 squeue -h -j "$id,$pid" 2>/dev/null)" ]; do
  if [ $((SECONDS - start)) -ge "$limit_s" ]; then
    scancel "$id" "$pid" || true
    fail "jobs $id, $pid still queued or running after ${limit_s} s"
  fi
  sleep 0.5
done
echo "jobs $id (smoke) and $pid (project) ended after $((SECONDS - start)) s"
for j in "$id" "$pid"; do
  record=$(scontrol show job "$j")
  state=$(grep -o 'JobState=[A-Z_]*' <<<"$record" | cut -d= -f2)
  code=$(grep -o ' ExitCode=[0-9:]*' <<<"$record" | cut -d= -f2)
  [ "$state" = COMPLETED ] && [ "$code" = 0:0 ] || fail "job $j: JobState=$state ExitCode=$code"
done
for f in fig2/projection.csv fig11_13/projection.csv table5/projection_m8.csv; do
  [ -s "$d/raw/projection/$pid/$f" ] || fail "the projection job did not write $f"
done

run=$d/raw/smoke/$id
[ -d "$run" ] || fail "no output folder $run"
for f in provenance.txt scontrol_show_job.txt env.txt nvidia-smi-q.txt; do
  [ -s "$run/$f" ] || fail "provenance file $f missing in $run"
done
grep -q "JobId=$id" "$run/scontrol_show_job.txt" || fail "scontrol_show_job.txt is not this job's record"
grep -q "^SLURM_JOB_ID=$id$" "$run/env.txt" || fail "env.txt lacks SLURM_JOB_ID"
[ "$(grep -c 'lins .*commit' "$d/raw/logs/lins-smoke-$id.out")" -eq 4 ] ||
  fail "srun did not start the binary on 4 ranks"

[ -s "$run/smoke_command.txt" ] || fail "smoke_command.txt missing: the job did not say what it ran"
ran=$(cat "$run/smoke_command.txt")
case "$ran" in
  step) csv=$(find "$run/step" -name '*.csv' | sort | head -n 1); source_expected=measured ;;
  plan) csv=$run/plans.csv ;;
  simulate) csv=$run/projection.csv; source_expected=projected ;;
  *) fail "smoke_command.txt says '$ran'" ;;
esac
[ -n "$csv" ] && [ -s "$csv" ] || fail "the smoke job ($ran) wrote no CSV"
rows=$(($(wc -l <"$csv") - 1))
[ "$rows" -ge 1 ] || fail "$csv has no rows"
# a step-schema CSV the binary wrote must have exactly the columns the analysis reads, and draw
check_step_csv() {  # <csv or folder> <measured|projected> <figures that must be drawn, comma-separated>
  PYTHONPATH="$repo/analysis" "$py" - "$1" "$2" "$3" "$d/figs" <<'PY' || fail "$1 does not fit analysis/"
import sys
import pandas as pd
from lins_analysis import make_figures, schema
from lins_analysis.load import load
data = load(sys.argv[1])
assert not data.steps.empty, "no step-schema CSV found"
for f in set(data.steps["file"]):
    assert list(pd.read_csv(f, nrows=0).columns) == schema.STEP_COLUMNS, f
assert (data.steps["source"] == sys.argv[2]).all() and data.steps["strategy"].nunique() >= 2
want = sys.argv[3].split(",")
drawn, missing = make_figures.make_all([sys.argv[1]], sys.argv[4], only=want, log=lambda *a: None)
assert set(drawn) == set(want), missing
PY
}
if [ "$ran" = plan ]; then
  head -n 1 "$csv" | grep -q s0_p || fail "plan CSV without the plan factors: $(head -n 1 "$csv")"
else
  check_step_csv "$csv" "$source_expected" fig11,fig12,fig13
fi
check_step_csv "$d/raw/projection/$pid" projected fig2,fig11,fig12,fig13,fig16_17,table4,table5
echo "PASS: on a real Slurm, smoke job $id (srun --mpi=pmix, 4 ranks; lins $ran wrote $rows rows in ${csv#"$d"/})"
echo "      and projection job $pid (afterok) completed; its CSVs draw Fig. 2, 11-13, 16/17, Tables IV and V"
