#!/usr/bin/env bash
# Installs the real baselines that lins is compared with -- PyTorch (FSDP2 / HSDP) and DeepSpeed (ZeRO-1/2/3, ZeRO++)
# -- at pinned versions into a virtual environment kept outside the clone, with lins's own Python packages (lins_schema,
# lins_torch, lins_peers, lins_analysis) installed editable from this checkout, and prints that environment's python.
#
#   LINS_PEERS_VENV   where the environment lives (default: ${XDG_CACHE_HOME:-$HOME/.cache}/lins/peers-venv)
#   LINS_PEERS_PYTHON the interpreter to build it from (default: the first Python >= 3.10 with venv and ensurepip)
#   LINS_PEERS_DEEPSPEED_VERSION  another DeepSpeed, e.g. 0.19.6, the last with MiCS (give it its own LINS_PEERS_VENV)
#
# A second run finds the stamp of the same pins and prints the path at once (after making sure that lins's packages
# are this checkout's: a run from another clone points them at that clone). PyPI's torch wheel for Linux is the
# CUDA build (about 2.8 GB downloaded, 5.3 GB installed); it runs on CPU-only machines too (gloo), and on GPUs (NCCL).
# DeepSpeed ships as a source distribution whose setup imports torch, so it is built against the installed torch
# (no build isolation), with no C++ ops compiled ahead of time.
set -euo pipefail

TORCH_VERSION=2.15.0
DEEPSPEED_VERSION=${LINS_PEERS_DEEPSPEED_VERSION:-0.19.8}
# DeepSpeed's run-time requirements, pinned too, so that two machines resolve the same environment.
DEEPSPEED_DEPS=(einops==0.8.2 hjson==3.1.0 msgpack==1.2.4 ninja==1.13.2 numpy==2.4.6 packaging==26.4
                psutil==7.2.2 py-cpuinfo==9.0.0 pydantic==2.14.4 tqdm==4.70.1)

venv=${LINS_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lins/peers-venv}
stamp="$venv/lins-peers.stamp"
want="torch==$TORCH_VERSION deepspeed==$DEEPSPEED_VERSION ${DEEPSPEED_DEPS[*]}"
# lins's packages, editable and without dependencies (the pins here are the environment); quiet when already there
install_lins_packages="$(dirname "$0")/install-python-packages.sh"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  "$install_lins_packages" "$venv/bin/python"
  echo "$venv/bin/python"
  exit 0
fi

find_python() {
  local candidates=()
  [ -n "${LINS_PEERS_PYTHON:-}" ] && candidates+=("$LINS_PEERS_PYTHON")
  candidates+=(python3.13 python3.12 python3.11 python3.10 python3 /usr/bin/python3)
  for py in "${candidates[@]}"; do
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
      command -v "$py"
      return 0
    fi
  done
  return 1
}

py=$(find_python) || {
  echo "install-peers: no Python >= 3.10 with the venv and ensurepip modules (Debian: apt-get install python3-venv)" >&2
  exit 1
}

log=$(mktemp -t lins-install-peers.XXXXXX.log)
trap 'rm -f "$log"' EXIT
run() {
  if ! "$@" >>"$log" 2>&1; then
    cat "$log" >&2
    echo "install-peers: failed: $*" >&2
    exit 1
  fi
}

echo "install-peers: torch $TORCH_VERSION and deepspeed $DEEPSPEED_VERSION into $venv (from $py)" >&2
mkdir -p "$(dirname "$venv")"
[ -x "$venv/bin/python" ] || run "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input --quiet --no-cache-dir)
run "${pip[@]}" install --upgrade pip==25.3 setuptools==80.9.0 wheel==0.45.1
run "${pip[@]}" install "torch==$TORCH_VERSION" "${DEEPSPEED_DEPS[@]}"
# DS_BUILD_OPS=0: no op is compiled at install; the ones a run needs are built (with ninja) on first use and cached.
run env DS_BUILD_OPS=0 "${pip[@]}" install --no-build-isolation "deepspeed==$DEEPSPEED_VERSION"
run "$venv/bin/python" -c 'import torch, deepspeed, torch.distributed.fsdp'
run "$install_lins_packages" "$venv/bin/python"
echo "$want" >"$stamp"
echo "$venv/bin/python"
