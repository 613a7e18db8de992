#include "tier/directory_level.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <system_error>
#include <thread>

#include "base/crash_point.h"
#include "format/container.h"
#include "format/file_names.h"
#include "format/manifest.h"
#include "format/shared_file.h"
#include "resurgo/errors.hpp"
#include "tier/eviction.h"

namespace resurgo {

DirectoryLevel::DirectoryLevel(int level, std::string root, const std::string& store, int rank, unsigned mode,
                               int keep, std::shared_ptr<Env> env, bool shared_group)
    : level_(level),
      dir_(std::move(root) + "/" + store),
      rank_(rank),
      mode_(mode),
      keep_(keep),
      shared_group_(shared_group),
      env_(std::move(env)) {}

std::string DirectoryLevel::path(int version) const { return dir_ + "/" + file_name(version); }

std::string DirectoryLevel::file_name(int version) const { return format::container_file_name(version, rank_); }

Directory* DirectoryLevel::directory() {
  if (Directory* opened = opened_.load(std::memory_order_acquire)) return opened;
  std::lock_guard guard(directory_mutex_);
  if (!directory_) {
    try {
      directory_ = env_->open_directory(dir_, DirectoryRules{false, shared_group_});
    } catch (const NotFoundError&) {
      return nullptr;  // not made yet: it holds nothing
    }
  }
  opened_.store(directory_.get(), std::memory_order_release);
  return directory_.get();
}

Directory& DirectoryLevel::existing_directory() {
  Directory* found = directory();
  if (found == nullptr) throw StateError("directory '" + dir_ + "' does not exist: the level was not prepared");
  return *found;
}

namespace {

// Whether process `pid` can still write: it exists (kill(pid, 0) answers, or
// it belongs to another user) and is not a zombie. An exited process that is
// not reaped yet still answers kill(pid, 0); a forked writer killed with its
// application stays one until init reaps it (forever where pid 1 does not).
bool process_alive(int pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) return false;
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::FILE* stat = std::fopen(path, "r");
  if (stat == nullptr) return true;  // no /proc: trust kill()
  char state = '?';
  // "pid (comm) state ...": comm may hold spaces and parentheses; the state follows the last ')'.
  char line[512];
  const std::size_t got = std::fread(line, 1, sizeof line - 1, stat);
  std::fclose(stat);
  line[got] = '\0';
  if (const char* close = std::strrchr(line, ')'); close != nullptr && close[1] == ' ') state = close[2];
  return state != 'Z' && state != 'X';
}

// After a failure: the failure is what the caller reports.
void remove_quietly(Directory& directory, const std::string& name) {
  try {
    directory.remove(name);
  } catch (const Error&) {
  }
}

}  // namespace

// A directory opened before (it existed) is kept: other threads may be
// listing it.
void DirectoryLevel::prepare() {
  {
    std::lock_guard guard(directory_mutex_);
    if (!directory_) directory_ = env_->open_directory(dir_, DirectoryRules{true, shared_group_});
    opened_.store(directory_.get(), std::memory_order_release);
  }
  Directory& directory = *directory_;
  const std::string rank_part = format::container_file_name(0, rank_).substr(11);  // ".r000003.rsg"
  for (const std::string& name : directory.list()) {
    const std::optional<int> pid = format::temporary_owner(name);
    const bool ours = name.find(rank_part) != std::string::npos || name.find(".job-r") != std::string::npos ||
                      (rank_ == 0 && name.find(".shared.rsg-r") != std::string::npos) ||
                      name.rfind(format::temporary_prefix(format::kStoreIdFileName, rank_), 0) == 0;
    if (!pid || !ours) continue;
    const bool owner_alive = *pid != ::getpid() && process_alive(*pid);
    if (owner_alive) continue;
    directory.remove(name);
    RESURGO_CRASH_POINT("prepare.removed_temporary", level_);
  }
}

void DirectoryLevel::commit(int version, const std::function<void(WritableFile&)>& write) {
  if (shared_layout_ && commit_into_slot(version, write)) return;
  const std::string name = file_name(version);
  commit_file(name, format::temporary_file_name(name, ::getpid()), write, durable_ && !shared_layout_);
}

