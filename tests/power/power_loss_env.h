// PowerLossEnv: an Env that records every file and directory operation of a
// run, with the bytes written, and can later materialise, for any prefix of
// that history (a "cut"), one file system state the disk could hold after
// the power failed at that point. It is the power-loss counterpart of the
// crash campaign: a killed process keeps the page cache, a power loss keeps
// only what was made durable, plus whatever the kernel happened to write.
//
// Files live in memory, not in a real directory. The live view (what the
// library reads back during the run) and the materialised states are then
// both derived from one record, so they cannot disagree, and a run costs no
// disk I/O: the campaign can afford hundreds of thousands of states on two
// cores. Only the states are written to disk, for a plain POSIX store to
// restart from.
//
// Paths are those the library passes in; everything lives under `root`,
// which exists (durably) from the start. A materialised state maps `root`
// to a fresh real directory.
//
// Durability rules (both semantics):
//   - data appended to a file is durable once sync() of that file returns;
//   - a directory entry change (mkdir, create, rename, remove) is durable
//     once sync_dir() of the directory holding the entry returns (for a
//     rename, of both directories when they differ; for mkdir, of the new
//     directory's parent);
//   - a rename is all or nothing: true of every journaled file system; the
//     ext2-era state with both names present is not modelled;
//   - a file that no surviving name reaches, or whose directory did not
//     survive, is gone (fsck would put it in lost+found);
//   - create() of an existing name is modelled as a new file replacing the
//     entry (the O_TRUNC then counts as an entry change);
//   - locks are in memory and leave no file: lock files hold no data.
//
// Semantics::kPosix, the worst case POSIX allows: each operation not yet
// durable at the cut is decided independently. An entry change is kept or
// reverted (an unsynced rename or unlink brings the old name and file back).
// An unsynced append is kept, dropped (its bytes read as zeros if the file's
// size covers them) or torn: each 512-byte sector of it, aligned on file
// offsets, is kept or zeroed independently. The file's size is its durable
// size or the end of its last append that was not dropped.
//
// Semantics::kOrdered, ext4 with data=ordered (the default): metadata goes
// through one journal whose transactions commit in order, and every fsync
// or fdatasync commits the running transaction. So the entry changes that
// survive are a prefix of all entry changes, at least up to the last sync()
// or sync_dir() before the cut. Data blocks are written before the
// transaction that makes them visible, so no stale or zero bytes are ever
// exposed: a file holds a prefix of its appends (whole appends), at least
// those made before its last sync(), and, when a rename of the file
// survives, those made before that rename (ext4's auto_da_alloc flushes a
// renamed file's data with the rename). Appends after the journal prefix
// are not visible (their size update did not commit). Delayed allocation's
// zero-length files after a crash are covered by the worst case, which
// allows them.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "resurgo/env.hpp"

namespace resurgo::power {

enum class Semantics { kPosix, kOrdered };
const char* semantics_name(Semantics semantics);

// What a materialised state contains, for the campaign's report.
struct StateSummary {
  int files = 0;             // regular files written
  int reverted_entries = 0;  // unsynced entry changes left out
  int torn_or_lost_appends = 0;
};

class PowerLossEnv final : public Env {
 public:
  explicit PowerLossEnv(std::string root);

  // Number of operations recorded so far: a cut is a number in [0, this].
  std::size_t operations() const;

  // Writes into `target` (an empty existing directory) one state the disk
  // could hold if the power failed after the first `cut` operations, the
  // choices drawn from `random`.
  StateSummary materialise(std::size_t cut, Semantics semantics, std::mt19937_64& random,
                           const std::string& target) const;

  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override;
  std::unique_ptr<ReadableFile> open(const std::string& path) override;
  void rename(const std::string& from, const std::string& to) override;
  void remove(const std::string& path) override;
  void sync_dir(const std::string& dir) override;
  void create_dirs(const std::string& dir) override;
  std::vector<std::string> list_dir(const std::string& dir) override;
  bool exists(const std::string& path) override;
  std::unique_ptr<FileLock> lock(const std::string& path) override;

  // A file committed over an existing name (a compaction, a repair): the
  // operations from its temporary's creation to the rename over the old copy.
  struct Replacement {
    std::size_t created;
    std::size_t renamed;
  };
  std::vector<Replacement> replacements() const;

  // The recorded operations, one per line, numbered from 0, with a line
  // marking where `cut` falls: written beside a kept failing state, since
  // the history (thread timing) cannot be recorded again from a seed.
  std::string describe(std::size_t cut) const;

  // Bit rot: flips one bit of the file at `path` in place, durably (a write
  // and a sync are recorded), as a failing disk would. Restart must then
  // repair or quarantine the copy.
  void damage(const std::string& path, std::uint64_t offset);

  // Called by the files this Env hands out.
  void append(int inode, const std::string& path, const void* data, std::size_t bytes);
  void sync(int inode, const std::string& path);
  void unlock(const std::string& path);

  enum class Kind { kMkdir, kCreate, kRename, kRemove, kWrite, kSync, kSyncDir };
  struct Operation {
    Kind kind;
    std::string path;  // the entry, the directory (kMkdir, kSyncDir) or the file's name
    std::string to;    // kRename
    int inode = -1;    // kCreate, kRename, kRemove, kWrite, kSync
    std::uint64_t offset = 0;       // kWrite: an append, or the campaign's bit rot
    std::vector<std::byte> bytes;   // kWrite
  };

 private:
  void record(Kind kind, const std::string& path, int inode = -1, const std::string& to = {},
              std::uint64_t offset = 0, std::vector<std::byte> bytes = {});
  void require_directory(const std::string& dir, const std::string& what) const;

  std::string root_;
  mutable std::mutex mutex_;
  std::vector<Operation> history_;
  // The live view, as the running process sees it.
  std::set<std::string> directories_;
  std::map<std::string, int> entries_;               // file path -> inode
  std::vector<std::vector<std::byte>> contents_;     // by inode
  std::set<std::string> locked_;
  std::map<int, std::size_t> created_at_;  // inode -> its kCreate's operation index
  std::vector<Replacement> replacements_;
};

}  // namespace resurgo::power
