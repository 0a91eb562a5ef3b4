#!/usr/bin/env bash
# The GPU checks in one go, on a machine with a CUDA device, within a time budget, with a verdict that means something.
#
#   scripts/gpu-carry.sh DIR              here, first: DIR gets the project without .git (tracked and untracked files
#                                         git does not ignore), COMMIT (the commit, and whether it was dirty) and .deps/
#                                         (the carried packages of scripts/gpu-deps.sh, and the cuDNN frontend headers
#                                         when present); it fails when the whole is 64 MiB or more
#   cd DIR && scripts/gpu-check.sh OUTDIR [ARCHIVE]
#                                         on the GPU machine
#
# Time. GPU_CHECK_BUDGET_S (420 s by default) is the whole run: give the command that runs this script at least 60 s
# more (480 s). The stages, each with its cap and its floor in seconds (both scaled by GPU_CHECK_BUDGET_S / 420):
#
#   stage      cap  floor
#   setup       45     45  toolchain, nvidia-smi, which libraries the machine has (cmake/probe) and the carried
#                          packages for the others, NCCL's one-rank environment, provenance.json, nvidia-smi.txt
#   configure   60     30  CMake for sm_$CUDA_ARCH (tests and benchmarks on where GoogleTest and Google Benchmark
#                          are found or carried)
#   build      150     90  lins and the GPU plugin lins_gpu (liblins_gpu.so, when the tree defines the target) first,
#                          then the gpu tests and bench_kernels_gpu with ninja -k 0; the kernel tests and the
#                          benchmark built with nvcc alone where CMake cannot build them
#   tests      150     60  ctest -L gpu (GPU_CHECK_CTEST_JOBS, 4, at a time; each test's own timeout too); on a
#                          machine where nvidia-smi lists a GPU a skipped test counts as failed
#   sanitizer   40      0  the failed kernel cases (the first SANITIZE_MAX_CASES, 4) again under compute-sanitizer
#                          memcheck, then racecheck, without the tests' guard bytes; skipped under 20 s
#   bench       40      0  bench_kernels_gpu; skipped under 20 s
#   step       150     75  one rank of `lins step --backend gpu --precision bf16 --compute bf16` on llama-7b layer
#                          shapes cut to 2 layers (with --attention cudnn, then --attention flash, where `lins step
#                          --help` lists --attention), then the same with fp32 storage+compute when 30 s of the stage
#                          are left; then scripts/gpu-check-verdict.py on every step CSV written
#   ncclpair    30      0  optional: two ranks on the one GPU through NCCL (each rank its own NCCL_HOSTID, so NCCL
#                          takes them for two hosts and joins them over its socket transport on loopback): `lins comm
#                          --backend nccl` checked for every op; skipped under 20 s; a failure is reported, not fatal
#   contention  40      0  optional: `lins comm --backend nccl --contention contention.toml` at four ranks on the one
#                          GPU (each its own NCCL_HOSTID, labelled 2 nodes of 2), small; the file and the log go to
#                          OUTDIR; skipped under 20 s; a failure is reported, not fatal (one GPU shared by four ranks
#                          exercises the path, its values describe no real fabric)
#   finish      10     10  the verdict, summary.txt and the archive
#
# Each stage may take min(its cap, the budget left less the floors of the stages after it): the floors sum to 310 of
# the 420 s, so every stage keeps its floor whatever the ones before it took, and no stage can end past the budget
# (worst case: setup 45, configure 60, build 150, tests 80, no sanitizer or benchmarks, step 75, finish 10 = 420).
# Measured on 2 cores without a GPU: the build of every target the check needs, from nothing, 173 s (180 s of compile
# jobs), so well under the build floor on the GPU machine's 16 (an estimate: not yet measured there).
# Every command runs under `timeout` (TERM, then KILL 5 s later, both inside the stage's limit). A TERM or INT stops
# the running stage at once and writes the verdict (FAIL, naming the stage), summary.txt and the archive; a watchdog
# sends that TERM when the budget is spent, and writes the last lines and the archive itself if the script has not
# ended 25 s later.
#
# The verdict: exit 0 only when the build, every gpu test, the benchmarks and the step stage passed; 77 when the build
# passed on a machine with no CUDA device (nothing else can run there); 1 otherwise, the failures listed at the end of
# summary.txt. The step stage passes only when every run it made exited 0 and gpu-check-verdict.py accepts every row:
# loss finite, > 0 and < ln(vocab) + 1; 0 < MFU < 0.85; forward, backward and optimizer times > 0; the strategies'
# losses, and the runs' (bf16 against fp32, cudnn against flash), within tolerances derived in that script.
#
# Libraries. For each of MPI, OpenBLAS, GoogleTest, Google Benchmark and the cuDNN frontend headers the machine's own
# copy is used when CMake finds it (cmake/probe); for each one it lacks, the carried copy (.deps/debs/ through
# scripts/gpu-deps.sh, .deps/cudnn-frontend/include) when there is one. summary.txt says which were carried.
# NCCL comes from the CUDA installation, else from the CUDA Python wheel (nvidia-nccl-cu*).
#
# OUTDIR gets: summary.txt (every stage's verdict, limit and time, the tests' and benchmarks' summaries, the step
# verdict), provenance.json, nvidia-smi.txt, build.log, tests.log, sanitizer/ (when a kernel case failed),
# bench_kernels_gpu.{csv,json,log}, step-*/ (step.csv, step.provenance.json, log.txt) and step-verdict.txt. ARCHIVE,
# when given, is a .tar.gz of OUTDIR, rewritten after every stage (a run cut short keeps what was done).
# Environment: CUDA_ARCH (90), BUILD_DIR (build-gpu), JOBS (nproc), GPU_CHECK_BUDGET_S (420), GPU_CHECK_CTEST_JOBS (4),
# BENCH_ARGS (extra bench_kernels_gpu flags, e.g. --quick), GPU_CHECK_STANDALONE=1 (skip CMake, build the kernel tests
# and the benchmark with nvcc alone), GPU_CHECK_CARRY (libraries to take from .deps/ even where the machine has its
# own: any of mpi openblas gtest benchmark formats cudnn-frontend, or all), GPU_CHECK_CUDNN_FE_VAR (the CMake variable that
# names the cuDNN frontend's include folder: LINS_CUDNN_FRONTEND_DIR), SANITIZE_MAX_CASES (4), STEP_ARGS (extra
# lins step flags, every run; lins refuses a flag given twice, so these add to the ones below, they do not replace
# them), GPU_CHECK_STEP_SHAPE (the model and shape flags of every step run: --model llama-7b --layers 2 --seq 4096
# --micro-batch 1 --micro-batches 1 --peak-tflops 989), GPU_CHECK_STEP_BACKEND (gpu; cpu runs the step stage and its
# verdict on the CPU backend even without a device: a dry run of the stage, for a machine with no GPU, with a small
# GPU_CHECK_STEP_SHAPE and a --peak-tflops near the CPU's), NCCL_IB_DISABLE (1), NCCL_SOCKET_IFNAME (lo),
# NCCL_DEBUG (WARN).
#
# Not `set -e`: a failed stage is recorded and the next one runs (the point of the script); every stage's status is
# checked explicitly.
set -uo pipefail
OUT=${1:?usage: scripts/gpu-check.sh OUTDIR [ARCHIVE]}
ARCHIVE=${2:-}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
if [ -n "$ARCHIVE" ]; then
  mkdir -p "$(dirname "$ARCHIVE")" || exit 1
  ARCHIVE="$(cd "$(dirname "$ARCHIVE")" && pwd)/$(basename "$ARCHIVE")"
fi
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
START=$(date +%s)
TOTAL_S=${GPU_CHECK_BUDGET_S:-420}
ARCH=${CUDA_ARCH:-90}
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILURES=()
KILL_GRACE=5        # timeout's -k: KILL this long after TERM, inside each command's limit
WATCHDOG_GRACE_S=25 # after its TERM, the watchdog waits this long before it writes the verdict itself
MAIN_PID=$$
exec 3>&1 4>&2 # the script's own output: a trap may run inside a command's redirection (bounded ... >log)
STATE_DIR=$(mktemp -d) || exit 1  # the running stage and its processes, for the watchdog

