#!/usr/bin/env bash
# Runs commands at the same time, at most JOBS (default: the number of
# cores) at once, and fails when any of them fails.
#
#   scripts/together.sh COMMAND...        each COMMAND one shell string
#
# `make test` runs the sanitizer builds' test programs through it: each runs
# on one core for minutes (a GoogleTest binary split into shards with
# GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX, the campaigns side by side),
# which left the other core idle. The output of each command is kept and
# printed whole once it ended, in the order given; a failed command's
# output ends with its exit status. The last lines name the failed
# commands again with the end of their output, so that a CI log cut to its
# tail still shows what failed.
set -uo pipefail

(($#)) || { echo "usage: scripts/together.sh COMMAND..." >&2; exit 2; }
limit=${JOBS:-$(nproc 2>/dev/null || echo 2)}
out=$(mktemp -d "${TMPDIR:-/tmp}/resurgo-together.XXXXXX")
trap 'rm -rf "$out"' EXIT

for ((i = 1; i <= $#; i++)); do
  while (($(jobs -rp | wc -l) >= limit)); do wait -n; done
  command=${!i}
  (
    bash -c "$command" >"$out/$i.log" 2>&1
    status=$?
    ((status == 0)) || echo "together: '$command' failed with exit status $status" >>"$out/$i.log"
    echo "$status" >"$out/$i.status"
  ) &
done
wait

failed=()
for ((i = 1; i <= $#; i++)); do
  echo "== ${!i}"
  cat "$out/$i.log"
  [[ "$(cat "$out/$i.status" 2>/dev/null)" == 0 ]] || failed+=("$i")
done
for i in "${failed[@]}"; do
  echo "== together: FAILED: ${!i} (its last 40 lines follow)"
  tail -n 40 "$out/$i.log"
done
((${#failed[@]} == 0))
