#!/usr/bin/env bash
# A throw-away single-node Slurm cluster on this machine, for testing the job scripts for real: its own munged
# (private key and socket), slurmctld and slurmd, all files in one temporary folder, no cgroups, no accounting.
# Source it, then: slurm_start (sets SLURM_CONF and SLURM_TEST_DIR; 0 when the node is idle) and slurm_stop.
# Needs root (slurmd starts jobs as their user; munged runs as the munge user).

_free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# munge with a fresh key and its own socket in DIR/munge (munged insists on owning its folder).
slurm_start_munge() {
  local d=$1
  mkdir -p "$d/munge"
  chown munge:munge "$d/munge" && chmod 700 "$d/munge"
  runuser -u munge -- mungekey --create --keyfile="$d/munge/munge.key" >/dev/null 2>&1 ||
    runuser -u munge -- dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$d/munge/munge.key"
  chmod 755 "$d/munge"
  runuser -u munge -- /usr/sbin/munged --socket="$d/munge/munge.socket" --key-file="$d/munge/munge.key" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/munge/munged.log" --seed-file="$d/munge/munged.seed" ||
    { echo "slurm_start: munged failed:" >&2; cat "$d/munge/munged.log" >&2; return 1; }
}

# The slurm.conf settings every test cluster shares (munge in DIR, no cgroups, no accounting, files under DIR).
slurm_common_conf() {
  local d=$1
  cat <<CONF
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$d/state
SlurmctldPidFile=$d/slurmctld.pid
SlurmctldLogFile=$d/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
MailProg=/bin/true
MinJobAge=600
KillWait=5
CONF
}

# The jobs' site.env for a test cluster: srun with PMIx, 2 GPUs per node seen on the CPU, LINS_BIN BIN, raw results in
# DIR/raw, short steps. Extra lines (KEY=VALUE) follow.
slurm_site_env() {
  local d=$1 bin=$2
  shift 2
  cat >"$d/site.env" <<ENV
LINS_PARTITION=debug
LINS_LAUNCHER=srun
LINS_SRUN_MPI=pmix
LINS_GPUS_PER_NODE=2
LINS_REQUEST_GPUS=0
LINS_CPUS_PER_TASK=1
LINS_TIME_LIMIT=00:10:00
LINS_BIN=$bin
LINS_RAW_DIR=$d/raw
LINS_PYTHON=$py
LINS_NETWORK=paper-a800
LINS_GPU_MEM=80GiB
LINS_WARMUP_STEPS=1
LINS_TIMED_STEPS=2
ENV
  local line
  for line in "$@"; do echo "$line" >>"$d/site.env"; done
}

slurm_start() {
  SLURM_TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/lins-slurm.XXXXXX")
  export SLURM_TEST_DIR
  local d=$SLURM_TEST_DIR host ctld_port slurmd_port
  chmod 755 "$d"
  mkdir -p "$d/munge" "$d/state" "$d/spool"
  host=$(hostname -s)
  ctld_port=$(_free_port) && slurmd_port=$(_free_port) || { echo "slurm_start: no free port" >&2; return 1; }

  slurm_start_munge "$d" || return 1

  cat >"$d/slurm.conf" <<CONF
ClusterName=linstest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmdSpoolDir=$d/spool
SlurmdPidFile=$d/slurmd.pid
SlurmdLogFile=$d/slurmd.log
$(slurm_common_conf "$d")
NodeName=localhost NodeHostname=$host NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=30 State=UP
CONF
  export SLURM_CONF=$d/slurm.conf
  /usr/sbin/slurmctld -f "$SLURM_CONF" -i ||
    { echo "slurm_start: slurmctld failed:" >&2; cat "$d/slurmctld.log" >&2; return 1; }
  /usr/sbin/slurmd -f "$SLURM_CONF" -N localhost ||
    { echo "slurm_start: slurmd failed:" >&2; cat "$d/slurmd.log" >&2; return 1; }
  local state=""
  for _ in $(seq 60); do
    state=$(timeout 5 sinfo -h -o %T 2>/dev/null | head -n 1)
    [ "$state" = idle ] && return 0
    sleep 0.5
  done
  echo "slurm_start: node not idle after 30 s (state '$state'); logs:" >&2
  tail -n 20 "$d/slurmctld.log" "$d/slurmd.log" >&2
  return 1
}

# Stops the daemons by their pid files (never by name) and removes the folder unless SLURM_TEST_KEEP=1.
slurm_stop() {
  local d=${SLURM_TEST_DIR:-}
  [ -n "$d" ] && [ -d "$d" ] || return 0
  local f pid
  for f in "$d/slurmd.pid" "$d/slurmctld.pid" "$d/munge/munged.pid"; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 40); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ "${SLURM_TEST_KEEP:-0}" = 1 ]; then
    echo "slurm_stop: kept $d"
  else
    rm -rf "$d"
  fi
}
