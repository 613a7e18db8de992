#include "base/owner_process.h"

#include <pthread.h>

#include <atomic>

#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// Forks of this process and of the processes it was forked from, counted
// by a pthread_atfork child handler (a child inherits the count, then adds
// its own fork). getpid() is a system call, about 0.2 µs on the 2-core VM:
// a tenth of a small checkpoint's whole cost into the memory level, paid by
// every checkpoint and restart (issue 27). While the count is what it was at
// open, no fork happened since and this is the owner. A child made without
// the handler (vfork, or the clone system call itself) may only exec or
// exit: it makes no call on the store.
std::atomic<unsigned long> g_forks{0};

void count_fork() { g_forks.fetch_add(1, std::memory_order_relaxed); }

// Registers the handler once; false when pthread_atfork failed (out of
// memory): forks then go uncounted, and every call asks for the pid.
bool forks_counted() {
  static const bool registered = ::pthread_atfork(nullptr, nullptr, &count_fork) == 0;
  return registered;
}

}  // namespace

OwnerProcess::OwnerProcess() : owner_(::getpid()), forks_at_open_((forks_counted(), g_forks.load())) {}

bool OwnerProcess::inherited() const {
  if (forks_counted() && g_forks.load(std::memory_order_relaxed) == forks_at_open_) return false;
  return ::getpid() != owner_;
}

void OwnerProcess::check(const char* call, const std::string& store) const {
  if (!inherited()) return;
  throw StateError(std::string(call) + " on store '" + store + "': the store belongs to process " +
                   std::to_string(owner_) + ", which opened it; this process (" + std::to_string(::getpid()) +
                   ") is a child forked from it and must open a store of its own");
}

}  // namespace resurgo
