#!/usr/bin/env bash
# An emulated two-level cluster on one machine: each node is a Linux network namespace with its own hostname, joined
# to the others through a bridge whose uplinks are shaped with tc (rate, delay, loss); MPI jobs run across it with
# shared memory between the ranks of a node and TCP over the shaped link between nodes. See docs/cluster.md.
#
#   scripts/cluster.sh up --nodes N --ranks-per-node R [--link RATE[,DELAY[,LOSS]]] [--device-rate TFLOPS|off]
#   scripts/cluster.sh run [mpirun options] -- COMMAND...
#   scripts/cluster.sh status
#   scripts/cluster.sh link NODE RATE[,DELAY[,LOSS]] | down | up     (change one node's uplink: slow node, cut link)
#   scripts/cluster.sh down
#
# RATE takes tc's units (800mbit, 2gbit); DELAY is the one-way latency added between two nodes (0.5ms); LOSS the
# share of packets a node's uplink drops (5%). Default link: 4gbit,0ms,0% (docs/cluster.md says why).
# LINS_CLUSTER (default lins) names the cluster, so that several can coexist: namespaces LINS_CLUSTER-sw (the switch
# and the MPI launcher) and LINS_CLUSTER-nI (node I). Addresses exist only inside those namespaces (198.18.0.0/24, the
# range set aside for benchmarking networks); the root namespace and the machine's own interfaces are never touched.
# The cluster's state lives in /run/LINS_CLUSTER-cluster. Needs root or CAP_NET_ADMIN and CAP_SYS_ADMIN.
# Emulated devices: the ranks time-share the cores, so a rank computes fast while its neighbour waits and slowly while
# it computes too. `up` measures the rate each rank sustains with every rank computing at once (`lins rate`, a few
# seconds) and sets the cluster's device rate to device_margin of it; `run` passes it to every rank (LINS_DEVICE_TFLOPS,
# LINS_DEVICE_GBPS), and `lins step` then paces each compute task to it (docs/cluster.md). `--device-rate X` sets it
# instead, `--device-rate off` leaves the ranks unpaced. LINS_BIN names the lins binary (default build/lins).
set -Eeuo pipefail

name=${LINS_CLUSTER:-lins}
state=/run/$name-cluster
sw=$name-sw
subnet_prefix=198.18.0
subnet=$subnet_prefix.0/24
head_addr=$subnet_prefix.1
default_link=4gbit,0ms,0%
# The device rate is this share of the slowest rank's rate with every rank computing: runs a few seconds apart on this
# shared machine differ by up to 25%, and 0.7 x leaves a rank 1/0.7 = 1.43 times its measured time, so a rank that
# computes while every other does still finishes within its device time after a 30% slowdown (docs/cluster.md).
device_margin=0.7
lins_bin=${LINS_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/lins}
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
rules=$(cd "$(dirname "$0")" && pwd)/cluster/coll-rules.conf  # Open MPI's collective algorithms (docs/cluster.md)

die() {
  echo "cluster.sh: $*" >&2
  exit 2
}

node_ns() { echo "$name-n$1"; }
node_addr() { echo "$subnet_prefix.$((10 + $1))"; }

# --- privilege ---------------------------------------------------------------------------------------------------

