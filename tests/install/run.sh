#!/usr/bin/env bash
# Install test: run.sh BUILD_DIR CONSUMER_SRC CMAKE CC CXX [FC]
#  1. cmake --install BUILD_DIR into a temporary prefix;
#  2. three CMake projects of one language each (consumer/c, consumer/cxx,
#     consumer/fortran; find_package(resurgo) failed in the last two once),
#     built against the shared and the static library and installed;
#  3. the compile lines of docs/install.md with pkg-config: C++ on resurgo,
#     C on resurgo-static, Fortran on resurgo-fortran; and the serial reader
#     of global-layout files (resurgo/global_file.hpp) without MPI's flags;
#  4. every program run with LD_LIBRARY_PATH unset (RUNPATHs only): each
#     checkpoints, restarts in a new store, and checks the bytes restored
#     (the global-file reader: refuses a missing and a foreign file by name).
# Without FC (no Fortran compiler; the library then has no Fortran module)
# the Fortran consumers are skipped, with a line that says so.
set -euo pipefail
unset LD_LIBRARY_PATH

usage="usage: run.sh BUILD_DIR CONSUMER_SRC CMAKE CC CXX [FC]"
build=${1:?$usage}
src=${2:?$usage}
cmake=${3:?$usage}
cc=${4:?$usage}
cxx=${5:?$usage}
fc=${6:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/resurgo-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
apps="$tmp/apps"

step() { printf '== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
needs() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

step "install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log"; fail "cmake --install"; }
config=$(find "$prefix" -name resurgoConfig.cmake -print -quit)
pcfile=$(find "$prefix" -name resurgo.pc -print -quit)
[[ -n "$config" ]] || fail "resurgoConfig.cmake not installed"
[[ -n "$pcfile" ]] || fail "resurgo.pc not installed"
for h in resurgo.h resurgo.hpp appic.h; do
  [[ -f "$prefix/include/resurgo/$h" ]] || fail "include/resurgo/$h not installed"
done
libdir=$(dirname "$(dirname "$pcfile")")
[[ -e "$libdir/libresurgo.so" ]] || fail "libresurgo.so not in $libdir"
[[ -f "$libdir/libresurgo.a" ]] || fail "libresurgo.a not in $libdir"
grep -q "^prefix=$prefix\$" "$pcfile" || { cat "$pcfile"; fail "resurgo.pc: prefix is not $prefix"; }
languages=(c cxx)
if [[ -n "$fc" ]]; then
  languages+=(fortran)
  [[ -f "$prefix/include/resurgo/fortran/resurgo.mod" ]] || fail "include/resurgo/fortran/resurgo.mod not installed"
  [[ -f "$prefix/include/resurgo/fortran/resurgo_auto.mod" ]] || fail "include/resurgo/fortran/resurgo_auto.mod not installed"
  # shellcheck disable=SC2016
  readelf -d "$libdir/libresurgo_fortran.so" | grep -q 'R.*PATH.*\$ORIGIN' \
    || fail "libresurgo_fortran.so has no RUNPATH \$ORIGIN: its programs would not find libresurgo.so.0"
else
  echo "skip: Fortran consumers (no Fortran compiler, so no Fortran module)"
fi

step "find_package(resurgo) in a project of each language: configure, build, install"
declare -A compiler=([c]="-DCMAKE_C_COMPILER=$cc" [cxx]="-DCMAKE_CXX_COMPILER=$cxx" [fortran]="-DCMAKE_Fortran_COMPILER=$fc")
for language in "${languages[@]}"; do
  out="$tmp/cmake-$language"
  if ! { "$cmake" -S "$src/$language" -B "$out" -DCMAKE_BUILD_TYPE=Release \
           -DCMAKE_PREFIX_PATH="$prefix" "${compiler[$language]}" &&
         "$cmake" --build "$out" -j2 &&
         "$cmake" --install "$out" --prefix "$apps"; } >"$out.log" 2>&1; then
    cat "$out.log"
    fail "$language-only consumer project"
  fi
done

step "pkg-config: the compile lines of docs/install.md"
command -v pkg-config >/dev/null || fail "pkg-config not found"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
printf '   resurgo.pc version %s\n' "$(pkg-config --modversion resurgo)"
rpath="-Wl,-rpath,$(pkg-config --variable=libdir resurgo)"
# shellcheck disable=SC2046
"$cxx" -std=c++20 -Wall -Wextra -Werror -o "$apps/bin/pc_cxx_shared" "$src/main.cpp" \
  $(pkg-config --cflags --libs resurgo) "$rpath" || fail "pkg-config resurgo: C++ build"
# The serial reader of global-layout files without MPI's compile flags.
# shellcheck disable=SC2046
"$cxx" -std=c++20 -Wall -Wextra -Werror -o "$apps/bin/pc_global_file" "$src/global_file.cpp" \
  -I"$(pkg-config --variable=includedir resurgo)" $(pkg-config --libs resurgo) "$rpath" \
  || fail "resurgo/global_file.hpp without MPI's flags: C++ build"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror -o "$apps/bin/pc_c_static" "$src/main.c" \
  $(pkg-config --cflags --libs resurgo-static) || fail "pkg-config resurgo-static: C build"
if [[ -n "$fc" ]]; then
  # -lresurgo_fortran alone: libresurgo.so.0 is found through the RUNPATH of
  # libresurgo_fortran, not the program's.
  # shellcheck disable=SC2046
  "$fc" -o "$apps/bin/pc_fortran_shared" "$src/main.f90" \
    $(pkg-config --cflags --libs resurgo-fortran) "$rpath" || fail "pkg-config resurgo-fortran: Fortran build"
  [[ $'\n'$(needs "$apps/bin/pc_fortran_shared") != *$'\n'libresurgo.so* ]] \
    || fail "pc_fortran_shared needs libresurgo.so itself; it should come through libresurgo_fortran"
fi

step "run every program, LD_LIBRARY_PATH unset"
count=0
for program in "$apps"/bin/*; do
  name=$(basename "$program")
  if [[ "$name" == *static* && $'\n'$(needs "$program") == *$'\n'libresurgo* ]]; then
    fail "$name needs a libresurgo shared library; a static link should not"
  fi
  mkdir -p "$tmp/run/$name"
  RESURGO_LOCAL_PATH="$tmp/run/$name/l2" RESURGO_PERSISTENT_PATH="$tmp/run/$name/l4" \
    "$program" || fail "$name exited with $?"
  printf '   %s: ok\n' "$name"
  count=$((count + 1))
done
expected=7  # CMake: C and C++, shared and static; pkg-config: C++ shared, C static, the global-file reader
[[ -z "$fc" ]] || expected=9  # and Fortran: CMake, pkg-config
((count == expected)) || fail "ran $count programs, expected $expected"
echo "install test: $count consumers built and passed"
