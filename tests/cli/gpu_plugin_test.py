#!/usr/bin/env python3
"""The GPU plugin from the outside: `lins` links no CUDA library, starts small, and says what is missing when the
plugin or its libraries are not there, while every CPU path keeps working.

  gpu_plugin_test.py LINS_BINARY PLUGIN_OR_NONE WORK_DIR

PLUGIN_OR_NONE is liblins_gpu.so of this build ("none" in a build without CUDA). Prints the start-up figures of
`lins --version` and `lins plan` (wall time and peak resident memory) as a report; they are not asserted.
"""
import os
import re
import shutil
import subprocess
import sys
import time

LINS, PLUGIN, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
FAILURES = []
CUDA_LIBS = re.compile(r"lib(cudart|cublas|cublasLt|nccl|cudnn|cuda)\b")


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def run(args, env_extra=None, timeout=120):
    env = dict(os.environ)
    env.pop("LINS_GPU_PLUGIN", None)
    env.update(env_extra or {})
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    p = subprocess.run([LINS] + args, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def needed_libraries(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def startup(args, runs=5):
    """Best wall time and largest peak resident set (KiB) of `lins ARGS` over a few runs."""
    best, rss_kib = float("inf"), 0
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.Popen([LINS] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        best = min(best, time.perf_counter() - t0)
        rss_kib = max(rss_kib, usage.ru_maxrss)
        if os.waitstatus_to_exitcode(status) != 0:
            check(False, "lins %s exits 0" % " ".join(args))
    return best, rss_kib


def main():
    os.makedirs(WORK, exist_ok=True)

    needed = needed_libraries(LINS)
    cuda = [n for n in needed if CUDA_LIBS.search(n)]
    check(not cuda, "lins links no CUDA, cuBLAS, cuDNN or NCCL library (NEEDED: %s)" % ", ".join(needed))

    t, rss = startup(["--version"])
    print("report: lins --version: %.1f ms, peak resident %.1f MB" % (t * 1e3, rss / 1024))
    t, rss = startup(["plan", "--model", "tiny", "--gpus-per-node", "2", "--nodes", "2", "--top", "3"])
    print("report: lins plan --model tiny on 2 x 2 GPUs: %.1f ms, peak resident %.1f MB" % (t * 1e3, rss / 1024))
    t, rss = startup(["plan", "--model", "llama-7b", "--top", "3"])
    print("report: lins plan --model llama-7b --top 3 (1024 GPUs): %.1f ms, peak resident %.1f MB" % (t * 1e3, rss / 1024))

    # No plugin: the GPU paths say so and name what to do; the CPU paths do not notice.
    missing = {"LINS_GPU_PLUGIN": os.path.join(WORK, "absent", "liblins_gpu.so")}
    rc, out = run(["step", "--backend", "gpu", "--model", "tiny", "--steps", "1", "--out", WORK + "/step"], missing)
    check(rc != 0 and "GPU plugin" in out and "not found" in out and "--backend cpu" in out,
          "--backend gpu without the plugin fails naming it and the CPU alternative: " + out.strip()[-300:])
    rc, out = run(["comm", "--backend", "nccl", "-b", "1K", "-e", "1K"], missing)
    check(rc != 0 and "GPU plugin" in out and "--backend mpi" in out,
          "--backend nccl without the plugin fails naming it: " + out.strip()[-200:])
    rc, out = run(["comm", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1"], missing)
    check(rc == 0 and "backend mpi" in out, "lins comm (--backend auto) without the plugin runs on MPI")
    rc, out = run(["step", "--model", "tiny", "--strategies", "ddp", "--steps", "1", "--out", WORK + "/cpu"], missing)
    check(rc == 0, "lins step on the CPU without the plugin runs (rc %d)" % rc)

    # A file that is no shared library: dlopen's own message, with the path.
    garbage = os.path.join(WORK, "garbage", "liblins_gpu.so")
    os.makedirs(os.path.dirname(garbage), exist_ok=True)
    with open(garbage, "w") as f:
        f.write("not a shared library\n")
    rc, out = run(["step", "--backend", "gpu", "--model", "tiny", "--steps", "1"], {"LINS_GPU_PLUGIN": garbage})
    check(rc != 0 and "cannot load the GPU plugin " + garbage in out,
          "a plugin that is not a shared library is refused with dlopen's reason: " + out.strip()[-200:])

    if PLUGIN == "none":
        print("skip: this build has no GPU plugin (no CUDA): the checks of the real module are not run")
        return finish()

    plugin_needed = needed_libraries(PLUGIN)
    check(any("libcudart" in n for n in plugin_needed) and any("libnccl" in n for n in plugin_needed),
          "the plugin carries the CUDA runtime and NCCL (NEEDED: %s)" % ", ".join(plugin_needed))

    # The real module loads: on a machine without a GPU it answers with the device probe, not a load error.
    rc, out = run(["step", "--backend", "gpu", "--model", "tiny", "--steps", "1", "--out", WORK + "/gpu"])
    if "CUDA device" in out and rc != 0:
        check("no CUDA device is visible" in out, "the plugin loads and its probe reports no device: " + out.strip())
    else:
        print("note: this machine has a working GPU (rc %d); the no-device message is not checked" % rc)

    # A library of the module missing: the same module with its NEEDED entry for NCCL renamed to a library no machine
    # has (the same length, so the file stays valid), as on a machine whose NCCL is not installed.
    with open(PLUGIN, "rb") as f:
        blob = f.read()
    nccl = next((n for n in plugin_needed if n.startswith("libnccl.so")), None)
    if nccl and blob.count(nccl.encode() + b"\0") == 1:
        absent = "libnXcl" + nccl[len("libnccl"):]
        cut = os.path.join(WORK, "cut", "liblins_gpu.so")
        os.makedirs(os.path.dirname(cut), exist_ok=True)
        with open(cut, "wb") as f:
            f.write(blob.replace(nccl.encode() + b"\0", absent.encode() + b"\0"))
        rc, out = run(["step", "--backend", "gpu", "--model", "tiny", "--steps", "1"], {"LINS_GPU_PLUGIN": cut})
        check(rc != 0 and absent + ": cannot open shared object file" in out and "LD_LIBRARY_PATH" in out,
              "a plugin whose NCCL library is missing is refused naming the library: " + out.strip()[-300:])
        rc, out = run(["step", "--model", "tiny", "--strategies", "ddp", "--steps", "1", "--out", WORK + "/cpu2"],
                      {"LINS_GPU_PLUGIN": cut})
        check(rc == 0, "lins step on the CPU beside a plugin that cannot load runs (rc %d)" % rc)
    else:
        check(False, "the plugin names %s once in its dynamic section" % nccl)

    # A module of another build: refused, naming both builds.
    stale = os.path.join(WORK, "stale", "liblins_gpu.so")
    os.makedirs(os.path.dirname(stale), exist_ok=True)
    rc, version = run(["--version"])
    m = re.search(r"lins (\S+) \(commit (\S+)\)", version)
    build = ("%s %s" % (m.group(1), m.group(2))).encode()
    if blob.count(build) >= 1:
        with open(stale, "wb") as f:
            f.write(blob.replace(build, build[:-1] + (b"X" if build[-1:] != b"X" else b"Y")))
        rc, out = run(["step", "--backend", "gpu", "--model", "tiny", "--steps", "1"], {"LINS_GPU_PLUGIN": stale})
        check(rc != 0 and "was built from lins" in out and "rebuild the target lins_gpu" in out,
              "a plugin of another build is refused: " + out.strip()[-300:])
    else:
        check(False, "the plugin holds its build string '%s'" % build.decode())
    shutil.rmtree(WORK, ignore_errors=True)
    return finish()


def finish():
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
