#!/usr/bin/env bash
# The Slurm job scripts across real node boundaries: a 2-node Slurm cluster on the emulated cluster of
# scripts/cluster.sh (slurmctld in the switch namespace, one slurmd per node namespace with its own hostname, network
# and PMIx folder), the smoke job submitted on a 2-node allocation (srun --mpi=pmix, 2 ranks per node), and its CSV checked:
# 4 ranks on 2 hosts, across the shaped link. Skipped (exit 77) without slurmctld or without network namespaces.
# usage: tests/jobs/test_slurm_nodes.sh [path/to/lins]
source "$(dirname "$0")/../cluster/common.sh"
# shellcheck source=tests/jobs/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh"
bin=$(realpath "${1:-$repo/build/lins}")
limit_s=${LINS_SLURM_TEST_TIMEOUT:-90}
cd "$repo"
if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ]; then
  echo "SKIP: slurmctld/slurmd are not installed (apt-get install slurm-wlm munge)"
  exit 77
fi
cluster_begin
sw=$LINS_CLUSTER-sw
d=$(mktemp -d /run/lins-slurm-nodes.XXXXXX)
chmod 755 "$d"
stop_all() {
  local f pid
  for f in "$d"/slurmd.*.pid "$d/slurmctld.pid" "$d/munge/munged.pid"; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  "$cluster" down >/dev/null 2>&1 || true
  rm -rf "$d"
}
trap stop_all EXIT
"$cluster" up --nodes 2 --ranks-per-node 2 --link 800mbit >/dev/null

# PMIx keeps per-step folders under one path on every node, named alike on all of them: each node sees a folder of
# its own there (a bind mount in its mount namespace), as each real node has its own disk.
mkdir -p "$d/munge" "$d/state" "$d/raw" "$d/pmix" "$d/pmix-$LINS_CLUSTER-n0" "$d/pmix-$LINS_CLUSTER-n1"
chmod 1777 "$d/pmix" "$d"/pmix-*
slurm_start_munge "$d" || fail "munged did not start"
cat >"$d/slurm.conf" <<CONF
ClusterName=linsnodes
SlurmctldHost=$sw(198.18.0.1)
SlurmdSpoolDir=$d/spool/%n
SlurmdPidFile=$d/slurmd.%n.pid
SlurmdLogFile=$d/slurmd.%n.log
$(slurm_common_conf "$d")
NodeName=$LINS_CLUSTER-n0 NodeAddr=198.18.0.10 CPUs=2 State=UNKNOWN
NodeName=$LINS_CLUSTER-n1 NodeAddr=198.18.0.11 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=$LINS_CLUSTER-n[0-1] Default=YES MaxTime=30 State=UP
CONF
echo "PMIxCliTmpDirBase=$d/pmix" >"$d/mpi.conf"
export SLURM_CONF=$d/slurm.conf
in_sw() { ip netns exec "$sw" "$@"; }
in_sw unshare --uts sh -c "hostname $sw; exec /usr/sbin/slurmctld -f $SLURM_CONF -i" ||
  fail "slurmctld did not start: $(tail -n 5 "$d/slurmctld.log")"
for n in "$LINS_CLUSTER-n0" "$LINS_CLUSTER-n1"; do
  mkdir -p "$d/spool/$n"
  # nsenter enters only the node's network: `ip netns exec` would mount a sysfs without the cgroup tree slurmd reads.
  nsenter --net="/run/netns/$n" unshare --uts --mount --propagation private \
    sh -c "mount --bind $d/pmix-$n $d/pmix && hostname $n && exec /usr/sbin/slurmd -f $SLURM_CONF -N $n" ||
    fail "slurmd on $n did not start: $(tail -n 5 "$d/slurmd.$n.log")"
done
state=""
for _ in $(seq 60); do
  state=$(timeout 5 ip netns exec "$sw" sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' ')
  [ "$state" = "idle " ] && break
  sleep 0.5
done
[ "$state" = "idle " ] || fail "nodes not idle after 30 s (state '$state'): $(tail -n 5 "$d"/slurmd.*.log)"
in_sw sinfo

slurm_site_env "$d" "$bin" LINS_SMOKE_FIGURES=0
# What scripts/cluster.sh run gives an mpirun job, as the environment srun's ranks inherit.
export LINS_SITE_ENV=$d/site.env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 \
  OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=198.18.0.0/24 OMPI_MCA_oob_tcp_if_include=198.18.0.0/24 \
  OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_dynamic_rules_filename=$repo/scripts/cluster/coll-rules.conf \
  LINS_FABRIC="emulated:2x2:800mbit,0ms,0% (Slurm)"
id=$(in_sw sbatch --parsable --nodes=2 --ntasks=4 --ntasks-per-node=2 --chdir="$repo" \
  --output="$d/raw/smoke-%j.out" jobs/smoke.sbatch) || fail "sbatch refused the 2-node smoke job"
echo "submitted smoke job $id on 2 nodes"
start=$SECONDS
while [ -n "$(timeout 5 ip netns exec "$sw" squeue -h -j "$id" 2>/dev/null)" ]; do
  if [ $((SECONDS - start)) -ge "$limit_s" ]; then
    in_sw scancel "$id" || true
    fail "job $id still queued or running after ${limit_s} s: $(tail -n 20 "$d/raw/smoke-$id.out")"
  fi
  sleep 0.5
done
record=$(in_sw scontrol show job "$id")
state=$(grep -o 'JobState=[A-Z_]*' <<<"$record" | cut -d= -f2)
code=$(grep -o ' ExitCode=[0-9:]*' <<<"$record" | cut -d= -f2)
nodes=$(grep -o ' NodeList=[^ ]*' <<<"$record" | cut -d= -f2)
echo "job $id: $state, exit $code, nodes $nodes, $((SECONDS - start)) s"
[ "$state" = COMPLETED ] && [ "$code" = 0:0 ] || fail "job $id: JobState=$state ExitCode=$code: $(tail -n 30 "$d/raw/smoke-$id.out")"
csv=$(find "$d/raw/smoke/$id/step" -name '*.csv' | sort | head -n 1)
prov=${csv%.csv}.provenance.json
[ -s "$csv" ] && [ -s "$prov" ] || fail "the smoke job wrote no step CSV with provenance"
"$py" - "$csv" "$prov" "$LINS_CLUSTER" <<'PY' || fail "the smoke job's results do not span two nodes"
import csv, json, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
prov = json.load(open(sys.argv[2]))
hosts = sorted(set(prov["hosts"]))
print(f"{len(rows)} rows; ranks on {hosts}; fabric {rows[0]['fabric']}")
assert hosts == [f"{sys.argv[3]}-n0", f"{sys.argv[3]}-n1"], hosts
assert prov["world_size"] == 4 and all(r["fabric"].startswith("emulated:2x2") for r in rows)
assert any(float(r["inter_bytes"]) > 0 for r in rows)
PY
echo "PASS: a 2-node Slurm allocation on the emulated cluster ran the smoke job across the link"
