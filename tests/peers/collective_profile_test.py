"""lins_peers.collective_profile on 4 CPU ranks (gloo, 2 nodes x 2): every op on every mesh of the ranks, each point
a positive time, and `lins simulate --profile` reads the file; with --work-ms (2 ranks as 2 nodes x 1) the calls are
timed after each rank's work and the file says so; a bad --work-ms is refused. Skipped (77) without the peers' Python."""

import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from peers_python import found, peers_env, peers_python, torchrun


def main():
    lins, port = sys.argv[1], sys.argv[2]
    python = peers_python()
    if not found(python):
        return 77
    env = peers_env()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "profile.csv"
        subprocess.run(torchrun(python, 4, port, Path(d) / "torchrun")
                       + ["-m", "lins_peers.collective_profile", "--gpus-per-node", "2", "-b", "4K", "-e", "16K", "-n",
                          "3", "-w", "1", "--out", str(out)], env=env, check=True, timeout=240)
        lines = [ln for ln in out.read_text().splitlines() if not ln.startswith("#")]
        rows = list(csv.DictReader(lines))
        seen = {(r["op"], r["mesh_intra"], r["mesh_inter"]) for r in rows}
        want = {(op, a, b) for op in ("all_gather", "reduce_scatter", "all_reduce", "broadcast")
                for a, b in (("2", "1"), ("1", "2"), ("2", "2"))}
        assert seen == want, f"points {sorted(seen)}, expected {sorted(want)}"
        assert len(rows) == 3 * len(want), len(rows)
        assert all(float(r["time_s"]) > 0 for r in rows)
        sim = subprocess.run([lins, "simulate", "--model", "tiny", "--gpus", "4", "--gpus-per-node", "2", "--seq",
                              "64", "--micro-batches", "2", "--profile", str(out), "--strategies", "zero3,ddp",
                              "-o", str(Path(d) / "proj.csv")], capture_output=True, text=True)
        assert sim.returncode in (0, 1), sim.stderr  # 1: nothing fits the default memory (not the point here)
        assert (Path(d) / "proj.csv").exists(), sim.stdout + sim.stderr
        work = Path(d) / "work.csv"
        subprocess.run(torchrun(python, 2, port, Path(d) / "torchrun")
                       + ["-m", "lins_peers.collective_profile", "--gpus-per-node", "1", "-b", "4K", "-e", "8K", "-n",
                          "3", "-w", "1", "--work-ms", "0.5", "--out", str(work)], env=env, check=True, timeout=240)
        text = work.read_text()
        assert "the mean rank's median wait after its work" in text, text[:400]
        prov = json.loads(next(ln for ln in text.splitlines() if ln.startswith("# provenance: "))[len("# provenance: "):])
        assert prov["work_ms_before_each_call"] == 0.5 and prov["work_steps"] >= 1, prov
        rows = list(csv.DictReader(ln for ln in text.splitlines() if not ln.startswith("#")))
        assert {(r["op"], r["mesh_intra"], r["mesh_inter"]) for r in rows} == {
            (op, "1", "2") for op in ("all_gather", "reduce_scatter", "all_reduce", "broadcast")}, rows
        assert len(rows) == 8 and all(float(r["time_s"]) > 0 for r in rows), rows
        bad = subprocess.run([python, "-m", "lins_peers.collective_profile", "--gpus-per-node", "1", "--work-ms",
                              "-1", "--out", str(Path(d) / "bad.csv")], env=env, capture_output=True, text=True,
                             timeout=120)
        assert bad.returncode != 0 and "--work-ms" in bad.stderr, bad.stderr
        assert not (Path(d) / "bad.csv").exists()
    print("collective profile: every op and mesh measured, read by lins simulate; --work-ms times the wait after "
          "work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
