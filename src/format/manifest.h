// Job manifest: the second phase of an MPI version's commit (DESIGN.md,
// "File format"). Once every rank's container of a version is committed at a
// level, one rank writes the manifest there: the job's ranks, each rank's
// file with its size and header+index checksum, and the global layout of the
// regions. A version of an MPI store exists for restart only where its
// manifest does. Stored as JSON (readable by `resurgo export` and by
// people) followed by a line with the XXH3-64 of the JSON in hex.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace resurgo::format {

inline constexpr std::size_t kMaxManifestBytes = 256u << 20;  // bounds a hostile file before reading it

struct ManifestFile {
  int rank = 0;
  int node = 0;
  std::string file;  // container file name, in the level's store directory
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;  // the container's header+index checksum (its footer)
};

// One region of one rank; a block of a global array when global_shape is not
// empty (its element offset in the global array is `offset`, its shape
// `shape`, row-major).
struct ManifestRegion {
  int rank = 0;
  int id = 0;
  std::string label;
  std::string dtype;
  std::uint64_t bytes = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> global_shape;
  std::vector<std::int64_t> offset;
};

struct Manifest {
  std::string store;
  int version = 0;
  int ranks = 0;
  std::vector<ManifestFile> files;      // one per rank, by rank
  std::vector<ManifestRegion> regions;  // by rank, then region id
};

std::string encode_manifest(const Manifest& manifest);
// Throws CorruptionError (checksum, truncation) or FormatError (not a
// manifest, unsupported version, inconsistent content), naming `path`.
Manifest decode_manifest(const std::string& text, const std::string& path);

// One rank's part (its file and regions), exchanged before rank 0 joins them.
std::string encode_manifest_part(const ManifestFile& file, const std::vector<ManifestRegion>& regions);
void decode_manifest_part(const std::string& text, Manifest& into);

// "v0000000012.job" and back; the parser rejects anything else.

}  // namespace resurgo::format
