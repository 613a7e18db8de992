#!/usr/bin/env bash
# shellcheck disable=SC1091  # scripts/gpu_prefix.sh, sourced by a computed path
# Checks, on the development machine, the offline build dependencies of the
# GPU machine: scripts/gpu_prepare.sh's folder (the repository's .gpu when it
# is complete, else a fresh one in a temporary folder: that needs the
# network) unpacked by scripts/gpu_prefix.sh's gpu_prefix_unpack twice:
#   system: with dpkg -x, linking the libraries the system has (all of them
#           here) to the system's, with the system's pkg-config;
#   bare:   with ar + tar (GPU_PREFIX_NO_DPKG=1), as on a machine that has
#           none of them (GPU_PREFIX_IGNORE_SYSTEM=1): libraries, pkg-config
#           and Python packages from the prefix.
# Each time a small CMake project finds toml++, GTest, nlohmann_json and the
# pkg-config modules libxxhash libzstd liblz4 blosc as Resurgo's build does;
# the test checks that headers, CMake configs and libraries come from the
# prefix (not /usr), builds and runs a program using each library, and
# checks where the loader takes the libraries from.
# Also: a corrupted file and a foreign PREFIX are refused.
#
# Exit status: 0 passed, 1 failed, 77 skipped (no .venv, or no .gpu and the
# Debian archive or PyPI unreachable): ctest's SKIP_RETURN_CODE.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
say() { printf 'prefix_test: %s\n' "$*" >&2; }
fail() { printf 'prefix_test: FAIL: %s\n' "$*" >&2; exit 1; }
skip() { printf 'prefix_test: SKIP: %s\n' "$*" >&2; exit 77; }

# The outcome must not depend on the caller's environment.
unset CMAKE_PREFIX_PATH PKG_CONFIG_PATH PKG_CONFIG PKG_CONFIG_EXECUTABLE PYTHONPATH \
  GPU_PREFIX_NO_DPKG GPU_PREFIX_IGNORE_SYSTEM GPU_PREFIX_LIBDIR CMAKE_GENERATOR

venv_py=$root/.venv/bin/python
[[ -x "$venv_py" ]] || skip "no $venv_py: gpu_prepare.sh pins the wheels to .venv (run 'make deps')"
for tool in cmake c++ ar tar ldd; do
  command -v "$tool" >/dev/null 2>&1 || fail "'$tool' not found on PATH"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/resurgo-gpu-prefix.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
jobs=$(nproc 2>/dev/null || echo 2)

# ------------------------------------------------------------ the GPU folder
if "$root/scripts/gpu_prepare.sh" --check "$root/.gpu" 2>"$tmp/check.log"; then
  gpu=$root/.gpu
  say "using $gpu (complete)"
else
  gpu=$tmp/gpu
  say "$root/.gpu is absent or out of date ($(tail -n 1 "$tmp/check.log")): fetching into $gpu"
  rc=0
  "$root/scripts/gpu_prepare.sh" "$gpu" 2>"$tmp/prepare.log" || rc=$?
  if ((rc == 2)); then
    cat "$tmp/prepare.log" >&2
    skip "gpu_prepare.sh could not reach the Debian archive or PyPI (above); run 'make gpu-prepare' where the network is"
  fi
  ((rc == 0)) || { cat "$tmp/prepare.log" >&2; fail "scripts/gpu_prepare.sh $gpu failed (exit $rc)"; }
  "$root/scripts/gpu_prepare.sh" --check "$gpu" || fail "gpu_prepare.sh --check rejects the folder it just made"
fi

