#include "gpu/registration_token.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

RegistrationToken::RegistrationToken(std::string directory, const std::string& name) {
  const std::string problem = name_problem(name);
  if (!problem.empty()) {
    throw InvalidArgumentError("registration token name '" + name + "' is invalid: " + problem +
                               " (use letters, digits, '-', '_' or '.')");
  }
  if (directory.empty()) directory = kDefaultDirectory;
  if (directory.back() != '/') directory += '/';
  path_ = directory + name + ".lock";
}

int RegistrationToken::open_lock_file() const {
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const int error = errno;
    throw StorageError("cannot open the pin registration token " + path_ + ": " + std::strerror(error) +
                       "; choose a directory every process of the node can write ([buffer] pin_token_dir) or "
                       "another token name");
  }
  return fd;
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
  return poll(nullptr, give_up);
}

// flock(LOCK_EX) without LOCK_NB cannot be interrupted but by a signal, and a
// buffer being destroyed must stop waiting: poll with LOCK_NB instead.
RegistrationToken::Hold RegistrationToken::poll(const std::chrono::steady_clock::time_point* deadline,
                                                const std::function<bool()>& give_up) const {
  Hold hold(open_lock_file());
  auto pause = kFirstPoll;
  for (;;) {
    if (::flock(hold.fd_, LOCK_EX | LOCK_NB) == 0) return hold;
    const int error = errno;
    if (error != EWOULDBLOCK && error != EINTR) {
      throw StorageError("cannot lock the pin registration token " + path_ + ": " + std::strerror(error));
    }
    if ((deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) || (give_up && give_up())) {
      return Hold();  // `hold` closes the file
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, kLongestPoll);
  }
}

RegistrationToken::Hold::Hold(Hold&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RegistrationToken::Hold& RegistrationToken::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

// Closing the only descriptor of the open file description drops the lock.
void RegistrationToken::Hold::release() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

}  // namespace resurgo::gpu
