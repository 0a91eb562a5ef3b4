#!/usr/bin/env bash
# The libraries scripts/gpu_check.py needs beyond a CUDA toolkit, CMake and ninja (OpenMPI with its runtime, OpenBLAS,
# GoogleTest, Google Benchmark), brought to a GPU machine that lacks them and cannot install packages (for example a
# container image with only the CUDA toolkit), as Debian 12 packages unpacked into the checkout (nothing is installed
# system-wide). NCCL is not among them: it comes with the GPU machine's CUDA installation.
#
#   scripts/gpu-deps.sh fetch     on a Debian 12 (bookworm) x86-64 machine with apt: downloads the packages into
#                                 .deps/debs/ (about 20 MB; ignored by git; copy .deps/ along with the checkout)
#   . scripts/gpu-deps.sh use [LIB...]
#                                 on the GPU machine (sourced): unpacks .deps/debs/*.deb into .deps/root/ once and
#                                 sets up the libraries named (mpi, openblas, gtest, benchmark, formats; all five
#                                 when none is named), each on its own: exports PATH, OPAL_PREFIX (OpenMPI relocated there) and the
#                                 rest of OpenMPI's environment only for mpi, LD_LIBRARY_PATH with what the named ones
#                                 load at run time, and LINS_DEPS_CMAKE_ARGS (the CMake flags that find each named one,
#                                 and no other). gpu_check.py names the ones the machine lacks (a machine with its own
#                                 MPI keeps it, and gets only the OpenBLAS or test libraries it has not)
#   scripts/gpu-deps.sh check [LIB...]
#                                 on the GPU machine: uses them, then lists every library (or symbol version) a carried
#                                 program or library of the named ones needs and this machine lacks; fails when there
#                                 is one
# Unpacking needs dpkg-deb, or ar and tar (binutils). The packages need glibc 2.36 and the libstdc++ of GCC 12 or
# newer (Debian 12, Ubuntu 24.04: yes; Ubuntu 22.04, glibc 2.35: no).

# The packages, each with why it is carried. The list is the dependency closure, at the level of shared libraries, of
# what the build and the GPU tests use: every library a carried program or library links to is carried too, or is one
# that any machine able to run nvcc has (glibc, libgcc-s1, libstdc++6). `scripts/gpu-deps.sh check` verifies that on
# the machine at hand (after `use`).
# - OpenMPI: the library, headers and compiler wrappers (libopenmpi3, libopenmpi-dev), the launcher, orted and their
#   data files (openmpi-bin, openmpi-common).
LINS_GPU_DEPS_MPI_PACKAGES="libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common"
# - What OpenMPI's libraries and plugins link to: the PMIx runtime (libpmix2), hardware topology (libhwloc15), event
#   loop (libevent-core-2.1-7, libevent-pthreads-2.1-7), NUMA (libnuma1), plugin loading (libltdl7); its network
#   plugins (ofi, ucx, openib, psm, psm2) link libfabric1, libucx0, libibverbs1, librdmacm1, libnl-3-200,
#   libnl-route-3-200, libpsm2-2, libpsm-infinipath1 and libmunge2, and libfabric's and UCX's InfiniBand parts link
#   the verbs providers (ibverbs-providers: libefa, libmlx5). One rank uses none of these networks, but a plugin whose
#   libraries are missing fails to load with a warning on every start.
LINS_GPU_DEPS_MPI_PACKAGES+=" libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libnuma1 libltdl7
  libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libmunge2
  ibverbs-providers"
