#!/usr/bin/env python3
"""The GPU checks in one go, on a machine with a CUDA device, within a time budget, with a verdict that means something.

  scripts/gpu-carry.sh DIR              here, first: DIR gets the project without .git (tracked and untracked files
                                        git does not ignore), COMMIT (the commit, and whether it was dirty) and .deps/
                                        (the carried packages of scripts/gpu-deps.sh, and the cuDNN frontend headers
                                        when present); it fails when the whole is 64 MiB or more
  cd DIR && scripts/gpu_check.py OUTDIR [ARCHIVE]
                                        on the GPU machine (Python 3.9 or newer, standard library only;
                                        scripts/gpu-check.sh runs this too)

Time. GPU_CHECK_BUDGET_S (420 s by default) is the whole run: give the command that runs this program at least 60 s
more (480 s). The stages, each with its cap and its floor in seconds (both scaled by GPU_CHECK_BUDGET_S / 420):

  stage      cap  floor
  setup       45     45  toolchain, nvidia-smi, which libraries the machine has (cmake/probe) and the carried
                         packages for the others, NCCL's one-rank environment, provenance.json, nvidia-smi.txt
  configure   60     30  CMake for sm_$CUDA_ARCH (tests and benchmarks on where GoogleTest and Google Benchmark
                         are found or carried)
  build      150     90  lins and the GPU plugin lins_gpu (liblins_gpu.so, when the tree defines the target) first,
                         then the gpu tests and bench_kernels_gpu with ninja -k 0; the kernel tests and the
                         benchmark built with nvcc alone where CMake cannot build them (the cuDNN attention as stubs)
  tests      150     60  ctest -L gpu (GPU_CHECK_CTEST_JOBS, 4, at a time; each test's own timeout too); on a
                         machine where nvidia-smi lists a GPU a skipped test counts as failed
  sanitizer   40      0  the failed kernel cases (the first SANITIZE_MAX_CASES, 4) again under compute-sanitizer
                         memcheck, then racecheck, without the tests' guard bytes; skipped under 20 s
  bench       40      0  bench_kernels_gpu; skipped under 20 s
  step       150     75  one rank of `lins step --backend gpu --precision bf16 --compute bf16` on llama-7b layer
                         shapes cut to 2 layers (with --attention cudnn, then --attention flash, where `lins step
                         --help` lists --attention and the backend is gpu), then the same with fp32 storage+compute
                         when 30 s of the stage are left; then scripts/gpu-check-verdict.py on every step CSV written
  ncclpair    30      0  optional: two ranks on the one GPU through NCCL (each rank its own NCCL_HOSTID, so NCCL
                         takes them for two hosts and joins them over its socket transport on loopback): `lins comm
                         --backend nccl` checked for every op; skipped under 20 s; a failure is reported, not fatal
  contention  40      0  optional: `lins comm --backend nccl --contention contention.toml` at four ranks on the one
                         GPU (each its own NCCL_HOSTID, labelled 2 nodes of 2), small; the file and the log go to
                         OUTDIR; skipped under 20 s; a failure is reported, not fatal (one GPU shared by four ranks
                         exercises the path, its values describe no real fabric)
  torch       60      0  optional: scripts/gpu-torch-compare.py OUTDIR/torch (PyTorch's SDPA and eager step on the
                         same device) where `import torch; assert torch.cuda.is_available()` succeeds; skipped
                         without a device and under 20 s; a failure is reported, not fatal
  finish      10     10  the verdict, summary.txt and the archive

Each stage may take min(its cap, the budget left less the floors of the stages after it) (stage_limit below): the
floors sum to 310 of the 420 s, so every stage keeps its floor whatever the ones before it took, and no stage can end
past the budget (worst case: setup 45, configure 60, build 150, tests 80, no sanitizer or benchmarks, step 75,
finish 10 = 420). A stage without a floor is skipped when less than 20 s (scaled) are left for it; an optional stage
is one whose failure is reported and not counted in the verdict.
Measured on 2 cores without a GPU: the build of every target the check needs, from nothing, 173 s (180 s of compile
jobs), so well under the build floor on the GPU machine's 16 (an estimate: not yet measured there).
Every command runs in a process group of its own with a time limit inside its stage's: TERM to the whole group 5 s
before the limit, KILL to it at the limit. A TERM or INT stops the running stage at once (its commands' groups get
TERM, then KILL 5 s later) and writes the verdict (FAIL, naming the stage), summary.txt and the archive; a watchdog
thread sends that TERM when the budget is spent, and writes the last lines and the archive itself, and ends the
program, if it has not ended 25 s later.

The verdict: exit 0 only when the build, every gpu test, the benchmarks and the step stage passed; 77 when the build
passed on a machine with no CUDA device (nothing else can run there); 1 otherwise, the failures listed at the end of
summary.txt. The step stage passes only when every run it made exited 0 and gpu-check-verdict.py accepts every row:
loss finite, > 0 and < ln(vocab) + 1; 0 < MFU < 0.85; forward, backward and optimizer times > 0; the strategies'
losses, and the runs' (bf16 against fp32, cudnn against flash), within tolerances derived in that script.

Libraries. For each of MPI, OpenBLAS, GoogleTest, Google Benchmark, nlohmann-json and toml++ ("formats") and the cuDNN
frontend headers the machine's own copy is used when CMake finds it (cmake/probe); for each one it lacks, the carried
copy (.deps/debs/ through `. scripts/gpu-deps.sh use LIB...`, whose exported environment this program takes over,
and .deps/cudnn-frontend/include) when there is one. summary.txt says which were carried. NCCL comes from the CUDA
installation, else from the CUDA Python wheel (nvidia-nccl-cu*).

Provenance. The commit comes from the COMMIT file scripts/gpu-carry.sh writes, when the tree has one: a copied tree
can carry a stale .git of its own, and COMMIT names what was copied. Without it, from git where the tree is a
checkout (its own, not a parent folder's).

OUTDIR gets: summary.txt (every stage's verdict, limit and time, the tests' and benchmarks' summaries, the step
verdict), provenance.json, nvidia-smi.txt, probe.log, build.log, tests.log, sanitizer/ (when a kernel case failed),
bench_kernels_gpu.{csv,json,log}, step-*/ (step.csv, step.provenance.json, log.txt), step-verdict.txt,
nccl2.{csv,log}, contention.{toml,log}, torch.log and torch/. ARCHIVE, when given, is a .tar.gz of OUTDIR, rewritten
after every stage (written aside, then renamed: a run cut short keeps what was done).
Environment: CUDA_ARCH (90), BUILD_DIR (build-gpu), JOBS (nproc), GPU_CHECK_BUDGET_S (420), GPU_CHECK_CTEST_JOBS (4),
BENCH_ARGS (extra bench_kernels_gpu flags, e.g. --quick), GPU_CHECK_STANDALONE=1 (skip CMake, build the kernel tests
and the benchmark with nvcc alone), GPU_CHECK_CARRY (libraries to take from .deps/ even where the machine has its
own: any of mpi openblas gtest benchmark formats cudnn-frontend, or all), GPU_CHECK_CUDNN_FE_VAR (the CMake variable
that names the cuDNN frontend's include folder: LINS_CUDNN_FRONTEND_DIR), SANITIZE_MAX_CASES (4), STEP_ARGS (extra
lins step flags, every run; lins refuses a flag given twice, so these add to the ones below, they do not replace
them), GPU_CHECK_STEP_SHAPE (the model and shape flags of every step run: --model llama-7b --layers 2 --seq 4096
--micro-batch 1 --micro-batches 1 --peak-tflops 989), GPU_CHECK_STEP_BACKEND (gpu; cpu runs the step stage and its
verdict on the CPU backend even without a device: a dry run of the stage, for a machine with no GPU, with a small
GPU_CHECK_STEP_SHAPE and a --peak-tflops near the CPU's), GPU_CHECK_WATCHDOG_S (the budget: when the watchdog stops
the run; set shorter only to see the watchdog act), NCCL_IB_DISABLE (1), NCCL_SOCKET_IFNAME (lo), NCCL_DEBUG (WARN).
GPU_CHECK_BUDGET_S must be at least 60 (the stages scaled below that leave setup no time).

A failed stage is recorded and the next one runs (the point of the program); every stage's status is checked
explicitly.
"""
import csv
import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

REFERENCE_BUDGET_S = 420  # the budget the stage table's caps and floors are written for
OPTIONAL_MIN_S = 20       # a stage without a floor is skipped with less than this (scaled)
KILL_GRACE_S = 5          # a command's group gets TERM this long before its limit, KILL at it
WATCHDOG_GRACE_S = 25     # after its TERM, the watchdog waits this long before it ends the program itself
MIN_BUDGET_S = 60         # GPU_CHECK_BUDGET_S at least
TIMED_OUT = (124, 137)    # a command's status when its limit ended it: after TERM, or after the KILL that followed
NOT_FOUND = 127           # a command that could not be started (as a shell reports it)
KNOWN_TEST_TARGETS = ["kernels_gpu_test", "attention_cudnn_test", "quantize_gpu_test", "gpu_comm_test", "gpu_step_test"]

LIBRARIES = ["mpi", "openblas", "gtest", "benchmark", "formats"]  # the carried packages of scripts/gpu-deps.sh
DEFAULT_STEP_SHAPE = "--model llama-7b --layers 2 --seq 4096 --micro-batch 1 --micro-batches 1 --peak-tflops 989"
# Variables that bash sets for itself, not taken over from `. scripts/gpu-deps.sh use`.
SHELL_OWN_VARIABLES = {"_", "SHLVL", "PWD", "OLDPWD"}


def gpu_test_executables(testfile_texts: List[str], gpu_tests: Set[str], build: str) -> List[str]:
    """The executables (file names) that the tests named in gpu_tests run, read from the text of CTestTestfile.cmake
    files: those under the build folder `build` (a real path). CMake 3 writes a test's name as [=[name]=], CMake 4 as
    "name" (seen on the H200 machine with CMake 4.4, where reading only the first form found nothing)."""
    names = set()
    for text in testfile_texts:
        for m in re.finditer(r'add_test\((?:\[=\[(.*?)\]=\]|"([^"]*)"|(\S+)) "([^"]+)"', text):
            exe = os.path.realpath(m.group(4))
            if (m.group(1) or m.group(2) or m.group(3)) in gpu_tests and exe.startswith(build + os.sep):
                names.add(os.path.basename(exe))
    return sorted(names)


