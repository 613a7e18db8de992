#!/usr/bin/env bash
# Fetches what a GPU machine without network and without a package manager
# needs to build Resurgo: the Debian packages of the build dependencies (and
# of their runtime libraries) and the pure-Python wheels of the extension's
# build backend. scripts/gpu_prefix.sh (gpu_prefix_unpack) verifies them
# there and unpacks them into a prefix.
#
# Usage: scripts/gpu_prepare.sh [--check] [DIR]      (make gpu-prepare)
#   DIR        default: .gpu in the repository root (git-ignored). It gets
#              debs/, wheels/ and MANIFEST (sha256, size, path of each file,
#              the date and the Debian release); .apt-uris keeps apt's answer
#              for the next run (copying it along is harmless).
#   --check    download, remove and write nothing: exit 0 when DIR is
#              complete and matches the lists below, 1 (saying why) when not.
#
# Idempotent: with everything present it returns in well under 2 s, fetches
# nothing and leaves DIR as it was (MANIFEST's date included); after a change
# of the lists it fetches what is missing and removes what is no longer listed.
# It writes nothing outside DIR: no apt or pip cache, no apt-get update.
#
# Exit status: 0 ok; 1 error (or, with --check, DIR out of date);
# 2 the Debian archive or PyPI could not be reached, or apt has no package
# lists (run apt-get update): tests/gpu/prefix_test.sh skips on it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
venv_py="$root/.venv/bin/python"

say() { printf 'gpu-prepare: %s\n' "$*" >&2; }
die() { printf 'gpu-prepare: error: %s\n' "$*" >&2; exit 1; }
unreachable() { printf 'gpu-prepare: error: %s\n' "$*" >&2; exit 2; }

# Debian packages, unpacked as they are on the GPU machine (gpu_prefix_unpack
# links each library to the system's copy when the system has one). Only these:
# apt-get download fetches no dependencies, recommends or suggests.
debian_packages=(
  # toml++: find_package(tomlplusplus), linked as the shared libtomlplusplus.so.3
  libtomlplusplus-dev libtomlplusplus3
  # nlohmann_json: header-only, CMake config in usr/share/cmake
  nlohmann-json3-dev
  # pkg-config modules libxxhash, libzstd, liblz4, blosc, with their runtime
  # libraries; libblosc1 also loads libsnappy.so.1, liblz4, libzstd and libz
  # (zlib1g: on every Ubuntu, listed so that a bare machine has it too)
  libxxhash-dev libxxhash0
  libzstd-dev libzstd1
  liblz4-dev liblz4-1
  libblosc-dev libblosc1 libsnappy1v5 zlib1g
  # GoogleTest: static libgtest.a/libgtest_main.a and the GTest CMake config
  # (its dependency `googletest`, the sources in /usr/src, is not needed)
  libgtest-dev
  # pkg-config itself (FindPkgConfig needs the executable): pkgconf has the
  # /usr/bin/pkg-config link, pkgconf-bin the pkgconf program, libpkgconf3
  # its library (the `pkg-config` package is only a transitional name)
  pkgconf pkgconf-bin libpkgconf3
)

# Python wheels (pure: py3-none-any) for the extension's build with
# --no-build-isolation, at the versions .venv has (the tested ones), for
# Python 3.12. The check below fails when a wheel needs one not listed.
python_packages=(
  nanobind           # nanobind_add_module and its sources (python/CMakeLists.txt)
  scikit-build-core  # pyproject.toml's build backend
  packaging pathspec # scikit-build-core's requirements on Python >= 3.11
  checkpoint-schedules  # resurgo.adjoint, which the GPU-marked adjoint tests import
)
python_version=3.12
# What the GPU machine's Python has already (its image: CUDA, PyTorch, CuPy,
# NumPy), so that a wheel may require it without carrying it; not pure, it
# could not travel as such a wheel anyway.
machine_packages=(numpy)

# Everything fetched, at most (the GPU machine's copy travels with the tree).
max_bytes=$((60 * 1024 * 1024))

check_only=0
case "${1:-}" in
  --check) check_only=1; shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) die "unknown option '$1' (usage: scripts/gpu_prepare.sh [--check] [DIR])" ;;
