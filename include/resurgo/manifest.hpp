// The job manifest of a version of an MPI store (docs/mpi.md, "How a
// checkpoint becomes a version of the job"): the second phase of its
// commit, and what `resurgo export` reads (tools::read_manifest). The job
// writes it and restart reads it through src/format/manifest.h, which
// encodes and decodes these records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace resurgo {

// One rank's container file of the version.
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
  std::string store_id;  // the store's identity (32 hex digits); "" in manifests written before stores had one
  int version = 0;
  int ranks = 0;
  std::vector<ManifestFile> files;      // one per rank, by rank
  std::vector<ManifestRegion> regions;  // by rank, then region id
};

}  // namespace resurgo
