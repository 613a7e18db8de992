// An Env that forwards to the POSIX one and lets a test run code at chosen
// calls: to act between two steps of a background thread, or to slow one
// level down.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "forwarding_env.h"

namespace resurgo {

class HookEnv final : public ForwardingEnv {
 public:
  std::function<void(const std::string& path)> before_create;
  std::function<void(const std::string& from, const std::string& to)> after_rename;
  std::function<void(const std::string& dir)> before_list;
  std::function<void(const std::string& path)> before_remove;

  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override {
    if (before_create) before_create(path);
    return base_->create(path, mode);
  }
  void rename(const std::string& from, const std::string& to) override {
    base_->rename(from, to);
    if (after_rename) after_rename(from, to);
  }
  void remove(const std::string& path) override {
    if (before_remove) before_remove(path);
    base_->remove(path);
  }
  std::vector<std::string> list_dir(const std::string& dir) override {
    if (before_list) before_list(dir);
    return base_->list_dir(dir);
  }
};

}  // namespace resurgo