esac
(($# <= 1)) || die "too many arguments (usage: scripts/gpu_prepare.sh [--check] [DIR])"
dir=${1:-$root/.gpu}

# ------------------------------------------------------------ preconditions
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then
  die "apt-get/dpkg not found: the packages are fetched with 'apt-get download' on Debian 12 (bookworm), run this there"
fi
arch=$(dpkg --print-architecture)
[[ "$arch" == amd64 ]] \
  || die "this machine's Debian architecture is '$arch': the GPU machine is x86-64, run this on an amd64 Debian"
# shellcheck disable=SC1091
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")
debian_release="$(cat /etc/debian_version 2>/dev/null || echo unknown) $codename $arch"
[[ -x "$venv_py" ]] || die "no $venv_py: the wheels are pinned to the versions .venv has; run 'make deps' first"

if ((check_only)); then
  [[ -d "$dir" ]] || die "$dir does not exist: run 'make gpu-prepare'"
else
  mkdir -p "$dir/debs" "$dir/wheels"
fi
dir=$(cd "$dir" && pwd)
[[ "$dir" != / ]] || die "DIR must not be /"

problems=()  # --check: what differs
stale() { problems+=("$*"); }

# Staging area on DIR's filesystem: a file enters debs/ or wheels/ only once
# verified, so an interrupted run leaves no half file behind.
partial=""
cleanup() { [[ -z "$partial" ]] || rm -rf -- "$partial"; }
trap cleanup EXIT
staging() {
  if [[ -z "$partial" ]]; then
    partial=$(mktemp -d "$dir/.partial.XXXXXX")
  fi
}

# apt must write no cache outside DIR (the index is read from /var/lib/apt).
apt_opts=(-q -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
# As root, apt downloads as the user _apt, who may not be able to enter DIR
# (under /root, say): it would warn and download unsandboxed. Say so at once.
[[ $(id -u) -ne 0 ]] || apt_opts+=(-o APT::Sandbox::User=root)

# Says whether a failed command's output ($1: a file) is a network failure.
network_error() {
  grep -qiE 'could not resolve|temporary failure|failed to fetch|unable to connect|could not connect|connection (failed|refused|timed out)|network is unreachable|NewConnectionError|Max retries exceeded|ConnectTimeout|ProxyError|Failed to establish' "$1"
}

# ------------------------------------------------------------ 1. debs
# The index says, offline, each package's file name, size and sha256. apt
# takes over a second to read it (this machine keeps no pkgcache.bin), so the
# answer is kept in DIR/.apt-uris until the list, apt's lists or its
# configuration change.
uris_cache="$dir/.apt-uris"
index_key=$({
  printf '%s\n' "${debian_packages[@]}"
  find /var/lib/apt/lists /etc/apt /var/lib/dpkg/status -maxdepth 2 -printf '%p %s %T@\n' 2>/dev/null
} | sha256sum | cut -d' ' -f1)
uris=""
if [[ -f "$uris_cache" && "$(head -n 1 "$uris_cache")" == "# $index_key" ]]; then
  uris=$(tail -n +2 "$uris_cache")
else
  uris_log=$(mktemp)
  if ! uris=$(apt-get "${apt_opts[@]}" download --print-uris "${debian_packages[@]}" 2>"$uris_log"); then
    cat "$uris_log" >&2
    if grep -qiE 'unable to locate package|no installation candidate|can.t select' "$uris_log"; then
      rm -f -- "$uris_log"
      unreachable "apt's package lists do not have these packages: run 'apt-get update' (as root) and try again"
    fi
    rm -f -- "$uris_log"
    die "'apt-get download --print-uris' failed (output above)"
  fi
  rm -f -- "$uris_log"
  if ((!check_only)); then
    printf '# %s\n%s\n' "$index_key" "$uris" >"$uris_cache.tmp" && mv -f -- "$uris_cache.tmp" "$uris_cache"
  fi
fi

declare -A deb_sha=() deb_spec=()
while read -r _uri file _size hash; do
  [[ -n "$file" ]] || continue
  [[ "$hash" == SHA256:* ]] || die "apt gives no SHA256 for $file (got '$hash'): cannot verify it"
  deb_sha[$file]=${hash#SHA256:}
  # apt-get download names the file package_version_arch.deb (':' as %3a).
  name=${file%%_*}; rest=${file#*_}; version=${rest%_*}
  deb_spec[$file]="$name=${version//%3a/:}"
done <<<"$uris"
((${#deb_sha[@]} == ${#debian_packages[@]})) \
  || die "apt resolved ${#deb_sha[@]} files for ${#debian_packages[@]} packages: check the list in ${BASH_SOURCE[0]}"

# Hash what is there once; a file that does not match is fetched again.
declare -A have_sha=()
hash_files() {  # hash_files FILE... -> have_sha[path]=sha256
  (($# > 0)) || return 0
  local sha path
  while read -r sha path; do have_sha[$path]=$sha; done < <(sha256sum -- "$@")
}
shopt -s nullglob
existing=("$dir"/debs/* "$dir"/wheels/*)
hash_files "${existing[@]}"

fetch_debs=()
mapfile -t deb_files < <(printf '%s\n' "${!deb_sha[@]}" | LC_ALL=C sort)
for file in "${deb_files[@]}"; do
  path="$dir/debs/$file"
  if [[ "${have_sha[$path]:-}" != "${deb_sha[$file]}" ]]; then
    fetch_debs+=("$file")
    if [[ -n "${have_sha[$path]:-}" ]]; then
      stale "debs/$file: sha256 differs from the archive's"
    else
      stale "debs/$file: missing"
    fi
  fi
done

if ((${#fetch_debs[@]} > 0 && !check_only)); then
  staging
  specs=()
  for file in "${fetch_debs[@]}"; do specs+=("${deb_spec[$file]}"); done
  say "downloading ${#specs[@]} Debian package(s): ${specs[*]}"
  log="$partial/apt.log"
  if ! (cd "$partial" && apt-get "${apt_opts[@]}" download "${specs[@]}") >"$log" 2>&1; then
    cat "$log" >&2
    network_error "$log" && unreachable "apt-get download could not reach the Debian archive (output above): check the network, or run 'apt-get update' if the lists are stale"
    die "apt-get download failed (output above)"
  fi
  for file in "${fetch_debs[@]}"; do
    [[ -f "$partial/$file" ]] || die "apt-get download did not produce $file (output: $log)"
    sha=$(sha256sum -- "$partial/$file" | cut -d' ' -f1)
    [[ "$sha" == "${deb_sha[$file]}" ]] || die "$file: sha256 $sha, the archive's index says ${deb_sha[$file]}"
    mv -f -- "$partial/$file" "$dir/debs/$file"
    have_sha[$dir/debs/$file]=$sha
  done
fi

# ------------------------------------------------------------ 2. wheels
norm() { local n=${1,,}; n=${n//-/_}; echo "${n//./_}"; }  # a wheel file's name part

pins=$("$venv_py" -I -c '
import sys, importlib.metadata as m
for name in sys.argv[1:]:
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        print(name, "-")' "${python_packages[@]}")
pin_specs=()
while read -r name version; do
  [[ "$version" != - ]] || die "$name is not installed in .venv: run 'make deps' first"
  pin_specs+=("$name==$version")
done <<<"$pins"

declare -A wheel_ok=()  # file name -> 1 for the wheels to keep
fetch_wheels=()
for spec in "${pin_specs[@]}"; do
  name=${spec%%==*} version=${spec#*==} found=""
  for path in "$dir"/wheels/*.whl; do
    base=${path##*/}; rest=${base#*-}
    if [[ "$(norm "${base%%-*}")" == "$(norm "$name")" && "${rest%%-*}" == "$version" && "$base" == *-none-any.whl ]]; then
      found=$base
    fi
  done
  if [[ -n "$found" ]]; then
    wheel_ok[$found]=1
  else
    fetch_wheels+=("$spec")
    stale "wheels: no wheel of $spec"
  fi
done

if ((${#fetch_wheels[@]} > 0 && !check_only)); then
  staging
  say "downloading ${#fetch_wheels[@]} wheel(s) for Python $python_version: ${fetch_wheels[*]}"
  mkdir -p "$partial/wheels"
  log="$partial/pip.log"
  # No cache and no version check: pip writes nothing outside DIR.
  if ! "$venv_py" -m pip download --no-cache-dir --disable-pip-version-check --retries 1 --timeout 20 \
      --no-deps --only-binary=:all: --python-version "$python_version" --implementation py \
      --abi none --platform any --dest "$partial/wheels" "${fetch_wheels[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    network_error "$log" && unreachable "pip download could not reach PyPI (output above): check the network"
    die "pip download failed (output above)"
  fi
  for path in "$partial"/wheels/*; do
    base=${path##*/}
    [[ "$base" == *-none-any.whl ]] \
      || die "pip download gave $base, not a pure-Python (none-any) wheel: it cannot serve every machine"
    mv -f -- "$path" "$dir/wheels/$base"
    wheel_ok[$base]=1
    hash_files "$dir/wheels/$base"
  done
fi

# Every requirement of a wheel on Python 3.12 must be among the wheels.
wheel_files=()
for base in "${!wheel_ok[@]}"; do wheel_files+=("$dir/wheels/$base"); done
if ((${#wheel_files[@]} > 0)); then
  MACHINE_PACKAGES="${machine_packages[*]}" "$venv_py" -I - "$python_version" "${wheel_files[@]}" <<'EOF' || die "the wheel list in ${BASH_SOURCE[0]} is incomplete (see above)"
import email, os, sys, zipfile
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
pyver, wheels = sys.argv[1], sys.argv[2:]
env = {"python_version": pyver, "python_full_version": pyver + ".0",
       "implementation_name": "cpython", "platform_python_implementation": "CPython",
       "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
       "platform_machine": "x86_64", "extra": ""}
metas, ok = {}, True
for path in wheels:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist()
                    if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        metas[path] = email.message_from_bytes(z.read(name))
have = {canonicalize_name(m["Name"]): m["Version"] for m in metas.values()}
machine = {canonicalize_name(name) for name in os.environ["MACHINE_PACKAGES"].split()}
for path, meta in metas.items():
    rp = meta.get("Requires-Python")
    if rp and not SpecifierSet(rp).contains(pyver + ".0"):
        print(f"gpu-prepare: {path}: Requires-Python {rp} excludes {pyver}", file=sys.stderr)
        ok = False
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker and not req.marker.evaluate(env):
            continue
        if canonicalize_name(req.name) in machine:
            continue
        got = have.get(canonicalize_name(req.name))
        if got is None or (req.specifier and not req.specifier.contains(got, prereleases=True)):
            print(f"gpu-prepare: {meta['Name']} {meta['Version']} requires '{line}' on Python {pyver}; "
                  f"the wheels have {got or 'none'}: add it to python_packages", file=sys.stderr)
            ok = False
sys.exit(0 if ok else 1)
EOF
fi

# ------------------------------------------------------------ 3. remove the unlisted
for path in "$dir"/debs/* "$dir"/wheels/*; do
  base=${path##*/}
  case "$path" in
    "$dir"/debs/*) [[ -n "${deb_sha[$base]:-}" ]] && continue ;;
    *) [[ -n "${wheel_ok[$base]:-}" ]] && continue ;;
  esac
  rel=${path#"$dir"/}
  if ((check_only)); then
    stale "$rel: no longer listed"
  else
    rm -rf -- "$path"
    say "removed $rel (no longer listed)"
  fi
done

# ------------------------------------------------------------ 4. size, MANIFEST
listed=()
for file in "${!deb_sha[@]}"; do listed+=("debs/$file"); done
for base in "${!wheel_ok[@]}"; do listed+=("wheels/$base"); done
mapfile -t listed < <(printf '%s\n' "${listed[@]}" | LC_ALL=C sort)

total=0
body=""
for rel in "${listed[@]}"; do
  path="$dir/$rel"
  if [[ ! -f "$path" ]]; then
    ((check_only)) && continue  # already reported
    die "$rel is missing after the download"
  fi
  size=$(stat -c %s -- "$path")
  total=$((total + size))
  body+="${have_sha[$path]}  $size  $rel"$'\n'
done
if ((total > max_bytes)); then
  ((check_only)) || rm -f -- "$dir/MANIFEST"  # no manifest for a set that cannot travel
  die "the files take $total bytes, more than the $max_bytes allowed: shorten the lists in ${BASH_SOURCE[0]}"
fi

# The date line alone does not make MANIFEST change.
header_rest="# debian: $debian_release
# python: $python_version (pure wheels, py3-none-any)
# total: $total bytes in ${#listed[@]} files
# sha256  size  path"
manifest_without_date() { grep -v '^# date: ' "$1" 2>/dev/null || true; }
new_manifest="# Resurgo's build dependencies for an offline GPU machine: made by
# scripts/gpu_prepare.sh, verified and unpacked by scripts/gpu_prefix.sh.
# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)
$header_rest
$body"
if [[ "$(manifest_without_date "$dir/MANIFEST")" != "$(grep -v '^# date: ' <<<"$new_manifest")" ]]; then
  if ((check_only)); then
    stale "MANIFEST: out of date or missing"
  else
    printf '%s' "$new_manifest" >"$dir/MANIFEST.tmp"
    mv -f -- "$dir/MANIFEST.tmp" "$dir/MANIFEST"
    say "wrote MANIFEST"
  fi
fi

if ((check_only)); then
  if ((${#problems[@]} > 0)); then
    say "$dir is not up to date (run 'make gpu-prepare'):"
    printf '  %s\n' "${problems[@]}" >&2
    exit 1
  fi
  say "ok: $dir is complete ($total bytes, ${#listed[@]} files)"
else
  say "ok: $dir has ${#deb_sha[@]} Debian packages and ${#wheel_ok[@]} wheels, $total bytes"
fi
