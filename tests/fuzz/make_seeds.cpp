// Writes the container seed corpus with the library's own ContainerWriter:
//   build/fuzz/make_seeds tests/fuzz/corpus/container
// Small files (well under 8 KiB each) covering the codecs (none, lz4, zstd,
// blosc-lz4 and blosc-zstd with a byte shuffle by the dtype's element size,
// and incompressible chunks stored raw), 0-4 regions of every kind with
// dtype and shape, managed regions recording their device (format version
// 3), metadata, delta base versions (a delta holding every
// chunk, one holding every other chunk, one holding none), regions split
// into many chunks written out of order, and an empty region. Each file is read back
// and verified before it is kept.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "format/codec.h"
#include "format/container.h"
#include "format/element_size.h"
#include "io/bytes_file.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace {

using namespace resurgo;
using namespace resurgo::format;

struct Region {
  RegionEntry entry;
  std::vector<std::uint8_t> data;
};

std::vector<std::uint8_t> pattern(std::size_t n, bool compressible, std::uint32_t seed) {
  std::vector<std::uint8_t> out(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    out[i] = compressible ? static_cast<std::uint8_t>((i / 16) % 7 + 'a') : static_cast<std::uint8_t>(x >> 24);
  }
  return out;
}

Region region(std::int32_t id, const char* label, RegionKind kind, std::vector<std::uint8_t> data,
              const char* dtype = "", std::vector<std::int64_t> shape = {}) {
  Region r;
  r.entry.id = id;
  r.entry.label = label;
  r.entry.kind = kind;
  r.entry.bytes = data.size();
  r.entry.dtype = dtype;
  r.entry.shape = std::move(shape);
  r.data = std::move(data);
  return r;
}

// Which chunks a seed holds: all (a full version, or a delta that rewrote
// everything), every other one (a sparse delta: gaps the base holds), none
// (a delta of a version nothing was written since).
enum class Extents { kAll, kEveryOther, kNone };

