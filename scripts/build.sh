#!/usr/bin/env bash
# Sets up the machine (system packages, once) and builds lins into $BUILD_DIR (default build/). The CUDA parts are
# compiled and linked when a CUDA toolkit is found, even without a GPU. Extra CMake flags: LINS_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
# nvcc is often installed outside PATH; CMake's check_language(CUDA) finds it through CUDACXX.
if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${LINS_CMAKE_ARGS:-} >"$BUILD_DIR.configure.log" 2>&1 ||
    { cat "$BUILD_DIR.configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
