#include "format/manifest.h"

#include <charconv>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "format/bytes.h"
#include "format/container.h"
#include "format/file_names.h"
#include "base/printable.h"
#include "resurgo/errors.hpp"

namespace resurgo::format {

namespace {

constexpr int kManifestFormat = 1;
using Json = nlohmann::json;

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

Json file_json(const ManifestFile& file) {
  return {{"rank", file.rank}, {"node", file.node}, {"file", file.file}, {"bytes", file.bytes},
          {"checksum", hex(file.checksum)}};
}

Json region_json(const ManifestRegion& region) {
  return {{"rank", region.rank},   {"id", region.id},       {"label", region.label},
          {"dtype", region.dtype}, {"bytes", region.bytes}, {"shape", region.shape},
          {"global_shape", region.global_shape}, {"offset", region.offset}};
}

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw FormatError(where + ": " + what);
}

// Parses JSON nested at most kMaxJsonDepth levels deep: a manifest nests
// four, and a deeper text is hostile (each level costs the parser memory).
Json parse_json(std::string_view text, const std::string& where) {
  return Json::parse(text, [&](int depth, Json::parse_event_t event, Json&) {
    const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    if (opens && depth >= static_cast<int>(kMaxJsonDepth)) {
      refuse(where, "its JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    return true;
  });
}

// A number as it is, anything else by its type: a string or an object may
// be as large as the manifest.
std::string shown(const Json& value) { return value.is_number() ? value.dump() : std::string("a ") + value.type_name(); }

// `value` as an integer of type T: nlohmann would convert a fraction or an
// out-of-range number without a word (a float out of T's range is
// undefined behaviour).
template <class T>
T integer(const Json& value, const char* name, const std::string& where) {
  if (value.is_number_unsigned()) {
    const auto number = value.get<std::uint64_t>();
    if (number <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(number);
  } else if (value.is_number_integer()) {
    const auto number = value.get<std::int64_t>();
    if (std::in_range<T>(number)) return static_cast<T>(number);
  }
  refuse(where, std::string("'") + name + "' holds " + shown(value) + ", not an integer in the range of its field");
}

template <class T>
T field(const Json& json, const char* key, const std::string& where) {
  return integer<T>(json.at(key), key, where);
}

std::vector<std::int64_t> integers(const Json& json, const char* key, const std::string& where) {
  std::vector<std::int64_t> out;
  for (const Json& value : json.at(key)) out.push_back(integer<std::int64_t>(value, key, where));
  return out;
}

std::uint64_t hex_value(const std::string& text, const std::string& where) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (text.size() != 16 || error != std::errc() || end != text.data() + text.size()) {
    refuse(where, "checksum '" + printable(text) + "' is not 16 hexadecimal digits");
  }
  return value;
}

ManifestFile file_from(const Json& json, const std::string& where) {
  ManifestFile file;
  file.rank = field<int>(json, "rank", where);
  file.node = field<int>(json, "node", where);
  file.file = json.at("file").get<std::string>();
  file.bytes = field<std::uint64_t>(json, "bytes", where);
  file.checksum = hex_value(json.at("checksum").get<std::string>(), where);
  return file;
}

ManifestRegion region_from(const Json& json, const std::string& where) {
  ManifestRegion region;
  region.rank = field<int>(json, "rank", where);
  region.id = field<int>(json, "id", where);
  region.label = json.at("label").get<std::string>();
  region.dtype = json.at("dtype").get<std::string>();
  region.bytes = field<std::uint64_t>(json, "bytes", where);
  region.shape = integers(json, "shape", where);
  region.global_shape = integers(json, "global_shape", where);
  region.offset = integers(json, "offset", where);
  return region;
}

// Each rank's file is the container of its rank and of the manifest's
// version, in the manifest's own directory: a name with a '/' or "..",
// or another version's file, would make `resurgo export` read elsewhere.
void check_files(const Manifest& manifest, const std::string& where) {
  if (manifest.ranks <= 0 || manifest.files.size() != static_cast<std::size_t>(manifest.ranks)) {
    refuse(where, "lists " + std::to_string(manifest.files.size()) + " files for " + std::to_string(manifest.ranks) +
                      " ranks");
  }
  for (std::size_t rank = 0; rank < manifest.files.size(); ++rank) {
    const ManifestFile& file = manifest.files[rank];
    if (file.rank != static_cast<int>(rank)) refuse(where, "file " + std::to_string(rank) + " names another rank");
    int version = 0;
    int named_rank = 0;
    if (!parse_container_file_name(file.file, version, named_rank) || version != manifest.version ||
        named_rank != file.rank) {
      refuse(where, "rank " + std::to_string(rank) + "'s file is '" + printable(file.file) + "', not " +
                        container_file_name(manifest.version, file.rank) +
                        " (a manifest names only its version's files in its own directory)");
    }
  }
}

// A block of a global array lies inside it, every extent and element count
// fitting in 64 bits (restart computes byte offsets from them).
void check_block(const ManifestRegion& region, const std::string& where) {
  const std::string which = "region '" + printable(region.label) + "' of rank " + std::to_string(region.rank);
  const std::size_t axes = region.global_shape.size();
  if (axes > 0 && (region.offset.size() != axes || region.shape.size() != axes)) {
    refuse(where, which + " has a global shape, offset and shape of different lengths");
  }
  std::optional<std::int64_t> elements = 1;
  for (std::size_t axis = 0; axis < axes && elements; ++axis) {
    const std::optional<std::int64_t> end = checked_add(region.offset[axis], region.shape[axis]);
    if (region.offset[axis] < 0 || region.shape[axis] < 0 || !end || *end > region.global_shape[axis]) {
      refuse(where, which + " lies outside its global array on axis " + std::to_string(axis));
    }
    elements = checked_mul(*elements, region.global_shape[axis]);
  }
  if (!elements) refuse(where, which + " is a block of a global array of more than 2^63 elements");
}

void check_consistent(const Manifest& manifest, const std::string& where) {
  check_files(manifest, where);
  for (const ManifestRegion& region : manifest.regions) {
    if (region.rank < 0 || region.rank >= manifest.ranks) {
      refuse(where, "region '" + printable(region.label) + "' names no rank of the job");
    }
    check_block(region, where);
  }
}

}  // namespace

std::string encode_manifest(const Manifest& manifest) {
  Json files = Json::array();
  for (const ManifestFile& file : manifest.files) files.push_back(file_json(file));
  Json regions = Json::array();
  for (const ManifestRegion& region : manifest.regions) regions.push_back(region_json(region));
  const std::string body = Json{{"resurgo_job_manifest", kManifestFormat}, {"store", manifest.store},
                                {"store_id", manifest.store_id}, {"version", manifest.version},
                                {"ranks", manifest.ranks},
                                {"files", files},           {"regions", regions}}
                               .dump();
  return body + "\n" + hex(checksum(body.data(), body.size())) + "\n";
}

Manifest decode_manifest(const std::string& text, const std::string& path) {
  const auto newline = text.size() > 18 ? text.rfind('\n', text.size() - 2) : std::string::npos;
  if (newline == std::string::npos || text.back() != '\n' || text.size() - newline != 18) {
    throw CorruptionError("job manifest '" + printable(path) + "' is truncated (no checksum line)");
  }
  const std::string_view body(text.data(), newline);  // not copied: a manifest may be large
  if (hex(checksum(body.data(), body.size())) != std::string_view(text).substr(newline + 1, 16)) {
    throw CorruptionError("job manifest '" + printable(path) + "': checksum does not match its content");
  }
  const std::string where = "job manifest '" + printable(path) + "'";
  try {
    const Json json = parse_json(body, where);
    if (json.at("resurgo_job_manifest") != kManifestFormat) {
      refuse(where, "has an unsupported format " + shown(json.at("resurgo_job_manifest")));
    }
    Manifest manifest;
    manifest.store = json.at("store").get<std::string>();
    if (json.contains("store_id")) manifest.store_id = json.at("store_id").get<std::string>();
    manifest.version = field<int>(json, "version", where);
    manifest.ranks = field<int>(json, "ranks", where);
    for (const Json& file : json.at("files")) manifest.files.push_back(file_from(file, where));
    for (const Json& region : json.at("regions")) manifest.regions.push_back(region_from(region, where));
    check_consistent(manifest, where);
    return manifest;
  } catch (const Json::exception& error) {
    throw FormatError(where + " is not a Resurgo manifest: " + error.what());
  }
}

std::string encode_manifest_part(const ManifestFile& file, const std::vector<ManifestRegion>& regions) {
  Json json{{"file", file_json(file)}, {"regions", Json::array()}};
  for (const ManifestRegion& region : regions) json["regions"].push_back(region_json(region));
  return json.dump();
}

void decode_manifest_part(const std::string& text, Manifest& into) {
  const std::string where = "manifest part of rank " + std::to_string(into.files.size());
  const Json json = parse_json(text, where);
  into.files.push_back(file_from(json.at("file"), where));
  for (const Json& region : json.at("regions")) into.regions.push_back(region_from(region, where));
}

std::string read_manifest_file(const ReadableFile& file) {
  if (file.size() > kMaxManifestBytes) {
    throw CorruptionError("job manifest '" + printable(file.path()) + "' is " + std::to_string(file.size()) +
                          " bytes, more than any manifest can be");
  }
  std::string text(file.size(), '\0');
  file.read_at(0, text.data(), text.size());
  return text;
}

}  // namespace resurgo::format
