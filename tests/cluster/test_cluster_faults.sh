#!/usr/bin/env bash
# Faults a real cluster has, on 2 nodes x 2 ranks under lins step --timeout: one node's link cut mid-step and one
# node's ranks killed end the job with a non-zero exit, a message, and only .partial result files, within a bound;
# 5% packet loss on every uplink and one node's link at a tenth of the others' complete with the clean run's loss.
# Prints each fault's exit code, time to exit and files left.
source "$(dirname "$0")/common.sh"
bin=$(realpath "${1:-$repo/build/lins}")
cluster_begin
work=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
timeout_s=3
bound_s=40  # the watchdog's timeout, plus the launcher noticing a node it cannot reach (about 11 s), with margin
step=("$bin" step --model small --gpus-per-node 2 --gpu-mem 16MiB --timeout "$timeout_s")

"$cluster" up --nodes 2 --ranks-per-node 2 --link 800mbit >/dev/null
"$cluster" run -- "${step[@]}" --strategies ddp,zero3,lins --out "$work/clean" >/dev/null

losses() { "$py" -c "import csv,sys; print(' '.join(r['strategy'] + '=' + r['loss'] for r in csv.DictReader(l for l in open(sys.argv[1]) if l[0] != '#')))" "$1"; }
files_left() { (cd "$1" 2>/dev/null && ls | tr '\n' ' '); }

# A fault that must end the job: $1 = name, $2 = the action, run 3 s into a long run.
ends_the_job() {
  local name=$1 action=$2 out=$work/$1 start rc=0
  start=$(now)
  ( sleep 3; eval "$action" ) &
  local injector=$!
  timeout $((bound_s + 30)) "$cluster" run -- "${step[@]}" --strategies ddp,zero3 --steps 400 --out "$out" \
    >"$work/$name.log" 2>&1 || rc=$?
  wait "$injector" || true
  local took
  took=$(elapsed "$start")
  echo "$name: exit $rc after ${took} s, files left: $(files_left "$out")"
  grep -E "^lins: |lost communication|exited on signal|Peer host" "$work/$name.log" | head -n 3 | sed 's/^/    /'
  [ "$rc" -ne 0 ] || fail "$name: the job exited 0"
  [ "$rc" -ne 124 ] || fail "$name: the job hung until the test's own limit"
  awk -v t="$took" -v b="$bound_s" 'BEGIN { exit !(t < b) }' || fail "$name: took ${took} s, more than $bound_s s"
  [ -z "$(cd "$out" && ls | grep -v '\.partial$' || true)" ] || fail "$name: left files that look complete: $(files_left "$out")"
}

kill_node1() {
  local p
  for p in $(ip netns pids "$LINS_CLUSTER-n1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = lins ] && kill -9 "$p"
  done
  return 0
}

ends_the_job cut_link '"$cluster" link 1 down >/dev/null'
grep -q "has not completed after" "$work/cut_link.log" || fail "cut_link: no watchdog message naming the operation"
grep -q "on group" "$work/cut_link.log" || fail "cut_link: the message does not name the group"
"$cluster" link 1 up >/dev/null
ends_the_job killed_node kill_node1

# Faults that slow the job but must not change its result.
completes() {
  local name=$1 start rc=0
  start=$(now)
  "$cluster" run -- "${step[@]}" --strategies ddp,zero3,lins --out "$work/$name" >"$work/$name.log" 2>&1 || rc=$?
  echo "$name: exit $rc after $(elapsed "$start") s; losses $(losses "$work/$name/step.csv" 2>/dev/null || echo none)"
  [ "$rc" -eq 0 ] || { tail -n 20 "$work/$name.log"; fail "$name: exit $rc"; }
  [ "$(losses "$work/$name/step.csv")" = "$(losses "$work/clean/step.csv")" ] ||
    fail "$name: losses $(losses "$work/$name/step.csv") differ from the clean run's $(losses "$work/clean/step.csv")"
}
"$cluster" link 0 800mbit,0ms,5% >/dev/null
"$cluster" link 1 800mbit,0ms,5% >/dev/null
completes loss_5pct
dropped=$(ip netns exec "$LINS_CLUSTER-n0" iptables-legacy -L OUTPUT -v -n -x 2>/dev/null | awk '/DROP/ {print $1}')
echo "    node 0 dropped $dropped packets"
[ "${dropped:-0}" -gt 0 ] || fail "loss_5pct: no packet was dropped"
"$cluster" link 0 800mbit >/dev/null
"$cluster" link 1 80mbit >/dev/null
completes slow_node
echo "clean: losses $(losses "$work/clean/step.csv")"
echo "PASS"
