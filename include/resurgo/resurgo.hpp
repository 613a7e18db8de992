// Resurgo C++ API. A Store is one named stream of checkpoints of one process
// (or one rank). The application thread only captures (copies the protected
// bytes into the bounded host buffer); pipeline threads checksum, compress
// and write the version to the node-local (L2) and persistent (L4)
// directories. Background errors are thrown by the next call on the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "resurgo/config.hpp"
#include "resurgo/device_stats.hpp"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

class Comm;  // the job's communicator (resurgo/comm.hpp; resurgo/mpi.hpp makes one for MPI)

inline constexpr int kAllVersions = -1;

// Which regions restart() fills: exactly the version's (the protected set
// must be the version's region table), or those of them that are protected.
enum class RestartScope { kExactRegions, kProtectedRegions };  // wait(): every pending version
inline constexpr int kLatest = -1;       // restart(): newest intact version

// Optional description of a region's elements, recorded in the region table
// so that restart can check it and tools can show it (NumPy dtype name such
// as "float64", and the shape).
struct ElementType {
  std::string dtype;
  std::vector<std::int64_t> shape;
};

// A region that is one rank's block of a global array (MPI stores): the
// global array's shape and the block's element offset in it, row-major; the
// block's own shape is ElementType::shape. Restart on another number of ranks
// reads, for each new block, the pieces of the old blocks it overlaps
// (docs/mpi.md). Empty: a region of its rank alone.
struct GlobalBlock {
  std::vector<std::int64_t> global_shape;
  std::vector<std::int64_t> offset;
};

struct VersionInfo {
  int version = 0;
  std::vector<int> levels;  // levels holding a complete copy, ascending
  bool pending = false;     // captured, not yet durable everywhere it goes
};

// The levels (DESIGN.md): L0 device cache, L1 memory level, L2 node-local
// directory, L3 partner copy, L4 persistent directory.
inline constexpr int kL0 = 0;
inline constexpr int kL1 = 1;
inline constexpr int kL2 = 2;
inline constexpr int kL3 = 3;
inline constexpr int kL4 = 4;

// One level of a version's route.
struct LevelStats {
  int level = 0;
  double seconds_to_level = -1;   // from checkpoint() until durable there; -1 = not (yet)
  std::uint64_t stored_bytes = 0; // bytes of the version's file at this level
  double write_seconds = 0;       // the write (or copy from the level before) itself

  // Bytes stored per second of the write.
  double throughput() const { return write_seconds > 0 ? static_cast<double>(stored_bytes) / write_seconds : 0; }
};

struct VersionStats {
  int version = 0;
  // "copy", "synchronous" (larger than the buffer), "fork", "copy+fork"
  // (capture.mode = auto: some regions copied, the others forked) or "delta"
  // (only the blocks written since base_version)
  std::string capture;
  std::uint64_t bytes = 0;         // protected bytes (the state; a delta saves captured_bytes of them)
  int base_version = -1;           // the version a delta builds on; -1 for a full version
  std::uint64_t captured_bytes = 0;     // bytes the capture took: the state, or a delta's blocks
  std::uint64_t dirty_bytes = 0;        // delta, auto: bytes in the pages the tracker reported written
  std::uint64_t granularity_bytes = 0;  // delta mode: largest management block in force
  std::string tracker;                  // delta, auto: tracking method ("uffd", "mprotect", ...)
  double blocking_seconds = 0;     // time checkpoint() blocked the caller, in all
  double backpressure_seconds = 0; // part of it waiting for buffer space, the previous forked writer, or a level
                                   // to take earlier versions (a memory level full of versions bound for L2)
  double first_touch_seconds = 0;  // part of it faulting in buffer pages the background prefault had not reached
  double copy_seconds = 0;         // part of it copying into the buffer (copy) or forking (fork); 0 for a
                                   // version written straight into the memory level (docs/adjoint.md)
  std::uint64_t copy_on_write_bytes = 0;  // fork: pages the application wrote while the child wrote
  // Device and managed regions (docs/gpu.md): their bytes, and where checkpoint() put
  // them: "l0" (copied device to device into the L0 device cache), "host"
  // (copied to host memory before checkpoint() returned: no L0, or a version
  // L0 cannot hold); "" for a version without device regions.
  std::uint64_t device_bytes = 0;
  std::string device_path;
  double device_wait_seconds = 0;  // part of copy_seconds waiting for L0 chunks to be mapped or flushed
  std::vector<LevelStats> levels;  // the version's route, in order
  std::string error;               // background error of this version, if any

