#include "base/checksum.h"

#include <new>

#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
// Routes XXH3 calls to libxxhash's run-time dispatch (AVX2/AVX-512 where the
// CPU has them); the portable build is SSE2 only and half as fast.
#include <xxh_x86dispatch.h>
#endif

namespace resurgo {

std::uint64_t checksum(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

struct PartsChecksum::State {
  XXH3_state_t* xxh3 = XXH3_createState();
  ~State() { XXH3_freeState(xxh3); }
};

PartsChecksum::PartsChecksum() : state_(std::make_unique<State>()) {
  if (state_->xxh3 == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state_->xxh3);
}

PartsChecksum::~PartsChecksum() = default;

void PartsChecksum::update(const void* data, std::size_t bytes) { XXH3_64bits_update(state_->xxh3, data, bytes); }

std::uint64_t PartsChecksum::digest() const { return XXH3_64bits_digest(state_->xxh3); }

}  // namespace resurgo
