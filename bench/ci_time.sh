#!/usr/bin/env bash
# How long `make test` takes on a fresh clone, phase by phase: the figure
# the suite's time budget is about (CI: a clean clone, 2 cores, well under
# 15 minutes).
#
#   bench/ci_time.sh [REV] [WORKDIR]
#
# Clones the repository at REV (default HEAD) into WORKDIR (default a new
# temporary directory), runs .ci/run there with each output line stamped
# with the seconds since the start, and prints the time between the lines
# that start each phase (bootstrap, build, Python package, ctest, pytest
# beside the fake-driver GPU check, ASan, TSan) as a Markdown table, then the total
# and the exit status. The stamped log stays in WORKDIR/ci_time.log. Run it
# on an otherwise idle machine: every other process on the cores adds to
# the phases.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rev=${1:-HEAD}
work=${2:-$(mktemp -d "${TMPDIR:-/tmp}/resurgo-ci-time.XXXXXX")}
clone=$work/clone
log=$work/ci_time.log

git clone -q "$repo" "$clone" && git -C "$clone" checkout -q "$(git -C "$repo" rev-parse "$rev")" || exit 2
start=$(date +%s)
(cd "$clone" && bash .ci/run) 2>&1 | while IFS= read -r line; do
  printf '%5d %s\n' "$(($(date +%s) - start))" "$line"
done >"$log"
status=${PIPESTATUS[0]}
total=$(($(date +%s) - start))

# The first line of each phase, as the Makefile prints its commands.
phases=(
  "bootstrap|bootstrap:"
  "C++ build (build/cpp)|cmake -S . -B build/cpp"
  "Python package (build/python)|-m pip install"
  "ctest|ctest --test-dir"
  "pytest beside the fake-driver GPU check|-m pytest tests/python"
  "ASan build and tests|-B build/asan"
  "TSan build and tests|-B build/tsan"
)
starts=()
for phase in "${phases[@]}"; do
  pattern=${phase#*|}
  starts+=("$(grep -F -m1 -- "$pattern" "$log" | awk '{print $1}')")
done
echo "| phase | seconds |"
echo "|---|---:|"
for i in "${!phases[@]}"; do
  from=${starts[$i]}
  [[ -n "$from" ]] || { echo "| ${phases[$i]%%|*} | not reached |"; continue; }
  to=$total
  for ((j = i + 1; j < ${#phases[@]}; j++)); do
    [[ -n "${starts[$j]}" ]] && { to=${starts[$j]}; break; }
  done
  echo "| ${phases[$i]%%|*} | $((to - from)) |"
done
echo "| **total** (\`.ci/run\`, exit status $status) | **$total** |"
echo
echo "commit $(git -C "$clone" rev-parse --short HEAD), $(nproc) cores, log: $log"
exit "$status"
