// Small helpers shared by the C++ tests: a scratch directory, raw file
// access for damaging checkpoint files on purpose, random test data.
#pragma once

#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

// Whether `done` holds within `timeout`, asked every 200 us: for what a
// background thread of the library does beside the test. The timeout is
// for a stuck thread, far beyond what the work takes on a loaded machine.
inline bool eventually(const std::function<bool()>& done, std::chrono::seconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// The scheduling policy (sched_getscheduler) of this process's thread named
// `name` (/proc/self/task/*/comm); nothing when there is none.
inline std::optional<int> policy_of_thread(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm == name) return ::sched_getscheduler(std::stoi(task.path().filename().string()));
  }
  return std::nullopt;
}

// A fresh directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/resurgo-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One read of the whole file: a character-by-character stream read took
// most of some suites' time in the TSan tree (test files at -O0, every
// access instrumented).
inline std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open '" + path + "' for reading");
  std::vector<std::byte> bytes(static_cast<std::size_t>(in.tellg()));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
    throw std::runtime_error("cannot read '" + path + "'");
  }
  return bytes;
}

inline void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot open '" + path + "' for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

// Flips bit `bit` (0-7) of the byte at `offset`, in place.
inline void flip_bit(const std::string& path, std::uint64_t offset, int bit = 0) {
  std::vector<std::byte> bytes = read_file(path);
  if (offset >= bytes.size()) {
    throw std::out_of_range("flip_bit: offset " + std::to_string(offset) + " is past the end of '" + path + "'");
  }
  bytes[offset] ^= static_cast<std::byte>(1u << (bit & 7));
  write_file(path, bytes);
}

// `bytes` pseudo-random bytes from `seed`, eight per draw: the test files
// are compiled at -O0, and under TSan a draw per byte made filling a few
// tens of MiB the longest part of a test.
template <typename Byte = std::byte>
std::vector<Byte> random_bytes(std::size_t bytes, unsigned seed) {
  std::vector<Byte> data(bytes);
  std::mt19937_64 random(seed);
  for (std::size_t at = 0; at < bytes; at += sizeof(std::uint64_t)) {
    const std::uint64_t word = random();
    std::memcpy(data.data() + at, &word, std::min(sizeof word, bytes - at));
  }
  return data;
}