elapsed() { echo $(($(date +%s) - START)); }
# Whether exit status $1 is timeout's: 124 after its TERM, 137 after the KILL that follows (-k) when a process ignores
# TERM (a CUDA call stuck in the driver can). timeout signals the command's whole process group, so a test binary
# under ctest, or MPI's daemon, goes too.
timed_out() { [ "$1" = 124 ] || [ "$1" = 137 ]; }
log() { echo "[gpu-check +$(elapsed)s] $*" | tee -a "$SUMMARY"; }
fail() {
  FAILURES+=("$1")
  log "FAIL: $1"
}
# The archive of OUTDIR, rewritten whole (written aside, then renamed).
checkpoint() {
  [ -n "$ARCHIVE" ] || return 0
  tar -czf "$ARCHIVE.part" -C "$(dirname "$OUT")" "$(basename "$OUT")" 2>/dev/null && mv -f "$ARCHIVE.part" "$ARCHIVE"
}

# --- stages and their time ----------------------------------------------------------------------------------------
STAGES=(setup configure build tests sanitizer bench step ncclpair contention finish)
STAGE_CAP=(45 60 150 150 40 40 150 30 40 10)
STAGE_FLOOR=(45 30 90 60 0 0 75 0 0 10)
OPTIONAL_MIN_S=$((20 * TOTAL_S / 420))  # an optional stage (floor 0) is skipped with less than this
for i in "${!STAGES[@]}"; do
  STAGE_CAP[i]=$((STAGE_CAP[i] * TOTAL_S / 420))
  STAGE_FLOOR[i]=$((STAGE_FLOOR[i] * TOTAL_S / 420))
