// The checksum of every stored byte (chunks, headers, manifests, the
// automatic runtime's dataset hashes): XXH3, 64 bits. Integrity, not
// authentication: it finds damage, not a forger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace resurgo {

std::uint64_t checksum(const void* data, std::size_t bytes);

// The same checksum of bytes given in parts (a version's pieces in the
// memory level): digest() equals checksum() of the parts joined.
class PartsChecksum {
 public:
  PartsChecksum();  // std::bad_alloc when XXH3's state cannot be allocated
  ~PartsChecksum();
  PartsChecksum(const PartsChecksum&) = delete;
  PartsChecksum& operator=(const PartsChecksum&) = delete;

  void update(const void* data, std::size_t bytes);
  std::uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace resurgo
