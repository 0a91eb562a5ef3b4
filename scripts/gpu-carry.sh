#!/usr/bin/env bash
# Prepares what a borrowed GPU machine needs to run scripts/gpu_check.py, as one folder: the project without .git,
# the commit it is, and the carried libraries; fails when the whole is 64 MiB or more (what such a machine takes
# along with a command), listing the sizes.
#
#   scripts/gpu-carry.sh DIR        (DIR must not exist, or be empty; then, on the GPU machine: cd DIR &&
#                                    scripts/gpu_check.py OUTDIR [ARCHIVE])
#
# DIR gets:
#   - the project: every tracked file and every untracked file git does not ignore (git ls-files -co
#     --exclude-standard), so uncommitted work is checked as it is; no .git, no build folders;
#   - COMMIT: commit=<full hash>, short=<abbreviated hash>, dirty=true|false (tracked files differ from the commit),
#     code_dirty=true|false (the same outside data/, as cmake/git_commit.cmake counts it), untracked=<count of the
#     untracked files carried>, date_utc; gpu_check.py's provenance reads it before any .git, the binaries' git
#     commit where there is no .git;
#   - .deps/debs/: the Debian 12 packages of OpenMPI, OpenBLAS, GoogleTest, Google Benchmark, nlohmann-json and toml++
#     (scripts/gpu-deps.sh fetch, run here first when .deps/debs/ holds none, or none of the last two, and apt-get
#     exists; GPU_CARRY_FETCH=0 skips that), which gpu_check.py uses for each library the GPU machine lacks;
#   - .deps/cudnn-frontend/: its include/ folder and top-level files (licence, version), when present (header-only).
# Environment: GPU_CARRY_LIMIT_BYTES (67108864, 64 MiB), GPU_CARRY_FETCH (1).
set -euo pipefail
DIR=${1:?usage: scripts/gpu-carry.sh DIR}
LIMIT=${GPU_CARRY_LIMIT_BYTES:-67108864}
cd "$(dirname "$0")/.."
ROOT=$(pwd)
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "gpu-carry: $ROOT is not a git checkout (the commit and the file list come from git)" >&2
  exit 1
fi
if [ -e "$DIR" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  echo "gpu-carry: $DIR exists and is not empty; give a new folder" >&2
  exit 1
fi
DIR=$(realpath -m "$DIR")
case "$DIR/" in
  "$(pwd -P)"/*)
    # Inside the checkout it would copy itself (and git would list it as untracked).
    echo "gpu-carry: $DIR is inside the checkout; give a folder outside it" >&2
    exit 1
    ;;
esac
mkdir -p "$DIR"

# The project: tracked (as they are now) and untracked-not-ignored files; a tracked file deleted here is left out.
n=0
while IFS= read -r -d '' f; do
  if [ -e "$f" ] || [ -L "$f" ]; then
    printf '%s\0' "$f"
    n=$((n + 1))
  fi
done < <(git ls-files -co --exclude-standard -z) >"$DIR/.files"
tar --null -T "$DIR/.files" -cf - | tar -xf - -C "$DIR"
rm -f "$DIR/.files"
untracked=$(git ls-files -o --exclude-standard | wc -l)
dirty=false
[ -n "$(git status --porcelain --untracked-files=no)" ] && dirty=true
code_dirty=false
[ -n "$(git status --porcelain --untracked-files=no -- . ':(exclude)data')" ] && code_dirty=true
{
  echo "commit=$(git rev-parse HEAD)"
  echo "short=$(git rev-parse --short HEAD)"
  echo "dirty=$dirty"
  echo "code_dirty=$code_dirty"
  echo "untracked=$untracked"
  echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$DIR/COMMIT"
echo "gpu-carry: $n files of $(git rev-parse --short HEAD) (dirty=$dirty, $untracked untracked) into $DIR"

# The carried packages; a folder fetched before lins read its formats with libraries lacks those two.
if ! ls .deps/debs/*.deb >/dev/null 2>&1 ||
  ! ls .deps/debs/nlohmann-json3-dev_*.deb .deps/debs/libtomlplusplus-dev_*.deb >/dev/null 2>&1; then
  if [ "${GPU_CARRY_FETCH:-1}" = 1 ] && command -v apt-get >/dev/null 2>&1; then
    echo "gpu-carry: .deps/debs/ holds no packages, or not nlohmann-json's and toml++'s: scripts/gpu-deps.sh fetch"
    scripts/gpu-deps.sh fetch
  else
    echo "gpu-carry: warning: .deps/debs/ carries no packages, or not nlohmann-json's and toml++'s (scripts/gpu-deps.sh" \
      "fetch on a Debian 12 machine): a GPU machine without MPI, OpenBLAS, GoogleTest, Google Benchmark," \
      "nlohmann-json or toml++ cannot build" >&2
  fi
fi
if ls .deps/debs/*.deb >/dev/null 2>&1; then
  mkdir -p "$DIR/.deps/debs"
  cp -p .deps/debs/*.deb "$DIR/.deps/debs/"
  echo "gpu-carry: $(find "$DIR/.deps/debs" -name '*.deb' | wc -l) packages from .deps/debs/"
fi
if [ -d .deps/cudnn-frontend/include ]; then
  mkdir -p "$DIR/.deps/cudnn-frontend"
  cp -pR .deps/cudnn-frontend/include "$DIR/.deps/cudnn-frontend/"
  find .deps/cudnn-frontend -maxdepth 1 -type f -exec cp -p {} "$DIR/.deps/cudnn-frontend/" \;
  echo "gpu-carry: the cuDNN frontend headers from .deps/cudnn-frontend/include"
elif [ -d .deps/cudnn-frontend ]; then
  echo "gpu-carry: warning: .deps/cudnn-frontend has no include/ folder: not carried" >&2
fi

# The size: every file's own bytes, as they travel.
size_of() { find "$1" -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
total=$(size_of "$DIR")
mib() { awk -v b="$1" 'BEGIN {printf "%.2f MiB", b / 1048576}'; }
if [ "$total" -ge "$LIMIT" ]; then
  echo "gpu-carry: $DIR is $(mib "$total") ($total bytes), over the limit of $(mib "$LIMIT"). By folder:" >&2
  for e in "$DIR"/* "$DIR"/.[!.]* "$DIR"/.deps/*; do
    [ -e "$e" ] && printf '  %12s  %s\n' "$(mib "$(size_of "$e")")" "${e#"$DIR"/}" >&2
  done
  echo "  the largest files:" >&2
  # awk, not head: head would end the pipe early, and under pipefail sort's SIGPIPE would end the script with 141.
  find "$DIR" -type f -printf '%s %P\n' | sort -rn | awk 'NR <= 10' |
    while read -r b f; do printf '  %12s  %s\n' "$(mib "$b")" "$f" >&2; done
  exit 1
fi
echo "gpu-carry: $DIR: $(mib "$total") ($total bytes) of $(mib "$LIMIT")"
