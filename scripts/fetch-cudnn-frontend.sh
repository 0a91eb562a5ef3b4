#!/usr/bin/env bash
# Fetches the cuDNN C++ frontend (NVIDIA's header-only graph API over cuDNN 9, MIT licence) that the optional cuDNN
# attention (kernels/cuda/attention_cudnn.cpp) is written against, pinned to one version, into
# .deps/cudnn-frontend/include/ (ignored by git), where CMake looks for it first.
#
# The headers come from one pinned file of PyPI's nvidia-cudnn-frontend wheel (its top-level include/ folder holds the
# same headers as the GitHub release; the wheel's compiled Python module is not unpacked). The wheel is fetched with
# `pip download` for fixed tags, so every machine gets the same file, whatever its own Python or architecture, and its
# sha256 is checked before anything is unpacked. Offline: LINS_CUDNN_FRONTEND_WHEEL=/path/to/that .whl (same check).
#
# Idempotent and quiet: prints nothing and changes nothing when the pinned version is already unpacked; prints one line
# when it fetches. Exit status 1 with a message on failure (no pip, no network, wrong checksum, broken wheel), leaving
# any earlier copy in place. Needs python3 (with pip unless LINS_CUDNN_FRONTEND_WHEEL is set).
set -euo pipefail

version=1.16.0
wheel=nvidia_cudnn_frontend-1.16.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha256=5c4a8fc573d85a86e08b15d9bf37f729e2487298781867a492a59cde6ac295e2

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/cudnn-frontend"
stamp="$version $sha256"

fail() {
  echo "fetch-cudnn-frontend: $*" >&2
  exit 1
}

if [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$stamp" ] && [ -f "$dest/include/cudnn_frontend.h" ]; then
  exit 0
fi

command -v python3 >/dev/null 2>&1 || fail "needs python3 (to download and unpack the wheel)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -n "${LINS_CUDNN_FRONTEND_WHEEL:-}" ]; then
  [ -f "$LINS_CUDNN_FRONTEND_WHEEL" ] || fail "LINS_CUDNN_FRONTEND_WHEEL=$LINS_CUDNN_FRONTEND_WHEEL is not a file"
  cp "$LINS_CUDNN_FRONTEND_WHEEL" "$tmp/$wheel"
else
  python3 -m pip --version >/dev/null 2>&1 ||
    fail "needs pip (python3 -m pip), or LINS_CUDNN_FRONTEND_WHEEL set to a downloaded $wheel"
  # --platform/--python-version/--implementation/--abi pin the file, not the machine that uses the headers.
  if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
    --retries 1 --timeout 20 -d "$tmp" "nvidia-cudnn-frontend==$version" >"$tmp/pip.log" 2>&1; then
    tail -n 5 "$tmp/pip.log" >&2
    fail "pip download of nvidia-cudnn-frontend==$version failed (no network or no PyPI?); offline, set" \
      "LINS_CUDNN_FRONTEND_WHEEL to a copy of $wheel"
  fi
  [ -f "$tmp/$wheel" ] || fail "pip did not download $wheel (got: $(cd "$tmp" && ls ./*.whl 2>/dev/null))"
fi

got=$(python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' \
  "$tmp/$wheel")
[ "$got" = "$sha256" ] || fail "sha256 of $wheel is $got, expected $sha256: not unpacking it"

# Only the headers (include/...) and the licence; the new copy replaces the old one only once it is complete.
python3 - "$tmp/$wheel" "$tmp/unpacked" <<'EOF' || fail "could not unpack the headers from $wheel"
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith("include/") and not n.endswith("/")]
    if "include/cudnn_frontend.h" not in names:
        sys.exit("no include/cudnn_frontend.h in the wheel")
    for n in names:
        z.extract(n, out)  # zipfile keeps every member inside out
    licences = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE.txt")]
    if licences:
        with open(os.path.join(out, "LICENSE.txt"), "wb") as f:
            f.write(z.read(licences[0]))
EOF
echo "$stamp" >"$tmp/unpacked/VERSION"
mkdir -p "$root/.deps"
rm -rf "$dest.new"
mv "$tmp/unpacked" "$dest.new"
rm -rf "$dest"
mv "$dest.new" "$dest"
echo "fetch-cudnn-frontend: cuDNN frontend $version headers in $dest/include" >&2
