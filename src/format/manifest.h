// Job manifest: the second phase of an MPI version's commit (DESIGN.md,
// "File format"). Once every rank's container of a version is committed at a
// level, one rank writes the manifest there: the job's ranks, each rank's
// file with its size and header+index checksum, and the global layout of the
// regions. A version of an MPI store exists for restart only where its
// manifest does. Stored as JSON (readable by `resurgo export` and by
// people) followed by a line with the XXH3-64 of the JSON in hex.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "resurgo/env.hpp"
#include "resurgo/manifest.hpp"

namespace resurgo::format {

inline constexpr std::size_t kMaxManifestBytes = 256u << 20;  // bounds a hostile file before reading it
inline constexpr std::size_t kMaxJsonDepth = 32;  // nesting of a manifest's JSON (it needs four levels)

// The records are public (resurgo/manifest.hpp: tools::read_manifest returns
// them); this header encodes, decodes and reads them.
using resurgo::Manifest;
using resurgo::ManifestFile;
using resurgo::ManifestRegion;

std::string encode_manifest(const Manifest& manifest);
// Throws CorruptionError (checksum, truncation) or FormatError (not a
// manifest, unsupported version, JSON nested deeper than kMaxJsonDepth, a
// number out of its field's range, a file other than the container of its
// version and rank, inconsistent content), naming `path`.
Manifest decode_manifest(const std::string& text, const std::string& path);

// One rank's part (its file and regions), exchanged before rank 0 joins them.
std::string encode_manifest_part(const ManifestFile& file, const std::vector<ManifestRegion>& regions);
void decode_manifest_part(const std::string& text, Manifest& into);

// The text of a manifest file (not decoded). CorruptionError for one larger
// than any manifest can be.
std::string read_manifest_file(const ReadableFile& file);

}  // namespace resurgo::format
