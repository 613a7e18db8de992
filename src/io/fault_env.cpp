#include "io/fault_env.h"

#include <pthread.h>

#include <cstring>
#include <functional>
#include <set>

#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultEnv& env, std::unique_ptr<WritableFile> base) : env_(env), base_(std::move(base)) {}
  void append(const void* data, std::size_t bytes) override {
    env_.check(FaultEnv::Op::kAppend, path(), [&] { base_->append(data, bytes / 2); });
    base_->append(data, bytes);
  }
  void sync() override {
    env_.check(FaultEnv::Op::kSync, path());
    base_->sync();
  }
  void close() override {
    env_.check(FaultEnv::Op::kClose, path());
    base_->close();
  }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultEnv& env_;
  std::unique_ptr<WritableFile> base_;
};

class FaultReadableFile final : public ReadableFile {
 public:
  FaultReadableFile(FaultEnv& env, std::unique_ptr<ReadableFile> base) : env_(env), base_(std::move(base)) {}
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
    env_.check(FaultEnv::Op::kRead, path());
    base_->read_at(offset, data, bytes);
  }
  std::uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultEnv& env_;
  std::unique_ptr<ReadableFile> base_;
};

class FaultPositionalFile final : public PositionalFile {
 public:
  FaultPositionalFile(FaultEnv& env, std::unique_ptr<PositionalFile> base) : env_(env), base_(std::move(base)) {}
  void write_at(std::uint64_t offset, const void* data, std::size_t bytes) override {
    env_.check(FaultEnv::Op::kWriteAt, path(), [&] { base_->write_at(offset, data, bytes / 2); });
    base_->write_at(offset, data, bytes);
  }
  void sync() override {
    env_.check(FaultEnv::Op::kSyncPositional, path());
    base_->sync();
  }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultEnv& env_;
  std::unique_ptr<PositionalFile> base_;
};

}  // namespace

// The fork handlers of FaultEnv (see fault_env.h): the registry of live
// instances, and the prepare/parent/child handlers that hold every
// instance's mutex across fork().
struct FaultEnvForkHandlers {
  static std::mutex& registry_mutex() {
    static std::mutex mutex;
    return mutex;
  }
  static std::set<FaultEnv*>& registry() {
    static std::set<FaultEnv*> instances;
    return instances;
  }
  static void prepare() {
    registry_mutex().lock();
    for (FaultEnv* env : registry()) env->mutex_.lock();  // std::set: always the same order
  }
  static void release() {
    for (FaultEnv* env : registry()) env->mutex_.unlock();
    registry_mutex().unlock();
  }
  static void install() {
    static const bool installed = [] {
      ::pthread_atfork(&FaultEnvForkHandlers::prepare, &FaultEnvForkHandlers::release,
                       &FaultEnvForkHandlers::release);
      return true;
    }();
    static_cast<void>(installed);
  }
};

FaultEnv::FaultEnv(std::shared_ptr<Env> base) : base_(std::move(base)) {
  FaultEnvForkHandlers::install();
  std::lock_guard lock(FaultEnvForkHandlers::registry_mutex());
  FaultEnvForkHandlers::registry().insert(this);
}

FaultEnv::~FaultEnv() {
  std::lock_guard lock(FaultEnvForkHandlers::registry_mutex());
  FaultEnvForkHandlers::registry().erase(this);
}

void FaultEnv::inject(const Fault& fault) {
  std::lock_guard lock(mutex_);
  faults_.push_back(fault);
}

void FaultEnv::clear() {
  std::lock_guard lock(mutex_);
  faults_.clear();
}

int FaultEnv::calls(Op op) const {
  std::lock_guard lock(mutex_);
  const auto it = calls_.find(op);
  return it == calls_.end() ? 0 : it->second;
}

int FaultEnv::failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

void FaultEnv::check(Op op, const std::string& path, const std::function<void()>& before_failing) {
  int error_number = 0;
  bool partial = false;
  {
    std::lock_guard lock(mutex_);
    ++calls_[op];
    for (Fault& fault : faults_) {
      if (fault.op != op || fault.times == 0 || path.find(fault.path_part) == std::string::npos) continue;
      if (fault.skip > 0) {
        --fault.skip;
        continue;
      }
      if (fault.times > 0) --fault.times;
      error_number = fault.error_number;
      partial = fault.partial_write;
      ++failures_;
      break;
    }
  }
  if (error_number == 0) return;
  if (partial && before_failing) before_failing();
  throw StorageError("cannot access '" + path + "': " + std::strerror(error_number) + " (injected fault)");
}

std::unique_ptr<WritableFile> FaultEnv::create(const std::string& path, unsigned mode) {
  check(Op::kCreate, path);
  return std::make_unique<FaultWritableFile>(*this, base_->create(path, mode));
}

std::unique_ptr<ReadableFile> FaultEnv::open(const std::string& path) {
  check(Op::kOpen, path);
  return std::make_unique<FaultReadableFile>(*this, base_->open(path));
}

std::unique_ptr<PositionalFile> FaultEnv::open_positional(const std::string& path) {
  check(Op::kOpenPositional, path);
  return std::make_unique<FaultPositionalFile>(*this, base_->open_positional(path));
}

const char* FaultEnv::op_name(Op op) {
  switch (op) {
    case Op::kCreate: return "create";
    case Op::kAppend: return "append";
    case Op::kSync: return "sync";
    case Op::kClose: return "close";
    case Op::kRename: return "rename";
    case Op::kRemove: return "remove";
    case Op::kSyncDir: return "sync_dir";
    case Op::kCreateDirs: return "create_dirs";
    case Op::kOpen: return "open";
    case Op::kRead: return "read";
    case Op::kList: return "list";
    case Op::kOpenPositional: return "open_positional";
    case Op::kWriteAt: return "write_at";
    case Op::kSyncPositional: return "sync_positional";
  }
  return "?";
}

void FaultEnv::rename(const std::string& from, const std::string& to) {
  check(Op::kRename, from);
  base_->rename(from, to);
}

void FaultEnv::remove(const std::string& path) {
  check(Op::kRemove, path);
  base_->remove(path);
}

void FaultEnv::sync_dir(const std::string& dir) {
  check(Op::kSyncDir, dir);
  base_->sync_dir(dir);
}

void FaultEnv::create_dirs(const std::string& dir) {
  check(Op::kCreateDirs, dir);
  base_->create_dirs(dir);
}

std::vector<std::string> FaultEnv::list_dir(const std::string& dir) {
  check(Op::kList, dir);
  return base_->list_dir(dir);
}

}  // namespace resurgo
