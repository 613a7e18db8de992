#!/usr/bin/env bash
# Runs a campaign program again and again, several at a time, until one run
# fails or ROUNDS rounds passed: races that show only under load (two
# campaigns side by side, as make test's sanitizer jobs run them) need many
# runs to show up once.
#
#   scripts/repeat_campaign.sh ROUNDS AT_ONCE COMMAND...
#   e.g. scripts/repeat_campaign.sh 50 2 build/cpp/tests/fault/crash_campaign --trials 300
#
# Prints one line per round and a summary; exits 1 at the first failed run,
# whose output (naming the directory the campaign kept) is printed whole.
set -uo pipefail

(($# >= 3)) || { echo "usage: scripts/repeat_campaign.sh ROUNDS AT_ONCE COMMAND..." >&2; exit 2; }
rounds=$1
at_once=$2
shift 2
logs=$(mktemp -d "${TMPDIR:-/tmp}/resurgo-repeat.XXXXXX")
trap 'rm -rf "$logs"' EXIT

for ((round = 1; round <= rounds; round++)); do
  pids=()
  for ((run = 1; run <= at_once; run++)); do
    "$@" >"$logs/$run.log" 2>&1 &
    pids+=("$!")
  done
  failed=0
  for ((run = 1; run <= at_once; run++)); do
    if ! wait "${pids[$((run - 1))]}"; then
      echo "round $round, run $run of $at_once failed: $*"
      cat "$logs/$run.log"
      failed=1
    fi
  done
  ((failed)) && { echo "repeat_campaign: failed in round $round ($(((round - 1) * at_once)) runs passed before it)"; exit 1; }
  echo "round $round: $at_once runs passed"
done
echo "repeat_campaign: $((rounds * at_once)) runs passed, $at_once at a time: $*"
