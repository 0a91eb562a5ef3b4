#!/usr/bin/env bash
# Submits a whole reproduction of the paper's experiments to Slurm, with dependencies: the smoke job first, every
# figure/table sweep after it succeeds, and the figures job after all of them end.
#
# usage: jobs/submit_all.sh [--only LIST] [--max-nodes N] [--dry-run] [--test-only]
#   --only LIST     comma-separated subset of: smoke fig2 fig3 fig11_13 fig16_17 table4 table5 project figures
#   --max-nodes N   skip the scales that need more than N nodes (default: all; the paper needs 128 nodes of 8 GPUs)
#   --dry-run       print the sbatch commands without submitting
#   --test-only     ask Slurm to validate each job (sbatch --test-only) without queueing it; no dependencies
# Site settings (partition, account, launcher, GPUs per node, binary) come from jobs/site.env (see
# jobs/site.env.example). Prints one line per job: its id, name and scale. Logs go to data/raw/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
export LINS_REPO=$PWD
# shellcheck source=jobs/lib.sh
source jobs/lib.sh
lins_load_site "$LINS_REPO"

only="" max_nodes=1000000 mode=submit
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=$2; shift 2 ;;
    --max-nodes) max_nodes=$2; shift 2 ;;
    --dry-run) mode=dry; shift ;;
    --test-only) mode="test"; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "submit_all: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

R=$LINS_GPUS_PER_NODE
logs=${LINS_RAW_DIR:-data/raw}/logs
common=(--output="$logs/%x-%j.out" --kill-on-invalid-dep=yes)
[ -n "${LINS_PARTITION:-}" ] && common+=(--partition="$LINS_PARTITION")
[ -n "${LINS_ACCOUNT:-}" ] && common+=(--account="$LINS_ACCOUNT")
[ -n "${LINS_QOS:-}" ] && common+=(--qos="$LINS_QOS")
[ -n "${LINS_TIME_LIMIT:-}" ] && common+=(--time="$LINS_TIME_LIMIT")
# shellcheck disable=SC2206
[ -n "${LINS_SBATCH_EXTRA:-}" ] && common+=($LINS_SBATCH_EXTRA)
mkdir -p "$logs"

# sbatch options for N nodes of one rank per GPU
gpu_nodes() {
  local n=$1
  local opts=(--nodes="$n" --ntasks-per-node="$R" --cpus-per-task="${LINS_CPUS_PER_TASK:-8}")
  [ "${LINS_REQUEST_GPUS:-1}" = 1 ] && opts+=(--gpus-per-node="$R")
  echo "${opts[@]}"
}

submitted=()
rejected=()
# submit <script> <name shown> <dependency or ""> <sbatch options...>
submit() {
  local script=$1 label=$2 dep=$3
  shift 3
  local cmd=(sbatch --parsable "${common[@]}" "$@")
  [ -n "$dep" ] && [ "$mode" != test ] && cmd+=(--dependency="$dep")
  [ "$mode" = test ] && cmd=(sbatch --test-only "${common[@]}" "$@")
  cmd+=("jobs/$script")
  case "$mode" in
    dry) echo "${cmd[*]}"; LAST_ID="DRY$((${#submitted[@]} + 1))" ;;
    test)
      LAST_ID=""
      if out=$("${cmd[@]}" 2>&1); then echo "$label: $out"; else echo "$label: REJECTED: $out"; rejected+=("$label"); fi
      ;;
    submit) LAST_ID=$("${cmd[@]}"); LAST_ID=${LAST_ID%%;*}; echo "$LAST_ID $label" ;;
  esac
  [ -n "$LAST_ID" ] && submitted+=("$LAST_ID")
  return 0
}

after_smoke=""
if wanted smoke; then
  smoke_opts=(--nodes=1 --ntasks="${LINS_SMOKE_NTASKS:-4}")
  [ "${LINS_REQUEST_GPUS:-1}" = 1 ] && smoke_opts+=(--gpus-per-node="$(( R < 4 ? R : 4 ))")
  submit smoke.sbatch "smoke (1 node, ${LINS_SMOKE_NTASKS:-4} ranks)" "" "${smoke_opts[@]}"
  [ -n "$LAST_ID" ] && after_smoke="afterok:$LAST_ID"
fi

# name, script, then nodes@time-limit per scale. The limits are the projected step times (lins simulate, paper
# testbed, 60% sustained compute) x 7 steps x strategies x models, with margin: the 1-node jobs are the long ones,
# because the global batch stays 4M tokens (M = 128 micro-batches on 8 GPUs).
sweeps=(
  "fig2 fig2.sbatch 1@01:30:00 2@01:00:00 4@00:45:00 8@00:30:00 16@00:30:00 32@00:30:00 64@00:30:00"
  "fig3 fig3_profile.sbatch 64@02:00:00"
  "fig11_13 scaling.sbatch 1@14:00:00 4@04:00:00 16@01:30:00 64@00:45:00 128@00:30:00"
  "fig16_17 fig16_17.sbatch 1@08:00:00 4@02:00:00 16@01:00:00 64@00:30:00 128@00:30:00"
  "table5 table5.sbatch 8@00:45:00"
)
for line in "${sweeps[@]}"; do
  read -r name script scales <<<"$line"
  wanted "$name" || continue
  for scale in $scales; do
    n=${scale%@*}
    limit=${scale#*@}
    if [ "$n" -gt "$max_nodes" ]; then
      echo "skip $name at $n nodes (--max-nodes $max_nodes)"
      continue
    fi
    time_opt=()
    [ -z "${LINS_TIME_LIMIT:-}" ] && time_opt=(--time="$limit")
    # shellcheck disable=SC2046
    submit "$script" "$name ($n nodes x $R GPUs)" "$after_smoke" $(gpu_nodes "$n") --job-name="lins-$name-n$n" \
      "${time_opt[@]}"
  done
done

if wanted project; then
  submit project.sbatch "project (1 task, no GPU)" "$after_smoke" --nodes=1 --ntasks=1
fi

if wanted table4; then
  submit table4_plans.sbatch "table4 (1 task, no GPU)" "$after_smoke" --nodes=1 --ntasks=1
fi

if wanted figures && [ "$mode" != test ]; then
  dep=""
  [ ${#submitted[@]} -gt 0 ] && dep="afterany:$(IFS=:; echo "${submitted[*]}")"
  submit figures.sbatch "figures (after all)" "$dep" --nodes=1 --ntasks=1
elif wanted figures; then
  submit figures.sbatch "figures" "" --nodes=1 --ntasks=1
fi
if [ ${#rejected[@]} -gt 0 ]; then
  echo "submit_all: Slurm rejected ${#rejected[@]} job(s): ${rejected[*]}" >&2
  exit 1
fi
