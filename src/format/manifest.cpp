#include "format/manifest.h"

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "format/container.h"
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

ManifestFile file_from(const Json& json) {
  ManifestFile file;
  file.rank = json.at("rank").get<int>();
  file.node = json.at("node").get<int>();
  file.file = json.at("file").get<std::string>();
  file.bytes = json.at("bytes").get<std::uint64_t>();
  file.checksum = std::stoull(json.at("checksum").get<std::string>(), nullptr, 16);
  return file;
}

ManifestRegion region_from(const Json& json) {
  ManifestRegion region;
  region.rank = json.at("rank").get<int>();
  region.id = json.at("id").get<int>();
  region.label = json.at("label").get<std::string>();
  region.dtype = json.at("dtype").get<std::string>();
  region.bytes = json.at("bytes").get<std::uint64_t>();
  region.shape = json.at("shape").get<std::vector<std::int64_t>>();
  region.global_shape = json.at("global_shape").get<std::vector<std::int64_t>>();
  region.offset = json.at("offset").get<std::vector<std::int64_t>>();
  return region;
}

void check_consistent(const Manifest& manifest, const std::string& path) {
  const auto bad = [&](const std::string& what) { throw FormatError("job manifest '" + path + "': " + what); };
  if (manifest.ranks <= 0 || manifest.files.size() != static_cast<std::size_t>(manifest.ranks)) {
    bad("lists " + std::to_string(manifest.files.size()) + " files for " + std::to_string(manifest.ranks) + " ranks");
  }
  for (std::size_t rank = 0; rank < manifest.files.size(); ++rank) {
    if (manifest.files[rank].rank != static_cast<int>(rank)) bad("file " + std::to_string(rank) + " names another rank");
  }
  for (const ManifestRegion& region : manifest.regions) {
    if (region.rank < 0 || region.rank >= manifest.ranks) bad("region '" + region.label + "' names no rank of the job");
    const std::size_t axes = region.global_shape.size();
    if (axes > 0 && (region.offset.size() != axes || region.shape.size() != axes)) {
      bad("region '" + region.label + "' of rank " + std::to_string(region.rank) +
          " has a global shape, offset and shape of different lengths");
    }
    for (std::size_t axis = 0; axis < axes; ++axis) {
      if (region.offset[axis] < 0 || region.shape[axis] < 0 ||
          region.offset[axis] + region.shape[axis] > region.global_shape[axis]) {
        bad("region '" + region.label + "' of rank " + std::to_string(region.rank) + " lies outside its global array");
      }
    }
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
    throw CorruptionError("job manifest '" + path + "' is truncated (no checksum line)");
  }
  const std::string body = text.substr(0, newline);
  if (hex(checksum(body.data(), body.size())) != text.substr(newline + 1, 16)) {
    throw CorruptionError("job manifest '" + path + "': checksum does not match its content");
  }
  try {
    const Json json = Json::parse(body);
    if (json.at("resurgo_job_manifest").get<int>() != kManifestFormat) {
      throw FormatError("job manifest '" + path + "' has an unsupported format " +
                        json.at("resurgo_job_manifest").dump());
    }
    Manifest manifest;
    manifest.store = json.at("store").get<std::string>();
    if (json.contains("store_id")) manifest.store_id = json.at("store_id").get<std::string>();
    manifest.version = json.at("version").get<int>();
    manifest.ranks = json.at("ranks").get<int>();
    for (const Json& file : json.at("files")) manifest.files.push_back(file_from(file));
    for (const Json& region : json.at("regions")) manifest.regions.push_back(region_from(region));
    check_consistent(manifest, path);
    return manifest;
  } catch (const Json::exception& error) {
    throw FormatError("job manifest '" + path + "' is not a Resurgo manifest: " + error.what());
  } catch (const std::logic_error&) {
    throw FormatError("job manifest '" + path + "' holds a checksum that is not hexadecimal");
  }
}

std::string encode_manifest_part(const ManifestFile& file, const std::vector<ManifestRegion>& regions) {
  Json json{{"file", file_json(file)}, {"regions", Json::array()}};
  for (const ManifestRegion& region : regions) json["regions"].push_back(region_json(region));
  return json.dump();
}

void decode_manifest_part(const std::string& text, Manifest& into) {
  const Json json = Json::parse(text);
  into.files.push_back(file_from(json.at("file")));
  for (const Json& region : json.at("regions")) into.regions.push_back(region_from(region));
}

std::string read_manifest_file(const ReadableFile& file) {
  if (file.size() > kMaxManifestBytes) {
    throw CorruptionError("job manifest '" + file.path() + "' is " + std::to_string(file.size()) +
                          " bytes, more than any manifest can be");
  }
  std::string text(file.size(), '\0');
  file.read_at(0, text.data(), text.size());
  return text;
}

}  // namespace resurgo::format
