#!/usr/bin/env bash
# lins simulate and lins plan at 10^9 GPUs, each under a 512 MiB data limit and a 20 s timeout: a projection
# whose cost grew with the rank count would run out of either. Usage: run_at_scale.sh LINS OUT_DIR
set -uo pipefail
lins=$1
out=$2
mkdir -p "$out"
failed=0
run() {
  local start=$SECONDS
  # The data limit (heap and private mappings), not the address space: a CUDA build maps about 800 MB of libraries.
  timeout 20 prlimit --data=$((512 << 20)) "$lins" "$@" >"$out/log" 2>&1 </dev/null
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: lins $* exited $rc (124: past 20 s)"
    head -5 "$out/log" | sed 's/^/    /'
    failed=$((failed + 1))
  else
    echo "ok   lins $* ($((SECONDS - start)) s)"
  fi
}
run simulate --model llama-7b --gpus 1000000000 --micro-batches 1 --out "$out/simulate.csv"
run simulate --model llama-7b --gpus 1000000000 --micro-batches 1 --overlap all,none \
  --strategies zero1,zero2,p=8x1,g=8x1,os=8x1000,layout=intra --out "$out/simulate-ranges.csv"
run plan --model llama-7b --gpus-per-node 8 --nodes 125000000 --micro-batches 1 --gpu-mem 1TiB
[ "$failed" -eq 0 ]
