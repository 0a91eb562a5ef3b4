#!/usr/bin/env bash
# The link is what it says: on 2 nodes x 1 rank with an 800mbit uplink, lins comm across the nodes measures every
# collective's bus bandwidth within 20% of the link's rate at 8 and 16 MiB, and inside a node (2 x 2) far above it.
# The link's rate is judged by each size's best iteration: on a loaded 2-core machine other work can only add time to
# an iteration, never take it away, so the median would test the machine's load, not the link. The sizes are large
# so that the shaper's token bucket (256 KiB, let through at once when an iteration starts) is a few percent of what
# each rank sends.
# An op that comes out slow is measured again, up to twice, and judged by its best iteration over the tries: the
# reducing ops do their reduction and Open MPI's buffer copies on the node's one core, and under a long stretch of
# other load on the machine that core's share adds about 10 ms to every iteration of a try (seen once in CI:
# reduce_scatter at 8 MiB 0.76 of the link, where a quiet machine measures 0.96). A link at the wrong rate is wrong
# in every try, and one faster than the shaper allows (above 1.2) fails at once.
source "$(dirname "$0")/common.sh"
bin=$(realpath "${1:-$repo/build/lins}")
cluster_begin
work=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

judge_inter() {  # prints the ops (one per line) whose best busbw over every inter*.csv is below 0.8 of the link
  "$py" - "$work" "$@" <<'PY'
import csv, glob, sys
link_gbps = 800e6 / 8 / 1e9
best = {}
for path in sorted(glob.glob(f"{sys.argv[1]}/inter*.csv")):
    for r in csv.DictReader(l for l in open(path) if not l.startswith("#")):
        bw = float(r["busbw_gbps"]) * float(r["time_median_s"]) / float(r["time_min_s"])  # best iteration's busbw
        key = (r["op"], int(r["message_bytes"]))
        best[key] = max(best.get(key, 0.0), bw)
final = len(sys.argv) > 2
too_fast = [k for k, bw in best.items() if bw > 1.2 * link_gbps]
slow = sorted({op for (op, _), bw in best.items() if bw < 0.8 * link_gbps})
for (op, size), bw in sorted(best.items()):
    if final:
        print(f"inter {op:15s} {size:>9d} B  best busbw {bw:.3f} GB/s  ({bw / link_gbps:.2f} of the link)",
              file=sys.stderr)
if too_fast:
    sys.exit("FAIL: faster than the 0.100 GB/s link allows: " + ", ".join(f"{op} at {size} B" for op, size in too_fast))
if final and slow:
    sys.exit("FAIL: inter-node busbw not within 20% of the 0.100 GB/s link in 3 tries: " + ", ".join(slow))
print("\n".join(slow))
PY
}

"$cluster" up --nodes 2 --ranks-per-node 1 --link 800mbit >/dev/null
comm_inter() {  # OP CSV
  "$cluster" run -- "$bin" comm -b 8M -e 16M -f 2 -o "$1" --gpus-per-node 1 --group inter -n 10 -w 2 --csv "$2" |
    grep -v '^#'
}
comm_inter all "$work/inter.csv"
for try in 2 3; do
  slow=$(judge_inter)
  [ -z "$slow" ] && break
  for op in $slow; do
    echo "# $op below 0.8 of the link: measured again (try $try)"
    comm_inter "$op" "$work/inter-$op-$try.csv"
  done
done
judge_inter final

"$cluster" up --nodes 2 --ranks-per-node 2 --link 800mbit >/dev/null 2>&1
"$cluster" run -- "$bin" comm -b 1M -e 4M -f 2 -o all_gather --gpus-per-node 2 --group intra -n 20 -w 3 \
  --csv "$work/intra.csv" | grep -v '^#'
"$py" - "$work" <<'PY'
import csv, sys
link_gbps = 800e6 / 8 / 1e9
rows = list(csv.DictReader(l for l in open(f"{sys.argv[1]}/intra.csv") if not l.startswith("#")))
intra = max(float(r["busbw_gbps"]) for r in rows)
print(f"intra all_gather best busbw {intra:.3f} GB/s")
if intra < 3 * link_gbps:
    sys.exit(f"FAIL: intra-node busbw {intra:.3f} GB/s is not above the link's rate: shared memory not used?")
print("PASS")
PY
