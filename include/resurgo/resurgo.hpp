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
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

inline constexpr int kAllVersions = -1;  // wait(): every pending version
inline constexpr int kLatest = -1;       // restart(): newest intact version

// Optional description of a region's elements, recorded in the region table
// so that restart can check it and tools can show it (NumPy dtype name such
// as "float64", and the shape).
struct ElementType {
  std::string dtype;
  std::vector<std::int64_t> shape;
};

struct VersionInfo {
  int version = 0;
  std::vector<int> levels;  // levels holding a complete copy, ascending
  bool pending = false;     // captured, not yet durable everywhere it goes
};

struct VersionStats {
  int version = 0;
  std::uint64_t bytes = 0;         // protected bytes captured
  std::uint64_t stored_bytes = 0;  // bytes of the L2 container file
  double blocking_seconds = 0;     // time checkpoint() blocked the caller
  double backpressure_seconds = 0; // part of blocking spent waiting for buffer space
  double seconds_to_l2 = -1;       // from checkpoint() call until durable at L2; -1 = not (yet)
  double seconds_to_l4 = -1;       // same for L4; -1 = not sent there (yet)
  double l2_write_seconds = 0;     // the L2 write itself: encode, write, fsync, rename
  bool synchronous = false;        // larger than the buffer: written from the caller's memory
  std::string error;               // background error of this version, if any

  // Bytes of the container file written per second of the L2 write.
  double l2_throughput() const {
    return l2_write_seconds > 0 ? static_cast<double>(stored_bytes) / l2_write_seconds : 0;
  }
};

struct RestartReport {
  int version = -1;  // version restored
  int level = -1;    // level it was read from
  double seconds = 0;
  std::uint64_t bytes = 0;
  // One line per damaged copy skipped or repaired: version, level, path, chunk, cause.
  std::vector<std::string> skipped;
};

class Store {
 public:
  // Opens the store `name` (letters, digits, '.', '-', '_'; no path
  // separators). `env` replaces the POSIX file system (tests inject faults).
  explicit Store(const std::string& name, const Config& config = Config::load(),
                 std::shared_ptr<Env> env = nullptr);
  ~Store();  // close(), ignoring errors (they are logged)
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;

  const std::string& name() const;
  const Config& config() const;
  int rank() const;

  // Waits for pending work and stops the pipeline. Throws the first
  // background error not yet reported. Further calls throw StateError.
  void close();

  void protect(int id, void* data, std::size_t bytes, const std::string& label = "",
               const ElementType& type = {});
  void unprotect(int id);

  void set_metadata(const void* data, std::size_t bytes);
  const std::vector<std::byte>& metadata() const;

  // Captures every protected region as `version` (>= 0, larger than every
  // version the store holds). Blocks only while copying into the buffer
  // (and while waiting for buffer space).
  void checkpoint(int version);
  // Until `version` (or every pending one for kAllVersions) is durable at
  // `level` (1, 2 or 4), or throws the background error that prevented it.
  void wait(int version = kAllVersions, int level = 2);
  // Newest version complete on some directory level.
  std::optional<int> latest();
  // Restores `version` (or the newest intact one for kLatest, falling back
  // past damaged versions) into the protected regions; returns the version.
  int restart(int version = kLatest);

  std::vector<VersionInfo> versions();
  std::vector<VersionStats> stats();
  RestartReport last_restart() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace resurgo
