#!/usr/bin/env bash
# The libraries scripts/gpu-check.sh needs beyond a CUDA toolkit, CMake and ninja (OpenMPI with its runtime, OpenBLAS,
# GoogleTest, Google Benchmark), brought to a GPU machine that lacks them and cannot install packages (for example a
# container image with only the CUDA toolkit), as Debian 12 packages unpacked into the checkout (nothing is installed
# system-wide). NCCL is not among them: it comes with the GPU machine's CUDA installation.
#
#   scripts/gpu-deps.sh fetch     on a Debian 12 (bookworm) x86-64 machine with apt: downloads the packages into
#                                 .deps/debs/ (about 20 MB; ignored by git; copy .deps/ along with the checkout)
#   . scripts/gpu-deps.sh use     on the GPU machine (sourced): unpacks .deps/debs/*.deb into .deps/root/ once and
#                                 exports PATH, LD_LIBRARY_PATH, OPAL_PREFIX (OpenMPI relocated there) and
#                                 LINS_DEPS_CMAKE_ARGS (the CMake flags that find them); gpu-check.sh does this itself
#                                 when .deps/debs/ exists
# Unpacking needs dpkg-deb, or ar and tar (binutils), and the packages need glibc 2.34 or newer.

# The packages: OpenMPI (library, headers, launcher and orted, data files) and what its libraries and plugins link to;
# OpenBLAS (pthread build) with its Fortran runtime; GoogleTest (static); Google Benchmark.
LINS_GPU_DEPS_PACKAGES="libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2
  libpsm-infinipath1 libmunge2 libltdl7 libnuma1 libopenblas0-pthread libopenblas-pthread-dev libgfortran5
  libquadmath0 libgtest-dev libbenchmark-dev libbenchmark1debian"

lins_gpu_deps_fetch() {
  local root debs
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  debs="$root/.deps/debs"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "gpu-deps: fetch needs apt-get (a Debian 12 machine)" >&2
    return 1
  fi
  mkdir -p "$debs"
  rm -f "$debs"/*.deb
  # shellcheck disable=SC2086  # one word per package
  (cd "$debs" && apt-get download $LINS_GPU_DEPS_PACKAGES) || {
    echo "gpu-deps: apt-get download failed (run 'apt-get update' first?)" >&2
    return 1
  }
  local fetched=("$debs"/*.deb)
  echo "gpu-deps: ${#fetched[@]} packages, $(du -sh "$debs" | cut -f1), in $debs"
}

lins_gpu_deps_unpack_one() {  # $1: .deb, $2: destination
  if command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$1" "$2"
    return
  fi
  local tmp members
  tmp=$(mktemp -d) || return 1
  (cd "$tmp" && ar x "$1") || { rm -rf "$tmp"; return 1; }
  members=("$tmp"/data.tar.*)
  tar -xf "${members[0]}" -C "$2"
  local rc=$?
  rm -rf "$tmp"
  return $rc
}

lins_gpu_deps_use() {
  local root debs dest lib
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  debs="$root/.deps/debs"
  dest="$root/.deps/root"
  if ! ls "$debs"/*.deb >/dev/null 2>&1; then
    echo "gpu-deps: no packages in $debs (run 'scripts/gpu-deps.sh fetch' on a Debian 12 machine)" >&2
    return 1
  fi
  if [ ! -f "$dest/.unpacked" ]; then
    rm -rf "$dest"
    mkdir -p "$dest"
    local f
    for f in "$debs"/*.deb; do
      lins_gpu_deps_unpack_one "$f" "$dest" || {
        echo "gpu-deps: cannot unpack $f (needs dpkg-deb, or ar and tar)" >&2
        return 1
      }
    done
    # Debian reaches some files through update-alternatives links, which unpacking does not make.
    ln -sf mpicc.openmpi "$dest/usr/bin/mpicc"
    ln -sf orterun "$dest/usr/bin/mpirun"
    ln -sf orterun "$dest/usr/bin/mpiexec"
    touch "$dest/.unpacked"
  fi
  lib="$dest/usr/lib/x86_64-linux-gnu"
  export PATH="$dest/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$lib/openmpi/lib:$lib/openblas-pthread:$lib:$lib/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # OpenMPI finds its plugins, help files and wrapper data under OPAL_PREFIX; PMIx (used by OpenMPI's singleton and
  # orted) is not relocated by it, so its plugin folder is named outright.
  export OPAL_PREFIX="$dest/usr"
  export PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"
  LINS_DEPS_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$dest/usr -DMPI_C_COMPILER=$dest/usr/bin/mpicc.openmpi"
  LINS_DEPS_CMAKE_ARGS+=" -DMPIEXEC_EXECUTABLE=$dest/usr/bin/orterun"
  LINS_DEPS_CMAKE_ARGS+=" -DOPENBLAS_INCLUDE_DIR=$dest/usr/include/x86_64-linux-gnu/openblas-pthread"
  LINS_DEPS_CMAKE_ARGS+=" -DOPENBLAS_LIBRARY=$lib/openblas-pthread/libopenblas.so"
  export LINS_DEPS_CMAKE_ARGS
  echo "gpu-deps: using OpenMPI, OpenBLAS, GoogleTest and Google Benchmark from $dest"
}

case "${1:-}" in
  fetch) lins_gpu_deps_fetch ;;
  use) lins_gpu_deps_use ;;
  *)
    echo "usage: scripts/gpu-deps.sh fetch | . scripts/gpu-deps.sh use" >&2
    false
    ;;
esac
