"""The CSV contract between `lins` (C++) and the analysis: the column names, in order, of every file we read.

They are not kept here: `lins schema` prints every table's columns, units and types (src/core/output/results_schema.h),
and the package lins_schema loads that output; this module names what the figures use. docs/results-schema.md gives
every column's meaning.
"""

# Re-exported: the figures and tests read them as schema.SCHEMA, schema.columns and schema.units.
from lins_schema import SCHEMA, columns, units  # noqa: F401

# Step CSV: one row per (strategy, timed step); `lins step` writes source=measured, `lins simulate` projected.
STEP_COLUMNS = columns("step")

# Columns read as text; every other step column is numeric.
STEP_TEXT_COLUMNS = [c["name"] for c in SCHEMA["step"]["columns"] if c["type"] == "text"]

# The six sharding factors of a plan (P, G and OS, each sharded over GPUs of a node (s0) and across nodes (s1)), in
# the paper's order.
PLAN_FACTORS = ["s0_p", "s1_p", "s0_g", "s1_g", "s0_os", "s1_os"]

SOURCES = ("measured", "projected")
OVERLAP_MODES = ("all", "no_bcast", "no_allreduce", "none")  # Table V, from most to least overlap

# Bandwidth profile written by `lins comm --profile` (Fig. 3; the planner's input).
PROFILE_COLUMNS = columns("profile")

# Per-size CSV of `lins comm --csv` (nccl-tests style, one row per op, mesh and size); read as profile rows too,
# with time_median_s as time_s (src/apps/cmd_comm.cpp).
COMM_CSV_COLUMNS = columns("comm")

# `lins plan --csv`: one row per plan, ranked (src/apps/cmd_plan.cpp). comm_* price each group alone (the paper's
# pricing), shared_comm_* let groups on a node share its links; ranked_by says which one ranked the plans;
# network_model prices what no profile measured; reserve_bytes is what a GPU run loses beyond total_bytes; objective
# says what ranked them (step: projected step time, comm: the paper's T_comm), other_rank the rank under the other;
# projected_* and exposed_* are each plan's projected step (empty when it was not projected).
PLAN_CSV_COLUMNS = columns("plan")

# Collective names as the step CSV spells them, how figures label them, and the spellings we accept elsewhere: the
# binary's collective table (src/core/model/collectives.h), in its order.
OPS = [c["name"] for c in SCHEMA["collectives"]]
OP_LABELS = {c["name"]: c["label"] for c in SCHEMA["collectives"]}


def _op_key(name):
    return str(name).strip().lower().replace("-", "").replace("_", "").replace(" ", "")


_OP_ALIASES = {_op_key(w): c["name"] for c in SCHEMA["collectives"] for w in c["spellings"] + [c["short"]]}


def normalise_op(name):
    """Maps 'AllGather', 'allgather', 'ag', 'all-gather' ... to the step CSV's spelling; unknown names unchanged."""
    return _OP_ALIASES.get(_op_key(name), str(name).strip())


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
