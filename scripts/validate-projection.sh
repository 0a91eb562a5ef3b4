#!/usr/bin/env bash
# The projection checked against measured runs of the same configurations: measures a bandwidth profile with
# `lins comm --profile`, runs `lins step` for every strategy at several micro-batch counts, calibrates compute from
# two of the runs, projects each run's exact configuration with `lins simulate` and prints projected against
# measured step times (and compute and exposed communication) per run and per strategy. Compute is calibrated as
# DDP's for every engine (`--calibrate-as ddp`): where ranks share a core, the core runs every co-located rank's
# compute within each step whatever the engine; DDP, with no synchronisation between modules, measures that rate
# directly, while other engines' waits only move time between their measured compute and their exposed communication.
#
#   scripts/validate-projection.sh [OUTDIR]            4 ranks on this machine's shared memory (ranks bound to cores),
#                                                      overlap none at M = 2, 3, 4, unpaced (default OUTDIR
#                                                      results/validation)
#   scripts/validate-projection.sh --cluster [OUTDIR]  the emulated cluster (scripts/cluster.sh): 2 and 4 nodes of 2
#                                                      ranks across the shaped link, every rank a paced device
#                                                      (default OUTDIR results/validation-cluster)
#
# On the cluster every rank is the cluster's emulated device: the rate `scripts/cluster.sh up` measures at 2 nodes
# (or LINS_VALIDATE_DEVICE_RATE=TFLOPS,GBPS), given to the 4-node cluster too and to every command as --device-rate
# and --device-gbps, so that compute of the same FLOPs takes the same time at both node counts. So ONE compute
# calibration, from the 2-node runs at M = 2 and 4 with overlap none, serves both node counts (an earlier version
# calibrated each node count from its own runs, because unpaced ranks computed slower as more shared the cores).
# Each node count has its own measured bandwidth profile and its own measured contention (`lins comm --contention`,
# paced, right after the profile). Runs: overlap none and all at M = 2, 3, 4 at each node count; each is projected
# twice, with `--contention off` (projected_*_off.csv) and with the measured contention (projected_*.csv).
# About two (shared memory) or twenty (cluster) minutes on 2 cores.
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
# The Lins and DDP gradient bucket for the small model, as in scripts/demo.sh (the default 25 MiB holds all of it).
bucket=(--bucket 1M)

