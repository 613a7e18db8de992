// Holds a forked writer (capture.mode fork or auto) at its first file
// creation until the test opens the gate, so that a test can act while the
// child waits; the test's own process passes freely.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <system_error>

#include "hook_env.h"

namespace resurgo {

class WriterGate {
 public:
  WriterGate() {
    if (::pipe(pipe_) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
    env_->before_create = [read_end = pipe_[0], test_pid = ::getpid()](const std::string&) {
      char byte = 0;
      if (::getpid() != test_pid && ::read(read_end, &byte, 1) != 1) ::_exit(9);  // in the child: no gtest
    };
  }
  ~WriterGate() {
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }
  WriterGate(const WriterGate&) = delete;
  WriterGate& operator=(const WriterGate&) = delete;

  // The Env to open the store with.
  std::shared_ptr<HookEnv> env() const { return env_; }
  void open() { ASSERT_EQ(::write(pipe_[1], "x", 1), 1); }

 private:
  int pipe_[2];
  std::shared_ptr<HookEnv> env_ = std::make_shared<HookEnv>();
};

}  // namespace resurgo