check_privilege() {
  local probe=$name-probe$$
  if ! ip netns add "$probe" 2>/dev/null; then
    cat >&2 <<EOF
cluster.sh: cannot create network namespaces here (needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN).
  Run it as root (sudo scripts/cluster.sh ...), or, where the kernel lets users make user namespaces, everything
  inside one, with a /run of its own:
    unshare -Urnm --propagation private sh -c 'export TMPDIR=\$(mktemp -d); mount -t tmpfs run /run &&
      scripts/cluster.sh up --nodes 2 --ranks-per-node 2 && scripts/cluster.sh run -- COMMAND; scripts/cluster.sh down'
  Without either, run jobs with plain mpirun (all ranks then share this machine's memory: no inter-node link).
EOF
    return 1
  fi
  ip netns del "$probe"
  command -v tc >/dev/null || { echo "cluster.sh: tc (iproute2) is missing: apt-get install iproute2" >&2; return 1; }
}

# --- link settings ------------------------------------------------------------------------------------------------

# Splits RATE[,DELAY[,LOSS]] into link_rate, link_delay, link_loss (defaults 0ms and 0%), checking each.
parse_link() {
  local text=$1
  IFS=, read -r link_rate link_delay link_loss extra <<<"$text"
  [ -z "${extra:-}" ] || die "--link '$text' has more than three fields; expected RATE[,DELAY[,LOSS]] such as 800mbit,0.5ms,1%"
  link_delay=${link_delay:-0ms}
  link_loss=${link_loss:-0%}
  [[ $link_rate =~ ^[0-9]+(\.[0-9]+)?(kbit|mbit|gbit)$ ]] ||
    die "link rate '$link_rate' is not a rate; expected a number and kbit, mbit or gbit, such as 800mbit"
  [[ $link_delay =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] ||
    die "link delay '$link_delay' is not a time; expected a number and us, ms or s, such as 0.5ms"
  [[ $link_loss =~ ^[0-9]+(\.[0-9]+)?%$ ]] || die "link loss '$link_loss' is not a percentage, such as 5%"
  awk -v l="${link_loss%\%}" 'BEGIN { exit !(l < 100) }' || die "link loss '$link_loss' must be below 100%"
  awk -v r="${link_rate%%[a-z]*}" 'BEGIN { exit !(r > 0) }' || die "link rate '$link_rate' must be above zero"
}

# Bytes per second of a tc rate such as 800mbit.
rate_bytes_per_s() {
  local num=${1%%[a-z]*} scale
  case ${1##*[0-9.]} in kbit) scale=1e3 ;; mbit) scale=1e6 ;; gbit) scale=1e9 ;; esac
  awk -v n="$num" -v s="$scale" 'BEGIN { printf "%.0f", n * s / 8 }'
}

# Shapes one interface's egress to a rate with a token bucket holding 4 ms of traffic, but at least 256 KiB, as the
# veth hands over 64 KiB segments, and queues at most 50 ms (a deep queue delays the acknowledgements of the
# other direction and slows both). A delay needs netem at the root with the bucket under it; kernels without
# sch_netem get a clear refusal for a delay.
shape() {
  local ns=$1 dev=$2 rate=$3 delay=$4
  local bps burst
  bps=$(rate_bytes_per_s "$rate")
  burst=$((bps / 250))
  [ "$burst" -ge 262144 ] || burst=262144
  ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
  if is_zero "$delay"; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 10: tbf rate "$rate" burst "$burst" latency 50ms
    return
  fi
  if ! ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000 2>/dev/null; then
    echo "cluster.sh: a link delay needs the kernel's netem queueing discipline (sch_netem), which this kernel" \
      "lacks; give the link without a delay (for example --link $rate) or load sch_netem" >&2
    return 1
  fi
  ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$rate" burst "$burst" latency 50ms
}

is_zero() { awk -v v="${1%%[a-z%]*}" 'BEGIN { exit !(v == 0) }'; }

# Random loss on a node's sent packets, with the statistic match of the node's own packet filter (its namespace's
# tables; the machine's own firewall is untouched).
set_loss() {
  local ns=$1 loss=$2 ipt=iptables-legacy
  command -v $ipt >/dev/null || ipt=iptables
  ip netns exec "$ns" $ipt -F OUTPUT 2>/dev/null || true
  is_zero "$loss" && return 0
  command -v $ipt >/dev/null || { echo "cluster.sh: a link loss needs iptables: apt-get install iptables" >&2; return 1; }
  ip netns exec "$ns" $ipt -A OUTPUT -o eth0 -m statistic --mode random \
    --probability "$(awk -v l="${loss%\%}" 'BEGIN { printf "%.6f", l / 100 }')" -j DROP
}

# A node's uplink: its own egress carries the delay and the loss (so each applies once between two nodes); the
# switch's port to it is shaped to the same rate, so the uplink is limited both ways.
shape_node() {
  local i=$1 rate=$2 delay=$3 loss=$4
  shape "$(node_ns "$i")" eth0 "$rate" "$delay"
  shape "$sw" "p$i" "$rate" 0ms
  set_loss "$(node_ns "$i")" "$loss"
}

# --- up / down ----------------------------------------------------------------------------------------------------

remove_all() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    case $ns in
      "$name"-sw | "$name"-n[0-9]*)
        # Processes left in it (an interrupted run's daemons) go first, or the namespace outlives its name.
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
        ;;
    esac
  done
  rm -rf "$state"
}

# A connection whose peer stops answering fails after about 3 s of retransmissions (3 tries) instead of Linux's
# default of about 15 minutes, so that a cut link ends the job (the launcher learns it lost a node) instead of hanging.
tune_tcp() {
  ip netns exec "$1" sysctl -qw net.ipv4.tcp_retries2=3
  # An RDMA fabric has no slow start after a pause between collectives; TCP here should not either.
  ip netns exec "$1" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0
}

cores_of_node() {
  local i=$1 nodes=$2 ncpu
  ncpu=$(nproc)
  if [ "$nodes" -ge "$ncpu" ]; then
    echo $((i % ncpu))
  else
    local per=$((ncpu / nodes))
    echo "$((i * per))-$(((i + 1) * per - 1))"
  fi
}

cmd_up() {
  local nodes="" rpn="" link=$default_link device=measure
  while [ $# -gt 0 ]; do
    case $1 in
      --nodes) nodes=${2:-}; shift 2 || die "--nodes needs a value" ;;
      --ranks-per-node) rpn=${2:-}; shift 2 || die "--ranks-per-node needs a value" ;;
      --link) link=${2:-}; shift 2 || die "--link needs a value" ;;
      --device-rate) device=${2:-}; shift 2 || die "--device-rate needs a value" ;;
      *) die "up: unknown option '$1'; expected --nodes N --ranks-per-node R [--link RATE[,DELAY[,LOSS]]] [--device-rate TFLOPS|off]" ;;
    esac
  done
  case $device in
    measure | off) ;;
    *)
      [[ $device =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] && awk -v r="$device" 'BEGIN { exit !(r > 0) }' ||
        die "--device-rate '$device' must be TFLOP/s per rank, a number above 0 (such as 0.01), or off"
      ;;
  esac
  [[ $nodes =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 64 ] ||
    die "--nodes '$nodes' must be a whole number from 1 to 64"
  [[ $rpn =~ ^[0-9]+$ ]] && [ "$rpn" -ge 1 ] && [ "$rpn" -le 64 ] ||
    die "--ranks-per-node '$rpn' must be a whole number from 1 to 64"
  parse_link "$link"
  check_privilege || exit 3
  if [ -d "$state" ] || ip netns list | grep -q "^$sw\b"; then
    echo "cluster.sh: replacing the cluster '$name' that is already up" >&2
    remove_all
  fi
  trap 'echo "cluster.sh: up failed; removing what it made" >&2; remove_all; exit 1' ERR
  trap 'echo "cluster.sh: up interrupted; removing what it made" >&2; remove_all; exit 130' INT TERM
  mkdir -p "$state"
  ip netns add "$sw"
  tune_tcp "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add name br0 type bridge
  ip -n "$sw" addr add "$head_addr/24" dev br0
  ip -n "$sw" link set br0 up
  : >"$state/hostfile"
  : >"$state/nodes"
  local i ns
  for ((i = 0; i < nodes; i++)); do
    ns=$(node_ns "$i")
    ip netns add "$ns"
    tune_tcp "$ns"
    ip -n "$ns" link set lo up
    ip -n "$sw" link add name "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape_node "$i" "$link_rate" "$link_delay" "$link_loss"
    echo "$(node_addr "$i") slots=$rpn" >>"$state/hostfile"
    echo "$i $ns $(node_addr "$i") $(cores_of_node "$i" "$nodes") $link_rate,$link_delay,$link_loss" >>"$state/nodes"
  done
  cat >"$state/config" <<EOF
nodes=$nodes
ranks_per_node=$rpn
link=$link_rate,$link_delay,$link_loss
EOF
  trap - ERR INT TERM
  wait_reachable "$nodes"
  echo "cluster '$name': $nodes nodes x $rpn ranks, uplinks $link_rate, delay $link_delay, loss $link_loss (subnet $subnet)"
  set_device "$device" "$((nodes * rpn))"
}

# The cluster's emulated device (kept in its config for `run`): measured with every rank computing at once, given, or
# off. A measurement that cannot run (no lins binary yet) leaves the device off and says so.
set_device() {
  local device=$1 ranks=$2 tflops=off gbps=off how
  case $device in
    off) how="off (--device-rate off): compute is not paced" ;;
    measure)
      if [ ! -x "$lins_bin" ]; then
        how="off: no lins binary at $lins_bin to measure the rate with (build it, or give LINS_BIN or --device-rate)"
      else
        local out line min_tflops min_gbps
        out=$("$self" run -- "$lins_bin" rate --model small --seconds 3 2>&1) ||
          { echo "$out" >&2; remove_all; die "measuring the device rate failed (see above); give --device-rate TFLOPS or off"; }
        line=$(grep '^tasks_tflops_min=' <<<"$out" | tail -n 1)
        min_tflops=$(sed -E 's/.*tasks_tflops_min=([^ ]+).*/\1/' <<<"$line")
        min_gbps=$(sed -E 's/.*optimizer_gbps_min=([^ ]+).*/\1/' <<<"$line")
        [ -n "$min_tflops" ] || { echo "$out" >&2; remove_all; die "lins rate printed no rate; give --device-rate TFLOPS or off"; }
        tflops=$(awk -v r="$min_tflops" -v m="$device_margin" 'BEGIN { printf "%.4g", r * m }')
        gbps=$(awk -v r="$min_gbps" -v m="$device_margin" 'BEGIN { printf "%.4g", r * m }')
        how="$tflops TFLOP/s per rank, optimizer $gbps GB/s: $device_margin x the slowest rank's rate with all $ranks"
        how+=" ranks computing at once ($min_tflops TFLOP/s, $min_gbps GB/s; lins rate, small model)"
      fi
      ;;
    *)
      tflops=$device
      how="$tflops TFLOP/s per rank (given); optimizer unpaced"
      ;;
  esac
  printf 'device_tflops=%s\ndevice_gbps=%s\n' "$tflops" "$gbps" >>"$state/config"
  echo "cluster '$name': emulated device $how"
}

