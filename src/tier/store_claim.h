// The claims of this process on store directories not made yet: which
// directory and rank each open Store will make. A level's lock file keeps
// two Stores apart (of this process or another), but a directory is made
// only when the first version goes there (docs/config.md, persistent.path):
// until then, the claim refuses a second Store of the same name, rank and
// directory in this process at open, as the lock refuses it once made.
#pragma once

#include <memory>
#include <string>

#include "resurgo/env.hpp"

namespace resurgo {

// Claims `dir` for `rank` while the returned object lives; StateError, in
// the lock file's words, when a Store of this process holds the claim.
std::unique_ptr<FileLock> claim_store_directory(const std::string& dir, int rank);

}  // namespace resurgo