done
STAGE=none
STAGE_I=-1
STAGE_START=$START
STAGE_END=$START   # when the running stage must be done (its limit from its start)
STAGE_REPORT=()    # one line per stage: limit, time used, outcome
# Starts stage $1: its limit is min(cap, budget left - the floors of the later stages), kept in STAGE_END; prints it.
# Returns 1 (and records the stage as skipped) when that is under its floor and under OPTIONAL_MIN_S for a stage
# without one, or under 1 s.
stage_begin() {
  local i later=0 j t
  for i in "${!STAGES[@]}"; do [ "${STAGES[i]}" = "$1" ] && break; done
  for ((j = i + 1; j < ${#STAGES[@]}; j++)); do later=$((later + STAGE_FLOOR[j])); done
  t=$((TOTAL_S - $(elapsed) - later))
  [ "$t" -gt "${STAGE_CAP[i]}" ] && t=${STAGE_CAP[i]}
  STAGE=$1
  STAGE_I=$i
  STAGE_START=$(date +%s)
  STAGE_END=$((STAGE_START + (t > 0 ? t : 0)))
  echo "$STAGE" >"$STATE_DIR/stage"
  local min=${STAGE_FLOOR[i]}
  [ "$min" = 0 ] && min=$OPTIONAL_MIN_S
  if [ "$t" -lt 1 ] || { [ "$t" -lt "$min" ] && [ "${STAGE_FLOOR[i]}" = 0 ]; }; then
    log "== $1: skipped, ${t}s left for it (needs ${min}s; the later stages keep ${later}s)"
    STAGE_REPORT+=("$(printf '%-10s limit %4ss  used %4ss  skipped (no time)' "$1" "$t" 0)")
    return 1
  fi
  log "== $1 (limit ${t}s: cap ${STAGE_CAP[i]}s, ${later}s kept for the stages after it)"
  return 0
}
# Ends the running stage with outcome $1 (ok, failed, ...).
stage_end() {
  local used=$(($(date +%s) - STAGE_START))
  STAGE_REPORT+=("$(printf '%-10s limit %4ss  used %4ss  %s' "$STAGE" "$((STAGE_END - STAGE_START))" "$used" "$1")")
  log "== $STAGE: $1 in ${used}s"
  checkpoint
}
# Seconds left in the running stage, at most $1 when given.
stage_left() {
  local t=$((STAGE_END - $(date +%s)))
  [ $# -gt 0 ] && [ "$t" -gt "$1" ] && t=$1
  [ "$t" -lt 0 ] && t=0
  echo "$t"
}

# Runs "$@" for at most $1 seconds (TERM at $1 - KILL_GRACE, KILL at $1), in the background so that a TERM or INT to
# this script is handled at once (the trap stops it); returns its status. Its output goes where the caller's does.
STAGE_PIDS=()
bounded() {
  local t=$(($1 - KILL_GRACE))
  shift
  [ "$t" -lt 1 ] && t=1
  timeout -k "$KILL_GRACE" "$t" "$@" 3>&- 4>&- &
  local pid=$! rc p rest=()
  STAGE_PIDS+=("$pid")
  echo "${STAGE_PIDS[*]}" >"$STATE_DIR/pids"
  wait "$pid"
  rc=$?
  for p in "${STAGE_PIDS[@]}"; do [ "$p" != "$pid" ] && rest+=("$p"); done
  STAGE_PIDS=("${rest[@]}")
  echo "${STAGE_PIDS[*]}" >"$STATE_DIR/pids"
  return $rc
}
# The same started in the background: its pid is left in BG_PID, for the caller's `wait`.
bounded_bg() {
  local t=$(($1 - KILL_GRACE))
  shift
  [ "$t" -lt 1 ] && t=1
  timeout -k "$KILL_GRACE" "$t" "$@" 3>&- 4>&- &
  BG_PID=$!
  STAGE_PIDS+=("$BG_PID")
  echo "${STAGE_PIDS[*]}" >"$STATE_DIR/pids"
}
# shellcheck disable=SC2317  # called from the traps
# Stops what the running stage started: TERM to each timeout (it passes it to its command), KILL to their process
# groups KILL_GRACE s later.
stop_stage() {
  local p i
  for p in "${STAGE_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for ((i = 0; i < KILL_GRACE * 2; i++)); do
    local alive=0
    for p in "${STAGE_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.5
  done
  for p in "${STAGE_PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; done
}

# --- the verdict, the watchdog, the signals -------------------------------------------------------------------------
WATCHDOG_PID=""
MODE=none BUILD_OK=0 TEST_RC=skipped BENCH_RC=skipped STEP_RC=skipped NO_DEVICE=0
# Writes the stage table and the verdict, and exits: 0 pass, 77 no device, 1 fail.
finish() {
  trap '' TERM INT
  [ -n "$WATCHDOG_PID" ] && kill "$WATCHDOG_PID" 2>/dev/null
  WATCHDOG_PID=""
  log "stages (budget ${TOTAL_S}s):"
  local l f rc=1
  for l in "${STAGE_REPORT[@]}"; do log "  $l"; done
  log "done in $(elapsed)s of ${TOTAL_S}s: build=$MODE build_ok=$BUILD_OK tests=$TEST_RC bench=$BENCH_RC step=$STEP_RC" \
    "carried=[${CARRIED[*]:-none}] plugin=${PLUGIN_STATE:-unknown}"
  if [ "${#FAILURES[@]}" -eq 0 ] && [ "$NO_DEVICE" = 1 ]; then
    log "RESULT: NO DEVICE: the GPU code built; its tests skipped and the benchmarks and the step need a device" \
      "(exit 77)"
    rc=77
  elif [ "${#FAILURES[@]}" -eq 0 ]; then
    log "RESULT: PASS"
    rc=0
  else
    log "RESULT: FAIL (${#FAILURES[@]}):"
    for f in "${FAILURES[@]}"; do log "  - $f"; done
  fi
  checkpoint
  rm -rf "$STATE_DIR"
  exit $rc
}
# shellcheck disable=SC2317  # called from the traps
on_signal() {
  trap '' TERM INT
  exec 1>&3 2>&4
  log "$1 received during the $STAGE stage: stopping it"
  stop_stage
  [ "$STAGE_I" -ge 0 ] && STAGE_REPORT+=("$(printf '%-10s limit %4ss  used %4ss  stopped by %s' "$STAGE" \
    "$((STAGE_END - STAGE_START))" "$(($(date +%s) - STAGE_START))" "$1")")
  fail "stopped by $1 during the $STAGE stage at +$(elapsed)s (the stages after it did not run)"
  finish
}
trap 'on_signal SIGTERM' TERM
trap 'on_signal SIGINT' INT
trap 'rm -rf "$STATE_DIR"' EXIT
# The watchdog: at the budget, TERM to the script (its trap writes the verdict); if the script has not ended
# WATCHDOG_GRACE_S later (a command that does not return), the last lines and the archive from here, and KILL.
watchdog() {
  trap - TERM INT EXIT
  while kill -0 "$MAIN_PID" 2>/dev/null && [ "$(elapsed)" -lt "$TOTAL_S" ]; do sleep 1; done
  kill -0 "$MAIN_PID" 2>/dev/null || exit 0
  log "watchdog: the budget (${TOTAL_S}s) is spent: stopping the script"
  kill -TERM "$MAIN_PID" 2>/dev/null
  local i p
  for ((i = 0; i < WATCHDOG_GRACE_S; i++)); do
    kill -0 "$MAIN_PID" 2>/dev/null || exit 0
    sleep 1
  done
  log "watchdog: the script did not stop within ${WATCHDOG_GRACE_S}s (in the $(cat "$STATE_DIR/stage" 2>/dev/null)" \
    "stage): ending it"
  local pids=()
  read -ra pids <"$STATE_DIR/pids" 2>/dev/null
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; done
  kill -KILL "$MAIN_PID" 2>/dev/null
  log "RESULT: FAIL: out of time in the $(cat "$STATE_DIR/stage" 2>/dev/null) stage; the watchdog ended the script at" \
    "+$(elapsed)s"
  checkpoint
  rm -rf "$STATE_DIR"
}
watchdog &
WATCHDOG_PID=$!

# === setup ==========================================================================================================
stage_begin setup
CARRIED=()       # the libraries taken from .deps/
PLUGIN_STATE=""
NVCC=${CUDACXX:-}
if [ -z "$NVCC" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    NVCC=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then
    NVCC=/usr/local/cuda/bin/nvcc
  fi
fi
if [ -z "$NVCC" ]; then
  fail "no nvcc found (set CUDACXX)"
  stage_end failed
  finish
fi
export CUDACXX=$NVCC
CUDA_ROOT=$(dirname "$(dirname "$NVCC")")

# The GPU. nvidia-smi can hang on a broken driver: every call is bounded, and none is made again once one hung. A GPU
# it lists must be used: a test that skips on such a machine (exit 77, "no device") hides a broken driver or runtime,
# so skipped tests count as failures here.
GPU_PRESENT=0
SMI_OK=1
smi_list=$(bounded "$(stage_left 15)" nvidia-smi -L 2>&1)
smi_rc=$?
if timed_out $smi_rc; then
  SMI_OK=0
  log "nvidia-smi -L did not answer within 15 s (a hung driver?): no more nvidia-smi calls"
elif [ $smi_rc = 0 ] && grep -q '^GPU ' <<<"$smi_list"; then
  GPU_PRESENT=1
  log "$smi_list"
else
  SMI_OK=$([ $smi_rc = 127 ] && echo 0 || echo 1)
  log "nvidia-smi lists no GPU (rc=$smi_rc: missing, or no device): GPU tests may skip"
fi
{
  echo "# nvidia-smi -L"
  echo "$smi_list"
  if [ "$SMI_OK" = 1 ]; then
    echo
    echo "# nvidia-smi"
    bounded "$(stage_left 10)" nvidia-smi 2>&1 || echo "(exit $?)"
    echo
    echo "# nvidia-smi -q"
    bounded "$(stage_left 10)" nvidia-smi -q 2>&1 || echo "(exit $?)"
  fi
} >"$OUT/nvidia-smi.txt"

# Which libraries the machine has (the searches of CMakeLists.txt, in cmake/probe), and the carried copy of each one
# it lacks: .deps/debs/ (MPI, OpenBLAS, GoogleTest, Google Benchmark, nlohmann-json and toml++, through
# scripts/gpu-deps.sh) and .deps/cudnn-frontend/include. GPU_CHECK_CARRY names ones to carry even where the machine
# has them.
declare -A HAVE=([mpi]=0 [openblas]=0 [gtest]=0 [benchmark]=0 [formats]=0 [cudnn_frontend]=0 [cudnn]=0)
declare -A WHERE=()
force=${GPU_CHECK_CARRY:-}
force=" ${force//,/ } "
[ "$force" = " all " ] && force=" mpi openblas gtest benchmark formats cudnn-frontend "
PROBED=0 # the libraries matter to CMake only: without it (or with GPU_CHECK_STANDALONE=1) none is looked for or carried
if [ "${GPU_CHECK_STANDALONE:-0}" != 1 ] && command -v cmake >/dev/null 2>&1; then
  PROBED=1
  probe_dir=$(mktemp -d)
  probe_gen=()
  command -v ninja >/dev/null 2>&1 && probe_gen=(-G Ninja)
  bounded "$(stage_left 30)" cmake -S cmake/probe -B "$probe_dir" "${probe_gen[@]}" -DCUDA_ROOT="$CUDA_ROOT" \
    >"$OUT/probe.log" 2>&1 ||
    log "the library probe (cmake/probe) failed or ran out of time (probe.log): every library counts as missing"
  rm -rf "$probe_dir"
  while read -r name found where; do
    HAVE[$name]=$found
    WHERE[$name]=$where
  done < <(sed -n 's/^-- lins-probe: \([a-z_]*\)=\([01]\) *\(.*\)$/\1 \2 \3/p' "$OUT/probe.log")
fi
carry_debs=()
for lib in mpi openblas gtest benchmark formats; do
  if [ "$PROBED" = 0 ]; then
    continue
  elif [ "${HAVE[$lib]}" = 1 ] && [[ $force != *" $lib "* ]]; then
    log "library $lib: the machine's (${WHERE[$lib]:-found})"
  else
    carry_debs+=("$lib")
  fi
done
DEPS_CMAKE_ARGS=()
if [ "${#carry_debs[@]}" -gt 0 ]; then
  if ! ls .deps/debs/*.deb >/dev/null 2>&1; then
    log "libraries ${carry_debs[*]}: the machine has none of its own and .deps/debs/ carries none (scripts/gpu-carry.sh)"
  elif ! bounded "$(stage_left 25)" bash -c '. scripts/gpu-deps.sh use "$@" >/dev/null' sh "${carry_debs[@]}" \
    >>"$SUMMARY" 2>&1; then
    log "libraries ${carry_debs[*]}: the carried packages in .deps/debs/ could not be unpacked (above)"
  else
    # Unpacked (above, bounded), this only sets the environment.
    # shellcheck source=scripts/gpu-deps.sh
    . scripts/gpu-deps.sh use "${carry_debs[@]}" >>"$SUMMARY" 2>&1
    read -ra DEPS_CMAKE_ARGS <<<"$LINS_DEPS_CMAKE_ARGS"
    CARRIED+=("${carry_debs[@]}")
    for lib in "${carry_debs[@]}"; do HAVE[$lib]=carried; done
    log "libraries ${carry_debs[*]}: carried (.deps/debs/)"
    # Every carried program and library must find what it links to here, or MPI programs fail at start.
    bounded "$(stage_left 20)" scripts/gpu-deps.sh check "${carry_debs[@]}" >>"$SUMMARY" 2>&1 ||
      log "some carried libraries cannot load here (listed above)"
  fi
fi
CUDNN_FE_VAR=${GPU_CHECK_CUDNN_FE_VAR:-LINS_CUDNN_FRONTEND_DIR}
if [ "$PROBED" = 0 ]; then
  log "libraries: not looked for (no CMake build: $([ "${GPU_CHECK_STANDALONE:-0}" = 1 ] && echo GPU_CHECK_STANDALONE=1 ||
    echo "no cmake"))"
elif [ "${HAVE[cudnn_frontend]}" = 1 ] && [[ $force != *" cudnn-frontend "* ]]; then
  log "library cudnn-frontend: the machine's (${WHERE[cudnn_frontend]})"
elif [ -f .deps/cudnn-frontend/include/cudnn_frontend.h ]; then
  DEPS_CMAKE_ARGS+=("-D$CUDNN_FE_VAR=$ROOT/.deps/cudnn-frontend/include")
  CARRIED+=(cudnn-frontend)
  HAVE[cudnn_frontend]=carried
  log "library cudnn-frontend: carried (.deps/cudnn-frontend/include, as -D$CUDNN_FE_VAR)"
else
  log "library cudnn-frontend: not on this machine and not carried (.deps/cudnn-frontend/include)"
fi
[ "$PROBED" = 1 ] &&
  log "library cudnn: $([ "${HAVE[cudnn]}" = 1 ] && echo "the machine's (${WHERE[cudnn]})" || echo "not found")"
log "carried: ${CARRIED[*]:-none}"

if [ -z "${NCCL_HOME:-}" ] && ! ls "$CUDA_ROOT"/lib*/libnccl.so* "$CUDA_ROOT"/targets/*/lib/libnccl.so* \
  /usr/lib/x86_64-linux-gnu/libnccl.so* >/dev/null 2>&1; then
  nccl_dir=$(timeout 10 python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
  if [ -n "$nccl_dir" ] && [ -f "$nccl_dir/include/nccl.h" ]; then
    export NCCL_HOME=$nccl_dir
    export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    log "NCCL from the Python wheel in $nccl_dir"
  fi
fi
# NCCL for one rank on one machine: no network transport is needed, and probing InfiniBand or picking an odd interface
# for the bootstrap socket can stall or fail a communicator's start; warnings and errors only. A value already set wins.
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

# Provenance: the commit from git where this is a checkout (its own, not a parent folder's), else from the COMMIT
# file scripts/gpu-carry.sh wrote.
COMMIT=unknown
COMMIT_FULL=""
DIRTY=unknown
COMMIT_SOURCE=none
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
  COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  COMMIT_FULL=$(git rev-parse HEAD 2>/dev/null)
  DIRTY=$([ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && echo true || echo false)
  COMMIT_SOURCE=git
elif [ -f COMMIT ]; then
  COMMIT=$(sed -n 's/^short=//p' COMMIT)
  COMMIT_FULL=$(sed -n 's/^commit=//p' COMMIT)
  DIRTY=$(sed -n 's/^dirty=//p' COMMIT)
  COMMIT_SOURCE="COMMIT ($(sed -n 's/^date_utc=//p' COMMIT), $(sed -n 's/^untracked=//p' COMMIT) untracked files)"
fi
nccl_header=""
for d in "${NCCL_HOME:+$NCCL_HOME/include}" "$CUDA_ROOT/include" /usr/include /usr/local/include; do
  [ -n "$d" ] && [ -f "$d/nccl.h" ] && nccl_header="$d/nccl.h" && break
done
# The versions as the tools report them; lins step adds the ones the binaries see at run time (NCCL, CUDA runtime and
# driver, device) to its own step.provenance.json. Each tool gets 5 s (nvidia-smi none once it hung).
write_provenance() {
  GC_COMMIT=$COMMIT GC_COMMIT_FULL=$COMMIT_FULL GC_DIRTY=$DIRTY GC_COMMIT_SOURCE=$COMMIT_SOURCE GC_ARCH=$ARCH \
    GC_BUDGET=$TOTAL_S GC_NVCC=$NVCC GC_NCCL_HEADER=$nccl_header GC_LINS=${LINS_BIN:-} GC_SMI=$SMI_OK \
    GC_CARRIED="${CARRIED[*]}" GC_PLUGIN=${PLUGIN_STATE:-} timeout "$1" python3 - "$OUT/provenance.json" <<'PY'
import json, os, re, socket, subprocess, sys, time

def run(*cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=5)
        return (p.stdout + p.stderr).strip()
    except Exception as e:  # missing tool, timeout
        return "unavailable (%s)" % e.__class__.__name__

e = os.environ
smi = smi_cuda = None
if e["GC_SMI"] == "1":
    smi = run("nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,pci.bus_id",
              "--format=csv,noheader")
    smi_cuda = re.search(r"CUDA Version:\s*([0-9.]+)", run("nvidia-smi"))
nccl = {}
if e["GC_NCCL_HEADER"]:
    text = open(e["GC_NCCL_HEADER"]).read()
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"#define NCCL_%s +(\d+)" % part, text)
        nccl[part] = m.group(1) if m else "?"
libs = []
if e["GC_LINS"] and os.path.exists(e["GC_LINS"]):
    libs = [l.strip() for l in run("ldd", e["GC_LINS"]).splitlines()
            if re.search(r"nccl|cudart|cublas|cudnn|libmpi|openblas|libstdc|lins_gpu", l)]
prov = {
    "script": "scripts/gpu-check.sh",
    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "host": socket.gethostname(),
    "git_commit": e["GC_COMMIT"],
    "git_commit_full": e["GC_COMMIT_FULL"] or None,
    "git_tracked_changes": {"true": True, "false": False}.get(e["GC_DIRTY"]),
    "commit_source": e["GC_COMMIT_SOURCE"],
    "budget_s": int(e["GC_BUDGET"]),
    "carried_libraries": e["GC_CARRIED"].split(),
    "gpu_plugin": e["GC_PLUGIN"] or None,
    "gpu": smi.splitlines() if smi else [],
    "driver_cuda_version": smi_cuda.group(1) if smi_cuda else None,
    "nvcc": run(e["GC_NVCC"], "--version").splitlines()[-1:],
    "cuda_arch": "sm_" + e["GC_ARCH"],
    "nccl_header": e["GC_NCCL_HEADER"] or None,
    "nccl_header_version": ".".join(nccl[p] for p in ("MAJOR", "MINOR", "PATCH")) if nccl else None,
    "nccl_env": {k: v for k, v in e.items() if k.startswith("NCCL_")},
    "mpi_env": {k: v for k, v in e.items() if k.startswith(("OMPI_", "OPAL_", "PMIX_"))},
    "mpi": run("mpirun", "--version").splitlines()[:1],
    "cmake": run("cmake", "--version").splitlines()[:1],
    "ninja": run("ninja", "--version"),
    "cxx": run(e.get("CXX", "c++"), "--version").splitlines()[:1],
    "python": sys.version.split()[0],
    "kernel": " ".join(os.uname()[0:3:2]),
    "cpus": os.cpu_count(),
    "lins_libraries": libs,
}
json.dump(prov, open(sys.argv[1], "w"), indent=2)
PY
}
t=$(stage_left 30)
write_provenance $((t < 5 ? 5 : t)) || log "provenance.json: python3 failed or ran out of time (see above)"
log "commit $COMMIT (from $COMMIT_SOURCE, tracked changes: $DIRTY), nvcc $NVCC, arch sm_$ARCH, $(nproc) CPUs," \
  "budget ${TOTAL_S}s, NCCL header ${nccl_header:-none}"
stage_end ok

# === configure ======================================================================================================
BUILD_LOG="$OUT/build.log"
: >"$BUILD_LOG"
TEST_BIN=""     # the kernel test executable, for the sanitizer reruns
BENCH_BIN=""
LINS_BIN=""     # lins with the GPU backend, for the step run (needs CMake, MPI, OpenBLAS, CUDA and NCCL)
CMAKE_TESTS=0   # the gpu tests are CMake targets (GoogleTest found or carried)
CMAKE_BENCH=0   # bench_kernels_gpu is a CMake target (Google Benchmark found or carried)
have() { [ "${HAVE[$1]}" = 1 ] || [ "${HAVE[$1]}" = carried ]; }
onoff() { have "$1" && echo ON || echo OFF; }
# $1: tests ON/OFF, $2: benchmarks ON/OFF (set explicitly either way: the build folder caches them); $3: limit.
cmake_configure() {
  bounded "$3" cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    -DLINS_CUDA=ON -DLINS_TESTS="$1" -DLINS_BENCHMARKS="$2" "${DEPS_CMAKE_ARGS[@]}"
}
# Why CMake built no GPU path: its NCCL or CUDA lines (not found, too old, no compiler).
why_no_gpu_path() {
  grep -i -A3 "NCCL found\|NCCL not found\|NCCL [0-9.]* .*too old\|no CUDA compiler" "$1" | head -8 | tee -a "$SUMMARY"
}
if stage_begin configure; then
  outcome=skipped
  if [ "${GPU_CHECK_STANDALONE:-0}" = 1 ]; then
    log "GPU_CHECK_STANDALONE=1: no CMake; the kernel tests and the benchmark with nvcc alone, no lins"
  elif ! command -v cmake >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1; then
    fail "no cmake or ninja: no lins (the step stage cannot run); the kernel tests and the benchmark with nvcc alone"
  elif ! have mpi || ! have openblas || ! have formats; then
    fail "no MPI, OpenBLAS or nlohmann-json and toml++, on the machine or carried (mpi: ${HAVE[mpi]}, openblas:" \
      "${HAVE[openblas]}, formats: ${HAVE[formats]}): CMake cannot configure lins; the kernel tests and the" \
      "benchmark with nvcc alone"
  else
    tests=$(onoff gtest) bench=$(onoff benchmark)
    log "configure (CMake $(cmake --version | head -1 | awk '{print $3}'), sm_$ARCH, tests $tests, benchmarks $bench)"
    cfg_log=$(mktemp)
    cmake_configure "$tests" "$bench" "$(stage_left)" >"$cfg_log" 2>&1
    cfg_rc=$?
    if [ $cfg_rc != 0 ] && { [ "$tests" = ON ] || [ "$bench" = ON ]; } && [ "$(stage_left)" -ge 10 ]; then
      # A test library the probe found but CMake could not use: lins alone, the rest with nvcc.
      log "configure failed with tests $tests, benchmarks $bench (build.log): again without them"
      grep -m5 -i "error\|not found\|required" "$cfg_log" | tee -a "$SUMMARY"
      cat "$cfg_log" >>"$BUILD_LOG"
      tests=OFF bench=OFF
      cmake_configure OFF OFF "$(stage_left)" >"$cfg_log" 2>&1
      cfg_rc=$?
    fi
    cat "$cfg_log" >>"$BUILD_LOG"
    if [ $cfg_rc != 0 ]; then
      fail "CMake configure failed$(timed_out $cfg_rc && echo " (out of time)") (build.log): no lins"
      grep -m5 -i "error\|not found\|required" "$cfg_log" | tee -a "$SUMMARY"
      outcome=failed
    elif ! grep -q "lins: CUDA/NCCL path ON" "$cfg_log"; then
      # Without NCCL (or a CUDA compiler) CMake defines no GPU target, and lins has no GPU backend.
      fail "CMake built no CUDA/NCCL path (set NCCL_HOME or CUDACXX): no lins with the GPU backend"
      why_no_gpu_path "$cfg_log"
      outcome=failed
    else
      MODE=cmake
      CMAKE_TESTS=$([ "$tests" = ON ] && echo 1 || echo 0)
      CMAKE_BENCH=$([ "$bench" = ON ] && echo 1 || echo 0)
      grep -m1 "lins: NCCL " "$cfg_log" | tee -a "$SUMMARY"
      outcome=ok
    fi
    rm -f "$cfg_log"
  fi
  stage_end "$outcome"
fi

# === build ==========================================================================================================
# ninja within the stage; $1: what (for the log), $2: limit, then ninja's arguments.
build() {
  local what=$1 t=$2
  shift 2
  log "build $what (ninja -j$JOBS $*, limit ${t}s)"
  local s rc
  s=$(date +%s)
  bounded "$t" ninja -C "$BUILD_DIR" -j "$JOBS" "$@" >>"$BUILD_LOG" 2>&1
  rc=$?
  timed_out $rc && log "  ran out of time after ${t}s"
  log "  $what: rc=$rc in $(($(date +%s) - s))s"
  return $rc
}
# The kernel tests and the benchmark with nvcc alone (where CMake cannot build them): kernels + CPU oracles (system
# cblas.h if present, else the bundled triple-loop sgemm) + tests + bench; $1: tests (1/0), $2: bench (1/0).
standalone_build() {
  local SA="$BUILD_DIR/standalone" blas_inc blas_src blas_lib flags objs pids f o p ok=1 t
  mkdir -p "$SA"
  blas_inc="-I$ROOT/tests/gpu/kernels/standalone"
  blas_src="$ROOT/tests/gpu/kernels/standalone/cblas_reference.cpp"
  blas_lib=""
  if echo '#include <cblas.h>' | ${CXX:-c++} -E -x c++ - >/dev/null 2>&1 &&
    ${CXX:-c++} -lopenblas -x c++ - -o /dev/null <<<'int main(){}' >/dev/null 2>&1; then
    blas_inc=""
    blas_src=""
    blas_lib="-lopenblas"
  fi
  flags=(-std=c++17 -O3 -lineinfo --expt-relaxed-constexpr "-gencode=arch=compute_$ARCH,code=sm_$ARCH" -I"$ROOT"
    -I"$ROOT/src" -DLINS_GIT_COMMIT="\"$COMMIT\"")
  t=$(stage_left)
  log "standalone nvcc build into $SA (blas: ${blas_lib:-bundled reference sgemm}; limit ${t}s)"
  objs=()
  pids=()
  for f in kernels/cuda/*.cu; do
    o="$SA/$(basename "$f" .cu).o"
    objs+=("$o")
    bounded_bg "$t" "$NVCC" "${flags[@]}" -c "$f" -o "$o" >>"$BUILD_LOG" 2>&1
    pids+=("$BG_PID")
  done
  if [ "$1" = 1 ]; then
    for f in kernels/cpu/*.cpp $blas_src; do
      o="$SA/cpu_$(basename "$f" .cpp).o"
      objs+=("$o")
      # shellcheck disable=SC2086  # empty when a system BLAS is used
      bounded_bg "$t" ${CXX:-c++} -std=c++20 -O2 -I"$ROOT" -I"$ROOT/src" $blas_inc -c "$f" -o "$o" >>"$BUILD_LOG" 2>&1
      pids+=("$BG_PID")
    done
  fi
  for p in "${pids[@]}"; do wait "$p" || ok=0; done
  STAGE_PIDS=()
  [ $ok = 1 ] || return 1
  local kobjs=()
  for o in "${objs[@]}"; do case "$o" in */cpu_*) ;; *) kobjs+=("$o") ;; esac; done
  if [ "$1" = 1 ]; then
    # shellcheck disable=SC2086  # empty when the bundled sgemm is used
    bounded "$(stage_left)" "$NVCC" "${flags[@]}" -x cu -c tests/gpu/kernels/kernels_gpu_test.cpp \
      -o "$SA/kernels_gpu_test.o" >>"$BUILD_LOG" 2>&1 && bounded "$(stage_left)" "$NVCC" "${flags[@]}" \
      "$SA/kernels_gpu_test.o" "${objs[@]}" -o "$SA/kernels_gpu_test" -lcublas $blas_lib >>"$BUILD_LOG" 2>&1 &&
      TEST_BIN="$SA/kernels_gpu_test" || ok=0
  fi
  if [ "$2" = 1 ]; then
    bounded "$(stage_left)" "$NVCC" "${flags[@]}" src/bench/bench_kernels_gpu.cu "${kobjs[@]}" \
      -o "$SA/bench_kernels_gpu" -lcublas >>"$BUILD_LOG" 2>&1 && BENCH_BIN="$SA/bench_kernels_gpu" || ok=0
  fi
  [ $ok = 1 ]
}
if stage_begin build; then
  BUILD_OK=1
  if [ "$MODE" = cmake ]; then
    # lins and its GPU plugin first: the step needs them, and a test that does not compile must not cost them. The
    # plugin (target lins_gpu, liblins_gpu.so beside lins) is built where the tree defines it.
    first=(lins)
    has_plugin_target=0
    if ninja -C "$BUILD_DIR" -t targets all 2>/dev/null | grep -q '^lins_gpu:'; then
      first+=(lins_gpu)
      has_plugin_target=1
    fi
    # The later targets get at least a third of the stage.
    if build "${first[*]}" "$(($(stage_left) * 2 / 3))" "${first[@]}"; then
      LINS_BIN="$BUILD_DIR/lins"
    else
      fail "${first[*]} did not build (tail of build.log below): no step run"
      tail -20 "$BUILD_LOG" | tee -a "$SUMMARY"
      BUILD_OK=0
    fi
    if [ $has_plugin_target = 0 ]; then
      PLUGIN_STATE="no lins_gpu target (the GPU backend is linked into lins)"
    elif [ -f "$BUILD_DIR/liblins_gpu.so" ]; then # beside lins
      PLUGIN_STATE="liblins_gpu.so built ($(stat -c %s "$BUILD_DIR/liblins_gpu.so") bytes)"
    else
      PLUGIN_STATE="lins_gpu target, but no liblins_gpu.so beside lins in $BUILD_DIR"
      fail "the GPU plugin liblins_gpu.so was not built: lins --backend gpu cannot run"
    fi
    log "GPU plugin: $PLUGIN_STATE"
    checkpoint
    # Targets: every executable the gpu-labelled tests run, and the GPU benchmark. ctest names the tests, but leaves
    # out the command of a test whose executable is not built yet, so the commands come from the CTestTestfiles.
    targets=""
    if [ "$CMAKE_TESTS" = 1 ]; then
      targets=$(timeout 20 ctest --test-dir "$BUILD_DIR" -L gpu -N --show-only=json-v1 2>>"$BUILD_LOG" | python3 -c '
import glob, json, os, re, sys
build = os.path.realpath(sys.argv[1])
gpu = {t["name"] for t in json.load(sys.stdin).get("tests", [])}
names = set()
for f in glob.glob(os.path.join(build, "**", "CTestTestfile.cmake"), recursive=True):
    for m in re.finditer(r"add_test\((?:\[=\[(.*?)\]=\]|(\S+)) \"([^\"]+)\"", open(f).read()):
        exe = os.path.realpath(m.group(3))
        if (m.group(1) or m.group(2)) in gpu and exe.startswith(build + os.sep):
            names.add(os.path.basename(exe))
print(" ".join(sorted(names)))' "$BUILD_DIR" 2>>"$BUILD_LOG")
      if [ -z "$targets" ]; then
        # The known ones that this build defines (the cuDNN attention test exists only where cuDNN was found).
        defined=$(timeout 20 ninja -C "$BUILD_DIR" -t targets all 2>>"$BUILD_LOG" | sed 's/:.*//')
        for t in kernels_gpu_test attention_cudnn_test gpu_comm_test gpu_step_test; do
          grep -qx "$t" <<<"$defined" && targets+=" $t"
        done
        log "found no gpu-labelled test executables in the CTestTestfiles; building the known ones:$targets"
        { echo "the discovery read (first add_test lines):"; grep -rh -m1 "add_test" "$BUILD_DIR/tests/gpu" 2>&1 | head -3
          echo "ctest's list:"; timeout 20 ctest --test-dir "$BUILD_DIR" -L gpu -N --show-only=json-v1 2>&1 | head -c 400
          echo; } >>"$BUILD_LOG"
      fi
      TEST_BIN="$BUILD_DIR/tests/gpu/kernels/kernels_gpu_test"
    fi
    [ "$CMAKE_BENCH" = 1 ] && targets+=" bench_kernels_gpu" && BENCH_BIN="$BUILD_DIR/bench/bench_kernels_gpu"
    # -k 0: every target that compiles is built, whatever the others do.
    # shellcheck disable=SC2086  # one word per target
    if [ -n "$targets" ] && ! build "the gpu tests and benchmark" "$(stage_left)" -k 0 $targets; then
      fail "some gpu test targets or bench_kernels_gpu did not build (their tests fail as not run; build.log)"
      grep -E "^FAILED:|error:" "$BUILD_LOG" | head -20 | tee -a "$SUMMARY"
      BUILD_OK=0
    fi
  fi
  # What CMake does not build here, nvcc alone does.
  sa_tests=$([ "$MODE" = cmake ] && [ "$CMAKE_TESTS" = 1 ] && echo 0 || echo 1)
  sa_bench=$([ "$MODE" = cmake ] && [ "$CMAKE_BENCH" = 1 ] && echo 0 || echo 1)
  if [ "$sa_tests$sa_bench" != 00 ]; then
    if [ "$(stage_left)" -lt 10 ]; then
      fail "no time left in the build stage for the nvcc build of the kernel tests or the benchmark"
      BUILD_OK=0
    elif standalone_build "$sa_tests" "$sa_bench"; then
      [ "$MODE" = none ] && MODE=standalone
    else
      fail "the nvcc build of the kernel tests or the benchmark failed (tail of build.log below)"
      tail -30 "$BUILD_LOG" | tee -a "$SUMMARY"
      BUILD_OK=0
    fi
  fi
  log "build mode: $MODE${LINS_BIN:+, lins: $LINS_BIN}${TEST_BIN:+, kernel tests: $TEST_BIN}"
  [ -n "$LINS_BIN" ] && write_provenance 20 # again, with the libraries lins links and the plugin
  stage_end "$([ "$BUILD_OK" = 1 ] && echo ok || echo failed)"
else
  fail "no time for the build"
fi

# === tests (label gpu) ==============================================================================================
TESTS_LOG="$OUT/tests.log"
: >"$TESTS_LOG"
FAILED_CASES=() # kernel cases that failed, for the sanitizer
if stage_begin tests; then
  TEST_RC=1
  if [ "$MODE" = cmake ] && [ "$CMAKE_TESTS" = 1 ]; then
    t=$(stage_left)
    log "ctest -L gpu -j ${GPU_CHECK_CTEST_JOBS:-4} (limit ${t}s in all)"
    # Each test's own TIMEOUT (tests/gpu: 60 s a kernel case, 120 s the communicator and step tests) applies; -V keeps
    # every test's output (the step test's loss comparison too) in tests.log.
    bounded "$t" ctest --test-dir "$BUILD_DIR" -L gpu -V -j "${GPU_CHECK_CTEST_JOBS:-4}" >>"$TESTS_LOG" 2>&1
    TEST_RC=$?
    timed_out "$TEST_RC" && fail "ctest ran out of time after ${t}s: the tests not reached did not run"
    grep -E "^ *[0-9]+/[0-9]+ Test +#|tests passed|tests failed" "$TESTS_LOG" | tail -40 | tee -a "$SUMMARY"
    if grep -q "(Skipped)\|\*\*\*Skipped" "$TESTS_LOG"; then
      if [ "$GPU_PRESENT" = 1 ]; then
        fail "nvidia-smi lists a GPU but tests were skipped as if there were none (see tests.log)"
        TEST_RC=1
      elif [ "$TEST_RC" = 0 ] && ! grep -qE "Test +#[0-9]+: .* Passed" "$TESTS_LOG"; then
        NO_DEVICE=1
        log "every gpu test skipped, and nvidia-smi lists no GPU: no device here"
      fi
    fi
    # The kernel cases that ran and failed (wrong values, a timeout, a crash), from ctest's result lines: kept even
    # when ctest itself was cut short.
    failed_re='s/.*Test +#[0-9]+: gpu_kernels\.([A-Za-z0-9_]+) .*\*\*\*(Failed|Timeout|Exception).*/\1/p'
    read -ra FAILED_CASES <<<"$(sed -nE "$failed_re" "$TESTS_LOG" | tr '\n' ' ')"
    [ "$TEST_RC" = 0 ] || fail "gpu tests (tests.log)"
  elif [ -n "$TEST_BIN" ] && [ -x "$TEST_BIN" ]; then
    log "kernels_gpu_test, every case (the gpu label's kernel tests; the communicator and step tests need CMake" \
      "with GoogleTest)"
    TEST_RC=0
    skipped=0 ran=0
    for c in $(timeout 10 "$TEST_BIN" --list); do
      # 60 s a case, as the ctest TIMEOUT of a kernel case; the cases left once the stage is spent count as failed.
      ct=$(stage_left 60)
      if [ "$ct" -lt 10 ]; then
        log "  gpu_kernels.$c: not run (out of time)"
        TEST_RC=1
        continue
      fi
      echo "=== gpu_kernels.$c" >>"$TESTS_LOG"
      bounded "$ct" "$TEST_BIN" "$c" >>"$TESTS_LOG" 2>&1
      rc=$?
      ran=$((ran + 1))
      case $rc in
        0) verdict=passed ;;
        77) verdict=skipped skipped=$((skipped + 1)) ;;
        *) verdict="FAILED rc=$rc" ;;
      esac
      [ $rc = 77 ] && [ "$GPU_PRESENT" = 1 ] && verdict="FAILED: skipped, but nvidia-smi lists a GPU" && rc=1
      log "  gpu_kernels.$c: $verdict"
      if [ $rc != 0 ] && [ $rc != 77 ]; then
        TEST_RC=1
        FAILED_CASES+=("$c")
      fi
    done
    [ "$GPU_PRESENT" = 0 ] && [ "$ran" -gt 0 ] && [ "$skipped" = "$ran" ] && NO_DEVICE=1 &&
      log "every kernel case skipped, and nvidia-smi lists no GPU: no device here"
    [ "$TEST_RC" = 0 ] || fail "gpu kernel tests (tests.log)"
  else
    fail "no gpu tests were built"
  fi
  # A GPU whose driver or runtime does not work fails every test at its first CUDA call, with one message: shown once.
  DEVICE_BROKEN=0
  if grep -q "cudaGetDeviceCount failed" "$TESTS_LOG"; then
    DEVICE_BROKEN=1
    fail "the GPU does not work: $(grep -m1 "cudaGetDeviceCount failed" "$TESTS_LOG" | sed 's/^[0-9]*: //')"
  fi
  log "tests: rc=$TEST_RC"
  stage_end "$([ "$TEST_RC" = 0 ] && echo ok || echo failed)"
