#!/usr/bin/env bash
# The GPU checks in one go, for a machine with a CUDA device, within a time budget (GPU_CHECK_BUDGET_S, 520 s by
# default: give the command that runs this script at least 40 s more). Stages, each bounded so that the later ones
# keep their time (configure, builds, tests and the bf16 step get at least 60-120 s each even past the budget; the
# sanitizer, benchmark and fp32 step runs are skipped when their time is gone), and each run whatever the earlier
# ones gave:
#   setup      carried packages (.deps/, scripts/gpu-deps.sh), NCCL's environment for one rank, provenance.json and
#              nvidia-smi.txt (GPU, driver, CUDA, NCCL, MPI, compiler versions)
#   configure  CMake for sm_$CUDA_ARCH (at most 120 s)
#   build      lins first (at most 240 s), then the gpu tests and the GPU benchmark with ninja -k 0 (at most 240 s),
#              so that a test that does not compile loses neither lins nor the other tests
#   tests      ctest -L gpu (each test's own timeout: 60 s a kernel case, 120 s the communicator and step tests);
#              on a machine where nvidia-smi lists a GPU, a skipped test counts as failed
#   sanitizer  the failed kernel cases (the first 4) again under compute-sanitizer memcheck, then racecheck
#              (60 s a run, 150 s in all), so that one run names the faulting kernel
#   bench      bench_kernels_gpu (at most 120 s)
#   step       one rank of `lins step --backend gpu --precision bf16 --compute bf16` (bf16 storage+compute: bf16 P and
#              G, bf16 activations and tensor-core kernels end to end, the paper's configuration) on llama-7b layer
#              shapes cut to 2 layers, with STEP_RESERVE_S (120) kept for it from the start; then, when at least
#              STEP_FP32_MIN_S (75) seconds are left, the same with --precision fp32 --compute fp32 (the earlier path),
#              for comparison only
# Where CMake cannot configure (no MPI, GoogleTest, Google Benchmark or OpenBLAS and no .deps/), the kernels, their
# tests and benchmarks are built with nvcc alone, and lins alone with CMake when only the test libraries are missing.
# The exit status is 0 only when the build, every test, the benchmarks and the bf16 step passed, 77 when the build
# passed on a machine with no CUDA device (nothing else can run), 1 otherwise; the failures are listed at the end of
# summary.txt.
#
#   scripts/gpu-check.sh OUTDIR [ARCHIVE]
# OUTDIR gets: summary.txt (every stage's verdict and timing, test and benchmark summaries, the step runs' logs and
# breakdowns), provenance.json, nvidia-smi.txt, build.log, tests.log, sanitizer/ (when a kernel case failed),
# bench_kernels_gpu.{csv,json,log}, step/ and step-fp32/ (step.csv, step.provenance.json). ARCHIVE, when given, is a
# .tar.gz of OUTDIR, rewritten after every stage (a run cut short keeps what was done), for a caller that can take
# back only a few files.
# Environment: CUDA_ARCH (90), BUILD_DIR (build-gpu), JOBS (nproc), GPU_CHECK_BUDGET_S (520), BENCH_ARGS (extra
# bench_kernels_gpu flags, e.g. --quick), GPU_CHECK_STANDALONE=1 (skip CMake, build with nvcc directly),
# SANITIZE_MAX_CASES (4: the failed kernel cases rerun under compute-sanitizer),
# STEP_RESERVE_S (120), STEP_FP32_MIN_S (75), STEP_ARGS (extra lins step flags, both runs), NCCL_IB_DISABLE (1),
# NCCL_SOCKET_IFNAME (lo), NCCL_DEBUG (WARN).
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
TOTAL_S=${GPU_CHECK_BUDGET_S:-520}
STEP_RESERVE_S=${STEP_RESERVE_S:-120}
ARCH=${CUDA_ARCH:-90}
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILURES=()

