#!/usr/bin/env bash
# Installs every system package lins needs on a Debian machine, with apt.
# Idempotent and quiet: prints nothing and changes nothing when all is there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev
  libopenblas-dev
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
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
