"""Fig. 14/15-style timeline of one training step from the Chrome/Perfetto traces of `lins step --trace`: one row
per (rank, lane), compute, waits and each kind of collective in its own colour, so overlap is visible.
The executor's traces (src/train/executor.cpp) have lanes compute / waits / collectives, events named
"forward <module>", "backward <module>", "optimizer", "wait <class> <op>" and "<collective> <op>"."""

import os
import re
from collections import defaultdict

from matplotlib.patches import Patch

from . import NoData
from . import style

KIND_COLOURS = [  # (label, colour, words that identify it in an event's name or category); first match wins
    ("Wait (exposed comm.)", "tab:pink", ("wait",)),
    ("AllGather", "tab:blue", ("all_gather", "allgather")),
    ("ReduceScatter", "tab:orange", ("reduce_scatter", "reducescatter")),
    ("AllReduce", "tab:red", ("all_reduce", "allreduce")),
    ("Broadcast", "tab:green", ("broadcast", "bcast")),
    ("AllToAll", "tab:purple", ("all_to_all", "alltoall")),
    ("Forward", "0.45", ("forward", "fwd")),
    ("Backward", "0.7", ("backward", "bwd")),
    ("Optimizer", "tab:olive", ("optim", "adam")),
]
MAX_FIGURES = 8


def kind_of(event):
    text = f"{event.get('name', '')} {event.get('cat', '')}".lower()
    for label, colour, words in KIND_COLOURS:
        if any(w in text for w in words):
            return label, colour
    return "other", "tab:brown"


def intervals(events):
    """Complete spans (start_us, duration_us, pid, tid, event) from 'X' events and matched 'B'/'E' pairs, plus the
    row names given by metadata events."""
    spans, open_b, names = [], defaultdict(list), {}
    for e in events:
        ph = e.get("ph")
        pid, tid = e.get("pid", 0), e.get("tid", 0)
        if ph == "X" and "ts" in e:
            spans.append((float(e["ts"]), float(e.get("dur", 0)), pid, tid, e))
        elif ph == "B":
            open_b[(pid, tid)].append(e)
        elif ph == "E" and open_b[(pid, tid)]:
            b = open_b[(pid, tid)].pop()
            spans.append((float(b["ts"]), float(e["ts"]) - float(b["ts"]), pid, tid, b))
        elif ph == "M" and e.get("name") in ("thread_name", "process_name"):
            names[(e.get("name"), pid, tid if e.get("name") == "thread_name" else None)] = e.get("args", {}).get(
                "name", "")
    return spans, names


def group_traces(traces):
    """Per-rank files of one run (same folder, same name but the rank number) drawn together."""
    groups = defaultdict(list)
    for path, events in traces:
        stem = re.sub(r"[._-]?rank[._-]?\d+", "", os.path.splitext(os.path.basename(path))[0])
        groups[(os.path.dirname(path), stem or "trace")].append((path, events))
    return groups


def draw_group(name, files, out_dir, formats):
    rows, all_spans = {}, []
    for path, events in files:
        spans, names = intervals(events)
        for start, dur, pid, tid, e in spans:
            key = (path, pid, tid)
            if key not in rows:
                pname = names.get(("process_name", pid, None), f"rank {pid}")
                tname = names.get(("thread_name", pid, tid), f"stream {tid}")
                rows[key] = f"{pname} / {tname}"
            all_spans.append((key, start, dur, e))
    if not all_spans:
        return []
    t0 = min(s for _, s, _, _ in all_spans)
    order = sorted(rows, key=lambda k: (k[1], k[0], str(k[2])))
    index = {k: i for i, k in enumerate(order)}
    fig, ax = style.plt.subplots(figsize=(11, 0.8 + 0.45 * len(order)))
    used = {}
    for key, start, dur, e in all_spans:
        label, colour = kind_of(e)
        used[label] = colour
        ax.barh(index[key], dur / 1e3, left=(start - t0) / 1e3, height=0.7, color=colour, edgecolor="black",
                linewidth=0.3)
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([rows[k] for k in order], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("Time since the first event (ms)")
    ax.set_title(f"Step timeline: {name}")
    ax.legend(handles=[Patch(color=c, label=l) for l, c in used.items()], loc="upper center",
              bbox_to_anchor=(0.5, -0.18 - 0.3 / max(len(order), 1)), ncol=len(used), fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    return style.save_figure(fig, out_dir, f"timeline_{safe}", formats)


def draw(data, out_dir, formats=("png", "pdf")):
    if not data.traces:
        raise NoData("no Chrome-trace JSON (lins step --trace)")
    paths = []
    groups = group_traces(data.traces)
    for (folder, stem), files in sorted(groups.items())[:MAX_FIGURES]:
        name = f"{os.path.basename(folder)}_{stem}" if folder else stem
        paths += draw_group(name, files, out_dir, formats)
    if not paths:
        raise NoData("the trace files hold no complete events (ph X, or B/E pairs)")
    return paths
