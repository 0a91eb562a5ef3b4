#!/usr/bin/env bash
# Helpers shared by the lins Slurm job scripts and jobs/submit_all.sh: finding the repository, reading the site
# settings, the output folder data/raw/<figure>/<jobid>/, provenance beside the CSV, and starting ranks with srun or
# mpirun. Source it; it defines functions and changes nothing until they are called.

# The repository root: $LINS_REPO, else the folder sbatch was called from (when it is the repository), else the
# parent of this file. sbatch runs a copy of the job script from a spool folder, so the script's own path is no guide.
lins_repo_root() {
  if [ -n "${LINS_REPO:-}" ]; then
    echo "$LINS_REPO"
  elif [ -n "${SLURM_SUBMIT_DIR:-}" ] && [ -f "$SLURM_SUBMIT_DIR/jobs/lib.sh" ]; then
    echo "$SLURM_SUBMIT_DIR"
  else
    (cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  fi
}

# Reads jobs/site.env (or $LINS_SITE_ENV, else the example) into the environment.
lins_load_site() {
  local root=$1 env_file
  env_file=${LINS_SITE_ENV:-}
  if [ -z "$env_file" ]; then
    if [ -f "$root/jobs/site.env" ]; then env_file=$root/jobs/site.env; else env_file=$root/jobs/site.env.example; fi
  fi
  [ -f "$env_file" ] || { echo "lins: site settings $env_file not found" >&2; return 1; }
  # shellcheck disable=SC1090
  source "$env_file"
  LINS_SITE_ENV_USED=$env_file
  export LINS_PARTITION LINS_ACCOUNT LINS_QOS LINS_LAUNCHER LINS_SRUN_MPI LINS_GPUS_PER_NODE LINS_BIN LINS_NETWORK
}

# Loads the site's environment modules when the `module` command exists.
lins_load_modules() {
  [ -n "${LINS_MODULES:-}" ] || return 0
  if command -v module >/dev/null 2>&1 || type module >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    module load $LINS_MODULES
  else
    echo "lins: LINS_MODULES is set but there is no module command; continuing without loading modules" >&2
  fi
}

# The job id, or local-<time>-<pid> when run outside Slurm (a direct run on a workstation).
lins_job_id() {
  if [ -n "${SLURM_JOB_ID:-}" ]; then echo "$SLURM_JOB_ID"; else echo "local-$(date +%Y%m%d-%H%M%S)-$$"; fi
}

# Ranks of this job: Slurm's task count, else $LINS_NTASKS, else 4 (a workstation run).
lins_ntasks() {
  echo "${SLURM_NTASKS:-${LINS_NTASKS:-4}}"
}

# Nodes of this job.
lins_nnodes() {
  echo "${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}"
}

# Saves what is needed to trust a result beside it: the Slurm job record and batch script, the GPUs, the
# environment that steers MPI/NCCL/CUDA/Slurm/lins, the code version, and the binary's version.
lins_provenance() {
  local out=$1
  mkdir -p "$out"
  {
    echo "date: $(date -Is)"
    echo "host: $(hostname)"
    echo "user_cwd: $PWD"
    echo "site_env: ${LINS_SITE_ENV_USED:-}"
    echo "launcher: ${LINS_LAUNCHER:-}"
    echo "git_commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "git_dirty_files: $(git status --porcelain 2>/dev/null | wc -l)"
    echo "lins_version: $("$LINS_BIN" --version 2>&1 || true)"
    echo "mpirun_version: $(mpirun --version 2>/dev/null | head -n 1 || true)"
  } >"$out/provenance.txt"
  if [ -n "${SLURM_JOB_ID:-}" ] && command -v scontrol >/dev/null 2>&1; then
    scontrol show job "$SLURM_JOB_ID" >"$out/scontrol_show_job.txt" 2>&1 || true
    scontrol write batch_script "$SLURM_JOB_ID" "$out/batch_script.sh" >/dev/null 2>&1 || true
  fi
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1 || true
    nvidia-smi topo -m >"$out/nvidia-smi-topo.txt" 2>&1 || true
  else
    echo "nvidia-smi not found on $(hostname): no GPU information" >"$out/nvidia-smi-q.txt"
  fi
  # only the variables that steer the run: never the whole environment (it can hold tokens)
  env | grep -E '^(SLURM_|LINS_|OMPI_|PMIX_|NCCL_|CUDA_|UCX_|OMP_|OPENBLAS_|HOSTNAME=)' | sort >"$out/env.txt" || true
}

# Sets up a job: repository, site settings, modules, output folder data/raw/<figure>/<jobid>/ (printed and stored
# in LINS_OUT), provenance. Call it first in every job script: lins_init fig11_13
lins_init() {
  local figure=$1
  LINS_ROOT=$(lins_repo_root)
  cd "$LINS_ROOT" || return 1
  lins_load_site "$LINS_ROOT"
  lins_load_modules
  export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  if [ ! -x "$LINS_BIN" ]; then
    echo "lins: binary $LINS_BIN not found or not executable (build it: scripts/build.sh; or set LINS_BIN)" >&2
    return 1
  fi
  LINS_OUT=${LINS_OUT:-${LINS_RAW_DIR:-data/raw}/$figure/$(lins_job_id)}
  mkdir -p "$LINS_OUT"
  lins_provenance "$LINS_OUT"
  echo "lins: $figure, $(lins_ntasks) ranks on $(lins_nnodes) node(s), results in $LINS_OUT"
}

# Starts the binary on every rank of the job: lins_launch <ntasks> <lins arguments...>
lins_launch() {
  local np=$1
  shift
  case "${LINS_LAUNCHER:-srun}" in
    srun)
      # shellcheck disable=SC2086
      srun --mpi="${LINS_SRUN_MPI:-pmix}" --kill-on-bad-exit=1 --ntasks="$np" ${LINS_SRUN_EXTRA:-} "$LINS_BIN" "$@"
      ;;
    mpirun)
      # OpenMPI aborts every rank when one exits non-zero (the mpirun equivalent of --kill-on-bad-exit)
      # shellcheck disable=SC2086
      mpirun -np "$np" ${LINS_MPIRUN_FLAGS:-} -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$LINS_BIN" "$@"
      ;;
    *)
      echo "lins: LINS_LAUNCHER must be srun or mpirun, not '$LINS_LAUNCHER'" >&2
      return 2
      ;;
  esac
}

