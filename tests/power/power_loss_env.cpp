#include "power_loss_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "resurgo/errors.hpp"

namespace resurgo::power {

namespace {

constexpr std::uint64_t kSector = 512;

std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::string name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

bool is_entry_change(PowerLossEnv::Kind kind) {
  using Kind = PowerLossEnv::Kind;
  return kind == Kind::kMkdir || kind == Kind::kCreate || kind == Kind::kRename || kind == Kind::kRemove;
}

[[noreturn]] void fail(const std::string& what, const std::string& path, const char* cause) {
  throw StorageError("cannot " + what + " '" + path + "': " + cause + " (power-loss Env)");
}

class MemoryWritableFile final : public WritableFile {
 public:
  MemoryWritableFile(PowerLossEnv& env, int inode, std::string path)
      : env_(env), inode_(inode), path_(std::move(path)) {}
  void append(const void* data, std::size_t bytes) override { env_.append(inode_, path_, data, bytes); }
  void sync() override { env_.sync(inode_, path_); }
  void close() override {}
  const std::string& path() const override { return path_; }

 private:
  PowerLossEnv& env_;
  int inode_;
  std::string path_;
};

// A snapshot: the library reads only files that are no longer written.
class MemoryReadableFile final : public ReadableFile {
 public:
  MemoryReadableFile(std::vector<std::byte> bytes, std::string path)
      : bytes_(std::move(bytes)), path_(std::move(path)) {}
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
    if (offset > bytes_.size() || bytes > bytes_.size() - offset) fail("read", path_, "past the end of the file");
    std::memcpy(data, bytes_.data() + offset, bytes);
  }
  std::uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return path_; }

 private:
  std::vector<std::byte> bytes_;
  std::string path_;
};

class MemoryLock final : public FileLock {
 public:
  MemoryLock(PowerLossEnv& env, std::string path) : env_(env), path_(std::move(path)) {}
  ~MemoryLock() override { env_.unlock(path_); }

 private:
  PowerLossEnv& env_;
  std::string path_;
};

// ------------------------------------------------------------ a state

// What survives of each operation before the cut.
enum class Fate { kKept, kDropped, kTorn };

struct Plan {
  std::vector<Fate> fates;  // by operation index
};

using History = std::vector<PowerLossEnv::Operation>;

Plan plan_posix(const History& history, std::size_t cut, std::mt19937_64& random) {
  using Kind = PowerLossEnv::Kind;
  Plan plan{std::vector<Fate>(cut, Fate::kKept)};
  // Walking backwards, the sets hold what is synced after the operation.
  std::set<std::string> synced_dirs;
  std::set<int> synced_files;
  for (std::size_t i = cut; i-- > 0;) {
    const PowerLossEnv::Operation& operation = history[i];
    bool durable = true;
    switch (operation.kind) {
      case Kind::kSyncDir: synced_dirs.insert(operation.path); break;
      case Kind::kSync: synced_files.insert(operation.inode); break;
      case Kind::kWrite: durable = synced_files.count(operation.inode) > 0; break;
      case Kind::kRename:
        durable = synced_dirs.count(parent_of(operation.path)) && synced_dirs.count(parent_of(operation.to));
        break;
      case Kind::kMkdir:
      case Kind::kCreate:
      case Kind::kRemove: durable = synced_dirs.count(parent_of(operation.path)) > 0; break;
    }
    if (durable) continue;
    if (operation.kind == Kind::kWrite) {
      static constexpr Fate kFates[] = {Fate::kKept, Fate::kDropped, Fate::kTorn};
      plan.fates[i] = kFates[random() % 3];
    } else {
      plan.fates[i] = random() % 2 ? Fate::kKept : Fate::kDropped;
    }
  }
  return plan;
}

