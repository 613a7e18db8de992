# shellcheck shell=bash
# Resurgo's build dependencies on the GPU machine, from what
# scripts/gpu_prepare.sh fetched (no network, no package manager there).
# Source this file; it defines one function (and its helpers, _gpu_prefix_*)
# and changes nothing else:
#
#   gpu_prefix_unpack GPU_DIR PREFIX
#
# GPU_DIR is the folder gpu_prepare.sh filled (debs/, wheels/, MANIFEST);
# PREFIX a folder to unpack into: absent, empty, or made by an earlier
# gpu_prefix_unpack (then it is removed and made again). Nothing is written
# outside PREFIX. Steps, each printed on stderr as one line per action:
#   1. verify every file of MANIFEST (size, sha256), and that debs/ and
#      wheels/ hold nothing else;
#   2. unpack each .deb into PREFIX with `dpkg -x`, or, without dpkg, with
#      `ar x` + `tar` of its data.tar.*; PREFIX/lib is merged into PREFIX/usr/lib
#      as on a merged-/usr system;
#   3. point the pkg-config files (.pc) at PREFIX/usr instead of /usr;
#   4. replace each shared library whose soname the system already has
#      (`ldconfig -p`) by a link to the system's, so that the system's (newer)
#      copy is the one used, never shadowed; the development links
#      (libzstd.so) stay valid; a library the system lacks, or has only in an
#      older version, stays in PREFIX;
#   5. install each wheel whose package ${PYTHON:-python3} cannot import into
#      PREFIX/python (pip install --no-index --no-deps --target; without pip,
#      unzipped: they are pure Python).
#
# Exported for the caller (existing values are kept, after PREFIX's):
#   CMAKE_PREFIX_PATH      PREFIX/usr first
#   PKG_CONFIG_PATH        PREFIX's pkgconfig folders first
#   GPU_PREFIX_LIBDIR      PREFIX/usr/lib/x86_64-linux-gnu: add it to the
#                          LD_LIBRARY_PATH of the programs you run (the
#                          libraries the system lacks, libtomlplusplus.so.3
#                          among them on Ubuntu, are only there)
#   PKG_CONFIG_EXECUTABLE  only when the system has no pkg-config: PREFIX's
#   PKG_CONFIG               (PREFIX/bin/pkg-config, which sets LD_LIBRARY_PATH
#                          for pkgconf itself). CMake reads $PKG_CONFIG; pass
#                          -DPKG_CONFIG_EXECUTABLE=... to be explicit
#   PYTHONPATH             PREFIX/python first, only when a wheel was installed
#
# Environment read:
#   PYTHON=python3             the interpreter of the build (step 5)
#   GPU_PREFIX_NO_DPKG=1       unpack with ar + tar even when dpkg exists
#   GPU_PREFIX_IGNORE_SYSTEM=1 act as on a bare machine: link no library to the
#                              system's, use PREFIX's pkg-config, install every
#                              wheel (tests/gpu/prefix_test.sh uses both)
#
# Returns non-zero, after a message naming the step and the file, on failure.
# It does not change the caller's shell options; it works under set -euo pipefail.

_gpu_prefix_say() { printf 'gpu_prefix: %s\n' "$*" >&2; }
_gpu_prefix_fail() { printf 'gpu_prefix: error: %s\n' "$*" >&2; return 1; }

# _gpu_prefix_prepend VAR DIR: DIR first in the :-list VAR, once.
_gpu_prefix_prepend() {
  local var=$1 value=$2 old=${!1:-} rest=""
  local IFS=: part
  for part in $old; do
    [[ -z "$part" || "$part" == "$value" ]] || rest+=${rest:+:}$part
  done
  export "$var=$value${rest:+:$rest}"
}

