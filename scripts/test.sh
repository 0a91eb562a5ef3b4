#!/usr/bin/env bash
# Sets up, builds and runs every test: ctest (labels unit, mpi, gpu (skipped without a device), slurm) and pytest
# for analysis/. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}" ${CTEST_ARGS:-}
