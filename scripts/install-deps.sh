#!/usr/bin/env bash
# Installs every system package lins needs on a Debian machine, with apt, then fetches the cuDNN frontend headers
# (scripts/fetch-cudnn-frontend.sh; optional, a failure only warns). Idempotent and quiet: prints nothing and changes
# nothing when all is there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev
  libopenblas-dev
  nlohmann-json3-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-pandas python3-matplotlib python3-pytest python3-torch
  slurm-wlm munge
  iproute2 iptables util-linux
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The cuDNN frontend headers (header-only, into .deps/; quiet when there) for the optional cuDNN attention. Best-effort:
# without them lins builds as before, minus that attention, so a failed fetch is reported and the setup goes on.
"$(dirname "$0")/fetch-cudnn-frontend.sh" ||
  echo "install-deps: could not fetch the cuDNN frontend headers (scripts/fetch-cudnn-frontend.sh, message above):" \
    "lins builds without the cuDNN attention" >&2
