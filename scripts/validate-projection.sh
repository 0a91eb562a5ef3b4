#!/usr/bin/env bash
# The projection checked against this machine: measures a bandwidth profile with `lins comm --profile` (ranks bound to
# cores), runs `lins step --overlap none` for every strategy at three micro-batch counts, calibrates compute from the
# runs at the first and last count (`--calibrate ... --calibrate-as ddp`: where ranks share cores, DDP, with no
# synchronisation between modules, measures the contended compute rate every strategy pays), projects each run's exact
# configuration with `lins simulate` and prints projected against measured step times (the middle count is out of
# sample). Usage: scripts/validate-projection.sh [OUTDIR] (default results/validation). About two minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
out=${1:-results/validation}
lins=${BUILD_DIR:-build}/lins
python=${LINS_PYTHON:-/usr/bin/python3}
mkdir -p "$out"
ranks=4 per_node=2
mpi=(--oversubscribe --bind-to core:overload-allowed --map-by core -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
strategies=ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,lins,p=2x1,g=2x1,os=2x1
# DeepSpeed's element thresholds scaled to the small model (as in scripts/demo.sh).
ds=(--ds-persistence-threshold 14 --ds-prefetch-bucket 7200 --ds-max-reuse-distance 144000 --ds-reduce-bucket 72000)

echo "== profile: lins comm --profile (bf16, as the step's collectives), ranks bound to cores =="
mpirun "${mpi[@]}" -np $ranks "$lins" comm -b 256 -e 4M -f 2 -n 30 -w 5 -d bf16 --gpus-per-node $per_node \
  --profile "$out/profile.csv" >"$out/profile.log"
for M in 2 3 4; do
  echo "== lins step --overlap none, M = $M =="
  mpirun "${mpi[@]}" -np $ranks "$lins" step --model small --gpus-per-node $per_node --micro-batches $M \
    --overlap none --strategies "$strategies" --gpu-mem 16MiB "${ds[@]}" --warmup 2 --steps 8 \
    --profile "$out/profile.csv" --out "$out/m$M" >"$out/m$M.log"
done
# The measured run's planned `lins` plan, projected by name.
lins_plan=$(grep -o 'lins: the planner chose [^ ]*' "$out/m2.log" | awk '{print $5}')
pairs=()
for M in 2 3 4; do
  echo "== lins simulate, the configuration of M = $M =="
  "$lins" simulate --model small --gpus $ranks --gpus-per-node $per_node --seq 128 --micro-batch 1 \
    --global-batch-tokens $((128 * M * ranks)) --overlap none \
    --strategies "ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,$lins_plan,p=2x1,g=2x1,os=2x1" \
    --profile "$out/profile.csv" --network cpu-local --calibrate "$out/m2/step.csv,$out/m4/step.csv" \
    --calibrate-as ddp --bucket 1M "${ds[@]}" --peak-tflops 1 --out "$out/projected_m$M.csv" >/dev/null
  pairs+=(--pair "M=$M" "$out/m$M/step.csv" "$out/projected_m$M.csv")
done
"$python" analysis/validate_projection.py "${pairs[@]}" --alias "lins=$lins_plan" --csv "$out/comparison.csv"
