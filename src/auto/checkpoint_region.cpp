#include "auto/checkpoint_region.h"

#include <cstring>

#include "auto/checkpoint_record.h"

namespace resurgo::autockpt {

std::uint64_t StagingBuffers::bytes() const {
  std::uint64_t total = 0;
  for (const auto& buffer : staged) total += buffer.capacity();
  for (const auto& buffer : rings) total += buffer.capacity();
  return total;
}

CheckpointRegion::CheckpointRegion(DatasetTable& datasets, StagingBuffers& buffers, std::uint64_t timeout_loops,
                                   bool explain)
    : datasets_(datasets),
      buffers_(buffers),
      timeout_loops_(timeout_loops),
      explain_(explain),
      entries_(datasets.size()) {
  buffers_.staged.resize(datasets.size());
  buffers_.rings.resize(datasets.size());
}

void CheckpointRegion::explain(const Dataset& dataset, int part, const std::string& what) {
  if (!explain_) return;
  decisions_.push_back(dataset.name + (part == kRingPart ? std::string(kRingSuffix) : "") + ": " + what);
}

// Algorithm 1, lines 15-20: the first access in the region decides a part.
// A part never written keeps its initial values, which a restarted run
// recreates: reading it decides nothing.
void CheckpointRegion::decide(std::string_view loop, const PartAccess& access) {
  State& state = entries_[static_cast<std::size_t>(access.dataset)].part[access.part];
  if (state != State::kPending) return;
  const Dataset& dataset = datasets_[access.dataset];
  if (access.read && dataset.ever_written[access.part]) {
    state = State::kSaved;
    explain(dataset, access.part, "saved (read first, by loop '" + std::string(loop) + "')");
  } else if (!access.read) {
    state = State::kDropped;
    explain(dataset, access.part, "dropped (written first, by loop '" + std::string(loop) + "')");
  }
}

// Copies a dataset aside before a loop changes a saved part. Its parts
// still pending hold their entry values too and are captured with it; only
// a dataset whose interior is dropped needs just its ring.
void CheckpointRegion::stage(int id) {
  Entry& entry = entries_[static_cast<std::size_t>(id)];
  const Dataset& dataset = datasets_[id];
  std::vector<std::byte>& buffer = buffers_.staged[static_cast<std::size_t>(id)];
  if (dataset.ring && entry.part[kInteriorPart] == State::kDropped) {
    buffer.resize(dataset.ring->bytes());
    dataset.ring->pack(dataset.data, buffer.data());
    entry.staged = Staged::kRing;
  } else {
    buffer.resize(dataset.bytes);
    std::memcpy(buffer.data(), dataset.data, dataset.bytes);
    entry.staged = Staged::kWhole;
  }
  staged_bytes_ += buffer.size();
}

bool CheckpointRegion::undecided_left() const {
  for (std::size_t id = 0; id < entries_.size(); ++id) {
    const Dataset& dataset = datasets_[static_cast<int>(id)];
    for (int part = 0; part < dataset.parts(); ++part) {
      if (entries_[id].part[part] == State::kPending && dataset.ever_written[part]) return true;
    }
  }
  return false;
}

// A region that closes here closes before the loop runs: what it is about to
// write still holds the entry values, and is read in place, not staged.
bool CheckpointRegion::before_loop(std::string_view loop, std::span<const PartAccess> accesses) {
  ++loops_;
  for (const PartAccess& access : accesses) decide(loop, access);
  if (!undecided_left()) return true;
  timed_out_ = loops_ >= timeout_loops_;
  if (timed_out_) return true;
  for (const PartAccess& access : accesses) {
    const Entry& entry = entries_[static_cast<std::size_t>(access.dataset)];
    if (access.written && entry.part[access.part] == State::kSaved && entry.staged == Staged::kNo) {
      stage(access.dataset);
    }
  }
  return false;
}

Piece control_piece(const std::string& label, const std::byte* data, std::uint64_t bytes, std::uint32_t ranks,
                    int row) {
  if (ranks == 0) return {label, data, bytes, ElementType{"uint8", {}}, {}};
  const auto width = static_cast<std::int64_t>(bytes);
  return {label, data, bytes, ElementType{"uint8", {1, width}},
          GlobalBlock{{static_cast<std::int64_t>(ranks), width}, {row, 0}}};
}

std::vector<Piece> CheckpointRegion::close() {
  std::vector<Piece> pieces;
  for (std::size_t id = 0; id < entries_.size(); ++id) {
    Entry& entry = entries_[id];
    const Dataset& dataset = datasets_[static_cast<int>(id)];
    for (int part = 0; part < dataset.parts(); ++part) {
      if (entry.part[part] != State::kPending || !dataset.ever_written[part]) continue;
      entry.part[part] = State::kSaved;
      explain(dataset, part, "saved (not met in the region)");
    }
    const bool interior = entry.part[kInteriorPart] == State::kSaved;
    const bool ring = dataset.ring && entry.part[kRingPart] == State::kSaved;
    const std::vector<std::byte>& staged = buffers_.staged[id];
    if (interior) {
      pieces.push_back({dataset.name, entry.staged == Staged::kWhole ? staged.data() : dataset.data, dataset.bytes,
                        dataset.type, dataset.block});
    } else if (ring) {
      const std::byte* packed = staged.data();
      if (entry.staged != Staged::kRing) {
        std::vector<std::byte>& buffer = buffers_.rings[id];
        buffer.resize(dataset.ring->bytes());
        dataset.ring->pack(entry.staged == Staged::kWhole ? staged.data() : dataset.data, buffer.data());
        packed = buffer.data();
      }
      const std::uint64_t bytes = dataset.ring->bytes();
      const auto elements = static_cast<std::int64_t>(bytes / dataset.element_bytes());
      pieces.push_back({dataset.name + kRingSuffix, packed, bytes, ElementType{dataset.type.dtype, {elements}}, {}});
    }
  }
  return pieces;
}

}  // namespace resurgo::autockpt