  // The record of `level`, or nullptr when the version does not go there.
  const LevelStats* at(int level) const {
    for (const LevelStats& stats : levels) {
      if (stats.level == level) return &stats;
    }
    return nullptr;
  }
};

struct RestartReport {
  int version = -1;  // version restored
  int level = -1;    // level its newest link (the version itself) was read from
  double seconds = 0;
  std::uint64_t bytes = 0;  // bytes of the regions restored
  // Of `bytes`, those of device regions copied straight from the L0 device
  // cache (device to device), not read from `level`.
  std::uint64_t bytes_from_device_cache = 0;
  // Restart on another number of ranks: stored bytes of the chunks read from
  // the old ranks' files (compare with `bytes`); 0 otherwise.
  std::uint64_t bytes_read = 0;
  int written_by_ranks = 0;  // the rank count of the job that wrote the version; 0 = this job's
  // MPI stores with L3: what restart rebuilt into L2 from partner copies or
  // XOR sets before restoring (or why it could not), one line per lost rank.
  std::vector<std::string> rebuilt;
  double rebuild_seconds = 0;
  // One line per damaged copy skipped or repaired (version, level, path,
  // chunk, cause), and one per newer version whose chain is broken below it
  // (its base missing, damaged everywhere, or with another region table).
  std::vector<std::string> skipped;
  // The versions read, newest first: the version itself, then its base, and
  // so on down to a full version (one element for a full version).
  std::vector<int> chain;
};

// A region as a version's region table records it.
// Where a region's memory lives: host memory, CUDA device memory
// (protect_device), or CUDA managed memory (protect_managed).
enum class MemoryKind : std::uint8_t { kHost = 0, kDevice = 1, kManaged = 2 };

struct RegionDescription {
  int id = 0;
  std::string label;
  std::uint64_t bytes = 0;
  ElementType type;
  MemoryKind kind = MemoryKind::kHost;  // the kind of the region the version was taken from
};

// What a version holds, read from its header without reading its data.
struct VersionDescription {
  int version = -1;
  std::vector<RegionDescription> regions;
  std::vector<std::byte> metadata;
};

class Store {
 public:
  // Opens the store `name` (letters, digits, '.', '-', '_'; no path
  // separators). `env` replaces the POSIX file system (tests inject faults).
  explicit Store(const std::string& name, const Config& config = Config::load(),
                 std::shared_ptr<Env> env = nullptr);
  ~Store();  // close(), ignoring errors (they are logged)

  // A child process forked while the store is open inherits the object but
  // not its threads, files or locks, which stay the parent's: in the child,
  // close() and the destructor do nothing but leave the object's memory to
  // the child's exit, and every other call throws StateError naming the
  // parent's pid (the child must open a store of its own). name(), config(),
  // rank(), metadata() and last_restart() read the child's copy.
  // A store of an MPI job (or of any job `comm` describes): every rank of
  // `comm` opens it and then calls checkpoint, wait, latest, restart and
  // close together; a version exists for restart only once every rank has
  // committed it and the job's manifest says so (docs/mpi.md). Collective.
  Store(const std::string& name, const Config& config, std::shared_ptr<Comm> comm, std::shared_ptr<Env> env = nullptr);
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  Store(Store&&) noexcept;
  // Moving over a store closes it as the destructor does.
  Store& operator=(Store&&) noexcept;

  const std::string& name() const;
  const Config& config() const;
  int rank() const;

  // Waits for pending work and stops the pipeline. Throws the first
  // background error not yet reported. Further calls throw StateError.
  void close();

