#!/usr/bin/env bash
# Every strategy on 2 nodes x 2 ranks across the shaped link: the fabric on every row, the same loss as one-rank DDP
# (fp32 storage: every strategy's arithmetic matches), measured bytes equal to the schedule's, inside and across nodes;
# every task paced to the emulated device `up` measured: each row's compute at least its device time, MFU at most 1.
source "$(dirname "$0")/common.sh"
bin=$(realpath "${1:-$repo/build/lins}")
cluster_begin
work=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

strategies=ddp,zero1,zero2,zero3,mics,zeropp,fsdp,hsdp,lins,p=2x1,g=2x1,os=2x1
LINS_BIN=$bin "$cluster" up --nodes 2 --ranks-per-node 2 >"$work/up.log"
grep -q "emulated device .* TFLOP/s per rank" "$work/up.log" || fail "up set no device rate: $(cat "$work/up.log")"
"$cluster" run -- "$bin" step --model small --gpus-per-node 2 --strategies "$strategies" --gpu-mem 16MiB \
  --precision fp32 --warmup 0 --steps 1 --timeout 60 --out "$work/cluster" | sed -n "/^strategy /,/^wrote/p"
tokens=$("$py" -c "import csv,sys; print(next(csv.DictReader(l for l in open(sys.argv[1]) if l[0] != '#'))['tokens'])" \
  "$work/cluster/step.csv")
OPENBLAS_NUM_THREADS=1 "$bin" step --model small --gpus-per-node 1 --strategies ddp --precision fp32 --warmup 0 \
  --steps 1 --global-batch-tokens "$tokens" --out "$work/one" >/dev/null
"$py" - "$work" <<'PY'
import csv, sys
def rows(p):
    return list(csv.DictReader(l for l in open(p) if not l.startswith("#")))
got = rows(f"{sys.argv[1]}/cluster/step.csv")
ref = float(rows(f"{sys.argv[1]}/one/step.csv")[0]["loss"])
bad = []
for r in got:
    s = r["strategy"]
    if not r["fabric"].startswith("emulated:2x2:") or " device=" not in r["fabric"]:
        bad.append(f"{s}: fabric {r['fabric']!r} (expected the emulated cluster and its device)")
    # Paced: MFU counts the FLOPs the tasks were paced for against the device rate, so mfu x step time is the
    # forward and backward tasks' device time, which their measured compute cannot undercut.
    device_s = float(r["mfu"]) * float(r["step_time_s"])
    if r["peak_source"] != "device" or not 0 < float(r["mfu"]) <= 1:
        bad.append(f"{s}: MFU {r['mfu']} against {r['peak_source']} (expected at most 1 against the device rate)")
    if float(r["forward_s"]) + float(r["backward_s"]) < device_s * (1 - 1e-9):
        bad.append(f"{s}: compute {float(r['forward_s']) + float(r['backward_s'])} s below its device time {device_s} s")
    if r["overrun_tasks"] == "":
        bad.append(f"{s}: no overrun_tasks in a paced run")
    if abs(float(r["loss"]) - ref) > 1e-6 * abs(ref):
        bad.append(f"{s}: loss {r['loss']} vs one-rank ddp {ref}")
    for k in ["all_gather", "reduce_scatter", "all_reduce", "broadcast", "intra", "inter"]:
        if float(r[f"{k}_bytes"]) != float(r[f"pred_{k}_bytes"]):
            bad.append(f"{s}: {k} bytes {r[k + '_bytes']} measured vs {r['pred_' + k + '_bytes']} scheduled")
    print(f"{s:22s} loss {float(r['loss']):.7f}  intra {float(r['intra_bytes']):>10.0f} B  inter {float(r['inter_bytes']):>10.0f} B")
if len(got) != 10:
    bad.append(f"{len(got)} rows, expected 10 strategies")
if not any(float(r["inter_bytes"]) > 0 for r in got) or not any(float(r["intra_bytes"]) > 0 for r in got):
    bad.append("no strategy moved bytes both inside and across nodes")
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
print(f"PASS (one-rank ddp loss {ref:.7f})")
PY