elapsed() { echo $(($(date +%s) - START)); }
# Whether exit status $1 is timeout's: 124 after its TERM, 137 after the KILL that follows 10 s later (-k 10) when a
# process ignores TERM (a CUDA call stuck in the driver can). timeout signals the command's whole process group, so a
# test binary under ctest, or MPI's daemon, goes too.
timed_out() { [ "$1" = 124 ] || [ "$1" = 137 ]; }
log() { echo "[gpu-check +$(elapsed)s] $*" | tee -a "$SUMMARY"; }
fail() {
  FAILURES+=("$1")
  log "FAIL: $1"
}
# Seconds an optional stage (sanitizer, benchmarks, fp32 step) may take: at most $1 (its cap), and no more than leaves
# $2 seconds of the budget for the stages after it; 0 (skip the stage) when that is under $3 (its minimum).
stage_budget() {
  local t=$((TOTAL_S - $(elapsed) - $2))
  [ "$t" -gt "$1" ] && t=$1
  [ "$t" -lt "$3" ] && t=0
  echo "$t"
}
# The same for a stage the later ones cannot do without (configure, build, tests, bf16 step): never under $3 (its
# floor), even past the budget. Never 0, which `timeout` would read as no limit.
essential_budget() {
  local t=$((TOTAL_S - $(elapsed) - $2))
  [ "$t" -gt "$1" ] && t=$1
  [ "$t" -lt "$3" ] && t=$3
  echo "$t"
}
# The archive of OUTDIR, rewritten whole (written aside, then renamed).
checkpoint() {
  [ -n "$ARCHIVE" ] || return 0
  tar -czf "$ARCHIVE.part" -C "$(dirname "$OUT")" "$(basename "$OUT")" 2>/dev/null && mv -f "$ARCHIVE.part" "$ARCHIVE"
}
trap checkpoint EXIT

# --- setup: toolchain -------------------------------------------------------------------------------------------------
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
  exit 1
fi
export CUDACXX=$NVCC
CUDA_ROOT=$(dirname "$(dirname "$NVCC")")