void DirectoryLevel::refuse_writes(std::exception_ptr failure) {
  std::lock_guard guard(directory_mutex_);
  refusal_ = std::move(failure);
  refused_.store(static_cast<bool>(refusal_), std::memory_order_release);
}

struct DirectoryLevel::StagedFile {
  std::string final_name;
  std::string temporary;
  std::function<void(WritableFile&)> write;
  // False for a rank's file that the shared file will hold (set_shared_layout):
  // neither it nor the directory is synced for it.
  bool durable = true;
  std::unique_ptr<WritableFile> file;
  // A commit over a committed file (compaction rewrites a version in place)
  // replaces one complete copy of the version with another: once renamed,
  // the file stays even if the directory sync fails, since either entry
  // the directory may keep holds the version whole.
  bool replaces = false;
  bool renamed = false;
  std::exception_ptr failure;

  // Records the exception being handled. A failed commit must not leave a
  // version whose durability is unknown visible; a leftover temporary is
  // invisible and prepare() removes it.
  void fail(Directory& directory) {
    failure = std::current_exception();
    file.reset();
    if (!(renamed && replaces)) remove_quietly(directory, renamed ? final_name : temporary);
  }
};

namespace {

// Sync threads of one group commit, the caller included.
constexpr std::size_t kSyncThreads = 16;

}  // namespace

void DirectoryLevel::commit_file(const std::string& final_name, const std::string& temporary,
                                 const std::function<void(WritableFile&)>& write, bool durable) {
  std::vector<StagedFile> files(1);
  files[0].final_name = final_name;
  files[0].temporary = temporary;
  files[0].write = write;
  files[0].durable = durable;
  commit_files(files);
  if (files[0].failure) std::rethrow_exception(files[0].failure);
}

std::function<void(WritableFile&)> DirectoryLevel::pending_write(const PendingCommit& pending) {
  if (pending.source == nullptr) return pending.write;
  return [this, version = pending.version, &source = *pending.source](WritableFile& file) {
    const format::Container container = format::read_container(source);
    format::check_identity(container, source.path(), "", version, rank_);
    format::copy_verified(source, container, file);
  };
}

std::vector<std::exception_ptr> DirectoryLevel::commit_group(const std::vector<PendingCommit>& group) {
  if (shared_layout_) return commit_each(group);
  std::vector<StagedFile> files(group.size());
  for (std::size_t i = 0; i < group.size(); ++i) {
    const PendingCommit& pending = group[i];
    files[i].final_name = file_name(pending.version);
    files[i].temporary = format::temporary_file_name(files[i].final_name, ::getpid());
    files[i].write = pending_write(pending);
    files[i].durable = durable_;
  }
  commit_files(files);
  std::vector<std::exception_ptr> failures;
  for (StagedFile& file : files) {
    if (file.failure) {
      try {
        std::rethrow_exception(file.failure);
      } catch (const Error&) {
        // the version's failure, returned to the caller
      }
    }
    failures.push_back(file.failure);
  }
  return failures;
}

void DirectoryLevel::commit_files(std::vector<StagedFile>& files) {
  Directory* directory = nullptr;
  try {
    if (refused_.load(std::memory_order_acquire)) {
      std::lock_guard guard(directory_mutex_);
      std::rethrow_exception(refusal_);
    }
    directory = &existing_directory();
    // A scratch level syncs the identity too, once: a store whose identity
    // a power loss tore could not be opened at all (the power campaign).
    if (!durable_ || std::any_of(files.begin(), files.end(), [](const StagedFile& file) { return file.durable; })) {
      make_identity_durable(*directory);
    }
  } catch (...) {
    for (StagedFile& file : files) file.failure = std::current_exception();
    return;
  }
  write_temporaries(*directory, files);
  sync_temporaries(*directory, files);
  publish(*directory, files);
}

void DirectoryLevel::write_temporaries(Directory& directory, std::vector<StagedFile>& files) {
  for (StagedFile& staged : files) {
    try {
      staged.replaces = directory.exists(staged.final_name);
      staged.file = create_temporary(directory, staged.temporary);
      RESURGO_CRASH_POINT("commit.created", level_);
      staged.write(*staged.file);
      RESURGO_CRASH_POINT("commit.written", level_);
    } catch (...) {
      staged.fail(directory);
    }
  }
}

