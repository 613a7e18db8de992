// Hostile files for the readers: containers whose lengths and counts lie
// behind a valid header+index checksum, job manifests with a valid checksum
// line, and TOML nested without end. Each is what an attacker can write,
// built so that the check meant to refuse it is the one reached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "format/container.h"

namespace resurgo::security {

// One chunk of a hand-made container: its record (region, offset,
// raw_length, codec; the stored length and checksum are filled in from
// `stored`) and its stored bytes. `wrong_checksum` records another checksum.
struct HostileChunk {
  format::ChunkRecord record;
  std::vector<std::byte> stored;
  bool wrong_checksum = false;
};

// A container written by the library's own writer from the parts given:
// nothing is checked, so lengths may lie.
std::vector<std::byte> container_with(const format::Header& header, const std::vector<HostileChunk>& chunks);

// Version 1 of store "bomb", whose only region "bomb" of `raw_length` bytes
// (chunk size `raw_length`) is held by one chunk of `codec` claiming
// `raw_length` raw bytes and storing `stored` (a "bomb" when stored is small).
std::vector<std::byte> one_chunk_container(Codec codec, std::uint64_t raw_length, std::vector<std::byte> stored,
                                           bool wrong_checksum);

// `bytes` zero bytes compressed with `codec` (a codec's best ratio).
std::vector<std::byte> compressed_zeros(Codec codec, std::size_t bytes);

// A container of no chunk whose header is the fixed fields of a version 2
// header followed by `region_table` as given (region count, entries,
// metadata length and metadata: counts and lengths may lie), with a
// matching footer checksum.
std::vector<std::byte> container_with_region_table(const std::vector<std::byte>& region_table);

// `count` region entries of 25 bytes each (no label, no dtype, no shape),
// preceded by `claimed` as the region count and followed by an empty
// metadata field: a region table that takes little room per entry.
std::vector<std::byte> minimal_region_table(std::uint32_t claimed, std::size_t count);

// A job manifest of `json` with its checksum line.
std::string manifest_with(const std::string& json);

// The JSON of version 1 of a one-rank job whose rank-0 file is named `file`
// (as is, between quotes) and whose one region has the members `region`
// after "rank":0,"id":0.
std::string one_rank_json(const std::string& file, const std::string& region);

// `levels` nested JSON arrays, with a valid checksum line.
std::string deep_json_manifest(std::size_t levels);

// A TOML table header of `levels` dotted parts: [a.a.a...].
std::string deep_toml_header(std::size_t levels);

std::vector<std::byte> as_bytes(const std::string& text);

}  // namespace resurgo::security