# --- setup: libraries the machine lacks -------------------------------------------------------------------------------
# OpenMPI, OpenBLAS, GoogleTest and Google Benchmark, carried as packages in .deps/debs/ (scripts/gpu-deps.sh fetch)
# where the machine has no working MPI compiler wrapper; NCCL from the CUDA Python wheels (nvidia-nccl-cu*) where
# neither NCCL_HOME is set nor the toolkit or the system holds it.
DEPS_CMAKE_ARGS=()
if ! mpicc --version >/dev/null 2>&1 && ls .deps/debs/*.deb >/dev/null 2>&1; then
  # shellcheck source=scripts/gpu-deps.sh
  if . scripts/gpu-deps.sh use >>"$SUMMARY" 2>&1; then
    read -ra DEPS_CMAKE_ARGS <<<"$LINS_DEPS_CMAKE_ARGS"
    log "using the carried packages in .deps/ (OpenMPI, OpenBLAS, GoogleTest, Google Benchmark)"
    # Every carried program and library must find what it links to here, or MPI programs fail at start.
    lins_gpu_deps_check >>"$SUMMARY" 2>&1 || log "some carried libraries cannot load here (listed above)"
  else
    log "the carried packages in .deps/debs/ could not be unpacked (see above)"
  fi
fi
if [ -z "${NCCL_HOME:-}" ] && ! ls "$CUDA_ROOT"/lib*/libnccl.so* "$CUDA_ROOT"/targets/*/lib/libnccl.so* \
  /usr/lib/x86_64-linux-gnu/libnccl.so* >/dev/null 2>&1; then
  nccl_dir=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
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

# --- setup: the GPU, and provenance -----------------------------------------------------------------------------------
# nvidia-smi can hang on a broken driver: every call is bounded. A GPU it lists must be used: a test that skips on such
# a machine (exit 77, "no device") hides a broken driver or runtime, so skipped tests count as failures here.
GPU_PRESENT=0
{
  echo "# nvidia-smi"
  timeout -k 5 30 nvidia-smi 2>&1 || echo "(nvidia-smi failed or is missing: exit $?)"
  echo
  echo "# nvidia-smi -q"
  timeout -k 5 30 nvidia-smi -q 2>&1 || echo "(exit $?)"
} >"$OUT/nvidia-smi.txt"
if timeout -k 5 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  GPU_PRESENT=1
  timeout -k 5 30 nvidia-smi -L 2>&1 | tee -a "$SUMMARY"
else
  log "nvidia-smi lists no GPU (missing, or no device): GPU tests may skip"
fi
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git status --porcelain 2>/dev/null | grep -qv '^??' && echo true || echo false)
nccl_header=""
for d in "${NCCL_HOME:+$NCCL_HOME/include}" "$CUDA_ROOT/include" /usr/include /usr/local/include; do
  [ -n "$d" ] && [ -f "$d/nccl.h" ] && nccl_header="$d/nccl.h" && break
done
# The versions as the tools report them; lins step adds the ones the binaries see at run time (NCCL, CUDA runtime and
# driver, device) to its own step.provenance.json.
write_provenance() {
  GC_COMMIT=$COMMIT GC_DIRTY=$DIRTY GC_ARCH=$ARCH GC_BUDGET=$TOTAL_S GC_NVCC=$NVCC GC_NCCL_HEADER=$nccl_header \
    GC_LINS=${LINS_BIN:-} python3 - "$OUT/provenance.json" <<'PY'
import json, os, re, socket, subprocess, sys, time

def run(*cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (p.stdout + p.stderr).strip()
    except Exception as e:  # missing tool, timeout
        return "unavailable (%s)" % e.__class__.__name__

e = os.environ
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
            if re.search(r"nccl|cudart|cublas|libmpi|openblas|libstdc", l)]
prov = {
    "script": "scripts/gpu-check.sh",
    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "host": socket.gethostname(),
    "git_commit": e["GC_COMMIT"],
    "git_tracked_changes": e["GC_DIRTY"] == "true",
    "budget_s": int(e["GC_BUDGET"]),
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
write_provenance || log "provenance.json: python3 failed (see above)"
log "commit $COMMIT, nvcc $NVCC, arch sm_$ARCH, $(nproc) CPUs, budget ${TOTAL_S}s, NCCL header ${nccl_header:-none}"
checkpoint

# --- configure and build: the CMake project, else the standalone nvcc build -------------------------------------------
BUILD_LOG="$OUT/build.log"
: >"$BUILD_LOG"
MODE=none         # cmake (configured with the CUDA/NCCL path) or standalone (nvcc alone)
TEST_BIN=""       # the kernel test executable, for the sanitizer reruns
BENCH_BIN=""
LINS_BIN=""       # lins with the GPU backend, for the step run (needs CMake, MPI, OpenBLAS, CUDA and NCCL)
LINS_ALONE=0      # the full configure failed: try lins alone (tests and benchmarks off) after the standalone build
BUILD_OK=1
# $1: ON or OFF, the tests and benchmarks (set explicitly either way: the build folder caches them); $2: timeout.
cmake_configure() {
  timeout -k 10 "$2" cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    -DLINS_CUDA=ON -DLINS_TESTS="$1" -DLINS_BENCHMARKS="$1" "${DEPS_CMAKE_ARGS[@]}"
}
# Why CMake built no GPU path: its NCCL or CUDA lines (not found, too old, no compiler).
why_no_gpu_path() {
  grep -i -A3 "NCCL found\|NCCL not found\|NCCL [0-9.]* .*too old\|no CUDA compiler" "$1" | head -8 | tee -a "$SUMMARY"
}
# ninja with a timeout; $1: what (for the log), $2: timeout, then ninja's arguments.
build() {
  local what=$1 t=$2
  shift 2
  log "build $what (ninja -j$JOBS $*, timeout ${t}s)"
  local s=$(($(date +%s)))
  timeout -k 10 "$t" ninja -C "$BUILD_DIR" -j "$JOBS" "$@" >>"$BUILD_LOG" 2>&1
  local rc=$?
  timed_out $rc && log "  ran out of time after ${t}s"
  log "  $what: rc=$rc in $(($(date +%s) - s))s"
  return $rc
}
if [ "${GPU_CHECK_STANDALONE:-0}" != 1 ] && command -v cmake >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1; then
  t=$(essential_budget 120 $((STEP_RESERVE_S + 150 + 60)) 60)
  log "configure (CMake $(cmake --version | head -1 | awk '{print $3}'), sm_$ARCH, timeout ${t}s)"
  if cmake_configure ON "$t" >>"$BUILD_LOG" 2>&1; then
    if ! grep -q "lins: CUDA/NCCL path ON" "$BUILD_LOG"; then
      # Without NCCL (or a CUDA compiler) CMake defines no GPU target, and lins has no GPU backend.
      log "CMake built no CUDA/NCCL path (set NCCL_HOME or CUDACXX): standalone build"
      why_no_gpu_path "$BUILD_LOG"
    else
      MODE=cmake
      grep -m1 "lins: NCCL " "$BUILD_LOG" | tee -a "$SUMMARY"
      # Targets: every executable the gpu-labelled tests run, and the GPU benchmark. ctest names the tests, but leaves
      # out the command of a test whose executable is not built yet, so the commands come from the CTestTestfiles.
      targets=$(ctest --test-dir "$BUILD_DIR" -L gpu -N --show-only=json-v1 2>>"$BUILD_LOG" | python3 -c '
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
        targets="kernels_gpu_test gpu_comm_test gpu_step_test"
        log "found no gpu-labelled test executables in the CTestTestfiles; building the known ones: $targets"
      fi
      # lins first: the step run needs it, and a test that does not compile must not cost it. Then the rest with
      # -k 0: every target that compiles is built, whatever the others do.
      if build lins "$(essential_budget 240 $((STEP_RESERVE_S + 150)) 120)" lins; then
        LINS_BIN="$BUILD_DIR/lins"
      else
        fail "lins did not build (tail of build.log below): no step run"
        tail -20 "$BUILD_LOG" | tee -a "$SUMMARY"
        BUILD_OK=0
      fi
      checkpoint
      # shellcheck disable=SC2086  # one word per target
      if ! build "the gpu tests and bench_kernels_gpu" "$(essential_budget 240 $((STEP_RESERVE_S + 120)) 60)" -k 0 \
        $targets bench_kernels_gpu; then
        fail "some gpu test targets or bench_kernels_gpu did not build (their tests fail as not run; build.log)"
        grep -E "^FAILED:|error:" "$BUILD_LOG" | head -20 | tee -a "$SUMMARY"
        BUILD_OK=0
      fi
      TEST_BIN="$BUILD_DIR/tests/gpu/kernels/kernels_gpu_test"
      BENCH_BIN="$BUILD_DIR/bench/bench_kernels_gpu"
    fi
  else
    log "CMake configure failed or ran out of time (missing MPI, GoogleTest, Google Benchmark or OpenBLAS?" \
      "scripts/gpu-deps.sh carries them); standalone build"
    grep -m5 -i "error\|not found\|required" "$BUILD_LOG" | tee -a "$SUMMARY"
    LINS_ALONE=1
  fi
fi
if [ "$MODE" != cmake ]; then
  # Standalone: kernels + CPU oracles (system cblas.h if present, else the bundled triple-loop sgemm) + tests + bench.
  SA="$BUILD_DIR/standalone"
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
  t=$(essential_budget 300 $((STEP_RESERVE_S + 150)) 120)
  log "standalone nvcc build into $SA (blas: ${blas_lib:-bundled reference sgemm}; timeout ${t}s a step)"
  objs=()
  pids=()
  for f in kernels/cuda/*.cu; do
    o="$SA/$(basename "$f" .cu).o"
    objs+=("$o")
    timeout -k 10 "$t" "$NVCC" "${flags[@]}" -c "$f" -o "$o" >>"$BUILD_LOG" 2>&1 &
    pids+=($!)
  done
  for f in kernels/cpu/*.cpp $blas_src; do
    o="$SA/cpu_$(basename "$f" .cpp).o"
    objs+=("$o")
    # shellcheck disable=SC2086  # empty when a system BLAS is used
    timeout -k 10 "$t" ${CXX:-c++} -std=c++20 -O2 -I"$ROOT" -I"$ROOT/src" $blas_inc -c "$f" -o "$o" \
      >>"$BUILD_LOG" 2>&1 &
    pids+=($!)
  done
  ok=1
  for p in "${pids[@]}"; do wait "$p" || ok=0; done
  if [ $ok = 1 ]; then
    # shellcheck disable=SC2086  # empty when the bundled sgemm is used
    timeout -k 10 "$t" "$NVCC" "${flags[@]}" -x cu -c tests/gpu/kernels/kernels_gpu_test.cpp \
      -o "$SA/kernels_gpu_test.o" >>"$BUILD_LOG" 2>&1 && timeout -k 10 "$t" "$NVCC" "${flags[@]}" \
      "$SA/kernels_gpu_test.o" "${objs[@]}" -o "$SA/kernels_gpu_test" -lcublas $blas_lib >>"$BUILD_LOG" 2>&1 || ok=0
    kobjs=()
    for o in "${objs[@]}"; do case "$o" in */cpu_*) ;; *) kobjs+=("$o") ;; esac; done
    timeout -k 10 "$t" "$NVCC" "${flags[@]}" src/bench/bench_kernels_gpu.cu "${kobjs[@]}" \
      -o "$SA/bench_kernels_gpu" -lcublas >>"$BUILD_LOG" 2>&1 || ok=0
  else
    ok=0
  fi
  if [ $ok = 1 ]; then
    MODE=standalone
    TEST_BIN="$SA/kernels_gpu_test"
    BENCH_BIN="$SA/bench_kernels_gpu"
  else
    fail "standalone build failed (tail of build.log below)"
    tail -30 "$BUILD_LOG" | tee -a "$SUMMARY"
  fi
  BUILD_OK=$ok
