#!/bin/sh
# Prints again, at the end of a failed `make test`, what each failed CTest
# test printed (from the build's Testing/Temporary/LastTest.log): ctest
# --output-on-failure prints it when the test ends, which under -j is
# hundreds of lines before the end of the log, and CI keeps only the end.
#
#   scripts/failed_test_output.sh BUILD_DIR [LINES_PER_TEST]
set -eu
log="$1/Testing/Temporary/LastTest.log"
lines="${2:-120}"
[ -r "$log" ] || { echo "no CTest log at $log" >&2; exit 0; }
echo "=== output of the failed tests (from $log; last $lines lines of each) ==="
awk -v lines="$lines" '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; count = 0; failed = 0; capturing = 0; next }
  /^<end of output>$/ { capturing = 0; next }
  capturing == 1 { kept[count++ % lines] = $0 }
  capturing == 2 { capturing = 1 }  # the rule under "Output:"
  /^Output:$/ { capturing = 2 }
  /^Test Failed/ { failed = 1 }
  /" time elapsed: / && failed {
    print "--- " name ":"
    for (i = (count > lines ? count - lines : 0); i < count; i++) print kept[i % lines]
  }
' "$log"
