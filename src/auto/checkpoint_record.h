// The control record of an automatic checkpoint, stored as the version's
// metadata: where the checkpoint was taken and how a restarted run reaches
// that point. The saved datasets are the version's regions (labels: the
// dataset's name, or name + kRingSuffix for a halo ring alone), with the
// query log and the payload as two reserved regions. A record written
// before restart on another rank count existed ends after the location.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace resurgo::autockpt {

inline constexpr const char* kRingSuffix = "#halo";
inline constexpr const char* kQueryLogLabel = "resurgo.auto.queries";
inline constexpr const char* kPayloadLabel = "resurgo.auto.payload";
inline constexpr const char* kReservedPrefix = "resurgo.auto.";

enum class CheckpointKind : std::uint8_t {
  kRegion = 0,       // a checkpointing region entered before a loop
  kFastForward = 1,  // a region entered at fastfw(), with the payload
  kDatlist = 2,      // the datasets datlist() named, saved at that call
};

struct CheckpointRecord {
  CheckpointKind kind = CheckpointKind::kRegion;
  bool has_payload = false;
  std::uint64_t loop_index = 0;  // loops declared before the checkpoint point
  std::optional<std::uint64_t> init_end;  // loops declared when initphase_done() was called
  std::uint64_t sequence_hash = 0;        // of the loop sequence up to loop_index
  std::string location;                   // the loop name, "fastfw" or "datlist"
  // The rank count that wrote the version (0 in a record written before
  // it was kept). `global`: every dataset was a block of a global array,
  // so the version restarts on another rank count: its query log and
  // payload are then global arrays of one row per rank (the rows alike), of
  // the bytes below, and `saved` names the datasets saved, so that a job of
  // another rank count restores it from rank 0's record alone.
  std::uint32_t ranks = 0;
  bool global = false;
  std::uint64_t query_log_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::vector<std::string> saved{};
};

std::vector<std::byte> encode(const CheckpointRecord& record);
// Nullopt when `metadata` is not an automatic checkpoint's record;
// CorruptionError naming `what` when it is one but cannot be parsed.
std::optional<CheckpointRecord> decode(std::span<const std::byte> metadata, const std::string& what);

}  // namespace resurgo::autockpt