# Whether node $1 answers on TCP from the switch namespace: a closed port's reset ("refused") means the path is up.
node_answers() {
  local answer
  answer=$(timeout 0.5 ip netns exec "$sw" bash -c "exec 3<>/dev/tcp/$(node_addr "$1")/9" 2>&1 || true)
  [[ $answer == *refused* ]]
}

# Whether node $1 answers within five tries: a link shaped with packet loss drops a try's reset now and then (5% loss
# on every uplink drops about one try in ten), and TCP would wait a second before it sends its SYN again.
node_reachable() {
  local tries
  for ((tries = 0; tries < 5; tries++)); do
    node_answers "$1" && return 0
  done
  return 1
}

# Waits until every node answers (the bridge ports take a moment to forward).
wait_reachable() {
  local nodes=$1 i tries
  for ((i = 0; i < nodes; i++)); do
    for ((tries = 0; tries < 50; tries++)); do
      node_answers "$i" && break
      sleep 0.1
    done
    [ "$tries" -lt 50 ] || { echo "cluster.sh: node $i does not answer" >&2; remove_all; exit 1; }
  done
}

cmd_down() {
  remove_all
  echo "cluster '$name': down"
}

require_up() {
  [ -f "$state/config" ] || die "no cluster '$name' is up; start one with: scripts/cluster.sh up --nodes 2 --ranks-per-node 2"
  # shellcheck disable=SC1091
  . "$state/config"
}

