#!/usr/bin/env bash
# The planner on the paced 2 x 2 cluster: every legal plan and baseline of the small model measured on paced devices,
# then `lins plan --objective step` at two memory limits, fed with the measured profile, compute calibration and paced
# contention of a `scripts/validate-projection.sh --cluster` run (its device too); compare_plans.py's table per limit.
#
#   data/cluster/plans-paced/measure.sh VALIDATION_DIR [OUTDIR]   (as root, from the repository root)
set -euo pipefail
val=${1:?give the folder scripts/validate-projection.sh --cluster wrote}
out=${2:-data/cluster/plans-paced}
lins=${BUILD_DIR:-build}/lins
python=${LINS_PYTHON:-/usr/bin/python3}
export LINS_CLUSTER=${LINS_CLUSTER:-linsval}
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT
read -r -a device <"$val/device.txt"  # --device-rate T --device-gbps G, the validation's device
mkdir -p "$out"
ds=(--ds-persistence-threshold 14 --ds-prefetch-bucket 7200 --ds-max-reuse-distance 144000 --ds-reduce-bucket 72000)
plan_args=(--model small --gpus-per-node 2 --nodes 2 --seq 128 --micro-batch 1 --micro-batches 2
  --reserve-context 0 --reserve-cublas 0 --reserve-nccl 0 --reserve-fragmentation 0 --network cpu-local
  --profile "$val/profile_n2.csv" --top 20 --bucket 1M "${ds[@]}")
calibration="$val/n2_m2_none/step.csv,$val/n2_m4_none/step.csv"
chosen() { "$python" -c "
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l[0] != '#'))
print(next(r['name'] for r in rows if r['why'] == 'chosen'))" "$1"; }
# The demo's limit and a tighter one at which the MiCS-like plans (and more) no longer fit.
limits=(16MiB 10MiB)
for limit in "${limits[@]}"; do
  "$lins" plan "${plan_args[@]}" --gpu-mem "$limit" --objective step --calibrate "$calibration" --calibrate-as ddp \
    --contention "$val/contention_n2.toml" --csv "$out/plan_step_$limit.csv" >"$out/plan_step_$limit.txt"
done
legal=$("$python" -c "
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l[0] != '#') if r['baseline'] == '0']
print(','.join(r['name'] for r in rows))" "$out/plan_step_16MiB.csv")
# One measurement serves both limits: the limit decides which plans may be chosen, not how fast a plan runs.
scripts/cluster.sh up --nodes 2 --ranks-per-node 2 --device-rate "${device[1]}" >"$out/cluster_up.txt"
scripts/cluster.sh status >>"$out/cluster_up.txt"
scripts/cluster.sh run -- "$lins" step --model small --gpus-per-node 2 --seq 128 --micro-batch 1 --micro-batches 2 \
  --gpu-mem 16MiB --warmup 2 --steps 8 --strategies "$legal,ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp" "${ds[@]}" \
  --profile "$val/profile_n2.csv" "${device[@]}" --out "$out" >"$out/step.log"
scripts/cluster.sh down >/dev/null
for limit in "${limits[@]}"; do
  "$python" analysis/compare_plans.py "$out/step.csv" --plans "$out/plan_step_$limit.csv" \
    --choice "step objective at $limit=$(chosen "$out/plan_step_$limit.csv")" --markdown "$out/table_$limit.md" |
    tail -n 1 | tee "$out/verdict_$limit.txt"
done
grep -rl "$PWD/" "$out" 2>/dev/null | xargs -r sed -i "s|$PWD/||g"
