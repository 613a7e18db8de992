#!/usr/bin/env bash
# The GPU check (docs/gpu.md, "Running the GPU checks"): on a bare GPU
# machine, from the repository root with the folder `make gpu-prepare` filled
# (.gpu/) beside it, builds what the GPU checks need and runs them, each step
# with its own time limit and log:
#
#   environment  nvidia-smi -q, the driver's and the toolkit's versions
#   prefix       the build dependencies unpacked from .gpu/ (scripts/gpu_prefix.sh)
#   build        the library, the GPU tests, the driver probe, the fake driver
#                and the GPU benchmarks, with all cores
#   probe        a minute's check of the driver rules the code relies on
#   gtest        every GPU GoogleTest against the driver
#   python       the Python extension for this machine's python3
#   pytest       the Python tests marked gpu (CuPy, PyTorch, the fake driver)
#   crum         bench/crum.py --quick: a unified-memory application compiled
#                with nvcc and checkpointed (with --fake-driver: its host
#                analog, compiled with the host compiler, on the fake)
#   cache        bench/gpu_cache.py --quick, a shorter trace on a GPU
#   l1_pin       bench/l1_pinned_restore.py: restores out of the memory
#                level's pieces, pageable, pinned piece by piece, pinned whole
#                (its table goes into summary.md only: OUTDIR holds 8 files)
#   late_pin     bench/gpu_late_pin.py --quick
#
# and writes at most 8 files into OUTDIR (the device tool returns no more):
# summary.md (a table of the steps, the probe's table, the benchmarks'
# figures, the machine), build.log, tests.log (probe, gtest, pytest),
# bench.log, the three benchmarks' reports (gpu_cache.md, gpu_late_pin.md,
# crum.md, in bench/results' format) and plots.tar (their PNG plots). The
# summary and the files are rewritten after every step, so that a run cut
# off at its time limit still leaves what it did. Exits 1 when a step
# failed, naming it; 2 for a usage error.
#
#   scripts/gpu_check.sh OUTDIR                on a GPU machine
#   scripts/gpu_check.sh --fake-driver OUTDIR  the same steps against the fake
#                                              CUDA driver (tests/cpp/fake_cuda), on a
#                                              machine without a GPU: proves the script;
#                                              its timings mean nothing
#
# Environment: PYTHON (default python3; .venv/bin/python with --fake-driver
# where it exists), GPU_DIR (default .gpu), GPU_CHECK_WORK (default
# build/gpu-check), GPU_CHECK_BUILD (the build tree; default
# $GPU_CHECK_WORK/build), JOBS (default: the number of cores), GPU_CHECK_SECONDS
# (default: none): the whole run's time, within which every step's limit is
# cut to what is left (20 s kept for the summary); a step with under 30 s
# left is not run, and the summary says so.
set -uo pipefail

usage() {
  echo "usage: scripts/gpu_check.sh [--fake-driver] OUTDIR" >&2
  exit 2
}

fake=0
out=""
step=""  # internal: one step (the script runs itself once per step, under `timeout`)
while (($#)); do
  case "$1" in
    --fake-driver) fake=1 ;;
    --step) step=${2:-}; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    -*) usage ;;
    *) [[ -z "$out" ]] || usage; out=$1 ;;
  esac
  shift
done
[[ -n "$out" ]] || usage

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
work=$(realpath -m "${GPU_CHECK_WORK:-build/gpu-check}")
gpu_dir=$(realpath -m "${GPU_DIR:-.gpu}")
build=$(realpath -m "${GPU_CHECK_BUILD:-$work/build}")
logs=$work/logs
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
if [[ -n "${PYTHON:-}" ]]; then
  python=$PYTHON
elif ((fake)) && [[ -x .venv/bin/python ]]; then
  python=$root/.venv/bin/python
else
  python=python3
fi
fake_lib=$build/tests/cpp/fake_cuda

# ------------------------------------------------------------------ steps

