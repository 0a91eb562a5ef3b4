#!/usr/bin/env python3
"""scripts/gpu_check.py rehearsed end to end on a machine without a GPU, in a copy of the tree of its own, with the
tools it runs replaced by gpu_check_fakes.py (so no real build is waited for):
  - the CMake path with the step stage on the CPU backend (GPU_CHECK_STEP_BACKEND=cpu): every stage in order, the gpu
    tests skipped and the benchmark finding no device (exit 77, "NO DEVICE"), the step's two runs (bf16 without
    --attention, which lins refuses off the GPU backend, then fp32) judged by gpu-check-verdict.py, the optional
    stages not run without a device, the archive and provenance.json written, the commit taken from COMMIT over a
    .git of the tree's own;
  - the same with a (fake) device that works: every stage passes (exit 0), the step's three runs (cudnn and flash
    attention, then fp32; or one bf16 run where lins has no --attention), two and four ranks through mpirun;
  - the nvcc-alone path (GPU_CHECK_STANDALONE=1): every kernel case skipped, exit 77;
  - a TERM during a stage (through scripts/gpu-check.sh, the wrapper): the stage's command and its process group
    stopped, the verdict FAIL naming the stage, the archive rewritten after it;
  - the watchdog (GPU_CHECK_WATCHDOG_S short): the same, from within; and, where the program is stuck and never
    handles the TERM, the watchdog's own last lines, archive and end;
  - usage errors.
Standard library only.

    test_gpu_check_rehearsal.py [SOURCE_DIR]
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
if len(sys.argv) > 1 and os.path.isdir(sys.argv[1]):
    SOURCE = os.path.abspath(sys.argv.pop(1))
FAKE_TOOLS = ["nvidia-smi", "cmake", "ninja", "ctest", "nvcc", "c++", "mpirun"]
STALE_COMMIT = "c0ffee1"


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def make_tree(top: str) -> str:
    """A tree with the check's scripts, empty sources where the nvcc build globs, a COMMIT file and a .git of its own
    whose commit is another one; and bin/ with the fake tools."""
    tree = os.path.join(top, "tree")
    os.makedirs(os.path.join(tree, "scripts"))
    for name in ("gpu_check.py", "gpu-check.sh", "gpu-check-verdict.py"):
        shutil.copy2(os.path.join(SOURCE, "scripts", name), os.path.join(tree, "scripts", name))
    for path in ("kernels/cuda/cast.cu", "kernels/cuda/gemm.cu", "kernels/cuda/attention_cudnn.cpp",
                 "kernels/cpu/reference.cpp",
                 "tests/gpu/kernels/kernels_gpu_test.cpp", "tests/gpu/kernels/standalone/cblas_reference.cpp",
                 "src/bench/bench_kernels_gpu.cu"):
        os.makedirs(os.path.dirname(os.path.join(tree, path)), exist_ok=True)
        open(os.path.join(tree, path), "w").close()
    if shutil.which("git"):
        git = ["git", "-C", tree, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
        subprocess.run(git + ["init", "-q"], check=True)
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", "stale"], check=True)
    with open(os.path.join(tree, "COMMIT"), "w") as f:
        f.write("commit=%s\nshort=%s\ndirty=false\ncode_dirty=false\nuntracked=0\ndate_utc=2026-01-01T00:00:00Z\n"
                % (STALE_COMMIT * 5 + "12345", STALE_COMMIT))
    bin_dir = os.path.join(top, "bin")
    os.makedirs(bin_dir)
    fakes = os.path.join(bin_dir, "gpu_check_fakes.py")
    shutil.copy2(os.path.join(HERE, "gpu_check_fakes.py"), fakes)
    os.chmod(fakes, 0o755)
    for tool in FAKE_TOOLS:
        os.symlink(fakes, os.path.join(bin_dir, tool))
    return tree


class Rehearsal(unittest.TestCase):
    def setUp(self):
        self.top = tempfile.mkdtemp(prefix="gpu-check-rehearsal-")
        self.tree = make_tree(self.top)
        self.out = os.path.join(self.top, "out")
        self.archive = os.path.join(self.top, "out.tar.gz")
        bin_dir = os.path.join(self.top, "bin")
        self.env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
                        CUDACXX=os.path.join(bin_dir, "nvcc"), CXX=os.path.join(bin_dir, "c++"),
                        PYTHONDONTWRITEBYTECODE="1", JOBS="2")
        for name in ("GPU_CHECK_BUDGET_S", "GPU_CHECK_WATCHDOG_S", "GPU_CHECK_STANDALONE", "GPU_CHECK_CARRY",
                     "GPU_CHECK_STEP_BACKEND", "GPU_CHECK_STEP_SHAPE", "STEP_ARGS", "BENCH_ARGS", "BUILD_DIR",
                     "NCCL_HOME"):
            self.env.pop(name, None)

    def tearDown(self):
        shutil.rmtree(self.top, ignore_errors=True)

    def start(self, program="gpu_check.py", **env):
        return subprocess.Popen([os.path.join(self.tree, "scripts", program), self.out, self.archive],
                                env=dict(self.env, **env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)

    def run_check(self, timeout=90, **env):
        p = self.start(**env)
        output, _ = p.communicate(timeout=timeout)
        return p.returncode, output

    def summary(self):
        return read(os.path.join(self.out, "summary.txt"))

    def assert_lines(self, text, lines):
        missing = [line for line in lines if line not in text]
        self.assertEqual(missing, [], "lines missing from summary.txt:\n%s" % text)

    def archived_summary(self):
        with tarfile.open(self.archive) as tar:
            return tar.extractfile("out/summary.txt").read().decode()

    def test_cmake_path_with_the_step_on_the_cpu(self):
        rc, output = self.run_check(GPU_CHECK_STEP_BACKEND="cpu", GPU_CHECK_STEP_SHAPE="--model small --layers 2 "
                                    "--seq 64 --micro-batch 1 --micro-batches 1 --peak-tflops 0.2")
        summary = self.summary()
        self.assertEqual(rc, 77, output)
        self.assert_lines(summary, [
            "nvidia-smi lists no GPU (rc=6: missing, or no device): GPU tests may skip",
            "library mpi: the machine's (/usr/lib/fake/mpi)",
            "configure (CMake 3.25.1, sm_90, tests ON, benchmarks ON)",
            "-- lins: NCCL 2.99.9 (fake)",
            "build the gpu tests and benchmark (ninja -j2 -k 0 gpu_step_test kernels_gpu_test "
            "bench_kernels_gpu,",
            "build mode: cmake, lins: build-gpu/lins, kernel tests: "
            "build-gpu/tests/gpu/kernels/kernels_gpu_test",
            "every gpu test skipped, and nvidia-smi lists no GPU: no device here",
            "bench_kernels_gpu found no CUDA device, and nvidia-smi lists none: no device here",
            "lins step --backend cpu: one bf16 run, without --attention (it chooses the GPU backend's kernels)",
            "lins step --backend cpu --precision bf16 --compute bf16 --model small",
            "lins step --backend cpu --precision fp32 --compute fp32 --model small",
            "verdict: PASS",
            "== step: ok in",
            "ncclpair: not run (no device, no lins or no mpirun)",
            "contention: not run (no device, no lins or no mpirun)",
            "torch: not run (no device)",
            "sanitizer  not needed (no kernel case failed)",
            "build=cmake build_ok=1 tests=0 bench=77 step=0 carried=[none]",
            "RESULT: NO DEVICE: the GPU code built; its tests skipped and the benchmarks and the step need "
            "a device (exit 77)"])
        self.assertRegex(summary, r"build lins \(ninja -j2 lins, limit \d+s\)")  # two thirds of the stage
        for stage in ("setup", "configure", "build", "tests", "bench", "step"):
            self.assertRegex(summary, r"\n\[gpu-check \+\d+s\]   %-10s limit +\d+s  used +\d+s  ok\n" % stage)
        self.assertNotIn("FAIL", summary)
        for folder in ("step-bf16", "step-fp32"):
            self.assertTrue(os.path.isfile(os.path.join(self.out, folder, "step.csv")), folder)
        self.assertIn("verdict: PASS", read(os.path.join(self.out, "step-verdict.txt")))
        self.assertEqual(self.archived_summary(), summary)
        self.assertFalse(os.path.exists(self.archive + ".part"))
        with open(os.path.join(self.out, "provenance.json")) as f:
            prov = json.load(f)
        self.assertEqual(prov["script"], "scripts/gpu_check.py")
        self.assertEqual(prov["git_commit"], STALE_COMMIT)  # COMMIT wins over the tree's own .git
        self.assertTrue(prov["commit_source"].startswith("COMMIT (2026-01-01T00:00:00Z"), prov["commit_source"])
        self.assertEqual(prov["nccl_env"]["NCCL_SOCKET_IFNAME"], "lo")
        self.assertIn("commit %s (from COMMIT (" % STALE_COMMIT, summary)

    def test_a_device_that_works(self):
        rc, output = self.run_check(FAKE_SMI="gpu")
        summary = self.summary()
        self.assertEqual(rc, 0, output)
        self.assert_lines(summary, [
            "GPU 0: Fake GPU (UUID: GPU-00000000-0000-0000-0000-000000000000)",
            "3/3 Test #3: gpu_step .........................   Passed",
            "bench_kernels_gpu (limit ",
            "lins step --backend gpu --precision bf16 --compute bf16 --attention cudnn --model llama-7b --layers 2 "
            "--seq 4096 --micro-batch 1 --micro-batches 1 --peak-tflops 989 (bf16 storage+compute, cuDNN "
            "attention), one rank (limit ",
            "lins step --backend gpu --precision bf16 --compute bf16 --attention flash --model llama-7b",
            "lins step --backend gpu --precision fp32 --compute fp32 --model llama-7b",
            "verdict: PASS (63 checks)",
            "ncclpair: two ranks on one GPU through NCCL: every op correct (nccl2.csv)",
            "contention: lins comm --contention on NCCL wrote contention.toml",
            "build=cmake build_ok=1 tests=0 bench=0 step=0 carried=[none]",
            "RESULT: PASS"])
        for stage in ("setup", "configure", "build", "tests", "bench", "step", "ncclpair", "contention"):
            self.assertRegex(summary, r"\n\[gpu-check \+\d+s\]   %-10s limit +\d+s  used +\d+s  ok\n" % stage)
        # PyTorch: where this Python has none with a CUDA device, skipped; else it ran, in this tree without
        # gpu-torch-compare.py, and failed: not fatal either way.
        self.assertRegex(summary, r"\n\[gpu-check \+\d+s\]   torch      limit +60s  used +\d+s  "
                                  r"(skipped \(no PyTorch with CUDA\)|failed \(not fatal\))\n")
        with open(os.path.join(self.out, "provenance.json")) as f:
            prov = json.load(f)
        self.assertEqual(prov["gpu"], ["Fake GPU, 580.0, 143771 MiB, 1980 MHz, 3201 MHz, 00000000:00:06.0"])
        self.assertEqual(prov["driver_cuda_version"], "13.0")

    def test_lins_without_the_attention_flag(self):
        rc, output = self.run_check(FAKE_SMI="gpu", FAKE_LINS_ATTENTION="0")
        summary = self.summary()
        self.assertEqual(rc, 0, output)
        self.assertIn("lins step --help lists no --attention: the cudnn and flash runs are skipped", summary)
        self.assertTrue(os.path.isfile(os.path.join(self.out, "step-bf16", "step.csv")))
        self.assertTrue(os.path.isfile(os.path.join(self.out, "step-fp32", "step.csv")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "step-bf16-cudnn")))

    def test_no_device_skips_the_gpu_step(self):
        rc, output = self.run_check()
        summary = self.summary()
        self.assertEqual(rc, 77, output)
        self.assertIn("step stage skipped: no CUDA device", summary)
        self.assertIn("step       skipped (no CUDA device)", summary)

    def test_nvcc_alone(self):
        rc, output = self.run_check(GPU_CHECK_STANDALONE="1")
        summary = self.summary()
        self.assertEqual(rc, 77, output)
        self.assert_lines(summary, [
            "libraries: not looked for (no CMake build: GPU_CHECK_STANDALONE=1)",
            "GPU_CHECK_STANDALONE=1: no CMake; the kernel tests and the benchmark with nvcc alone, no lins",
            "(blas: bundled reference sgemm;",
            "build mode: standalone, kernel tests: build-gpu/standalone/kernels_gpu_test",
            "gpu_kernels.cast: skipped", "gpu_kernels.fill: skipped",
            "every kernel case skipped, and nvidia-smi lists no GPU: no device here",
            "RESULT: NO DEVICE"])

    def wait_for_hung_tool(self, p, pid_file):
        deadline = time.monotonic() + 30
        while not os.path.exists(pid_file) or not read(pid_file):
            self.assertIsNone(p.poll(), "the check ended before the hung tool started")
            self.assertLess(time.monotonic(), deadline, "the hung tool never started")
            time.sleep(0.1)
        return int(read(pid_file))

    def assert_gone(self, pid):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                        return  # ended, not yet reaped
            except (FileNotFoundError, ProcessLookupError):
                return
            time.sleep(0.1)
        self.fail("process %d still runs" % pid)

    def test_term_stops_the_stage_and_writes_the_verdict(self):
        pid_file = os.path.join(self.top, "smi.pid")
        p = self.start("gpu-check.sh", FAKE_SMI="hang", FAKE_PID_FILE=pid_file)
        hung = self.wait_for_hung_tool(p, pid_file)
        started = time.monotonic()
        p.send_signal(signal.SIGTERM)
        output, _ = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 1, output)
        self.assertLess(time.monotonic() - started, 15)
        self.assert_gone(hung)
        summary = self.summary()
        self.assert_lines(summary, [
            "SIGTERM received during the setup stage: stopping it",
            "FAIL: stopped by SIGTERM during the setup stage at +",
            "setup      limit   45s  used    0s  stopped by SIGTERM",
            "RESULT: FAIL (1):"])
        self.assertNotIn("== configure", summary)
        self.assertEqual(self.archived_summary(), summary)

    def test_watchdog_stops_the_run_at_the_budget(self):
        pid_file = os.path.join(self.top, "smi.pid")
        rc, output = self.run_check(timeout=60, FAKE_SMI="hang", FAKE_PID_FILE=pid_file, GPU_CHECK_WATCHDOG_S="2")
        self.assertEqual(rc, 1, output)
        self.assert_gone(int(read(pid_file)))
        summary = self.summary()
        self.assert_lines(summary, [
            "watchdog: the budget (2s) is spent: stopping the script",
            "SIGTERM received during the setup stage: stopping it",
            "RESULT: FAIL (1):"])
        self.assertIn("RESULT: FAIL (1):", self.archived_summary())

    def test_watchdog_ends_a_program_that_does_not_stop(self):
        # A main thread stuck where no signal handler can run (TERM blocked), with a command running: the watchdog's
        # TERM goes unanswered, so after its grace (1 s here) it writes the last lines and the archive, kills the
        # command's group and ends the program itself.
        pid_file = os.path.join(self.top, "sleep.pid")
        program = """