else
  fail "no time for the gpu tests"
fi

# === sanitizer reruns of the failed kernel cases ====================================================================
if [ "${#FAILED_CASES[@]}" -gt 0 ] && stage_begin sanitizer; then
  SANITIZER=""
  for s in "$CUDA_ROOT/bin/compute-sanitizer" "$CUDA_ROOT/compute-sanitizer/compute-sanitizer" \
    "$(command -v compute-sanitizer 2>/dev/null)"; do
    [ -n "$s" ] && [ -x "$s" ] && SANITIZER=$s && break
  done
  if [ "${DEVICE_BROKEN:-0}" = 1 ]; then
    log "failed kernel cases not rerun under compute-sanitizer: the device itself does not work (above)"
  elif [ -z "$SANITIZER" ] || [ ! -x "$TEST_BIN" ]; then
    log "failed kernel cases (${FAILED_CASES[*]}) not rerun under compute-sanitizer:" \
      "${SANITIZER:-no compute-sanitizer in $CUDA_ROOT or on PATH}${TEST_BIN:+, test binary $TEST_BIN}"
  else
    mkdir -p "$OUT/sanitizer"
    # The first SANITIZE_MAX_CASES (4) failed cases: when many fail, one cause is the likely story.
    cases=("${FAILED_CASES[@]:0:${SANITIZE_MAX_CASES:-4}}")
    log "compute-sanitizer (memcheck, then racecheck) on the failed kernel cases: ${cases[*]}" \
      "(of ${#FAILED_CASES[@]} failed), without the guard bytes (LINS_KERNEL_TEST_GUARDS=0): every access outside" \
      "a buffer is the sanitizer's to flag"
    skipped=()
    for c in "${cases[@]}"; do
      for tool in memcheck racecheck; do
        st=$(stage_left 30)
        if [ "$st" -lt 10 ]; then
          skipped+=("$c/$tool")
          continue
        fi
        slog="$OUT/sanitizer/$c.$tool.log"
        LINS_KERNEL_TEST_GUARDS=0 bounded "$st" "$SANITIZER" --tool "$tool" --error-exitcode 86 "$TEST_BIN" "$c" \
          >"$slog" 2>&1
        rc=$?
        # The tool's findings: its error lines (with the kernel and source line) and its summary.
        log "  $c $tool: rc=$rc$(timed_out $rc && echo " (ran out of time after ${st}s)")," \
          "$(grep -m1 "ERROR SUMMARY\|RACECHECK SUMMARY" "$slog" | sed 's/^=* *//')"
        grep -E "^=+ +(Invalid|Error|Race|Warning|Program hit|    at |Address|Saved host)" "$slog" | head -15 |
          tee -a "$SUMMARY"
      done
    done
    [ "${#skipped[@]}" -gt 0 ] && log "  not run (the stage's time is spent): ${skipped[*]}"
  fi
  stage_end ok
