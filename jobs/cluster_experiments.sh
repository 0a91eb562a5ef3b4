#!/usr/bin/env bash
# The paper's experiments measured on the emulated two-level cluster (scripts/cluster.sh; docs/cluster.md): real
# network hosts on this machine, shared memory inside a node, a shaped link between nodes. No Slurm needed.
#   profile/   lins comm --profile at 2 x 2 and 4 x 2 (Fig. 3; what the planner and the projections read)
#   scaling/   every strategy at 1, 2 and 4 nodes of 2 ranks, global batch fixed (Fig. 11/12/13, Fig. 16/17)
#   overlap/   the Lins plan under the four overlap modes at M = 2 and M = 4 on 2 x 2 (Table V)
#   plans/     every legal plan of the small model on 2 x 2, measured, beside the planner's ranking (Table IV)
# Usage: jobs/cluster_experiments.sh [OUTDIR] (default data/cluster). LINS_CLUSTER_LINK sets the link (default: the
# cluster's default); LINS_STEPS the timed steps per strategy (default 6). About 6 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/cluster}
lins=${LINS_BIN:-build/lins}  # relative: provenance files record argv
[ -x "$lins" ] || { echo "cluster_experiments: $lins not found (scripts/build.sh)" >&2; exit 1; }
export LINS_CLUSTER=${LINS_CLUSTER:-linsexp}
link=${LINS_CLUSTER_LINK:-}
# The emulated device's rate: by default each `up` measures it for its own size (scripts/cluster.sh); a value here
# (TFLOP/s per rank, or off) is used at every size instead.
device=${LINS_CLUSTER_DEVICE_RATE:-}
steps=${LINS_STEPS:-6}
rpn=2
seq=128
tokens=$((seq * 8))  # 8 micro-batches of one sequence per step over the job: M = 4, 2, 1 at 2, 4, 8 ranks
strategies=ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,lins,p=2x1,g=2x1,os=2x1
# DeepSpeed's element thresholds scaled to the small model (as in scripts/demo.sh).
ds=(--ds-persistence-threshold 14 --ds-prefetch-bucket 7200 --ds-max-reuse-distance 144000 --ds-reduce-bucket 72000)
# The Lins and DDP gradient bucket for the small model, as in scripts/demo.sh (the default 25 MiB holds all of it).
bucket=(--bucket 1M)
dirty=$(git status --porcelain --untracked-files=no -- . ":(exclude)$out" 2>/dev/null || true)
rm -rf "${out:?}/profile" "$out/scaling" "$out/overlap" "$out/plans"
mkdir -p "$out/profile" "$out/scaling" "$out/overlap" "$out/plans"
# Every command, in order (a file: most run inside pipelines, in subshells).
commands=$(mktemp)
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true; rm -f "$commands"' EXIT
run() {
  echo "$*" >>"$commands"
  "$@"
}

up() {
  local nodes=$1
  run env LINS_BIN="$lins" scripts/cluster.sh up --nodes "$nodes" --ranks-per-node $rpn ${link:+--link "$link"} \
    ${device:+--device-rate "$device"} | grep -F 'emulated device' || true
  scripts/cluster.sh status | tail -n 1
}
# 'lins' is planned as the paper plans it (--objective comm: a 6-tuple on the Lins engine); Table IV also asks the
# step objective.
step() {
  run scripts/cluster.sh run -- "$lins" step --model small --gpus-per-node $rpn --seq $seq --micro-batch 1 \
    --gpu-mem 16MiB --warmup 2 --steps "$steps" --timeout 120 --objective comm "${bucket[@]}" "$@"
}

# 2 nodes first: one node has no inter-node mesh to profile, and is priced on the 2-node profile's in-node meshes.
for nodes in 2 4 1; do
  echo "== $nodes node(s) x $rpn ranks =="
  up "$nodes"
  profile=$out/profile/cluster-${rpn}x2.csv
  if [ "$nodes" -gt 1 ]; then
    profile=$out/profile/cluster-${rpn}x${nodes}.csv
    run scripts/cluster.sh run -- "$lins" comm -b 4K -e 16M -f 2 -n 20 -w 5 --gpus-per-node $rpn \
      --profile "$profile" | grep -E '^# (Avg|wrote)'
  fi
  step --strategies "$strategies" "${ds[@]}" --global-batch-tokens $tokens --profile "$profile" \
    --out "$out/scaling/n$nodes" | sed -n '/^strategy/,/^(means/p'
done

