"""How close `lins simulate` comes to a real DeepSpeed run on this machine: every input of the projection measured in
the same set as the run it predicts, then the projection against the run's step time.

    python -m lins_peers.projection_check --ranks 4 --gpus-per-node 2 --strategies zero3,zeropp --sets 3 --out DIR

One set, in this order (each launched with torchrun on this host, the small model, seq 128, bf16, DeepSpeed's
comparison settings; steps 2 to 4 in --rounds rounds, each round launching every run once, so that one launch's
own speed, which moves by up to 25% between launches of one command here, and the machine's drift fall on the
calibration and the checked run alike):
  1. the collectives back to back (collective_profile);
  2. torch DDP at M = 2 and 4, lins's compute calibration (`--calibrate-as ddp`, every round's rows);
  3. a DeepSpeed run at M = 4 for the hooks' cost of item 4, then the checked DeepSpeed run at M = 2 (deepspeed_zero
     under host_breakdown's timers, a few hundred perf_counter pairs per step, well under a millisecond): the
     measured step, the median over the rounds' steps of the slowest rank; and where it went (host_breakdown, the
     median over rounds, ranks and steps): the gathers' waits, the hooks' own work beside them, the reduce-scatter
     calls, DeepSpeed's optimizer step (engine.step), and the rest of the step;
  4. ZeRO-3's module hooks on DeepSpeed's gather path (host_costs --ds-hook-group RANKS) into a copy of data/host,
     whose other rows host_costs keeps; and a second value of the same cost from the DeepSpeed runs at M = 4 (out of
     sample in the micro-batches): their host time per module and pass (`run_module_host_s` below);
  5. per strategy and value of the hooks' cost (`hooks` = `gather_path`, `run`), the projection with the
     back-to-back profile, and from it W, the step's work between two collectives: (step - exposed communication) /
     the collectives a rank issues per step (the run's own collectives.csv);
  6. the collectives priced after W ms of work (collective_profile --work-ms W), and the projection with that
     profile: the one compared.
Writes DIR/projection_check.csv (per set and strategy a `measured` row with its parts and the spread of the GEMM rate
its launches measured (gemm_spread: how steady the machine was during the set), and two `projected` ones, one
per value of the hooks' cost, with the projection's forward, backward, optimizer, exposed communication, host work
and host stall) and its provenance; every set's files stay in DIR/setK. Reports; asserts nothing about the times.
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECTED_PARTS = ["forward_s", "backward_s", "optimizer_s", "exposed_comm_s", "host_work_s", "host_stall_s"]
MEASURED_PARTS = ["gathers_per_step", "gather_wait_s", "hooks_beside_waits_s", "reduce_scatter_s", "engine_step_s",
                  "rest_s"]
SIM_FLAGS = ["--model", "small", "--seq", "128", "--micro-batches", "2", "--ds-prefetch-bucket", "0",
             "--ds-max-reuse-distance", "0", "--ds-persistence-threshold", "0", "--host-model", "today",
             "--host-device", "cpu"]


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def measured_step_s(paths, strategy):
    """The median over steps (of every file in `paths`, one per launch) of the slowest rank's step time of `strategy`
    in a runner's CSV."""
    steps = []
    for path in paths:
        by_step = {}
        for r in rows_of(path):
            if r["source"] == "measured" and r["strategy"].split(":")[-1] == strategy:
                by_step[r["step"]] = max(by_step.get(r["step"], 0.0), float(r["step_time_s"]))
        if not by_step:
            raise SystemExit(f"{path} has no measured row of {strategy}")
        steps += by_step.values()
    return statistics.median(steps)


def collectives_per_step(path, strategy):
    """Collectives rank 0 issued per timed step of `strategy` (the runner's NAME.collectives.csv)."""
    steps = {}
    for r in rows_of(path):
        if r["strategy"] == strategy and r["rank"] == "0":
            steps[r["step"]] = steps.get(r["step"], 0) + 1
    if not steps:
        raise SystemExit(f"{path} has no collective of {strategy} on rank 0")
    return statistics.median(steps.values())


def gemm_spread(paths):
    """How steady the machine was over the launches `paths` (runner CSVs): the spread of the GEMM rate each launch
    measures before its first step (gemm_tflops), (max - min) / median. On a shared or throttled host it moves by up
    to 2x within a minute, and a set that saw it move by more than a 20% band cannot check a projection to 20%."""
    rates = [float(rows_of(p)[0]["gemm_tflops"]) for p in paths]
    return (max(rates) - min(rates)) / statistics.median(rates)


