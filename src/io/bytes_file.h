// A file in memory: a container received from another rank is read (and
// verified) through the same code as one on disk, and one made for a level
// without files (L0) or for a test is written through the same code.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

class BytesFile final : public ReadableFile, public WritableFile {
 public:
  // `name` stands for the path in messages ("rank 3's version 7").
  explicit BytesFile(std::string name) : name_(std::move(name)) {}
  BytesFile(std::vector<std::byte> bytes, std::string name) : bytes_(std::move(bytes)), name_(std::move(name)) {}

  void append(const void* data, std::size_t bytes) override {
    const auto* from = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), from, from + bytes);
  }
  void sync() override {}
  void close() override {}

  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
    if (offset > bytes_.size() || bytes > bytes_.size() - offset) {
      throw StorageError("reading " + std::to_string(bytes) + " bytes at " + std::to_string(offset) + " of " + name_ +
                         ", which has " + std::to_string(bytes_.size()));
    }
    if (bytes > 0) std::memcpy(data, bytes_.data() + offset, bytes);
  }
  std::uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return name_; }
  const std::vector<std::byte>& bytes() const { return bytes_; }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
  std::string name_;
};

// The whole content of `file`.
inline std::vector<std::byte> read_whole(const ReadableFile& file) {
  std::vector<std::byte> bytes(file.size());
  if (!bytes.empty()) file.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

}  // namespace resurgo