fi
# The step run needs only lins (MPI, OpenBLAS, CUDA and NCCL): where the full configure failed for the tests' or the
# benchmarks' libraries, configure again without them and build lins alone, after the kernel tests' build.
if [ "$LINS_ALONE" = 1 ]; then
  t=$(essential_budget 120 $((STEP_RESERVE_S + 150 + 60)) 60)
  log "configure (CMake, sm_$ARCH) without tests and benchmarks, for lins alone (timeout ${t}s)"
  cfg_log=$(mktemp)
  cmake_configure OFF "$t" >"$cfg_log" 2>&1
  cfg_rc=$?
  cat "$cfg_log" >>"$BUILD_LOG"
  if [ "$cfg_rc" = 0 ]; then
    if ! grep -q "lins: CUDA/NCCL path ON" "$cfg_log"; then
      log "CMake built no CUDA/NCCL path (set NCCL_HOME or CUDACXX): lins would have no GPU backend"
      why_no_gpu_path "$cfg_log"
    elif build "lins alone" "$(essential_budget 240 $((STEP_RESERVE_S + 150)) 120)" lins; then
      LINS_BIN="$BUILD_DIR/lins"
    else
      log "lins alone did not build or ran out of time (tail of build.log below)"
      tail -10 "$BUILD_LOG" | tee -a "$SUMMARY"
    fi
  else
    log "CMake configure failed without tests and benchmarks too (MPI or OpenBLAS missing?): no step run"
    grep -m5 -i "error\|not found\|required" "$cfg_log" | tee -a "$SUMMARY"
  fi
  rm -f "$cfg_log"