# ------------------------------------------------------------ the probe project
proj=$tmp/project
mkdir -p "$proj"
cat >"$proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(gpu_prefix_probe LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
# As Resurgo's CMakeLists.txt finds them.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(GTest REQUIRED)
find_package(nlohmann_json REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
pkg_check_modules(BLOSC REQUIRED IMPORTED_TARGET blosc)

add_executable(probe probe.cpp)
target_link_libraries(probe PRIVATE tomlplusplus::tomlplusplus nlohmann_json::nlohmann_json
  PkgConfig::XXHASH PkgConfig::ZSTD PkgConfig::LZ4 PkgConfig::BLOSC)
add_executable(probe_gtest probe_gtest.cpp)
target_link_libraries(probe_gtest PRIVATE GTest::gtest GTest::gtest_main Threads::Threads)

# Where the imported targets point, one "name value" a line, for the script.
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/found.txt CONTENT
"tomlplusplus.include $<TARGET_PROPERTY:tomlplusplus::tomlplusplus,INTERFACE_INCLUDE_DIRECTORIES>
tomlplusplus.library $<TARGET_FILE:tomlplusplus::tomlplusplus>
gtest.include $<TARGET_PROPERTY:GTest::gtest,INTERFACE_INCLUDE_DIRECTORIES>
gtest.library $<TARGET_FILE:GTest::gtest>
gtest_main.library $<TARGET_FILE:GTest::gtest_main>
nlohmann_json.include $<TARGET_PROPERTY:nlohmann_json::nlohmann_json,INTERFACE_INCLUDE_DIRECTORIES>
")
EOF
cat >"$proj/probe.cpp" <<'EOF'
// Uses each library once, through its own API.
#include <blosc.h>
#include <lz4.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <toml++/toml.h>
#include <vector>

static int failed(const char* what) {
  std::fprintf(stderr, "probe: %s failed\n", what);
  return 1;
}

int main() {
  const std::string text(4096, 'r');

  auto table = toml::parse("answer = 42\n");
  if (table["answer"].value_or(0) != 42) return failed("toml++ parse");

  auto json = nlohmann::json::parse(R"({"answer": 42})");
  if (json.at("answer").get<int>() != 42) return failed("nlohmann_json parse");

  if (XXH64(text.data(), text.size(), 0) == XXH64(text.data(), text.size() - 1, 0))
    return failed("XXH64");

  std::vector<char> packed(ZSTD_compressBound(text.size()));
  std::size_t n = ZSTD_compress(packed.data(), packed.size(), text.data(), text.size(), 3);
  std::string back(text.size(), '\0');
  if (ZSTD_isError(n) || ZSTD_decompress(back.data(), back.size(), packed.data(), n) != text.size() ||
      back != text)
    return failed("zstd round trip");

  packed.assign(LZ4_compressBound(static_cast<int>(text.size())), 0);
  int m = LZ4_compress_default(text.data(), packed.data(), static_cast<int>(text.size()),
                               static_cast<int>(packed.size()));
  if (m <= 0 || LZ4_decompress_safe(packed.data(), back.data(), m, static_cast<int>(back.size())) !=
                    static_cast<int>(text.size()))
    return failed("lz4 round trip");

  blosc_init();
  blosc_set_compressor("zstd");
  packed.assign(text.size() + BLOSC_MAX_OVERHEAD, 0);
  int b = blosc_compress(5, BLOSC_SHUFFLE, 1, text.size(), text.data(), packed.data(), packed.size());
  if (b <= 0 || blosc_decompress(packed.data(), back.data(), back.size()) != static_cast<int>(text.size()) ||
      back != text)
    return failed("blosc round trip");
  blosc_destroy();

  std::printf("probe: toml++ %d.%d.%d, nlohmann_json %d.%d.%d, xxhash %u, zstd %s, lz4 %s, blosc %s: ok\n",
              TOML_LIB_MAJOR, TOML_LIB_MINOR, TOML_LIB_PATCH, NLOHMANN_JSON_VERSION_MAJOR,
              NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH, XXH_versionNumber(),
              ZSTD_versionString(), LZ4_versionString(), BLOSC_VERSION_STRING);
  return 0;
}
EOF
cat >"$proj/probe_gtest.cpp" <<'EOF'
#include <gtest/gtest.h>
TEST(GpuPrefix, GTestLinks) { EXPECT_EQ(6 * 7, 42); }
EOF

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

# cache_value BUILD NAME: the value of NAME in BUILD/CMakeCache.txt.
cache_value() { sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt" | head -n 1; }

# under DIR VALUE WHAT: every ;-separated path of VALUE is inside DIR.
under() {
  local dir=$1 value=$2 what=$3 part
  [[ -n "$value" ]] || fail "$what is empty"
  local IFS=';'
  for part in $value; do
    [[ "$part" == "$dir"/* ]] || fail "$what is $part, not inside $dir"
  done
}

# check_mode NAME: unpack and build, in a subshell (gpu_prefix_unpack exports).
check_mode() {
  local mode=$1 prefix=$tmp/prefix-$1 build=$tmp/build-$1 python
  say "---- $mode: gpu_prefix_unpack $gpu $prefix"
  if [[ "$mode" == bare ]]; then
    export GPU_PREFIX_NO_DPKG=1 GPU_PREFIX_IGNORE_SYSTEM=1
    python=$venv_py  # has every package: only IGNORE_SYSTEM makes it install them
  else
    python=$(command -v python3 || echo "$venv_py")
    # The interpreter, not a pyenv shim (which would rehash after pip).
    python=$("$python" -c 'import sys; print(sys.executable)')
  fi
  export PYTHON=$python
  source "$root/scripts/gpu_prefix.sh"
  gpu_prefix_unpack "$gpu" "$prefix" 2>"$tmp/unpack-$mode.log" \
    || { cat "$tmp/unpack-$mode.log" >&2; fail "$mode: gpu_prefix_unpack failed"; }
  cat "$tmp/unpack-$mode.log" >&2
  [[ "$GPU_PREFIX_LIBDIR" == "$prefix/usr/lib/x86_64-linux-gnu" ]] || fail "$mode: GPU_PREFIX_LIBDIR=$GPU_PREFIX_LIBDIR"
  [[ "$CMAKE_PREFIX_PATH" == "$prefix/usr" ]] || fail "$mode: CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH"
  [[ "$PKG_CONFIG_PATH" == "$prefix/usr/"* ]] || fail "$mode: PKG_CONFIG_PATH=$PKG_CONFIG_PATH"

  # The unpack method: ar + tar or dpkg, as asked.
  local want_method="dpkg -x"
  [[ "$mode" != bare ]] || want_method="ar + tar"
  grep -q "unpacked .*($want_method)" "$tmp/unpack-$mode.log" || fail "$mode: the .deb files were not unpacked with $want_method"

  # pkg-config: the prefix's (bare) or the system's, flags into the prefix.
  local pc
  if [[ "$mode" == bare ]]; then
    [[ "${PKG_CONFIG_EXECUTABLE:-}" == "$prefix/bin/pkg-config" && "${PKG_CONFIG:-}" == "$PKG_CONFIG_EXECUTABLE" ]] \
      || fail "$mode: PKG_CONFIG_EXECUTABLE='${PKG_CONFIG_EXECUTABLE:-}' PKG_CONFIG='${PKG_CONFIG:-}', want $prefix/bin/pkg-config"
    pc=$PKG_CONFIG_EXECUTABLE
  else
    [[ -z "${PKG_CONFIG_EXECUTABLE:-}" ]] || fail "$mode: PKG_CONFIG_EXECUTABLE set although the system has pkg-config"
    pc=$(command -v pkg-config) || fail "$mode: no pkg-config on PATH"
  fi
  local flags
  flags=$("$pc" --cflags --libs libxxhash libzstd liblz4 blosc tomlplusplus gtest nlohmann_json) \
    || fail "$mode: $pc --cflags --libs failed"
  say "$mode: $pc gives: $flags"
  [[ " $flags " == *" -I$prefix/usr/include "* ]] || fail "$mode: pkg-config's flags lack -I$prefix/usr/include"
  [[ " $flags " != *" -I/usr/include "* && " $flags " != *" -L/usr/"* ]] || fail "$mode: pkg-config's flags name /usr"

  # Configure and build the probe.
  cmake -S "$proj" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$tmp/configure-$mode.log" 2>&1 \
    || { cat "$tmp/configure-$mode.log" >&2; fail "$mode: configuring the probe project failed"; }
  local name value
  for name in tomlplusplus_DIR GTest_DIR nlohmann_json_DIR; do
    under "$prefix/usr" "$(cache_value "$build" "$name")" "$mode: $name"
  done
  for name in XXHASH ZSTD LZ4 BLOSC; do
    under "$prefix/usr" "$(cache_value "$build" "${name}_INCLUDE_DIRS")" "$mode: ${name}_INCLUDE_DIRS"
    value=$(sed -n "s/^pkgcfg_lib_${name}_[A-Za-z0-9_]*:FILEPATH=//p" "$build/CMakeCache.txt" | paste -sd';')
    under "$prefix/usr" "$value" "$mode: pkgcfg_lib_${name}_*"
  done
  value=$(cache_value "$build" PKG_CONFIG_EXECUTABLE)
  [[ "$value" == "$pc" || "$(readlink -f "$value")" == "$(readlink -f "$pc")" ]] \
    || fail "$mode: CMake took pkg-config $value, not $pc"
  while read -r name value; do
    under "$prefix/usr" "$value" "$mode: $name"
  done <"$build/found.txt"
  cmake --build "$build" -j"$jobs" >"$tmp/build-$mode.log" 2>&1 \
    || { cat "$tmp/build-$mode.log" >&2; fail "$mode: building the probe project failed"; }

  # The compiler saw the prefix's headers and never -I/usr/include.
  local includes
  includes=$(grep -oE '(-I|-isystem )[^ "]+' "$build/compile_commands.json" | sed 's/^-I//; s/^-isystem //' | sort -u)
  grep -qx "$prefix/usr/include" <<<"$includes" || fail "$mode: no -I/-isystem $prefix/usr/include in compile_commands.json"
  while read -r value; do
    [[ "$value" == "$prefix"/* || "$value" == "$proj"* || "$value" == "$build"* ]] \
      || fail "$mode: the probe compiles with the include folder $value"
  done <<<"$includes"

  # Run them, as the GPU check will: GPU_PREFIX_LIBDIR on LD_LIBRARY_PATH.
  local out
  out=$(LD_LIBRARY_PATH=$GPU_PREFIX_LIBDIR "$build/probe") || fail "$mode: the probe failed: $out"
  say "$mode: $out"
  LD_LIBRARY_PATH=$GPU_PREFIX_LIBDIR "$build/probe_gtest" --gtest_brief=1 >"$tmp/gtest-$mode.log" 2>&1 \
    || { cat "$tmp/gtest-$mode.log" >&2; fail "$mode: the GoogleTest probe failed"; }

  # Where the loader takes each library from: the system's file when the
  # system has it (system), the prefix's (bare).
  local lib path real
  for lib in libtomlplusplus.so.3 libzstd.so.1 liblz4.so.1 libxxhash.so.0 libblosc.so.1 libsnappy.so.1; do
    path=$(LD_LIBRARY_PATH=$GPU_PREFIX_LIBDIR ldd "$build/probe" | awk -v l="$lib" '$1 == l { print $3 }')
    [[ -n "$path" && -e "$path" ]] || fail "$mode: ldd does not resolve $lib for the probe"
    real=$(readlink -f "$path")
    if [[ "$mode" == bare ]]; then
      [[ "$real" == "$prefix"/* ]] || fail "$mode: $lib is loaded from $real, not from the prefix"
    else
      [[ "$real" != "$prefix"/* ]] || fail "$mode: $lib is loaded from the prefix ($real) although the system has it"
    fi
    say "$mode: $lib -> $real"
  done

  # Python: every wheel's package importable; from the prefix when bare.
  local where
  where=$("$python" -c 'import nanobind, scikit_build_core, packaging, pathspec
for m in (nanobind, scikit_build_core, packaging, pathspec): print(m.__name__, m.__file__)') \
    || fail "$mode: $python cannot import nanobind, scikit_build_core, packaging, pathspec (PYTHONPATH=${PYTHONPATH:-})"
  if [[ "$mode" == bare ]]; then
    while read -r name value; do
      [[ "$value" == "$prefix/python/"* ]] || fail "$mode: $python imports $name from $value, not $prefix/python"
    done <<<"$where"
    value=$("$python" -m nanobind --cmake_dir) || fail "$mode: $python -m nanobind --cmake_dir failed"
    [[ "$value" == "$prefix/python/"* ]] || fail "$mode: nanobind's CMake folder is $value"
  fi
  say "$mode: ok"
}

start=$SECONDS
(check_mode system)
(check_mode bare)

# dpkg -x and ar + tar made the same tree (libraries aside, links in one).
tree() { (cd "$1/usr" && find . -printf '%P\n' | LC_ALL=C sort); }
diff <(tree "$tmp/prefix-system") <(tree "$tmp/prefix-bare") >"$tmp/tree.diff" \
  || { cat "$tmp/tree.diff" >&2; fail "the dpkg and the ar + tar unpacks differ in their file names"; }
while IFS= read -r -d '' file; do
  rel=${file#"$tmp/prefix-system/"}
  [[ "$rel" == *.pc || ! -f "$tmp/prefix-bare/$rel" || -L "$tmp/prefix-bare/$rel" ]] && continue
  cmp -s "$file" "$tmp/prefix-bare/$rel" || fail "$rel differs between the dpkg and the ar + tar unpack"
done < <(find "$tmp/prefix-system/usr" -type f -print0)
say "dpkg -x and ar + tar unpacked the same files"

# Step 4's choices on a system that has some of the libraries: a fake
# ldconfig (first on PATH) lists an older libzstd.so.1, a newer liblz4.so.1
# and a 32-bit libxxhash.so.0 only. .venv's Python has every package.
fake=$tmp/fake-system
mkdir -p "$fake/bin" "$fake/lib"
touch "$fake/lib/libzstd.so.1.4.0" "$fake/lib/liblz4.so.1.10.0"
ln -s libzstd.so.1.4.0 "$fake/lib/libzstd.so.1"
ln -s liblz4.so.1.10.0 "$fake/lib/liblz4.so.1"
printf '%s\n' '#!/bin/sh' "cat <<'EOF'" \
  "3 libs found in cache \`/etc/ld.so.cache'" \
  "	libzstd.so.1 (libc6,x86-64) => $fake/lib/libzstd.so.1" \
  "	liblz4.so.1 (libc6,x86-64) => $fake/lib/liblz4.so.1" \
  "	libxxhash.so.0 (libc6) => $fake/lib32/libxxhash.so.0" EOF >"$fake/bin/ldconfig"
chmod +x "$fake/bin/ldconfig"
partial=$tmp/prefix-partial
(
  export PATH=$fake/bin:$PATH
  source "$root/scripts/gpu_prefix.sh"
  PYTHON=$venv_py gpu_prefix_unpack "$gpu" "$partial" 2>"$tmp/unpack-partial.log" \
    || { cat "$tmp/unpack-partial.log" >&2; fail "partial: gpu_prefix_unpack failed"; }
  [[ -z "${PYTHONPATH:-}" ]] || fail "partial: PYTHONPATH=$PYTHONPATH although $venv_py has every package"
)
libdir=$partial/usr/lib/x86_64-linux-gnu
[[ -f "$libdir/libzstd.so.1.5.4" && ! -L "$libdir/libzstd.so.1.5.4" ]] \
  || fail "partial: libzstd.so.1.5.4 was replaced although the system's is older"
[[ "$(readlink "$libdir/liblz4.so.1.9.4")" == "$fake/lib/liblz4.so.1" ]] \
  || fail "partial: liblz4.so.1.9.4 is not a link to the system's newer liblz4.so.1"
[[ "$(readlink -f "$libdir/liblz4.so")" == "$fake/lib/liblz4.so.1.10.0" ]] \
  || fail "partial: the development link liblz4.so does not lead to the system's library"
for lib in libxxhash.so.0.8.1 libtomlplusplus.so.3.3.0 libblosc.so.1.21.3; do
  [[ -f "$libdir/$lib" && ! -L "$libdir/$lib" ]] || fail "partial: $lib left the prefix although the system lacks it"
done
grep -q 'python: nanobind 3.1.0 is importable' "$tmp/unpack-partial.log" \
  || fail "partial: no 'nanobind is importable' line in $(cat "$tmp/unpack-partial.log")"
[[ ! -e "$partial/python" ]] || fail "partial: wheels installed although $venv_py has them"
say "an older system library is kept, a newer one linked, a 32-bit one ignored"

# Refusals: a corrupted file, a PREFIX someone else owns.
bad=$tmp/gpu-corrupt
cp -r "$gpu" "$bad"
victim=$(compgen -G "$bad/debs/libzstd1_*.deb" | head -n 1)
printf 'X' | dd of="$victim" bs=1 seek=100 conv=notrunc status=none
msg=$( (source "$root/scripts/gpu_prefix.sh"; gpu_prefix_unpack "$bad" "$tmp/prefix-corrupt") 2>&1) \
  && fail "gpu_prefix_unpack accepted a corrupted ${victim##*/}"
[[ "$msg" == *"${victim##*/}"*sha256* ]] || fail "the corruption message does not name the file and its sha256: $msg"
[[ ! -e "$tmp/prefix-corrupt/usr" ]] || fail "gpu_prefix_unpack unpacked before verifying"
mkdir -p "$tmp/foreign" && touch "$tmp/foreign/keep"
msg=$( (source "$root/scripts/gpu_prefix.sh"; gpu_prefix_unpack "$gpu" "$tmp/foreign") 2>&1) \
  && fail "gpu_prefix_unpack took a non-empty folder it did not make"
[[ -f "$tmp/foreign/keep" && "$msg" == *"not made by gpu_prefix_unpack"* ]] || fail "foreign PREFIX: $msg"
say "a corrupted file and a foreign PREFIX are refused"

say "passed in $((SECONDS - start)) s"
