#include "format/compress_probe.h"

#include <cstring>
#include <vector>

namespace resurgo {

namespace {

// Four 8 KiB slices: 32 KiB, under 1% of a default 4 MiB chunk. Slices
// spread over the chunk see its head, middle and tail. A slice shows the
// short-range redundancy these codecs mostly find; a chunk whose only
// redundancy lies farther apart than a slice is stored raw, an accepted
// loss for never compressing noise whole.
constexpr std::size_t kSlices = 4;
constexpr std::size_t kSliceBytes = 8u << 10;
// Below this size the sample would cost a quarter or more of the chunk.
constexpr std::size_t kMinProbedBytes = 4 * kSlices * kSliceBytes;
// A sample compresses worse than its chunk (less history, framing paid on
// fewer bytes), so the cut is low: incompressible data expand by their
// framing and never save 1/32, while data that save less than that are not
// worth a decompression on every restart either.
constexpr std::size_t kMinSavingDivisor = 32;

// The slices, copied back to back. Offsets and lengths are multiples of the
// element size so that a shuffle sees whole elements.
std::vector<std::byte> take_sample(const std::byte* raw, std::size_t raw_bytes, std::size_t element_size) {
  const std::size_t unit = element_size == 0 || element_size > kSliceBytes ? 1 : element_size;
  const std::size_t slice = kSliceBytes / unit * unit;
  const std::size_t stride = (raw_bytes - slice) / (kSlices - 1) / unit * unit;
  std::vector<std::byte> sample(kSlices * slice);
  for (std::size_t i = 0; i < kSlices; ++i) std::memcpy(sample.data() + i * slice, raw + i * stride, slice);
  return sample;
}

}  // namespace

bool sample_compresses(const format::EncodeParams& params, const std::byte* raw, std::size_t raw_bytes) {
  if (raw_bytes < kMinProbedBytes) return true;
  const std::vector<std::byte> sample = take_sample(raw, raw_bytes, params.element_size);
  std::vector<std::byte> stored;
  if (!format::encode(params, sample.data(), sample.size(), stored)) return false;
  return stored.size() <= sample.size() - sample.size() / kMinSavingDivisor;
}

}  // namespace resurgo