fi
[ "$MODE" = none ] && fail "nothing GPU-related was built"
[ -z "$LINS_BIN" ] && [ "$MODE" != none ] && fail "no lins with the GPU backend: no step run"
log "build mode: $MODE${LINS_BIN:+, lins: $LINS_BIN}"
[ -n "$LINS_BIN" ] && write_provenance  # again, with the libraries lins links
checkpoint

# --- tests (label gpu) ------------------------------------------------------------------------------------------------
TESTS_LOG="$OUT/tests.log"
: >"$TESTS_LOG"
TEST_RC=1
FAILED_CASES=()  # kernel cases that failed, for the sanitizer
t=$(essential_budget 360 $((STEP_RESERVE_S + 30)) 60)
if [ "$MODE" = cmake ]; then
  log "ctest -L gpu (timeout ${t}s in all)"
  # Each test's own TIMEOUT (tests/gpu: 60 s a kernel case, 120 s the communicator and step tests) applies; -V keeps
  # every test's output (the step test's loss comparison too) in tests.log.
  timeout -k 10 "$t" ctest --test-dir "$BUILD_DIR" -L gpu -V -j 1 >>"$TESTS_LOG" 2>&1
  TEST_RC=$?
  timed_out "$TEST_RC" && fail "ctest ran out of time after ${t}s: the tests not reached did not run"
  grep -E "^ *[0-9]+/[0-9]+ Test +#|tests passed|tests failed" "$TESTS_LOG" | tail -40 | tee -a "$SUMMARY"
  if [ "$GPU_PRESENT" = 1 ] && grep -q "(Skipped)\|\*\*\*Skipped" "$TESTS_LOG"; then
    fail "nvidia-smi lists a GPU but tests were skipped as if there were none (see tests.log)"
    TEST_RC=1
  fi
  # The kernel cases that ran and failed (wrong values, a timeout, a crash), from ctest's result lines: kept even when
  # ctest itself was cut short.
  failed_re='s/.*Test +#[0-9]+: gpu_kernels\.([A-Za-z0-9_]+) .*\*\*\*(Failed|Timeout|Exception).*/\1/p'
  read -ra FAILED_CASES <<<"$(sed -nE "$failed_re" "$TESTS_LOG" | tr '\n' ' ')"
  [ "$TEST_RC" = 0 ] || fail "gpu tests (tests.log)"
