#include "matrix/convergence.h"

#include <algorithm>
#include <vector>

#include "resurgo/errors.hpp"

namespace resurgo {

std::string name_ranks(std::span<const int> ranks) {
  constexpr std::size_t kNamed = 8;
  if (ranks.size() == 1) return "rank " + std::to_string(ranks.front());
  const std::size_t named = std::min(ranks.size(), kNamed);
  std::string text = "ranks ";
  for (std::size_t i = 0; i < named; ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  if (named < ranks.size()) text += " and " + std::to_string(ranks.size() - named) + " more";
  return text;
}

void Convergence::run(ConvergeHooks& backend, CollectiveCheck& check, std::int64_t code, const char* call,
                      const Deadline& deadline) {
  if (!pending_) {
    pending_ = true;
    code_ = code;
  }
  if (!rendezvous_) {
    // No rank can have finished this convergence yet (each needs this
    // rank's rendezvous), so whatever arrives meanwhile is owed.
    wait_for([&] { return backend.flushed(); }, [&] { return backend.progress(); }, call, deadline,
             [&] { return "this rank's updates are not all sent: " + backend.waiting_for({}); });
    backend.synchronize();
    rendezvous_ = std::make_unique<Rendezvous>(comm_, kRendezvousTag, rank_, code_, backend.bins_sent());
  }
  // From here a rank that has finished may send bins of its next updates:
  // only the bins still owed are taken, so that none of those lands in an
  // array its owner reads the moment this call returns (with inline
  // progress; a progress thread adds them whenever they come).
  const auto owed = [&] {
    return backend.progress_owed([&](int source) {
      rendezvous_->test();  // a bin from `source` comes after its rendezvous message: that is in now
      return rendezvous_->count_from(source);
    });
  };
  wait_for([&] { return rendezvous_->test(); }, owed, call, deadline, [&] {
    const std::vector<int> missing = rendezvous_->missing();
    return name_ranks(missing) + (missing.size() == 1 ? " has" : " have") + " not joined this " + call +
           "() (a rank that never calls it leaves the others waiting)";
  });
  if (!agreed_) {
    agreed_ = true;
    const Rendezvous::CodeRange codes = rendezvous_->codes();
    try {
      check.agree(codes.smallest, codes.largest);
    } catch (...) {
      finish();
      throw;
    }
  }
  const std::vector<std::uint64_t> expected = rendezvous_->counts();
  wait_for([&] { return backend.settled(expected); }, owed, call, deadline,
           [&] { return backend.waiting_for(expected); });
  backend.synchronize();
  finish();
}

void Convergence::wait_for(const std::function<bool()>& done, const std::function<bool()>& meanwhile,
                           const char* call, const Deadline& deadline, const std::function<std::string()>& waiting) {
  if (wait_until(done, meanwhile, deadline)) return;
  throw StateError(std::string("ConvergentMatrix::") + call + ": after " + deadline.text() +
                   " (MatrixOptions::timeout_seconds), " +
                   waiting() + "; call " + call +
                   "() again to go on waiting (every rank must make the same call), or end the job (MPI_Abort)");
}

void Convergence::finish() {
  pending_ = false;
  rendezvous_.reset();
  agreed_ = false;
}

}  // namespace resurgo