Plan plan_ordered(const History& history, std::size_t cut, std::mt19937_64& random) {
  using Kind = PowerLossEnv::Kind;
  std::size_t committed = 0;  // the journal holds every entry change before this index
  for (std::size_t i = 0; i < cut; ++i) {
    if (history[i].kind == Kind::kSync || history[i].kind == Kind::kSyncDir) committed = i + 1;
  }
  const std::size_t prefix = committed + random() % (cut - committed + 1);
  // A file's appends before this index are all kept: synced, or flushed
  // with a surviving rename of the file.
  std::map<int, std::size_t> flushed_until;
  for (std::size_t i = 0; i < cut; ++i) {
    const PowerLossEnv::Operation& operation = history[i];
    if (operation.kind == Kind::kSync || (operation.kind == Kind::kRename && i < prefix)) {
      flushed_until[operation.inode] = i;
    }
  }
  // Of the other appends, each file keeps a random number, in order.
  std::map<int, std::vector<std::size_t>> unflushed;
  Plan plan{std::vector<Fate>(cut, Fate::kKept)};
  for (std::size_t i = 0; i < cut; ++i) {
    const PowerLossEnv::Operation& operation = history[i];
    if (is_entry_change(operation.kind) && i >= prefix) plan.fates[i] = Fate::kDropped;
    if (operation.kind != Kind::kWrite) continue;
    const auto flushed = flushed_until.find(operation.inode);
    if (flushed != flushed_until.end() && i < flushed->second) continue;
    plan.fates[i] = Fate::kDropped;
    if (i < prefix) unflushed[operation.inode].push_back(i);
  }
  for (const auto& [inode, appends] : unflushed) {
    const std::size_t kept = random() % (appends.size() + 1);
    for (std::size_t k = 0; k < kept; ++k) plan.fates[appends[k]] = Fate::kKept;
  }
  return plan;
}

// The namespace after replaying the entry changes that survive.
struct Namespace {
  std::set<std::string> directories;
  std::map<std::string, int> entries;

  // A path is reachable when every directory above it, up to the root, survived.
  bool reachable(const std::string& path, const std::string& root) const {
    for (std::string dir = parent_of(path); dir != root; dir = parent_of(dir)) {
      if (dir.size() < root.size() || !directories.count(dir)) return false;
    }
    return true;
  }
};

Namespace replay_entries(const History& history, const Plan& plan, StateSummary& summary) {
  using Kind = PowerLossEnv::Kind;
  Namespace names;
  for (std::size_t i = 0; i < plan.fates.size(); ++i) {
    const PowerLossEnv::Operation& operation = history[i];
    if (!is_entry_change(operation.kind)) continue;
    if (plan.fates[i] == Fate::kDropped) {
      ++summary.reverted_entries;
      continue;
    }
    switch (operation.kind) {
      case Kind::kMkdir: names.directories.insert(operation.path); break;
      case Kind::kCreate: names.entries[operation.path] = operation.inode; break;
      case Kind::kRename:
        names.entries.erase(operation.path);
        names.entries[operation.to] = operation.inode;
        break;
      case Kind::kRemove: names.entries.erase(operation.path); break;
      default: break;
    }
  }
  return names;
}

// The bytes of each file after the power loss: kept appends, torn ones
// sector by sector, zeros where the size covers bytes that never arrived.
std::map<int, std::vector<std::byte>> replay_data(const History& history, const Plan& plan,
                                                  std::mt19937_64& random, StateSummary& summary) {
  std::map<int, std::vector<std::byte>> data;
  for (std::size_t i = 0; i < plan.fates.size(); ++i) {
    const PowerLossEnv::Operation& operation = history[i];
    if (operation.kind != PowerLossEnv::Kind::kWrite) continue;
    std::vector<std::byte>& bytes = data[operation.inode];
    if (plan.fates[i] != Fate::kKept) ++summary.torn_or_lost_appends;
    if (plan.fates[i] == Fate::kDropped) continue;
    const std::uint64_t end = operation.offset + operation.bytes.size();
    if (bytes.size() < end) bytes.resize(end);
    for (std::uint64_t at = operation.offset; at < end;) {
      const std::uint64_t piece_end = std::min(end, (at / kSector + 1) * kSector);
      if (plan.fates[i] == Fate::kKept || random() % 2) {
        std::memcpy(bytes.data() + at, operation.bytes.data() + (at - operation.offset), piece_end - at);
      }
      at = piece_end;
    }
  }
  return data;
}

