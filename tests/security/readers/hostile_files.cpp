#include "hostile_files.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "format/bytes.h"
#include "format/codec.h"
#include "io/bytes_file.h"

namespace resurgo::security {

namespace {

std::string hex16(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

std::vector<std::byte> container_with(const format::Header& header, const std::vector<HostileChunk>& chunks) {
  BytesFile file("hostile container");
  format::ContainerWriter writer(file, header);
  for (const HostileChunk& chunk : chunks) {
    format::ChunkRecord record = chunk.record;
    record.stored_length = chunk.stored.size();
    record.checksum = format::checksum(chunk.stored.data(), chunk.stored.size()) ^ (chunk.wrong_checksum ? 1u : 0u);
    writer.add_chunk(record, chunk.stored.data());
  }
  writer.finish();
  return file.take();
}

std::vector<std::byte> one_chunk_container(Codec codec, std::uint64_t raw_length, std::vector<std::byte> stored,
                                           bool wrong_checksum) {
  format::Header header;
  header.store = "bomb";
  header.version = 1;
  header.chunk_size = raw_length;
  header.regions = {format::RegionEntry{0, "bomb", format::RegionKind::kHost, raw_length, "", {}}};
  HostileChunk chunk;
  chunk.record.raw_length = raw_length;
  chunk.record.codec = codec;
  chunk.stored = std::move(stored);
  chunk.wrong_checksum = wrong_checksum;
  return container_with(header, {chunk});
}

std::vector<std::byte> compressed_zeros(Codec codec, std::size_t bytes) {
  const std::vector<std::byte> zeros(bytes);
  std::vector<std::byte> stored;
  if (!format::encode({codec, 9}, zeros.data(), zeros.size(), stored)) {
    throw std::runtime_error(std::string("cannot compress zeros with ") + to_string(codec));
  }
  return stored;
}

std::vector<std::byte> container_with_region_table(const std::vector<std::byte>& region_table) {
  std::vector<std::byte> header;
  format::ByteWriter out(header);
  out.put_bytes("RSGCKPT\0", 8);
  out.put(format::kFormatVersion);
  out.put(std::uint32_t{0});  // flags
  out.put(std::uint64_t{0});  // header length, patched below
  out.put_string("hostile");
  out.put_bytes(std::string(16, '\0').data(), 16);  // store identity
  out.put(std::int64_t{1});                          // version
  out.put(std::uint32_t{0});                         // rank
  out.put(std::int64_t{-1});                         // base version
  out.put(std::uint64_t{0});                         // created
  out.put(std::uint64_t{4096});                      // chunk size
  out.put_bytes(region_table.data(), region_table.size());
  const std::uint64_t header_length = header.size();
  std::memcpy(header.data() + 16, &header_length, sizeof header_length);

  std::vector<std::byte> file = header;
  file.resize(file.size() + 8);  // the index: zero chunks
  format::ByteWriter footer(file);
  footer.put(header_length);
  footer.put(header_length);    // index offset
  footer.put(std::uint64_t{8});  // index length
  footer.put(format::checksum(file.data(), header_length + 8));
  footer.put_bytes("RSGFOOT\0", 8);
  return file;
}

std::vector<std::byte> minimal_region_table(std::uint32_t claimed, std::size_t count) {
  std::vector<std::byte> table;
  table.reserve(4 + 25 * count + 8);
  format::ByteWriter out(table);
  out.put(claimed);
  for (std::size_t i = 0; i < count; ++i) {
    out.put(static_cast<std::int32_t>(i));
    out.put(std::uint32_t{0});  // label length
    out.put(std::uint8_t{0});   // host
    out.put(std::uint64_t{0});  // bytes: no chunk to cover them
    out.put(std::uint32_t{0});  // dtype length
    out.put(std::uint32_t{0});  // shape rank
  }
  out.put(std::uint64_t{0});  // metadata length
  return table;
}

std::string manifest_with(const std::string& json) {
  return json + "\n" + hex16(format::checksum(json.data(), json.size())) + "\n";
}

std::string one_rank_json(const std::string& file, const std::string& region) {
  return R"({"resurgo_job_manifest":1,"store":"s","version":1,"ranks":1,"files":[{"rank":0,"node":0,"file":")" +
         file + R"(","bytes":0,"checksum":"0000000000000000"}],"regions":[{"rank":0,"id":0,)" + region + "}]}";
}

std::string deep_json_manifest(std::size_t levels) {
  return manifest_with(std::string(levels, '[') + std::string(levels, ']'));
}

std::string deep_toml_header(std::size_t levels) {
  std::string text = "[a";
  text.reserve(2 * levels + 2);
  for (std::size_t i = 1; i < levels; ++i) text += ".a";
  return text + "]\n";
}

std::vector<std::byte> as_bytes(const std::string& text) {
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

}  // namespace resurgo::security
