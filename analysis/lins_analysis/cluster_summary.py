"""The tables of the emulated-cluster experiments (jobs/cluster_experiments.sh) as Markdown: the bus bandwidth of each
collective inside and across nodes from the profiles (Fig. 3), step time and TGS of every strategy at each node count
(Fig. 11/12, with Fig. 16/17's three series among them) and the Lins plan under each overlap mode (Table V). Medians
over the timed steps of the slowest rank, as the figures draw them.
Usage: python3 -m lins_analysis.cluster_summary [DATA] (default data/cluster), or analysis/cluster_summary.py."""

import glob
import os
import sys

import pandas as pd

from lins_analysis.load import read_csv, read_step_csv
from lins_analysis.style import markdown_table


def profile_table(data):
    rows = []
    for path in sorted(glob.glob(os.path.join(data, "profile", "*.csv"))):
        p = read_csv(path)
        for (op, mi, mx), g in p.groupby(["op", "mesh_intra", "mesh_inter"], sort=False):
            big = g[g["message_bytes"] >= 1 << 20]
            if big.empty:
                continue
            small = g.sort_values("message_bytes").iloc[0]
            rows.append({"profile": os.path.basename(path), "op": op, "mesh": f"{mi}x{mx}",
                         f"time_us at {int(small['message_bytes'])} B": round(float(small["time_s"]) * 1e6, 1),
                         "busbw_gbps 1 MiB": float(big.iloc[0]["busbw_gbps"]),
                         "busbw_gbps largest": float(big.iloc[-1]["busbw_gbps"]),
                         "largest_bytes": int(big.iloc[-1]["message_bytes"])})
    return pd.DataFrame(rows)


def scaling_table(data):
    frames = []
    for path in sorted(glob.glob(os.path.join(data, "scaling", "n*", "step.csv"))):
        s = read_step_csv(path)
        frames.append(s[s["source"] == "measured"])
    if not frames:
        return pd.DataFrame()
    s = pd.concat(frames)
    g = s.groupby(["strategy", "world_size"], sort=False).agg(step_s=("step_time_s", "median"), tgs=("tgs", "median"))
    step = g["step_s"].unstack("world_size")
    tgs = g["tgs"].unstack("world_size")
    out = pd.DataFrame(index=step.index)
    for w in sorted(step.columns):
        out[f"{w} ranks: step_s"] = step[w]
        out[f"{w} ranks: TGS"] = tgs[w].round(0).astype("Int64")
    return out.reset_index()


def overlap_table(data):
    rows = []
    for path in sorted(glob.glob(os.path.join(data, "overlap", "m*_*", "step.csv"))):
        s = read_step_csv(path)
        s = s[s["source"] == "measured"]
        rows.append({"M": int(s["micro_batches"].iloc[0]), "overlap": s["overlap"].iloc[0],
                     "plan": s["plan"].iloc[0], "step_s": s["step_time_s"].median(), "tgs": round(s["tgs"].median()),
                     "exposed_s": s["exposed_comm_s"].median()})
    if not rows:
        return pd.DataFrame()
    order = {"all": 0, "no_bcast": 1, "no_allreduce": 2, "none": 3}
    df = pd.DataFrame(rows)
    return df.sort_values(["M", "overlap"], key=lambda c: c.map(order) if c.name == "overlap" else c)


def main(argv=None):
    data = (argv or sys.argv[1:] or ["data/cluster"])[0]
    for title, table in [("Latency (smallest message) and bus bandwidth (GB/s) of 1 MiB and more", profile_table(data)),
                         ("Every strategy at each scale (Fig. 11/12, 16/17)", scaling_table(data)),
                         ("The Lins plan under each overlap mode (Table V)", overlap_table(data))]:
        print(f"### {title}\n")
        print(markdown_table(table, "{:.3f}") if not table.empty else "(no data)\n", end="")
        print()
    t4 = os.path.join(data, "plans", "table4.md")
    if os.path.exists(t4):
        print("### Every legal plan measured, beside the planner's choices (Table IV)\n")
        print(open(t4).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
