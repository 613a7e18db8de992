#include "job/partner_copies.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "format/container.h"
#include "io/bytes_file.h"
#include "job/partner_transfer.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"

namespace resurgo {

namespace {

using partner_transfer::Bytes;
using partner_transfer::exchange_sized;
using partner_transfer::receive_sized;
using partner_transfer::send_sized;
using Json = nlohmann::json;

constexpr char kParityLabel[] = "xor-parity";

// XOR segments: member j's segment that goes into member i's parity.
int segment_index(int member, int parity_holder, int set_size) {
  return ((parity_holder - member - 1) % set_size + set_size) % set_size;
}

std::uint64_t segment_bytes(std::uint64_t largest, int set_size) {
  const auto segments = static_cast<std::uint64_t>(set_size - 1);
  return std::max<std::uint64_t>(1, (largest + segments - 1) / segments);
}

// Segment `index` of `file`, zero-padded to `bytes`.
Bytes segment(const Bytes& file, std::uint64_t bytes, int index) {
  Bytes piece(bytes, std::byte{0});
  const std::uint64_t begin = static_cast<std::uint64_t>(index) * bytes;
  if (begin < file.size()) std::memcpy(piece.data(), file.data() + begin, std::min(bytes, file.size() - begin));
  return piece;
}

void xor_into(Bytes& into, const Bytes& other) {
  for (std::size_t index = 0; index < into.size(); ++index) into[index] ^= other[index];
}

// A parity as a container: one region of raw chunks, checksummed like every
// other file, with the set's layout in the metadata.
void write_parity(WritableFile& file, const format::Header& header, const Bytes& parity, std::uint64_t chunk_size) {
  format::ContainerWriter writer(file, header);
  for (std::uint64_t offset = 0; offset < parity.size(); offset += chunk_size) {
    const std::uint64_t length = std::min<std::uint64_t>(chunk_size, parity.size() - offset);
    const std::byte* data = parity.data() + offset;
    writer.add_chunk(format::ChunkRecord{0, offset, length, length, Codec::kNone, format::checksum(data, length), 0},
                     data);
  }
  writer.finish();
}

// The parity bytes and the set's layout from a parity container, every
// chunk verified.
struct Parity {
  Bytes bytes;
  Json layout;
};

Parity read_parity(const ReadableFile& file) {
  const format::Container container = format::read_container(file);
  if (container.header.regions.size() != 1 || container.header.regions[0].label != kParityLabel) {
    throw CorruptionError("'" + file.path() + "' is not an XOR parity");
  }
  Parity parity{Bytes(container.header.regions[0].bytes), {}};
  Bytes scratch;
  for (const format::ChunkRecord& chunk : container.chunks) {
    format::read_chunk(file, container, chunk, parity.bytes.data() + chunk.offset, scratch);
  }
  const auto& metadata = container.header.metadata;
  parity.layout = Json::parse(reinterpret_cast<const char*>(metadata.data()),
                              reinterpret_cast<const char*>(metadata.data() + metadata.size()));
  return parity;
}

}  // namespace

PartnerCopies::PartnerCopies(PartnerScheme scheme, PartnerTopology topology, int rank, std::string store,
                             DirectoryLevel& local, unsigned mode, int keep, std::uint64_t chunk_size,
                             std::shared_ptr<Env> env, const Logger& log)
    : scheme_(scheme),
      topology_(std::move(topology)),
      rank_(rank),
      store_(std::move(store)),
      local_(local),
      l3_(kL3, local.dir(), scheme == PartnerScheme::kXor ? "xor" : "partner",
          scheme == PartnerScheme::kXor ? rank : topology_.source_of(rank), mode, keep, std::move(env)),
      chunk_size_(chunk_size),
      log_(log) {
  l3_.prepare();
  const std::string weakness =
      scheme == PartnerScheme::kXor ? topology_.xor_weakness() : topology_.partner_weakness();
  if (!weakness.empty() && rank == 0) log_.warn("store '" + store_ + "' L3: " + weakness);
}

Bytes PartnerCopies::own_file(int version) {
  try {
    return read_whole(*local_.open(version));
  } catch (const Error& error) {
    log_.warn("L3 of version " + std::to_string(version) + ": this rank's L2 file cannot be read (" + error.what() +
              "); the version is not protected");
    return {};
  }
}

void PartnerCopies::protect(int version, Clock::time_point started, Comm& job) {
  const Clock::time_point begun = Clock::now();
  Outcome outcome;
  try {
    outcome = scheme_ == PartnerScheme::kXor ? protect_by_xor(version, own_file(version), job)
                                             : protect_by_partner(version, own_file(version), job);
    l3_.evict([](int) { return false; });
  } catch (const Error& error) {
    outcome.error = error.what();
  }
  outcome.write_seconds = seconds_since(begun);
  outcome.seconds_to_level = seconds_since(started);
  if (!outcome.error.empty()) log_.warn("L3 of version " + std::to_string(version) + ": " + outcome.error);
  std::lock_guard lock(mutex_);
  outcomes_[version] = outcome;
  while (outcomes_.size() > 64) outcomes_.erase(outcomes_.begin());
}

std::optional<PartnerCopies::Outcome> PartnerCopies::outcome(int version) {
  std::lock_guard lock(mutex_);
  const auto found = outcomes_.find(version);
  if (found == outcomes_.end()) return std::nullopt;
  return found->second;
}

PartnerCopies::Outcome PartnerCopies::protect_by_partner(int version, std::vector<std::byte> own, Comm& job) {
  const int source = topology_.source_of(rank_);
  const Bytes received = exchange_sized(job, topology_.holder_of(rank_), own, source);
  Outcome outcome;
  if (received.empty()) {
    outcome.error = "rank " + std::to_string(source) + " sent no copy of version " + std::to_string(version) +
                    " (its L2 file could not be read)";
    return outcome;
  }
  l3_.commit_copy(version, BytesFile(received, "rank " + std::to_string(source) + "'s version " +
                                                   std::to_string(version) + " (received for L3)"));
  outcome.stored_bytes = received.size();
  return outcome;
}

PartnerCopies::Outcome PartnerCopies::protect_by_xor(int version, std::vector<std::byte> own, Comm& job) {
  const std::vector<int>& set = topology_.set_of(rank_);
  const int size = static_cast<int>(set.size());
  const int me = topology_.index_in_set(rank_);
  std::vector<std::uint64_t> sizes(set.size(), 0);
  sizes[static_cast<std::size_t>(me)] = own.size();
  for (int shift = 1; shift < size; ++shift) {
    const int from = (me - shift + size) % size;
    job.exchange(set[static_cast<std::size_t>((me + shift) % size)], &sizes[static_cast<std::size_t>(me)],
                 sizeof(std::uint64_t), set[static_cast<std::size_t>(from)], &sizes[static_cast<std::size_t>(from)],
                 sizeof(std::uint64_t));
  }
  Outcome outcome;
  if (std::count(sizes.begin(), sizes.end(), 0) > 0) {
    outcome.error = "a member of this rank's XOR set has no L2 file of version " + std::to_string(version) +
                    " to protect; the set skips the version";
    return outcome;
  }
  const std::uint64_t bytes = segment_bytes(*std::max_element(sizes.begin(), sizes.end()), size);
  Bytes parity(bytes, std::byte{0});
  for (int shift = 1; shift < size; ++shift) {
    const int to = (me + shift) % size;
    const int from = (me - shift + size) % size;
    const Bytes out = segment(own, bytes, segment_index(me, to, size));
    Bytes in(bytes);
    job.exchange(set[static_cast<std::size_t>(to)], out.data(), out.size(), set[static_cast<std::size_t>(from)],
                 in.data(), in.size());
    xor_into(parity, in);
  }
  format::Header header;
  header.store = store_;
  header.version = version;
  header.rank = static_cast<std::uint32_t>(rank_);
  header.chunk_size = chunk_size_;
  header.regions.push_back({0, kParityLabel, format::RegionKind::kHost, bytes, "uint8", {}});
  const std::string layout = Json{{"set", set}, {"bytes", sizes}, {"segment", bytes}}.dump();
  const auto* text = reinterpret_cast<const std::byte*>(layout.data());
  header.metadata.assign(text, text + layout.size());
  l3_.commit(version, [&](WritableFile& file) { write_parity(file, header, parity, chunk_size_); });
  outcome.stored_bytes = parity.size();
  return outcome;
}

// ---------------------------------------------------------------- rebuild

namespace {

constexpr long kLost = 1;        // this rank's L2 lacks the version
constexpr long kProtects = 2;    // its L3 holds the version (a partner copy or a parity)
constexpr long kHasManifest = 4;  // its L2 holds the job manifest of the version

bool lost(const std::vector<long>& flags, int rank) { return (flags[static_cast<std::size_t>(rank)] & kLost) != 0; }
bool protects(const std::vector<long>& flags, int rank) {
  return (flags[static_cast<std::size_t>(rank)] & kProtects) != 0;
}

}  // namespace

PartnerCopies::Rebuild PartnerCopies::rebuild(Comm& comm) {
  const Clock::time_point begun = Clock::now();
  Rebuild report;
  const std::vector<int> held = l3_.versions();
  const long newest = held.empty() ? -1 : held.back();
  const long version = comm.size() == 1 ? newest : -comm.allreduce_min(-newest);
  report.version = static_cast<int>(version);
  if (version < 0) return report;
  bool manifest = false;
  try {
    manifest = local_.read_manifest(static_cast<int>(version)).has_value();
  } catch (const Error&) {
  }
  const long mine = (local_.holds(static_cast<int>(version)) ? 0 : kLost) |
                    (l3_.holds(static_cast<int>(version)) ? kProtects : 0) | (manifest ? kHasManifest : 0);
  const std::vector<long> flags = comm.size() == 1 ? std::vector<long>{mine} : comm.allgather(mine, 0);
  int provider = -1;  // the lowest rank that still has the job manifest in its L2
  for (int rank = 0; rank < comm.size() && provider < 0; ++rank) {
    if (!lost(flags, rank) && (flags[static_cast<std::size_t>(rank)] & kHasManifest) != 0) provider = rank;
  }
  for (int rank = 0; rank < comm.size(); ++rank) {
    if (!lost(flags, rank)) continue;
    const bool rebuilt = scheme_ == PartnerScheme::kXor
                             ? rebuild_from_set(static_cast<int>(version), rank, flags, comm, report)
                             : rebuild_from_partner(static_cast<int>(version), rank, flags, comm, report);
    if (!rebuilt || provider < 0) continue;
    // The lost node's L2 lost the job manifest too: the provider sends it.
    if (rank_ == provider) {
      const std::string text = local_.read_manifest(static_cast<int>(version)).value_or("");
      send_sized(comm, rank, Bytes(reinterpret_cast<const std::byte*>(text.data()),
                                   reinterpret_cast<const std::byte*>(text.data() + text.size())));
    } else if (rank_ == rank) {
      const Bytes text = receive_sized(comm, provider);
      if (!text.empty()) {
        local_.commit_manifest(static_cast<int>(version),
                               std::string(reinterpret_cast<const char*>(text.data()), text.size()));
      }
    }
  }
  report.seconds = seconds_since(begun);
  return report;
}

void PartnerCopies::restore_own_file(int version, std::vector<std::byte> bytes, const std::string& from) {
  local_.commit_copy(version, BytesFile(std::move(bytes), "version " + std::to_string(version) + " rebuilt from " + from));
}

// Every rank writes the same note, whether it takes part or not, and returns
// whether the lost rank's file was rebuilt.
bool PartnerCopies::rebuild_from_partner(int version, int lost_rank, const std::vector<long>& flags, Comm& comm,
                                         Rebuild& report) {
  const int holder = topology_.holder_of(lost_rank);
  const std::string what = "version " + std::to_string(version) + " of rank " + std::to_string(lost_rank);
  if (!protects(flags, holder)) {
    report.notes.push_back(what + ": its L2 file is lost, and rank " + std::to_string(holder) +
                           ", which kept its partner copy, lost it too (both nodes lost?): not rebuilt; restart falls "
                           "back to the persistent level (L4)");
    return false;
  }
  if (rank_ == holder) send_sized(comm, lost_rank, read_whole(*l3_.open(version)));
  if (rank_ == lost_rank) restore_own_file(version, receive_sized(comm, holder), "rank " + std::to_string(holder));
  report.notes.push_back(what + ": rebuilt into its L2 from the partner copy of rank " + std::to_string(holder));
  return true;
}

bool PartnerCopies::rebuild_from_set(int version, int lost_rank, const std::vector<long>& flags, Comm& comm,
                                     Rebuild& report) {
  const std::vector<int>& set = topology_.set_of(lost_rank);
  const int lost_index = topology_.index_in_set(lost_rank);
  const std::string what = "version " + std::to_string(version) + " of rank " + std::to_string(lost_rank);
  std::string missing;
  for (int member : set) {
    if (member != lost_rank && (lost(flags, member) || !protects(flags, member))) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(member);
    }
  }
  if (!missing.empty()) {
    report.notes.push_back(what + ": its L2 file is lost, and so is rank(s) " + missing + "'s file or parity in its "
                           "XOR set; a set rebuilds one member: not rebuilt; restart falls back to the persistent "
                           "level (L4)");
    return false;
  }
  const int first = lost_index == 0 ? 1 : 0;  // the survivor that tells the lost rank the set's layout
  if (rank_ == lost_rank) {
    rebuild_own_file(version, set, first, comm);
  } else if (std::find(set.begin(), set.end(), rank_) != set.end()) {
    send_for_rebuild(version, set, lost_rank, first, comm);
  }
  report.notes.push_back(what + ": rebuilt into its L2 from its XOR set (ranks of the set: " +
                         Json(set).dump() + ")");
  return true;
}

