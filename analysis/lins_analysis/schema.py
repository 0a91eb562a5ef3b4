"""The CSV contract between `lins` (C++) and the analysis: the column names, in order, of every file we read.

STEP_COLUMNS mirrors step_csv_columns() in src/core/results_schema.h; tests/analysis/test_schema.py parses that
header and fails when the two lists differ, so a C++ change cannot silently break the figures.
docs/results-schema.md gives every column's unit and meaning.
"""

# Step CSV: one row per (strategy, timed step); `lins step` writes source=measured, `lins simulate` projected.
STEP_COLUMNS = [
    "source", "strategy", "engine", "plan",
    "s0_p", "s1_p", "s0_g", "s1_g", "s0_os", "s1_os", "os_layout",
    "model", "params", "backend", "precision", "compute", "world_size", "gpus_per_node", "nodes",
    "seq", "micro_batch_size", "micro_batches", "tokens", "recompute", "overlap", "step",
    "step_time_s", "step_time_min_s", "step_time_mean_s",
    "forward_s", "backward_s", "optimizer_s", "exposed_comm_s",
    "all_gather_bytes", "reduce_scatter_bytes", "all_reduce_bytes", "broadcast_bytes", "intra_bytes", "inter_bytes",
    "pred_all_gather_bytes", "pred_reduce_scatter_bytes", "pred_all_reduce_bytes", "pred_broadcast_bytes",
    "pred_intra_bytes", "pred_inter_bytes",
    "pred_comm_s", "pred_comm_param_s", "pred_comm_grad_s", "pred_comm_os_sync_s", "pred_comm_os_bcast_s",
    "peak_mem_bytes", "state_bytes", "model_mem_bytes", "model_state_bytes",
    "loss", "tgs", "mfu", "peak_tflops", "feasible", "fabric", "mfu_causal", "peak_source", "gemm_tflops",
]

# Columns read as text; every other step column is numeric.
STEP_TEXT_COLUMNS = ["source", "strategy", "engine", "plan", "os_layout", "model", "backend", "precision", "compute", "overlap",
                     "fabric", "peak_source"]

# The six sharding factors of a plan (P, G and OS, each sharded over GPUs of a node (s0) and across nodes (s1)), in
# the paper's order.
PLAN_FACTORS = ["s0_p", "s1_p", "s0_g", "s1_g", "s0_os", "s1_os"]

SOURCES = ("measured", "projected")
OVERLAP_MODES = ("all", "no_bcast", "no_allreduce", "none")  # Table V, from most to least overlap

# Bandwidth profile written by `lins comm --profile` (Fig. 3; the planner's input).
PROFILE_COLUMNS = ["op", "mesh_intra", "mesh_inter", "message_bytes", "time_s", "algbw_gbps", "busbw_gbps"]

# Per-size CSV of `lins comm --csv` (nccl-tests style, one row per op, mesh and size); read as profile rows too,
# with time_median_s as time_s (src/apps/cmd_comm.cpp).
COMM_CSV_COLUMNS = ["op", "backend", "dtype", "group", "mesh_intra", "mesh_inter", "group_size", "world_size",
                    "message_bytes", "count_elems", "iters", "warmup_iters", "time_min_s", "time_median_s",
                    "time_max_s", "algbw_gbps", "busbw_gbps", "wrong_elems"]

# `lins plan --csv`: one row per plan, ranked (src/apps/cmd_plan.cpp). comm_* price each group alone (the paper's
# pricing), shared_comm_* let groups on a node share its links; ranked_by says which one ranked the plans;
# network_model prices what no profile measured; reserve_bytes is what a GPU run loses beyond total_bytes; objective
# says what ranked them (step: projected step time, comm: the paper's T_comm), other_rank the rank under the other;
# projected_* and exposed_* are each plan's projected step (empty when it was not projected).
PLAN_CSV_COLUMNS = [
    "model", "params", "gpus_per_node", "nodes", "seq", "micro_batch_size", "micro_batches", "recompute",
    "network", "profile", "gpu_mem_bytes", "bucket_bytes", "name", "plan", "engine", "baseline",
    "s0_p", "s1_p", "s0_g", "s1_g", "s0_os", "s1_os", "os_layout", "p_bytes", "g_bytes", "os_bytes", "state_bytes",
    "closed_form_state_bytes", "activation_bytes", "buffer_bytes", "total_bytes", "intra_bytes", "inter_bytes",
    "comm_param_s", "comm_grad_s", "comm_os_sync_s", "comm_os_bcast_s", "comm_s", "shared_comm_param_s",
    "shared_comm_grad_s", "shared_comm_os_sync_s", "shared_comm_os_bcast_s", "shared_comm_s", "fallback_ops",
    "ranked_by", "rank", "feasible", "why", "network_model", "reserve_bytes", "objective", "other_rank",
    "projected_step_s", "projected_mfu", "forward_s", "backward_s", "optimizer_s", "host_s", "exposed_comm_s"] + [
    f"exposed_{k}_{a}_s" for k in ("all_gather", "reduce_scatter", "all_reduce", "broadcast") for a in ("intra", "inter")
] + [f"exposed_{p}_{a}_s" for p in ("forward_gather", "backward_gather", "hpz_gather", "grad_reduce_scatter",
                                    "zero_grad_reduce", "grad_bucket_all_reduce", "sync_bucket_all_reduce",
                                    "replica_all_reduce", "update_gather", "update_broadcast") for a in ("intra", "inter")]

# Collective names as the step CSV spells them, and the spellings we accept elsewhere.
OPS = ["all_gather", "reduce_scatter", "all_reduce", "broadcast"]
OP_LABELS = {"all_gather": "AllGather", "reduce_scatter": "ReduceScatter", "all_reduce": "AllReduce",
             "broadcast": "Broadcast"}


def normalise_op(name):
    """Maps 'AllGather', 'allgather', 'ag', 'all-gather' ... to the step CSV's spelling; unknown names unchanged."""
    key = str(name).strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    aliases = {"allgather": "all_gather", "ag": "all_gather", "reducescatter": "reduce_scatter",
               "rs": "reduce_scatter", "allreduce": "all_reduce", "ar": "all_reduce", "broadcast": "broadcast",
               "bcast": "broadcast", "bc": "broadcast"}
    return aliases.get(key, str(name).strip())


def looks_like_step_csv(columns):
    return {"source", "strategy", "step_time_s"} <= set(columns)


def looks_like_profile_csv(columns):
    return {"op", "mesh_intra", "mesh_inter", "message_bytes", "time_s"} <= set(columns)


def looks_like_comm_csv(columns):
    return {"op", "mesh_intra", "mesh_inter", "message_bytes", "time_median_s"} <= set(columns)


def looks_like_plan_csv(columns):
    """`lins plan --csv`: one row per plan, the six factors, no step times."""
    cols = set(columns)
    return set(PLAN_FACTORS) <= cols and "step_time_s" not in cols and "source" not in cols
