// A directory level (L2 node-local, L4 persistent): one container file per
// version per rank under <root>/<store>/, committed atomically (temporary
// name, fsync, rename, directory fsync) so a version is visible only when
// complete.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "resurgo/env.hpp"
#include "tier/level.h"

namespace resurgo {

class DirectoryLevel final : public Level {
 public:
  DirectoryLevel(int level, std::string root, const std::string& store, int rank, unsigned mode,
                int keep, std::shared_ptr<Env> env);

  int number() const override { return level_; }
  int level() const { return level_; }
  Features features() const override;
  std::string where() const override { return dir_; }
  const std::string& dir() const { return dir_; }
  std::string path(int version) const;

  // Creates the directory, durably, and removes temporaries left by dead
  // processes.
  void prepare() override;
  // Writes a version through `write` into a temporary file and commits it.
  // On failure the temporary is removed and nothing becomes visible.
  void commit(int version, const std::function<void(WritableFile&)>& write) override;
  // Copies a committed file of another level into this one, atomically,
  // verifying the header, the index and every chunk on the way.
  void commit_copy(int version, const ReadableFile& source) override;

  std::vector<int> versions() override;  // committed versions of this rank, ascending
  bool holds(int version) override;
  std::unique_ptr<ReadableFile> open(int version) override;
  // Renames a damaged copy to <file>.damaged, kept for inspection.
  void quarantine(int version) override;
  // Unlinks the version's file and syncs the directory.
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
  std::vector<int> evict(const std::function<bool(int)>& pinned, const std::map<int, int>& known_bases = {}) override;

  // The directory of an MPI store: a version here is complete only once the
  // job's manifest says so, and evict() keeps every version from the newest
  // complete one on (an older complete version stays until a newer one is
  // complete on every rank, not only here).
  void set_collective() { collective_ = true; }

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
  // Writes `final_path` through a temporary `temporary` (fsync, rename,
  // directory fsync); on failure nothing is visible.
  void commit_file(const std::string& final_path, const std::string& temporary,
                   const std::function<void(WritableFile&)>& write);
  std::string temporary_path(int version) const;
  void create_directory_durably();

  int level_;
  std::string dir_;
  int rank_;
  unsigned mode_;
  int keep_;
  bool collective_ = false;
  std::shared_ptr<Env> env_;
};

}  // namespace resurgo