void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("create", path, std::strerror(errno));
  const bool written = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  if (!written) fail("write", path, "short write");
}

}  // namespace

const char* semantics_name(Semantics semantics) { return semantics == Semantics::kPosix ? "posix" : "ordered"; }

PowerLossEnv::PowerLossEnv(std::string root) : root_(std::move(root)) {
  for (std::string dir = root_; !dir.empty(); dir = parent_of(dir)) directories_.insert(dir);
}

std::size_t PowerLossEnv::operations() const {
  std::lock_guard lock(mutex_);
  return history_.size();
}

std::string PowerLossEnv::describe(std::size_t cut) const {
  static constexpr const char* kNames[] = {"mkdir", "create", "rename", "remove", "write", "sync", "sync_dir"};
  std::lock_guard lock(mutex_);
  std::string text;
  for (std::size_t i = 0; i <= history_.size(); ++i) {
    if (i == cut) text += "---- power lost here (cut " + std::to_string(cut) + ")\n";
    if (i == history_.size()) break;
    const Operation& operation = history_[i];
    text += std::to_string(i) + " " + kNames[static_cast<int>(operation.kind)] + " " + operation.path;
    if (!operation.to.empty()) text += " -> " + operation.to;
    if (operation.inode >= 0) text += " inode " + std::to_string(operation.inode);
    if (operation.kind == Kind::kWrite) {
      text += " bytes " + std::to_string(operation.bytes.size()) + " at " + std::to_string(operation.offset);
    }
    text += "\n";
  }
  return text;
}

void PowerLossEnv::record(Kind kind, const std::string& path, int inode, const std::string& to, std::uint64_t offset,
                          std::vector<std::byte> bytes) {
  history_.push_back({kind, path, to, inode, offset, std::move(bytes)});
}

void PowerLossEnv::require_directory(const std::string& dir, const std::string& what) const {
  if (!directories_.count(dir)) fail(what, dir, "no such directory");
}

std::unique_ptr<WritableFile> PowerLossEnv::create(const std::string& path, unsigned /*mode*/) {
  std::lock_guard lock(mutex_);
  require_directory(parent_of(path), "create a file in");
  if (entries_.count(path)) fail("create", path, "the file exists (O_EXCL)");
  const int inode = static_cast<int>(contents_.size());
  contents_.emplace_back();
  entries_[path] = inode;
  created_at_[inode] = history_.size();
  record(Kind::kCreate, path, inode);
  return std::make_unique<MemoryWritableFile>(*this, inode, path);
}

void PowerLossEnv::append(int inode, const std::string& path, const void* data, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  std::vector<std::byte>& content = contents_[static_cast<std::size_t>(inode)];
  const auto* first = static_cast<const std::byte*>(data);
  record(Kind::kWrite, path, inode, {}, content.size(), std::vector<std::byte>(first, first + bytes));
  content.insert(content.end(), first, first + bytes);
}

void PowerLossEnv::damage(const std::string& path, std::uint64_t offset) {
  std::lock_guard lock(mutex_);
  const auto entry = entries_.find(path);
  if (entry == entries_.end()) fail("damage", path, "no such file");
  std::vector<std::byte>& content = contents_[static_cast<std::size_t>(entry->second)];
  if (offset >= content.size()) fail("damage", path, "offset past the end of the file");
  content[offset] ^= std::byte{0x10};
  record(Kind::kWrite, path, entry->second, {}, offset, {content[offset]});
  record(Kind::kSync, path, entry->second);
}

void PowerLossEnv::sync(int inode, const std::string& path) {
  std::lock_guard lock(mutex_);
  record(Kind::kSync, path, inode);
}

