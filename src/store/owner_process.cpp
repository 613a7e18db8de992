#include "store/owner_process.h"

#include "resurgo/resurgo.hpp"

namespace resurgo {

void OwnerProcess::check(const char* call, const std::string& store) const {
  if (!inherited()) return;
  throw StateError(std::string(call) + " on store '" + store + "': the store belongs to process " +
                   std::to_string(owner_) + ", which opened it; this process (" + std::to_string(::getpid()) +
                   ") is a child forked from it and must open a store of its own");
}

}  // namespace resurgo
