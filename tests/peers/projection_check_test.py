"""lins_peers.projection_check, one small set (2 ranks as 2 nodes x 1, zero3, two rounds of one timed step, 2 profile
iterations): every input measured, every run launched once per round; the CSV holds per strategy a measured row,
whose parts (host_breakdown's) add up to its step, and two projected rows, one per value of DeepSpeed's module hooks'
cost (its gather path, a run of its own), each with its forward, backward and exposed communication, a positive
hooks' cost and its error against the measured step (each projection has a work profile of its own, so their order
is not asserted); bad options are refused. The times are reported, not judged. Skipped (77) without the peers'
Python."""

import csv
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from peers_python import found, peers_env, peers_python


def main():
    lins, port = sys.argv[1], sys.argv[2]
    python = peers_python()
    if not found(python):
        return 77
    env = peers_env()
    check = [python, "-m", "lins_peers.projection_check", "--lins", lins, "--python", python, "--port", port]
    with tempfile.TemporaryDirectory() as d:
        for bad, says in ((["--strategies", "zero2"], "valid: zero3, zeropp"),
                          (["--ranks", "2", "--gpus-per-node", "1", "--strategies", "zeropp"], "zeropp needs"),
                          (["--ranks", "3", "--gpus-per-node", "2"], "dividing"),
                          (["--rounds", "0"], "at least 1")):
            r = subprocess.run(check + bad + ["--out", d], env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode != 0 and says in r.stderr, (bad, r.stderr)
        done = subprocess.run(check + ["--ranks", "2", "--gpus-per-node", "1", "--strategies", "zero3", "--sets", "1",
                                       "--rounds", "2", "--steps", "1", "--ddp-steps", "1", "--profile-iters", "2",
                                       "--out", d], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = list(csv.DictReader(open(Path(d) / "projection_check.csv")))
        assert [(r["source"], r["strategy"], r["hooks"]) for r in rows] == [
            ("measured", "zero3", ""), ("projected", "zero3", "gather_path"), ("projected", "zero3", "run")], rows
        m = rows[0]
        measured = float(m["step_time_s"])
        assert 0 < measured < math.inf, m
        assert 0 <= float(m["gemm_spread"]) < math.inf, m
        assert float(m["gathers_per_step"]) > 0 and float(m["gather_wait_s"]) > 0 and float(m["engine_step_s"]) > 0, m
        parts = sum(float(m[k]) for k in ("gather_wait_s", "hooks_beside_waits_s", "reduce_scatter_s",
                                          "engine_step_s", "rest_s"))
        assert abs(parts - measured) < 1e-3, (parts, m)
        for p in rows[1:]:
            projected = float(p["step_time_s"])
            assert 0 < projected < math.inf, p
            assert float(p["forward_s"]) > 0 and float(p["backward_s"]) > 0 and float(p["exposed_comm_s"]) >= 0, p
            assert float(p["work_ms"]) > 0 and float(p["collectives_per_step"]) > 0, p
            assert float(p["ds_module_hooks_us"]) > 0, p
            assert abs(float(p["error_vs_measured"]) - (projected / measured - 1)) < 2e-3, p
        # every round launched every run: the checked run, the M = 4 run and both DDP calibrations, twice
        for run in ("ds", "ds_m4", "ddp_m2", "ddp_m4"):
            for r in (1, 2):
                assert (Path(d) / "set1" / f"{run}_r{r}.csv").exists(), (run, r)
        assert (Path(d) / "projection_check.provenance.json").exists()
        print(done.stdout.strip().splitlines()[0])
    print("projection check: one set measured and projected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
