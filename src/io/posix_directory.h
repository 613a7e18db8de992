// The POSIX Directory (resurgo/env.hpp): a directory opened once, after
// every directory on its path was checked, and used through its descriptor
// (openat, renameat2, unlinkat, fsync) so that nothing swapped on the path
// afterwards redirects the store (docs/reliability.md, "Security").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/system_calls.h"
#include "resurgo/env.hpp"

namespace resurgo {

// Opens the absolute directory `path` under `rules`. Walks it from "/" one
// component at a time without following links blindly (a link is resolved
// only when you or root made it, in a directory that passed the checks, as
// /var/run -> /run), creating what is missing when rules.create (mode 0700,
// each new directory made durable in its parent by the returned directory's
// first sync()), and refuses, naming the
// directory and what to do:
//  - a directory above it that another user could change: not owned by you
//    or root, or writable by others (or by its group, unless
//    rules.shared_group) without the sticky bit of /tmp;
//  - a link on the way made by another user;
//  - the directory itself when not yours (or, with rules.shared_group, not
//    of one of your groups) or writable by others (or by its group).
std::unique_ptr<Directory> open_posix_directory(const std::string& path, const DirectoryRules& rules,
                                                const SystemCalls& calls);

// fsync of the directory descriptor `fd` (EINTR retried).
void sync_directory(int fd, const std::string& path, const SystemCalls& calls);
// The names in the directory `fd` (taken and closed), "." and ".." left out.
std::vector<std::string> list_directory(int fd, const std::string& path);

}  // namespace resurgo