# --- the stages and their time ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    name: str
    cap_s: int    # at the reference budget of 420 s
    floor_s: int  # the same; 0: skipped when little time is left
    optional: bool = False  # a failure is reported, not counted in the verdict
    run: Optional[Callable[["GpuCheck"], str]] = None     # the work; returns the outcome ("ok", "failed", ...)
    ready: Optional[Callable[["GpuCheck"], bool]] = None  # False: the stage does not apply (it says why)
    no_time: Optional[str] = None  # the failure recorded when the stage is skipped for time, if that is one


def scaled(seconds: int, budget_s: int) -> int:
    """A cap or floor of the stage table at budget_s (integer seconds, rounded down)."""
    return seconds * budget_s // REFERENCE_BUDGET_S


def optional_min_s(budget_s: int) -> int:
    return scaled(OPTIONAL_MIN_S, budget_s)


def later_floors_s(stages: Sequence[Stage], index: int, budget_s: int) -> int:
    return sum(scaled(s.floor_s, budget_s) for s in stages[index + 1:])


def stage_time_s(stages: Sequence[Stage], index: int, elapsed_s: float, budget_s: int) -> float:
    """min(the stage's cap, the budget left less the floors of the stages after it); may be 0 or less."""
    left = budget_s - elapsed_s - later_floors_s(stages, index, budget_s)
    return min(scaled(stages[index].cap_s, budget_s), left)


def stage_limit(stages: Sequence[Stage], index: int, elapsed_s: float, budget_s: int) -> Optional[float]:
    """The seconds stage `index` may take when it starts elapsed_s into the run, or None when it is skipped: with
    less than 1 s, or, for a stage without a floor, with less than OPTIONAL_MIN_S (scaled). A stage with a floor runs
    with whatever is left, even under its floor (only a stage before it that overran its own limit can cause that)."""
    t = stage_time_s(stages, index, elapsed_s, budget_s)
    if t < 1:
        return None
    if stages[index].floor_s == 0 and t < optional_min_s(budget_s):
        return None
    return t


# --- running commands -------------------------------------------------------------------------------------------

class Stopped(BaseException):
    """Raised by the TERM and INT handler in the main thread: the running stage stops. A BaseException, so that the
    stages' own `except Exception` clauses let it through."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


class EndRun(Exception):
    """Raised by a stage after which nothing else can run (no nvcc): its outcome, then the verdict."""

    def __init__(self, outcome: str):
        super().__init__(outcome)
        self.outcome = outcome


def shell_status(returncode: int) -> int:
    """Popen's status as a shell reports it: a process killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def signal_group(popen: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(popen.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Job:
    def __init__(self, popen: subprocess.Popen, limit_s: float):
        self.popen = popen
        self.term_at = time.monotonic() + max(1.0, limit_s - KILL_GRACE_S)


