#!/usr/bin/env bash
# scripts/cluster.sh up / status / run / down: nodes with their own hostnames and addresses, the rate measured, a
# second up replacing the first, a failed or refused up leaving nothing, and a clear refusal without the privilege.
source "$(dirname "$0")/common.sh"
cluster_begin

out=$("$cluster" up --nodes 2 --ranks-per-node 2 --link 800mbit)
echo "$out"
[ "$(namespaces_left)" -eq 3 ] || fail "up made $(namespaces_left) namespaces, expected 3 (switch + 2 nodes)"
hosts=$("$cluster" run -- hostname | sort | uniq -c | awk '{print $1 "x" $2}' | tr '\n' ' ')
[ "$hosts" = "2x$LINS_CLUSTER-n0 2x$LINS_CLUSTER-n1 " ] || fail "ranks ran on '$hosts', expected 2 on each node"
status=$("$cluster" status)
echo "$status"
grep -q "198.18.0.11" <<<"$status" || fail "status does not list node 1's address"
rate=$(sed -n 's/.*: \([0-9]*\) Mbit\/s$/\1/p' <<<"$status")
[ -n "$rate" ] && [ "$rate" -gt 560 ] && [ "$rate" -lt 840 ] ||
  fail "status measured '$rate' Mbit/s on an 800mbit link (expected 560 to 840: within 30%, TCP over one stream)"

# A second up replaces the first: the same three namespaces, no stale ones.
"$cluster" up --nodes 2 --ranks-per-node 1 --link 400mbit >/dev/null 2>&1
[ "$(namespaces_left)" -eq 3 ] || fail "a second up left $(namespaces_left) namespaces, expected 3"
grep -q 'slots=1' "/run/$LINS_CLUSTER-cluster/hostfile" || fail "the second up did not replace the hostfile"

# Refused input changes nothing; a failure midway (a delay this kernel may lack, or a bad node count) removes all.
for bad in "--nodes 0 --ranks-per-node 2" "--nodes 2 --ranks-per-node 2 --link fast" \
  "--nodes 2 --ranks-per-node 2 --link 1gbit,1ms,100%" "--nodes 2 --ranks-per-node 2 --device-rate 0" \
  "--nodes 2 --ranks-per-node 2 --device-rate fast"; do
  # shellcheck disable=SC2086
  if msg=$("$cluster" up $bad 2>&1); then fail "up $bad succeeded"; fi
  echo "up $bad -> $msg"
  grep -q -- "expected\|must" <<<"$msg" || fail "up $bad gave no clear message: $msg"
done
"$cluster" down >/dev/null
[ "$(namespaces_left)" -eq 0 ] || fail "down left $(namespaces_left) namespaces"
[ ! -e "/run/$LINS_CLUSTER-cluster" ] || fail "down left the state folder"
if msg=$("$cluster" run -- true 2>&1); then fail "run without a cluster succeeded"; fi
grep -q "no cluster" <<<"$msg" || fail "run without a cluster: unclear message '$msg'"

# An interrupted up leaves nothing.
"$cluster" up --nodes 6 --ranks-per-node 1 >/dev/null 2>&1 &
sleep 0.3
kill -INT $! 2>/dev/null || true
wait $! 2>/dev/null || true
"$cluster" down >/dev/null
[ "$(namespaces_left)" -eq 0 ] || fail "an interrupted up left $(namespaces_left) namespaces after down"

# Without the privilege: a clear message, exit 3, nothing made.
if command -v setpriv >/dev/null; then
  if msg=$(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
    "$cluster" up --nodes 2 --ranks-per-node 1 2>&1); then fail "up without privilege succeeded"; else rc=$?; fi
  echo "unprivileged up -> exit $rc: $msg"
  [ "$rc" -eq 3 ] || fail "unprivileged up exited $rc, expected 3"
  grep -q "cannot create network namespaces" <<<"$msg" || fail "unprivileged up: unclear message"
fi
[ "$(namespaces_left)" -eq 0 ] || fail "namespaces left at the end"
echo "PASS"