// The lost member: segment by segment, the XOR of the other members'
// blocks (their own file's segment, or the parity holding the lost one).
void PartnerCopies::rebuild_own_file(int version, const std::vector<int>& set, int first, Comm& comm) {
  const int size = static_cast<int>(set.size());
  const int lost_index = topology_.index_in_set(rank_);
  const Bytes layout_text = receive_sized(comm, set[static_cast<std::size_t>(first)]);
  const Json layout = Json::parse(reinterpret_cast<const char*>(layout_text.data()),
                                  reinterpret_cast<const char*>(layout_text.data() + layout_text.size()));
  const auto bytes = layout.at("segment").get<std::uint64_t>();
  const auto file_bytes = layout.at("bytes").at(static_cast<std::size_t>(lost_index)).get<std::uint64_t>();
  Bytes file;
  for (int index = 0; index < size - 1; ++index) {
    Bytes piece(bytes, std::byte{0});
    for (int member = 0; member < size; ++member) {
      if (member == lost_index) continue;
      Bytes block(bytes);
      comm.receive(set[static_cast<std::size_t>(member)], block.data(), block.size());
      xor_into(piece, block);
    }
    file.insert(file.end(), piece.begin(), piece.end());
  }
  file.resize(std::min<std::uint64_t>(file_bytes, file.size()));
  restore_own_file(version, std::move(file), "its XOR set");
}

// A surviving member: the set's layout (the first survivor), then its block
// of every segment the lost member rebuilds.
void PartnerCopies::send_for_rebuild(int version, const std::vector<int>& set, int lost_rank, int first,
                                     Comm& comm) {
  const int size = static_cast<int>(set.size());
  const int lost_index = topology_.index_in_set(lost_rank);
  const int me = topology_.index_in_set(rank_);
  const Parity parity = read_parity(*l3_.open(version));
  if (me == first) {
    const std::string text = parity.layout.dump();
    send_sized(comm, lost_rank, Bytes(reinterpret_cast<const std::byte*>(text.data()),
                                      reinterpret_cast<const std::byte*>(text.data() + text.size())));
  }
  const Bytes own = read_whole(*local_.open(version));
  const auto bytes = parity.layout.at("segment").get<std::uint64_t>();
  for (int index = 0; index < size - 1; ++index) {
    const int holder = (lost_index + 1 + index) % size;  // whose parity holds the lost segment `index`
    const Bytes block = me == holder ? parity.bytes : segment(own, bytes, segment_index(me, holder, size));
    comm.send(lost_rank, block.data(), block.size());
  }
}

}  // namespace resurgo