step_environment() {
  echo "mode: $( ((fake)) && echo fake driver || echo GPU)"
  uname -a
  echo "cores: $(nproc)"
  command -v nvidia-smi >/dev/null && nvidia-smi -q || echo "nvidia-smi: not found"
  command -v nvcc >/dev/null && nvcc --version || echo "nvcc: not found"
  cmake --version | head -1
  "${CXX:-c++}" --version | head -1
  "$python" --version
}

step_prefix() {
  # shellcheck source=scripts/gpu_prefix.sh
  source "$root/scripts/gpu_prefix.sh"
  [[ -d "$gpu_dir" ]] || { echo "no $gpu_dir: run 'make gpu-prepare' on a machine with apt and copy it here"; return 1; }
  rm -rf "$work/prefix"
  gpu_prefix_unpack "$gpu_dir" "$work/prefix" || return 1
  # `export` lines, not `declare -p`: the file is sourced inside functions,
  # where `declare` would make each variable local to the function (the
  # build then ran without the prefix, found only on a fresh build tree).
  local variable
  for variable in CMAKE_PREFIX_PATH PKG_CONFIG_PATH GPU_PREFIX_LIBDIR PKG_CONFIG_EXECUTABLE PYTHONPATH LD_LIBRARY_PATH; do
    [[ -z "${!variable:-}" ]] || printf 'export %s=%q\n' "$variable" "${!variable}"
  done >"$work/prefix.env"
  return 0
}

# The environment of the build: the prefix's packages, the CUDA toolkit.
build_environment() {
  source "$work/prefix.env"
  export CMAKE_PREFIX_PATH PKG_CONFIG_PATH
  [[ -n "${PYTHONPATH:-}" ]] && export PYTHONPATH
  [[ -n "${LD_LIBRARY_PATH:-}" ]] && export LD_LIBRARY_PATH
  if [[ -z "${CUDA_HOME:-}" ]] && command -v nvcc >/dev/null; then
    CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    export CUDA_HOME
  fi
  return 0
}