# launch NODES COMMAND...: the command on NODES nodes of $per_node ranks.
device=()  # the cluster's device, given to every step and contention run
if [ $mode = cluster ]; then
  export LINS_CLUSTER=${LINS_CLUSTER:-linsval}
  trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT
  current_nodes=0
  launch() {
    local nodes=$1
    shift
    if [ "$current_nodes" != "$nodes" ]; then
      if [ ${#device[@]} -eq 0 ]; then
        # The first cluster measures its device (or takes the one given); every later one gets the same rate.
        if [ -n "${LINS_VALIDATE_DEVICE_RATE:-}" ]; then
          scripts/cluster.sh up --nodes "$nodes" --ranks-per-node $per_node \
            --device-rate "${LINS_VALIDATE_DEVICE_RATE%%,*}" >"$out/cluster_up_n$nodes.txt"
          device=(--device-rate "${LINS_VALIDATE_DEVICE_RATE%%,*}" --device-gbps "${LINS_VALIDATE_DEVICE_RATE#*,}")
        else
          scripts/cluster.sh up --nodes "$nodes" --ranks-per-node $per_node >"$out/cluster_up_n$nodes.txt"
          local line tflops gbps
          line=$(scripts/cluster.sh status | grep '^emulated device:')
          tflops=$(sed -nE 's/^emulated device: ([^ ]+) TFLOP.*/\1/p' <<<"$line")
          gbps=$(sed -nE 's/.*optimizer ([^ ]+) GB.*/\1/p' <<<"$line")
          [ -n "$tflops" ] && [ -n "$gbps" ] || { echo "no emulated device measured: $line" >&2; exit 1; }
          device=(--device-rate "$tflops" --device-gbps "$gbps")
        fi
        echo "== device: ${device[*]} (every rank, at every node count) =="
        echo "${device[*]}" >"$out/device.txt"
      else
        scripts/cluster.sh up --nodes "$nodes" --ranks-per-node $per_node --device-rate "${device[1]}" \
          >"$out/cluster_up_n$nodes.txt"
      fi
      scripts/cluster.sh status >>"$out/cluster_up_n$nodes.txt"
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

# The runs: "NODES M OVERLAP" each; the first two (2 nodes, M = 2 and 4, overlap none) calibrate compute.
if [ $mode = cluster ]; then
  runs=()
  for n in 2 4; do
    for ov in none all; do
      for m in 2 4 3; do runs+=("$n $m $ov"); done
    done
  done
  node_counts=(2 4)
else
  runs=("2 2 none" "2 4 none" "2 3 none")
  node_counts=(2)
fi
calibration="$out/n2_m2_none/step.csv,$out/n2_m4_none/step.csv"

# Each node count: its profile and (on the cluster) its paced contention, then its runs.
for n in "${node_counts[@]}"; do
  echo "== profile: lins comm --profile (bf16, as the step's collectives), $n nodes of $per_node =="
  launch "$n" "$lins" comm -b 256 -e 4M -f 2 -n 30 -w 5 -d bf16 --gpus-per-node $per_node \
    --profile "$out/profile_n$n.csv" >"$out/profile_n$n.log"
  if [ $mode = cluster ]; then
    echo "== contention: lins comm --contention, paced, $n nodes of $per_node =="
    launch "$n" "$lins" comm --contention "$out/contention_n$n.toml" --gpus-per-node $per_node "${device[@]}" \
      >"$out/contention_n$n.log"
  fi
  for r in "${runs[@]}"; do
    read -r rn m ov <<<"$r"
    [ "$rn" = "$n" ] || continue
    echo "== lins step --overlap $ov, $n nodes, M = $m =="
    launch "$n" "$lins" step --model small --gpus-per-node $per_node --micro-batches "$m" --overlap "$ov" \
      --strategies "$strategies" --gpu-mem 16MiB "${bucket[@]}" "${ds[@]}" --warmup 2 --steps 8 --profile "$out/profile_n$n.csv" \
      "${device[@]}" --out "$out/n${n}_m${m}_$ov" >"$out/n${n}_m${m}_$ov.log"
  done
done
[ $mode = cluster ] && scripts/cluster.sh down >/dev/null
pairs=()
aliases=()
for r in "${runs[@]}"; do
  read -r n m ov <<<"$r"
  name=n${n}_m${m}_$ov
  # The measured run's planned `lins` plan, projected by name.
  lins_plan=$(grep -o 'lins: the planner chose [^ ]*' "$out/$name.log" | awk '{print $5}')
  # Projected without contention (before) and, on the cluster, with the node count's measured contention (after).
  # On shared memory: once, with the default contention.
  if [ $mode = cluster ]; then
    variants=("off:_off" "$out/contention_n$n.toml:")
  else
    variants=("default:")
  fi
  for v in "${variants[@]}"; do
    contention=()
    [ "${v%:*}" = default ] || contention=(--contention "${v%:*}")
    suffix=${v##*:}
    echo "== lins simulate, the configuration of $name, ${contention[*]:-default contention} =="
    "$lins" simulate --model small --gpus $((n * per_node)) --gpus-per-node $per_node --seq 128 --micro-batch 1 \
      --global-batch-tokens $((128 * m * n * per_node)) --overlap "$ov" \
      --strategies "ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,$lins_plan,p=2x1,g=2x1,os=2x1" \
      --profile "$out/profile_n$n.csv" --network cpu-local --calibrate "$calibration" "${contention[@]}" \
      --calibrate-as ddp "${bucket[@]}" "${ds[@]}" --peak-tflops 1 --host-model off --out "$out/projected_$name$suffix.csv" >/dev/null
  done
  if [ $mode = cluster ]; then
    pairs+=(--pair "$name" "$out/$name/step.csv" "$out/projected_$name.csv")
    pairs+=(--before "$name" "$out/projected_${name}_off.csv")
  else
    pairs+=(--pair "$name" "$out/$name/step.csv" "$out/projected_$name.csv")
  fi
  aliases+=(--alias "$name:lins=$lins_plan")
done
"$python" analysis/validate_projection.py "${pairs[@]}" "${aliases[@]}" --csv "$out/comparison.csv" \
  --summary "$out/summary.md" | tee "$out/comparison.txt"
# The provenance records the launcher's settings by absolute path (the cluster's collective rules file): relative to
# the repository, so that the folder can be committed as it is.
grep -rl "$PWD/" "$out" 2>/dev/null | xargs -r sed -i "s|$PWD/||g"
