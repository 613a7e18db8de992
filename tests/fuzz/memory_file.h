// A fuzz input as a resurgo::ReadableFile: the readers under test read it
// as they read a file on disk, and a read past its end is the StorageError
// of a short file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

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

}  // namespace resurgo::fuzz
