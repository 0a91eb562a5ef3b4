#!/usr/bin/env bash
# Fuzzes the parsers (plans, sizes, options, bandwidth profiles, ...) with libFuzzer + ASan + UBSan for a bounded
# time each. A crash is copied into tests/fuzz/regressions/<target>/ (replayed by ctest from then on) and fails the
# script. Usage: scripts/fuzz.sh [seconds per target, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
seconds=${1:-${FUZZ_SECONDS:-20}}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The core library includes files CMake generates at configure time (the network presets of data/networks/): a
# configure-only CPU tree in the scratch folder makes them.
cmake -S . -B "$work/cmake" -DLINS_CUDA=OFF -DLINS_TESTS=OFF -DLINS_BENCHMARKS=OFF >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; exit 1; }
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -Isrc
       -I"$work/cmake/generated")
# The pure core library once, instrumented; then one small link per target.
objects=()
for src in src/core/*/*.cpp src/core/schedule/engines/*.cpp; do
  obj="$work/core_$(basename "$(dirname "$src")")_$(basename "$src" .cpp).o"
  clang++ "${flags[@]}" -c "$src" -o "$obj" &
  objects+=("$obj")
done
wait
status=0
for src in tests/fuzz/fuzz_*.cpp; do
  stem=$(basename "$src" .cpp)
  name=${stem#fuzz_}
  bin="$work/$stem"
  clang++ "${flags[@]}" -fsanitize=fuzzer "$src" "${objects[@]}" -o "$bin"
  mkdir -p "$work/corpus-$name" "$work/crash-$name"
  cp -r "tests/fuzz/corpus/$name/." "$work/corpus-$name/" 2>/dev/null || true
  echo "fuzz: $name for ${seconds}s"
  if ! "$bin" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$work/crash-$name/" "$work/corpus-$name" >"$work/$name.log" 2>&1; then
    mkdir -p "tests/fuzz/regressions/$name"
    cp "$work/crash-$name/"* "tests/fuzz/regressions/$name/" 2>/dev/null || true
    tail -40 "$work/$name.log" >&2
    echo "fuzz: $name FOUND A CRASH; kept under tests/fuzz/regressions/$name/" >&2
    status=1
  else
    grep -E "^Done|runs in" "$work/$name.log" | tail -1 || true
  fi
done
exit $status
