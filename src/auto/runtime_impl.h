// The automatic checkpointing runtime's state (Runtime::Impl), shared by
// runtime.cpp (declarations, loops, checkpoints: Algorithm 1) and
// runtime_restore.cpp (restore mode: Algorithm 2).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "auto/agreement.h"
#include "auto/checkpoint_record.h"
#include "auto/checkpoint_region.h"
#include "auto/dataset_table.h"
#include "auto/fnv.h"
#include "auto/location_strategy.h"
#include "auto/query_log.h"
#include "auto/termination_flush.h"
#include "resurgo/auto.hpp"

namespace resurgo::autockpt {

class Runtime::Impl {
 public:
  Impl(Store& store, Options options);
  ~Impl();

  int dataset(const std::string& name, void* data, std::size_t bytes, const ElementType& type, int halo,
              const GlobalBlock& block);
  bool loop(std::string_view name, std::span<const Arg> args);
  void query(void* data, std::size_t bytes);
  void initphase_done();
  bool fastfw(void* payload, std::size_t bytes);
  bool datlist(std::span<const int> ids, void* payload, std::size_t bytes);
  void trigger() { triggered_ = !restore_.has_value(); }

  bool restoring() const { return restore_.has_value(); }
  std::uint64_t loop_index() const { return loop_index_; }
  std::string location() const { return location_; }
  std::optional<CheckpointReport> last_checkpoint() const { return last_checkpoint_; }
  std::optional<RestoreReport> last_restore() const { return last_restore_; }
  std::uint64_t bookkeeping_bytes() const;

 private:
  // A version read at attach, restored when the run reaches its point.
  struct Restore {
    int version = -1;
    CheckpointRecord record;
    std::vector<RegionDescription> regions;  // the version's region table
    std::vector<std::byte> payload;
    std::optional<QueryReplay> replay;
    bool skipping = false;  // loops are skipped and queries replayed
    std::string loop_name;  // of the current loop
    std::uint64_t skipped = 0;
    double read_seconds = 0;
    // Where the replay began: the end of the read, or the end of the
    // initialisation phase (which a run from scratch executes too).
    Clock::time_point replay_start;
  };
  // A region protected in the store.
  struct Protected {
    int id = 0;
    std::string label;
    const void* data = nullptr;
    std::uint64_t bytes = 0;
  };
  // A dataset a loop declared read-only, with its hash before the loop.
  struct ReadCheck {
    int dataset = 0;
    int part = 0;
    std::uint64_t hash = 0;
    std::string loop;
    std::uint64_t loop_index = 0;
  };

  void report(int level, const std::string& message) const;
  void attach_restore(const std::vector<VersionInfo>& versions);
  void attach_restore_together(const std::vector<VersionInfo>& versions);
  bool read_version(int version);
  bool read_version_together(int version);
  void read_record(Restore& restore, const std::string& what);
  void share_record(Restore& restore, const std::string& what);
  bool other_rank_count(const CheckpointRecord& record) const {
    return record.ranks > 0 && record.ranks != static_cast<std::uint32_t>(agreement_.ranks());
  }
  void refuse_unmappable(const Restore& restore, const std::string& what) const;
  void check_blocks(const std::string& call);
  bool control_alike(const CheckpointRecord& record, const std::byte* log);
  [[noreturn]] void refuse_unlike_controls(std::uint64_t loop_index) const;
  void check_restorable(const RegionDescription& region, const Dataset& dataset, bool ring,
                        const std::string& version) const;
  void adopt(Restore restore, Clock::time_point started);
  bool replay_loop(std::string_view name);
  void finish_restore(std::string_view where, void* payload, std::size_t payload_bytes);
  void read_control(Restore& restore, const std::string& what);
  void size_store_buffer(std::string_view first_loop);
  void restore_datasets();
  Progress progress(std::string_view call) const { return {datasets_, sequence_hash_, loop_index_, call}; }
  bool is_due();
  void become_due();
  void start_checkpoint(CheckpointKind kind, std::string location, const void* payload, std::size_t payload_bytes);
  void close_region();
  void commit(const std::vector<Piece>& pieces, CheckpointRecord record, CheckpointReport report);
  void record_read_checks(std::string_view name);
  void verify_read_checks();
  void flush_on_signal(int signal);
  void protect_exactly(std::vector<Piece> pieces);
  void unprotect_all() { protect_exactly({}); }

  Store& store_;
  Options options_;
  std::string store_what_;  // "store 'name'", for messages
  DatasetTable datasets_;
  QueryLog log_;
  LocationStrategy strategy_;
  StagingBuffers buffers_;
  Agreement agreement_;
  std::vector<PartAccess> accesses_;  // of the current loop
  bool blocks_checked_ = false;       // the ranks' blocks tile the global arrays declared so far

  std::uint64_t loop_index_ = 0;
  std::uint64_t sequence_hash_ = kFnvOffset;
  std::optional<std::uint64_t> init_end_;

  Clock::time_point last_checkpoint_time_ = Clock::now();
  std::uint64_t last_checkpoint_loop_ = 0;
  bool triggered_ = false;
  bool due_ = false;             // the next location starts a region
  bool user_location_ = false;   // fastfw()/datlist() name the location
  bool location_chosen_ = false;
  std::string location_;
  bool store_buffer_sized_ = false;  // the store's capture buffer was made for our checkpoints

  std::optional<CheckpointRegion> region_;
  CheckpointRecord region_record_;
  QueryLog::Mark region_log_;  // the log at the region's restore point
  std::vector<std::byte> region_payload_;
  double region_blocking_ = 0;

  std::mutex store_mutex_;  // the application thread and the termination watcher
  std::vector<Protected> protected_;  // what the store holds protected now
  int next_region_id_ = 0;
  int next_version_ = 0;
  std::optional<CheckpointReport> last_checkpoint_;

  std::optional<Restore> restore_;
  std::optional<RestoreReport> last_restore_;
  std::vector<ReadCheck> read_checks_;
  std::unique_ptr<TerminationFlush> flush_;
};

}  // namespace resurgo::autockpt