# --- run ----------------------------------------------------------------------------------------------------------

# Open MPI's launcher calls this as `AGENT [options] HOST COMMAND...`, as it would call ssh: enter the node's
# namespace with its own hostname, pinned to the node's share of the cores, and run the command through a shell.
cmd_agent() {
  while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
  local host=$1
  shift
  local line
  line=$(awk -v h="$host" '$3 == h' "$state/nodes")
  [ -n "$line" ] || { echo "cluster.sh agent: $host is no node of cluster '$name'" >&2; exit 255; }
  local ns cores
  ns=$(echo "$line" | awk '{print $2}')
  cores=$(echo "$line" | awk '{print $4}')
  exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1"; shift; exec taskset -c "$@"' sh "$ns" "$cores" \
    sh -c "$*"
}

cmd_run() {
  require_up
  local mpi_opts=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    mpi_opts+=("$1")
    shift
  done
  [ "${1:-}" = "--" ] || die "run: expected [mpirun options] -- COMMAND..."
  shift
  [ $# -gt 0 ] || die "run: no command after --"
  local i
  for ((i = 0; i < nodes; i++)); do
    node_reachable "$i" || die "node $i ($(node_addr "$i")) does not answer from the launcher (its link is down?); nothing was started"
  done
  local root_flags=()
  [ "$(id -u)" -ne 0 ] || root_flags=(--allow-run-as-root)
  local fabric="emulated:${nodes}x${ranks_per_node}:$link"
  local env_flags=(-x LINS_FABRIC="$fabric" -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1 -x PATH)
  # The emulated device: the default of lins step --device-rate / --device-gbps on every rank (an option given wins).
  [ "${device_tflops:-off}" = off ] || env_flags+=(-x LINS_DEVICE_TFLOPS="$device_tflops")
  [ "${device_gbps:-off}" = off ] || env_flags+=(-x LINS_DEVICE_GBPS="$device_gbps")
  [ -z "${LD_LIBRARY_PATH:-}" ] || env_flags+=(-x LD_LIBRARY_PATH)
  # In the background, so that an interrupt can end the job and clear the nodes of what it left.
  ip netns exec "$sw" mpirun "${root_flags[@]}" --hostfile "$state/hostfile" -np $((nodes * ranks_per_node)) \
    --map-by slot --bind-to none --oversubscribe \
    --mca plm_rsh_agent "$self agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl self,vader,tcp --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
    --mca mpi_yield_when_idle 1 \
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 \
    --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename "$rules" \
    "${env_flags[@]}" "${mpi_opts[@]}" "$@" 2> >(grep -v --line-buffered 'plm:rsh: Warning: setpgid' >&2) &
  local job=$!
  trap 'kill -TERM "$job" 2>/dev/null; sleep 1; clear_nodes; exit 130' INT TERM
  local rc=0
  wait "$job" || rc=$?
  trap - INT TERM
  clear_nodes
  return "$rc"
}

# Ends whatever a job left in the cluster's namespaces (daemons of a node the launcher could no longer reach).
clear_nodes() {
  local ns pids
  for ns in "$sw" $(awk '{print $2}' "$state/nodes"); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
  done
}

# --- status and link changes --------------------------------------------------------------------------------------

# Measures one uplink: 8 MiB sent from node 0 to node 1 over TCP (one stream), megabits per second.
measure_link_mbit() {
  [ "$nodes" -ge 2 ] || { echo "-"; return; }
  local py=/usr/bin/python3
  [ -x $py ] || py=python3
  local port=5999
  ip netns exec "$(node_ns 1)" timeout 20 "$py" -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); c, _ = s.accept()
while c.recv(1 << 20): pass
' "$(node_addr 1)" "$port" &
  local server=$!
  sleep 0.3
  ip netns exec "$(node_ns 0)" timeout 20 "$py" -c '
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
buf = b"x" * (1 << 20); c.sendall(buf)  # fills the queues before timing
t = time.time()
for _ in range(8): c.sendall(buf)
c.shutdown(socket.SHUT_WR); c.recv(1); dt = time.time() - t
print("%.0f" % (8 * 8 * 1048576 / dt / 1e6))
' "$(node_addr 1)" "$port" || echo "-"
  wait "$server" 2>/dev/null || true
}

