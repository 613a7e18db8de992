// base/copy_checksum.h: every one-pass kernel this CPU runs returns exactly
// checksum() of the bytes and copies them, at every length around XXH3's
// stripe (64 bytes), block (1,024) and short-input (240) bounds, from and to
// unaligned addresses, and writes nothing outside the destination.
#include "base/copy_checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstddef>
#include <string>
#include <vector>

#include "base/checksum.h"

namespace resurgo {
namespace {

std::vector<std::byte> copied_pattern(std::size_t bytes) {
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  return data;
}

std::vector<std::size_t> lengths() {
  std::vector<std::size_t> list;
  for (std::size_t bytes = 0; bytes <= 320; ++bytes) list.push_back(bytes);
  for (std::size_t bound : {1024u, 2048u, 4096u, 65536u, 262144u, 1048576u}) {
    for (std::size_t near : {bound - 65, bound - 64, bound - 1, bound, bound + 1, bound + 63, bound + 64}) {
      list.push_back(near);
    }
  }
  list.push_back(3 * 1048576 + 4099);
  return list;
}

std::vector<CopyKernel> kernels_here() {
  std::vector<CopyKernel> list;
  for (CopyKernel kernel : {CopyKernel::kTwoPass, CopyKernel::kAvx2, CopyKernel::kAvx512}) {
    if (runs(kernel)) list.push_back(kernel);
  }
  return list;
}

TEST(CopyChecksumTest, EveryKernelCopiesAndReturnsTheChecksumOfTheBytesAtEveryLength) {
  const std::vector<std::byte> source = copied_pattern(3 * 1048576 + 4099 + 64);
  std::vector<std::byte> destination(source.size() + 128);
  for (const CopyKernel kernel : kernels_here()) {
    SCOPED_TRACE("kernel " + std::to_string(static_cast<int>(kernel)));
    for (const std::size_t bytes : lengths()) {
      for (const std::size_t shift : {std::size_t{0}, std::size_t{5}}) {
        std::fill(destination.begin(), destination.end(), std::byte{0xEE});
        const std::byte* from = source.data() + shift;
        std::byte* to = destination.data() + 64 - shift;
        ASSERT_EQ(copy_checksum(kernel, to, from, bytes), checksum(from, bytes)) << bytes << " bytes, shift " << shift;
        ASSERT_TRUE(std::equal(from, from + bytes, to)) << bytes << " bytes copied wrong";
        ASSERT_EQ(to[bytes], std::byte{0xEE}) << bytes << " bytes: written past the end";
        ASSERT_EQ(to[-1], std::byte{0xEE}) << bytes << " bytes: written before the start";
      }
    }
  }
}

TEST(CopyChecksumTest, TheDefaultIsTheFastestKernelHere) {
  const std::vector<std::byte> source = copied_pattern(1048576 + 13);
  std::vector<std::byte> one(source.size());
  EXPECT_EQ(copy_checksum(one.data(), source.data(), source.size()), checksum(source.data(), source.size()));
  EXPECT_EQ(one, source);
  EXPECT_TRUE(runs(CopyKernel::kTwoPass));
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && XXH_VERSION_NUMBER == 801
  EXPECT_EQ(runs(CopyKernel::kAvx2), __builtin_cpu_supports("avx2") != 0);
#endif
}

// A changed byte anywhere (the first stripe, a middle one, the last one,
// which XXH3 hashes twice) changes the value.
TEST(CopyChecksumTest, AChangedByteAnywhereChangesTheChecksum) {
  const std::vector<std::byte> source = copied_pattern(262144 + 7);
  std::vector<std::byte> destination(source.size());
  for (const CopyKernel kernel : kernels_here()) {
    const std::uint64_t intact = copy_checksum(kernel, destination.data(), source.data(), source.size());
    for (const std::size_t at : {std::size_t{0}, source.size() / 2, source.size() - 60, source.size() - 1}) {
      std::vector<std::byte> damaged = source;
      damaged[at] ^= std::byte{0x01};
      EXPECT_NE(copy_checksum(kernel, destination.data(), damaged.data(), damaged.size()), intact)
          << "kernel " << static_cast<int>(kernel) << ", byte " << at;
    }
  }
}

}  // namespace
}  // namespace resurgo
