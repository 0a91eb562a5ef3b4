#!/usr/bin/env bash
# Sets up, builds and runs the main job on a default that needs no cluster: the synthetic LLaMA step under every
# strategy on the CPU backend (4 MPI ranks as 2 nodes of 2, the small model), a projection of the paper's scales
# with the cost model, and the figures drawn from both. Results under results/ (RESULTS_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
results=${RESULTS_DIR:-results}
lins="$BUILD_DIR/lins"
mpi_flags=(--oversubscribe -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)

echo "== 1/3 lins step: every strategy, 4 ranks as 2 nodes of 2 (CPU backend, measured) =="
# --gpu-mem gives the planner a memory limit to plan under (per rank; bf16 P and G, fp32 optimizer states).
mpirun "${mpi_flags[@]}" -np 4 "$lins" step --model small --gpus-per-node 2 \
  --strategies ddp,zero1,zero2,zero3,mics,zeropp,lins --gpu-mem 16MiB \
  --profile data/profiles/cpu-2core-4ranks.csv --trace --out "$results/step"

echo
echo "== 2/3 lins simulate: the paper's cluster, 8..1024 A800 GPUs (cost model, projected) =="
"$lins" simulate --model llama-7b,llama-13b,llama-30b --gpus 8,32,128,512,1024 --paper-recompute \
  --strategies zero1,zero3,zeropp,mics,lins --out "$results/simulate/projection.csv" | tail -n 16

echo
echo "== 3/3 figures =="
python=${LINS_PYTHON:-/usr/bin/python3}
"$python" analysis/make_figures.py --data "$results" --data data/profiles --out "$results/figures"
echo "results: $results/step (measured), $results/simulate (projected), $results/figures"
