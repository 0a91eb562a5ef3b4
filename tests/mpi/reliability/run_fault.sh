#!/usr/bin/env bash
# Runs fault_main under mpirun and checks what the issue asks: a stalled or killed rank ends the job with a
# non-zero exit within a bounded time, with a message naming the rank and the operation; without a fault it passes.
# usage: run_fault.sh MPIEXEC FAULT_MAIN MODE
set -uo pipefail
mpiexec=$1
bin=$2
mode=$3
start=$(date +%s)
out=$(timeout 60 "$mpiexec" --oversubscribe --allow-run-as-root -np 3 "$bin" "$mode" 1 3 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out" | tail -8
echo "mode=$mode exit=$rc elapsed=${elapsed}s"
case "$mode" in
  none)
    [ "$rc" -eq 0 ] && grep -q "completed 10 steps" <<<"$out" ;;
  stall)
    # The watchdog (3 s) on a waiting rank names itself and the stuck operation; mpirun ends every rank.
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$elapsed" -lt 30 ] &&
      grep -qE "lins: rank [02] on .*'all_reduce of 65536 elements on group 'world'' has not completed" <<<"$out" ;;
  kill)
    # mpirun sees the killed process and ends the job; the message names the rank.
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$elapsed" -lt 30 ] && grep -qiE "rank 1|signal 9|Killed" <<<"$out" ;;
esac
