// An Env that forwards to another and fails chosen calls with a chosen errno,
// the way SQLite's and LevelDB's test file systems do. Tests use it to reach
// every error path of the pipeline: ENOSPC/EIO on write, failing fsync,
// rename, directory sync, short (partial) writes, and the writes at
// offsets of a shared file (persistent.layout = shared).
//
// Fork-safe: a forked child (capture.mode = "fork") calls into the FaultEnv
// it inherited, so the faults injected in the parent apply in the child's
// copy too (the child's counts and spent faults do not flow back). Its
// mutex_ could be held by another thread of the parent at the instant of
// fork(); the child, where that thread does not exist, would then wait on it
// forever. pthread_atfork handlers over a registry of the live instances
// take every instance's mutex before fork() and release it after it, in the
// parent and in the child, so the child always gets unlocked mutexes with
// consistent state (the registry's own mutex is taken first, always in the
// same order, so the handlers cannot deadlock with construction or
// destruction).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "resurgo/env.hpp"

namespace resurgo {

class FaultEnv final : public Env {
 public:
  enum class Op {
    kCreate, kAppend, kSync, kClose, kRename, kRemove, kSyncDir, kCreateDirs, kOpen, kRead, kList,
    kOpenPositional, kWriteAt, kSyncPositional  // a PositionalFile's open, write_at and sync
  };
  // The call's name ("create", "sync_dir", ...), for the tests' messages.
  static const char* op_name(Op op);

  struct Fault {
    Op op;
    int error_number;           // errno reported, e.g. ENOSPC, EIO
    std::string path_part;      // only paths containing this ("" = any)
    int skip = 0;               // let this many matching calls through first
    int times = 1;              // then fail this many (-1 = forever)
    bool partial_write = false; // kAppend, kWriteAt: write half the bytes before failing
  };

  explicit FaultEnv(std::shared_ptr<Env> base = Env::posix());
  ~FaultEnv() override;
  FaultEnv(const FaultEnv&) = delete;
  FaultEnv& operator=(const FaultEnv&) = delete;

  void inject(const Fault& fault);
  void clear();
  int calls(Op op) const;  // matching calls seen so far, failed or not
  int failures() const;    // faults fired so far

  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override;
  std::unique_ptr<ReadableFile> open(const std::string& path) override;
  std::unique_ptr<PositionalFile> open_positional(const std::string& path) override;
  void rename(const std::string& from, const std::string& to) override;
  void remove(const std::string& path) override;
  void sync_dir(const std::string& dir) override;
  void create_dirs(const std::string& dir) override;
  std::vector<std::string> list_dir(const std::string& dir) override;
  bool exists(const std::string& path) override { return base_->exists(path); }
  std::unique_ptr<FileLock> lock(const std::string& path) override { return base_->lock(path); }

  // Throws the injected error if a fault matches this call; for a partial
  // write fault, runs `before_failing` (which writes half the bytes) first.
  void check(Op op, const std::string& path, const std::function<void()>& before_failing = {});

 private:
  friend struct FaultEnvForkHandlers;

  std::shared_ptr<Env> base_;
  mutable std::mutex mutex_;
  std::vector<Fault> faults_;
  std::map<Op, int> calls_;
  int failures_ = 0;
};

}  // namespace resurgo
