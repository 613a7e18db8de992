// A directory level (L2 node-local, L4 persistent): one container file per
// version per rank under <root>/<store>/, committed atomically (temporary
// name, fsync, rename, directory fsync) so a version is visible only when
// complete; a group of versions shares the directory fsync (commit_group).
// An MPI store with persistent.layout = shared writes a version's container
// into its slot of the version's shared file instead, or packs its file
// into it later (job/shared_version.h); the level reads a rank's part of it
// wherever its own file is gone, whatever the layout configured.
// Every file is reached through the directory opened and checked
// once (Env::open_directory): never through a link, never another user's
// (docs/reliability.md, "Security").
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/owner_process.h"
#include "format/store_id.h"
#include "io/fork_safe_lock.h"
#include "resurgo/env.hpp"
#include "tier/level.h"
#include "tier/shared_slots.h"

namespace resurgo {

class DirectoryLevel final : public Level {
 public:
  // `shared_group`: the directory may be shared with the members of its
  // group (DirectoryRules).
  DirectoryLevel(int level, std::string root, const std::string& store, int rank, unsigned mode, int keep,
                 std::shared_ptr<Env> env, bool shared_group = false);
  ~DirectoryLevel() override;

  int number() const override { return level_; }
  int level() const { return level_; }
  Features features() const override;
  std::string where() const override { return dir_; }
  const std::string& dir() const { return dir_; }
  std::string path(int version) const;

  // Creates the directory, durably, unless it exists, checks it
  // (StorageError naming the path when another user could change it) and
  // removes temporaries left by dead processes. Before prepare() the level
  // reads a directory that exists (checked the same way) and holds nothing
  // where there is none: reading never creates it.
  void prepare() override;
  // Whether the directory exists now. The existing part of its path is
  // checked as prepare() checks it: StorageError for a file in the way or a
  // directory another user could change.
  bool exists() { return directory() != nullptr; }
  // Writes a version through `write` into a temporary file and commits it.
  // On failure the temporary is removed and nothing becomes visible.
  void commit(int version, const std::function<void(WritableFile&)>& write) override;
  // Makes every commit (of a version, a copy, a manifest) throw `failure`
  // instead, until called with null: why the directory could not be made
  // for the versions routed here (Route::levels_for).
  void refuse_writes(std::exception_ptr failure);
  // Copies a committed file of another level into this one, atomically,
  // verifying the header, the index and every chunk on the way.
  void commit_copy(int version, const ReadableFile& source) override;
  // Group commit: writes every version into its temporary, makes them all
  // durable at once (their fdatasyncs run concurrently), then renames each
  // and syncs the directory once. Each version is committed or absent after
  // a crash at any point, as with commit(); a failing step fails the
  // versions it touched only. A group of one is committed as commit() does.
  std::vector<std::exception_ptr> commit_group(const std::vector<PendingCommit>& group) override;

  // Committed versions of this rank, ascending: its files, and the shared
  // files (format/shared_file.h), which open() reads its part of.
  std::vector<int> versions() override;
  bool holds(int version) override;
  // This rank's file of `version`, else its part of the shared file.
  std::unique_ptr<ReadableFile> open(int version) override;
  // Another file of the directory, such as another rank's container named
  // by a job manifest (read from the shared file when the rank's own file
  // is gone); `name` is one path component.
  std::unique_ptr<ReadableFile> open_file(const std::string& name);
  // Rank `rank`'s part of the shared file of `version`: NotFoundError when
  // there is no shared file or it has no part of that rank,
  // CorruptionError naming the file for a torn one.
  std::unique_ptr<ReadableFile> open_shared_part(int version, int rank);

  // The steps of writing a shared file (job/shared_version.h). Rank 0
  // creates the temporary (returns its name) and publishes it once every
  // part and the index are durable; each rank removes its own file of the
  // version once the job manifest names the shared file's version.
  // This rank's own file of `version`, never the shared file's part.
  std::unique_ptr<ReadableFile> open_rank_file(int version);
  std::string create_shared_temporary(int version);
  // Every rank writes its part into rank 0's temporary through the Env
  // seam (Directory::open_positional), where faults can be injected.
  std::unique_ptr<PositionalFile> open_shared_temporary(const std::string& temporary);
  // The `bytes` this rank's commit wrote into its slot of a shared
  // temporary, read as the container file it is (its path names `rank`).
  std::unique_ptr<ReadableFile> open_shared_temporary_part(const SharedSlot& slot, std::uint64_t bytes, int rank);
  void publish_shared(const std::string& temporary, int version);
  void discard_temporary(const std::string& temporary);
  void remove_rank_file(int version);
  // The lock of this rank's copy of the store (held while the object
  // lives): StateError when another process or Store holds it.
  std::unique_ptr<FileLock> lock();

