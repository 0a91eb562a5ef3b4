#!/usr/bin/env bash
# Sets up, builds and runs the main job on a default that needs no cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR/lins" plan --model llama-13b --gpus-per-node 8 --nodes 128 --gpu-mem 80GiB --seq 4096 --micro-batch 1 \
  --global-batch-tokens 4M --network paper-a800