elif [ "$MODE" = standalone ]; then
  log "kernels_gpu_test, every case (the gpu label's kernel tests; other areas need the CMake build)"
  TEST_RC=0
  for c in $("$TEST_BIN" --list); do
    # Within the budget, as ctest is above: the cases left once it is spent count as failed.
    ct=$(stage_budget 60 $((STEP_RESERVE_S + 30)) 10)  # 60 s, as the ctest TIMEOUT of a kernel case
    if [ "$ct" = 0 ]; then
      log "  gpu_kernels.$c: not run (out of time)"
      TEST_RC=1
      continue
    fi
    echo "=== gpu_kernels.$c" >>"$TESTS_LOG"
    timeout -k 10 "$ct" "$TEST_BIN" "$c" >>"$TESTS_LOG" 2>&1
    rc=$?
    case $rc in
      0) verdict=passed ;;
      77) verdict=skipped ;;
      *) verdict="FAILED rc=$rc" ;;
    esac
    [ $rc = 77 ] && [ "$GPU_PRESENT" = 1 ] && verdict="FAILED: skipped, but nvidia-smi lists a GPU" && rc=1
    log "  gpu_kernels.$c: $verdict"
    if [ $rc != 0 ] && [ $rc != 77 ]; then
      TEST_RC=1
      FAILED_CASES+=("$c")
    fi
  done
  [ "$TEST_RC" = 0 ] || fail "gpu kernel tests (tests.log)"
fi
# A GPU whose driver or runtime does not work fails every test at its first CUDA call, with one message: shown once.
DEVICE_BROKEN=0
if grep -q "cudaGetDeviceCount failed" "$TESTS_LOG"; then
  DEVICE_BROKEN=1
  fail "the GPU does not work: $(grep -m1 "cudaGetDeviceCount failed" "$TESTS_LOG" | sed 's/^[0-9]*: //')"
fi
log "tests: rc=$TEST_RC"
checkpoint

# --- sanitizer reruns of the failed kernel cases ----------------------------------------------------------------------
SANITIZER=""
for s in "$CUDA_ROOT/bin/compute-sanitizer" "$CUDA_ROOT/compute-sanitizer/compute-sanitizer" \
  "$(command -v compute-sanitizer 2>/dev/null)"; do
  [ -n "$s" ] && [ -x "$s" ] && SANITIZER=$s && break
