#!/usr/bin/env bash
# `lins step` end to end under mpiexec: every strategy (and a 6-tuple) on the tiny model writes step.csv with the
# schema's header, one row per (strategy, timed step), measured bytes equal to the predicted ones in every row, the
# provenance JSON, and one trace per rank and strategy; a bad strategy fails on every rank with one message.
# usage: step_cli_test.sh <mpiexec> <lins binary> [mpiexec flags...]
set -euo pipefail
mpiexec=$1 lins=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$mpiexec" "$@" -x OPENBLAS_NUM_THREADS=1 -np 4 "$lins" step --model tiny --seq 16 --gpus-per-node 2 --warmup 1 \
  --steps 2 --bucket 2K --trace --out "$out" --strategies ddp,zero1,zero2,zero3,mics,hsdp,zeropp,lins,p=1x1,g=2x2,os=2x2 \
  > "$out/stdout.txt"
csv=$out/step.csv
[ -f "$csv" ] || { echo "no $csv"; exit 1; }
[ -f "$out/step.provenance.json" ] || { echo "no provenance"; exit 1; }
[ ! -e "$csv.partial" ] || { echo "a .partial was left behind"; exit 1; }
rows=$(($(wc -l < "$csv") - 1))
[ "$rows" -eq 18 ] || { echo "expected 9 strategies x 2 steps = 18 rows, got $rows"; exit 1; }
# Every measured byte column equals its predicted twin; source is measured; the loss is below ln(24) + 1; MFU in (0, 1].
python3 - "$csv" <<'PY'
import csv, sys
bad = False
for n, row in enumerate(csv.DictReader(open(sys.argv[1], newline="")), start=2):
    if row["source"] != "measured":
        print(f"row {n}: source {row['source']}"); bad = True
    for k in ("all_gather", "reduce_scatter", "all_reduce", "broadcast", "intra", "inter"):
        if float(row[k + "_bytes"]) != float(row["pred_" + k + "_bytes"]):
            print(f"row {n} ({row['strategy']}): {k} bytes {row[k + '_bytes']} vs predicted {row['pred_' + k + '_bytes']}")
            bad = True
    if not 0 < float(row["loss"]) < 4.2:
        print(f"row {n}: loss {row['loss']}"); bad = True
    # The CPU peak is each rank's GEMM rate with its host to itself, which ranks sharing the cores cannot beat.
    if not 0 < float(row["mfu"]) <= 1:
        print(f"row {n} ({row['strategy']}): MFU {row['mfu']} outside (0, 1]"); bad = True
    if float(row["state_bytes"]) <= 0 or float(row["step_time_s"]) <= 0:
        print(f"row {n}: empty figures"); bad = True
sys.exit(1 if bad else 0)
PY
header=$(head -n 1 "$csv")
case "$header" in
  source,strategy,engine,plan,*,feasible,fabric,mfu_causal,peak_source,gemm_tflops,host_model,label,host_work_s,host_stall_s,overrun_tasks,contention_compute_s,contention_comm_s,reserve_bytes,tier) ;;
  *) echo "unexpected header: $header"; exit 1 ;;
esac
traces=$(ls "$out"/trace.*.rank*.json | wc -l)
[ "$traces" -eq 36 ] || { echo "expected 9 strategies x 4 ranks = 36 traces, got $traces"; exit 1; }
grep -q "the planner chose .* by projected step time" "$out/stdout.txt" || { echo "no planner line (step objective)"; exit 1; }
grep -q '"planner_objective": *"step"' "$out/step.provenance.json" || { echo "no planner objective in the provenance"; exit 1; }
# A strategy that is not a plan: non-zero exit, one message.
if "$mpiexec" "$@" -np 2 "$lins" step --model tiny --seq 16 --strategies ddp,zero9 --out "$out/bad" > "$out/bad.txt" 2>&1; then
  echo "a bad strategy did not fail"; exit 1
fi
[ "$(grep -c "strategy 'zero9'" "$out/bad.txt")" -eq 1 ] || { echo "expected one error line:"; cat "$out/bad.txt"; exit 1; }
echo "lins step CLI: ok ($rows rows, $traces traces)"
