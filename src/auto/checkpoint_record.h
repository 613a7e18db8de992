// The control record of an automatic checkpoint, stored as the version's
// metadata: where the checkpoint was taken and how a restarted run reaches
// that point. The saved datasets are the version's regions (labels: the
// dataset's name, or name + kRingSuffix for a halo ring alone), with the
// query log and the payload as two reserved regions.
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
};

std::vector<std::byte> encode(const CheckpointRecord& record);
// Nullopt when `metadata` is not an automatic checkpoint's record;
// CorruptionError naming `what` when it is one but cannot be parsed.
std::optional<CheckpointRecord> decode(std::span<const std::byte> metadata, const std::string& what);

}  // namespace resurgo::autockpt