  // `block`: the region is this rank's block of a global array (MPI stores;
  // `type.shape` then gives the block's shape and `type.dtype` its elements).
  // Managed memory (where the process uses the CUDA driver) is protected as
  // by protect_managed.
  void protect(int id, void* data, std::size_t bytes, const std::string& label = "",
               const ElementType& type = {}, const GlobalBlock& block = {});
  // A region in CUDA device memory (docs/gpu.md): checkpoint() copies it
  // device to device into the L0 device cache (`[device] capacity`) and
  // returns; it reaches host memory and the directory levels in the
  // background. Without L0, or for a version larger than it, checkpoint()
  // copies it device to host before returning. restart() writes it back to
  // device memory. The memory must stay allocated until unprotect().
  void protect_device(int id, void* device_data, std::size_t bytes, const std::string& label = "",
                      const ElementType& type = {});
  // A region in CUDA managed memory (cuMemAllocManaged; docs/gpu.md,
  // "Managed memory"): checkpoint() synchronises the device's context, then
  // copies it as a device region (the driver's copies, no host loads).
  // InvalidArgumentError for host or device memory, StorageError without a
  // usable CUDA driver.
  void protect_managed(int id, void* data, std::size_t bytes, const std::string& label = "",
                       const ElementType& type = {});
  void unprotect(int id);

  // Sizes the capture buffer for a protected state of `bytes` now, its
  // pages faulted in while the application computes, for codes that
  // protect their regions one at a time or change them between checkpoints
  // (each protect would otherwise grow the buffer anew). The buffer never
  // shrinks while the store is open.
  void reserve(std::uint64_t bytes);

  void set_metadata(const void* data, std::size_t bytes);
  const std::vector<std::byte>& metadata() const;

  // Captures every protected region as `version` (>= 0, larger than every
  // version the store holds). Blocks only while copying into the buffer
  // (and while waiting for buffer space).
  void checkpoint(int version);
  // Until `version` (or every pending one for kAllVersions) is durable at
  // `level` (kL1, kL2 or kL4), or throws the background error that prevented it.
  void wait(int version = kAllVersions, int level = 2);
  // The version restart() (kLatest) restores, judged without reading the
  // data: the newest version whose copy on some level has an intact header
  // and index naming this store, version and rank, whose chain of bases is
  // intact the same way, and, for an MPI store, whose job manifest is there
  // for this rank count and names this rank's file, or that was written by
  // another rank count in regions this job can redistribute (docs/mpi.md);
  // the same on every rank. Chunks are not read: verifying every byte at
  // every start would cost a full read of the state. So restart() may still
  // find a chunk damaged: it then falls back to an older version and says
  // why in last_restart().skipped. No version: std::nullopt, and the program
  // starts from scratch. When the store holds versions but none could be
  // restored (each damaged, or written by a job this one cannot restore),
  // starting from scratch would fail too (versions must increase): latest()
  // throws StateError naming each version and why.
  std::optional<int> latest();
  // Restores `version` (or the newest intact one for kLatest, falling back
  // past damaged versions) into the protected regions; returns the version.
  // On an MPI store, kLatest then sets aside the newer versions on every
  // rank (docs/mpi.md), so that the job's next checkpoints may take their
  // numbers.
  // With kProtectedRegions, regions of the version that are not protected
  // are not read (a version read in parts); every protected region must
  // still be in it.
  //
  // What a failure leaves in memory: the header and index of every version
  // of the chain are checked before a byte is written, then each chunk as
  // it is read straight into its region (verifying all of it first would
  // cost a second pass over the version). A copy that fails is read again
  // from another level, and kLatest falls back to an older version: the
  // regions then hold that version whole. When restart throws, its message
  // names the regions it may have partly overwritten, with which version's
  // data, and those it left unchanged ("regions 'u', 'v' may have been
  // partly overwritten with version 7's data before the failure; 'w' is
  // unchanged"); device regions change only once the whole version was read.
  // A restart on another number of ranks (docs/mpi.md) writes the regions
  // one by one and cannot tell how far it came: its errors say that any of
  // them may have been partly overwritten.
  int restart(int version = kLatest, RestartScope scope = RestartScope::kExactRegions);