echo "== Table V: the Lins plan under each overlap mode, 2 x 2, M = 2 and 4 =="
up 2
for m in 2 4; do
  for ov in all no_bcast no_allreduce none; do
    step --strategies lins --micro-batches $m --overlap $ov --profile "$out/profile/cluster-${rpn}x2.csv" \
      --out "$out/overlap/m${m}_$ov" | grep -E '^lins +\('
  done
done

echo "== Table IV: every legal plan and baseline of the small model on 2 x 2, measured, and the planner's choices =="
profile2=$out/profile/cluster-${rpn}x2.csv
plan_args=(--model small --gpus-per-node $rpn --nodes 2 --seq $seq --micro-batch 1 --micro-batches 2 --gpu-mem 16MiB
  --reserve-context 0B --reserve-cublas 0B --reserve-nccl 0B --reserve-fragmentation 0 --network cpu-local
  --profile "$profile2" --top 20 "${bucket[@]}" "${ds[@]}"  # the step's bucket and DeepSpeed settings
  --host-model off)  # lins's own executor ran the plans: no DeepSpeed or PyTorch host side
run "$lins" plan "${plan_args[@]}" --objective comm --csv "$out/plans/plan_comm.csv" | sed -n '/^ranked plans/,$p' |
  sed -n '1,12p'
# The step objective with compute calibrated from the 2-node scaling run (as the validation calibrates it).
run "$lins" plan "${plan_args[@]}" --objective step --calibrate "$out/scaling/n2/step.csv" --calibrate-as ddp \
  --csv "$out/plans/plan_step.csv" | sed -n '/^ranked plans/,$p' | sed -n '1,12p'
chosen() { /usr/bin/python3 -c "
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l[0] != '#'))
print(next(r['name'] for r in rows if r['why'] == 'chosen'))" "$1"; }
legal=$(/usr/bin/python3 -c "
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l[0] != '#') if r['baseline'] == '0']
print(','.join(r['name'] for r in rows))" "$out/plans/plan_comm.csv")
step --strategies "$legal,ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp" "${ds[@]}" --micro-batches 2 \
  --profile "$profile2" --out "$out/plans" | sed -n '/^strategy/,/^(means/p'
/usr/bin/python3 analysis/compare_plans.py "$out/plans/step.csv" --plans "$out/plans/plan_comm.csv" \
  --choice "comm objective=$(chosen "$out/plans/plan_comm.csv")" \
  --choice "step objective=$(chosen "$out/plans/plan_step.csv")" --markdown "$out/plans/table4.md" |
  tail -n 2

{
  echo "# data/cluster: the paper's experiments measured on an emulated two-level cluster"
  echo
  echo "Measured (source=measured) on one $(nproc)-core machine whose 'nodes' are network namespaces with their own"
  echo "hostnames, joined by a bridge whose uplinks are shaped ($(grep -o 'link=.*' "/run/$LINS_CLUSTER-cluster/config" | cut -d= -f2)"
  echo "per node, scripts/cluster.sh); ranks of a node use shared memory, ranks of different nodes TCP over the link."
  echo "Each compute task is paced to an emulated device (lins step --device-rate; the rate each \`up\` set is in every"
  echo "row's fabric column and in the provenance files), so that strategies sharing the cores alike compute alike."
  echo "The CPU backend in its default precision (bf16 P and G, fp32 master weights and moments, fp32 activations),"
  echo "the small model at sequence $seq, one sequence per micro-batch, $tokens tokens per step. Every CSV row's"
  echo "\`fabric\` column and every provenance file name the fabric. Ranks share $(nproc) cores: compare strategies"
  echo "by ratios and bytes, not by absolute seconds."
  echo "Made by jobs/cluster_experiments.sh on $(date -u +%Y-%m-%d) with $("$lins" --version)$(
    [ -n "$dirty" ] && echo " (with uncommitted changes in the tree)")."
  echo
  echo "Draw (each folder alone: the figures take the run with the most tokens per step where several exist):"
  echo
  echo "    /usr/bin/python3 analysis/make_figures.py --data $out/scaling --data $out/profile --out results/figures/cluster"
  echo "    /usr/bin/python3 analysis/make_figures.py --data $out/overlap --out results/figures/cluster-table5 --only table5"
  echo "    /usr/bin/python3 analysis/cluster_summary.py $out     # the tables, Table IV included"
  echo
  echo "Commands, in order:"
  echo
  sed "s|$PWD/||g; s|^|    |" "$commands"
} >"$out/README.md"
# The provenance records the launcher's settings, the collective rules file among them, by absolute path: relative to
# the repository here, so that the committed data names no machine's folders.
grep -rl "$PWD/" "$out" 2>/dev/null | xargs -r sed -i "s|$PWD/||g"
echo "cluster_experiments: wrote $out"
