"""Finding and reading what `lins` wrote: step CSVs, bandwidth profiles, plan tables, traces and provenance.

Give it files or folders (searched recursively). Files are recognised by their header or content, not by name.
Unfinished files (`*.partial`, left by a killed run) are never read as results.
"""

import json
import os
import warnings
from dataclasses import dataclass, field

import pandas as pd

from . import schema


@dataclass
class Dataset:
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)      # step CSV rows, plus `file` and `run`
    profiles: pd.DataFrame = field(default_factory=pd.DataFrame)   # profile and `lins comm --csv` rows, plus `file`
    plans: pd.DataFrame = field(default_factory=pd.DataFrame)      # `lins plan --csv` rows, plus `file`
    traces: list = field(default_factory=list)                     # (path, list of trace events)
    provenance: dict = field(default_factory=dict)                 # path -> parsed JSON
    skipped: list = field(default_factory=list)                    # (path, why it was not used)
    # Tables of other commands that no figure draws: `lins step --trace` action logs, `lins replay --csv` tables,
    # `lins step --collective-log` files. Counted, not reported one by one.
    other: list = field(default_factory=list)                      # (path, what it is)


# Headers of the tables `other` holds (their first columns).
OTHER_TABLES = {
    ("step", "position", "action"): "action log (lins step --trace)",
    ("strategy", "rank", "measured_s", "replayed_s"): "replay table (lins replay --csv)",
    ("system", "strategy", "rank", "step", "index", "kind"): "collective log (lins step --collective-log)",
}


def find_files(paths):
    """All regular files under the given files/folders, sorted, skipping hidden folders and unfinished files."""
    found = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isfile(p):
            found.append(p)
            continue
        if not os.path.isdir(p):
            raise FileNotFoundError(f"no such file or folder: {p}")
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(os.path.join(root, f) for f in sorted(files))
    return [f for f in found if not f.endswith(".partial")]


def comment_lines(path):
    """Leading lines that start with '#' (a profile CSV opens with what it is and its provenance)."""
    lines = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("#"):
                break
            lines.append(line[1:].strip())
    return lines


def read_csv(path, **kwargs):
    """pandas.read_csv past the leading '#' comment lines."""
    return pd.read_csv(path, skiprows=len(comment_lines(path)), **kwargs)


def read_step_csv(path):
    """One step CSV as a DataFrame with every schema column (missing ones filled with NaN, with a warning)."""
    df = read_csv(path, dtype={c: str for c in schema.STEP_TEXT_COLUMNS}, keep_default_na=False, na_values=[""])
    missing = [c for c in schema.STEP_COLUMNS if c not in df.columns]
    if missing:
        warnings.warn(f"{path}: columns missing from the step schema, read as empty: {', '.join(missing)}")
        for c in missing:
            df[c] = pd.NA if c in schema.STEP_TEXT_COLUMNS else float("nan")
    for c in schema.STEP_COLUMNS:
        if c not in schema.STEP_TEXT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    for c in schema.STEP_TEXT_COLUMNS:
        df[c] = df[c].fillna("").astype(str).str.strip()
    bad = sorted(set(df["source"]) - set(schema.SOURCES))
    if bad:
        raise ValueError(f"{path}: column source must be measured or projected, found {bad}")
    df["feasible"] = df["feasible"].fillna(1)
    return df


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _trace_events(doc):
    """Chrome trace events of a JSON document, or None when it is not a trace."""
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return doc["traceEvents"]
    if isinstance(doc, list) and doc and all(isinstance(e, dict) and "ph" in e for e in doc[:20]):
        return doc
    return None


def load(paths):
    """Reads every recognisable file under `paths` into a Dataset; unrecognised files are listed in `skipped`."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    data = Dataset()
    steps, profiles, plans = [], [], []
    for path in find_files(paths):
        run = os.path.basename(os.path.dirname(os.path.abspath(path)))
        if path.endswith(".csv"):
            try:
                header = read_csv(path, nrows=0).columns
            except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
                data.skipped.append((path, f"unreadable CSV: {e}"))
                continue
            if schema.looks_like_step_csv(header):
                df = read_step_csv(path)
                df["file"], df["run"] = path, run
                steps.append(df)
            elif schema.looks_like_profile_csv(header):
                df = read_csv(path)
                df["op"] = df["op"].map(schema.normalise_op)
                df["file"] = path
                profiles.append(df)
                for line in comment_lines(path):
                    if line.startswith("provenance:"):
                        try:
                            data.provenance[path] = json.loads(line.split(":", 1)[1])
                        except json.JSONDecodeError:
                            pass
            elif schema.looks_like_comm_csv(header):
                df = read_csv(path)
                if "wrong_elems" in df.columns:
                    bad = df["wrong_elems"].fillna(0) != 0
                    if bad.any():
                        warnings.warn(f"{path}: {int(bad.sum())} rows with wrong results left out")
                    df = df[~bad]
                df = df.rename(columns={"time_median_s": "time_s"})
                df["op"] = df["op"].map(schema.normalise_op)
                df["file"] = path
                profiles.append(df)
            elif schema.looks_like_plan_csv(header):
                df = read_csv(path)
                df["file"], df["run"] = path, run
                plans.append(df)
            else:
                kind = next((what for cols, what in OTHER_TABLES.items() if tuple(header[:len(cols)]) == cols), None)
                if kind:
                    data.other.append((path, kind))
                else:
                    data.skipped.append((path, "CSV header is not a step, profile or plan table"))
        elif path.endswith(".json"):
            try:
                doc = _read_json(path)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                data.skipped.append((path, f"unreadable JSON: {e}"))
                continue
            events = _trace_events(doc)
            if events is not None:
                data.traces.append((path, events))
            else:
                data.provenance[path] = doc
    if steps:
        data.steps = pd.concat(steps, ignore_index=True)
    if profiles:
        data.profiles = pd.concat(profiles, ignore_index=True)
    if plans:
        data.plans = pd.concat(plans, ignore_index=True)
    return data


# A configuration: everything that defines a run except the step index and the measured numbers.
CONFIG_KEYS = ["source", "model", "strategy", "engine", "plan"] + schema.PLAN_FACTORS + [
    "os_layout", "backend", "precision", "compute", "world_size", "gpus_per_node", "nodes", "seq", "micro_batch_size", "micro_batches",
    "tokens", "recompute", "overlap", "host_model", "label"]


def summarise_steps(steps):
    """One row per configuration: the median of every numeric column over its timed steps (and repeated runs);
    `feasible` is the minimum, `steps` counts the rows."""
    if steps.empty:
        return steps
    keys = [k for k in CONFIG_KEYS if k in steps.columns]
    numeric = [c for c in schema.STEP_COLUMNS if c not in schema.STEP_TEXT_COLUMNS and c not in keys
               and c not in ("step", "feasible")]
    # groupby drops NaN keys; the plan factors and sizes are always present in a real row
    g = steps.fillna({k: -1 for k in keys if k not in schema.STEP_TEXT_COLUMNS}).groupby(keys, sort=False)
    out = g[numeric].median()
    out["feasible"] = g["feasible"].min()
    out["steps"] = g.size()
    return out.reset_index()


def pick_model_order(models):
    """The paper's models first (7B, 13B, 30B), then any others in name order."""
    paper = ["llama-7b", "llama-13b", "llama-30b"]
    models = list(dict.fromkeys(models))
    return [m for m in paper if m in models] + sorted(m for m in models if m not in paper)
