#!/usr/bin/env bash
# Runs a background command at the lowest CPU priority beside a foreground
# one, and fails when either fails.
#
#   scripts/beside.sh LOG BACKGROUND FOREGROUND     each command one shell string
#
# `make test` builds the sanitizer trees this way while ctest, pytest and the
# fake-driver GPU check run: those tests leave about a third of the two
# cores idle (they wait on fsync, child processes and timeouts), and a
# compile at nice 19 takes that idle time without delaying a test that is
# ready to run. The background command's output goes to LOG, which is
# printed only when it failed (its end, with the path of the whole); the
# foreground's output streams as usual. When the foreground fails, the
# background is stopped and its status does not matter.
set -uo pipefail

(($# == 3)) || { echo "usage: scripts/beside.sh LOG BACKGROUND FOREGROUND" >&2; exit 2; }
log=$1 background=$2 foreground=$3
mkdir -p "$(dirname "$log")"

started=$(date +%s)
setsid nice -n 19 bash -c "$background" >"$log" 2>&1 &
pid=$!
stop_background() { kill -TERM -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
trap 'stop_background; exit 130' INT TERM

bash -c "$foreground"
status=$?
if ((status != 0)); then
  stop_background
  exit "$status"
fi

echo "beside: '$foreground' done; waiting for '$background' (log: $log)"
wait "$pid"
status=$?
if ((status != 0)); then
  echo "beside: '$background' failed with exit status $status; the end of $log follows"
  tail -n 60 "$log"
  exit "$status"
fi
echo "beside: '$background' done, $(($(date +%s) - started)) s after it started"