std::unique_ptr<ReadableFile> PowerLossEnv::open(const std::string& path) {
  std::lock_guard lock(mutex_);
  const auto entry = entries_.find(path);
  if (entry == entries_.end()) throw NotFoundError("cannot open '" + path + "': no such file (power-loss Env)");
  return std::make_unique<MemoryReadableFile>(contents_[static_cast<std::size_t>(entry->second)], path);
}

void PowerLossEnv::rename(const std::string& from, const std::string& to) {
  std::lock_guard lock(mutex_);
  const auto entry = entries_.find(from);
  if (entry == entries_.end()) fail("rename to '" + to + "'", from, "no such file");
  require_directory(parent_of(to), "rename into");
  const int inode = entry->second;
  entries_.erase(entry);
  if (entries_.count(to)) replacements_.push_back({created_at_[inode], history_.size()});
  entries_[to] = inode;
  record(Kind::kRename, from, inode, to);
}

std::vector<PowerLossEnv::Replacement> PowerLossEnv::replacements() const {
  std::lock_guard lock(mutex_);
  return replacements_;
}

void PowerLossEnv::remove(const std::string& path) {
  std::lock_guard lock(mutex_);
  const auto entry = entries_.find(path);
  if (entry == entries_.end()) return;
  const int inode = entry->second;
  entries_.erase(entry);
  record(Kind::kRemove, path, inode);
}

void PowerLossEnv::sync_dir(const std::string& dir) {
  std::lock_guard lock(mutex_);
  require_directory(dir, "fsync directory");
  record(Kind::kSyncDir, dir);
}

void PowerLossEnv::create_dirs(const std::string& dir) {
  std::lock_guard lock(mutex_);
  for (std::size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (entries_.count(prefix)) fail("use", prefix, "it exists and is not a directory");
    if (directories_.insert(prefix).second) record(Kind::kMkdir, prefix);
    if (slash == std::string::npos) break;
  }
}

std::vector<std::string> PowerLossEnv::list_dir(const std::string& dir) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [path, inode] : entries_) {
    if (parent_of(path) == dir) names.push_back(name_of(path));
  }
  for (const std::string& path : directories_) {
    if (path != dir && parent_of(path) == dir) names.push_back(name_of(path));
  }
  return names;
}

bool PowerLossEnv::exists(const std::string& path) {
  std::lock_guard lock(mutex_);
  return entries_.count(path) > 0 || directories_.count(path) > 0;
}

std::unique_ptr<FileLock> PowerLossEnv::lock(const std::string& path) {
  std::lock_guard lock(mutex_);
  require_directory(parent_of(path), "create lock file in");
  if (!locked_.insert(path).second) throw StateError("'" + path + "' is locked (power-loss Env)");
  return std::make_unique<MemoryLock>(*this, path);
}

void PowerLossEnv::unlock(const std::string& path) {
  std::lock_guard lock(mutex_);
  locked_.erase(path);
}

StateSummary PowerLossEnv::materialise(std::size_t cut, Semantics semantics, std::mt19937_64& random,
                                       const std::string& target) const {
  std::lock_guard lock(mutex_);
  cut = std::min(cut, history_.size());
  const Plan plan =
      semantics == Semantics::kPosix ? plan_posix(history_, cut, random) : plan_ordered(history_, cut, random);
  StateSummary summary;
  const Namespace names = replay_entries(history_, plan, summary);
  const std::map<int, std::vector<std::byte>> data = replay_data(history_, plan, random, summary);
  const auto real = [&](const std::string& path) { return target + path.substr(root_.size()); };
  for (const std::string& dir : names.directories) {  // sorted: parents first
    if (names.reachable(dir, root_) && ::mkdir(real(dir).c_str(), 0700) != 0) {
      fail("create directory", real(dir), std::strerror(errno));
    }
  }
  static const std::vector<std::byte> kEmpty;
  for (const auto& [path, inode] : names.entries) {
    if (!names.reachable(path, root_)) continue;
    const auto bytes = data.find(inode);
    write_file(real(path), bytes == data.end() ? kEmpty : bytes->second);
    ++summary.files;
  }
  return summary;
}

}  // namespace resurgo::power
