#include "base/stream_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace resurgo {

#if defined(__SSE2__)
// SSE2 is part of x86-64, so no dispatch: four 16-byte streaming stores
// fill one line of the write-combining buffer, which goes to memory whole,
// as a wider store's would.
void copy_around_caches(void* destination, const void* source, std::size_t bytes) {
  constexpr std::size_t kLine = 64;
  auto* to = static_cast<std::byte*>(destination);
  const auto* from = static_cast<const std::byte*>(source);
  const std::size_t head = std::min(bytes, (kLine - reinterpret_cast<std::uintptr_t>(to) % kLine) % kLine);
  std::memcpy(to, from, head);
  std::size_t done = head;
  for (; done + kLine <= bytes; done += kLine) {
    const auto* in = reinterpret_cast<const __m128i*>(from + done);
    auto* out = reinterpret_cast<__m128i*>(to + done);
    const __m128i a = _mm_loadu_si128(in);
    const __m128i b = _mm_loadu_si128(in + 1);
    const __m128i c = _mm_loadu_si128(in + 2);
    const __m128i d = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, d);
  }
  std::memcpy(to + done, from + done, bytes - done);
  _mm_sfence();
}
#else
void copy_around_caches(void* destination, const void* source, std::size_t bytes) {
  if (bytes > 0) std::memcpy(destination, source, bytes);
}
#endif

}  // namespace resurgo
