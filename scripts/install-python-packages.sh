#!/usr/bin/env bash
# Installs lins's Python packages -- lins_schema and lins_analysis (analysis/), lins_torch and lins_peers (python/) --
# editable from this checkout into one Python, so that they import from anywhere with no path set:
#
#   scripts/install-python-packages.sh PYTHON [PIP_INSTALL_FLAGS...]
#
# scripts/install-deps.sh runs it for Debian's /usr/bin/python3 (into the user's site-packages: --user), and
# scripts/install-peers.sh for the peers' virtual environment. Editable: the installed packages are this checkout's
# folders, so an edit or a git pull needs no reinstall. Offline: no build isolation (the Python's own setuptools builds
# them) and no dependencies (the caller installs those: apt, or install-peers.sh's pins). Quiet, and changes nothing,
# when every package already imports from this checkout; a package installed from another clone is reinstalled from
# this one.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: scripts/install-python-packages.sh PYTHON [PIP_INSTALL_FLAGS...]" >&2
  exit 2
fi
py=$1
shift
case $py in
  */*) py=$(cd "$(dirname "$py")" && pwd)/$(basename "$py") ;; # a path: made absolute, for the check run from /
esac
repo=$(cd "$(dirname "$0")/.." && pwd -P)
# package name and the folder that is the package (each holds its pyproject.toml)
packages=(lins_schema:analysis/lins_schema lins_analysis:analysis/lins_analysis lins_torch:python/lins_torch
          lins_peers:python/lins_peers)

# True when every package is found in this checkout's folder. Without PYTHONPATH and from the root folder (python
# searches the current folder first), so that only an installation counts.
installed_here() {
  (cd / && env -u PYTHONPATH "$py" - "$repo" "${packages[@]}") <<'PY'
import importlib.util
import os
import sys

repo = sys.argv[1]
for entry in sys.argv[2:]:
    name, folder = entry.split(":")
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        sys.exit(1)
    if os.path.realpath(os.path.dirname(spec.origin)) != os.path.realpath(os.path.join(repo, folder)):
        sys.exit(1)
PY
}

if installed_here; then
  exit 0
fi
editable=()
for entry in "${packages[@]}"; do
  editable+=(-e "$repo/${entry#*:}")
done
log=$(mktemp -t lins-install-python-packages.XXXXXX.log)
trap 'rm -f "$log"' EXIT
if ! "$py" -m pip install --disable-pip-version-check --no-input --quiet --no-index --no-build-isolation --no-deps \
  "$@" "${editable[@]}" >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-python-packages: pip could not install ${packages[*]%%:*} into $py" >&2
  exit 1
fi
if ! installed_here; then
  echo "install-python-packages: installed, but $py does not import them from $repo" >&2
  exit 1
fi