# _gpu_prefix_verify GPU_DIR: MANIFEST's files, exactly, with their hashes.
_gpu_prefix_verify() {
  local gpu_dir=$1 manifest=$1/MANIFEST
  [[ -f "$manifest" ]] || { _gpu_prefix_fail "verify: $manifest not found: run 'make gpu-prepare' on the development machine and copy its .gpu"; return 1; }
  local -A want_sha=() want_size=()
  local sha size rel extra
  while read -r sha size rel extra; do
    [[ -z "$sha" || "$sha" == \#* ]] && continue
    if [[ -n "$extra" || ! "$sha" =~ ^[0-9a-f]{64}$ || ! "$size" =~ ^[0-9]+$ || ! "$rel" =~ ^(debs|wheels)/[^/]+$ || "$rel" == *..* ]]; then
      _gpu_prefix_fail "verify: $manifest: malformed line '$sha $size $rel${extra:+ $extra}'"
      return 1
    fi
    want_sha[$rel]=$sha
    want_size[$rel]=$size
  done <"$manifest"
  ((${#want_sha[@]} > 0)) || { _gpu_prefix_fail "verify: $manifest lists no file"; return 1; }

  local path
  for path in "$gpu_dir"/debs/* "$gpu_dir"/wheels/*; do
    [[ -e "$path" || -L "$path" ]] || continue  # an unmatched glob
    rel=${path#"$gpu_dir"/}
    [[ -n "${want_sha[$rel]:-}" ]] \
      || { _gpu_prefix_fail "verify: $path is not in MANIFEST: run 'make gpu-prepare' again and copy the whole folder"; return 1; }
  done
  local -a files=()
  for rel in "${!want_sha[@]}"; do
    path=$gpu_dir/$rel
    [[ -f "$path" ]] || { _gpu_prefix_fail "verify: $path (in MANIFEST) is missing: copy the whole folder again"; return 1; }
    size=$(stat -c %s -- "$path") || { _gpu_prefix_fail "verify: cannot stat $path"; return 1; }
    [[ "$size" == "${want_size[$rel]}" ]] \
      || { _gpu_prefix_fail "verify: $path has $size bytes, MANIFEST says ${want_size[$rel]}: copy it again"; return 1; }
    files+=("$path")
  done
  local sums
  sums=$(sha256sum -- "${files[@]}") || { _gpu_prefix_fail "verify: sha256sum failed on $gpu_dir"; return 1; }
  while read -r sha path; do
    rel=${path#"$gpu_dir"/}
    [[ "$sha" == "${want_sha[$rel]}" ]] \
      || { _gpu_prefix_fail "verify: $path: sha256 $sha, MANIFEST says ${want_sha[$rel]}: copy it again"; return 1; }
  done <<<"$sums"
  _gpu_prefix_say "verified ${#files[@]} files against $manifest"
}

# _gpu_prefix_unpack_deb DEB PREFIX MODE: MODE dpkg or ar.
_gpu_prefix_unpack_deb() {
  local deb=$1 prefix=$2 mode=$3
  if [[ "$mode" == dpkg ]]; then
    dpkg -x "$deb" "$prefix" || { _gpu_prefix_fail "unpack: dpkg -x $deb failed"; return 1; }
    _gpu_prefix_say "unpacked ${deb##*/} (dpkg -x)"
    return 0
  fi
  # A .deb is an ar archive of debian-binary, control.tar.* and data.tar.*;
  # the files are in data.tar.*. Its members are taken apart inside PREFIX.
  local work data flag tool
  work=$(mktemp -d "$prefix/.ar.XXXXXX") || { _gpu_prefix_fail "unpack: cannot make a folder in $prefix"; return 1; }
  if ! (cd "$work" && ar x "$deb"); then
    rm -rf -- "$work"
    _gpu_prefix_fail "unpack: ar x $deb failed"
    return 1
  fi
  data=$(compgen -G "$work/data.tar*" | head -n 1 || true)
  case "$data" in
    *.tar.xz) flag=-J tool=xz ;;
    *.tar.zst) flag=--zstd tool=zstd ;;
    *.tar.gz) flag=-z tool=gzip ;;
    *.tar.bz2) flag=-j tool=bzip2 ;;
    *.tar) flag="" tool=tar ;;
    *) rm -rf -- "$work"; _gpu_prefix_fail "unpack: $deb has no data.tar.* member"; return 1 ;;
  esac
  if ! command -v "$tool" >/dev/null 2>&1; then
    rm -rf -- "$work"
    _gpu_prefix_fail "unpack: ${data##*/} of $deb needs '$tool', which is not on PATH"
    return 1
  fi
  # GNU tar strips leading '/' and refuses '..': nothing lands outside PREFIX.
  if ! tar -x ${flag:+"$flag"} --no-same-owner -f "$data" -C "$prefix"; then
    rm -rf -- "$work"
    _gpu_prefix_fail "unpack: tar of ${data##*/} from $deb failed"
    return 1
  fi
  rm -rf -- "$work"
  _gpu_prefix_say "unpacked ${deb##*/} (ar + tar)"
}

