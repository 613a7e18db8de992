// L1 memory level: whole versions kept in process memory, in the container
// format (checksummed chunks), so that restore, verification and
// level-to-level copies treat them exactly as files of the directory levels.
// A route keeps versions here with `[memory] every`; adjoint prefetch copies
// versions here from the directory levels (DESIGN.md, "Adjoint staging").
//
// Memory comes in fixed pieces from a pool bounded by `capacity`. Freed
// pieces go back to the pool, not to the kernel: a version written into
// reused pieces pays no page faults (first touch: the gpu-cache-allocation
// paper, section IV-A, measured writes to untouched pages at half the
// bandwidth of writes to touched ones).
// Readers hold a version's pieces until they finish, so removing a version
// while restore reads it is safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tier/level.h"

namespace resurgo {

class MemoryLevel final : public Level {
 public:
  class Image;
  class PiecePool;

  // `capacity` bytes (rounded down to whole pieces, at least one).
  MemoryLevel(const std::string& store, int rank, std::uint64_t capacity, int keep);
  ~MemoryLevel() override;

  int number() const override { return kL1; }
  Features features() const override;
  std::string where() const override;

  void prepare() override {}
  // Writes the version into pieces taken from the pool; visible only once
  // complete. Throws LevelFullError when the pool runs out (the message says
  // how much the level holds and what to raise or discard).
  void commit(int version, const std::function<void(WritableFile&)>& write) override;
  void commit_copy(int version, const ReadableFile& source) override;

  std::vector<int> versions() override;
  bool holds(int version) override;
  // NotFoundError when the level does not hold the version.
  std::unique_ptr<ReadableFile> open(int version) override;
  // A damaged copy in memory has nothing left to inspect: it is dropped.
  void quarantine(int version) override;
  void remove(int version) override;
  std::vector<int> evict(const std::function<bool(int)>& pinned, const KnownBases& known_bases = {}) override;

  std::uint64_t capacity() const;
  std::uint64_t free_bytes() const;
  // Bytes a version whose container file has `file_bytes` takes here.
  std::uint64_t footprint(std::uint64_t file_bytes) const;
  // Called (without locks held) whenever memory returns to the pool.
  void on_space_freed(std::function<void()> listener);

 private:
  std::string store_;
  int rank_;
  int keep_;
  std::shared_ptr<PiecePool> pool_;
  mutable std::mutex mutex_;
  std::map<int, std::shared_ptr<const Image>> images_;
};

}  // namespace resurgo
