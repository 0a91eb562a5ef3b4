#!/usr/bin/env bash
# The link is what it says: on 2 nodes x 1 rank with an 800mbit uplink, lins comm across the nodes measures every
# collective's bus bandwidth within 20% of the link's rate at 8 and 16 MiB, and inside a node (2 x 2) far above it.
# The link's rate is judged by each size's best iteration: on a loaded 2-core machine other work can only add time to
# an iteration, never take it away, so the median would test the machine's load, not the link. The sizes are large
# so that the shaper's token bucket (256 KiB, let through at once when an iteration starts) is a few percent of what
# each rank sends.
source "$(dirname "$0")/common.sh"
bin=$(realpath "${1:-$repo/build/lins}")
cluster_begin
work=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

"$cluster" up --nodes 2 --ranks-per-node 1 --link 800mbit >/dev/null
"$cluster" run -- "$bin" comm -b 8M -e 16M -f 2 -o all --gpus-per-node 1 --group inter -n 10 -w 2 \
  --csv "$work/inter.csv" | grep -v '^#'
"$cluster" up --nodes 2 --ranks-per-node 2 --link 800mbit >/dev/null 2>&1
"$cluster" run -- "$bin" comm -b 1M -e 4M -f 2 -o all_gather --gpus-per-node 2 --group intra -n 20 -w 3 \
  --csv "$work/intra.csv" | grep -v '^#'
"$py" - "$work" <<'PY'
import csv, sys
def rows(name):
    return list(csv.DictReader(l for l in open(f"{sys.argv[1]}/{name}.csv") if not l.startswith("#")))
link_gbps = 800e6 / 8 / 1e9
bad = []
for r in rows("inter"):
    bw = float(r["busbw_gbps"]) * float(r["time_median_s"]) / float(r["time_min_s"])  # best iteration's busbw
    print(f"inter {r['op']:15s} {int(r['message_bytes']):>9d} B  best busbw {bw:.3f} GB/s  ({bw / link_gbps:.2f} of the link)")
    if not 0.8 * link_gbps <= bw <= 1.2 * link_gbps:
        bad.append(f"{r['op']} at {r['message_bytes']} B: {bw:.3f} GB/s")
intra = max(float(r["busbw_gbps"]) for r in rows("intra"))
print(f"intra all_gather best busbw {intra:.3f} GB/s")
if bad:
    sys.exit("FAIL: inter-node busbw not within 20% of the 0.100 GB/s link: " + "; ".join(bad))
if intra < 3 * link_gbps:
    sys.exit(f"FAIL: intra-node busbw {intra:.3f} GB/s is not above the link's rate: shared memory not used?")
print("PASS")
PY
