#!/usr/bin/env python3
"""Stand-ins for the tools scripts/gpu_check.py runs, for its rehearsals on a machine without a GPU (and without
waiting for a real build): one program that acts as the tool it is named as (a link to it named cmake, ninja, ctest,
nvidia-smi, nvcc, c++, lins, kernels_gpu_test or bench_kernels_gpu). Each does the least that lets the check's logic
run: CMake "finds" every library and the CUDA/NCCL path, ninja "builds" a target by linking this program under the
target's name, `lins step` writes a step CSV that gpu-check-verdict.py accepts (and refuses --attention off the GPU
backend, as lins does), `lins comm` writes a correct CSV or a contention table, mpirun runs its command once per rank.
Without a device the GPU binaries exit 77 and ctest reports the gpu tests skipped; with the fake one they pass.

Environment: FAKE_SMI (none: no device, the default; gpu: nvidia-smi lists one, and the tests and benchmarks pass;
hang: write the pid to FAKE_PID_FILE and sleep, as a hung driver would), FAKE_LINS_ATTENTION (1: `lins step --help`
lists --attention; 0: it does not).
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
GPU_TESTS = ["gpu_kernels.cast", "gpu_kernels.fill", "gpu_step"]


def have_gpu() -> bool:
    return os.environ.get("FAKE_SMI") == "gpu"


def link_as(path: str) -> None:
    """The target `path`, "built": a link to this program, which acts as what its name says."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if os.path.lexists(path):
        os.remove(path)
    os.symlink(HERE, path)


def value_of(argv, flag, default=None):
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else default


