"""What `lins schema` prints, loaded once: the columns and units of every table lins writes, the collective names, the
model presets and the FLOPs-per-token formula of the mfu columns. This is the one place the Python packages read them
from (lins_torch's presets, lins_peers' step CSV and mfu, lins_analysis's figures), so nothing in Python keeps a copy
of src/core/output/results_schema.* or src/core/model/model_spec.*.

schema.json beside this file is the binary's output, kept in the repository so that the packages work without a build;
the test cli_schema_json holds it equal to what the binary prints. Regenerate it with
    build/lins schema > analysis/lins_schema/schema.json
docs/results-schema.md gives every column's meaning.

Standard library only: it is imported by the peers' environment (no pandas) and by the analysis (no torch).
"""

import json
from importlib import resources
from typing import Any, Dict, List, Mapping

# Read as package data rather than by a path computed from __file__, so it is found however the package is installed.
SCHEMA: Dict[str, Any] = json.loads(resources.files(__name__).joinpath("schema.json").read_text(encoding="utf-8"))


def columns(table: str) -> List[str]:
    """The column names of a table (step, plan, comm, profile), in order."""
    return [c["name"] for c in SCHEMA[table]["columns"]]


def units(table: str) -> Dict[str, str]:
    """Column name -> unit ("" for counts, flags and text)."""
    return {c["name"]: c["unit"] for c in SCHEMA[table]["columns"]}


# The model presets of `lins --model`, in the binary's order: name -> {"hidden", "layers", "heads", "ffn", "vocab",
# "params"} (src/core/model/model_spec.cpp, make_model_preset).
MODELS: Dict[str, Dict[str, int]] = SCHEMA["models"]


def model(name: str) -> Dict[str, int]:
    """One preset's shape; an unknown name is an error that lists the presets."""
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}'; valid models: {', '.join(MODELS)}")
    return MODELS[name]


def _field(dims, name: str) -> float:
    """A model field from a mapping (a MODELS entry) or from an object with attributes (lins_torch.ModelConfig)."""
    return float(dims[name] if isinstance(dims, Mapping) else getattr(dims, name))


def flops_per_token(dims, seq: int, causal: bool = False) -> float:
    """Forward and backward FLOPs per token of a model at sequence length `seq`, by the formula of lins's mfu column
    (ModelSpec::flops_per_token), or of its mfu_causal column with causal=True. `dims` is a MODELS entry or any object
    with the attributes layers, hidden and vocab. The formula is evaluated from the schema's terms, so it is the
    binary's own."""
    formula = SCHEMA["flops_per_token"]
    terms = formula["causal"]["terms"] if causal else formula["terms"]
    values = {}
    for symbol, name in formula["symbols"].items():
        values[symbol] = float(seq) if name == "seq" else _field(dims, name)
    total = 0.0
    for term in terms:
        product = float(term["coefficient"])
        for symbol, power in term["powers"].items():
            product *= values[symbol] ** power
        total += product
    return total


# The strategy presets of `lins --strategies` / `--plan` (src/core/model/plan.h, kPresets), in the binary's order:
# name -> {"spelling", "label", "engine", "p", "g", "os", "argument", "help"}. A factor is a rule on R GPUs per node x
# N nodes: "one" 1x1, "all" R x N, "group" the preset's group of S GPUs (its ':' argument, one node by default).
PRESETS: Dict[str, Dict[str, str]] = {row["name"]: row for row in SCHEMA["presets"]}


def preset_factors(preset: str, r: int, n: int) -> Dict[str, Any]:
    """The plan a preset ("zero3", "mics:16", "zeropp", "fsdp:4") stands for on R GPUs per node x N nodes: the six
    factors as (intra, inter) pairs under "p", "g", "os", and "hpz" (ZeRO++'s secondary partition or FSDP2's
    reshard group; 0 for none), as parse_plan builds it."""
    base, _, arg = preset.partition(":")
    if base not in PRESETS:
        raise ValueError(f"unknown preset '{preset}'; valid presets: {', '.join(PRESETS)}")
    row = PRESETS[base]
    size, hpz = r, 0
    if row["argument"] in ("group_size", "secondary") and arg:
        size = int(arg)
    if row["argument"] == "secondary":
        hpz = size
    if row["argument"] == "fsdp_reshard" and arg.isdigit():
        hpz = int(arg)
    group = (size, 1) if size <= r else (r, size // r)
    rule = {"one": (1, 1), "all": (r, n), "group": group}
    return {"p": rule[row["p"]], "g": rule[row["g"]], "os": rule[row["os"]], "hpz": hpz}
