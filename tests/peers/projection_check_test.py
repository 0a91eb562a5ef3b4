"""lins_peers.projection_check, one small set (2 ranks as 2 nodes x 1, zero3, one timed step, 2 profile iterations):
every input measured, the CSV holds a measured and a projected row per strategy with positive times, the measured
row's parts (host_breakdown's) add up to its step, the projected row has its forward, backward and exposed
communication and its error is its own time against the measured one, and bad options are refused. The times are
reported, not judged. Skipped (77) without the peers' Python."""

import csv
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from peers_python import found, peers_python

REPO = Path(__file__).resolve().parents[2]


def main():
    lins, port = sys.argv[1], sys.argv[2]
    python = peers_python()
    if not found(python):
        return 77
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYTHONDONTWRITEBYTECODE="1")
    check = [python, "-m", "lins_peers.projection_check", "--lins", lins, "--python", python, "--port", port]
    with tempfile.TemporaryDirectory() as d:
        for bad, says in ((["--strategies", "zero2"], "valid: zero3, zeropp"),
                          (["--ranks", "2", "--gpus-per-node", "1", "--strategies", "zeropp"], "zeropp needs"),
                          (["--ranks", "3", "--gpus-per-node", "2"], "dividing")):
            r = subprocess.run(check + bad + ["--out", d], env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode != 0 and says in r.stderr, (bad, r.stderr)
        done = subprocess.run(check + ["--ranks", "2", "--gpus-per-node", "1", "--strategies", "zero3", "--sets", "1",
                                       "--steps", "1", "--profile-iters", "2", "--out", d], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = list(csv.DictReader(open(Path(d) / "projection_check.csv")))
        assert [(r["source"], r["strategy"]) for r in rows] == [("measured", "zero3"), ("projected", "zero3")], rows
        measured, projected = (float(r["step_time_s"]) for r in rows)
        assert 0 < measured < math.inf and 0 < projected < math.inf, rows
        m, p = rows
        assert float(m["gathers_per_step"]) > 0 and float(m["gather_wait_s"]) > 0 and float(m["engine_step_s"]) > 0, m
        parts = sum(float(m[k]) for k in ("gather_wait_s", "hooks_beside_waits_s", "reduce_scatter_s",
                                          "engine_step_s", "rest_s"))
        assert abs(parts - measured) < 1e-3, (parts, m)
        assert float(p["forward_s"]) > 0 and float(p["backward_s"]) > 0 and float(p["exposed_comm_s"]) >= 0, p
        assert float(p["work_ms"]) > 0 and float(p["ds_module_hooks_us"]) > 0 and float(p["collectives_per_step"]) > 0
        assert abs(float(p["error_vs_measured"]) - (projected / measured - 1)) < 2e-3, p
        assert (Path(d) / "projection_check.provenance.json").exists()
        print(done.stdout.strip().splitlines()[0])
    print("projection check: one set measured and projected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