// The fdatasyncs of a group run at once, one thread each: ext4 joins
// concurrent ones into one journal commit and one disk cache flush, where
// one after another each pays its own (starting their writeback first with
// sync_file_range gained nothing more when tried). Each file still gets its
// own fdatasync: no file system-wide shortcut such as syncfs().
// A single file is synced on the caller's thread, as before group commit.
void DirectoryLevel::sync_temporaries(Directory& directory, std::vector<StagedFile>& files) {
  std::vector<StagedFile*> written;
  for (StagedFile& staged : files) {
    if (!staged.failure) written.push_back(&staged);
  }
  std::atomic<std::size_t> next{0};
  const auto sync_some = [&] {
    for (std::size_t i = next++; i < written.size(); i = next++) {
      try {
        if (written[i]->durable) written[i]->file->sync();
      } catch (...) {
        written[i]->failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  try {
    while (helpers.size() + 1 < std::min(written.size(), kSyncThreads)) helpers.emplace_back(sync_some);
  } catch (const std::system_error&) {
    // fewer helpers: the caller syncs the rest
  }
  sync_some();
  for (std::thread& helper : helpers) helper.join();
  for (StagedFile* staged : written) {
    try {
      if (staged->failure) std::rethrow_exception(staged->failure);
      staged->file->close();
      RESURGO_CRASH_POINT("commit.synced", level_);
    } catch (...) {
      staged->fail(directory);
    }
  }
}

// Names new files as being published from before their rename to the end
// of the directory sync after it: until then a power loss may take back
// the rename, and durable_versions() leaves them out.
class DirectoryLevel::Publishing {
 public:
  Publishing(DirectoryLevel& level, std::vector<std::string> names) : level_(level), names_(std::move(names)) {
    if (names_.empty()) return;
    std::lock_guard guard(level_.publishing_lock_);
    level_.publishing_.insert(level_.publishing_.end(), names_.begin(), names_.end());
  }
  ~Publishing() {
    if (names_.empty()) return;
    std::lock_guard guard(level_.publishing_lock_);
    for (const std::string& name : names_) {
      level_.publishing_.erase(std::find(level_.publishing_.begin(), level_.publishing_.end(), name));
    }
  }
  Publishing(const Publishing&) = delete;
  Publishing& operator=(const Publishing&) = delete;

 private:
  DirectoryLevel& level_;
  std::vector<std::string> names_;
};

// Renames each durable temporary, then syncs the directory once for all.
// A file replacing a committed copy of its version is not named as being
// published: either entry holds the version whole.
void DirectoryLevel::publish(Directory& directory, std::vector<StagedFile>& files) {
  std::vector<std::string> new_names;
  for (const StagedFile& staged : files) {
    if (!staged.failure && staged.durable && !staged.replaces) new_names.push_back(staged.final_name);
  }
  const Publishing publishing(*this, std::move(new_names));
  bool any_renamed = false;
  for (StagedFile& staged : files) {
    if (staged.failure) continue;
    try {
      directory.rename(staged.temporary, staged.final_name);
      staged.renamed = true;
      any_renamed = any_renamed || staged.durable;
      RESURGO_CRASH_POINT("commit.renamed", level_);
    } catch (...) {
      staged.fail(directory);
    }
  }
  if (!any_renamed) return;
  try {
    directory.sync();
  } catch (...) {
    for (StagedFile& staged : files) {
      if (!staged.failure) staged.fail(directory);
    }
    return;
  }
  for (StagedFile& staged : files) {
    if (!staged.failure) RESURGO_CRASH_POINT("commit.done", level_);
  }
}

Level::Features DirectoryLevel::features() const {
  Features features;
  features.node_local = level_ <= 2;
  features.collective = collective_;
  return features;
}

void DirectoryLevel::commit_copy(int version, const ReadableFile& source) {
  PendingCommit copy;
  copy.version = version;
  copy.source = &source;
  if (const std::exception_ptr failure = commit_group({copy}).front()) std::rethrow_exception(failure);
}

std::vector<std::string> DirectoryLevel::names() {
  Directory* found = directory();
  return found == nullptr ? std::vector<std::string>{} : found->list();
}

std::vector<int> DirectoryLevel::versions() {
  std::vector<int> found;
  for (const std::string& name : names()) {
    int version = 0;
    int rank = 0;
    if ((format::parse_container_file_name(name, version, rank) && rank == rank_) ||
        format::parse_shared_file_name(name, version)) {
      found.push_back(version);
    }
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

// A version whose part a commit wrote into its slot is held from then on
// (read from the slot until the shared file is published).
bool DirectoryLevel::holds(int version) {
  Directory* found = directory();
  return found != nullptr &&
         (found->exists(file_name(version)) || found->exists(format::shared_file_name(version)) ||
          (shared_layout_ && shared_slots_.find(version).bytes.has_value()));
}

std::unique_ptr<ReadableFile> DirectoryLevel::open(int version) {
  const TakenSlot taken = shared_layout_ ? shared_slots_.find(version) : TakenSlot{};
  if (taken.slot && taken.bytes) {
    try {
      return open_shared_temporary_part(*taken.slot, *taken.bytes, rank_);
    } catch (const NotFoundError&) {
      // published meanwhile: the shared file holds the part
    }
  }
  return open_file(file_name(version));
}

// A rank's own file first, unless this store packs versions: its own files
// are then never synced, and the shared file is the durable copy.
bool DirectoryLevel::reads_shared(Directory& directory, int version, int rank) {
  return directory.exists(format::shared_file_name(version)) &&
         (shared_layout_ || !directory.exists(format::container_file_name(version, rank)));
}

std::unique_ptr<ReadableFile> DirectoryLevel::open_file(const std::string& name) {
  Directory* found = directory();
  if (found == nullptr) throw NotFoundError("no such file '" + dir_ + "/" + name + "' (no directory '" + dir_ + "')");
  int version = 0;
  int rank = 0;
  if (format::parse_container_file_name(name, version, rank) && reads_shared(*found, version, rank)) {
    return open_shared_part(version, rank);
  }
  return found->open(name);
}

std::unique_ptr<ReadableFile> DirectoryLevel::open_rank_file(int version) {
  return existing_directory().open(file_name(version));
}

std::unique_ptr<ReadableFile> DirectoryLevel::open_shared_part(int version, int rank) {
  std::shared_ptr<const ReadableFile> file = existing_directory().open(format::shared_file_name(version));
  const format::SharedIndex index = format::read_shared_index(*file);
  if (index.version != version) {
    throw CorruptionError("shared file '" + file->path() + "' holds version " + std::to_string(index.version) +
                          ", not " + std::to_string(version) + " as its name says: it cannot be restored");
  }
  if (rank < 0 || static_cast<std::size_t>(rank) >= index.parts.size()) {
    throw NotFoundError("shared file '" + file->path() + "' of version " + std::to_string(version) +
                        " has no part of rank " + std::to_string(rank) + " (written by " +
                        std::to_string(index.parts.size()) + " ranks)");
  }
  return format::open_part(std::move(file), index.parts[static_cast<std::size_t>(rank)], rank);
}

std::string DirectoryLevel::create_shared_temporary(int version) {
  const std::string name = format::temporary_file_name(format::shared_file_name(version), ::getpid(), rank_);
  existing_directory().create(name, mode_)->close();
  return name;
}

std::unique_ptr<PositionalFile> DirectoryLevel::open_shared_temporary(const std::string& temporary) {
  return existing_directory().open_positional(temporary);
}

std::unique_ptr<ReadableFile> DirectoryLevel::open_shared_temporary_part(const SharedSlot& slot, std::uint64_t bytes,
                                                                         int rank) {
  return format::open_part(existing_directory().open(slot.temporary), format::SharedPart{slot.offset, bytes, 0}, rank);
}

// Unsynced, as a rank's own file in this layout: the job syncs every part
// before it publishes the shared file. A refused level writes nothing
// (commit_file reports why).
bool DirectoryLevel::commit_into_slot(int version, const std::function<void(WritableFile&)>& write) {
  if (refused_.load(std::memory_order_acquire)) return false;
  const std::optional<SharedSlot> slot = shared_slots_.wait(version);
  if (!slot) return false;
  SlotFile file(existing_directory().open_positional(slot->temporary), *slot);
  try {
    write(file);
  } catch (const SharedSlots::Outgrown&) {
    return false;
  }
  shared_slots_.filled(version, file.written());
  return true;
}

std::vector<std::exception_ptr> DirectoryLevel::commit_each(const std::vector<PendingCommit>& group) {
  std::vector<std::exception_ptr> failures;
  for (const PendingCommit& pending : group) {
    try {
      commit(pending.version, pending_write(pending));
      failures.emplace_back();
    } catch (const Error&) {
      failures.push_back(std::current_exception());  // the version's failure, returned to the caller
    }
  }
  return failures;
}

// As a commit over a rank's file: a shared file left by a run that never
// committed the version (no manifest) is replaced.
void DirectoryLevel::publish_shared(const std::string& temporary, int version) {
  Directory& directory = existing_directory();
  make_identity_durable(directory);
  const Publishing publishing(*this, {format::shared_file_name(version)});
  directory.rename(temporary, format::shared_file_name(version));
  directory.sync();
}

void DirectoryLevel::discard_temporary(const std::string& temporary) {
  remove_quietly(existing_directory(), temporary);
}

// No directory sync: a rank file that reappears after a crash is scratch
// the shared file is read before.
void DirectoryLevel::remove_rank_file(int version) { existing_directory().remove(file_name(version)); }

void DirectoryLevel::remove_copies(Directory& directory, int version) {
  if (!keep_as_spare(directory, file_name(version))) directory.remove(file_name(version));
  if (rank_ == 0) directory.remove(format::shared_file_name(version));
}

bool DirectoryLevel::keeps_spares() const {
  return !durable_ && !collective_ && !shared_layout_ && !opener_.inherited();
}

// A spare's name is a temporary of this process: prepare() removes the
// spares of a process that died.
bool DirectoryLevel::keep_as_spare(Directory& directory, const std::string& name) {
  if (!keeps_spares()) return false;
  std::lock_guard guard(spares_mutex_);
  if (spares_.size() >= kSpares || !directory.exists(name)) return false;
  const std::string spare = format::temporary_file_name(name, ::getpid());
  directory.rename(name, spare);
  spares_.push_back(spare);
  return true;
}

std::unique_ptr<WritableFile> DirectoryLevel::create_temporary(Directory& directory, const std::string& temporary) {
  std::optional<std::string> spare;
  if (keeps_spares()) {
    std::lock_guard guard(spares_mutex_);
    if (!spares_.empty()) {
      spare = std::move(spares_.back());
      spares_.pop_back();
    }
  }
  if (!spare) return directory.create(temporary, mode_);
  try {
    return directory.reuse(*spare, temporary, mode_);
  } catch (const Error&) {
    remove_quietly(directory, *spare);
    throw;
  }
}

void DirectoryLevel::remove(int version) {
  Directory& directory = existing_directory();
  remove_copies(directory, version);
  if (durable_) directory.sync();
}

// A copy read from the shared file is the shared file's: it goes aside
// whole (another rank may have set it aside first).
void DirectoryLevel::quarantine(int version) {
  Directory& directory = existing_directory();
  const bool shared = reads_shared(directory, version, rank_);
  const std::string name = shared ? format::shared_file_name(version) : file_name(version);
  try {
    directory.rename(name, name + format::kDamagedSuffix);
  } catch (const Error&) {
    if (!shared || directory.exists(name)) throw;
  }
  RESURGO_CRASH_POINT("quarantine.renamed", level_);
  directory.sync();
}

std::unique_ptr<FileLock> DirectoryLevel::lock() { return existing_directory().lock(format::lock_file_name(rank_)); }

// A power loss after the identity's rename and before the first version's
// commit may leave the name without its bytes (adopt_identity() does not
// sync them): in a directory that holds no version of any rank, a damaged
// identity is one nobody carries, and the directory counts as holding none.
std::optional<format::StoreId> DirectoryLevel::identity() {
  std::unique_ptr<ReadableFile> file;
  try {
    file = open_file(format::kStoreIdFileName);
  } catch (const NotFoundError&) {
    return std::nullopt;
  }
  constexpr std::size_t kBytes = 33;  // 32 hex digits and a newline
  std::string text(kBytes, '\0');
  if (file->size() == kBytes) file->read_at(0, text.data(), kBytes);
  const std::optional<format::StoreId> id = format::StoreId::parse(text.substr(0, 32));
  if (file->size() == kBytes && text[32] == '\n' && id) return id;
  if (!holds_versions(existing_directory())) return std::nullopt;
  throw CorruptionError("store identity file '" + file->path() +
                        "' is damaged (it holds no 32-digit identity); remove it only if no other store's "
                        "versions are in that directory");
}

bool DirectoryLevel::holds_versions(Directory& directory) {
  for (const std::string& name : directory.list()) {
    int version = 0;
    int rank = 0;
    if (format::parse_container_file_name(name, version, rank) || format::parse_shared_file_name(name, version) ||
        format::parse_manifest_file_name(name, version)) {
      return true;
    }
  }
  return false;
}

struct DirectoryLevel::UnsyncedIdentity {
  std::unique_ptr<WritableFile> file;  // none after a failed sync: written again instead
  std::string text;
};

// The spares go with the level; a forked child leaves its parent's alone.
DirectoryLevel::~DirectoryLevel() {
  Directory* opened = opened_.load(std::memory_order_acquire);
  if (opened == nullptr || opener_.inherited()) return;
  for (const std::string& spare : spares_) remove_quietly(*opened, spare);
}

// The identity's bytes are synced by the first commit that makes a version
// durable here (make_identity_durable), off the first checkpoint's path,
// and its name by that commit's directory sync. The file is kept open
// until then: the Env interface syncs files it wrote, not files it finds.
// So an identity found in a directory without versions (its writer may not
// have synced it: a process that never committed, a rank still opening) is
// written again, the same bytes renamed over it, which any rank of the
// store may do at once. In a directory with versions the identity found
// was synced before them, and one written there (a store from before
// identities) is synced at once: a damaged identity beside versions makes
// open fail.
//
// Whether a file was there is looked at before it is read: looked at after,
// a file another rank made in between would be replaced by the identity
// this store drew while none was there (the stress campaign under ASan
// ended with two identities in a store's directories so).
format::StoreId DirectoryLevel::adopt_identity(const format::StoreId& id) {
  Directory& directory = existing_directory();
  const bool versions = holds_versions(directory);
  const bool absent = !directory.exists(format::kStoreIdFileName);
  const std::optional<format::StoreId> found = identity();
  if (found && versions) return *found;
  const format::StoreId adopted = found.value_or(id);
  auto unsynced = std::make_unique<UnsyncedIdentity>(UnsyncedIdentity{nullptr, adopted.hex() + "\n"});
  // Another rank or process may have written one first: theirs stays. One
  // found, or a damaged one (identity() said none), is replaced.
  if (!write_identity(directory, *unsynced, versions, absent)) {
    if (const std::optional<format::StoreId> theirs = identity()) return adopt_identity(*theirs);
    throw StateError("store identity file '" + dir_ + "/" + format::kStoreIdFileName +
                     "' was replaced by a damaged one while this store wrote its own; open the store again");
  }
  if (!versions) {
    std::lock_guard guard(identity_lock_);
    unsynced_identity_ = std::move(unsynced);
  }
  return adopted;
}

// Writes identity.text through a temporary, synced when `sync`, renamed to
// the identity's name (only if none is there when `only_new`: false when
// one was); the file stays open in identity.file.
bool DirectoryLevel::write_identity(Directory& directory, UnsyncedIdentity& identity, bool sync, bool only_new) {
  const std::string temporary = format::temporary_file_name(format::kStoreIdFileName, ::getpid(), rank_);
  try {
    identity.file = directory.create(temporary, 0600);
    identity.file->append(identity.text.data(), identity.text.size());
    if (sync) identity.file->sync();
    if (!only_new) {
      directory.rename(temporary, format::kStoreIdFileName);
      return true;
    }
    if (directory.rename_new(temporary, format::kStoreIdFileName)) return true;
  } catch (...) {
    identity.file.reset();
    remove_quietly(directory, temporary);
    throw;
  }
  identity.file.reset();
  directory.remove(temporary);
  return false;
}

// A failed sync may have dropped the pages it was to write, and a second
// one of the same file would then succeed without them (see
// tests/power/fsync_failure_test.cpp): the identity is written again by the
// next commit instead, synced before its rename.
void DirectoryLevel::make_identity_durable(Directory& directory) {
  std::lock_guard guard(identity_lock_);
  if (!unsynced_identity_) return;
  UnsyncedIdentity& identity = *unsynced_identity_;
  try {
    if (identity.file) {
      identity.file->sync();
    } else {
      write_identity(directory, identity, true, false);
    }
    identity.file->close();
    if (!durable_) directory.sync();  // its name: no commit of a scratch level syncs the directory
  } catch (const Error& error) {
    identity.file.reset();
    throw StorageError("cannot make the store identity file '" + dir_ + "/" + format::kStoreIdFileName +
                       "' durable before a version that carries it: " + error.what() +
                       " (the version is not committed; the next one writes the identity again)");
  }
  unsynced_identity_.reset();
}

// A commit renames its file into place before the directory sync that
// makes the rename durable. Counted among the versions an eviction keeps in
// between (the scheduler evicts on its own thread), such a version would
// let the eviction remove the durable one it supersedes, and a power loss
// before the sync could then take both (the power campaign, POSIX
// semantics, on L4 with keep = 1). Listed first, then filtered: a version
// named as being published was named before its rename.
std::vector<int> DirectoryLevel::durable_versions() {
  std::vector<int> listed = versions();
  std::lock_guard guard(publishing_lock_);
  if (publishing_.empty()) return listed;
  const auto published = [&](const std::string& name) {
    return std::find(publishing_.begin(), publishing_.end(), name) != publishing_.end();
  };
  std::erase_if(listed, [&](int version) {
    return published(file_name(version)) || published(format::shared_file_name(version));
  });
  return listed;
}

std::vector<int> DirectoryLevel::evict(const std::function<bool(int)>& pinned, const KnownBases& known_bases) {
  // A damaged file names no base and pins nothing; an unreadable one throws
  // before anything is removed.
  const auto base = [&](int version) { return base_of(version, known_bases); };
  const std::vector<int> listed = durable_versions();
  std::function<bool(int)> kept = pinned;
  if (collective_) {
    const std::vector<int> manifests = manifest_versions();
    const int newest_complete = manifests.empty() ? -1 : manifests.back();
    kept = [&](int version) { return version >= newest_complete || pinned(version); };
  }
  std::vector<int> removed;
  for (int version : versions_to_evict(listed, keep_, kept, base)) {
    remove_copies(existing_directory(), version);
    RESURGO_CRASH_POINT("evict.removed", level_);
    removed.insert(removed.begin(), version);
  }
  // The manifests of versions older than every one this rank keeps go too
  // (the other ranks remove their files in their own evictions).
  const auto oldest_kept = std::find_if(listed.begin(), listed.end(), [&](int version) {
    return std::find(removed.begin(), removed.end(), version) == removed.end();
  });
  if (collective_ && !removed.empty() && oldest_kept != listed.end()) {
    for (int version : manifest_versions()) {
      if (version < *oldest_kept) remove_manifest(version);
    }
  }
  // No directory fsync: an evicted file that reappears after a crash is an
  // intact older version, harmless, and the next eviction removes it.
  return removed;
}

void DirectoryLevel::commit_manifest(int version, const std::string& text) {
  const std::string name = format::manifest_file_name(version);
  // The rank in the temporary's name keeps apart the writers of one
  // directory (fake nodes sharing it, or ranks that are threads).
  commit_file(name, format::temporary_file_name(name, ::getpid(), rank_),
              [&](WritableFile& file) { file.append(text.data(), text.size()); });
}

std::optional<std::string> DirectoryLevel::read_manifest(int version) {
  try {
    return format::read_manifest_file(*open_file(format::manifest_file_name(version)));
  } catch (const NotFoundError&) {
    return std::nullopt;
  }
}

std::vector<int> DirectoryLevel::manifest_versions() {
  std::vector<int> found;
  for (const std::string& name : names()) {
    int version = 0;
    if (format::parse_manifest_file_name(name, version)) found.push_back(version);
  }
  std::sort(found.begin(), found.end());
  return found;
}

void DirectoryLevel::remove_manifest(int version) { existing_directory().remove(format::manifest_file_name(version)); }

}  // namespace resurgo
