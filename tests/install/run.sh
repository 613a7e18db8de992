#!/usr/bin/env bash
# Install test: run.sh BUILD_DIR CONSUMER_SRC [CMAKE CC CXX]
#  1. cmake --install BUILD_DIR into a temporary prefix;
#  2. configure + build consumer/ with find_package(resurgo): a C++ program on
#     resurgo::resurgo and a C program on resurgo::resurgo_static;
#  3. build the same two sources with pkg-config (shared, and --static);
#  4. run all four: each checkpoints, restarts in a new store, and checks the
#     bytes restored.
set -euo pipefail

build=${1:?usage: run.sh BUILD_DIR CONSUMER_SRC [CMAKE CC CXX]}
src=${2:?usage: run.sh BUILD_DIR CONSUMER_SRC [CMAKE CC CXX]}
cmake=${3:-cmake}
cc=${4:-cc}
cxx=${5:-c++}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/resurgo-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

step() { printf '== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

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

run() {  # run NAME PROGRAM: the program checkpoints and restores under $tmp/NAME
  local name=$1 prog=$2
  mkdir -p "$tmp/$name"
  RESURGO_LOCAL_PATH="$tmp/$name/l2" RESURGO_PERSISTENT_PATH="$tmp/$name/l4" \
    "$prog" || fail "$name exited with $?"
  printf '   %s: ok\n' "$name"
}

step "find_package(resurgo): configure + build"
"$cmake" -S "$src" -B "$tmp/cmake" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "consumer configure"; }
"$cmake" --build "$tmp/cmake" -j2 >"$tmp/build.log" 2>&1 \
  || { cat "$tmp/build.log"; fail "consumer build"; }
run cmake-cxx-shared "$tmp/cmake/cxx_shared"
run cmake-c-static "$tmp/cmake/c_static"

step "pkg-config: build"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
command -v pkg-config >/dev/null || fail "pkg-config not found"
version=$(pkg-config --modversion resurgo) || fail "pkg-config --modversion resurgo"
printf '   resurgo.pc version %s\n' "$version"
# shellcheck disable=SC2046
"$cxx" -std=c++20 -Wall -Wextra -Werror -o "$tmp/pc_cxx_shared" "$src/main.cpp" \
  $(pkg-config --cflags --libs resurgo) -Wl,-rpath,"$libdir" || fail "pkg-config shared build"
# Static: the archive itself, then Libs.private.
static_libs=$(pkg-config --static --libs resurgo | sed -E 's/(^| )-lresurgo( |$)/ /')
# shellcheck disable=SC2046,SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/pc_c_static" "$src/main.c" \
  $(pkg-config --cflags resurgo) "$libdir/libresurgo.a" $static_libs || fail "pkg-config static build"
if ldd "$tmp/pc_c_static" 2>/dev/null | grep -q libresurgo; then
  fail "pc_c_static links libresurgo.so, expected the static archive"
fi
run pkgconfig-cxx-shared "$tmp/pc_cxx_shared"
run pkgconfig-c-static "$tmp/pc_c_static"

echo "install test: 4 consumers built and passed"
