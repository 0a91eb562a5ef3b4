#!/usr/bin/env bash
# Sets up, builds and runs the main job on a default that needs no cluster: the synthetic LLaMA step under every
# strategy on the CPU backend (4 MPI ranks as 2 nodes of 2, the small model), its trace replayed through the
# simulator's timeline, a projection of the paper's scales with the cost model, and the figures drawn from both.
# Results under results/ (RESULTS_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
results=${RESULTS_DIR:-results}
lins="$BUILD_DIR/lins"
mpi_flags=(--oversubscribe -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)

# DeepSpeed counts its ZeRO-3 thresholds in elements; at its defaults the small model (0.97 M parameters) would never
# be gathered at all. Scaled by the size ratio to LLaMA-7B (6.7 B, about 7000x), they give the schedule DeepSpeed has
# on a 7B model: every module gathered, one ahead, the last ones kept for backward, several reduce-scatter buckets.
ds_scaled=(--ds-persistence-threshold 14 --ds-prefetch-bucket 7200 --ds-max-reuse-distance 144000
  --ds-reduce-bucket 72000)

echo "== 1/4 lins step: every strategy, 4 ranks as 2 nodes of 2 (CPU backend, measured) =="
# --gpu-mem gives the planner a memory limit to plan under (per rank; bf16 P and G, fp32 optimizer states).
# The last strategy is the MiCS plan (groups of one node) on the Lins engine, for Fig. 16/17.
mpirun "${mpi_flags[@]}" -np 4 "$lins" step --model small --gpus-per-node 2 \
  --strategies ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,lins,p=2x1,g=2x1,os=2x1 --gpu-mem 16MiB \
  "${ds_scaled[@]}" --profile data/profiles/cpu-2core-4ranks.csv --trace --out "$results/step"

echo
echo "== 2/4 lins replay: the measured steps re-timed through the simulator's timeline =="
"$lins" replay "$results/step" --csv "$results/step/replay.csv" | sed -n '/per strategy/,$p'

echo
echo "== 3/4 lins simulate: the paper's cluster, 8..1024 A800 GPUs (cost model, projected) =="
"$lins" simulate --model llama-7b,llama-13b,llama-30b --gpus 8,32,128,512,1024 --paper-recompute \
  --strategies zero1,zero3,zeropp,mics,lins,p=8x1,g=8x1,os=8x1 --out "$results/simulate/projection.csv" | tail -n 19

echo
echo "== 4/4 figures =="
python=${LINS_PYTHON:-/usr/bin/python3}
"$python" analysis/make_figures.py --data "$results" --data data/profiles --out "$results/figures"
echo "results: $results/step (measured), $results/simulate (projected), $results/figures"
