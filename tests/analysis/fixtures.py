"""TEST FIXTURES ONLY: small synthetic files in the formats `lins` writes, so every figure can be exercised before
(and besides) the real sample data. The numbers are made up; nothing here is a measurement. Every file and folder
written here is named fixture_*."""

import json
import os

import pandas as pd

from lins_analysis import schema

PRESETS = {  # strategy -> (engine, plan factors as a function of R, N)
    "ddp": ("ddp", lambda R, N: (1, 1, 1, 1, 1, 1)),
    "zero1": ("zero", lambda R, N: (1, 1, 1, 1, R, N)),
    "zero2": ("zero", lambda R, N: (1, 1, R, N, R, N)),
    "zero3": ("zero", lambda R, N: (R, N, R, N, R, N)),
    "zeropp": ("zeropp", lambda R, N: (R, N, R, N, R, N)),
    "mics": ("mics", lambda R, N: (R, 1, R, 1, R, 1)),
    "lins": ("lins", lambda R, N: (1, 1, 1, 1, R, 1)),
}
PARAMS = {"small": 20_000_000, "llama-7b": 6_738_415_616, "llama-13b": 13_015_864_320}


def step_row(source, strategy, model, world, R, step=0, engine=None, factors=None, overlap="all", M=4,
             feasible=1, backend="cpu", speed=1.0):
    N = world // R
    eng, fac = PRESETS.get(strategy, ("lins", None))
    engine = engine or eng
    factors = factors or fac(R, N)
    phi = PARAMS[model]
    seq = 128 if model == "small" else 4096
    tokens = seq * M * world
    fwd, bwd = 0.1 * M * speed, 0.2 * M * speed
    comm = 0.02 * (1 + factors[0] * factors[1]) * (1 + 0.1 * N)
    hide = {"all": 0.3, "no_bcast": 0.5, "no_allreduce": 0.8, "none": 1.0}[overlap]
    step_time = fwd + bwd + 0.01 + hide * comm + 0.001 * step
    s = 2 * phi * 4 / (factors[0] * factors[1] * world) * world  # made-up, bytes per rank
    row = {c: float("nan") for c in schema.STEP_COLUMNS}
    row.update(
        source=source, strategy=strategy, engine=engine,
        plan="p={}x{},g={}x{},os={}x{}".format(*factors), os_layout="inter_tensor", model=model, params=phi,
        backend=backend, world_size=world, gpus_per_node=R, nodes=N, seq=seq, micro_batch_size=1,
        micro_batches=M, tokens=tokens, recompute=0, overlap=overlap, step=step, step_time_s=step_time,
        step_time_min_s=step_time * 0.95, step_time_mean_s=step_time * 0.97, forward_s=fwd, backward_s=bwd,
        optimizer_s=0.01, exposed_comm_s=hide * comm,
        all_gather_bytes=s, reduce_scatter_bytes=s / 2, all_reduce_bytes=2 * s, broadcast_bytes=s / 4,
        intra_bytes=3 * s, inter_bytes=0.75 * s,
        pred_all_gather_bytes=s, pred_reduce_scatter_bytes=s / 2, pred_all_reduce_bytes=2 * s,
        pred_broadcast_bytes=s / 4, pred_intra_bytes=3 * s, pred_inter_bytes=0.75 * s,
        pred_comm_s=comm * 1.1, pred_comm_param_s=comm * 0.5, pred_comm_grad_s=comm * 0.2,
        pred_comm_os_sync_s=comm * 0.3, pred_comm_os_bcast_s=comm * 0.1,
        peak_mem_bytes=16 * phi / world + 1e8 if source == "measured" else float("nan"),
        state_bytes=16 * phi / world, model_mem_bytes=16 * phi / world + 2e8, model_state_bytes=16 * phi / world,
        loss=5.0 - 0.1 * step, tgs=tokens / step_time / world, mfu=0.3 / speed / (1 + 0.01 * N),
        peak_tflops=0.1 if backend == "cpu" else 312.0, feasible=feasible)
    return row


def measured_rows():
    rows = []
    for world in (2, 4, 8):
        for strategy in PRESETS:
            for step in range(3):
                rows.append(step_row("measured", strategy, "small", world, 2, step=step))
        # the Lins engine running the MiCS plan (Fig. 16/17), given as a 6-tuple
        for step in range(3):
            rows.append(step_row("measured", "p=2x1,g=2x1,os=2x1", "small", world, 2, step=step, engine="lins",
                                 factors=(2, 1, 2, 1, 2, 1)))
    # ZeRO++ with quantized communication on 2 x 2 (the zeropp_quant figure), each variant's loss a little off
    for k, variant in enumerate(("zeropp+qwz", "zeropp+qgz", "zeropp+qwz+qgz")):
        for step in range(3):
            row = step_row("measured", variant, "small", 4, 2, step=step, engine="zeropp", factors=(2, 2, 2, 2, 2, 2))
            row.update(loss=row["loss"] + 0.01 * (k + 1) * step, inter_bytes=row["inter_bytes"] / (2 + k))
            rows.append(row)
    for overlap in schema.OVERLAP_MODES:  # Table V
        for M in (1, 2, 4, 8):
            rows.append(step_row("measured", "lins", "small", 4, 2, overlap=overlap, M=M))
    return rows


