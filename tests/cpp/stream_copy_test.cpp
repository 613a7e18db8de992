// base/stream_copy.h: copies every byte, from and to every alignment within
// a line, at lengths around the line (64 bytes) and writes nothing outside
// the destination.
#include "base/stream_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace resurgo {
namespace {

TEST(StreamCopyTest, CopiesEveryByteAtEveryAlignmentAndLength) {
  std::vector<std::byte> source(70000);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  std::vector<std::byte> destination(source.size() + 256);
  std::vector<std::size_t> lengths;
  for (std::size_t bytes = 0; bytes <= 200; ++bytes) lengths.push_back(bytes);
  for (std::size_t bytes : {4095u, 4096u, 4097u, 65536u + 63}) lengths.push_back(bytes);
  for (const std::size_t bytes : lengths) {
    for (std::size_t shift = 0; shift < 64; shift += 7) {
      std::fill(destination.begin(), destination.end(), std::byte{0xEE});
      const std::byte* from = source.data() + (shift * 3) % 64;
      std::byte* to = destination.data() + 64 + shift;
      copy_around_caches(to, from, bytes);
      ASSERT_TRUE(std::equal(from, from + bytes, to)) << bytes << " bytes, shift " << shift << ": copied wrong";
      ASSERT_EQ(to[bytes], std::byte{0xEE}) << bytes << " bytes, shift " << shift << ": written past the end";
      ASSERT_EQ(to[-1], std::byte{0xEE}) << bytes << " bytes, shift " << shift << ": written before the start";
    }
  }
}

}  // namespace
}  // namespace resurgo
