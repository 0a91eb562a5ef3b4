"""The files a peer run writes: lins's step CSV (the columns of src/core/output/results_schema.h, as `lins schema`
prints them), a JSON provenance file beside it, and the collective log. Like lins, a run writes NAME.csv.partial and
renames it when complete."""

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import lins_schema

from . import recorder

# The checkout this package runs from (the package is installed editable, or found through PYTHONPATH): its git
# commit goes into the provenance.
_REPO = Path(__file__).resolve().parents[2]

STEP_COLUMNS: List[str] = lins_schema.columns("step")

# The lins plan each peer strategy stands for (the six sharding factors of `lins step`'s presets, read from the
# preset table `lins schema` prints; R = ranks per node, N = nodes); the figures place a peer row beside the lins
# strategy of the same plan.
def preset_plan(preset: str, r: int, n: int) -> Dict[str, object]:
    f = lins_schema.preset_factors(preset, r, n)
    p, g, os_, hpz = f["p"], f["g"], f["os"], f["hpz"]
    text = f"p={p[0]}x{p[1]},g={g[0]}x{g[1]},os={os_[0]}x{os_[1]}" + (f",hpz={hpz}" if hpz else "")
    return {"plan": text, "s0_p": p[0], "s1_p": p[1], "s0_g": g[0], "s1_g": g[1], "s0_os": os_[0],
            "s1_os": os_[1], "os_layout": "inter_tensor"}


def flops_per_token(config, seq: int) -> float:
    """The Megatron formula lins's mfu column uses (ModelSpec::flops_per_token), as `lins schema` gives it."""
    return lins_schema.flops_per_token(config, seq)


def causal_flops_per_token(config, seq: int) -> float:
    """The same with causal attention's half of the score and value products (ModelSpec::causal_flops_per_token)."""
    return lins_schema.flops_per_token(config, seq, causal=True)


class StepCsv:
    """Rows by column name, written in schema order; unknown names are an error, missing ones stay empty."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.partial = Path(str(self.path) + ".partial")
        self.rows: List[Dict[str, object]] = []

    def add(self, row: Dict[str, object]) -> None:
        unknown = sorted(set(row) - set(STEP_COLUMNS))
        if unknown:
            raise KeyError(f"not a step CSV column: {', '.join(unknown)}")
        self.rows.append(row)

    def write(self) -> None:
        import csv

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.partial, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(STEP_COLUMNS)
            for row in self.rows:
                w.writerow([_fmt(row.get(c, "")) for c in STEP_COLUMNS])
        os.replace(self.partial, self.path)


def _fmt(v) -> str:
    if isinstance(v, float):
        return repr(v) if v == v else ""
    return str(v)


def versions() -> Dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("torch", "deepspeed", "numpy"):
        module = sys.modules.get(name)
        if module is not None:
            out[name] = getattr(module, "__version__", "")
    try:
        import torch

        out["cuda"] = torch.version.cuda or ""
        if torch.cuda.is_available():
            out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
            out["gpu"] = torch.cuda.get_device_name()
    except Exception:  # noqa: BLE001 -- provenance must not fail a run
        pass
    return out


def git_commit() -> str:
    """HEAD of the checkout, with -dirty when tracked files outside data/ differ from it (measured results are not
    code), as the C++ side's provenance says it (cmake/git_commit.cmake)."""
    head = _REPO / ".git"
    try:
        import subprocess

        def git(*argv):
            return subprocess.run(["git", "-C", str(_REPO), *argv], capture_output=True, text=True,
                                  timeout=10).stdout.strip()

        commit = git("rev-parse", "HEAD")
        if commit and git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)data"):
            commit += "-dirty"
        return commit
    except Exception:  # noqa: BLE001
        return "" if not head.exists() else "unknown"


def write_provenance(path: Path, argv: Sequence[str], hosts: Sequence[str], world: int, launcher: str,
                     run: Dict[str, object]) -> None:
    env_keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "DS_ACCELERATOR", "NCCL_ALGO", "NCCL_PROTO",
                "MASTER_ADDR", "SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES")
    doc = {
        "command": list(argv),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": versions(),
        "git_commit": git_commit(),
        "hosts": sorted(set(hosts)),
        "host_of_rank": list(hosts),
        "world_size": world,
        "launcher": launcher,
        "environment": {k: os.environ[k] for k in env_keys if k in os.environ},
        "run": run,
    }
    Path(path).write_text(json.dumps(doc, indent=2, default=str) + "\n")


def write_collectives(path: Path, rows: Sequence[Sequence]) -> None:
    recorder.write_log(str(path), rows)