# Warnings are not errors on a GPU machine (a newer compiler there may warn
# where CI's does not); against the fake driver, on CI's compiler, they are,
# as in build/cpp. (ccache cannot share build/cpp's objects here: the
# dependencies' include folders lie in the prefix, and MPI is left out.)
step_build() {
  build_environment
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  local pkg_config=()
  [[ -n "${PKG_CONFIG_EXECUTABLE:-}" ]] && pkg_config=(-DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG_EXECUTABLE")
  # A build tree configured against other dependencies is started afresh.
  if [[ -f "$build/CMakeCache.txt" ]] && ! grep -q "^RESURGO_GPU_CHECK_PREFIX:STRING=$work/prefix$" "$build/CMakeCache.txt"; then
    rm -rf "$build"
  fi
  cmake -S "$root" -B "$build" "${generator[@]}" "${pkg_config[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRESURGO_WERROR=$( ((fake)) && echo ON || echo OFF) -DRESURGO_BUILD_EXAMPLES=OFF -DRESURGO_BUILD_FORTRAN=OFF -DRESURGO_BUILD_PYTHON=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DPython_EXECUTABLE="$(command -v "$python")" \
    -DRESURGO_GPU_CHECK_PREFIX:STRING="$work/prefix" || return 1
  grep -q "^RESURGO_CUDA_INCLUDE_DIR:PATH=.*include" "$build/CMakeCache.txt" ||
    { echo "cuda.h was not found: set CUDA_HOME to the CUDA toolkit"; return 1; }
  echo "dependencies found (each must lie in $work/prefix):"
  grep -E "^(tomlplusplus_DIR|nlohmann_json_DIR|GTest_DIR|XXHASH_INCLUDEDIR|ZSTD_INCLUDEDIR|LZ4_INCLUDEDIR|BLOSC_INCLUDEDIR)" \
    "$build/CMakeCache.txt"
  if grep -E "^(tomlplusplus_DIR|GTest_DIR|XXHASH_INCLUDEDIR|BLOSC_INCLUDEDIR)" "$build/CMakeCache.txt" | grep -v "$work/prefix"; then
    echo "a dependency above was found outside the prefix"
    return 1
  fi
  cmake --build "$build" -j"$jobs" --target resurgo resurgo_gpu_tests gpu_driver_probe resurgo_fake_cuda gpu_cache gpu_late_pin l1_pinned_restore
}

# The Python extension for this machine's interpreter, and the package
# around it importable without pip (a step of its own: the C++ checks run
# even where the interpreter has no headers to build it against).
step_python() {
  build_environment
  cmake --build "$build" -j"$jobs" --target _core || return 1
  rm -rf "$work/python"
  mkdir -p "$work/python"
  cp -r "$root/python/resurgo" "$work/python/resurgo"
  cp "$build"/python/_core*.so "$work/python/resurgo/"
}

# The environment of the programs: the prefix's libraries the system lacks.
program_environment() {
  source "$work/prefix.env"
  export LD_LIBRARY_PATH="$GPU_PREFIX_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PYTHONPATH="$work/python${PYTHONPATH:+:$PYTHONPATH}"
  if ((fake)); then export LD_LIBRARY_PATH="$fake_lib:$LD_LIBRARY_PATH"; fi
  return 0
}

step_probe() {
  program_environment
  "$build/tests/cpp/gpu_driver_probe" | tee "$work/probe.md"
}

# Skips that hold wherever a driver is usable: the no-driver branches.
expected_skip='(WithoutAUsableDriver|SaysWhyTheDriverIsUnavailable)'

step_gtest() {
  program_environment
  local filter='*'
  # On a GPU the fake's own suites would skip (libcuda.so.1 is NVIDIA's):
  # they run in every `make test`.
  ((fake)) || filter='-FakeCuda*'
  RESURGO_LOG_LEVEL=error "$build/tests/cpp/resurgo_gpu_tests" --gtest_filter="$filter" --gtest_color=no |
    tee "$work/gtest.out"
  local status=${PIPESTATUS[0]}
  local skipped
  skipped=$(grep -E '^\[  SKIPPED \] [A-Za-z]' "$work/gtest.out" | grep -vE "$expected_skip" || true)
  if ((status == 0)) && ((!fake)) && [[ -n "$skipped" ]]; then
    echo "gpu_check: tests skipped on a GPU machine, where every one must run:"
    echo "$skipped"
    return 1
  fi
  return "$status"
}

step_pytest() {
  program_environment
  # tests/python/test_fake_cuda_driver.py loads the fake by this path (a
  # RESURGO_ variable: set for pytest alone, every store reads the others).
  # Only the files that hold GPU tests are collected: collecting the others
  # imports what a bare GPU machine lacks (checkpoint_schedules, pyrevolve).
  local files
  mapfile -t files < <(cd "$root" && grep -l 'mark\.gpu' tests/python/test_*.py)
  (cd "$root" && RESURGO_FAKE_CUDA="$fake_lib/libcuda.so.1" "$python" -m pytest -m gpu "${files[@]}" -q -rs \
    -p no:cacheprovider) | tee "$work/pytest.out"
  local status=${PIPESTATUS[0]}
  # pyrevolve alone may be missing there: it is compiled (no pure wheel
  # travels in .gpu/) and not in the GPU image; its device test runs against
  # the fake driver in every `make test`.
  if ((status == 0)) && ((!fake)) && grep '^SKIPPED' "$work/pytest.out" | grep -qv "could not import 'pyrevolve'"; then
    echo "gpu_check: Python tests skipped on a GPU machine (CuPy and PyTorch must run there)"
    return 1
  fi
  return "$status"
}

# --quick's sizes, and against the fake driver one repeat that shows the
# scripts run (the timings mean nothing there).
bench_size() {
  if ((fake)); then echo --quick --fake-driver --backend cuda --repeats 1; else echo --quick --backend cuda; fi
}

# On a GPU a shorter trace than --quick's (16 checkpoints, intervals 5 and
# 100 ms, one host buffer of 4 GiB): the whole check must fit one device
# call of about 9 minutes.
step_cache() {
  program_environment
  local shorter=()
  ((fake)) || shorter=(--count 16 --intervals 5,100 --rtm-count 16 --host-buffers 4GiB)
  # shellcheck disable=SC2046
  "$python" "$root/bench/gpu_cache.py" --binary "$build/bench/gpu_cache" $(bench_size) "${shorter[@]}" --out "$work/bench"
}

# 1 GiB on a GPU, 7 repeats; 16 MiB and 5 against the fake driver.
step_l1_pin() {
  program_environment
  local size=(--mib 1024 --repeats 7)
  ((fake)) && size=(--fake-driver --mib 16 --repeats 5)
  "$python" "$root/bench/l1_pinned_restore.py" --binary "$build/bench/l1_pinned_restore" "${size[@]}" \
    --out "$work/bench/l1_pinned_restore.md"
}

step_late_pin() {
  program_environment
  # shellcheck disable=SC2046
  "$python" "$root/bench/gpu_late_pin.py" --binary "$build/bench/gpu_late_pin" $(bench_size) --out "$work/bench"
}

# CRUM's evaluation (bench/crum.py): the script compiles its application
# against libresurgo.so, with nvcc on a GPU; against the fake driver it runs
# the host analog once (about 15 s on 2 cores). On a GPU only the ways its
# targets compare (forked against synchronous, the copy into host staging
# against the bare device-to-host copy, each against no checkpoints),
# uncompressed.
step_crum() {
  build_environment
  program_environment
  local run=(--quick --backend cuda --ways sync,copy,fork --codecs none)
  ((fake)) && run=(--fake-driver --repeats 1 --fake-lib "$fake_lib")
  "$python" "$root/bench/crum.py" --lib-dir "$build/src" "${run[@]}" --out "$work/bench"
}

if [[ -n "$step" ]]; then
  declare -F "step_$step" >/dev/null || usage
  "step_$step"
  exit
fi

# ------------------------------------------------------------------ the run

mkdir -p "$out" || { echo "gpu_check: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
mode=$( ((fake)) && echo "fake CUDA driver (tests/cpp/fake_cuda): timings meaningless" || echo "GPU")
rm -rf "$logs" "$work/bench" "$work"/*.out "$work/probe.md"
mkdir -p "$logs" "$work/bench"
rows=()
failed=()
started_all=$(date +%s)
budget=${GPU_CHECK_SECONDS:-}
[[ -z "$budget" || "$budget" =~ ^[0-9]+$ ]] || { echo "gpu_check: GPU_CHECK_SECONDS must be a number of seconds" >&2; exit 2; }

# ------------------------------------------------------------------ summary
counts() {  # gtest and pytest result lines, for the summary
  [[ -f "$work/gtest.out" ]] && grep -E '^\[  (PASSED|FAILED|SKIPPED)  \] [0-9]+ test' "$work/gtest.out" | sed 's/^/- gtest: /'
  [[ -f "$work/pytest.out" ]] && grep -E '(passed|failed|skipped|error)' "$work/pytest.out" | tail -1 | sed 's/^/- pytest: /'
  return 0
}

summary() {
  echo "# GPU check: $mode"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)'), $(($(date +%s) - started_all)) s in all${budget:+ (GPU_CHECK_SECONDS=$budget)}."
  echo
  if ((${#failed[@]})); then echo "**Failed: ${failed[*]}.**"; else echo "No step failed."; fi
  echo
  echo "| step | result | time | log |"
  echo "|---|---|---:|---|"
  printf '%s\n' "${rows[@]}"
  echo
  counts
  echo
  echo "## Device and driver"
  echo
  if ((fake)); then
    echo "The fake CUDA driver of tests/cpp/fake_cuda (host memory); no GPU was used."
  else
    grep -E '^(Driver Version|CUDA Version|    Product Name|    Product Architecture|        Total)' \
      "$logs/environment.log" | head -8 | sed 's/^ */- /'
  fi
  grep -E 'release [0-9]' "$logs/environment.log" | sed 's/^/- nvcc: /'
  echo
  if [[ -f "$work/probe.md" ]]; then
    echo "## Driver rules (gpu_driver_probe)"
    echo
    cat "$work/probe.md"
    echo
  fi
  local report
  for report in gpu_cache l1_pinned_restore gpu_late_pin crum; do
    [[ -f "$work/bench/$report.md" ]] || continue
    echo "## Figures: $report.md (table rows)"
    echo
    grep -E '^(\||#)' "$work/bench/$report.md"
    echo
  done
  echo "## Environment"
  echo
  echo '```'
  cat "$logs/environment.log"
  echo '```'
}

# publish: the summary and the files as they stand, into OUTDIR (after every
# step: a run cut off keeps what it did).
publish() {
  summary >"$out/summary.md"
  local file
  for file in build tests bench; do
    [[ -f "$logs/$file.log" ]] && cp "$logs/$file.log" "$out/$file.log"
  done
  for file in gpu_cache.md gpu_late_pin.md crum.md; do
    [[ -f "$work/bench/$file" ]] && cp "$work/bench/$file" "$out/$file"
  done
  local plots=()
  mapfile -t plots < <(cd "$work/bench" && ls gpu_cache.png l1_pinned_restore.png gpu_late_pin.png crum.png 2>/dev/null)
  ((${#plots[@]})) && tar -C "$work/bench" -cf "$out/plots.tar" "${plots[@]}"
  return 0
}

# run_step NAME SECONDS LOG: runs step_NAME (this script once more) with a
# time limit (cut to what GPU_CHECK_SECONDS leaves), its output appended to
# LOG, records the outcome and publishes.
run_step() {
  local name=$1 seconds=$2 log=$3
  local begin result status mode_flag=()
  ((fake)) && mode_flag=(--fake-driver)
  begin=$(date +%s)
  if [[ -n "$budget" ]]; then
    local left=$((budget - (begin - started_all) - 20))
    if ((left < 30)); then
      rows+=("| $name | not run: out of time (GPU_CHECK_SECONDS=$budget) | | |")
      failed+=("$name")
      publish
      return
    fi
    ((seconds > left)) && seconds=$left
  fi
  printf '\n===== %s (limit %s s) =====\n' "$name" "$seconds" >>"$log"
  echo "gpu_check: $name ..." >&2
  timeout --kill-after=10 "$seconds" "$root/scripts/gpu_check.sh" "${mode_flag[@]}" --step "$name" "$out" >>"$log" 2>&1
  status=$?
  if ((status == 0)); then
    result=passed
  elif ((status == 124 || status == 137)); then
    result="FAILED: over its limit of $seconds s"
    failed+=("$name")
  else
    result="FAILED (exit status $status)"
    failed+=("$name")
  fi
  rows+=("| $name | $result | $(($(date +%s) - begin)) s | $(basename "$log") |")
  echo "gpu_check: $name: $result" >&2
  publish
}

run_step environment 60 "$logs/environment.log"
run_step prefix 120 "$logs/build.log"
if [[ " ${failed[*]} " == *" prefix "* ]]; then
  rows+=("| build, probe, gtest, python, pytest, crum, cache, l1_pin, late_pin | not run: no prefix | | |")
else
  run_step build 900 "$logs/build.log"
  if [[ " ${failed[*]} " == *" build "* ]]; then
    rows+=("| probe, gtest, python, pytest, crum, cache, l1_pin, late_pin | not run: the build failed | | |")
  else
    run_step probe 90 "$logs/tests.log"
    run_step gtest 300 "$logs/tests.log"
    run_step python 300 "$logs/build.log"
    if [[ " ${failed[*]} " == *" python "* ]]; then
      rows+=("| pytest | not run: no Python extension | | |")
    else
      run_step pytest 300 "$logs/tests.log"
    fi
    run_step crum 360 "$logs/bench.log"
    run_step cache 420 "$logs/bench.log"
    run_step l1_pin 180 "$logs/bench.log"
    run_step late_pin 300 "$logs/bench.log"
  fi
fi
publish

if ((${#failed[@]})); then
  echo "gpu_check: FAILED: ${failed[*]} (see $out/summary.md and the step's log)" >&2
  exit 1
fi
echo "gpu_check: every step passed; $out/summary.md" >&2
