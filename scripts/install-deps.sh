#!/usr/bin/env bash
# Installs every system package lins needs on a Debian machine, with apt; installs lins's Python packages (lins_schema,
# lins_analysis, lins_torch, lins_peers) editable for the user who runs it, so that Debian's /usr/bin/python3 imports
# them from anywhere (scripts/install-python-packages.sh); then fetches the cuDNN frontend headers
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
  python3-pip python3-setuptools python3-wheel
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

# lins's Python packages into the user's site-packages (~/.local), editable: this checkout's folders, so a git pull
# needs no reinstall. Debian marks its Python as externally managed (PEP 668); PIP_BREAK_SYSTEM_PACKAGES lets pip
# write the user's site-packages all the same, which touches no file of Debian's (no dependencies are installed:
# apt installed them above). Best-effort: the analysis scripts (analysis/*.py) run from the checkout without it, so
# a failure (for example a setuptools older than 64, which cannot install editable) is reported and the setup goes on.
PIP_BREAK_SYSTEM_PACKAGES=1 "$(dirname "$0")/install-python-packages.sh" /usr/bin/python3 --user ||
  echo "install-deps: could not install lins's Python packages for /usr/bin/python3 (message above): run the" \
    "analysis as analysis/*.py from the checkout, or set PYTHONPATH to its python/ and analysis/ folders" >&2

# The cuDNN frontend headers (header-only, into .deps/; quiet when there) for the optional cuDNN attention. Best-effort:
# without them lins builds as before, minus that attention, so a failed fetch is reported and the setup goes on.
"$(dirname "$0")/fetch-cudnn-frontend.sh" ||
  echo "install-deps: could not fetch the cuDNN frontend headers (scripts/fetch-cudnn-frontend.sh, message above):" \
    "lins builds without the cuDNN attention" >&2
