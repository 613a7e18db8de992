// Runs a reader in a forked child whose address space is capped
// (setrlimit(RLIMIT_AS)) at what the child already maps plus a budget: a
// reader that allocates more than the budget gets std::bad_alloc there (or
// dies) without taking the test process down, and the parent sees how it
// ended.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace resurgo::security {

// The budget the campaign allows a reader of a file of `file_bytes`: the
// file, one chunk (4 MiB, the default chunk size) and a small slack for the
// reader's own bookkeeping (messages, stream buffers, the parsed header).
std::uint64_t reader_budget(std::uint64_t file_bytes);

struct ChildOutcome {
  enum class Kind { kRefused, kAccepted, kBadAlloc, kOtherException, kCrashed };
  Kind kind = Kind::kCrashed;
  std::string message;  // what() of the exception, or how the child died
};

// Runs `reader` in a child limited to `budget` more bytes of address space.
// kRefused: it threw a resurgo::Error (a clean refusal); kAccepted: it
// returned.
ChildOutcome run_bounded(std::uint64_t budget, const std::function<void()>& reader);

// "refused: ...", "accepted", "std::bad_alloc", ... for test messages.
std::string describe(const ChildOutcome& outcome);

}  // namespace resurgo::security
