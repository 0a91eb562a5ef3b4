#!/usr/bin/env bash
# scripts/gpu-carry.sh into a temporary folder: the project without .git (every tracked and untracked-not-ignored file,
# nothing else but COMMIT and .deps/), COMMIT naming HEAD, the size checked against the limit (and a limit too small
# refused, with the sizes listed), a folder that is not empty or inside the checkout refused. Exit 77 (skipped) where
# SOURCE_DIR is not a git checkout. Nothing is fetched (GPU_CARRY_FETCH=0): .deps/debs/ is carried only if present.
#   test_gpu_carry.sh SOURCE_DIR
set -uo pipefail
ROOT=${1:?usage: test_gpu_carry.sh SOURCE_DIR}
cd "$ROOT" || exit 1
if ! command -v git >/dev/null 2>&1 || [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$(pwd -P)" ]; then
  echo "SKIPPED: $ROOT is not a git checkout"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/check.sh
source "$ROOT/tests/scripts/check.sh"
export GPU_CARRY_FETCH=0
out=$(scripts/gpu-carry.sh "$tmp/carry" 2>&1)
rc=$?
echo "$out"
check "gpu-carry.sh exits 0" test $rc = 0
check "no .git in the folder" test ! -e "$tmp/carry/.git"
check "COMMIT names HEAD" grep -qx "commit=$(git rev-parse HEAD)" "$tmp/carry/COMMIT"
check "COMMIT says whether tracked files differ" grep -qE '^dirty=(true|false)$' "$tmp/carry/COMMIT"
# The files: git's list (less the deleted ones) is exactly what is there, besides COMMIT and .deps/.
want=$(git ls-files -co --exclude-standard | while IFS= read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done |
  sort)
have=$(cd "$tmp/carry" && find . \( -path ./.deps -prune \) -o \( -type f -o -type l \) -print | sed 's|^\./||' |
  grep -vx COMMIT | sort)
check "the files are git's tracked and untracked-not-ignored ones" test "$want" = "$have"
[ "$want" = "$have" ] || diff <(echo "$want") <(echo "$have") | head -20
check "no build folder carried" test -z "$(find "$tmp/carry" -maxdepth 1 -name 'build*' -type d)"
if ls .deps/debs/*.deb >/dev/null 2>&1; then
  check "the carried packages are there" test "$(find "$tmp/carry/.deps/debs" -name '*.deb' | wc -l)" = \
    "$(find .deps/debs -name '*.deb' | wc -l)"
  check "the unpacked packages are not" test ! -e "$tmp/carry/.deps/root"
fi
check "the size is reported" grep -q "MiB (.* bytes) of 64.00 MiB" <<<"$out"
small=$(GPU_CARRY_LIMIT_BYTES=100000 scripts/gpu-carry.sh "$tmp/small" 2>&1)
rc=$?
check "a folder over the limit is refused (exit 1)" test $rc = 1
check "... with the sizes listed" grep -q "over the limit of 0.10 MiB. By folder:" <<<"$small"
check "... and the largest files" grep -q "the largest files:" <<<"$small"
scripts/gpu-carry.sh "$tmp/carry" >/dev/null 2>&1
check "a folder that is not empty is refused" test $? = 1
scripts/gpu-carry.sh "$ROOT/carry-test-inside" >/dev/null 2>&1
rc=$?
check "a folder inside the checkout is refused" test $rc = 1
check "... and not made" test ! -e "$ROOT/carry-test-inside"
exit $status
