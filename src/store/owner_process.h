// The process that opened a store. A child forked while the store is open
// inherits the Store object but none of its threads, and the files and
// locks it holds stay the parent's: in the child, close() and the
// destructor do nothing (the Store leaks its state on purpose) and every
// other call is a StateError naming both processes.
#pragma once

#include <unistd.h>

#include <string>

namespace resurgo {

class OwnerProcess {
 public:
  // Whether this process is a child forked while the store was open.
  bool inherited() const { return ::getpid() != owner_; }
  // Throws StateError for `call` on store `store` in an inheriting child.
  void check(const char* call, const std::string& store) const;

 private:
  const pid_t owner_ = ::getpid();
};

}  // namespace resurgo