done
if [ "${#FAILED_CASES[@]}" -gt 0 ]; then
  if [ "$DEVICE_BROKEN" = 1 ]; then
    log "failed kernel cases not rerun under compute-sanitizer: the device itself does not work (above)"
  elif [ -z "$SANITIZER" ] || [ ! -x "$TEST_BIN" ]; then
    log "failed kernel cases (${FAILED_CASES[*]}) not rerun under compute-sanitizer:" \
      "${SANITIZER:-no compute-sanitizer in $CUDA_ROOT or on PATH}${TEST_BIN:+, test binary $TEST_BIN}"
  else
    mkdir -p "$OUT/sanitizer"
    stage_end=$(($(elapsed) + $(stage_budget 150 "$STEP_RESERVE_S" 20)))
    # The first SANITIZE_MAX_CASES (4) failed cases: when many fail, one cause is the likely story.
    cases=("${FAILED_CASES[@]:0:${SANITIZE_MAX_CASES:-4}}")
    log "compute-sanitizer (memcheck, then racecheck) on the failed kernel cases: ${cases[*]}" \
      "(of ${#FAILED_CASES[@]} failed)"
    skipped=()
    for c in "${cases[@]}"; do
      for tool in memcheck racecheck; do
        st=$((stage_end - $(elapsed)))
        [ "$st" -gt 60 ] && st=60
        if [ "$st" -lt 15 ]; then
          skipped+=("$c/$tool")
          continue
        fi
        slog="$OUT/sanitizer/$c.$tool.log"
        timeout -k 10 "$st" "$SANITIZER" --tool "$tool" --error-exitcode 86 "$TEST_BIN" "$c" >"$slog" 2>&1
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
fi
checkpoint

# --- benchmarks -------------------------------------------------------------------------------------------------------
# The benchmark exits 77 when it finds no device: with no GPU listed by nvidia-smi either, the machine has none, and
# the step run is skipped (the build and the skipped tests are all this run checks).
BENCH_RC=1
NO_DEVICE=0
t=$(stage_budget 120 "$STEP_RESERVE_S" 30)
if [ -z "$BENCH_BIN" ] || [ ! -x "$BENCH_BIN" ]; then
  fail "no bench_kernels_gpu built"
elif [ "$t" = 0 ]; then
  fail "no time left for the benchmarks"
else
  log "bench_kernels_gpu (timeout ${t}s) ${BENCH_ARGS:-}"
  # shellcheck disable=SC2086
  timeout -k 10 "$t" "$BENCH_BIN" --csv "$OUT/bench_kernels_gpu.csv" --json "$OUT/bench_kernels_gpu.json" \
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
checkpoint