# Whether the binary implements a subcommand (a placeholder answers --help with a non-zero exit).
lins_has_command() {
  "$LINS_BIN" "$1" --help >/dev/null 2>&1
}

# Fails unless FILE is a CSV with a header and at least one row.
lins_check_csv() {
  local f=$1
  if [ ! -s "$f" ] || [ "$(wc -l <"$f")" -lt 2 ]; then
    echo "lins: expected CSV $f is missing or has no rows" >&2
    return 1
  fi
  echo "lins: wrote $f ($(($(wc -l <"$f") - 1)) rows)"
}

# The paper's workload (docs/method.md, "The experiments"): global batch 4M tokens of sequence 4096, micro-batch 1, so
# M = 1024 / GPUs (at least 1).
lins_paper_micro_batches() {
  local gpus=$1 m
  m=$((1024 / gpus))
  [ "$m" -ge 1 ] || m=1
  echo "$m"
}

# Runs `lins step` for one model over a list of strategies, writing into $LINS_OUT/<name>/ (step.csv, its provenance,
# traces with LINS_TRACE=1): lins_step <name> <model> <strategies> [extra lins step options...]
# A 6-tuple strategy holds commas: put it last in the list. The planner behind 'lins' gets the GPU memory and the
# measured profile (LINS_PROFILE) or network preset (LINS_STEP_NETWORK) of the site; the backend is
# LINS_STEP_BACKEND (default gpu when the job requests GPUs and the node shows one), the storage precision
# LINS_PRECISION and the activation dtype LINS_COMPUTE.
lins_step() {
  local name=$1 model=$2 strategies=$3
  shift 3
  local np extra=()
  np=$(lins_ntasks)
  [ -n "${LINS_PROFILE:-}" ] && extra+=(--profile "$LINS_PROFILE")
  [ -n "${LINS_STEP_NETWORK:-}" ] && extra+=(--network "$LINS_STEP_NETWORK")
  [ "${LINS_TRACE:-0}" = 1 ] && extra+=(--trace)
  local backend=${LINS_STEP_BACKEND:-}
  if [ -z "$backend" ]; then  # gpu where the job asked for GPUs and this node shows one, else cpu
    backend=cpu
    [ "${LINS_REQUEST_GPUS:-1}" = 1 ] && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && backend=gpu
  fi
  extra+=(--backend "$backend")
  [ -n "${LINS_PRECISION:-}" ] && extra+=(--precision "$LINS_PRECISION")
  [ -n "${LINS_COMPUTE:-}" ] && extra+=(--compute "$LINS_COMPUTE")
  lins_launch "$np" step --model "$model" --gpus-per-node "${LINS_RANKS_PER_NODE:-$LINS_GPUS_PER_NODE}" \
    --strategies "$strategies" --warmup "$LINS_WARMUP_STEPS" --steps "$LINS_TIMED_STEPS" \
    --gpu-mem "$LINS_GPU_MEM" --out "$LINS_OUT/$name" "${extra[@]}" "$@"
}