// `codecs` is cycled over the chunks; `reverse` writes each region's chunks
// last to first (the reader must not rely on file order).
void write_seed(const std::string& dir, const std::string& name, std::vector<Region> regions,
                std::uint64_t chunk_size, std::vector<Codec> codecs, bool reverse = false,
                std::int64_t base_version = -1, std::string metadata = "", Extents extents = Extents::kAll) {
  Header header;
  header.store = "seed-" + name;
  header.version = 7;
  header.rank = 1;
  header.base_version = base_version;
  header.created_unix_ns = 1700000000000000000ull;
  header.chunk_size = chunk_size;
  for (const Region& r : regions) header.regions.push_back(r.entry);
  for (char c : metadata) header.metadata.push_back(static_cast<std::byte>(c));

  BytesFile file("seed");
  ContainerWriter writer(file, header);
  std::size_t next_codec = 0;
  for (std::uint32_t index = 0; index < regions.size(); ++index) {
    const auto& data = regions[index].data;
    const std::size_t element_size = format::element_size(regions[index].entry.dtype);
    std::vector<std::uint64_t> offsets;
    for (std::uint64_t offset = 0; offset < data.size(); offset += chunk_size) {
      const bool held = extents == Extents::kAll || (extents == Extents::kEveryOther && offset / chunk_size % 2 == 0);
      if (held) offsets.push_back(offset);
    }
    if (reverse) std::reverse(offsets.begin(), offsets.end());
    for (std::uint64_t offset : offsets) {
      const std::uint64_t raw = std::min<std::uint64_t>(chunk_size, data.size() - offset);
      const Codec wanted = codecs[next_codec++ % codecs.size()];
      std::vector<std::byte> stored;
      ChunkRecord record;
      record.region = index;
      record.offset = offset;
      record.raw_length = raw;
      const void* bytes = data.data() + offset;
      if (encode({wanted, 3, Shuffle::kByte, element_size}, bytes, raw, stored)) {
        record.codec = wanted;
        bytes = stored.data();
        record.stored_length = stored.size();
      } else {
        record.codec = Codec::kNone;
        record.stored_length = raw;
      }
      record.checksum = checksum(bytes, record.stored_length);
      writer.add_chunk(record, bytes);
    }
  }
  writer.finish();

  const Container container = read_container(file);  // throws if the writer and reader disagree
  verify_chunks(file, container, [](std::uint64_t, std::uint64_t) {});
  const std::string path = dir + "/" + name + ".rsg";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(file.bytes().data()), static_cast<std::streamsize>(file.bytes().size()));
  if (!out) throw StorageError("cannot write " + path);
  std::printf("%s: %zu bytes, %zu chunks\n", path.c_str(), file.bytes().size(), container.chunks.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  constexpr std::uint64_t k64KiB = 64u << 10;
  try {
    write_seed(dir, "none-1region", {region(0, "u", RegionKind::kHost, pattern(300, false, 1))}, k64KiB,
               {Codec::kNone});
    write_seed(dir, "lz4-2regions-metadata",
               {region(0, "field", RegionKind::kHost, pattern(1500, true, 2), "float64", {15, 10}),
                region(3, "step", RegionKind::kHost, pattern(8, false, 3), "int64", {})},
               k64KiB, {Codec::kLz4}, false, -1, "step=42;t=0.125");
    write_seed(dir, "zstd-3regions-kinds",
               {region(1, "host", RegionKind::kHost, pattern(900, true, 4), "float32", {15, 15, 1}),
                region(2, "device", RegionKind::kDevice, pattern(600, true, 5), "uint8", {600}),
                region(5, "managed", RegionKind::kManaged, pattern(200, false, 6))},
               k64KiB, {Codec::kZstd});
    write_seed(dir, "none-small-chunks-reversed",
               {region(0, "a", RegionKind::kHost, pattern(500, false, 7)),
                region(1, "b", RegionKind::kHost, pattern(300, false, 8))},
               128, {Codec::kNone}, true);
    write_seed(dir, "mixed-codecs-delta",
               {region(0, "grid", RegionKind::kHost, pattern(1400, true, 9), "float64", {7, 25}),
                region(1, "noise", RegionKind::kHost, pattern(400, false, 10))},
               256, {Codec::kLz4, Codec::kZstd, Codec::kNone}, false, 3, "delta of 3");
    write_seed(dir, "metadata-only", {}, k64KiB, {Codec::kNone}, false, -1,
               "{\"epoch\": 3, \"loss\": 0.25}");
    write_seed(dir, "empty-region",
               {region(0, "empty", RegionKind::kHost, {}, "float64", {0, 4}),
                region(1, "x", RegionKind::kHost, pattern(64, true, 11))},
               k64KiB, {Codec::kLz4});
    write_seed(dir, "zstd-incompressible",
               {region(0, "random", RegionKind::kHost, pattern(1024, false, 12))}, 512,
               {Codec::kZstd, Codec::kLz4});
    write_seed(dir, "blosc-shuffled-float32",
               {region(0, "field", RegionKind::kHost, pattern(1200, true, 13), "float32", {300}),
                region(1, "odd", RegionKind::kHost, pattern(998, true, 14), "float64", {})},
               512, {Codec::kBloscLz4, Codec::kBloscZstd});
    write_seed(dir, "delta-sparse-reversed",
               {region(0, "grid", RegionKind::kHost, pattern(1300, true, 15), "float64", {13, 12}),
                region(1, "noise", RegionKind::kHost, pattern(700, false, 16))},
               128, {Codec::kNone, Codec::kLz4}, true, 6, "sparse delta of 6", Extents::kEveryOther);
    write_seed(dir, "delta-nothing-written", {region(0, "u", RegionKind::kHost, pattern(500, true, 17))}, 128,
               {Codec::kNone}, false, 0, "", Extents::kNone);
    // Format version 3: managed regions recording a device, the host, and
    // nothing (docs/format.md, "Header").
    Region on_device = region(0, "on-device-1", RegionKind::kManaged, pattern(600, true, 18), "float32", {150});
    on_device.entry.device = 1;
    Region on_host = region(1, "on-host", RegionKind::kManaged, pattern(200, false, 19));
    on_host.entry.device = kDeviceHost;
    write_seed(dir, "managed-device-record",
               {on_device, on_host, region(2, "unplaced", RegionKind::kManaged, pattern(100, true, 20)),
                region(3, "host", RegionKind::kHost, pattern(50, true, 21))},
               256, {Codec::kLz4, Codec::kNone});
  } catch (const resurgo::Error& error) {
    std::fprintf(stderr, "make_seeds: %s\n", error.what());
    return 1;
  }
  return 0;
}