# --- the training step on the GPU backend (last) ----------------------------------------------------------------------
# One rank, llama-7b layer shapes cut to 2 layers, seq 4096, micro-batch 1, M 1; MFU against the H200's 989 TFLOP/s
# dense bf16 peak. --precision picks the storage of P and G (and so of every collective's payload), --compute the
# dtype of the activations. The run that counts is bf16 storage+compute, the paper's configuration: bf16 P and G with
# fp32 master weights and Adam moments (16 bytes of states per parameter), bf16 activations and tensor-core kernels end
# to end, fp32 weight gradients. fp32 storage+compute, the earlier path (20 bytes of states per parameter; fp32 tensors
# with bf16 tensor-core GEMMs and attention), runs afterwards for comparison only, when the budget still allows it
# (its result is logged, not part of the verdict).
step_breakdown() {  # $1: step.csv, $2: label
  python3 - "$1" "$2" <<'PY' 2>&1 | tee -a "$SUMMARY"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(r["strategy"], []).append(r)
cols = ["step_time_s", "forward_s", "backward_s", "optimizer_s", "exposed_comm_s", "mfu", "peak_mem_bytes",
        "model_mem_bytes"]
print("breakdown, %s (means over timed steps): strategy " % sys.argv[2] + " ".join(cols) + " other_s")
for s, rs in by.items():
    m = {c: sum(float(r[c]) for r in rs) / len(rs) for c in cols}
    other = m["step_time_s"] - m["forward_s"] - m["backward_s"] - m["optimizer_s"] - m["exposed_comm_s"]
    print("  %-8s step %.4f s = forward %.4f + backward %.4f + optimizer %.4f + exposed comm %.4f + other %.4f; "
          "MFU %.1f%%; peak mem %.2f GiB (memory model %.2f GiB)" % (s, m["step_time_s"], m["forward_s"],
          m["backward_s"], m["optimizer_s"], m["exposed_comm_s"], other, 100 * m["mfu"],
          m["peak_mem_bytes"] / 2**30, m["model_mem_bytes"] / 2**30))
PY
}
# $1: precision (storage of P and G), $2: compute dtype, $3: output folder, $4: timeout in seconds.
step_run() {
  mkdir -p "$3"
  # shellcheck disable=SC2086  # STEP_ARGS is a list of flags
  timeout -k 10 "$4" "$LINS_BIN" step --backend gpu --precision "$1" --compute "$2" --model llama-7b --layers 2 \
    --seq 4096 --micro-batch 1 --micro-batches 1 --strategies ddp,zero3,lins --warmup 1 --steps 3 --peak-tflops 989 \
    --timeout $(($4 - 10)) --out "$3" ${STEP_ARGS:-} >>"$SUMMARY" 2>&1
}
STEP_RC=1
STEP_FP32_RC=skipped
if [ "$NO_DEVICE" = 1 ]; then
  STEP_RC=skipped
  log "step run skipped: no CUDA device"
elif [ -n "$LINS_BIN" ] && [ -x "$LINS_BIN" ]; then
  t=$(essential_budget 100000 0 60)
  log "lins step --backend gpu --precision bf16 --compute bf16 (bf16 storage+compute), llama-7b shapes x 2 layers," \
    "one rank (timeout ${t}s)"
  step_run bf16 bf16 "$OUT/step" "$t"
  STEP_RC=$?
  [ -s "$OUT/step/step.csv" ] && step_breakdown "$OUT/step/step.csv" "bf16 storage+compute"
  if timed_out "$STEP_RC"; then
    fail "lins step, bf16 storage+compute: out of time after ${t}s (log above)"
  elif [ "$STEP_RC" != 0 ]; then
    fail "lins step, bf16 storage+compute: rc=$STEP_RC (log above)"
  fi
  checkpoint
  t=$(stage_budget 100000 0 "${STEP_FP32_MIN_S:-75}")
  if [ "$t" != 0 ]; then
    log "lins step --backend gpu --precision fp32 --compute fp32 (fp32 storage+compute (the earlier path)," \
      "comparison only; timeout ${t}s)"
    step_run fp32 fp32 "$OUT/step-fp32" "$t"
    STEP_FP32_RC=$?
    [ -s "$OUT/step-fp32/step.csv" ] &&
      step_breakdown "$OUT/step-fp32/step.csv" "fp32 storage+compute (the earlier path)"
  else
    log "fp32 comparison step skipped: $((TOTAL_S - $(elapsed)))s left (< ${STEP_FP32_MIN_S:-75}s)"
  fi
fi
log "step: rc=$STEP_RC (bf16 storage+compute); fp32 storage+compute comparison (the earlier path): rc=$STEP_FP32_RC"

# --- verdict ----------------------------------------------------------------------------------------------------------
log "done in $(elapsed)s of ${TOTAL_S}s: build=$MODE build_ok=$BUILD_OK tests_rc=$TEST_RC bench_rc=$BENCH_RC" \
  "step_rc=$STEP_RC"
if [ "${#FAILURES[@]}" -eq 0 ] && [ "$NO_DEVICE" = 1 ]; then
  log "RESULT: NO DEVICE: the GPU code built; its tests skipped and the benchmarks and the step need a device (exit 77)"
  exit 77
elif [ "${#FAILURES[@]}" -eq 0 ]; then
  log "RESULT: PASS"
  exit 0
fi
log "RESULT: FAIL (${#FAILURES[@]}):"
for f in "${FAILURES[@]}"; do log "  - $f"; done
exit 1
