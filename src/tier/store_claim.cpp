#include "tier/store_claim.h"

#include <pthread.h>

#include <mutex>
#include <set>
#include <utility>

#include "format/file_names.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

using Claim = std::pair<std::string, int>;  // directory, rank

// A child forked while another thread claims or releases must not inherit
// the mutex locked: it may open stores of its own.
std::mutex& claims_mutex() {
  static std::mutex mutex;
  static std::once_flag installed;
  std::call_once(installed, [] {
    ::pthread_atfork([] { mutex.lock(); }, [] { mutex.unlock(); }, [] { mutex.unlock(); });
  });
  return mutex;
}

// Never destroyed: a store may be closed by an atexit handler that runs
// after the function-local statics are gone (appic closes its stores at exit).
std::set<Claim>& claims() {
  static auto* held = new std::set<Claim>;
  return *held;
}

class StoreClaim final : public FileLock {
 public:
  explicit StoreClaim(Claim claim) : claim_(std::move(claim)) {}
  ~StoreClaim() override {
    std::lock_guard guard(claims_mutex());
    claims().erase(claim_);
  }

 private:
  Claim claim_;
};

}  // namespace

std::unique_ptr<FileLock> claim_store_directory(const std::string& dir, int rank) {
  std::lock_guard guard(claims_mutex());
  if (!claims().insert({dir, rank}).second) {
    throw StateError("'" + dir + "/" + format::lock_file_name(rank) +
                     "' is locked: the same store and rank is open in another Store object of this process; close "
                     "it first or use another store name");
  }
  return std::make_unique<StoreClaim>(Claim{dir, rank});
}

}  // namespace resurgo