elif [ "${#FAILED_CASES[@]}" -eq 0 ]; then
  STAGE_REPORT+=("$(printf '%-10s %s' sanitizer "not needed (no kernel case failed)")")
fi

# === benchmarks =====================================================================================================
# The benchmark exits 77 when it finds no device: with no GPU listed by nvidia-smi either, the machine has none, and
# the step run is skipped (the build and the skipped tests are all this run checks).
if stage_begin bench; then
  BENCH_RC=1
  if [ -z "$BENCH_BIN" ] || [ ! -x "$BENCH_BIN" ]; then
    fail "no bench_kernels_gpu built"
  else
    t=$(stage_left)
    log "bench_kernels_gpu (limit ${t}s) ${BENCH_ARGS:-}"
    # shellcheck disable=SC2086
    bounded "$t" "$BENCH_BIN" --csv "$OUT/bench_kernels_gpu.csv" --json "$OUT/bench_kernels_gpu.json" \
      ${BENCH_ARGS:-} >"$OUT/bench_kernels_gpu.log" 2>&1
    BENCH_RC=$?
    cat "$OUT/bench_kernels_gpu.log" >>"$SUMMARY"
    if [ "$BENCH_RC" = 77 ] && [ "$GPU_PRESENT" = 0 ]; then
      NO_DEVICE=1
      log "bench_kernels_gpu found no CUDA device, and nvidia-smi lists none: no device here"
    elif [ "$BENCH_RC" != 0 ]; then
      fail "bench_kernels_gpu rc=$BENCH_RC$([ "$BENCH_RC" = 77 ] && echo ": it found no device") (bench_kernels_gpu.log)"
    fi
  fi
  log "benchmarks: rc=$BENCH_RC"
  stage_end "$([ "$BENCH_RC" = 0 ] || [ "$NO_DEVICE" = 1 ] && echo ok || echo failed)"
