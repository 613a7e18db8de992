// The system calls through which the POSIX Env moves file data, as a table,
// so that tests can make them behave the way a busy kernel may (EINTR, short
// reads and writes) and check that the Env hides it. Env::posix() uses the
// real calls.
#pragma once

#include <unistd.h>

#include <memory>

#include "resurgo/env.hpp"

namespace resurgo {

struct SystemCalls {
  ssize_t (*write)(int, const void*, size_t) = ::write;
  ssize_t (*pread)(int, void*, size_t, off_t) = ::pread;
  ssize_t (*pwrite)(int, const void*, size_t, off_t) = ::pwrite;
  int (*fdatasync)(int) = ::fdatasync;
  int (*fsync)(int) = ::fsync;
  int (*close)(int) = ::close;
};

// A POSIX Env whose file data goes through `calls`.
std::shared_ptr<Env> posix_env_with(const SystemCalls& calls);

}  // namespace resurgo
