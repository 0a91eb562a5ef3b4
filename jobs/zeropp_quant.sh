#!/usr/bin/env bash
# ZeRO++ with its quantized communication, measured on the emulated two-level cluster (scripts/cluster.sh;
# docs/cluster.md): the small model for 200 steps from one seed under zeropp as the paper ran it (hpZ only), with qwZ
# (int8 weights), with qgZ (int4 gradients) and with both, on 2 nodes x 2 ranks. Writes step.csv (one row per step:
# loss, step time, intra- and inter-node bytes) and its provenance; analysis/lins_analysis/zeropp_quant.py draws the
# loss difference and the bytes per variant. Usage: jobs/zeropp_quant.sh [OUTDIR] (default data/zeropp-quant).
# LINS_STEPS: the steps (default 200); LINS_CLUSTER_LINK: the inter-node link (default: the cluster's). About 10
# minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/zeropp-quant}
lins=${LINS_BIN:-build/lins}  # relative: provenance files record argv
[ -x "$lins" ] || { echo "zeropp_quant: $lins not found (scripts/build.sh)" >&2; exit 1; }
export LINS_CLUSTER=${LINS_CLUSTER:-linsquant}
steps=${LINS_STEPS:-200}
link=${LINS_CLUSTER_LINK:-}
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT
mkdir -p "$out"
scripts/cluster.sh up --nodes 2 --ranks-per-node 2 ${link:+--link "$link"} | grep -F 'emulated device' || true
scripts/cluster.sh status | tail -n 1
# DeepSpeed's element thresholds scaled to the small model (as in scripts/demo.sh and jobs/cluster_experiments.sh).
scripts/cluster.sh run -- "$lins" step --model small --gpus-per-node 2 --seq 128 --micro-batch 1 --micro-batches 2 \
  --seed 1 --warmup 0 --steps "$steps" --timeout 300 \
  --ds-persistence-threshold 14 --ds-prefetch-bucket 7200 --ds-max-reuse-distance 144000 --ds-reduce-bucket 72000 \
  --strategies zeropp,zeropp+qwz,zeropp+qgz,zeropp+qwz+qgz --out "$out"