  // The region table and metadata of a committed `version`, from the
  // fastest level whose copy has an intact header and index (its chunks are
  // not read: restart still verifies them). NotFoundError when no level
  // holds it; CorruptionError when every copy is damaged. Layers above the
  // store use it to protect the regions a version holds before restart.
  VersionDescription describe(int version);
  // Copies the committed `version` (with the bases a delta needs) from the
  // fastest level holding it to `level` (kL2 or kL4), chunk by chunk,
  // verifying each, and returns once it is durable there. For versions kept
  // only in memory: a termination handler persists the newest before exit.
  // Unlike the other calls it may run on another thread while the
  // application thread is inside checkpoint() or wait() (not close() or
  // discard()).
  void persist(int version, int level);

  std::vector<VersionInfo> versions();
  std::vector<VersionStats> stats();
  // The L0 device cache's counters (mapping progress, evictions, bypasses)
  // and the staging buffer's (touching, pinning, the touch model's choice
  // and its inputs), where the store has them (include/resurgo/device_stats.hpp).
  DeviceStats device_stats() const;
  RestartReport last_restart() const;
  // The CUDA streams (CUstream or cudaStream_t handles of the store's
  // device's context) whose work later checkpoints wait for before they
  // copy managed regions, with cuStreamSynchronize on each, instead of
  // cuCtxSynchronize on the whole context: work on other streams runs on
  // meanwhile. The application then promises that only these streams
  // write managed regions before a checkpoint; a stream destroyed while
  // named fails the next checkpoint. Empty (the default): the whole
  // context. Device regions are not synchronised either way: order their
  // writes before checkpoint() (docs/gpu.md).
  void set_capture_streams(std::vector<void*> streams);

  // Adjoint staging (docs/adjoint.md). `versions` is the order in which the
  // versions will be restored (a version restored twice appears twice); a
  // background thread copies the next ones from L2/L4 into the L1 memory
  // level ([memory] capacity) in that order, as room allows, so that
  // restart() of one reads memory. Each restart consumes the version's first
  // use in the order. Versions not written yet are fetched once written.
  // Replaces the previous order.
  void prefetch(const std::vector<int>& versions);
  // The version was consumed: it is dropped from memory at once and its
  // files are removed in the background. NotFoundError for a version the
  // store does not hold; StateError for one already discarded. A discarded
  // version can no longer be restarted or prefetched.
  void discard(int version);

  // Whether a checkpoint is due by the `[interval]` policy (docs/interval.md):
  // the seconds since the last checkpoint() returned (or since open) against
  // the interval the policy gives for the measured cost, the time
  // checkpoint() blocked (a moving average). Under a cost-based policy the
  // first call is true: the first checkpoint measures the cost. StateError
  // when interval.policy is none.
  bool need_checkpoint();
  // The policy's current interval in seconds; none before a cost is measured
  // (or with no policy).
  std::optional<double> checkpoint_interval() const;

  class Impl;

 private:
  friend Comm& comm_of(Store& store);
  std::unique_ptr<Impl> impl_;
};

// The communicator of `store`'s job (one of its own for a store opened
// without one): what the layers above the Store (automatic checkpointing,
// the matrix) agree through.
Comm& comm_of(Store& store);

// Removes `version` of every rank from the level directory `store_dir` (a
// level's <path>/<store>, as `resurgo ls` shows), as the store's own
// eviction does. Takes each rank's lock there first: a store open on that
// directory makes it fail with StateError. Throws NotFoundError when no file
// of the version is there. A version that is the base (directly or through
// other deltas) of another version there is refused with
// InvalidArgumentError naming those dependents, unless `with_dependents`:
// then they are removed too, newest first, before the version. Returns the
// versions removed, newest first.
std::vector<int> remove_version(const std::string& store_dir, int version, std::shared_ptr<Env> env = nullptr,
                                bool with_dependents = false);

}  // namespace resurgo