cmd_status() {
  require_up
  echo "cluster '$name': $nodes nodes x $ranks_per_node ranks per node, subnet $subnet, launcher in namespace $sw"
  if [ "${device_tflops:-off}" = off ]; then
    echo "emulated device: off (lins step computes unpaced)"
  else
    local optimizer="unpaced"
    [ "${device_gbps:-off}" = off ] || optimizer="$device_gbps GB/s"
    echo "emulated device: $device_tflops TFLOP/s per rank, optimizer $optimizer (lins step paces each compute task to it)"
  fi
  printf '%-5s %-12s %-14s %-6s %s\n' node namespace address cores "link (rate,delay,loss)"
  local i ns addr cores l
  while read -r i ns addr cores l; do
    printf '%-5s %-12s %-14s %-6s %s\n' "$i" "$ns" "$addr" "$cores" "$l"
  done <"$state/nodes"
  echo "measured node 0 -> node 1 (one TCP stream, 8 MiB): $(measure_link_mbit) Mbit/s"
}

cmd_link() {
  require_up
  local i=${1:-} what=${2:-}
  [[ $i =~ ^[0-9]+$ ]] && [ "$i" -lt "$nodes" ] || die "link: node '$i' must be 0 to $((nodes - 1))"
  case $what in
    down) ip -n "$(node_ns "$i")" link set eth0 down ;;
    up) ip -n "$(node_ns "$i")" link set eth0 up ;;
    "") die "link: expected NODE RATE[,DELAY[,LOSS]], NODE down or NODE up" ;;
    *)
      parse_link "$what"
      shape_node "$i" "$link_rate" "$link_delay" "$link_loss"
      awk -v n="$i" -v l="$link_rate,$link_delay,$link_loss" '$1 == n { $5 = l } { print }' "$state/nodes" \
        >"$state/nodes.new" && mv "$state/nodes.new" "$state/nodes"
      ;;
  esac
  echo "cluster '$name': node $i link $what"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down ;;
  run) shift; cmd_run "$@" ;;
  status) shift; cmd_status ;;
  link) shift; cmd_link "$@" ;;
  agent) shift; cmd_agent "$@" ;;
  *) die "expected up, run, status, link or down (see the top of scripts/cluster.sh)" ;;
esac