def breakdown_counters(folder, names, strategy):
    """host_breakdown's counters of `strategy` per (launch, rank, step), from the launches `names` in `folder`."""
    per = {}
    for name in names:
        for path in sorted(folder.glob(f"{name}.host_breakdown.rank*.csv")):
            for r in rows_of(path):
                if r["strategy"].split(":")[-1] == strategy:
                    per.setdefault((name, r["rank"], r["step"]), {})[r["counter"]] = float(r["value"])
    if not per:
        raise SystemExit(f"{folder}: no host_breakdown rows of {strategy} in {', '.join(names)}")
    return per


def measured_parts(folder, names, strategy, step_s):
    """Where the measured step went: host_breakdown's counters of `strategy`, each the median over launches, ranks
    and steps."""
    per = breakdown_counters(folder, names, strategy)

    def median(f):
        return statistics.median(f(c) for c in per.values())

    parts = {"gathers_per_step": median(lambda c: c.get("gathers", 0.0)),
             "gather_wait_s": median(lambda c: c.get("gather_wait", 0.0)),
             "hooks_beside_waits_s": median(lambda c: c.get("fwd_hooks", 0.0) + c.get("bwd_hooks", 0.0)
                                            - c.get("gather_wait", 0.0)),
             "reduce_scatter_s": median(lambda c: c.get("rs_call", 0.0)),
             "engine_step_s": median(lambda c: c.get("engine_step", 0.0))}
    parts["rest_s"] = step_s - sum(v for k, v in parts.items() if k.endswith("_s"))
    return parts


def run_module_host_s(folder, launches, strategy):
    """DeepSpeed's host time per module and pass in runs of their own (host_breakdown's counters, median over launches,
    ranks and steps): what its forward, backward and step take beyond torch DDP's forward, backward and optimizer of
    the same model and micro-batches and beyond its collectives' waits, over the module passes its hooks ran for.
    `launches` pairs each DeepSpeed launch's name with the torch DDP CSV launched beside it (its median over steps).
    DDP's own exposed all-reduce stays in DDP's backward, so this is a little low."""
    values = []
    for name, ddp_csv in launches:
        ddp = rows_of(ddp_csv)
        torch_s = statistics.median(float(r["forward_s"]) + float(r["backward_s"]) + float(r["optimizer_s"])
                                    for r in ddp)
        values += [(c["engine_forward"] + c["engine_backward"] + c["engine_step"] - c["gather_wait"]
                    - c.get("rs_wire", 0.0) - torch_s) / (c["modules_fwd"] + c["modules_bwd"])
                   for c in breakdown_counters(folder, [name], strategy).values()]
    if statistics.median(values) <= 0:
        raise SystemExit(f"{folder}: the DeepSpeed {strategy} step took no longer than torch DDP's compute beyond its "
                         f"waits ({statistics.median(values) * 1e6:.0f} us per module and pass); measure more steps")
    return statistics.median(values)


def with_module_hooks(src, dst, a_s, source):
    """A copy of the host-costs file `src` whose ds_module_hooks row is `a_s` per module and pass."""
    with open(src, newline="") as f:
        table = list(csv.DictReader(f))
    for r in table:
        if r["kind"] == "ds_module_hooks":
            r.update(a_s=f"{a_s:.4e}", b_s="0.000e+00", max_rel_error="0.000", source=source)
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(table)
    return dst


def as_ddp(src, dst):
    """A copy of a torch DDP run's CSV with its engine column named ddp, for lins simulate --calibrate-as ddp; returns
    `dst`."""
    with open(src, newline="") as f:
        lines = f.read().splitlines(True)
    comments = [ln for ln in lines if ln.startswith("#")]
    table = list(csv.reader(ln for ln in lines if not ln.startswith("#")))
    i = table[0].index("engine")
    for r in table[1:]:
        r[i] = "ddp"
    with open(dst, "w", newline="") as f:
        f.writelines(comments)
        csv.writer(f, lineterminator="\n").writerows(table)
    return dst


class Set:
    def __init__(self, args, folder, env):
        self.args, self.dir, self.env = args, folder, env
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = open(self.dir / "log.txt", "w")
        self.calibration = []  # the torch DDP CSVs lins simulate calibrates compute from

    def run(self, *argv, torchrun=True):
        cmd = [self.args.python]
        if torchrun:
            # torchrun's own logs in the set's folder (left to itself, it makes a folder in the temporary directory
            # per launch and never removes it)
            cmd += ["-m", "torch.distributed.run", "--nproc-per-node", str(self.args.ranks), "--master-port",
                    str(self.args.port), "--log-dir", str(self.dir / "torchrun")]
        cmd += ["-m"] + [str(a) for a in argv]
        self.log.write("$ " + " ".join(cmd) + "\n")
        self.log.flush()
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, timeout=900)
        if done.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}); see {self.dir / 'log.txt'}")
        self.log.write(f"# {time.perf_counter() - t0:.1f} s\n")

    def profile(self, name, work_ms=0.0):
        extra = ["--work-ms", f"{work_ms:.3g}"] if work_ms else []
        self.run("lins_peers.collective_profile", "--gpus-per-node", self.args.gpus_per_node, "-e", "4M", "-n",
                 self.args.profile_iters, *extra, "--out", self.dir / name)
        return self.dir / name

    def simulate(self, strategy, profile, host_costs):
        out = self.dir / f"sim_{strategy}_{profile.stem}.csv"
        cmd = [self.args.lins, "simulate", *SIM_FLAGS, "--gpus", str(self.args.ranks), "--gpus-per-node",
               str(self.args.gpus_per_node), "--profile", str(profile), "--calibrate",
               ",".join(str(p) for p in self.calibration), "--calibrate-as", "ddp",
               "--strategies", strategy, "--host-costs", str(host_costs), "-o", str(out)]
        self.log.write("$ " + " ".join(cmd) + "\n")
        done = subprocess.run(cmd, capture_output=True, text=True)
        self.log.write(done.stdout + done.stderr)
        if done.returncode:
            raise SystemExit(f"lins simulate failed ({done.returncode}): {done.stderr.strip()}")
        return rows_of(out)[0]