import signal, subprocess, sys, threading, time
sys.path.insert(0, sys.argv[1])
import gpu_check
gpu_check.WATCHDOG_GRACE_S = 1
check = gpu_check.GpuCheck(sys.argv[2], sys.argv[3], sys.argv[4], gpu_check.STAGES, 420, 1.0)
open(check.summary, "w").close()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
check.stage_name = "build"
job = check.commands.start(["sleep", "60"], 100, subprocess.DEVNULL)
with open(sys.argv[5], "w") as f:
    f.write(str(job.popen.pid))
threading.Thread(target=check.watchdog, daemon=True).start()
time.sleep(60)  # stuck: the watchdog must end this
"""
        os.makedirs(self.out)
        p = subprocess.run([sys.executable, "-c", program, os.path.join(self.tree, "scripts"), self.out, self.archive,
                            self.tree, pid_file], env=self.env, cwd=self.tree, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assert_gone(int(read(pid_file)))
        summary = self.summary()
        self.assert_lines(summary, [
            "watchdog: the budget (1s) is spent: stopping the script",
            "watchdog: the script did not stop within 1s (in the build stage): ending it",
            "RESULT: FAIL: out of time in the build stage; the watchdog ended the script at +"])
        self.assertEqual(self.archived_summary(), summary)

    def test_usage(self):
        script = os.path.join(self.tree, "scripts", "gpu_check.py")
        p = subprocess.run([script], env=self.env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("usage: scripts/gpu_check.py OUTDIR [ARCHIVE]", p.stderr)
        p = subprocess.run([script, self.out], env=dict(self.env, GPU_CHECK_BUDGET_S="30"), capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("at least 60", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
