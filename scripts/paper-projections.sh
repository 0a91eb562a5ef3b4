#!/usr/bin/env bash
# The paper's 1024-GPU table (LLaMA-7B, 13B, 30B; Lins, MiCS, ZeRO-3, ZeRO++, ZeRO++ with qwZ and qgZ, ZeRO-1) under
# five labelled projections, each a `lins simulate` of its own: the device schedule with overlap free
# (`--contention off`); with the network's contention priors (docs/cost-model.md, "Contention"); with the real
# systems' host side too (`--host-model today`); with DeepSpeed's overlap_comm off too; and with the contention priors
# on a 100 Gb/s Ethernet cluster (ethernet-100g). Prints the table with the paper's values beside.
#
#   scripts/paper-projections.sh [OUTDIR] [extra lins simulate options]   (default OUTDIR results/paper-projections)
# A few seconds after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/paper-projections}
[ $# -gt 0 ] && shift
lins=${BUILD_DIR:-build}/lins
python=${LINS_PYTHON:-/usr/bin/python3}
mkdir -p "$out"
common=(--model llama-7b,llama-13b,llama-30b --gpus 1024 --paper-recompute --micro-batch 1
  --strategies lins,mics,zero3,zeropp,zeropp+qwz+qgz,zero1)
"$lins" simulate "${common[@]}" --host-model off --contention off "$@" --out "$out/device.csv" >/dev/null
"$lins" simulate "${common[@]}" --host-model off "$@" --out "$out/contention.csv" >/dev/null
"$lins" simulate "${common[@]}" --host-model today "$@" --out "$out/host.csv" >/dev/null
"$lins" simulate "${common[@]}" --host-model today --ds-overlap-comm off "$@" --out "$out/host-overlap-comm-off.csv" \
  >/dev/null
# The same cluster's GPUs on a 100 Gb/s Ethernet network, where ZeRO++'s quantization is meant to pay.
"$lins" simulate "${common[@]}" --network ethernet-100g --host-model off \
  --label "ethernet-100g: device contention=priors" "$@" \
  --out "$out/ethernet-100g.csv" >/dev/null
"$python" analysis/projections_table.py --markdown "$out/device.csv" "$out/contention.csv" "$out/host.csv" \
  "$out/host-overlap-comm-off.csv" "$out/ethernet-100g.csv"
