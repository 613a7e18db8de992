// The process that opened a store (or made one of its levels). A child
// forked while the store is open inherits the Store object but none of its
// threads, and the files and locks it holds stay the parent's: in the
// child, close() and the destructor do nothing (the Store leaks its state
// on purpose) and every other call is a StateError naming both processes.
// A scratch level's spare files are likewise its opener's alone
// (tier/directory_level.h).
#pragma once

#include <unistd.h>

#include <string>

namespace resurgo {

class OwnerProcess {
 public:
  OwnerProcess();

  // Whether this process is a child forked while the store was open. Asked
  // by every call on the store; the kernel is asked for the process id only
  // once a fork happened since the store opened (see owner_process.cpp).
  bool inherited() const;
  // Throws StateError for `call` on store `store` in an inheriting child.
  void check(const char* call, const std::string& store) const;

 private:
  const pid_t owner_;
  const unsigned long forks_at_open_;  // forks counted in this process's line when the store opened
};

}  // namespace resurgo
