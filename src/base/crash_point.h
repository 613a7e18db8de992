// Named crash points: places on the checkpoint and restart paths where the
// crash campaign (tests/fault/crash_campaign.cpp) kills the process, so that a
// SIGKILL lands exactly between two steps of a commit instead of wherever a
// random delay happens to fall. They exist only in the library built for that
// campaign (RESURGO_CRASH_POINTS defined); in every other build the macro
// expands to nothing, so no release binary can be made to kill itself.
#pragma once

#ifdef RESURGO_CRASH_POINTS

#include <string>

namespace resurgo::crash_points {

// Called where the point lies; `level` is the storage level the step works
// on (2 or 4), or 0 where there is none. The point's full name is
// "L<level>.<name>", or just `name` for level 0.
void pass(const char* name, int level);

// Arms one point: its `hit`-th pass (counting from 1) kills the process with
// SIGKILL. Call before the store is opened (no thread may be passing points).
// Throws std::invalid_argument for a malformed name or a hit below 1.
//
// The passes are counted in memory shared with forked children (fork
// capture): a pass in a forked writer counts for the application too, and
// the hit-th pass kills whichever process makes it, the child when the
// child passes the point.
void arm(const std::string& full_name, int hit);

// Whether the armed point's hit-th pass has happened, in this process or in
// a forked child (which it killed).
bool fired();

}  // namespace resurgo::crash_points

#define RESURGO_CRASH_POINT(name, level) ::resurgo::crash_points::pass(name, level)

#else

#define RESURGO_CRASH_POINT(name, level) static_cast<void>(0)

#endif
