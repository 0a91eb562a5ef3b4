#!/usr/bin/env bash
# The projection checked against measured runs of the same configurations: measures a bandwidth profile with
# `lins comm --profile`, runs `lins step` for every strategy at several micro-batch counts, calibrates compute from
# two of the runs, projects each run's exact configuration with `lins simulate` and prints projected against
# measured step times per run and per strategy. Compute is calibrated as DDP's for every engine (`--calibrate-as
# ddp`): where ranks share a core (two per core here, on shared memory and on the cluster alike), the core runs every
# co-located rank's compute within each step whatever the engine, so each rank's compute costs the contended rate;
# DDP, with no synchronisation between modules, measures that rate directly, while other engines' waits only move
# time between their measured compute and their exposed communication.
#
#   scripts/validate-projection.sh [OUTDIR]            4 ranks on this machine's shared memory (ranks bound to cores),
#                                                      overlap none at M = 2, 3, 4 (default OUTDIR results/validation)
#   scripts/validate-projection.sh --cluster [OUTDIR]  the emulated cluster (scripts/cluster.sh): 2 and 4 nodes of 2
#                                                      ranks across the shaped link, profiles measured on it,
#                                                      overlap none at M = 2, 3, 4 and all at M = 2, 4; calibrated
#                                                      at each node count from M = 2 and 4, overlap none (default
#                                                      OUTDIR results/validation-cluster)
# About two (shared memory) or five (cluster) minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=local
if [ "${1:-}" = "--cluster" ]; then
  mode=cluster
  shift
fi
scripts/build.sh
out=${1:-results/validation$([ $mode = cluster ] && echo -cluster)}
lins=${BUILD_DIR:-build}/lins  # relative: provenance files record argv
python=${LINS_PYTHON:-/usr/bin/python3}
mkdir -p "$out"
per_node=2
strategies=ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,lins,p=2x1,g=2x1,os=2x1
# DeepSpeed's element thresholds scaled to the small model (as in scripts/demo.sh).
ds=(--ds-persistence-threshold 14 --ds-prefetch-bucket 7200 --ds-max-reuse-distance 144000 --ds-reduce-bucket 72000)

# launch NODES COMMAND...: the command on NODES nodes of $per_node ranks.
if [ $mode = cluster ]; then
  export LINS_CLUSTER=${LINS_CLUSTER:-linsval}
  trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT
  current_nodes=0
  launch() {
    local nodes=$1
    shift
    if [ "$current_nodes" != "$nodes" ]; then
      scripts/cluster.sh up --nodes "$nodes" --ranks-per-node $per_node >/dev/null
      current_nodes=$nodes
    fi
    scripts/cluster.sh run -- "$@"
  }
else
  mpi=(--oversubscribe --bind-to core:overload-allowed --map-by core -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)
  [ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
  launch() {
    local nodes=$1
    shift
    mpirun "${mpi[@]}" -np $((nodes * per_node)) "$@"
  }
fi

# The runs: "NODES M OVERLAP" each; those at M = 2 and 4 with overlap none calibrate compute.
if [ $mode = cluster ]; then
  runs=("2 2 none" "2 4 none" "2 3 none" "2 2 all" "2 4 all" "4 2 none" "4 4 none" "4 3 none" "4 2 all" "4 4 all")
  node_counts=(2 4)
else
  runs=("2 2 none" "2 4 none" "2 3 none")
  node_counts=(2)
fi

for n in "${node_counts[@]}"; do
  echo "== profile: lins comm --profile (bf16, as the step's collectives), $n nodes of $per_node =="
  launch "$n" "$lins" comm -b 256 -e 4M -f 2 -n 30 -w 5 -d bf16 --gpus-per-node $per_node \
    --profile "$out/profile_n$n.csv" >"$out/profile_n$n.log"
done
for r in "${runs[@]}"; do
  read -r n m ov <<<"$r"
  echo "== lins step --overlap $ov, $n nodes, M = $m =="
  launch "$n" "$lins" step --model small --gpus-per-node $per_node --micro-batches "$m" --overlap "$ov" \
    --strategies "$strategies" --gpu-mem 16MiB "${ds[@]}" --warmup 2 --steps 8 --profile "$out/profile_n$n.csv" \
    --out "$out/n${n}_m${m}_$ov" >"$out/n${n}_m${m}_$ov.log"
done
# Compute is calibrated at each node count from its runs at M = 2 and 4 with overlap none: with more nodes than cores
# the ranks per core grow with the nodes (2 at 2 nodes, 4 at 4 nodes on 2 cores), and the contended rate falls with them.
calibration_for() { echo "$out/n$1_m2_none/step.csv,$out/n$1_m4_none/step.csv"; }
pairs=()
aliases=()
for r in "${runs[@]}"; do
  read -r n m ov <<<"$r"
  name=n${n}_m${m}_$ov
  # The measured run's planned `lins` plan, projected by name.
  lins_plan=$(grep -o 'lins: the planner chose [^ ]*' "$out/$name.log" | awk '{print $5}')
  echo "== lins simulate, the configuration of $name =="
  "$lins" simulate --model small --gpus $((n * per_node)) --gpus-per-node $per_node --seq 128 --micro-batch 1 \
    --global-batch-tokens $((128 * m * n * per_node)) --overlap "$ov" \
    --strategies "ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,$lins_plan,p=2x1,g=2x1,os=2x1" \
    --profile "$out/profile_n$n.csv" --network cpu-local --calibrate "$(calibration_for "$n")" \
    --calibrate-as ddp --bucket 1M "${ds[@]}" --peak-tflops 1 --out "$out/projected_$name.csv" >/dev/null
  pairs+=(--pair "$name" "$out/$name/step.csv" "$out/projected_$name.csv")
  aliases+=(--alias "$name:lins=$lins_plan")
done
"$python" analysis/validate_projection.py "${pairs[@]}" "${aliases[@]}" --csv "$out/comparison.csv"
# The provenance records the launcher's settings by absolute path (the cluster's collective rules file): relative to
# the repository, so that the folder can be committed as it is.
grep -rl "$PWD/" "$out" 2>/dev/null | xargs -r sed -i "s|$PWD/||g"