# _gpu_prefix_soname FILE: the library's DT_SONAME.
_gpu_prefix_soname() {
  local file=$1 name
  if command -v readelf >/dev/null 2>&1; then
    name=$(readelf -d -- "$file" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
  elif command -v objdump >/dev/null 2>&1; then
    name=$(objdump -p -- "$file" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
  fi
  if [[ -z "${name:-}" ]]; then
    # No binutils: Debian names the file libX.so.MAJOR.minor..., and its
    # soname is libX.so.MAJOR.
    name=${file##*/}
    [[ "$name" =~ ^(.*\.so\.[0-9]+) ]] && name=${BASH_REMATCH[1]}
  fi
  printf '%s\n' "$name"
}

# _gpu_prefix_link_system LIBDIR IGNORE: step 4.
_gpu_prefix_link_system() {
  local libdir=$1 ignore=$2
  local -A system=()
  local ldconfig="" name rest path
  if [[ "$ignore" != 1 ]]; then
    ldconfig=$(command -v ldconfig 2>/dev/null || true)
    for path in /sbin/ldconfig /usr/sbin/ldconfig; do
      if [[ -z "$ldconfig" && -x "$path" ]]; then ldconfig=$path; fi
    done
    if [[ -z "$ldconfig" ]]; then
      _gpu_prefix_say "no ldconfig: every library stays in the prefix"
    else
      # "\tlibzstd.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libzstd.so.1";
      # the first entry of a name is the one the loader takes.
      while read -r name rest; do
        [[ "$rest" == *x86-64* && "$rest" == *"=> "* ]] || continue
        if [[ -z "${system[$name]:-}" ]]; then system[$name]=${rest##*=> }; fi
      done < <("$ldconfig" -p 2>/dev/null)
    fi
  fi

  local file base soname sys real ours theirs
  for file in "$libdir"/lib*.so*; do
    [[ -f "$file" && ! -L "$file" ]] || continue
    base=${file##*/}
    soname=$(_gpu_prefix_soname "$file")
    sys=${system[$soname]:-}
    if [[ "$ignore" == 1 ]]; then
      _gpu_prefix_say "kept $base in the prefix (GPU_PREFIX_IGNORE_SYSTEM=1)"
      continue
    fi
    if [[ -z "$sys" || ! -e "$sys" ]]; then
      _gpu_prefix_say "kept $base in the prefix (the system has no $soname)"
      continue
    fi
    real=$(readlink -f -- "$sys")
    # Versions from the file names (libzstd.so.1.5.4): an older system copy
    # would lack the symbols our headers declare, so ours is kept then.
    ours=${base#*.so.} theirs=${real##*/}
    theirs=${theirs#*.so.}
    if [[ "$theirs" =~ ^[0-9.]+$ && "$ours" =~ ^[0-9.]+$ && "$theirs" != "$ours" &&
          "$(printf '%s\n%s\n' "$ours" "$theirs" | sort -V | head -n 1)" == "$theirs" ]]; then
      _gpu_prefix_say "kept $base in the prefix (the system's $soname is older: $real)"
      continue
    fi
    ln -sfn -- "$sys" "$file" || { _gpu_prefix_fail "link: cannot replace $file by a link to $sys"; return 1; }
    _gpu_prefix_say "linked $base to the system's $sys ($real)"
  done
  # Every link in libdir must still lead somewhere (libzstd.so -> ... -> system).
  for file in "$libdir"/*; do
    if [[ -L "$file" && ! -e "$file" ]]; then
      _gpu_prefix_fail "link: $file is a dangling link after step 4"
      return 1
    fi
  done
}

# _gpu_prefix_python GPU_DIR PREFIX IGNORE: step 5.
_gpu_prefix_python() {
  local gpu_dir=$1 prefix=$2 ignore=$3 python=${PYTHON:-python3}
  local -a wheels=()
  local path
  for path in "$gpu_dir"/wheels/*.whl; do
    if [[ -f "$path" ]]; then wheels+=("$path"); fi
  done
  ((${#wheels[@]} > 0)) || { _gpu_prefix_say "no wheels in $gpu_dir/wheels"; return 0; }
  command -v "$python" >/dev/null 2>&1 \
    || { _gpu_prefix_fail "python: '$python' not found: set PYTHON to the build's interpreter"; return 1; }
  # The interpreter itself, not a launcher (a pyenv shim would rehash its
  # shims, outside PREFIX, after a pip install).
  local real_python
  real_python=$("$python" -c 'import sys; print(sys.executable)' 2>/dev/null) || real_python=""
  [[ -z "$real_python" || ! -x "$real_python" ]] || python=$real_python

  # Per wheel: its import name (the distribution's, normalized), whether the
  # interpreter finds it and at which version.
  local report
  report=$("$python" - "${wheels[@]}" <<'EOF'
import importlib.metadata as md, importlib.util, os, re, sys
for path in sys.argv[1:]:
    dist, version = os.path.basename(path).split("-")[:2]
    module = re.sub(r"[-_.]+", "_", dist).lower()
    try:
        found = importlib.util.find_spec(module) is not None
    except Exception:
        found = False
    try:
        have = md.version(dist)
    except Exception:
        have = "-"
    print(path, module, version, "yes" if found else "no", have)
EOF
) || { _gpu_prefix_fail "python: '$python' could not inspect the wheels"; return 1; }

  local -a install=() modules=()
  local module version found have
  while read -r path module version found have; do
    if [[ "$ignore" != 1 && "$found" == yes ]]; then
      if [[ "$have" == "$version" ]]; then
        _gpu_prefix_say "python: $module $have is importable: ${path##*/} not installed"
      else
        _gpu_prefix_say "python: $module ${have/#-/(unknown version)} is importable: ${path##*/} not installed (note: .venv tested $version)"
      fi
    else
      install+=("$path")
      modules+=("$module")
    fi
  done <<<"$report"
  ((${#install[@]} > 0)) || return 0

  local target=$prefix/python
  mkdir -p -- "$target" || { _gpu_prefix_fail "python: cannot make $target"; return 1; }
  if "$python" -m pip --version >/dev/null 2>&1; then
    # --target: no EXTERNALLY-MANAGED refusal, nothing written elsewhere.
    if ! PIP_REQUIRE_VIRTUALENV=0 PIP_ROOT_USER_ACTION=ignore "$python" -m pip install -q --no-index --no-deps --no-cache-dir \
        --disable-pip-version-check --target "$target" "${install[@]}" >&2; then
      _gpu_prefix_fail "python: pip install --target $target of ${install[*]##*/} failed"
      return 1
    fi
    for path in "${install[@]}"; do _gpu_prefix_say "installed ${path##*/} into $target (pip)"; done
  else
    # A pure wheel is a zip of what goes into site-packages.
    for path in "${install[@]}"; do
      "$python" -m zipfile -e "$path" "$target" \
        || { _gpu_prefix_fail "python: unzipping $path into $target failed"; return 1; }
      _gpu_prefix_say "installed ${path##*/} into $target (unzipped: '$python' has no pip)"
    done
  fi
  _gpu_prefix_prepend PYTHONPATH "$target"
  # Found, not imported: a wheel may need what only the GPU machine's Python
  # has (checkpoint_schedules imports NumPy; gpu_prepare.sh, machine_packages).
  if ! "$python" -c 'import importlib.util, sys
sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))' "${modules[@]}"; then
    _gpu_prefix_fail "python: ${modules[*]} still not importable with PYTHONPATH=$PYTHONPATH"
    return 1
  fi
}

gpu_prefix_unpack() {
  if (($# != 2)); then
    _gpu_prefix_fail "usage: gpu_prefix_unpack GPU_DIR PREFIX"
    return 1
  fi
  local gpu_dir=$1 prefix=$2 ignore=${GPU_PREFIX_IGNORE_SYSTEM:-0}
  [[ -d "$gpu_dir" ]] || { _gpu_prefix_fail "args: GPU_DIR $gpu_dir is not a folder"; return 1; }
  gpu_dir=$(cd "$gpu_dir" && pwd) || { _gpu_prefix_fail "args: cannot enter $gpu_dir"; return 1; }
  [[ "$prefix" == /* ]] || prefix=$PWD/$prefix
  prefix=$(realpath -m -- "$prefix") || { _gpu_prefix_fail "args: cannot resolve PREFIX $2"; return 1; }
  # The prefix ends up in CMake lists, :-lists and a shell wrapper.
  [[ "$prefix" =~ ^/[A-Za-z0-9._/+@-]+$ && "$prefix" != / ]] \
    || { _gpu_prefix_fail "args: PREFIX '$prefix' must be a folder other than /, its path made of letters, digits and ._/+@-"; return 1; }

  # ---- 1. verify
  _gpu_prefix_verify "$gpu_dir" || return 1

  # ---- the prefix: fresh, never a folder someone else owns
  if [[ -e "$prefix" ]]; then
    if [[ -f "$prefix/.gpu-prefix" ]]; then
      rm -rf -- "$prefix" || { _gpu_prefix_fail "prefix: cannot remove the earlier $prefix"; return 1; }
      _gpu_prefix_say "removed the earlier unpack in $prefix"
    elif [[ -d "$prefix" && -z "$(ls -A -- "$prefix")" ]]; then
      :
    else
      _gpu_prefix_fail "prefix: $prefix exists and was not made by gpu_prefix_unpack: give an absent or empty folder"
      return 1
    fi
  fi
  mkdir -p -- "$prefix" || { _gpu_prefix_fail "prefix: cannot make $prefix"; return 1; }
  printf 'made by gpu_prefix_unpack from %s\n' "$gpu_dir" >"$prefix/.gpu-prefix" \
    || { _gpu_prefix_fail "prefix: cannot write in $prefix"; return 1; }

  # ---- 2. unpack
  local mode=dpkg
  if [[ "${GPU_PREFIX_NO_DPKG:-0}" == 1 ]] || ! command -v dpkg >/dev/null 2>&1; then
    mode="ar"
    if ! command -v ar >/dev/null 2>&1 || ! command -v tar >/dev/null 2>&1; then
      _gpu_prefix_fail "unpack: no dpkg, and no ar (binutils) + tar to unpack the .deb files"
      return 1
    fi
  fi
  local deb
  for deb in "$gpu_dir"/debs/*.deb; do
    [[ -f "$deb" ]] || continue
    _gpu_prefix_unpack_deb "$deb" "$prefix" "$mode" || return 1
  done
  # Debian 12's zlib1g still installs into /lib: merge it into usr/lib, as a
  # merged-/usr system has it, so that one folder holds every library.
  local file rel
  if [[ -d "$prefix/lib" && ! -L "$prefix/lib" ]]; then
    while IFS= read -r -d '' file; do
      rel=${file#"$prefix/lib/"}
      if ! mkdir -p -- "$prefix/usr/lib/$(dirname -- "$rel")" || ! mv -f -- "$file" "$prefix/usr/lib/$rel"; then
        _gpu_prefix_fail "unpack: cannot move $file into $prefix/usr/lib"
        return 1
      fi
    done < <(find "$prefix/lib" ! -type d -print0)
    if ! rm -rf -- "${prefix:?}/lib" || ! ln -s usr/lib "$prefix/lib"; then
      _gpu_prefix_fail "unpack: cannot merge $prefix/lib into $prefix/usr/lib"
      return 1
    fi
    _gpu_prefix_say "merged lib/ into usr/lib/ (merged /usr)"
  fi

  local libdir
  libdir=$(compgen -G "$prefix/usr/lib/*-linux-gnu" | head -n 1 || true)
  [[ -n "$libdir" ]] || { _gpu_prefix_fail "unpack: no $prefix/usr/lib/<multiarch> folder after unpacking"; return 1; }

  # ---- 3. pkg-config files: prefix=/usr, libdir=/usr/..., -I/usr/..., -L/usr/...
  local -a pcs=()
  while IFS= read -r -d '' file; do pcs+=("$file"); done \
    < <(find "$prefix" -type f -name '*.pc' -path '*/pkgconfig/*' -print0)
  if ((${#pcs[@]} > 0)); then
    sed -i -E \
      -e "s#^([A-Za-z0-9_.]+[[:space:]]*=[[:space:]]*)/usr(/|[[:space:]]|\$)#\\1$prefix/usr\\2#" \
      -e "s#(^|[[:space:]])-([IL])/usr(/|[[:space:]]|\$)#\\1-\\2$prefix/usr\\3#g" \
      -- "${pcs[@]}" || { _gpu_prefix_fail "pkg-config: rewriting ${pcs[*]} failed"; return 1; }
    for file in "${pcs[@]}"; do
      # (A PREFIX under /usr itself is no /usr left behind.)
      if grep -E '(^[A-Za-z0-9_.]+[[:space:]]*=[[:space:]]*|-[IL])/usr(/|[[:space:]]|$)' "$file" | grep -qvF "$prefix/usr"; then
        _gpu_prefix_fail "pkg-config: $file still names /usr after the rewrite"
        return 1
      fi
    done
    _gpu_prefix_say "pointed ${#pcs[@]} pkg-config files at $prefix/usr"
  fi

  # ---- 4. libraries the system has
  _gpu_prefix_link_system "$libdir" "$ignore" || return 1

  # ---- pkg-config. CMake looks for programs in CMAKE_PREFIX_PATH's bin/
  # before the system's: pkgconf's programs leave PREFIX/usr/bin, so that CMake
  # takes the system's pkg-config when there is one, and never a pkgconf that
  # cannot load its library. PREFIX/bin/pkg-config runs it with that library.
  local pkgconf_dir=$prefix/libexec/pkgconf wrapper=$prefix/bin/pkg-config
  [[ -x "$prefix/usr/bin/pkgconf" ]] \
    || { _gpu_prefix_fail "pkg-config: $prefix/usr/bin/pkgconf is missing (is pkgconf-bin in $gpu_dir/MANIFEST?)"; return 1; }
  mkdir -p -- "$pkgconf_dir" || { _gpu_prefix_fail "pkg-config: cannot make $pkgconf_dir"; return 1; }
  for file in "$prefix"/usr/bin/*pkgconf* "$prefix"/usr/bin/*pkg-config*; do
    if [[ -e "$file" || -L "$file" ]] && ! mv -f -- "$file" "$pkgconf_dir/"; then
      _gpu_prefix_fail "pkg-config: cannot move $file into $pkgconf_dir"
      return 1
    fi
  done
  rmdir -- "$prefix/usr/bin" 2>/dev/null || true  # when nothing else is there
  if ! mkdir -p -- "$prefix/bin" || ! printf '%s\n' '#!/bin/sh' \
      '# pkg-config of the GPU prefix (scripts/gpu_prefix.sh): pkgconf with its' \
      '# libpkgconf, which the system may lack.' \
      "LD_LIBRARY_PATH='$libdir'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec '$pkgconf_dir/pkgconf' \"\$@\"" \
      >"$wrapper" || ! chmod +x "$wrapper"; then
    _gpu_prefix_fail "pkg-config: cannot write $wrapper"
    return 1
  fi
  local system_pc="" pc_version
  [[ "$ignore" == 1 ]] || system_pc=$(command -v pkg-config 2>/dev/null || true)
  if [[ -n "$system_pc" ]]; then
    _gpu_prefix_say "pkg-config: the system's $system_pc"
  else
    pc_version=$("$wrapper" --version 2>&1) \
      || { _gpu_prefix_fail "pkg-config: $wrapper does not run: $pc_version"; return 1; }
    export PKG_CONFIG_EXECUTABLE=$wrapper PKG_CONFIG=$wrapper
    _gpu_prefix_say "pkg-config: the prefix's pkgconf $pc_version ($wrapper)"
  fi

  # ---- 5. Python wheels
  _gpu_prefix_python "$gpu_dir" "$prefix" "$ignore" || return 1

  # ---- exports
  _gpu_prefix_prepend CMAKE_PREFIX_PATH "$prefix/usr"
  local pcdir
  for pcdir in "$prefix/usr/share/pkgconfig" "$prefix/usr/lib/pkgconfig" "$libdir/pkgconfig"; do
    if [[ -d "$pcdir" ]]; then _gpu_prefix_prepend PKG_CONFIG_PATH "$pcdir"; fi
  done
  export GPU_PREFIX_LIBDIR=$libdir
  _gpu_prefix_say "ready: CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH PKG_CONFIG_PATH=$PKG_CONFIG_PATH GPU_PREFIX_LIBDIR=$GPU_PREFIX_LIBDIR${PKG_CONFIG_EXECUTABLE:+ PKG_CONFIG_EXECUTABLE=$PKG_CONFIG_EXECUTABLE}"
}