  // The store identity the directory holds (format/store_id.h), none before
  // one is written (or while a damaged one is all a directory without
  // versions holds); CorruptionError for a damaged identity file beside
  // versions.
  std::optional<format::StoreId> identity();
  // Writes `id` as the directory's identity when it holds none and returns
  // the identity it holds afterwards: `id`, or the one another rank or
  // process wrote first. In a directory without versions its bytes are
  // synced by the next durable commit.
  format::StoreId adopt_identity(const format::StoreId& id);
  // Renames a damaged copy to <file>.damaged, kept for inspection (the
  // shared file when this rank's part of it is the copy: the version is lost
  // for every rank then).
  void quarantine(int version) override;
  // Unlinks the version's file and syncs the directory; rank 0 unlinks the
  // version's shared file too.
  void remove(int version) override;
  // Removes the committed versions beyond the newest `keep`, except those
  // for which `pinned(version)` is true and the bases (read from the files,
  // transitively) of every version kept; removes newest first and returns
  // the removed versions, ascending. Only committed files are listed, so a
  // version is removed only once `keep` newer ones are durable.
  // `pinned` is asked after the listing: a writer that pins each version
  // right after committing it, before committing the next, has then pinned
  // every listed version that has a newer one listed. (Asking before the
  // listing missed versions committed meanwhile: the stress campaign saw an
  // L2 file removed before its L4 copy.)
  std::vector<int> evict(const std::function<bool(int)>& pinned, const KnownBases& known_bases = {}) override;

  // The directory of an MPI store: a version here is complete only once the
  // job's manifest says so, and evict() keeps every version from the newest
  // complete one on (an older complete version stays until a newer one is
  // complete on every rank, not only here).
  void set_collective() { collective_ = true; }
  // persistent.layout = shared: a version committed here goes into its slot
  // of the shared file where the job reserved one, else into a file that is
  // scratch for the shared file (written and renamed, but neither it nor the
  // directory synced: the shared file's fdatasync and the job manifest make
  // a version durable); open() reads a version's slot until its shared file
  // is published, then the shared file first.
  void set_shared_layout() { shared_layout_ = true; }
  // local.durable = false: the files are scratch. A commit writes and
  // renames but syncs neither the file nor the directory, and remove()
  // does not sync the directory: a version survives the process's crash
  // (the kernel holds what was written), not the node's, whose power loss
  // may leave a file torn, which restart detects. Manifests stay durable.
  // The files of removed versions are kept as spares (under temporary
  // names) that commits write anew (Directory::reuse). A commit creates a
  // file only when no spare is left, so the level never holds more files
  // than the most versions (with those on their way) it held at once; a
  // group commit takes as many spares as it has versions, hence a cap well
  // above a group's usual size.
  void set_scratch() { durable_ = false; }
  static constexpr std::size_t kSpares = 32;
  // The slots the job reserves for this rank's commits in the versions'
  // shared temporaries (tier/shared_slots.h): a commit with a slot writes
  // its container there, unsynced, and no file of its own.
  SharedSlots& shared_slots() { return shared_slots_; }

  // Job manifests of an MPI store (format/manifest.h), committed as
  // atomically as versions: one writer per directory (rank 0 of the job or
  // of the node) writes them; any rank reads them.
  void commit_manifest(int version, const std::string& text);
  // The manifest's text, or none when the directory holds none for `version`.
  // CorruptionError for one larger than any manifest can be.
  std::optional<std::string> read_manifest(int version);
  std::vector<int> manifest_versions();  // ascending
  void remove_manifest(int version);

 private:
  struct StagedFile;  // one file of a commit on its way (directory_level.cpp)
  class Publishing;  // names renamed into place, their directory sync not returned (directory_level.cpp)

