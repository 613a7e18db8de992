// What the file fuzzers share: the input as a resurgo::ReadableFile (the
// readers under test read it as a file on disk, and a read past its end is
// the StorageError of a short file), its little-endian fields, and the run
// of one input as given and with its checksums recomputed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace resurgo::fuzz {

class MemoryFile final : public ReadableFile {
 public:
  MemoryFile(const std::uint8_t* data, std::size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}
  void read_at(std::uint64_t offset, void* out, std::size_t bytes) const override {
    if (offset > size_ || bytes > size_ - offset) {
      throw StorageError("'" + path_ + "': short read of " + std::to_string(bytes) + " bytes at offset " +
                         std::to_string(offset));
    }
    if (bytes != 0) std::memcpy(out, data_ + offset, bytes);
  }
  std::uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::string path_;
};

inline std::uint64_t load64(const std::uint8_t* p) {
  std::uint64_t value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

[[noreturn]] inline void finding(const char* target, const char* what) {
  std::fprintf(stderr, "%s: %s\n", target, what);
  std::abort();
}

// Runs exercise(data, size) on the input, then on fix(data, size), a copy
// with its checksums recomputed (empty: none to run). exercise catches the
// resurgo::Errors the readers may throw; any other exception is a finding.
template <typename Exercise, typename Fix>
int run_input(const char* target, const std::uint8_t* data, std::size_t size, const Exercise& exercise,
              const Fix& fix) {
  try {
    exercise(data, size);
    const std::vector<std::uint8_t> fixed = fix(data, size);
    if (!fixed.empty()) exercise(fixed.data(), fixed.size());
  } catch (const Error&) {
    finding(target, "resurgo::Error escaped the harness");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: exception that is not a resurgo::Error: %s\n", target, error.what());
    std::abort();
  } catch (...) {
    finding(target, "exception of unknown type");
  }
  return 0;
}

}  // namespace resurgo::fuzz
