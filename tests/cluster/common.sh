# Shared by the cluster tests: a cluster of the test's own name (so a user's cluster is never touched), skipped with
# exit 77 where namespaces cannot be made, removed on exit whatever happens. Source it, then call cluster_begin.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cluster=$repo/scripts/cluster.sh
py=${LINS_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Removes the clusters of earlier test runs that were killed before their own cleanup (named lt<pid>, the pid gone).
remove_stale_test_clusters() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^lt[0-9]+-(sw|n[0-9]+)$' || true); do
    pid=${ns%%-*}
    pid=${pid#lt}
    kill -0 "$pid" 2>/dev/null || LINS_CLUSTER=lt$pid "$cluster" down >/dev/null 2>&1 || true
  done
}

cluster_begin() {
  remove_stale_test_clusters
  export LINS_CLUSTER=lt$$
  if ! ip netns add "$LINS_CLUSTER-probe" 2>/dev/null; then
    echo "SKIP: this user cannot create network namespaces (needs root or CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    exit 77
  fi
  ip netns del "$LINS_CLUSTER-probe"
  trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
}

# Namespaces of this test's cluster that exist now.
namespaces_left() { ip netns list | awk '{print $1}' | grep -c "^$LINS_CLUSTER-" || true; }

# Seconds since the epoch, with fractions.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