  // Writes `final_name` through a temporary `temporary` (fsync, rename,
  // directory fsync); on failure nothing is visible.
  void commit_file(const std::string& final_name, const std::string& temporary,
                   const std::function<void(WritableFile&)>& write, bool durable = true);
  // Commits `files` together; each failure goes to its file's `failure`.
  void commit_files(std::vector<StagedFile>& files);
  void write_temporaries(Directory& directory, std::vector<StagedFile>& files);
  void sync_temporaries(Directory& directory, std::vector<StagedFile>& files);
  void publish(Directory& directory, std::vector<StagedFile>& files);
  // versions(), less those whose new file is visible but not yet durable.
  std::vector<int> durable_versions();
  // How a version of a group is written: its `write`, or a verified copy of
  // its `source`.
  std::function<void(WritableFile&)> pending_write(const PendingCommit& pending);
  // The shared layout's commit: into the version's slot where it has one
  // (false: it has none, or outgrew it, and goes to this rank's own file).
  bool commit_into_slot(int version, const std::function<void(WritableFile&)>& write);
  // The shared layout's group commit: one version after the other (nothing
  // is synced, so a group would share nothing).
  std::vector<std::exception_ptr> commit_each(const std::vector<PendingCommit>& group);
  std::string file_name(int version) const;
  // Whether rank `rank`'s copy of `version` is read from the shared file.
  bool reads_shared(Directory& directory, int version, int rank);
  // Unlinks this rank's file of `version`, or keeps it as a spare, and,
  // on rank 0, the shared file.
  void remove_copies(Directory& directory, int version);
  // Spares: a scratch level's files of removed versions, only in the
  // process that opened the level (a forked writer's commits would take
  // them unknown to it), and never beside a shared file or a job manifest.
  bool keeps_spares() const;
  bool keep_as_spare(Directory& directory, const std::string& name);
  // The temporary `temporary` of a commit: a spare reused, else created.
  std::unique_ptr<WritableFile> create_temporary(Directory& directory, const std::string& temporary);
  // The directory once it exists (nullptr before), opened on first use and
  // then kept: the pointer stays valid while the level lives.
  Directory* directory();
  Directory& existing_directory();
  // Whether the directory holds a version (or a manifest) of any rank.
  static bool holds_versions(Directory& directory);
  struct UnsyncedIdentity;  // an identity file written, not yet synced (directory_level.cpp)
  bool write_identity(Directory& directory, UnsyncedIdentity& identity, bool sync, bool only_new);
  // Syncs the identity file adopt_identity() wrote, before the first
  // version that carries it can be durable; on a scratch level, before its
  // first version, with the directory.
  void make_identity_durable(Directory& directory);
  std::vector<std::string> names();

  int level_;
  std::string dir_;
  int rank_;
  unsigned mode_;
  int keep_;
  bool collective_ = false;
  bool shared_layout_ = false;
  bool durable_ = true;
  OwnerProcess opener_;  // spares are its alone
  std::mutex spares_mutex_;  // guards spares_
  std::vector<std::string> spares_;
  SharedSlots shared_slots_;
  bool shared_group_;
  std::shared_ptr<Env> env_;
  std::mutex directory_mutex_;  // guards the two below
  std::unique_ptr<Directory> directory_;
  std::exception_ptr refusal_;
  // The same facts, read without the mutex by commit(): a forked writer
  // (capture.mode fork or auto) commits in a child that inherits the mutex
  // in whatever state another thread of the parent (an eviction, a listing)
  // left it at fork(), and would wait on it forever. `opened_` is set once.
  std::atomic<Directory*> opened_{nullptr};
  std::atomic<bool> refused_{false};
  // The identity file adopt_identity() wrote and left to the next durable
  // commit to sync; under a lock a forked writer can take over, for the same
  // reason as the two atomics above (io/fork_safe_lock.h).
  ForkSafeLock identity_lock_;
  std::unique_ptr<UnsyncedIdentity> unsynced_identity_;
  // The new files of commits between their rename and the end of the
  // directory sync after it (Publishing); a fork-safe lock for the reason
  // above.
  ForkSafeLock publishing_lock_;
  std::vector<std::string> publishing_;
};

}  // namespace resurgo