else
  fail "no time for the benchmarks"
fi

# === the training step on the GPU backend ===========================================================================
# One rank, llama-7b layer shapes cut to 2 layers, seq 4096, micro-batch 1, M 1; MFU against the H200's 989 TFLOP/s
# dense bf16 peak. --precision picks the storage of P and G (and so of every collective's payload), --compute the
# dtype of the activations. First bf16 storage+compute, the paper's configuration: bf16 P and G with fp32 master
# weights and Adam moments (16 bytes of states per parameter), bf16 activations and tensor-core kernels end to end,
# fp32 weight gradients; with --attention cudnn and then --attention flash where lins has the option. Then fp32
# storage+compute (20 bytes of states per parameter; fp32 tensors with bf16 tensor-core GEMMs and attention), whose
# losses must agree with the bf16 ones. Every run made counts; one skipped for time is a line, not a failure.
step_breakdown() { # $1: step.csv, $2: label
  timeout 20 python3 - "$1" "$2" <<'PY' 2>&1 | tee -a "$SUMMARY"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(r["strategy"], []).append(r)
cols = ["step_time_s", "forward_s", "backward_s", "optimizer_s", "exposed_comm_s", "mfu", "peak_mem_bytes",
        "model_mem_bytes"]
def num(x):
    try:
        return float(x)
    except ValueError:
        return float("nan")
print("breakdown, %s (means over timed steps): strategy " % sys.argv[2] + " ".join(cols) + " other_s")
for s, rs in by.items():
    m = {c: sum(num(r.get(c, "")) for r in rs) / len(rs) for c in cols}
    other = m["step_time_s"] - m["forward_s"] - m["backward_s"] - m["optimizer_s"] - m["exposed_comm_s"]
    print("  %-8s step %.4f s = forward %.4f + backward %.4f + optimizer %.4f + exposed comm %.4f + other %.4f; "
          "MFU %.1f%%; peak mem %.2f GiB (memory model %.2f GiB)" % (s, m["step_time_s"], m["forward_s"],
          m["backward_s"], m["optimizer_s"], m["exposed_comm_s"], other, 100 * m["mfu"],
          m["peak_mem_bytes"] / 2**30, m["model_mem_bytes"] / 2**30))
PY
}
STEP_CSVS=()
STEP_BACKEND=${GPU_CHECK_STEP_BACKEND:-gpu}
read -ra STEP_SHAPE <<<"${GPU_CHECK_STEP_SHAPE:---model llama-7b --layers 2 --seq 4096 --micro-batch 1 --micro-batches 1 --peak-tflops 989}"
# $1: label, $2: output folder, $3: limit, then extra lins step flags. Returns lins's status.
step_run() {
  local label=$1 dir=$2 t=$3 rc
  shift 3
  mkdir -p "$dir"
  log "lins step --backend $STEP_BACKEND $* ${STEP_SHAPE[*]} ($label), one rank (limit ${t}s)"
  # shellcheck disable=SC2086  # STEP_ARGS is a list of flags
  bounded "$t" "$LINS_BIN" step --backend "$STEP_BACKEND" "$@" "${STEP_SHAPE[@]}" --strategies ddp,zero3,lins \
    --warmup 1 --steps 3 --timeout $((t - 15)) --out "$dir" ${STEP_ARGS:-} >"$dir/log.txt" 2>&1
  rc=$?
  tail -25 "$dir/log.txt" >>"$SUMMARY"
  [ -s "$dir/step.csv" ] && step_breakdown "$dir/step.csv" "$label" && STEP_CSVS+=("$dir/step.csv")
  if timed_out $rc; then
    fail "lins step, $label: out of time after ${t}s ($dir/log.txt)"
  elif [ $rc != 0 ]; then
    fail "lins step, $label: rc=$rc ($dir/log.txt)"
  fi
  checkpoint
  return $rc
}
if [ "$NO_DEVICE" = 1 ] && [ "$STEP_BACKEND" = gpu ]; then
  log "step stage skipped: no CUDA device"
  STAGE_REPORT+=("$(printf '%-10s %s' step "skipped (no CUDA device)")")
