// An Env that forwards every call to another one (POSIX by default): test
// Envs derive from it and override only the calls they watch or change.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "resurgo/env.hpp"

namespace resurgo {

class ForwardingEnv : public Env {
 public:
  explicit ForwardingEnv(std::shared_ptr<Env> base = Env::posix()) : base_(std::move(base)) {}

  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override {
    return base_->create(path, mode);
  }
  std::unique_ptr<ReadableFile> open(const std::string& path) override { return base_->open(path); }
  void rename(const std::string& from, const std::string& to) override { base_->rename(from, to); }
  void remove(const std::string& path) override { base_->remove(path); }
  void sync_dir(const std::string& dir) override { base_->sync_dir(dir); }
  void create_dirs(const std::string& dir) override { base_->create_dirs(dir); }
  std::vector<std::string> list_dir(const std::string& dir) override { return base_->list_dir(dir); }
  bool exists(const std::string& path) override { return base_->exists(path); }
  std::unique_ptr<FileLock> lock(const std::string& path) override { return base_->lock(path); }

 protected:
  std::shared_ptr<Env> base_;
};

}  // namespace resurgo
