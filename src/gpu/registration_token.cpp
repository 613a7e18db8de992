#include "gpu/registration_token.h"

#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "resurgo/errors.hpp"

namespace resurgo::gpu {

namespace {

constexpr std::size_t kLongestName = 200;
constexpr auto kFirstPoll = std::chrono::milliseconds(1);
constexpr auto kLongestPoll = std::chrono::milliseconds(16);

// Why `name` cannot name a lock file, or "" when it can.
std::string name_problem(const std::string& name) {
  if (name.empty()) return "it is empty";
  if (name.size() > kLongestName) return "it is longer than " + std::to_string(kLongestName) + " bytes";
  if (name.find('/') != std::string::npos) return "it contains '/'";
  if (name.find("..") != std::string::npos) return "it contains \"..\"";
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return "it contains a control character";
  }
  return "";
}

}  // namespace

RegistrationToken::RegistrationToken(std::string directory, const std::string& name,
                                     std::chrono::milliseconds patience)
    : patience_(patience) {
  const std::string problem = name_problem(name);
  if (!problem.empty()) {
    throw InvalidArgumentError("registration token name '" + name + "' is invalid: " + problem +
                               " (use letters, digits, '-', '_' or '.')");
  }
  if (directory.empty()) directory = kDefaultDirectory;
  if (directory.back() != '/') directory += '/';
  // A directory of the user's own: the shared one (/dev/shm) is writable by
  // every user, who could hold or plant a file of any name there.
  directory_ = directory + "resurgo-" + std::to_string(::geteuid());
  file_ = name + ".lock";
  path_ = directory_ + "/" + file_;
}

std::unique_ptr<Directory> RegistrationToken::open_directory() const {
  try {
    // Not the store's Env: the token is no file of a store, and its
    // fault-injecting Envs have nothing to test here.
    return Env::posix()->open_directory(directory_, DirectoryRules{});
  } catch (const StorageError& error) {
    throw StorageError("cannot open the pin registration token " + path_ + ": " + error.what() +
                       "; choose a directory every process of the node sees ([buffer] pin_token_dir)");
  }
}

std::unique_ptr<FileLock> RegistrationToken::try_lock(Directory& directory) const {
  try {
    return directory.lock(file_);
  } catch (const StateError&) {
    return nullptr;  // another process or token object holds it
  } catch (const StorageError& error) {
    throw StorageError("cannot lock the pin registration token " + path_ + ": " + error.what());
  }
}

RegistrationToken::Hold RegistrationToken::try_acquire() const {
  const auto now = std::chrono::steady_clock::now();
  return poll(&now, {});
}

RegistrationToken::Hold RegistrationToken::acquire_for(std::chrono::milliseconds timeout,
                                                       const std::function<bool()>& give_up) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  return poll(&deadline, give_up);
}

RegistrationToken::Hold RegistrationToken::acquire(const std::function<bool()>& give_up) const {
  if (patience_ == kForever) return poll(nullptr, give_up);
  const auto deadline = std::chrono::steady_clock::now() + patience_;
  Hold hold = poll(&deadline, give_up);
  if (hold || std::chrono::steady_clock::now() < deadline) return hold;  // ours, or given up when asked
  throw StateError("the pin registration token " + path_ + " was held by another process for " +
                   std::to_string(patience_.count()) + " ms ([buffer] pin_token_timeout); gave up waiting for it");
}

// A blocking flock(LOCK_EX) cannot be interrupted but by a signal, and a
// buffer being destroyed must stop waiting: poll Directory::lock (LOCK_NB).
RegistrationToken::Hold RegistrationToken::poll(const std::chrono::steady_clock::time_point* deadline,
                                                const std::function<bool()>& give_up) const {
  const std::unique_ptr<Directory> directory = open_directory();
  auto pause = kFirstPoll;
  for (;;) {
    if (std::unique_ptr<FileLock> lock = try_lock(*directory)) return Hold(std::move(lock));
    if ((deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) || (give_up && give_up())) {
      return Hold();
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, kLongestPoll);
  }
}

}  // namespace resurgo::gpu
