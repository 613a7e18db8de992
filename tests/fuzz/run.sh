#!/usr/bin/env bash
# Builds the libFuzzer targets into build/fuzz and runs them.
#
#   tests/fuzz/run.sh quick   15 s per target on a temporary copy of the seed
#                             corpus (nothing is written into the repository)
#   tests/fuzz/run.sh soak    15 min per target; the corpus grows in
#                             build/fuzz/corpus/<target> (seeds read from
#                             tests/fuzz/corpus/<target>)
#
# Environment: FUZZ_SECONDS (time per target), FUZZ_CXX (clang++ to use),
# FUZZ_BUILD_DIR (default build/fuzz), FUZZ_JOBS (build jobs, default 2),
# FUZZ_ARGS (extra libFuzzer flags).
# Every file under tests/fuzz/regressions/ (found crashes) is first run once
# through each target. Exits non-zero on any crash, leak, timeout or
# out-of-memory and prints the path of the input that caused it.
set -euo pipefail

mode=${1:-quick}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build/fuzz}
jobs=${FUZZ_JOBS:-2}
targets=(container config global)
# Input caps: a config of 1 MiB reaches nesting toml++ cannot take (a table
# header of 50,000 levels is 100 KB; core/toml_depth.h refuses it first).
declare -A max_len=([container]=65536 [config]=1048576 [global]=65536)

case "$mode" in
  quick) seconds=${FUZZ_SECONDS:-15} ;;
  soak) seconds=${FUZZ_SECONDS:-900} ;;
  *) echo "usage: $0 quick|soak" >&2; exit 2 ;;
esac

cxx=${FUZZ_CXX:-}
if [[ -z "$cxx" ]]; then
  cxx=$(command -v clang++-14 || command -v clang++ || true)
fi
if [[ -z "$cxx" ]]; then
  echo "fuzz: no clang++ found (set FUZZ_CXX)" >&2
  exit 2
fi

# Configure once; later runs only rebuild what changed.
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$here" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
fi
cmake --build "$build" -j"$jobs" --target container_fuzzer config_fuzzer global_fuzzer

stamp=$(date +%Y%m%d-%H%M%S)-$$
artifacts="$build/artifacts/$stamp"
logs="$build/logs"
mkdir -p "$artifacts" "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/resurgo-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# libFuzzer's exit code is non-zero for a crash, leak, timeout or OOM; the
# input is saved under -artifact_prefix.
failed=0
report() {  # target, exit code
  echo "fuzz: $1 FAILED (exit $2); inputs that fail:" >&2
  find "$artifacts" -type f -name "*" -print | sed 's/^/  /' >&2
  echo "  log: $logs/$1.log" >&2
  failed=1
}

# Regression inputs (found crashes), each run once through every target.
regressions=()
if [[ -d "$here/regressions" ]]; then
  while IFS= read -r -d '' f; do regressions+=("$f"); done < <(find "$here/regressions" -type f -print0 | sort -z)
fi

for target in "${targets[@]}"; do
  bin="$build/${target}_fuzzer"
  if (( ${#regressions[@]} > 0 )); then
    status=0
    "$bin" -runs=0 -artifact_prefix="$artifacts/$target-regression-" "${regressions[@]}" \
      >"$logs/$target-regressions.log" 2>&1 || status=$?
    if (( status != 0 )); then
      tail -n 40 "$logs/$target-regressions.log" >&2
      echo "fuzz: $target fails on a regression input; log: $logs/$target-regressions.log" >&2
      failed=1
      continue
    fi
    echo "fuzz: $target: ${#regressions[@]} regression inputs pass"
  fi

  if [[ "$mode" == quick ]]; then
    corpus=("$work/$target")
    cp -r "$here/corpus/$target" "$work/$target"
  else
    mkdir -p "$build/corpus/$target"
    corpus=("$build/corpus/$target" "$here/corpus/$target")  # new entries go to the first
  fi

  status=0
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$seconds" -max_len="${max_len[$target]}" -timeout=25 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$target-" ${FUZZ_ARGS:-} "${corpus[@]}" \
    >"$logs/$target.log" 2>&1 || status=$?
  grep -E '^#[0-9]+\s+DONE|^Done [0-9]+ runs|^stat::number_of_executed_units|^stat::peak_rss_mb' \
    "$logs/$target.log" | sed "s/^/fuzz: $target: /" || true
  if (( status != 0 )); then
    grep -E 'ERROR: |SUMMARY: |container_fuzzer: |config_fuzzer: |global_fuzzer: |Test unit written to' "$logs/$target.log" >&2 || true
    report "$target" "$status"
  fi
done

rmdir "$artifacts" 2>/dev/null || true
if (( failed )); then
  exit 1
fi
echo "fuzz: $mode run passed (${seconds}s per target)"
