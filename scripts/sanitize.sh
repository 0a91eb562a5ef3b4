#!/usr/bin/env bash
# Builds the CPU path with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs the unit and mpi
# tests there. Leak detection is off because Open MPI keeps allocations alive until exit by design.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build-asan}
export LINS_CMAKE_ARGS="-DLINS_SANITIZE=ON -DLINS_CUDA=OFF -DLINS_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo"
scripts/build.sh
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}" -L 'unit|mpi|cli' ${CTEST_ARGS:-}