# - OpenBLAS, pthread build (the CPU GEMMs of lins and the tests' CPU references), with its Fortran runtime
#   (libgfortran5, libquadmath0).
LINS_GPU_DEPS_OPENBLAS_PACKAGES="libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0"
# - GoogleTest (static, headers and CMake files) and Google Benchmark.
LINS_GPU_DEPS_GTEST_PACKAGES="libgtest-dev"
LINS_GPU_DEPS_BENCHMARK_PACKAGES="libbenchmark-dev libbenchmark1debian"
# - The file formats: nlohmann-json (JSON) and toml++ (network files), headers only (lins uses toml++ header-only, so
#   its shared library, libtomlplusplus3, is not carried).
LINS_GPU_DEPS_FORMATS_PACKAGES="nlohmann-json3-dev libtomlplusplus-dev"
LINS_GPU_DEPS_PACKAGES="$LINS_GPU_DEPS_MPI_PACKAGES $LINS_GPU_DEPS_OPENBLAS_PACKAGES $LINS_GPU_DEPS_GTEST_PACKAGES"
LINS_GPU_DEPS_PACKAGES+=" $LINS_GPU_DEPS_BENCHMARK_PACKAGES $LINS_GPU_DEPS_FORMATS_PACKAGES"
# The libraries `use` and `check` take, and the libraries of the Fortran runtime OpenBLAS loads (exposed one by one
# where the machine lacks them and OpenMPI, which exposes every carried library, is not used).
LINS_GPU_DEPS_LIBRARIES="mpi openblas gtest benchmark formats"
LINS_GPU_DEPS_OPENBLAS_RUNTIME="libgfortran.so.5 libquadmath.so.0"
# Base-system libraries that a CUDA container image may lack: libudev1 (hwloc, and so every OpenMPI program), zlib1g
# (OpenMPI's runtime and PMIx), libatomic1 (libfabric), libuuid1 (libpsm-infinipath1). Where the machine has its own
# copy (ldconfig -p lists the library), that one is used: these are exposed only in place of a missing one, so that no
# program of the machine (CMake, Python, nvcc) is handed an older library than its own.
LINS_GPU_DEPS_FALLBACK_PACKAGES="libudev1 zlib1g libatomic1 libuuid1"
# Their libraries, in the order of the packages above.
LINS_GPU_DEPS_FALLBACK_LIBS="libudev.so.1 libz.so.1 libatomic.so.1 libuuid.so.1"

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
  (cd "$debs" && apt-get download $LINS_GPU_DEPS_PACKAGES $LINS_GPU_DEPS_FALLBACK_PACKAGES) || {
    echo "gpu-deps: apt-get download failed (run 'apt-get update' first?)" >&2
    return 1
  }
  local fetched=("$debs"/*.deb)
  echo "gpu-deps: ${#fetched[@]} packages, $(du -sh "$debs" | cut -f1), in $debs"
}

lins_gpu_deps_unpack_one() {  # $1: .deb, $2: destination, $3: file for the list of its files
  if command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$1" "$2" && dpkg-deb --fsys-tarfile "$1" | tar -t >"$3"
    return
  fi
  local tmp members
  tmp=$(mktemp -d) || return 1
  (cd "$tmp" && ar x "$1") || { rm -rf "$tmp"; return 1; }
  members=("$tmp"/data.tar.*)
  tar -xf "${members[0]}" -C "$2" && tar -tf "${members[0]}" >"$3"
  local rc=$?
  rm -rf "$tmp"
  return $rc
}

# The packages of the libraries named ($@: mpi, openblas, gtest, benchmark, formats), one word each.
lins_gpu_deps_packages_of() {
  local l out=""
  for l in "$@"; do
    case $l in
      mpi) out+=" $LINS_GPU_DEPS_MPI_PACKAGES" ;;
      openblas) out+=" $LINS_GPU_DEPS_OPENBLAS_PACKAGES" ;;
      gtest) out+=" $LINS_GPU_DEPS_GTEST_PACKAGES" ;;
      benchmark) out+=" $LINS_GPU_DEPS_BENCHMARK_PACKAGES" ;;
      formats) out+=" $LINS_GPU_DEPS_FORMATS_PACKAGES" ;;
      *)
        echo "gpu-deps: unknown library '$l' (valid: $LINS_GPU_DEPS_LIBRARIES)" >&2
        return 1
        ;;
    esac
  done
  echo "$out"
}

# Whether the dynamic loader of this machine finds library $1 (a soname) without help.
lins_gpu_deps_system_has() {
  command -v ldconfig >/dev/null 2>&1 || return 1
  ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$1 "
}

lins_gpu_deps_use() {
  local root debs dest fallback expose lib libs names
  libs=${*:-$LINS_GPU_DEPS_LIBRARIES}
  read -ra names <<<"$libs"
  lins_gpu_deps_packages_of "${names[@]}" >/dev/null || return 1
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  debs="$root/.deps/debs"
  dest="$root/.deps/root"
  fallback="$root/.deps/fallback"
  expose="$root/.deps/expose"
  if ! ls "$debs"/*.deb >/dev/null 2>&1; then
    echo "gpu-deps: no packages in $debs (run 'scripts/gpu-deps.sh fetch' on a Debian 12 machine)" >&2
    return 1
  fi
  lib="$dest/usr/lib/x86_64-linux-gnu"
  # The marker names this layout (each package's file list in .files/): a folder unpacked before it is unpacked again.
  if [ ! -f "$dest/.unpacked-with-lists" ]; then
    rm -rf "$dest" "$fallback"
    mkdir -p "$dest/.files" "$fallback/root"
    local f pkg into
    for f in "$debs"/*.deb; do
      pkg=$(basename "$f")
      pkg=${pkg%%_*}
      into=$dest
      case " $LINS_GPU_DEPS_FALLBACK_PACKAGES " in *" $pkg "*) into=$fallback/root ;; esac
      lins_gpu_deps_unpack_one "$f" "$into" "$dest/.files/$pkg" || {
        echo "gpu-deps: cannot unpack $f (needs dpkg-deb, or ar and tar)" >&2
        return 1
      }
    done
    # Debian reaches some files through update-alternatives links, which unpacking does not make.
    ln -sf mpicc.openmpi "$dest/usr/bin/mpicc"
    ln -sf orterun "$dest/usr/bin/mpirun"
    ln -sf orterun "$dest/usr/bin/mpiexec"
    local psm
    for psm in "$dest"/usr/lib/libpsm1/libpsm_infinipath.so.1.*; do
      [ -e "$psm" ] && ln -sf "../libpsm1/$(basename "$psm")" "$lib/libpsm_infinipath.so.1"
    done
    touch "$dest/.unpacked-with-lists"
  fi
  # The fallback libraries this machine lacks, linked into one folder (decided anew on every use: the folder may have
  # travelled from another machine).
  rm -rf "${fallback:?}/lib" "${expose:?}"
  mkdir -p "$fallback/lib" "$expose"
  local so found exposed=""
  for so in $LINS_GPU_DEPS_FALLBACK_LIBS; do
    lins_gpu_deps_system_has "$so" && continue
    found=$(find "$fallback/root" -name "$so" 2>/dev/null | awk 'NR == 1')
    if [ -n "$found" ]; then
      ln -sf "$found" "$fallback/lib/$so"
      exposed+=" $so"
    else
      echo "gpu-deps: this machine has no $so and .deps/debs/ does not carry it (fetch again)" >&2
    fi
  done
  local path="" args="" used=""
  case " $libs " in
    *" mpi "*)
      export PATH="$dest/usr/bin:$PATH"
      # Debian 12 keeps some libraries (libnl-3) in /lib rather than /usr/lib; UCX's transports link each other in
      # ucx/. Every carried library of lib/ is exposed this way (OpenMPI's plugins load many of them).
      path+="$lib/openmpi/lib:$lib:$dest/lib/x86_64-linux-gnu:$lib/pmix2/lib:$lib/ucx:"
      # OpenMPI finds its plugins, help files and wrapper data under OPAL_PREFIX; PMIx (used by OpenMPI's singleton
      # and orted) is not relocated by it, so its plugin folder is named outright.
      export OPAL_PREFIX="$dest/usr"
      export PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"
      # OpenMPI's default launcher (plm rsh) needs ssh or rsh even to start the local daemon of a singleton (a program
      # run without mpirun calling MPI_Init): without either, MPI_Init fails ("plm_rsh_agent ... could not be found").
      # The packages do not carry ssh; where the machine has neither, the launcher for the local node alone is used.
      if [ -z "${OMPI_MCA_plm:-}" ] && ! command -v ssh >/dev/null 2>&1 && ! command -v rsh >/dev/null 2>&1; then
        export OMPI_MCA_plm=isolated
      fi
      args+=" -DMPI_C_COMPILER=$dest/usr/bin/mpicc.openmpi -DMPIEXEC_EXECUTABLE=$dest/usr/bin/orterun"
      used+=" OpenMPI"
      ;;
  esac
  case " $libs " in
    *" openblas "*)
      path+="$lib/openblas-pthread:"
      args+=" -DOPENBLAS_INCLUDE_DIR=$dest/usr/include/x86_64-linux-gnu/openblas-pthread"
      args+=" -DOPENBLAS_LIBRARY=$lib/openblas-pthread/libopenblas.so"
      used+=" OpenBLAS"
      ;;
  esac
  case " $libs " in
    *" gtest "*)
      args+=" -DGTest_DIR=$lib/cmake/GTest"
      used+=" GoogleTest"
      ;;
  esac
  case " $libs " in
    *" benchmark "*)
      args+=" -Dbenchmark_DIR=$lib/cmake/benchmark"
      used+=" Google-Benchmark"
      ;;
  esac
  case " $libs " in
    *" formats "*)
      args+=" -Dnlohmann_json_DIR=$dest/usr/share/cmake/nlohmann_json -DLINS_TOMLPLUSPLUS_INCLUDE_DIR=$dest/usr/include"
      used+=" nlohmann-json toml++"
      ;;
  esac
  # Without OpenMPI's path, the run-time libraries of OpenBLAS (its Fortran runtime) and Google Benchmark are exposed
  # one by one, and only where the machine has no copy of its own: no program of the machine is handed another one.
  case " $libs " in *" mpi "*) ;; *)
    local need=""
    case " $libs " in *" openblas "*) need+=" $LINS_GPU_DEPS_OPENBLAS_RUNTIME" ;; esac
    case " $libs " in *" benchmark "*) need+=" libbenchmark.so.1debian" ;; esac
    for so in $need; do
      [ "$so" != libbenchmark.so.1debian ] && lins_gpu_deps_system_has "$so" && continue
      if [ -e "$lib/$so" ]; then
        ln -sf "$lib/$so" "$expose/$so"
        exposed+=" $so"
      fi
    done
    ;;
  esac
  export LD_LIBRARY_PATH="$path$expose:$fallback/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  LINS_DEPS_CMAKE_ARGS=${args# }
  LINS_DEPS_LIBRARIES=$libs
  export LINS_DEPS_CMAKE_ARGS LINS_DEPS_LIBRARIES
  local plm=""
  [ -n "${OMPI_MCA_plm:-}" ] && plm="; OpenMPI launcher: $OMPI_MCA_plm"
  echo "gpu-deps: using${used} from $dest (libraries exposed where this machine has none:${exposed:- none}$plm)"
}

# After use: every program and library carried for the libraries named ($@, default those of the last use) must find
# all it links to (and the symbol versions it needs, such as glibc's) on this machine. Prints each missing library with
# the files that need it; fails when there is one.
lins_gpu_deps_check() {
  local root dest missing pkgs pkg names
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  dest="$root/.deps/root"
  command -v ldd >/dev/null 2>&1 || {
    echo "gpu-deps: check needs ldd (glibc's libc-bin)" >&2
    return 1
  }
  read -ra names <<<"${*:-${LINS_DEPS_LIBRARIES:-$LINS_GPU_DEPS_LIBRARIES}}"
  pkgs=$(lins_gpu_deps_packages_of "${names[@]}") || return 1
  # One ldd per ELF file of those packages (programs and libraries; links to them are checked through their
  # targets), in parallel.
  # shellcheck disable=SC2016  # the inner script's variables are its own
  missing=$(for pkg in $pkgs; do
    [ -f "$dest/.files/$pkg" ] && sed -n "s|^\./|$dest/|p" "$dest/.files/$pkg"
  done | tr '\n' '\0' | xargs -0 -P "$(nproc)" -n 16 sh -c '
    for f; do
      [ -f "$f" ] && [ ! -L "$f" ] || continue
      [ "$(head -c 4 "$f" | tr -d "\0")" = "$(printf "\177ELF")" ] || continue
      ldd "$f" 2>&1 | grep "not found" | sed "s|^[[:space:]]*|$f: |"
    done' sh | sed "s|$root/||" | sort)
  if [ -n "$missing" ]; then
    echo "gpu-deps: carried files that cannot load on this machine (missing library or symbol version):" >&2
    echo "$missing" >&2
    return 1
  fi
  echo "gpu-deps: every carried program and library finds what it links to"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
fi
case "${1:-}" in
  fetch) lins_gpu_deps_fetch ;;
  use) lins_gpu_deps_use "${@:2}" ;;
  check) lins_gpu_deps_use "${@:2}" >/dev/null && lins_gpu_deps_check "${@:2}" ;;
  *)
    echo "usage: scripts/gpu-deps.sh fetch | . scripts/gpu-deps.sh use [LIB...] | scripts/gpu-deps.sh check [LIB...]" \
      "(LIB: $LINS_GPU_DEPS_LIBRARIES)" >&2
    false
    ;;
esac
