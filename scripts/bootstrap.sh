#!/usr/bin/env bash
# Idempotent set-up used by every make target:
#   1. the system packages the build needs (Debian: checked with dpkg and,
#      when running as root, installed with apt-get; elsewhere: the commands
#      and headers are looked for and a missing one stops the script);
#   2. the Python virtual environment .venv with the packages the Python
#      package, its tests and the benchmarks use (torch is never installed).
# Takes well under 2 s when everything is already there.
#
# Environment:
#   PYTHON=python3.12            interpreter the virtualenv is created from
#   RESURGO_BENCH_PACKAGES=1     also the libraries only the benchmarks' baselines
#                                need (PETSc, Global Arrays: bench/matrix.py);
#                                `make bench` sets it
#   RESURGO_SKIP_SYSTEM_CHECK=1  skip step 1 (you provide the toolchain)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
venv="$root/.venv"
python=${PYTHON:-python3}

say() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

# Python packages of the virtualenv. Changing this list re-runs pip (the
# stamp file holds its hash).
venv_packages=(numpy nanobind scikit-build-core pytest h5py rich matplotlib
  mpi4py  # MPI stores from Python: its wheel loads the system's libmpi (or pip builds it with mpicc)
  lz4 zstandard blosc2  # baselines of bench/compression_fork.py
  checkpoint-schedules==1.0.4 pyrevolve==2.2.8)  # adjoint integrations (resurgo.adjoint)

# Debian packages of the toolchain and the libraries (libhdf5-dev is not
# needed: h5py comes as a wheel). Open MPI gives the MPI stores and their
# tests, and the libmpi that mpi4py loads: it comes before the virtualenv.
debian_packages=(build-essential cmake pkg-config gfortran libtomlplusplus-dev
  libxxhash-dev nlohmann-json3-dev libzstd-dev liblz4-dev libblosc-dev libgtest-dev
  libopenmpi-dev openmpi-bin
  libscalapack-openmpi-dev  # the ConvergentMatrix's ScaLAPACK interoperation test
  ninja-build  # build/cpp and pip's build of the Python package both use Ninja (Makefile)
  ccache  # the build trees of one `make test` share what they compile alike (Makefile)
  lld  # links make test's programs faster than GNU ld (CMakeLists.txt)
  clang)  # the ASan+UBSan tree: half GCC's compile CPU (Makefile); the fuzz targets
# Baselines of bench/matrix.py (PETSc's MATSCALAPACK assembly, Global
# Arrays' NGA_Acc): large, and needed by no test, so only for `make bench`.
bench_packages=(petsc-dev libglobalarrays-dev)
[[ "${RESURGO_BENCH_PACKAGES:-0}" == 1 ]] && debian_packages+=("${bench_packages[@]}")

# The interpreter whose headers the nanobind extension compiles against.
if [[ -x "$venv/bin/python" ]]; then
  build_python="$venv/bin/python"
else
  build_python=$(command -v "$python" || true)
  [[ -n "$build_python" ]] || die "no '$python' on PATH: install python3 (Debian: apt-get install python3)"
fi

python_has_headers() {
  "$build_python" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' 2>/dev/null
}

# ---------------------------------------------------------------- 1. system
check_debian() {
  local wanted=("${debian_packages[@]}")
  local real
  real=$(readlink -f "$build_python" 2>/dev/null || echo "$build_python")
  # Debian's own python3 needs python3-venv to create a virtualenv and
  # python3-dev for Python.h; a pyenv/conda python carries both itself.
  if [[ "$real" == /usr/bin/* ]]; then
    [[ -x "$venv/bin/python" ]] || wanted+=(python3-venv)
    python_has_headers || wanted+=(python3-dev)
  fi

  local -A ok=()
  local p status missing=()
  while read -r p status; do
    [[ "$status" == ii* ]] && ok[$p]=1
  done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${wanted[@]}" 2>/dev/null || true)
  for p in "${wanted[@]}"; do
    [[ -n "${ok[$p]:-}" ]] || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0

  local cmd="apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    die "missing system packages: ${missing[*]}
  install them with:
    sudo apt-get update && sudo $cmd
  then run this again."
  fi
  say "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

check_other() {
  # Not Debian: look for the commands and headers themselves.
  local missing=() c h d found
  for c in c++ clang++ cmake pkg-config; do
    command -v "$c" >/dev/null 2>&1 || missing+=("command $c")
  done
  command -v gfortran >/dev/null 2>&1 \
    || say "note: no gfortran; the Fortran module and its tests are not built"
  command -v mpicc >/dev/null 2>&1 \
    || say "note: no MPI (mpicc); MPI stores are not built and their tests are skipped"
  local dirs=(/usr/include /usr/local/include /opt/homebrew/include)
  [[ -n "${CONDA_PREFIX:-}" ]] && dirs+=("$CONDA_PREFIX/include")
  local IFS_old=$IFS
  IFS=:
  for d in ${CPATH:-} ${CPLUS_INCLUDE_PATH:-}; do [[ -n "$d" ]] && dirs+=("$d"); done
  for d in ${CMAKE_PREFIX_PATH:-}; do [[ -n "$d" ]] && dirs+=("$d/include"); done
  IFS=$IFS_old
  for h in toml++/toml.h xxhash.h nlohmann/json.hpp zstd.h lz4.h blosc.h gtest/gtest.h; do
    found=0
    for d in "${dirs[@]}"; do [[ -f "$d/$h" ]] && { found=1; break; }; done
    ((found)) || missing+=("header $h")
  done
  python_has_headers || missing+=("Python.h of $build_python")
  ((${#missing[@]} == 0)) && return 0
  local IFS=,
  die "not found: ${missing[*]}
  Needed: a C++20 compiler, CMake >= 3.25, pkg-config, gfortran (optional),
  toml++, xxHash, nlohmann-json, zstd, lz4, c-blosc 1.x, GoogleTest, Python headers.
  Install them with your package manager, or set RESURGO_SKIP_SYSTEM_CHECK=1."
}

if [[ "${RESURGO_SKIP_SYSTEM_CHECK:-0}" != 1 ]]; then
  if command -v dpkg-query >/dev/null 2>&1; then
    check_debian
  else
    check_other
  fi
fi

# ---------------------------------------------------------------- 2. venv
if [[ ! -x "$venv/bin/python" ]]; then
  say "creating virtualenv .venv with $("$python" --version 2>&1) ($(command -v "$python"))"
  "$python" -m venv "$venv" || die "'$python -m venv $venv' failed (Debian: apt-get install python3-venv)"
  rm -f "$venv/.resurgo-requirements"
fi

stamp="$venv/.resurgo-requirements"
want=$(printf '%s\n' "${venv_packages[@]}" | sha256sum | cut -d' ' -f1)
have=$(cat "$stamp" 2>/dev/null || true)
if [[ "$want" != "$have" ]]; then
  say "installing Python packages into .venv: ${venv_packages[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${venv_packages[@]}" >&2 \
    || die "pip install into .venv failed"
  echo "$want" >"$stamp"
fi

say "ok (system packages and .venv ready)"