def projected_rows():
    rows = []
    for model in ("llama-7b", "llama-13b"):
        for world in (8, 32, 128, 512, 1024):
            for strategy in ("zero1", "zero3", "zeropp", "mics", "lins"):
                feasible = 0 if (strategy == "zero1" and world == 8 and model == "llama-13b") else 1
                rows.append(step_row("projected", strategy, model, world, 8, M=max(1, 1024 // world),
                                     feasible=feasible, backend="gpu", speed=0.5))
    return rows


def profile_rows():
    rows = []
    for op in ("AllGather", "ReduceScatter", "AllReduce", "Broadcast", "AlltoAll"):
        for intra, inter in ((2, 1), (2, 2), (2, 4)):
            for size in (2 ** 20, 2 ** 24, 2 ** 28):
                t = 1e-4 + size / (1e9 / inter)
                rows.append(dict(op=op, mesh_intra=intra, mesh_inter=inter, message_bytes=size, time_s=t,
                                 algbw_gbps=size / t / 1e9, busbw_gbps=size / t / 1e9))
    return rows


def plan_rows():
    """`lins plan --csv` rows: a few planned 6-tuples ranked first, then the baseline presets."""
    rows = []
    cands = [("p=1x1,g=1x1,os=8x2", (1, 1, 1, 1, 8, 2), 0)] + [
        (name, fac(8, 128), 1) for name, (_, fac) in PRESETS.items() if name != "lins"]
    for rank, (name, f, baseline) in enumerate(cands, start=1):
        row = {c: 0 for c in schema.PLAN_CSV_COLUMNS}
        row.update(model="llama-7b", gpus_per_node=8, nodes=128, name=name, plan=name, baseline=baseline,
                   s0_p=f[0], s1_p=f[1], s0_g=f[2], s1_g=f[3], s0_os=f[4], s1_os=f[5], total_bytes=2 ** 30 * rank,
                   comm_s=0.5 * rank, shared_comm_s=0.6 * rank, ranked_by="shared", rank=rank,
                   feasible=0 if name == "ddp" else 1,
                   why="needs 120 GiB" if name == "ddp" else "chosen" if rank == 1 else "+10% comm")
        rows.append(row)
    return rows


def trace_events(rank):
    ev = [{"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}},
          {"ph": "M", "name": "thread_name", "pid": rank, "tid": 1, "args": {"name": "compute"}},
          {"ph": "M", "name": "thread_name", "pid": rank, "tid": 2, "args": {"name": "comm"}}]
    t = 0
    for layer in range(3):
        ev.append({"ph": "X", "name": f"forward L{layer}", "cat": "compute", "pid": rank, "tid": 1, "ts": t,
                   "dur": 900})
        ev.append({"ph": "X", "name": f"all_gather L{layer + 1}", "cat": "comm", "pid": rank, "tid": 2, "ts": t,
                   "dur": 600})
        t += 1000
    ev.append({"ph": "B", "name": "backward", "pid": rank, "tid": 1, "ts": t})
    ev.append({"ph": "X", "name": "all_reduce bucket 0", "pid": rank, "tid": 2, "ts": t + 200, "dur": 1500})
    ev.append({"ph": "E", "pid": rank, "tid": 1, "ts": t + 2500})
    ev.append({"ph": "X", "name": "wait bucket_all_reduce b0", "cat": "wait", "pid": rank, "tid": 3, "ts": t + 2500,
               "dur": 100})
    ev.append({"ph": "X", "name": "optimizer", "pid": rank, "tid": 1, "ts": t + 2600, "dur": 300})
    ev.append({"ph": "X", "name": "broadcast", "pid": rank, "tid": 2, "ts": t + 2950, "dur": 400})
    return ev


def write_all(root):
    """Writes the fixture tree under `root` and returns it."""
    run = os.path.join(root, "fixture_run_measured")
    proj = os.path.join(root, "nested", "fixture_run_projected")
    for d in (run, proj):
        os.makedirs(d, exist_ok=True)
    pd.DataFrame(measured_rows(), columns=schema.STEP_COLUMNS).to_csv(os.path.join(run, "fixture_step.csv"),
                                                                      index=False)
    with open(os.path.join(run, "fixture_step.json"), "w") as f:
        json.dump({"note": "test fixture provenance", "argv": ["lins", "step"]}, f)
    pd.DataFrame(projected_rows(), columns=schema.STEP_COLUMNS).to_csv(os.path.join(proj, "fixture_sim.csv"),
                                                                       index=False)
    with open(os.path.join(run, "fixture_profile.csv"), "w") as f:  # opens with comment lines, as lins comm writes
        f.write("# test fixture bandwidth profile\n# provenance: {\"tool\": \"fixture\"}\n")
        pd.DataFrame(profile_rows(), columns=schema.PROFILE_COLUMNS).to_csv(f, index=False)
    pd.DataFrame(plan_rows(), columns=schema.PLAN_CSV_COLUMNS).to_csv(os.path.join(run, "fixture_plans.csv"),
                                                                      index=False)
    for rank in range(2):
        with open(os.path.join(run, f"fixture_trace_rank{rank}.json"), "w") as f:
            json.dump({"traceEvents": trace_events(rank)}, f)
    # an unfinished file from a killed run: must never be read
    with open(os.path.join(run, "fixture_killed.csv.partial"), "w") as f:
        f.write(",".join(schema.STEP_COLUMNS) + "\nmeasured,zero3,zero,CUT")
    return root