elif [ -z "$LINS_BIN" ] || [ ! -x "$LINS_BIN" ]; then
  fail "no lins with the GPU backend was built: no step run"
  STAGE_REPORT+=("$(printf '%-10s %s' step "not run (no lins)")")
elif stage_begin step; then
  STEP_RC=0
  runs=()  # label|folder|flags
  # The help is read whole before it is searched: grep -q would close the pipe at its first match, lins would die of
  # SIGPIPE, and pipefail would make the search fail.
  step_help=$(bounded "$(stage_left 20)" "$LINS_BIN" step --help 2>&1)
  if grep -qE -- '--attention([^-a-z_]|$)' <<<"$step_help"; then
    runs+=("bf16 storage+compute, cuDNN attention|$OUT/step-bf16-cudnn|--precision bf16 --compute bf16 --attention cudnn")
    runs+=("bf16 storage+compute, flash attention|$OUT/step-bf16-flash|--precision bf16 --compute bf16 --attention flash")
  else
    log "lins step --help lists no --attention: the cudnn and flash runs are skipped (one bf16 run, lins's attention)"
    runs+=("bf16 storage+compute|$OUT/step-bf16|--precision bf16 --compute bf16")
  fi
  runs+=("fp32 storage+compute|$OUT/step-fp32|--precision fp32 --compute fp32")
  for i in "${!runs[@]}"; do
    IFS='|' read -r label dir flags <<<"${runs[i]}"
    # The first run may take the whole stage less 10 s for the verdict; a later one runs only with 30 s left.
    t=$(($(stage_left) - 10))
    if [ "$i" -gt 0 ] && [ "$t" -lt $((30 * TOTAL_S / 420)) ]; then
      log "step run $label skipped: ${t}s left in the stage"
      continue
    fi
    [ "$t" -lt 20 ] && t=20
    # shellcheck disable=SC2086  # the run's flags, one word each
    step_run "$label" "$dir" "$t" $flags || STEP_RC=1
  done
  if [ "${#STEP_CSVS[@]}" -eq 0 ]; then
    fail "the step stage wrote no step CSV"
    STEP_RC=1
  elif timeout 20 python3 scripts/gpu-check-verdict.py --expect-backend "$STEP_BACKEND" "${STEP_CSVS[@]}" \
    >"$OUT/step-verdict.txt" 2>&1; then
    sed "s|$OUT/||g" "$OUT/step-verdict.txt" | tee -a "$SUMMARY"
  else
    sed "s|$OUT/||g" "$OUT/step-verdict.txt" | tee -a "$SUMMARY"
    fail "the step CSVs fail the verdict (step-verdict.txt: $(grep -c '^FAIL' "$OUT/step-verdict.txt") checks)"
    STEP_RC=1
  fi
  stage_end "$([ "$STEP_RC" = 0 ] && echo ok || echo failed)"
