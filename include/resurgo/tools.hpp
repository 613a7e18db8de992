// Reading a store's files without opening the store: what `resurgo ls`,
// `inspect`, `verify` and `export` show, and what the Python package needs
// beside the Store. Every reader checks what it reads as restart does
// (bounds, checksums) and throws FormatError for a file that is no Resurgo
// file, CorruptionError for a damaged one, NotFoundError for one that is not
// there, each naming the path. remove_version() (`resurgo rm`) is in
// resurgo.hpp: it takes the store's locks, as a store does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "resurgo/manifest.hpp"
#include "resurgo/resurgo.hpp"

namespace resurgo::tools {

// What container format 3 records for a managed region that was on the
// host when its version was taken, and for one the driver could not place
// (never prefetched, or parts of it prefetched to different places): the
// values of the file (docs/format.md, "Header").
inline constexpr int kRecordedHost = -1;
inline constexpr int kRecordedUnknown = -2;

// An entry of a container's region table.
struct ContainerRegion : RegionDescription {
  // Where a managed region was when its version was taken, as container
  // format 3 records it: a device ordinal (>= 0), kRecordedHost or
  // kRecordedUnknown; restart prefetches the region back there (docs/gpu.md,
  // "Managed memory"). None where nothing is recorded: host and device
  // regions, and every region of a format 1 or 2 file (restart then puts a
  // managed region on the store's device). Not part of the table a delta
  // shares with its base: pages move between versions.
  std::optional<int> device = std::nullopt;
};

// The header of a container file (docs/format.md): one version of one rank.
struct ContainerHeader {
  std::string store;
  std::int64_t version = 0;
  std::uint32_t rank = 0;
  std::int64_t base_version = -1;  // the version a delta builds on; -1 for a full version
  std::uint64_t created_unix_ns = 0;
  std::uint64_t chunk_size = 0;
  std::vector<std::byte> metadata;
  std::vector<ContainerRegion> regions;  // the region table
};

// One entry of a container's index: where a chunk's bytes lie and how they
// are stored.
struct ChunkInfo {
  std::uint32_t region = 0;  // index into ContainerHeader::regions
  std::uint64_t offset = 0;  // byte offset inside the region
  std::uint64_t raw_length = 0;
  std::uint64_t stored_length = 0;
  std::string codec;            // "none", "lz4", "zstd", "blosc-lz4", "blosc-zstd"
  std::uint64_t checksum = 0;   // XXH3-64 of the stored bytes
  std::uint64_t file_offset = 0;  // where the stored bytes start in the file
};

// A container's header and index, as inspect() reads them (no chunk data).
struct ContainerInfo : ContainerHeader {
  // 1 to 3: 3 where a managed region records its device, 2 otherwise, 1 for
  // files of the releases before the store identity (docs/format.md, "Header").
  std::uint32_t format_version = 0;
  std::vector<ChunkInfo> chunks;  // in file order
  std::uint64_t file_size = 0;
  std::uint64_t index_offset = 0;
  std::uint64_t checksum = 0;  // of header and index, from the footer: identifies the file's content
};

// Parses and checks the header, index and footer of the container file
// `path` (structure, bounds, the header+index checksum); reads no chunk.
ContainerInfo inspect(const std::string& path);

struct VerifyReport {
  std::size_t chunks = 0;
  std::uint64_t bytes = 0;  // raw bytes of every chunk
};

// Called with the raw bytes verified so far and their total.
using VerifyProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;
inline constexpr std::uint64_t kVerifyProgressStep = 64u << 20;

// One rank's part of a shared file (persistent.layout = shared: one file
// per version for every rank, v0000000012.shared.rsg; docs/format.md).
struct SharedPartInfo {
  int rank = 0;
  std::uint64_t offset = 0;  // where the part starts in the shared file
  std::uint64_t bytes = 0;
  ContainerInfo container;  // the part as the container file it was (offsets from the part's start)
};

struct SharedFileInfo {
  std::int64_t version = 0;
  std::uint64_t file_size = 0;
  std::vector<SharedPartInfo> parts;  // by rank
};

// Parses and checks the shared file `path`: its part index, then each
// part's header, index and footer as inspect() does, against the version
// its name says, the part's rank and the checksum the index records; reads
// no chunk. InvalidArgumentError for a path not named as a shared file.
SharedFileInfo inspect_shared(const std::string& path);

// Full verification of the container file `path`: what inspect() checks,
// then every chunk (its record and its checksum). A file named as a version
// (v0000000012.r000003.rsg) must hold that version and rank; a shared file
// (v0000000012.shared.rsg) is checked part by part, each as a rank's file
// of that version. The store is not checked, so a file may be verified
// after being moved out of its store's directory. `progress` is called about every kVerifyProgressStep
// bytes and at the end; what it throws ends the verification.
VerifyReport verify(const std::string& path, const VerifyProgress& progress = {});

// Where read_region() puts a region of `bytes` bytes: called once, before
// any chunk is read, so that the caller allocates exactly what is needed
// (the Python package fills a bytes object in place: a region may be most
// of the memory).
using RegionDestination = std::function<void*(std::uint64_t bytes)>;

// Reads the region `region_id` of the full version in `path`, verifying
// every chunk, into the memory `destination` gives. InvalidArgumentError
// for a delta version (it holds only the blocks written since its base),
// NotFoundError for a region id the file does not have.
void read_region(const std::string& path, int region_id, const RegionDestination& destination);

// The job manifest of `version` in a level's store directory `store_dir`
// (<level path>/<store>, as `resurgo ls` shows), its checksum line and its
// content checked. NotFoundError when the directory holds none (a version
// of an MPI store that is not committed there).
Manifest read_manifest(const std::string& store_dir, int version);

// (version, rank) of a container file name such as v0000000012.r000003.rsg;
// none for any other name, including a quarantined copy's (.damaged).
std::optional<std::pair<int, int>> parse_container_file_name(const std::string& name);
// The version of a shared file's name such as v0000000012.shared.rsg; none
// for any other name, including a quarantined copy's (.damaged).
std::optional<int> parse_shared_file_name(const std::string& name);
// The version of a job manifest's file name such as v0000000012.job; none
// for any other name. A directory holding one is an MPI store's.
std::optional<int> parse_manifest_file_name(const std::string& name);

// "host", "device", "managed": how inspect(), describe() and the Python
// package name a region's kind.
const char* memory_kind_name(MemoryKind kind);
// The kind so named; InvalidArgumentError naming `name` and the kinds for
// any other name.
MemoryKind memory_kind_named(const std::string& name);

// What the CUDA driver says `pointer` is (host, device or managed memory)
// when this process has loaded the driver; none when it has not (the
// process then holds no CUDA memory) or when the driver does not know the
// pointer. Protect uses it to tell managed memory from device memory where
// the array's own description does not.
std::optional<MemoryKind> cuda_memory_kind(const void* pointer);

// For tests: one chunk of write_container(), stored uncompressed.
struct ChunkBytes {
  std::uint32_t region = 0;  // index into ContainerHeader::regions
  std::uint64_t offset = 0;  // byte offset inside the region
  std::span<const std::byte> bytes;
};

// For tests: writes the container file `path` (mode 0600) from given parts,
// such as a delta of chosen extents or a file a store would never write;
// in format version 3 when some region's device is other than none and
// kRecordedUnknown, as a store writes one, else in version 2;
// nothing is checked here, the readers' checks apply when it is read back.
// It is not how a store commits a version (no temporary, no rename, no
// directory sync). It lives in this public header rather than in a
// test-only library because the Python tests reach the library through the
// package's one extension module, whose bindings include public headers
// only; a second, test-only module would ship in every wheel all the same.
void write_container(const std::string& path, const ContainerHeader& header, const std::vector<ChunkBytes>& chunks);

}  // namespace resurgo::tools
