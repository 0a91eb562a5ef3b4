#!/usr/bin/env bash
# The measurement behind data/cluster/device-rate/README.md: every strategy's compute on the emulated 2 x 2 cluster
# without and with pacing to the emulated device (repeated), and one device rate across 1, 2 and 4 nodes of 2 ranks.
# Usage (as root, from the repository root): data/cluster/device-rate/measure.sh [REPEATS]. About 6 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=data/cluster/device-rate
repeats=${1:-3}
lins=build/lins
export LINS_CLUSTER=${LINS_CLUSTER:-linsrate}
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT
rm -rf "$out/runs"
mkdir -p "$out/runs"
step() {
  scripts/cluster.sh run -- "$lins" step --model small --micro-batches 2 --overlap none --warmup 1 --steps 3 \
    --timeout 120 "$@"
}
strategies=ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp
LINS_BIN=$lins scripts/cluster.sh up --nodes 2 --ranks-per-node 2 | tee "$out/runs/up-calibration-2x2.txt"
rate=$(grep -o '^device_tflops=.*' "/run/$LINS_CLUSTER-cluster/config" | cut -d= -f2)
for r in $(seq 1 "$repeats"); do
  step --gpus-per-node 2 --strategies "$strategies" --device-rate off --out "$out/runs/unpaced-r$r" | tail -n 11
  step --gpus-per-node 2 --strategies "$strategies" --out "$out/runs/paced-r$r" | tail -n 11
done
# One calibration (the 2 x 2 one) at 1, 2 and 4 nodes; each size's own measured rate is printed by its `up`.
for nodes in 1 4 2; do
  LINS_BIN=$lins scripts/cluster.sh up --nodes "$nodes" --ranks-per-node 2 | tee "$out/runs/up-${nodes}x2.txt"
  LINS_BIN=$lins scripts/cluster.sh up --nodes "$nodes" --ranks-per-node 2 --device-rate "$rate" >/dev/null
  for r in $(seq 1 "$repeats"); do
    step --gpus-per-node 2 --strategies ddp,zero3 --out "$out/runs/nodes$nodes-r$r" | tail -n 5
  done
done