class Commands:
    """The commands a stage runs, each the leader of a process group of its own (start_new_session), so that a limit
    or a stop reaches everything it started: a test binary under ctest, MPI's daemons."""

    def __init__(self):
        self.jobs: List[Job] = []

    def start(self, argv: Sequence[str], limit_s: float, stdout, stderr=subprocess.STDOUT,
              stdin=subprocess.DEVNULL, env: Optional[Dict[str, str]] = None) -> Optional[Job]:
        """Starts argv; None when it cannot be started (the reason is written to stdout when that is a file)."""
        try:
            popen = subprocess.Popen(list(argv), stdout=stdout, stderr=stderr, stdin=stdin, env=env,
                                     start_new_session=True)
        except OSError as e:
            if hasattr(stdout, "fileno"):
                os.write(stdout.fileno(), ("gpu_check: cannot run %s: %s\n" % (argv[0], e.strerror or e)).encode())
            return None
        job = Job(popen, limit_s)
        self.jobs.append(job)
        return job

    def wait(self, job: Optional[Job]) -> int:
        """The job's status; at its limit TERM to its group, KILL to the group 5 s later: 124 when the command ended
        after the TERM, 137 when it needed the KILL."""
        if job is None:
            return NOT_FOUND
        try:
            try:
                return shell_status(job.popen.wait(timeout=max(0.0, job.term_at - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
            signal_group(job.popen, signal.SIGTERM)
            try:
                job.popen.wait(timeout=KILL_GRACE_S)
                status = 124
            except subprocess.TimeoutExpired:
                status = 137
            signal_group(job.popen, signal.SIGKILL)  # what is left of the group
            try:
                job.popen.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass  # stuck in the kernel: nothing more can be done
            return status
        finally:
            if job.popen.returncode is not None and job in self.jobs:
                self.jobs.remove(job)

    def stop_all(self) -> None:
        """TERM to every running command's group, KILL to them KILL_GRACE_S later."""
        jobs = list(self.jobs)
        for job in jobs:
            signal_group(job.popen, signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE_S
        for job in jobs:
            try:
                job.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for job in jobs:
            signal_group(job.popen, signal.SIGKILL)
            try:
                job.popen.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        self.jobs.clear()

    def kill_all(self) -> None:
        """KILL to every running command's group, at once (the watchdog's last resort)."""
        for job in list(self.jobs):
            signal_group(job.popen, signal.SIGKILL)


def read_text(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def grep(pattern: str, text: str, flags: int = 0) -> List[str]:
    rx = re.compile(pattern, flags)
    return [line for line in text.splitlines() if rx.search(line)]


def grep_context(pattern: str, text: str, after: int, flags: int = 0) -> List[str]:
    """The lines that match and `after` lines after each, groups apart marked "--" (grep -A)."""
    rx = re.compile(pattern, flags)
    lines = text.splitlines()
    keep = set()
    for i, line in enumerate(lines):
        if rx.search(line):
            keep.update(range(i, min(len(lines), i + after + 1)))
    out, last = [], None
    for i in sorted(keep):
        if last is not None and i != last + 1:
            out.append("--")
        out.append(lines[i])
        last = i
    return out


def nonempty(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def executable(path: str) -> bool:
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def number(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


# --- the check ----------------------------------------------------------------------------------------------------

class GpuCheck:
    def __init__(self, out: str, archive: str, root: str, stages: Sequence[Stage], budget_s: int,
                 watchdog_s: float):
        env = os.environ
        self.out = out
        self.archive = archive
        self.root = root
        self.stages = stages
        self.budget_s = budget_s
        self.watchdog_s = watchdog_s
        self.start = time.monotonic()
        self.arch = env.get("CUDA_ARCH", "90")
        self.build_dir = env.get("BUILD_DIR", "build-gpu")
        self.build_jobs = env.get("JOBS") or str(cpu_count())
        self.summary = os.path.join(out, "summary.txt")
        self.build_log = os.path.join(out, "build.log")
        self.tests_log = os.path.join(out, "tests.log")
        self.standalone = env.get("GPU_CHECK_STANDALONE", "0") == "1"
        self.step_backend = env.get("GPU_CHECK_STEP_BACKEND", "gpu")
        self.step_shape = shlex.split(env.get("GPU_CHECK_STEP_SHAPE") or DEFAULT_STEP_SHAPE)
        self.commands = Commands()
        self.output_lock = threading.RLock()
        self.archive_lock = threading.Lock()
        # The running stage.
        self.stage_name = "none"
        self.stage_running = False
        self.stage_start = self.start
        self.stage_end_at = self.start  # when the running stage must be done
        self.stage_report: List[str] = []  # one line per stage: limit, time used, outcome
        self.finishing = False
        self.finished = threading.Event()
        # What the stages found.
        self.failures: List[str] = []
        self.mode = "none"
        self.build_ok = 0
        self.test_rc = "skipped"
        self.bench_rc = "skipped"
        self.step_rc = "skipped"
        self.no_device = False
        self.gpu_present = False
        self.smi_ok = True
        self.device_broken = False
        self.nvcc = ""
        self.cuda_root = ""
        self.carried: List[str] = []
        self.plugin_state = ""
        self.have = {name: "0" for name in LIBRARIES + ["cudnn_frontend", "cudnn"]}
        self.where: Dict[str, str] = {}
        self.deps_cmake_args: List[str] = []
        self.commit, self.commit_full, self.dirty, self.commit_source = "unknown", "", "unknown", "none"
        self.nccl_header = ""
        self.cmake_tests = False  # the gpu tests are CMake targets (GoogleTest found or carried)
        self.cmake_bench = False  # bench_kernels_gpu is a CMake target (Google Benchmark found or carried)
        self.test_bin = ""    # the kernel test executable, for the sanitizer reruns
        self.bench_bin = ""
        self.lins_bin = ""    # lins with the GPU backend, for the step run
        self.failed_cases: List[str] = []  # kernel cases that failed, for the sanitizer
        self.step_csvs: List[str] = []

    # --- output ---

    def elapsed(self) -> int:
        return int(time.monotonic() - self.start)

    def append(self, path: str, text: str) -> None:
        if text and not text.endswith("\n"):
            text += "\n"
        with open(path, "a") as f:
            f.write(text)

    def note(self, text: str) -> None:
        """To summary.txt only (a command's output)."""
        with self.output_lock:
            self.append(self.summary, text)

    def show(self, text: str) -> None:
        """To the console and summary.txt."""
        if not text:
            return
        with self.output_lock:
            self.append(self.summary, text)
            try:
                print(text, flush=True)
            except OSError:  # a console gone: summary.txt has it
                pass

    def log(self, text: str) -> None:
        self.show("[gpu-check +%ds] %s" % (self.elapsed(), text))

    def fail(self, what: str) -> None:
        self.failures.append(what)
        self.log("FAIL: " + what)

    def checkpoint(self) -> None:
        """The archive of OUTDIR, rewritten whole: written aside, then renamed."""
        if not self.archive or not self.archive_lock.acquire(timeout=10):
            return
        try:
            part = self.archive + ".part"
            skip = {os.path.abspath(self.archive), os.path.abspath(part)}
            with tarfile.open(part, "w:gz") as tar:
                tar.add(self.out, arcname=os.path.basename(self.out),
                        filter=lambda info: None if os.path.join(os.path.dirname(self.out), info.name) in skip
                        else info)
            os.replace(part, self.archive)
        except (OSError, tarfile.TarError):
            pass
        finally:
            self.archive_lock.release()

    # --- commands ---

    def stage_left(self, at_most: Optional[int] = None) -> int:
        """Whole seconds left in the running stage, at most at_most when given."""
        t = int(round(self.stage_end_at - time.monotonic()))
        if at_most is not None:
            t = min(t, at_most)
        return max(t, 0)

    def run(self, argv: Sequence[str], limit_s: float, log_path: Optional[str] = None, append: bool = True,
            input_text: Optional[str] = None) -> int:
        """Runs argv for at most limit_s, its output (stdout and stderr) to log_path (appended, or written anew) or
        nowhere; returns its status (124, 137: out of time; 127: could not be started)."""
        stdin = subprocess.DEVNULL
        if input_text is not None:
            stdin = tempfile.TemporaryFile()
            stdin.write(input_text.encode())
            stdin.seek(0)
        try:
            if log_path is None:
                with open(os.devnull, "w") as sink:
                    return self.commands.wait(self.commands.start(argv, limit_s, sink, stdin=stdin))
            with open(log_path, "a" if append else "w") as f:
                return self.commands.wait(self.commands.start(argv, limit_s, f, stdin=stdin))
        finally:
            if input_text is not None:
                stdin.close()

    def capture(self, argv: Sequence[str], limit_s: float, with_stderr: bool = True,
                stderr_path: Optional[str] = None) -> Tuple[int, str]:
        """Runs argv as run() does; returns its status and its output (stdout, and stderr when with_stderr; else
        stderr goes to stderr_path, or nowhere)."""
        with tempfile.TemporaryFile(mode="w+", errors="replace") as f:
            if with_stderr:
                rc = self.commands.wait(self.commands.start(argv, limit_s, f))
            else:
                with open(stderr_path or os.devnull, "a") as err:
                    rc = self.commands.wait(self.commands.start(argv, limit_s, f, stderr=err))
            f.seek(0)
            return rc, f.read()

    # --- the runner ---

    def begin(self, index: int) -> bool:
        """Starts stage `index`: its limit (stage_limit) is kept in stage_end_at and logged. False, with the stage
        recorded as skipped, when stage_limit skips it."""
        stage = self.stages[index]
        elapsed = self.elapsed()
        limit = stage_limit(self.stages, index, elapsed, self.budget_s)
        t = int(stage_time_s(self.stages, index, elapsed, self.budget_s))
        later = later_floors_s(self.stages, index, self.budget_s)
        self.stage_name = stage.name
        self.stage_start = time.monotonic()
        self.stage_end_at = self.stage_start + max(t, 0)
        if limit is None:
            needs = scaled(stage.floor_s, self.budget_s) or optional_min_s(self.budget_s)
            self.log("== %s: skipped, %ds left for it (needs %ds; the later stages keep %ds)"
                     % (stage.name, t, needs, later))
            self.stage_report.append("%-10s limit %4ss  used %4ss  skipped (no time)" % (stage.name, t, 0))
            return False
        self.stage_running = True
        self.log("== %s (limit %ds: cap %ds, %ds kept for the stages after it)"
                 % (stage.name, t, scaled(stage.cap_s, self.budget_s), later))
        return True

    def end(self, outcome: str) -> None:
        """Ends the running stage with its outcome (ok, failed, ...)."""
        self.stage_running = False
        used = int(time.monotonic() - self.stage_start)
        limit = int(round(self.stage_end_at - self.stage_start))
        self.stage_report.append("%-10s limit %4ss  used %4ss  %s" % (self.stage_name, limit, used, outcome))
        self.log("== %s: %s in %ds" % (self.stage_name, outcome, used))
        self.checkpoint()

    def run_stages(self) -> None:
        for index, stage in enumerate(self.stages):
            if stage.run is None:
                continue  # finish: the verdict, written by finish()
            if stage.ready is not None and not stage.ready(self):
                continue
            if not self.begin(index):
                if stage.no_time:
                    self.fail(stage.no_time)
                continue
            try:
                outcome = stage.run(self)
            except EndRun as e:
                self.end(e.outcome)
                return
            except Exception as e:  # a fault of this program: recorded, and the next stage runs
                self.note(traceback.format_exc())
                error = "%s: %s" % (type(e).__name__, e)
                outcome = "failed (%s%s)" % ("not fatal; " if stage.optional else "", error)
                if not stage.optional:
                    self.fail("the %s stage stopped on an error: %s" % (stage.name, error))
            if stage.optional and outcome == "failed":
                outcome = "failed (not fatal)"
            self.end(outcome)

    def stopped(self, signal_name: str) -> None:
        """After a TERM or INT: the running stage's commands stopped, the stage recorded as stopped."""
        self.log("%s received during the %s stage: stopping it" % (signal_name, self.stage_name))
        self.commands.stop_all()
        if self.stage_running:
            self.stage_running = False
            self.stage_report.append("%-10s limit %4ss  used %4ss  stopped by %s" % (
                self.stage_name, int(round(self.stage_end_at - self.stage_start)),
                int(time.monotonic() - self.stage_start), signal_name))
        self.fail("stopped by %s during the %s stage at +%ds (the stages after it did not run)"
                  % (signal_name, self.stage_name, self.elapsed()))

    def on_signal(self, signum, frame) -> None:
        if self.finishing:
            return
        self.finishing = True  # one stop; later signals are ignored
        raise Stopped(signal.Signals(signum).name)

    def watchdog(self) -> None:
        """At watchdog_s, TERM to this process (its handler stops the stage and writes the verdict); if the program
        has not ended WATCHDOG_GRACE_S later (stuck where no signal handler runs), the last lines and the archive from
        here, every command's group killed, and the end."""
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # for the main thread to handle
        if self.finished.wait(max(0.0, self.watchdog_s - (time.monotonic() - self.start))) or self.finishing:
            return
        self.log("watchdog: the budget (%gs) is spent: stopping the script" % self.watchdog_s)
        os.kill(os.getpid(), signal.SIGTERM)
        if self.finished.wait(WATCHDOG_GRACE_S):
            return
        self.log("watchdog: the script did not stop within %ds (in the %s stage): ending it"
                 % (WATCHDOG_GRACE_S, self.stage_name))
        self.commands.kill_all()
        self.log("RESULT: FAIL: out of time in the %s stage; the watchdog ended the script at +%ds"
                 % (self.stage_name, self.elapsed()))
        self.checkpoint()
        os._exit(1)

    def main(self) -> int:
        for f in (self.summary, self.build_log, self.tests_log):
            open(f, "w").close()
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        threading.Thread(target=self.watchdog, name="watchdog", daemon=True).start()
        try:
            self.run_stages()
            self.finishing = True  # from here on a signal is ignored: the verdict is being written
        except Stopped as s:
            self.stopped(s.signal_name)
        return self.finish()

    def finish(self) -> int:
        """The stage table and the verdict: 0 pass, 77 no device, 1 fail."""
        self.finishing = True
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.finished.set()
        self.log("stages (budget %ds):" % self.budget_s)
        for line in self.stage_report:
            self.log("  " + line)
        self.log("done in %ds of %ds: build=%s build_ok=%s tests=%s bench=%s step=%s carried=[%s] plugin=%s" % (
            self.elapsed(), self.budget_s, self.mode, self.build_ok, self.test_rc, self.bench_rc, self.step_rc,
            " ".join(self.carried) or "none", self.plugin_state or "unknown"))
        if not self.failures and self.no_device:
            self.log("RESULT: NO DEVICE: the GPU code built; its tests skipped and the benchmarks and the step need a"
                     " device (exit 77)")
            rc = 77
        elif not self.failures:
            self.log("RESULT: PASS")
            rc = 0
        else:
            self.log("RESULT: FAIL (%d):" % len(self.failures))
            for f in self.failures:
                self.log("  - " + f)
            rc = 1
        self.checkpoint()
        return rc

    # === setup ======================================================================================================

    def setup(self) -> str:
        env = os.environ
        nvcc = env.get("CUDACXX", "")
        if not nvcc:
            nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if executable("/usr/local/cuda/bin/nvcc")
                                            else "")
        if not nvcc:
            self.fail("no nvcc found (set CUDACXX)")
            raise EndRun("failed")
        self.nvcc = nvcc
        env["CUDACXX"] = nvcc
        self.cuda_root = os.path.dirname(os.path.dirname(nvcc))
        self.probe_gpu()
        self.find_libraries()
        self.find_nccl()
        self.read_commit()
        for d in ([os.path.join(env["NCCL_HOME"], "include")] if env.get("NCCL_HOME") else []) + [
                os.path.join(self.cuda_root, "include"), "/usr/include", "/usr/local/include"]:
            if os.path.isfile(os.path.join(d, "nccl.h")):
                self.nccl_header = os.path.join(d, "nccl.h")
                break
        self.write_provenance(max(5, self.stage_left(30)))
        self.log("commit %s (from %s, tracked changes: %s), nvcc %s, arch sm_%s, %d CPUs, budget %ds, NCCL header %s"
                 % (self.commit, self.commit_source, self.dirty, nvcc, self.arch, cpu_count(), self.budget_s,
                    self.nccl_header or "none"))
        return "ok"

    def probe_gpu(self) -> None:
        """Whether nvidia-smi lists a GPU. It can hang on a broken driver: every call is bounded, and none is made
        again once one hung. A GPU it lists must be used: a test that skips on such a machine (exit 77, "no device")
        hides a broken driver or runtime, so skipped tests count as failures here."""
        rc, smi_list = self.capture(["nvidia-smi", "-L"], self.stage_left(15))
        smi_list = smi_list.rstrip("\n")
        if rc in TIMED_OUT:
            self.smi_ok = False
            self.log("nvidia-smi -L did not answer within 15 s (a hung driver?): no more nvidia-smi calls")
        elif rc == 0 and re.search(r"^GPU ", smi_list, re.M):
            self.gpu_present = True
            self.log(smi_list)
        else:
            self.smi_ok = rc != NOT_FOUND
            self.log("nvidia-smi lists no GPU (rc=%d: missing, or no device): GPU tests may skip" % rc)
        parts = ["# nvidia-smi -L", smi_list]
        if self.smi_ok:
            for title, argv in (("# nvidia-smi", ["nvidia-smi"]), ("# nvidia-smi -q", ["nvidia-smi", "-q"])):
                rc, text = self.capture(argv, self.stage_left(10))
                parts += ["", title, text.rstrip("\n") + ("" if rc == 0 else "\n(exit %d)" % rc)]
        with open(os.path.join(self.out, "nvidia-smi.txt"), "w") as f:
            f.write("\n".join(parts) + "\n")

    def find_libraries(self) -> None:
        """Which libraries the machine has (the searches of CMakeLists.txt, in cmake/probe), and the carried copy of
        each one it lacks: .deps/debs/ (MPI, OpenBLAS, GoogleTest, Google Benchmark, nlohmann-json and toml++, through
        scripts/gpu-deps.sh) and .deps/cudnn-frontend/include. GPU_CHECK_CARRY names ones to carry even where the
        machine has them. Without CMake (or with GPU_CHECK_STANDALONE=1) none is looked for or carried: the nvcc
        build needs none of them."""
        force = set(os.environ.get("GPU_CHECK_CARRY", "").replace(",", " ").split())
        if "all" in force:
            force = set(LIBRARIES) | {"cudnn-frontend"}
        probed = not self.standalone and shutil.which("cmake") is not None
        if probed:
            probe_log = os.path.join(self.out, "probe.log")
            probe_dir = tempfile.mkdtemp()
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            rc = self.run(["cmake", "-S", "cmake/probe", "-B", probe_dir] + generator
                          + ["-DCUDA_ROOT=" + self.cuda_root], self.stage_left(30), probe_log, append=False)
            if rc != 0:
                self.log("the library probe (cmake/probe) failed or ran out of time (probe.log): every library counts"
                         " as missing")
            shutil.rmtree(probe_dir, ignore_errors=True)
            for m in re.finditer(r"^-- lins-probe: ([a-z_]*)=([01]) *(.*)$", read_text(probe_log), re.M):
                self.have[m.group(1)] = m.group(2)
                self.where[m.group(1)] = m.group(3).strip()
        carry_debs = []
        for lib in LIBRARIES:
            if not probed:
                continue
            if self.have[lib] == "1" and lib not in force:
                self.log("library %s: the machine's (%s)" % (lib, self.where.get(lib) or "found"))
            else:
                carry_debs.append(lib)
        if carry_debs:
            self.use_carried(carry_debs)
        fe_var = os.environ.get("GPU_CHECK_CUDNN_FE_VAR", "LINS_CUDNN_FRONTEND_DIR")
        if not probed:
            self.log("libraries: not looked for (no CMake build: %s)"
                     % ("GPU_CHECK_STANDALONE=1" if self.standalone else "no cmake"))
        elif self.have["cudnn_frontend"] == "1" and "cudnn-frontend" not in force:
            self.log("library cudnn-frontend: the machine's (%s)" % self.where.get("cudnn_frontend", ""))
        elif os.path.isfile(".deps/cudnn-frontend/include/cudnn_frontend.h"):
            self.deps_cmake_args.append("-D%s=%s/.deps/cudnn-frontend/include" % (fe_var, self.root))
            self.carried.append("cudnn-frontend")
            self.have["cudnn_frontend"] = "carried"
            self.log("library cudnn-frontend: carried (.deps/cudnn-frontend/include, as -D%s)" % fe_var)
        else:
            self.log("library cudnn-frontend: not on this machine and not carried (.deps/cudnn-frontend/include)")
        if probed:
            self.log("library cudnn: %s" % ("the machine's (%s)" % self.where.get("cudnn", "")
                                            if self.have["cudnn"] == "1" else "not found"))
        self.log("carried: %s" % (" ".join(self.carried) or "none"))

    def use_carried(self, libs: List[str]) -> None:
        """`. scripts/gpu-deps.sh use LIBS` (it unpacks .deps/debs/ once, bounded here) in bash, and the environment
        it exports taken over by this process and so by every command after it."""
        names = " ".join(libs)
        if not glob.glob(".deps/debs/*.deb"):
            self.log("libraries %s: the machine has none of its own and .deps/debs/ carries none (scripts/gpu-carry.sh)"
                     % names)
            return
        with tempfile.TemporaryFile() as env_out, open(self.summary, "a") as summary:
            job = self.commands.start(["bash", "-c", '. scripts/gpu-deps.sh use "$@" >&2 && env -0', "sh"] + libs,
                                      self.stage_left(25), env_out, stderr=summary)
            rc = self.commands.wait(job)
            env_out.seek(0)
            exported = env_out.read().decode(errors="replace")
        if rc != 0:
            self.log("libraries %s: the carried packages in .deps/debs/ could not be unpacked (above)" % names)
            return
        for entry in exported.split("\0"):
            key, sep, value = entry.partition("=")
            if sep and key not in SHELL_OWN_VARIABLES and not key.startswith("BASH_FUNC_") \
                    and os.environ.get(key) != value:
                os.environ[key] = value
        self.deps_cmake_args += os.environ.get("LINS_DEPS_CMAKE_ARGS", "").split()
        self.carried += libs
        for lib in libs:
            self.have[lib] = "carried"
        self.log("libraries %s: carried (.deps/debs/)" % names)
        # Every carried program and library must find what it links to here, or MPI programs fail at start.
        if self.run(["scripts/gpu-deps.sh", "check"] + libs, self.stage_left(20), self.summary) != 0:
            self.log("some carried libraries cannot load here (listed above)")

    def find_nccl(self) -> None:
        """NCCL from the CUDA installation, else from the CUDA Python wheel; then NCCL's environment for one rank on
        one machine: no network transport is needed, and probing InfiniBand or picking an odd interface for the
        bootstrap socket can stall or fail a communicator's start; warnings and errors only. A value already set
        wins."""
        env = os.environ
        patterns = [os.path.join(self.cuda_root, "lib*", "libnccl.so*"),
                    os.path.join(self.cuda_root, "targets", "*", "lib", "libnccl.so*"),
                    "/usr/lib/x86_64-linux-gnu/libnccl.so*"]
        if not env.get("NCCL_HOME") and not any(glob.glob(p) for p in patterns):
            rc, nccl_dir = self.capture([sys.executable, "-c", "import nvidia.nccl as n; print(list(n.__path__)[0])"],
                                        10 + KILL_GRACE_S, with_stderr=False)
            nccl_dir = nccl_dir.strip()
            if rc == 0 and nccl_dir and os.path.isfile(os.path.join(nccl_dir, "include", "nccl.h")):
                env["NCCL_HOME"] = nccl_dir
                lib = os.path.join(nccl_dir, "lib")
                env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
                self.log("NCCL from the Python wheel in %s" % nccl_dir)
        env.setdefault("NCCL_IB_DISABLE", "1")
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        env.setdefault("NCCL_DEBUG", "WARN")

    def read_commit(self) -> None:
        """The commit: from the COMMIT file scripts/gpu-carry.sh wrote, when there is one (a copied tree may carry a
        stale .git of its own); else from git where this tree is a checkout (its own, not a parent folder's)."""
        if os.path.isfile("COMMIT"):
            fields = dict(line.split("=", 1) for line in read_text("COMMIT").splitlines() if "=" in line)
            self.commit = fields.get("short", "unknown")
            self.commit_full = fields.get("commit", "")
            self.dirty = fields.get("dirty", "unknown")
            self.commit_source = "COMMIT (%s, %s untracked files)" % (fields.get("date_utc", ""),
                                                                       fields.get("untracked", ""))
            return
        rc, top = self.capture(["git", "rev-parse", "--show-toplevel"], 10, with_stderr=False)
        if rc != 0 or os.path.realpath(top.strip()) != os.path.realpath(self.root):
            return
        rc, short = self.capture(["git", "rev-parse", "--short", "HEAD"], 10, with_stderr=False)
        self.commit = short.strip() if rc == 0 and short.strip() else "unknown"
        rc, full = self.capture(["git", "rev-parse", "HEAD"], 10, with_stderr=False)
        self.commit_full = full.strip() if rc == 0 else ""
        rc, status = self.capture(["git", "status", "--porcelain", "--untracked-files=no"], 20, with_stderr=False)
        self.dirty = "unknown" if rc != 0 else ("true" if status.strip() else "false")
        self.commit_source = "git"

    def write_provenance(self, limit_s: int) -> None:
        """provenance.json: the versions as the tools report them, each tool given 5 s and all of them limit_s (none
        to nvidia-smi once it hung); lins step adds the ones the binaries see at run time (NCCL, CUDA runtime and
        driver, device) to its own step.provenance.json."""
        deadline = time.monotonic() + limit_s

        def tool(*argv: str) -> str:
            left = deadline - time.monotonic()
            if left < 1:
                return "unavailable (no time left)"
            rc, text = self.capture(list(argv), min(5 + KILL_GRACE_S, left))
            if rc == NOT_FOUND and text.startswith("gpu_check: cannot run"):
                return "unavailable (FileNotFoundError)"
            if rc in TIMED_OUT:
                return "unavailable (TimeoutExpired)"
            return text.strip()

        try:
            smi, smi_cuda = None, None
            if self.smi_ok:
                smi = tool("nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,"
                           "pci.bus_id", "--format=csv,noheader")
                smi_cuda = re.search(r"CUDA Version:\s*([0-9.]+)", tool("nvidia-smi"))
            nccl = {}
            if self.nccl_header:
                text = read_text(self.nccl_header)
                for part in ("MAJOR", "MINOR", "PATCH"):
                    m = re.search(r"#define NCCL_%s +(\d+)" % part, text)
                    nccl[part] = m.group(1) if m else "?"
            libs = []
            if self.lins_bin and os.path.exists(self.lins_bin):
                libs = [line.strip() for line in tool("ldd", self.lins_bin).splitlines()
                        if re.search(r"nccl|cudart|cublas|cudnn|libmpi|openblas|libstdc|lins_gpu", line)]
            env = os.environ
            prov = {
                "script": "scripts/gpu_check.py",
                "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "host": socket.gethostname(),
                "git_commit": self.commit,
                "git_commit_full": self.commit_full or None,
                "git_tracked_changes": {"true": True, "false": False}.get(self.dirty),
                "commit_source": self.commit_source,
                "budget_s": self.budget_s,
                "carried_libraries": list(self.carried),
                "gpu_plugin": self.plugin_state or None,
                "gpu": smi.splitlines() if smi else [],
                "driver_cuda_version": smi_cuda.group(1) if smi_cuda else None,
                "nvcc": tool(self.nvcc, "--version").splitlines()[-1:],
                "cuda_arch": "sm_" + self.arch,
                "nccl_header": self.nccl_header or None,
                "nccl_header_version": ".".join(nccl[p] for p in ("MAJOR", "MINOR", "PATCH")) if nccl else None,
                "nccl_env": {k: v for k, v in env.items() if k.startswith("NCCL_")},
                "mpi_env": {k: v for k, v in env.items() if k.startswith(("OMPI_", "OPAL_", "PMIX_"))},
                "mpi": tool("mpirun", "--version").splitlines()[:1],
                "cmake": tool("cmake", "--version").splitlines()[:1],
                "ninja": tool("ninja", "--version"),
                "cxx": tool(*shlex.split(env.get("CXX") or "c++"), "--version").splitlines()[:1],
                "python": sys.version.split()[0],
                "kernel": " ".join(os.uname()[0:3:2]),
                "cpus": os.cpu_count(),
                "lins_libraries": libs,
            }
            with open(os.path.join(self.out, "provenance.json"), "w") as f:
                json.dump(prov, f, indent=2)
        except (OSError, ValueError) as e:
            self.log("provenance.json: not written (%s: %s)" % (type(e).__name__, e))

    # === configure ==================================================================================================

    def has(self, lib: str) -> bool:
        return self.have[lib] in ("1", "carried")

    def onoff(self, lib: str) -> str:
        return "ON" if self.has(lib) else "OFF"

    def cmake_configure(self, tests: str, bench: str, limit_s: int, log_path: str) -> int:
        """tests and bench ON or OFF, set explicitly either way (the build folder caches them)."""
        return self.run(["cmake", "-S", ".", "-B", self.build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                         "-DCMAKE_CUDA_ARCHITECTURES=" + self.arch, "-DLINS_CUDA=ON", "-DLINS_TESTS=" + tests,
                         "-DLINS_BENCHMARKS=" + bench] + self.deps_cmake_args, limit_s, log_path, append=False)

    def configure(self) -> str:
        if self.standalone:
            self.log("GPU_CHECK_STANDALONE=1: no CMake; the kernel tests and the benchmark with nvcc alone, no lins")
            return "skipped"
        if not shutil.which("cmake") or not shutil.which("ninja"):
            self.fail("no cmake or ninja: no lins (the step stage cannot run); the kernel tests and the benchmark with"
                      " nvcc alone")
            return "skipped"
        if not self.has("mpi") or not self.has("openblas") or not self.has("formats"):
            self.fail("no MPI, OpenBLAS or nlohmann-json and toml++, on the machine or carried (mpi: %s, openblas: %s,"
                      " formats: %s): CMake cannot configure lins; the kernel tests and the benchmark with nvcc alone"
                      % (self.have["mpi"], self.have["openblas"], self.have["formats"]))
            return "skipped"
        tests, bench = self.onoff("gtest"), self.onoff("benchmark")
        rc, version = self.capture(["cmake", "--version"], 10)
        words = version.splitlines()[0].split() if version.strip() else []
        self.log("configure (CMake %s, sm_%s, tests %s, benchmarks %s)"
                 % (words[2] if len(words) > 2 else "?", self.arch, tests, bench))
        with tempfile.TemporaryDirectory() as tmp:
            cfg_log = os.path.join(tmp, "configure.log")
            rc = self.cmake_configure(tests, bench, self.stage_left(), cfg_log)
            if rc != 0 and (tests == "ON" or bench == "ON") and self.stage_left() >= 10:
                # A test library the probe found but CMake could not use: lins alone, the rest with nvcc.
                self.log("configure failed with tests %s, benchmarks %s (build.log): again without them"
                         % (tests, bench))
                self.show("\n".join(grep(r"error|not found|required", read_text(cfg_log), re.I)[:5]))
                self.append(self.build_log, read_text(cfg_log))
                tests, bench = "OFF", "OFF"
                rc = self.cmake_configure(tests, bench, self.stage_left(), cfg_log)
            text = read_text(cfg_log)
        self.append(self.build_log, text)
        if rc != 0:
            self.fail("CMake configure failed%s (build.log): no lins" % (" (out of time)" if rc in TIMED_OUT else ""))
            self.show("\n".join(grep(r"error|not found|required", text, re.I)[:5]))
            return "failed"
        if "lins: CUDA/NCCL path ON" not in text:
            # Without NCCL (or a CUDA compiler) CMake defines no GPU target, and lins has no GPU backend.
            self.fail("CMake built no CUDA/NCCL path (set NCCL_HOME or CUDACXX): no lins with the GPU backend")
            self.show("\n".join(grep_context(r"NCCL found|NCCL not found|NCCL [0-9.]* .*too old|no CUDA compiler",
                                             text, 3, re.I)[:8]))
            return "failed"
        self.mode = "cmake"
        self.cmake_tests = tests == "ON"
        self.cmake_bench = bench == "ON"
        self.show("\n".join(grep(r"lins: NCCL ", text)[:1]))
        return "ok"

    # === build ======================================================================================================

    def ninja(self, what: str, limit_s: int, args: List[str]) -> bool:
        self.log("build %s (ninja -j%s %s, limit %ds)" % (what, self.build_jobs, " ".join(args), limit_s))
        started = time.monotonic()
        rc = self.run(["ninja", "-C", self.build_dir, "-j", self.build_jobs] + args, limit_s, self.build_log)
        if rc in TIMED_OUT:
            self.log("  ran out of time after %ds" % limit_s)
        self.log("  %s: rc=%d in %ds" % (what, rc, int(time.monotonic() - started)))
        return rc == 0

    def ninja_targets(self) -> List[str]:
        rc, text = self.capture(["ninja", "-C", self.build_dir, "-t", "targets", "all"], 20, with_stderr=False,
                                stderr_path=self.build_log)
        return [line.split(":", 1)[0] for line in text.splitlines()] if rc == 0 else []

    def discover_test_targets(self) -> List[str]:
        """Every executable the gpu-labelled tests run. ctest names the tests, but leaves out the command of a test
        whose executable is not built yet, so the commands come from the CTestTestfiles."""
        argv = ["ctest", "--test-dir", self.build_dir, "-L", "gpu", "-N", "--show-only=json-v1"]
        rc, text = self.capture(argv, 20 + KILL_GRACE_S, with_stderr=False, stderr_path=self.build_log)
        try:
            gpu = {t["name"] for t in json.loads(text).get("tests", [])}
        except (ValueError, AttributeError, KeyError, TypeError) as e:
            self.append(self.build_log, "ctest's list of gpu tests could not be read (rc=%d, %s)" % (rc, e))
            gpu = set()
        build = os.path.realpath(self.build_dir)
        texts = [read_text(f) for f in glob.glob(os.path.join(build, "**", "CTestTestfile.cmake"), recursive=True)]
        return gpu_test_executables(texts, gpu, build)

    def build(self) -> str:
        self.build_ok = 1
        if self.mode == "cmake":
            self.build_cmake_targets()
        # What CMake does not build here, nvcc alone does.
        sa_tests = not (self.mode == "cmake" and self.cmake_tests)
        sa_bench = not (self.mode == "cmake" and self.cmake_bench)
        if sa_tests or sa_bench:
            if self.stage_left() < 10:
                self.fail("no time left in the build stage for the nvcc build of the kernel tests or the benchmark")
                self.build_ok = 0
            elif self.standalone_build(sa_tests, sa_bench):
                if self.mode == "none":
                    self.mode = "standalone"
            else:
                self.fail("the nvcc build of the kernel tests or the benchmark failed (tail of build.log below)")
                self.show(tail(read_text(self.build_log), 30))
                self.build_ok = 0
        self.log("build mode: %s%s%s" % (self.mode, ", lins: " + self.lins_bin if self.lins_bin else "",
                                         ", kernel tests: " + self.test_bin if self.test_bin else ""))
        if self.lins_bin:
            self.write_provenance(20)  # again, with the libraries lins links and the plugin
        return "ok" if self.build_ok else "failed"

    def build_cmake_targets(self) -> None:
        # lins and its GPU plugin first: the step needs them, and a test that does not compile must not cost them.
        # The plugin (target lins_gpu, liblins_gpu.so beside lins) is built where the tree defines it.
        defined = self.ninja_targets()
        first = ["lins"] + (["lins_gpu"] if "lins_gpu" in defined else [])
        # The later targets get at least a third of the stage.
        if self.ninja(" ".join(first), self.stage_left() * 2 // 3, first):
            self.lins_bin = os.path.join(self.build_dir, "lins")
        else:
            self.fail("%s did not build (tail of build.log below): no step run" % " ".join(first))
            self.show(tail(read_text(self.build_log), 20))
            self.build_ok = 0
        plugin = os.path.join(self.build_dir, "liblins_gpu.so")
        if "lins_gpu" not in defined:
            self.plugin_state = "no lins_gpu target (the GPU backend is linked into lins)"
        elif os.path.isfile(plugin):
            self.plugin_state = "liblins_gpu.so built (%d bytes)" % os.path.getsize(plugin)
        else:
            self.plugin_state = "lins_gpu target, but no liblins_gpu.so beside lins in %s" % self.build_dir
            self.fail("the GPU plugin liblins_gpu.so was not built: lins --backend gpu cannot run")
        self.log("GPU plugin: %s" % self.plugin_state)
        self.checkpoint()
        targets: List[str] = []
        if self.cmake_tests:
            targets = self.discover_test_targets()
            if not targets:
                # The known ones that this build defines (the cuDNN attention test exists only where cuDNN was found).
                defined = self.ninja_targets()
                targets = [t for t in KNOWN_TEST_TARGETS if t in defined]
                self.log("found no gpu-labelled test executables in the CTestTestfiles; building the known ones: %s"
                         % " ".join(targets))
                first_lines = []
                for f in sorted(glob.glob(os.path.join(self.build_dir, "tests", "gpu", "**", "CTestTestfile.cmake"),
                                          recursive=True)):
                    first_lines += grep(r"add_test", read_text(f))[:1]
                rc, listing = self.capture(["ctest", "--test-dir", self.build_dir, "-L", "gpu", "-N",
                                            "--show-only=json-v1"], 20 + KILL_GRACE_S)
                self.append(self.build_log, "the discovery read (first add_test lines):\n%s\nctest's list:\n%s\n"
                            % ("\n".join(first_lines[:3]), listing[:400]))
            self.test_bin = os.path.join(self.build_dir, "tests", "gpu", "kernels", "kernels_gpu_test")
        if self.cmake_bench:
            targets.append("bench_kernels_gpu")
            self.bench_bin = os.path.join(self.build_dir, "bench", "bench_kernels_gpu")
        # -k 0: every target that compiles is built, whatever the others do.
        if targets and not self.ninja("the gpu tests and benchmark", self.stage_left(), ["-k", "0"] + targets):
            self.fail("some gpu test targets or bench_kernels_gpu did not build (their tests fail as not run;"
                      " build.log)")
            self.show("\n".join(grep(r"^FAILED:|error:", read_text(self.build_log))[:20]))
            self.build_ok = 0

    def standalone_build(self, tests: bool, bench: bool) -> bool:
        """The kernel tests and the benchmark with nvcc alone (where CMake cannot build them): kernels + CPU oracles
        (the system's cblas.h if present, else the bundled triple-loop sgemm) + tests + bench."""
        sa = os.path.join(self.build_dir, "standalone")
        os.makedirs(sa, exist_ok=True)
        cxx = shlex.split(os.environ.get("CXX") or "c++")
        standalone_dir = os.path.join(self.root, "tests", "gpu", "kernels", "standalone")
        blas_inc = ["-I" + standalone_dir]
        blas_src = [os.path.join(standalone_dir, "cblas_reference.cpp")]
        blas_lib: List[str] = []
        has_cblas = self.run(cxx + ["-E", "-x", "c++", "-"], 20, input_text="#include <cblas.h>\n") == 0
        if has_cblas and self.run(cxx + ["-lopenblas", "-x", "c++", "-", "-o", "/dev/null"], 30,
                                  input_text="int main(){}\n") == 0:
            blas_inc, blas_src, blas_lib = [], [], ["-lopenblas"]
        flags = ["-std=c++17", "-O3", "-lineinfo", "--expt-relaxed-constexpr",
                 "-gencode=arch=compute_%s,code=sm_%s" % (self.arch, self.arch), "-I" + self.root,
                 "-I" + os.path.join(self.root, "src"), '-DLINS_GIT_COMMIT="%s"' % self.commit]
        t = self.stage_left()
        self.log("standalone nvcc build into %s (blas: %s; limit %ds)"
                 % (sa, " ".join(blas_lib) or "bundled reference sgemm", t))
        kernel_objs, cpu_objs, jobs = [], [], []
        with open(self.build_log, "a") as log:
            for f in sorted(glob.glob("kernels/cuda/*.cu")):
                o = os.path.join(sa, os.path.basename(f)[:-len(".cu")] + ".o")
                kernel_objs.append(o)
                jobs.append(self.commands.start([self.nvcc] + flags + ["-c", f, "-o", o], t, log))
            # The host parts of the CUDA kernels (the cuDNN attention, which bench_kernels_gpu calls): without cuDNN
            # and its frontend, as here, they build as stubs that report the attention as not available.
            for f in sorted(glob.glob("kernels/cuda/*.cpp")):
                o = os.path.join(sa, "host_" + os.path.basename(f)[:-len(".cpp")] + ".o")
                kernel_objs.append(o)
                jobs.append(self.commands.start(cxx + ["-std=c++20", "-O2", "-I" + self.root,
                                                       "-I" + os.path.join(self.root, "src"),
                                                       "-I" + os.path.join(self.cuda_root, "include"),
                                                       "-DLINS_CUDNN_ATTENTION=0", "-c", f, "-o", o], t, log))
            if tests:
                for f in sorted(glob.glob("kernels/cpu/*.cpp")) + blas_src:
                    o = os.path.join(sa, "cpu_" + os.path.basename(f)[:-len(".cpp")] + ".o")
                    cpu_objs.append(o)
                    jobs.append(self.commands.start(cxx + ["-std=c++20", "-O2", "-I" + self.root,
                                                           "-I" + os.path.join(self.root, "src")] + blas_inc
                                                    + ["-c", f, "-o", o], t, log))
            statuses = [self.commands.wait(job) for job in jobs]
        if any(statuses):
            return False
        ok = True
        if tests:
            test_o = os.path.join(sa, "kernels_gpu_test.o")
            test_exe = os.path.join(sa, "kernels_gpu_test")
            if self.run([self.nvcc] + flags + ["-x", "cu", "-c", "tests/gpu/kernels/kernels_gpu_test.cpp", "-o",
                                               test_o], self.stage_left(), self.build_log) == 0 and \
                    self.run([self.nvcc] + flags + [test_o] + kernel_objs + cpu_objs + ["-o", test_exe, "-lcublas"]
                             + blas_lib, self.stage_left(), self.build_log) == 0:
                self.test_bin = test_exe
            else:
                ok = False
        if bench:
            bench_exe = os.path.join(sa, "bench_kernels_gpu")
            if self.run([self.nvcc] + flags + ["src/bench/bench_kernels_gpu.cu"] + kernel_objs
                        + ["-o", bench_exe, "-lcublas"], self.stage_left(), self.build_log) == 0:
                self.bench_bin = bench_exe
            else:
                ok = False
        return ok

    # === tests (label gpu) ==========================================================================================

    def tests(self) -> str:
        self.test_rc = 1
        if self.mode == "cmake" and self.cmake_tests:
            self.ctest()
        elif executable(self.test_bin):
            self.kernel_cases()
        else:
            self.fail("no gpu tests were built")
        # A GPU whose driver or runtime does not work fails every test at its first CUDA call, with one message:
        # shown once.
        broken = grep(r"cudaGetDeviceCount failed", read_text(self.tests_log))
        if broken:
            self.device_broken = True
            self.fail("the GPU does not work: %s" % re.sub(r"^[0-9]*: ", "", broken[0]))
        self.log("tests: rc=%s" % self.test_rc)
        return "ok" if self.test_rc == 0 else "failed"

    def ctest(self) -> None:
        t = self.stage_left()
        ctest_jobs = os.environ.get("GPU_CHECK_CTEST_JOBS", "4")
        self.log("ctest -L gpu -j %s (limit %ds in all)" % (ctest_jobs, t))
        # Each test's own TIMEOUT (tests/gpu: 60 s a kernel case, 120 s the communicator and step tests) applies; -V
        # keeps every test's output (the step test's loss comparison too) in tests.log.
        self.test_rc = self.run(["ctest", "--test-dir", self.build_dir, "-L", "gpu", "-V", "-j", ctest_jobs], t,
                                self.tests_log)
        if self.test_rc in TIMED_OUT:
            self.fail("ctest ran out of time after %ds: the tests not reached did not run" % t)
        text = read_text(self.tests_log)
        self.show("\n".join(grep(r"^ *[0-9]+/[0-9]+ Test +#|tests passed|tests failed", text)[-40:]))
        if "(Skipped)" in text or "***Skipped" in text:
            if self.gpu_present:
                self.fail("nvidia-smi lists a GPU but tests were skipped as if there were none (see tests.log)")
                self.test_rc = 1
            elif self.test_rc == 0 and not re.search(r"Test +#[0-9]+: .* Passed", text):
                self.no_device = True
                self.log("every gpu test skipped, and nvidia-smi lists no GPU: no device here")
        # The kernel cases that ran and failed (wrong values, a timeout, a crash), from ctest's result lines: kept
        # even when ctest itself was cut short.
        self.failed_cases = re.findall(
            r"Test +#[0-9]+: gpu_kernels\.([A-Za-z0-9_]+) .*\*\*\*(?:Failed|Timeout|Exception)", text)
        if self.test_rc != 0:
            self.fail("gpu tests (tests.log)")

    def kernel_cases(self) -> None:
        self.log("kernels_gpu_test, every case (the gpu label's kernel tests; the communicator and step tests need"
                 " CMake with GoogleTest)")
        self.test_rc = 0
        skipped = ran = 0
        rc, listing = self.capture([self.test_bin, "--list"], 10 + KILL_GRACE_S, with_stderr=False)
        for case in listing.split():
            # 60 s a case, as the ctest TIMEOUT of a kernel case; the cases left once the stage is spent count as
            # failed.
            ct = self.stage_left(60)
            if ct < 10:
                self.log("  gpu_kernels.%s: not run (out of time)" % case)
                self.test_rc = 1
                continue
            self.append(self.tests_log, "=== gpu_kernels.%s" % case)
            rc = self.run([self.test_bin, case], ct, self.tests_log)
            ran += 1
            verdict = "passed" if rc == 0 else "skipped" if rc == 77 else "FAILED rc=%d" % rc
            if rc == 77:
                skipped += 1
                if self.gpu_present:
                    verdict, rc = "FAILED: skipped, but nvidia-smi lists a GPU", 1
            self.log("  gpu_kernels.%s: %s" % (case, verdict))
            if rc not in (0, 77):
                self.test_rc = 1
                self.failed_cases.append(case)
        if not self.gpu_present and ran > 0 and skipped == ran:
            self.no_device = True
            self.log("every kernel case skipped, and nvidia-smi lists no GPU: no device here")
        if self.test_rc != 0:
            self.fail("gpu kernel tests (tests.log)")

    # === sanitizer reruns of the failed kernel cases ================================================================

    def sanitizer_ready(self) -> bool:
        if not self.failed_cases:
            self.stage_report.append("%-10s %s" % ("sanitizer", "not needed (no kernel case failed)"))
            return False
        return True

    def sanitizer(self) -> str:
        candidates = [os.path.join(self.cuda_root, "bin", "compute-sanitizer"),
                      os.path.join(self.cuda_root, "compute-sanitizer", "compute-sanitizer"),
                      shutil.which("compute-sanitizer") or ""]
        tool_path = next((c for c in candidates if executable(c)), "")
        if self.device_broken:
            self.log("failed kernel cases not rerun under compute-sanitizer: the device itself does not work (above)")
            return "ok"
        if not tool_path or not executable(self.test_bin):
            self.log("failed kernel cases (%s) not rerun under compute-sanitizer: %s%s" % (
                " ".join(self.failed_cases), tool_path or "no compute-sanitizer in %s or on PATH" % self.cuda_root,
                ", test binary " + self.test_bin if self.test_bin else ""))
            return "ok"
        os.makedirs(os.path.join(self.out, "sanitizer"), exist_ok=True)
        # The first SANITIZE_MAX_CASES (4) failed cases: when many fail, one cause is the likely story.
        cases = self.failed_cases[:int(os.environ.get("SANITIZE_MAX_CASES", "4"))]
        self.log("compute-sanitizer (memcheck, then racecheck) on the failed kernel cases: %s (of %d failed), without"
                 " the guard bytes (LINS_KERNEL_TEST_GUARDS=0): every access outside a buffer is the sanitizer's to"
                 " flag" % (" ".join(cases), len(self.failed_cases)))
        not_run = []
        previous_guards = os.environ.get("LINS_KERNEL_TEST_GUARDS")
        os.environ["LINS_KERNEL_TEST_GUARDS"] = "0"
        try:
            for case in cases:
                for tool in ("memcheck", "racecheck"):
                    st = self.stage_left(30)
                    if st < 10:
                        not_run.append("%s/%s" % (case, tool))
                        continue
                    slog = os.path.join(self.out, "sanitizer", "%s.%s.log" % (case, tool))
                    rc = self.run([tool_path, "--tool", tool, "--error-exitcode", "86", self.test_bin, case], st, slog,
                                  append=False)
                    text = read_text(slog)
                    # The tool's findings: its error lines (with the kernel and source line) and its summary.
                    summary = grep(r"ERROR SUMMARY|RACECHECK SUMMARY", text)[:1]
                    self.log("  %s %s: rc=%d%s, %s" % (case, tool, rc, " (ran out of time after %ds)" % st
                                                        if rc in TIMED_OUT else "",
                                                        re.sub(r"^=* *", "", summary[0]) if summary else ""))
                    self.show("\n".join(grep(r"^=+ +(Invalid|Error|Race|Warning|Program hit|    at |Address|Saved"
                                             r" host)", text)[:15]))
        finally:
            if previous_guards is None:
                os.environ.pop("LINS_KERNEL_TEST_GUARDS", None)
            else:
                os.environ["LINS_KERNEL_TEST_GUARDS"] = previous_guards
        if not_run:
            self.log("  not run (the stage's time is spent): %s" % " ".join(not_run))
        return "ok"

    # === benchmarks =================================================================================================

    def bench(self) -> str:
        """bench_kernels_gpu. It exits 77 when it finds no device: with no GPU listed by nvidia-smi either, the
        machine has none, and the step run is skipped (the build and the skipped tests are all this run checks)."""
        self.bench_rc = 1
        if not executable(self.bench_bin):
            self.fail("no bench_kernels_gpu built")
        else:
            t = self.stage_left()
            bench_args = os.environ.get("BENCH_ARGS", "")
            self.log("bench_kernels_gpu (limit %ds) %s" % (t, bench_args))
            bench_log = os.path.join(self.out, "bench_kernels_gpu.log")
            self.bench_rc = self.run([self.bench_bin, "--csv", os.path.join(self.out, "bench_kernels_gpu.csv"),
                                      "--json", os.path.join(self.out, "bench_kernels_gpu.json")]
                                     + shlex.split(bench_args), t, bench_log, append=False)
            self.note(read_text(bench_log))
            if self.bench_rc == 77 and not self.gpu_present:
                self.no_device = True
                self.log("bench_kernels_gpu found no CUDA device, and nvidia-smi lists none: no device here")
            elif self.bench_rc != 0:
                self.fail("bench_kernels_gpu rc=%d%s (bench_kernels_gpu.log)"
                          % (self.bench_rc, ": it found no device" if self.bench_rc == 77 else ""))
        self.log("benchmarks: rc=%s" % self.bench_rc)
        return "ok" if self.bench_rc == 0 or (self.bench_rc == 77 and self.no_device) else "failed"

    # === the training step ==========================================================================================
    # One rank, llama-7b layer shapes cut to 2 layers, seq 4096, micro-batch 1, M 1; MFU against the H200's 989
    # TFLOP/s dense bf16 peak. --precision picks the storage of P and G (and so of every collective's payload),
    # --compute the dtype of the activations. First bf16 storage+compute, the paper's configuration: bf16 P and G with
    # fp32 master weights and Adam moments (16 bytes of states per parameter), bf16 activations and tensor-core
    # kernels end to end, fp32 weight gradients; with --attention cudnn and then --attention flash where lins has the
    # option. Then fp32 storage+compute (20 bytes of states per parameter; fp32 tensors with bf16 tensor-core GEMMs
    # and attention), whose losses must agree with the bf16 ones. Every run made counts; one skipped for time is a
    # line, not a failure.

    def step_ready(self) -> bool:
        if self.no_device and self.step_backend == "gpu":
            self.log("step stage skipped: no CUDA device")
            self.stage_report.append("%-10s %s" % ("step", "skipped (no CUDA device)"))
            return False
        if not executable(self.lins_bin):
            self.fail("no lins with the GPU backend was built: no step run")
            self.stage_report.append("%-10s %s" % ("step", "not run (no lins)"))
            return False
        return True

    def step_breakdown(self, path: str, label: str) -> None:
        cols = ["step_time_s", "forward_s", "backward_s", "optimizer_s", "exposed_comm_s", "mfu", "peak_mem_bytes",
                "model_mem_bytes"]
        try:
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
        except (OSError, csv.Error) as e:
            self.show("breakdown, %s: %s could not be read (%s)" % (label, path, e))
            return
        by: Dict[str, List[dict]] = {}
        for r in rows:
            by.setdefault(r.get("strategy", "?"), []).append(r)
        lines = ["breakdown, %s (means over timed steps): strategy %s other_s" % (label, " ".join(cols))]
        for strategy, rs in by.items():
            m = {c: sum(number(r.get(c, "")) for r in rs) / len(rs) for c in cols}
            other = m["step_time_s"] - m["forward_s"] - m["backward_s"] - m["optimizer_s"] - m["exposed_comm_s"]
            lines.append("  %-8s step %.4f s = forward %.4f + backward %.4f + optimizer %.4f + exposed comm %.4f + "
                         "other %.4f; MFU %.1f%%; peak mem %.2f GiB (memory model %.2f GiB)"
                         % (strategy, m["step_time_s"], m["forward_s"], m["backward_s"], m["optimizer_s"],
                            m["exposed_comm_s"], other, 100 * m["mfu"], m["peak_mem_bytes"] / 2**30,
                            m["model_mem_bytes"] / 2**30))
        self.show("\n".join(lines))

    def step_run(self, label: str, folder: str, limit_s: int, flags: List[str]) -> bool:
        os.makedirs(folder, exist_ok=True)
        self.log("lins step --backend %s %s %s (%s), one rank (limit %ds)"
                 % (self.step_backend, " ".join(flags), " ".join(self.step_shape), label, limit_s))
        log_path = os.path.join(folder, "log.txt")
        rc = self.run([self.lins_bin, "step", "--backend", self.step_backend] + flags + self.step_shape
                      + ["--strategies", "ddp,zero3,lins", "--warmup", "1", "--steps", "3", "--timeout",
                         str(limit_s - 15), "--out", folder] + shlex.split(os.environ.get("STEP_ARGS", "")),
                      limit_s, log_path, append=False)
        self.note(tail(read_text(log_path), 25))
        step_csv = os.path.join(folder, "step.csv")
        if nonempty(step_csv):
            self.step_breakdown(step_csv, label)
            self.step_csvs.append(step_csv)
        if rc in TIMED_OUT:
            self.fail("lins step, %s: out of time after %ds (%s)" % (label, limit_s, log_path))
        elif rc != 0:
            self.fail("lins step, %s: rc=%d (%s)" % (label, rc, log_path))
        self.checkpoint()
        return rc == 0

    def step(self) -> str:
        self.step_rc = 0
        runs: List[Tuple[str, str, List[str]]] = []  # label, folder, flags
        bf16 = ["--precision", "bf16", "--compute", "bf16"]
        if self.step_backend != "gpu":
            # --attention picks the GPU backend's kernels; lins refuses it on another backend.
            self.log("lins step --backend %s: one bf16 run, without --attention (it chooses the GPU backend's kernels)"
                     % self.step_backend)
            runs.append(("bf16 storage+compute", "step-bf16", bf16))
        else:
            # The help is read whole before it is searched.
            rc, step_help = self.capture([self.lins_bin, "step", "--help"], self.stage_left(20))
            if re.search(r"--attention([^-a-z_]|$)", step_help, re.M):
                runs.append(("bf16 storage+compute, cuDNN attention", "step-bf16-cudnn",
                             bf16 + ["--attention", "cudnn"]))
                runs.append(("bf16 storage+compute, flash attention", "step-bf16-flash",
                             bf16 + ["--attention", "flash"]))
            else:
                self.log("lins step --help lists no --attention: the cudnn and flash runs are skipped (one bf16 run,"
                         " lins's attention)")
                runs.append(("bf16 storage+compute", "step-bf16", bf16))
        runs.append(("fp32 storage+compute", "step-fp32", ["--precision", "fp32", "--compute", "fp32"]))
        for i, (label, folder, flags) in enumerate(runs):
            # The first run may take the whole stage less 10 s for the verdict; a later one runs only with 30 s left.
            t = self.stage_left() - 10
            if i > 0 and t < scaled(30, self.budget_s):
                self.log("step run %s skipped: %ds left in the stage" % (label, t))
                continue
            if not self.step_run(label, os.path.join(self.out, folder), max(t, 20), flags):
                self.step_rc = 1
        verdict_path = os.path.join(self.out, "step-verdict.txt")
        if not self.step_csvs:
            self.fail("the step stage wrote no step CSV")
            self.step_rc = 1
            return "failed"
        rc = self.run([sys.executable, "scripts/gpu-check-verdict.py", "--expect-backend", self.step_backend]
                      + self.step_csvs, 20 + KILL_GRACE_S, verdict_path, append=False)
        verdict = read_text(verdict_path)
        self.show(verdict.replace(self.out + "/", "").rstrip("\n"))
        if rc != 0:
            self.fail("the step CSVs fail the verdict (step-verdict.txt: %d checks)"
                      % len(grep(r"^FAIL", verdict)))
            self.step_rc = 1
        return "ok" if self.step_rc == 0 else "failed"

    # === more ranks on the one GPU through NCCL (optional) ==========================================================
    # NCCL refuses two ranks on one device of one host ("Duplicate GPU detected"), and lins refuses them first; with a
    # distinct NCCL_HOSTID each rank is a host of its own to NCCL and to lins's placement (a node is a host split by
    # NCCL_HOSTID), so the ranks all run on device 0 and meet over NCCL's socket transport on loopback. Reported, not
    # fatal: it exercises the multi-rank NCCL path, which one GPU cannot run the usual way.

    def multi_rank_ready(self, name: str) -> bool:
        if self.no_device or not executable(self.lins_bin) or not shutil.which("mpirun"):
            self.log("%s: not run (no device, no lins or no mpirun)" % name)
            return False
        return True

    def mpirun(self, ranks: int, tag: str, lins_args: List[str]) -> List[str]:
        root_flag = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        # $OMPI_COMM_WORLD_RANK is expanded by each rank's shell.
        return (["mpirun", "-np", str(ranks), "--oversubscribe"] + root_flag
                + ["-x", "NCCL_IB_DISABLE=1", "-x", "NCCL_P2P_DISABLE=1", "-x", "NCCL_SHM_DISABLE=1",
                   "-x", "NCCL_SOCKET_IFNAME=lo", "-x", "NCCL_DEBUG=WARN",
                   "bash", "-c", 'NCCL_HOSTID=lins-check-rank-$OMPI_COMM_WORLD_RANK exec "$@"', tag, self.lins_bin]
                + lins_args)

    def ncclpair(self) -> str:
        """Two ranks: `lins comm --backend nccl`, every op checked."""
        csv_path = os.path.join(self.out, "nccl2.csv")
        log_path = os.path.join(self.out, "nccl2.log")
        rc = self.run(self.mpirun(2, "nccl2", ["comm", "--backend", "nccl", "-b", "1K", "-e", "16M", "-f", "8", "-n",
                                               "5", "-w", "2", "-o", "all", "--csv", csv_path]),
                      self.stage_left(), log_path, append=False)
        self.note(tail(read_text(log_path), 15))
        correct = False
        if rc == 0 and nonempty(csv_path):
            try:
                with open(csv_path, newline="") as f:
                    rows = list(csv.DictReader(f))
                correct = bool(rows) and all(r.get("wrong_elems") == "0" for r in rows)
            except (OSError, csv.Error):
                correct = False
        if correct:
            self.log("ncclpair: two ranks on one GPU through NCCL: every op correct (nccl2.csv)")
            return "ok"
        self.log("ncclpair: rc=%d or a wrong element (nccl2.log, nccl2.csv); reported, not counted in the verdict" % rc)
        return "failed"

    def contention(self) -> str:
        """Four ranks, labelled 2 nodes of 2 so that every measurement runs: NCCL collectives on their streams beside
        cuBLAS GEMMs and a memory-bound kernel on the compute stream, timed with CUDA events. It checks the GPU path
        of `lins comm --contention` end to end."""
        toml_path = os.path.join(self.out, "contention.toml")
        log_path = os.path.join(self.out, "contention.log")
        t = self.stage_left()
        rc = self.run(self.mpirun(4, "contention", ["comm", "--backend", "nccl", "--gpus-per-node", "2",
                                                    "--contention", toml_path, "--repeats", "3", "--compute-seconds",
                                                    "0.05", "--timeout", str(t - 5)]),
                      t, log_path, append=False)
        self.note(tail(read_text(log_path), 40))
        if rc == 0 and nonempty(toml_path) and contention_table_readable(toml_path):
            self.log("contention: lins comm --contention on NCCL wrote contention.toml")
            return "ok"
        self.log("contention: rc=%d or no readable contention.toml (contention.log); reported, not counted in the"
                 " verdict" % rc)
        return "failed"

    # === PyTorch on the same device (optional) ======================================================================

    def torch_ready(self) -> bool:
        if self.no_device:
            self.log("torch: not run (no device)")
            return False
        return True

    def torch(self) -> str:
        """scripts/gpu-torch-compare.py OUTDIR/torch: PyTorch's SDPA and its eager step, the references the GPU
        issue's ratios are taken against, where this Python has torch with a CUDA device."""
        rc, text = self.capture([sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
                                self.stage_left(30))
        if rc != 0:
            last = text.strip().splitlines()[-1:] or [""]
            self.log("torch: no PyTorch with a CUDA device in %s (rc=%d%s): not run"
                     % (sys.executable, rc, ", " + last[0] if last[0] else ""))
            return "skipped (no PyTorch with CUDA)"
        t = self.stage_left()
        log_path = os.path.join(self.out, "torch.log")
        # The PyTorch step gets what is left after SDPA's few seconds and the import.
        rc = self.run([sys.executable, "scripts/gpu-torch-compare.py", os.path.join(self.out, "torch"),
                       "--step-timeout", str(max(10, t - 25))], t, log_path, append=False)
        self.note(tail(read_text(log_path), 15))
        if rc == 0:
            self.log("torch: PyTorch's SDPA and eager step on the same device (torch/)")
            return "ok"
        self.log("torch: rc=%d (torch.log, torch/); reported, not counted in the verdict" % rc)
        return "failed"


def contention_table_readable(path: str) -> bool:
    """Whether the file is TOML with a [contention] table (tomllib from Python 3.11; before it, the table's header)."""
    try:
        import tomllib
    except ImportError:
        return re.search(r"^\[contention\]", read_text(path), re.M) is not None
    try:
        with open(path, "rb") as f:
            return "contention" in tomllib.load(f)
    except (OSError, ValueError):
        return False


STAGES = [
    Stage("setup", 45, 45, run=GpuCheck.setup),
    Stage("configure", 60, 30, run=GpuCheck.configure),
    Stage("build", 150, 90, run=GpuCheck.build, no_time="no time for the build"),
    Stage("tests", 150, 60, run=GpuCheck.tests, no_time="no time for the gpu tests"),
    Stage("sanitizer", 40, 0, run=GpuCheck.sanitizer, ready=GpuCheck.sanitizer_ready),
    Stage("bench", 40, 0, run=GpuCheck.bench, no_time="no time for the benchmarks"),
    Stage("step", 150, 75, run=GpuCheck.step, ready=GpuCheck.step_ready, no_time="no time for the step stage"),
    Stage("ncclpair", 30, 0, optional=True, run=GpuCheck.ncclpair,
          ready=lambda check: check.multi_rank_ready("ncclpair")),
    Stage("contention", 40, 0, optional=True, run=GpuCheck.contention,
          ready=lambda check: check.multi_rank_ready("contention")),
    Stage("torch", 60, 0, optional=True, run=GpuCheck.torch, ready=GpuCheck.torch_ready),
    Stage("finish", 10, 10),  # the verdict, summary.txt and the archive: GpuCheck.finish
]


def read_budget(env) -> Tuple[int, float]:
    """GPU_CHECK_BUDGET_S (420) and GPU_CHECK_WATCHDOG_S (the budget); ValueError when one is not a number, or the
    budget is under MIN_BUDGET_S (the setup stage, scaled, would have no time to find nvcc)."""
    try:
        budget_s = int(env.get("GPU_CHECK_BUDGET_S") or REFERENCE_BUDGET_S)
        watchdog_s = float(env.get("GPU_CHECK_WATCHDOG_S") or budget_s)
    except ValueError:
        raise ValueError("GPU_CHECK_BUDGET_S is whole seconds, GPU_CHECK_WATCHDOG_S seconds") from None
    if budget_s < MIN_BUDGET_S:
        raise ValueError("GPU_CHECK_BUDGET_S is %d; it must be at least %d" % (budget_s, MIN_BUDGET_S))
    return budget_s, watchdog_s


def main(argv: List[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: scripts/gpu_check.py OUTDIR [ARCHIVE]", file=sys.stderr)
        return 1
    try:
        budget_s, watchdog_s = read_budget(os.environ)
    except ValueError as e:
        print("gpu_check: %s" % e, file=sys.stderr)
        return 1
    out = os.path.abspath(argv[1])
    os.makedirs(out, exist_ok=True)
    archive = ""
    if len(argv) == 3 and argv[2]:
        archive = os.path.abspath(argv[2])
        os.makedirs(os.path.dirname(archive), exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    return GpuCheck(out, archive, root, STAGES, budget_s, watchdog_s).main()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
