#!/usr/bin/env bash
# Regenerates data/sample/: a small, real CPU run of `lins step` (4 MPI ranks seen as 2 nodes of 2, the small model)
# that the figure scripts and their tests draw from without any hardware. Every strategy with traces; every strategy
# with no overlap (exact measured communication for the cost-model figure); Lins under the other overlap modes
# (Table V); the MiCS 6-tuple on the Lins engine (Fig. 16/17). About a minute on 2 cores.
# usage: jobs/make_sample.sh [output folder, default data/sample]   (LINS_BIN: the binary, default build/lins)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${LINS_BIN:-build/lins}
out=${1:-data/sample}
[ -x "$bin" ] || { echo "make_sample: $bin not found (build it: scripts/build.sh, or set LINS_BIN)" >&2; exit 1; }
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
# Whether the code differs from the commit, read before the run rewrites the sample's own files.
dirty=$(git status --porcelain --untracked-files=no -- . ":(exclude)$out" 2>/dev/null)
runs=(all_strategies overlap_none lins_no_bcast lins_no_allreduce mics_plan_on_lins_engine)
for r in "${runs[@]}"; do rm -rf "${out:?}/$r"; done
mkdir -p "$out"

commands=()
step() {
  local name=$1
  shift
  # The planner plans 'lins' under a 16 MiB-per-rank limit; predictions price the committed CPU profile. The bucket
  # is 1 MiB, two of the small model's gradients (the default 25 MiB would hold all of them, as in scripts/demo.sh).
  local cmd=(mpirun "${flags[@]}" -np 4 -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1 "$bin" step --model small
    --gpus-per-node 2 --gpu-mem 16MiB --bucket 1M --profile data/profiles/cpu-2core-4ranks.csv --out "$out/$name" "$@")
  commands+=("${cmd[*]}")
  "${cmd[@]}" | tail -n 12
}
all=ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,lins
# DeepSpeed's element thresholds scaled to the small model, as in scripts/demo.sh.
ds=(--ds-persistence-threshold 14 --ds-prefetch-bucket 7200 --ds-max-reuse-distance 144000 --ds-reduce-bucket 72000)
step all_strategies --strategies "$all" "${ds[@]}" --trace
step overlap_none --strategies "$all" "${ds[@]}" --overlap none
step lins_no_bcast --strategies lins --overlap no_bcast
step lins_no_allreduce --strategies lins --overlap no_allreduce
step mics_plan_on_lins_engine --strategies p=2x1,g=2x1,os=2x1

{
  echo "# data/sample: a small real CPU run of lins step"
  echo
  echo "Measured (source=measured), not projected: 4 MPI ranks on one $(nproc)-core machine seen as 2 nodes of 2"
  echo "(--gpus-per-node 2), the small model, the CPU backend in its default precision (bf16 parameters and gradients,"
  echo "fp32 master weights and Adam moments, fp32 activations). Collectives are CPU-bound here: compare"
  echo "strategies by ratios, never by absolute seconds. Each folder holds step.csv and step.provenance.json (command"
  echo "line, versions, host, git commit of the build); all_strategies/ also holds one Chrome trace and one action log"
  echo "(timeline.*.csv, which lins replay re-times) per strategy and rank. Made by jobs/make_sample.sh on $(date -u +%Y-%m-%d) with $("$bin" --version)$(
    [ -n "$dirty" ] && echo " (with uncommitted changes in the tree)")."
  echo
  echo "Commands:"
  echo
  for c in "${commands[@]}"; do echo "    $c"; done
  echo
  echo "Draw: /usr/bin/python3 analysis/make_figures.py --data data/sample --out results/figures/sample"
} >"$out/README.md"
echo "make_sample: wrote $out"