else
  fail "no time for the step stage"
fi

# === two ranks on one GPU through NCCL (optional) ====================================================================
# NCCL refuses two ranks on one device of one host ("Duplicate GPU detected"), and lins refuses them first; with a
# distinct NCCL_HOSTID each rank is a host of its own to NCCL and to lins's placement (a node is a host split by
# NCCL_HOSTID), so both run on device 0 and meet over NCCL's socket transport on loopback. Reported, not fatal: it
# exercises the multi-rank NCCL path, which one GPU cannot run the usual way.
NCCL2_RC=skipped
if [ "$NO_DEVICE" = 1 ] || [ -z "$LINS_BIN" ] || [ ! -x "$LINS_BIN" ] || ! command -v mpirun >/dev/null 2>&1; then
  log "ncclpair: not run (no device, no lins or no mpirun)"
elif stage_begin ncclpair; then
  root_flag=$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)
  # shellcheck disable=SC2016,SC2086  # $OMPI_COMM_WORLD_RANK is expanded by each rank's shell
  bounded "$(stage_left)" mpirun -np 2 --oversubscribe $root_flag -x NCCL_IB_DISABLE=1 -x NCCL_P2P_DISABLE=1 \
    -x NCCL_SHM_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo -x NCCL_DEBUG=WARN bash -c \
    'NCCL_HOSTID=lins-check-rank-$OMPI_COMM_WORLD_RANK exec "$@"' nccl2 "$LINS_BIN" comm --backend nccl \
    -b 1K -e 16M -f 8 -n 5 -w 2 -o all --csv "$OUT/nccl2.csv" >"$OUT/nccl2.log" 2>&1
  NCCL2_RC=$?
  tail -15 "$OUT/nccl2.log" >>"$SUMMARY"
  if [ "$NCCL2_RC" = 0 ] && [ -s "$OUT/nccl2.csv" ] &&
    python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); sys.exit(0 if r and all(x["wrong_elems"]=="0" for x in r) else 1)' \
      "$OUT/nccl2.csv"; then
    log "ncclpair: two ranks on one GPU through NCCL: every op correct (nccl2.csv)"
    stage_end ok
  else
    log "ncclpair: rc=$NCCL2_RC or a wrong element (nccl2.log, nccl2.csv); reported, not counted in the verdict"
    stage_end "failed (not fatal)"
  fi
fi

# === the contention benchmark on NCCL (optional) ====================================================================
# Four ranks on the one GPU, each a host of its own to NCCL (as ncclpair), labelled 2 nodes of 2 so that every
# measurement runs: NCCL collectives on their streams beside cuBLAS GEMMs and a memory-bound kernel on the compute
# stream, timed with CUDA events. Reported, not fatal: it checks the GPU path of `lins comm --contention` end to end.
CONT_RC=skipped
if [ "$NO_DEVICE" = 1 ] || [ -z "$LINS_BIN" ] || [ ! -x "$LINS_BIN" ] || ! command -v mpirun >/dev/null 2>&1; then
  log "contention: not run (no device, no lins or no mpirun)"
elif stage_begin contention; then
  root_flag=$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)
  t=$(stage_left)
  # shellcheck disable=SC2016,SC2086  # $OMPI_COMM_WORLD_RANK is expanded by each rank's shell
  bounded "$t" mpirun -np 4 --oversubscribe $root_flag -x NCCL_IB_DISABLE=1 -x NCCL_P2P_DISABLE=1 \
    -x NCCL_SHM_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo -x NCCL_DEBUG=WARN bash -c \
    'NCCL_HOSTID=lins-check-rank-$OMPI_COMM_WORLD_RANK exec "$@"' contention "$LINS_BIN" comm --backend nccl \
    --gpus-per-node 2 --contention "$OUT/contention.toml" --repeats 3 --compute-seconds 0.05 --timeout $((t - 5)) \
    >"$OUT/contention.log" 2>&1
  CONT_RC=$?
  tail -40 "$OUT/contention.log" >>"$SUMMARY"
  if [ "$CONT_RC" = 0 ] && [ -s "$OUT/contention.toml" ] &&
    python3 -c 'import sys, tomllib; tomllib.load(open(sys.argv[1], "rb"))["contention"]' "$OUT/contention.toml"; then
    log "contention: lins comm --contention on NCCL wrote contention.toml"
    stage_end ok
  else
    log "contention: rc=$CONT_RC or no readable contention.toml (contention.log); reported, not counted in the verdict"
    stage_end "failed (not fatal)"
  fi
  checkpoint
fi

# === finish =========================================================================================================
finish
