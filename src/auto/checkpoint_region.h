// One checkpointing region (Algorithm 1 of the OPS paper, lines 10-26): it
// opens before a loop and, loop by loop, decides each part met for the first
// time: saved when the loop reads it (and it was ever written), dropped when
// the loop only writes it. It closes before the loop at which every part
// ever written is decided, or at the timeout; the parts not met by then are
// saved as they are.
//
// A saved part is captured lazily: its bytes are still the region's entry
// values until a loop writes them, so it is copied aside (staged) only right
// before such a loop, and otherwise read in place when the region closes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "auto/dataset_table.h"

namespace resurgo::autockpt {

// One region of the checkpoint's version.
struct Piece {
  std::string label;
  const std::byte* data = nullptr;
  std::uint64_t bytes = 0;
  ElementType type;
  GlobalBlock block;  // a dataset's block of a global array, or empty
};

// The query log's or the payload's piece: a region of this rank alone, or,
// when `ranks` > 0 (a version of global datasets), row `row` of a global
// array of `ranks` rows of `bytes`.
Piece control_piece(const std::string& label, const std::byte* data, std::uint64_t bytes, std::uint32_t ranks, int row);

// Staging and ring-packing buffers, per dataset, reused from one region to
// the next so that a steady run allocates nothing.
struct StagingBuffers {
  std::vector<std::vector<std::byte>> staged;
  std::vector<std::vector<std::byte>> rings;
  std::uint64_t bytes() const;
};

class CheckpointRegion {
 public:
  CheckpointRegion(DatasetTable& datasets, StagingBuffers& buffers, std::uint64_t timeout_loops, bool explain);

  // Before a loop of the region executes (after its writes were marked as
  // ever written). Returns true when the region is complete: close it now,
  // before the loop executes.
  bool before_loop(std::string_view loop, std::span<const PartAccess> accesses);
  // The pieces to save; parts not decided yet are saved as they are now.
  std::vector<Piece> close();

  std::uint64_t loops() const { return loops_; }
  bool timed_out() const { return timed_out_; }
  std::uint64_t staged_bytes() const { return staged_bytes_; }
  const std::vector<std::string>& decisions() const { return decisions_; }

 private:
  enum class State : std::uint8_t { kPending, kSaved, kDropped };
  enum class Staged : std::uint8_t { kNo, kWhole, kRing };
  struct Entry {
    State part[2] = {State::kPending, State::kPending};
    Staged staged = Staged::kNo;
  };

  void decide(std::string_view loop, const PartAccess& access);
  void stage(int dataset);
  bool undecided_left() const;
  void explain(const Dataset& dataset, int part, const std::string& what);

  DatasetTable& datasets_;
  StagingBuffers& buffers_;
  std::uint64_t timeout_loops_;
  bool explain_;
  std::vector<Entry> entries_;
  std::uint64_t loops_ = 0;
  bool timed_out_ = false;
  std::uint64_t staged_bytes_ = 0;
  std::vector<std::string> decisions_;
};

}  // namespace resurgo::autockpt
