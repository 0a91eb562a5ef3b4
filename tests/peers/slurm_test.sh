#!/usr/bin/env bash
# jobs/peers.sbatch under a real single-node Slurm (tests/jobs/slurm_cluster.sh): 4 tasks as 2 nodes x 2 started by
# srun, `lins step` and the FSDP2 and DDP peers on the tiny model; checks the job's exit, the peers' CSVs and
# provenance (ranks read from Slurm's variables, 4 of them), and runs lins_peers.check on the job's folder: the loss
# within bf16's rounding of lins's, the collectives against lins's log with only the explained differences.
# Exit 77 (skipped) when slurmctld or the peers' Python (scripts/install-peers.sh) is missing.
# usage: tests/peers/slurm_test.sh path/to/lins
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
bin=${1:-build/lins}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
venv=${LINS_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lins/peers-venv}
limit_s=${LINS_SLURM_TEST_TIMEOUT:-240}

if ! command -v slurmctld >/dev/null 2>&1 && [ ! -x /usr/sbin/slurmctld ]; then
  echo "SKIP: slurmctld is not installed"
  exit 77
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "SKIP: no peers' Python at $venv (run scripts/install-peers.sh)"
  exit 77
fi
[ "$(id -u)" -eq 0 ] || { echo "FAIL: starting slurmd and munged for the test needs root" >&2; exit 1; }

# shellcheck source=tests/jobs/slurm_cluster.sh
source "$repo/tests/jobs/slurm_cluster.sh"
trap slurm_stop EXIT
slurm_start
d=$SLURM_TEST_DIR
cat >"$d/site.env" <<ENV
LINS_PARTITION=debug
LINS_LAUNCHER=srun
LINS_SRUN_MPI=pmix
LINS_GPUS_PER_NODE=2
LINS_REQUEST_GPUS=0
LINS_BIN=$bin
LINS_RAW_DIR=$d/raw
ENV
export LINS_SITE_ENV=$d/site.env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
export LINS_PEERS_VENV=$venv LINS_MODELS=tiny LINS_SEQ=128 LINS_MICRO_BATCHES=2 LINS_WARMUP_STEPS=1
export LINS_TIMED_STEPS=1 LINS_PEERS_SYSTEMS="fsdp2 ddp" LINS_PEERS_FSDP2=full,hsdp LINS_REPO=$repo

fail() {
  echo "FAIL: $*" >&2
  for f in "$d"/peers-*.out; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 60 "$f" >&2; }; done
  exit 1
}

id=$(sbatch --parsable --partition=debug --nodes=1 --ntasks=4 --cpus-per-task=1 --time=00:10:00 \
  --output="$d/peers-%j.out" --chdir="$repo" jobs/peers.sbatch) || fail "sbatch refused jobs/peers.sbatch"
start=$SECONDS
while [ -n "$(timeout 5 squeue -h -j "$id" 2>/dev/null)" ]; do
  if [ $((SECONDS - start)) -ge "$limit_s" ]; then
    scancel "$id" || true
    fail "job $id still queued or running after ${limit_s} s"
  fi
  sleep 0.5
done
record=$(scontrol show job "$id")
state=$(grep -o 'JobState=[A-Z_]*' <<<"$record" | cut -d= -f2)
code=$(grep -o ' ExitCode=[0-9:]*' <<<"$record" | cut -d= -f2)
[ "$state" = COMPLETED ] && [ "$code" = 0:0 ] || fail "job $id: JobState=$state ExitCode=$code"
run=$d/raw/peers/$id/tiny
for f in step.csv lins.collectives.csv fsdp2.csv fsdp2.provenance.json fsdp2.collectives.csv ddp.csv \
  ddp.provenance.json; do
  [ -s "$run/$f" ] || fail "the job did not write $f"
done
python3 - "$run" <<'PY' || fail "the peers' provenance does not say what it should"
import json, sys
for stem in ("fsdp2", "ddp"):
    prov = json.load(open(f"{sys.argv[1]}/{stem}.provenance.json"))
    assert prov["world_size"] == 4 and prov["launcher"] == "slurm", (stem, prov["world_size"], prov["launcher"])
PY
# the loss, bytes and sequences against lins step's run in the same job (the job's lins.collectives.csv)
PYTHONPATH=$repo/python:$repo/analysis python3 -m lins_peers.check "$run" ||
  fail "lins_peers.check found unexplained differences"
echo "PASS: jobs/peers.sbatch on a real Slurm (job $id, srun, 4 tasks): FSDP2 and DDP beside lins step, checked"