def nvidia_smi(argv):
    if os.environ.get("FAKE_SMI") == "hang":
        with open(os.environ["FAKE_PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)
        return 0
    if have_gpu():
        if "-L" in argv:
            print("GPU 0: Fake GPU (UUID: GPU-00000000-0000-0000-0000-000000000000)")
        elif any(a.startswith("--query-gpu=") for a in argv):
            print("Fake GPU, 580.0, 143771 MiB, 1980 MHz, 3201 MHz, 00000000:00:06.0")
        else:
            print("| NVIDIA-SMI 580.0    Driver Version: 580.0    CUDA Version: 13.0 |")
        return 0
    print("No devices were found")
    return 6


def cmake(argv):
    if "--version" in argv:
        print("cmake version 3.25.1")
        return 0
    source, build = value_of(argv, "-S"), value_of(argv, "-B")
    if source == "cmake/probe":
        for name in ("mpi", "openblas", "gtest", "benchmark", "formats"):
            print("-- lins-probe: %s=1 /usr/lib/fake/%s" % (name, name))
        print("-- lins-probe: cudnn_frontend=0\n-- lins-probe: cudnn=0")
        return 0
    # The project's configure: the CUDA/NCCL path, and a CTestTestfile naming the gpu tests' executables.
    tests_dir = os.path.join(build, "tests", "gpu")
    os.makedirs(tests_dir, exist_ok=True)
    exe = os.path.realpath(os.path.join(build, "tests", "gpu", "kernels", "kernels_gpu_test"))
    with open(os.path.join(tests_dir, "CTestTestfile.cmake"), "w") as f:
        for name in GPU_TESTS[:2]:
            f.write('add_test([=[%s]=] "%s" "%s")\n' % (name, exe, name.split(".")[1]))
        f.write('add_test([=[gpu_step]=] "%s")\n'
                % os.path.realpath(os.path.join(build, "tests", "gpu", "train", "gpu_step_test")))
    print("-- lins: NCCL 2.99.9 (fake)\n-- lins: CUDA/NCCL path ON")
    return 0


NINJA_TARGETS = {"lins": "lins", "kernels_gpu_test": "tests/gpu/kernels/kernels_gpu_test",
                 "gpu_step_test": "tests/gpu/train/gpu_step_test", "bench_kernels_gpu": "bench/bench_kernels_gpu"}


def ninja(argv):
    if "--version" in argv:
        print("1.11.1")
        return 0
    build = value_of(argv, "-C", ".")
    if "-t" in argv:
        for target in NINJA_TARGETS:
            print("%s: phony" % target)
        return 0
    targets = [a for i, a in enumerate(argv) if a in NINJA_TARGETS and argv[i - 1] not in ("-C", "-j", "-k")]
    for i, target in enumerate(targets):
        link_as(os.path.join(build, NINJA_TARGETS[target]))
        print("[%d/%d] Linking CXX executable %s" % (i + 1, len(targets), NINJA_TARGETS[target]))
    return 0


def ctest(argv):
    if "--show-only=json-v1" in argv:
        print(json.dumps({"kind": "ctestInfo", "tests": [{"name": n} for n in GPU_TESTS]}))
        return 0
    result = "   Passed" if have_gpu() else "***Skipped"
    for i, name in enumerate(GPU_TESTS):
        print("    Start %d: %s" % (i + 1, name))
        print("%d/%d Test #%d: %s .........................%s   0.01 sec" % (i + 1, len(GPU_TESTS), i + 1, name,
                                                                            result))
    print("\n100%% tests passed, 0 tests failed out of %d" % len(GPU_TESTS))
    return 0


def compiler(argv):
    """nvcc and c++: no system cblas.h (-E fails); otherwise the output named by -o is made."""
    if "--version" in argv:
        print("fake compiler 1.0")
        return 0
    if "-E" in argv:
        return 1
    out = value_of(argv, "-o")
    if out and os.path.basename(out) in ("kernels_gpu_test", "bench_kernels_gpu"):
        link_as(out)
    elif out and out != "/dev/null":
        open(out, "w").close()
    return 0


def kernels_gpu_test(argv):
    if "--list" in argv:
        print("cast fill")
        return 0
    if have_gpu():
        return 0
    print("no CUDA device: skipped")
    return 77


def bench_kernels_gpu(argv):
    if have_gpu():
        print("cast_fp32_to_bf16        n=1   1.0 us   1.0 GB/s (100% of copy)")
        return 0
    print("bench_kernels_gpu: no CUDA device")
    return 77


def mpirun(argv):
    """Runs the command after the options once per rank, one after the other, each with its OMPI_COMM_WORLD_RANK."""
    ranks, i = 1, 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "-np":
            ranks = int(argv[i + 1])
        i += 2 if argv[i] in ("-np", "-x") else 1
    status = 0
    for rank in range(ranks):
        env = dict(os.environ, OMPI_COMM_WORLD_RANK=str(rank))
        status = status or subprocess.run(argv[i:], env=env).returncode
    return status


def lins(argv):
    if argv[:1] == ["step"] and "--help" in argv:
        attention = "  --attention cudnn|flash   the attention kernels\n" \
            if os.environ.get("FAKE_LINS_ATTENTION", "1") == "1" else ""
        print("usage: lins step [options]\n  --backend cpu|gpu\n%s  --precision fp32|bf16" % attention)
        return 0
    if argv[:1] == ["comm"]:
        if "--csv" in argv:
            with open(value_of(argv, "--csv"), "w") as f:
                f.write("op,ranks,bytes,wrong_elems\nall_reduce,2,1024,0\nbroadcast,2,1024,0\n")
        if "--contention" in argv:
            with open(value_of(argv, "--contention"), "w") as f:
                f.write("[contention]\nkappa_gemm_intra = 0.1\n")
        print("fake lins comm on rank %s" % os.environ.get("OMPI_COMM_WORLD_RANK"))
        return 0
    if argv[:1] != ["step"]:
        print("fake lins: only `step` and `comm` are rehearsed", file=sys.stderr)
        return 2
    if "--attention" in argv and value_of(argv, "--backend") != "gpu":
        print("lins step: --attention chooses the GPU's attention kernels; it needs --backend gpu")
        return 2
    out = value_of(argv, "--out")
    os.makedirs(out, exist_ok=True)
    precision = value_of(argv, "--precision", "bf16")
    columns = ["strategy", "model", "backend", "precision", "compute", "step", "step_time_s", "forward_s",
               "backward_s", "optimizer_s", "exposed_comm_s", "loss", "mfu", "peak_mem_bytes", "model_mem_bytes"]
    with open(os.path.join(out, "step.csv"), "w") as f:
        f.write(",".join(columns) + "\n")
        for strategy in ("ddp", "zero3", "lins"):
            for step in range(3):
                f.write(",".join([strategy, value_of(argv, "--model", "small"), value_of(argv, "--backend"),
                                  precision, value_of(argv, "--compute", precision), str(step), "0.05", "0.01",
                                  "0.03", "0.005", "0", "%.4f" % (6.2 - 0.01 * step), "0.3", "1048576",
                                  "1100000"]) + "\n")
    print("wrote %s/step.csv" % out)
    return 0


TOOLS = {"nvidia-smi": nvidia_smi, "cmake": cmake, "ninja": ninja, "ctest": ctest, "nvcc": compiler,
         "c++": compiler, "kernels_gpu_test": kernels_gpu_test, "bench_kernels_gpu": bench_kernels_gpu,
         "mpirun": mpirun, "lins": lins}

if __name__ == "__main__":
    sys.exit(TOOLS[os.path.basename(sys.argv[0])](sys.argv[1:]))