def one_set(args, k, env):
    s = Set(args, Path(args.out) / f"set{k}", env)
    a = args
    common = ["--model", "small", "--seq", "128", "--gpus-per-node", a.gpus_per_node, "--out", s.dir]
    back_to_back = s.profile("gloo.csv")
    # Each run is launched once per round, the rounds one after another, so that a launch's own speed (it moves by
    # up to 25% between launches of one command on this machine) and the machine's drift are shared by the
    # calibration and the checked run.
    rounds = range(1, a.rounds + 1)
    for r in rounds:
        for m in (2, 4):
            s.run("lins_peers.ddp", *common, "--micro-batches", m, "--warmup", 2, "--steps", a.ddp_steps, "--name",
                  f"ddp_m{m}_r{r}")
            s.calibration.append(as_ddp(s.dir / f"ddp_m{m}_r{r}.csv", s.dir / f"ddp_m{m}_r{r}_as_ddp.csv"))
        s.run("lins_peers.host_breakdown", *common, "--micro-batches", 4, "--warmup", 2, "--steps", a.steps,
              "--strategies", ",".join(a.strategies), "--name", f"ds_m4_r{r}")
        s.run("lins_peers.host_breakdown", *common, "--micro-batches", 2, "--warmup", 2, "--steps", a.steps,
              "--strategies", ",".join(a.strategies), "--name", f"ds_r{r}")
    checked = [f"ds_r{r}" for r in rounds]
    spread = gemm_spread([s.dir / f"{n}_r{r}.csv" for n in ("ddp_m2", "ddp_m4", "ds_m4", "ds") for r in rounds])
    # host_costs keeps the rows of the kinds it does not measure from its --out folder: the built-in costs
    shutil.copytree(REPO / "data" / "host", s.dir / "hooks", dirs_exist_ok=True)
    s.run("lins_peers.host_costs", "--out", s.dir / "hooks", "--kinds", "ds_module_hooks", "--hook-steps", 20,
          "--ds-hook-group", a.ranks, torchrun=False)
    host_costs = s.dir / "hooks" / "host_costs.csv"
    hooks_s = next(float(r["a_s"]) for r in rows_of(host_costs) if r["kind"] == "ds_module_hooks")
    rows = []
    for strategy in a.strategies:
        calls = collectives_per_step(s.dir / "ds_r1.collectives.csv", strategy)
        measured = measured_step_s([s.dir / f"{n}.csv" for n in checked], strategy)
        parts = measured_parts(s.dir, checked, strategy, measured)
        place = {"set": k, "ranks": a.ranks, "gpus_per_node": a.gpus_per_node, "strategy": strategy}
        rows.append({"source": "measured", **place, "step_time_s": f"{measured:.4f}", "gemm_spread": f"{spread:.3f}",
                     **{key: f"{v:.4f}" if key.endswith("_s") else f"{v:g}" for key, v in parts.items()}})
        print(f"set {k} {strategy}: measured {measured:.3f} s: {parts['gathers_per_step']:g} gathers waited "
              f"{parts['gather_wait_s']:.3f} s, hooks beside them {parts['hooks_beside_waits_s']:.3f} s, "
              f"reduce-scatter {parts['reduce_scatter_s']:.3f} s, engine.step {parts['engine_step_s']:.3f} s, "
              f"the rest {parts['rest_s']:.3f} s; the launches' GEMM rate spread {spread:.0%}", flush=True)
        run_s = run_module_host_s(s.dir, [(f"ds_m4_r{r}", s.dir / f"ddp_m4_r{r}.csv") for r in rounds], strategy)
        run_costs = with_module_hooks(
            host_costs, s.dir / f"host_costs_run_{strategy}.csv", run_s,
            f"host time per module and pass of a DeepSpeed {strategy} run at M = 4 (lins_peers.projection_check)")
        for hooks, costs, per_pass in (("gather_path", host_costs, hooks_s), ("run", run_costs, run_s)):
            b2b = s.simulate(strategy, back_to_back, costs)
            step0 = float(b2b["step_time_s"])
            work_ms = (step0 - float(b2b["exposed_comm_s"])) / calls * 1e3
            sim = s.simulate(strategy, s.profile(f"gloo_{strategy}_{hooks}_work.csv", work_ms), costs)
            step = float(sim["step_time_s"])
            rows.append({"source": "projected", **place, "hooks": hooks, "step_time_s": f"{step:.4f}",
                         "back_to_back_step_time_s": f"{step0:.4f}", "collectives_per_step": calls,
                         "work_ms": f"{work_ms:.3f}", "ds_module_hooks_us": f"{per_pass * 1e6:.0f}",
                         **{key: sim[key] for key in PROJECTED_PARTS},
                         "error_vs_measured": f"{step / measured - 1:+.3f}"})
            print(f"  projected, {hooks} hooks ({per_pass * 1e6:.0f} us per module and pass): {step:.3f} s "
                  f"({step / measured - 1:+.1%}; back to back {step0:.3f} s, W {work_ms:.2f} ms): "
                  + ", ".join(f"{key[:-2]} {float(sim[key]):.3f} s" for key in PROJECTED_PARTS), flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m lins_peers.projection_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4, help="ranks on this host (default 4)")
    ap.add_argument("--gpus-per-node", type=int, default=2, help="ranks per emulated node (default 2)")
    ap.add_argument("--strategies", default="zero3,zeropp", help="DeepSpeed strategies (default zero3,zeropp)")
    ap.add_argument("--sets", type=int, default=3, help="sets measured one after another (default 3)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps of each DeepSpeed run (default 10)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="launches of each run per set, one round after another (default 3)")
    ap.add_argument("--ddp-steps", type=int, default=10,
                    help="timed steps of each torch DDP calibration run (default 10)")
    ap.add_argument("--profile-iters", type=int, default=10, help="iterations per profile point (default 10)")
    ap.add_argument("--lins", default=str(REPO / "build" / "lins"), help="the lins binary (default build/lins)")
    ap.add_argument("--python", default=sys.executable, help="the peers' Python (default this one)")
    ap.add_argument("--port", type=int, default=29531, help="torchrun's master port (default 29531)")
    ap.add_argument("--out", required=True, help="output folder")
    args = ap.parse_args(argv)
    args.strategies = [x.strip() for x in args.strategies.split(",") if x.strip()]
    bad = [x for x in args.strategies if x not in ("zero3", "zeropp")]
    if bad or not args.strategies:
        raise SystemExit(f"--strategies: {', '.join(bad) or '(none)'}; valid: zero3, zeropp")
    if args.ranks < 2 or args.gpus_per_node < 1 or args.ranks % args.gpus_per_node:
        raise SystemExit("need --ranks >= 2 and --gpus-per-node dividing it")
    if "zeropp" in args.strategies and args.gpus_per_node < 2:
        raise SystemExit("zeropp needs --gpus-per-node >= 2 (hpZ's secondary partition is inside a node)")
    if min(args.sets, args.rounds, args.steps, args.ddp_steps, args.profile_iters) < 1:
        raise SystemExit("--sets, --rounds, --steps, --ddp-steps and --profile-iters must be at least 1")
    if not Path(args.lins).exists():
        raise SystemExit(f"--lins {args.lins}: no such binary (build it with scripts/build.sh)")
    # The ranks find lins's packages as this process does: installed, or through the PYTHONPATH they inherit.
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(1, args.sets + 1):
        rows += one_set(args, k, env)
    fields = ["source", "set", "ranks", "gpus_per_node", "strategy", "hooks", "step_time_s", "back_to_back_step_time_s",
              "collectives_per_step", "work_ms", "ds_module_hooks_us", "gemm_spread", *MEASURED_PARTS, *PROJECTED_PARTS,
              "error_vs_measured"]
    tmp = out / "projection_check.csv.partial"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, out / "projection_check.csv")
    # the runs' own provenance (the last set's DeepSpeed run) for the versions, the commit and the time
    run = json.loads((out / f"set{args.sets}" / "ds_r1.provenance.json").read_text())
    options = {k: v for k, v in vars(args).items() if k not in ("python", "lins", "out")}
    prov = {"tool": "lins_peers.projection_check", "options": options, "cpus": os.cpu_count(),
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "git_commit": run.get("git_commit"),
            "versions": run.get("versions"), "simulate_flags": SIM_FLAGS}
    (out / "projection_check.provenance.json").write_text(json.dumps(prov, indent=2) + "\n")
    print(f"wrote {len(rows)} rows to {out / 'projection_check.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
