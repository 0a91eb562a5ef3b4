#!/usr/bin/env bash
# Sets up, builds and runs the main job on a default that needs no cluster: the synthetic LLaMA step under every
# strategy on the CPU backend (4 MPI ranks as 2 nodes of 2, the small model), its trace replayed through the
# simulator's timeline, a projection of the paper's scales with the cost model, and the figures drawn from both.
# Where this machine allows network namespaces (root), the 2 nodes are real network hosts of an emulated cluster
# (scripts/cluster.sh: shared memory inside a node, a shaped link between them; docs/cluster.md), brought up for the
# job and removed after it; elsewhere the 4 ranks share this machine's memory, and the job says so.
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
# The gradient bucket of the Lins and DDP engines likewise: the small model's 1.9 MiB of bf16 gradients would fill one
# bucket of the default 25 MiB, all-reduced only once backward ends; 1 MiB gives two, the first under backward.
small_bucket=(--bucket 1M)

echo "== 1/6 the fabric: 2 nodes of 2 ranks =="
mkdir -p "$results"
export LINS_CLUSTER=${LINS_CLUSTER:-linsdemo}  # its own name: a cluster the user brought up is left alone
figure_data=(--data "$results")
# `up` also measures the rate each rank computes at with all four computing at once and sets the cluster's emulated
# device below it: every `lins step` launched through it paces each compute task to that device (docs/cluster.md), so
# strategies that share the two cores differently still compute alike.
if LINS_BIN=$lins scripts/cluster.sh up --nodes 2 --ranks-per-node 2 >"$results/cluster-up.log" 2>"$results/cluster.log"; then
  trap 'scripts/cluster.sh down >/dev/null' EXIT
  grep -F 'emulated device' "$results/cluster-up.log" || true
  scripts/cluster.sh status
  launch=(scripts/cluster.sh run --)
  echo "-- lins comm --profile: every collective inside and across the nodes (the profile the planner reads)"
  "${launch[@]}" "$lins" comm -b 4K -e 16M -f 4 -n 10 -w 3 --gpus-per-node 2 --profile "$results/profile/cluster.csv" |
    grep -E '^# (Avg|wrote)'
  profile=$results/profile/cluster.csv
  echo "-- lins comm --contention: what overlap costs on these devices (compute beside collectives and the reverse)"
  "${launch[@]}" "$lins" comm --contention "$results/profile/contention.toml" --gpus-per-node 2 --repeats 3 |
    grep -E '^# fitted'
  contention=$results/profile/contention.toml
  device=$(scripts/cluster.sh status | sed -n 's/^emulated device: \([0-9.e+-]*\) TFLOP\/s per rank, optimizer \([0-9.e+-]*\) GB\/s.*/\1 \2/p')
else
  echo "demo: no emulated cluster on this machine ($(grep -m1 cluster.sh "$results/cluster.log")); the 4 ranks run on" \
    "this machine's shared memory instead: 'nodes' are labels, inter-node bytes cost what intra-node bytes cost"
  launch=(mpirun "${mpi_flags[@]}" -np 4)
  profile=data/profiles/cpu-2core-4ranks.csv
  figure_data+=(--data data/profiles)
fi

echo
echo "== 2/6 lins step: every strategy, 4 ranks as 2 nodes of 2 (CPU backend, measured) =="
# --gpu-mem gives the planner a memory limit to plan under (per rank; bf16 P and G, fp32 optimizer states);
# --objective comm plans 'lins' as the paper's planner does (a 6-tuple on the Lins engine, by summed communication).
# The last strategy is the MiCS plan (groups of one node) on the Lins engine, for Fig. 16/17.
"${launch[@]}" "$lins" step --model small --gpus-per-node 2 --objective comm \
  --strategies ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,lins,p=2x1,g=2x1,os=2x1 --gpu-mem 16MiB \
  "${ds_scaled[@]}" "${small_bucket[@]}" --profile "$profile" --trace --out "$results/step" | tee "$results/step.log"
echo "-- Table V: the Lins plan with each overlap switched off in turn"
for ov in no_bcast no_allreduce none; do
  "${launch[@]}" "$lins" step --model small --gpus-per-node 2 --strategies lins --objective comm --gpu-mem 16MiB \
    "${small_bucket[@]}" --overlap "$ov" --profile "$profile" --out "$results/overlap/$ov" | grep -E '^lins +\('
done

echo
echo "== 3/6 lins replay: the measured steps re-timed through the simulator's timeline =="
"$lins" replay "$results/step" --csv "$results/step/replay.csv" | sed -n '/per strategy/,$p'

echo
echo "== 4/6 lins simulate: the paper's cluster, 8..1024 A800 GPUs (cost model, projected) =="
# Two projections, drawn side by side: the device schedule with overlap free (--host-model off --contention off), and
# the real systems as they run today (the defaults: the network's contention priors and DeepSpeed's host side); the
# figures label each.
sim=(--model llama-7b,llama-13b,llama-30b --gpus 8,32,128,512,1024 --paper-recompute --micro-batch 1
  --strategies zero1,zero3,zeropp,zeropp+qwz+qgz,mics,lins,p=8x1,g=8x1,os=8x1)
"$lins" simulate "${sim[@]}" --host-model off --contention off --out "$results/simulate/device.csv" >/dev/null
"$lins" simulate "${sim[@]}" --host-model today --out "$results/simulate/projection.csv" | tail -n 19

echo
echo "== 5/6 figures =="
python=${LINS_PYTHON:-/usr/bin/python3}
"$python" analysis/make_figures.py "${figure_data[@]}" --out "$results/figures"
echo
echo "== 6/6 how far to trust the projection here: this run's steps projected and measured =="
# The projection of this very run's configuration, made from what was measured before it, never from its step times:
# compute at the emulated device's rate (what each task was paced to), collectives from the profile, what overlap
# costs from the contention just measured; the planner's 'lins' projected as the plan the run chose; no GPU reserve
# (the CPU backend has no CUDA context, cuBLAS workspace or NCCL buffers), and no host model (lins's own executor ran).
if [ -n "${device:-}" ]; then
  read -r device_tflops device_gbps <<<"$device"
  lins_plan=$(grep -o 'lins: the planner chose [^ ]*' "$results/step.log" | awk '{print $5}')
  "$lins" simulate --model small --gpus 4 --gpus-per-node 2 --seq 128 --micro-batch 1 --global-batch-tokens 1024 \
    --strategies "ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,${lins_plan:-lins},p=2x1,g=2x1,os=2x1" \
    --objective comm --host-model off --gpu-mem 16MiB "${small_bucket[@]}" "${ds_scaled[@]}" --network cpu-local --profile "$profile" \
    --reserve-context 0B --reserve-cublas 0B --reserve-nccl 0B --reserve-fragmentation 0 \
    --contention "$contention" --sustained-tflops "$device_tflops" --hbm-gbps "$device_gbps" \
    --peak-tflops "$device_tflops" --label "this run's devices" --out "$results/simulate/own-run.csv" >/dev/null
  "$python" analysis/validate_projection.py --pair demo "$results/step/step.csv" "$results/simulate/own-run.csv" \
    ${lins_plan:+--alias "lins=$lins_plan"} --csv "$results/simulate/own-run-comparison.csv"
else
  echo "(needs the emulated cluster's devices: without them the ranks share the cores unevenly, and compute per"
  echo " strategy is not what a device of a fixed rate would take; scripts/validate-projection.sh checks it on"
  echo " shared memory with a calibration instead)"
fi
echo "results: $results/step (measured on fabric $(grep -o '"fabric": "[^"]*' "$results/step/step.provenance.json" | cut -d'"' -f4)), $results/simulate (projected), $results/figures"
