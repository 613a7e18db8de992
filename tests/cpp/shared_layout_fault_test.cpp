// persistent.layout = shared under I/O faults: every rank writes its part of
// a version's shared file through the Env seam (Directory::open_positional),
// so FaultEnv reaches each call of writing a version, the positional writes
// included: straight into the rank's slot (job/shared_version.h), and, when
// one rank's container outgrows its slot, copied from the slot or from the
// rank's own file into a new temporary. The sweep fails each call in turn on one rank of a job of
// threads (thread_job.h), as IoFaultTest.EveryFaultPointOfTheScenario does
// for the per-rank layout, and checks that the version before stays
// restorable bit for bit, that the failed version is never reported durable
// unless it can be restored, and that the job's next checkpoint works. The
// POSIX positional file keeps the checks the seam promises (no link, no
// FIFO, a regular file).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "../sanitized.h"
#include "io/fault_env.h"
#include "io/system_calls.h"
#include "job/shared_version.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "job_levels.h"
#include "thread_job.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using Op = FaultEnv::Op;
using testing::ThreadComm;
using testing::ThreadJob;

constexpr int kRanks = 2;
// Under a sanitizer (each run several times slower) a sample, as
// IoFaultTest's: every fourth call under ASan, every eighth under TSan.
const int kFaultPointStride = kThreadSanitized ? 8 : kAddressSanitized ? 4 : 1;
const std::vector<Op> kOps = {Op::kCreate, Op::kAppend,         Op::kSync,     Op::kClose,
                              Op::kRename, Op::kSyncDir,        Op::kOpen,     Op::kRead,
                              Op::kList,   Op::kRemove,         Op::kCreateDirs, Op::kOpenPositional,
                              Op::kWriteAt, Op::kSyncPositional};

int value_of(int version, int rank) { return version * 1000 + rank; }

Config shared_config(const std::string& root) {
  Config config = testing::job_levels(root);
  config.persistent.layout = FileLayout::kShared;
  config.pipeline.chunk_size = 64u << 10;
  return config;
}

// Every rank opens the store "job" under `root` (through env(rank) when
// given) with ~256 KiB of state (four chunks) and runs `body`. With
// `outgrown`, rank 1's metadata makes its container larger than the slot
// its regions' bytes reserve, so its part is copied.
void run_job(const std::string& root, const std::function<void(int rank, Store&, std::vector<int>&)>& body,
             const std::function<std::shared_ptr<Env>(int rank)>& env = {}, bool outgrown = false) {
  ThreadJob job(kRanks, 1);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", shared_config(root), std::make_shared<ThreadComm>(job, rank), env ? env(rank) : nullptr);
    std::vector<int> state(65536, -1);
    store.protect(0, state.data(), state.size() * sizeof(int), "state");
    const std::vector<std::byte> metadata(outgrown && rank == 1 ? slot_capacity(state.size() * sizeof(int)) : 0);
    if (!metadata.empty()) store.set_metadata(metadata.data(), metadata.size());
    body(rank, store, state);
  });
}

// Checkpoints `version` with the state of that version and waits for L4:
// the error, "" when it was reported durable.
std::string checkpoint(Store& store, std::vector<int>& state, int version, int rank) {
  std::fill(state.begin(), state.end(), value_of(version, rank));
  try {
    store.checkpoint(version);
    store.wait(version, kL4);
    return "";
  } catch (const Error& error) {
    return std::string(error.what()).empty() ? "(empty error)" : error.what();
  }
}

// Every node lost, then each rank restarts `version` (kLatest: the newest
// intact one): "" when every rank got it bit for bit, else what went wrong.
std::string restores(const std::string& root, int version, int expected) {
  for (int node = 0; node < kRanks; ++node) fs::remove_all(root + "/node" + std::to_string(node));
  std::vector<std::string> problems(kRanks);
  run_job(root, [&](int rank, Store& store, std::vector<int>& state) {
    std::string& problem = problems[static_cast<std::size_t>(rank)];
    try {
      const int restored = store.restart(version);
      if (restored != expected) problem = "restored version " + std::to_string(restored);
      if (state != std::vector<int>(state.size(), value_of(expected, rank))) problem += " bytes differ";
    } catch (const Error& error) {
      problem = error.what();
    }
  });
  std::string all;
  for (int rank = 0; rank < kRanks; ++rank) {
    if (!problems[static_cast<std::size_t>(rank)].empty()) {
      all += " rank " + std::to_string(rank) + ": " + problems[static_cast<std::size_t>(rank)] + ";";
    }
  }
  return all;
}

std::string describe(int rank, const FaultEnv::Fault& fault) {
  return std::string("rank ") + std::to_string(rank) + " " + FaultEnv::op_name(fault.op) + " #" +
         std::to_string(fault.skip) + " " + (fault.error_number == EIO ? "EIO" : "ENOSPC") +
         (fault.partial_write ? " (partial)" : "");
}

// Whether rank 1's container outgrows its slot (its part is then copied).
class SharedLayoutFault : public ::testing::TestWithParam<bool> {
 protected:
  // Version 1 written once, clean: each run starts from a copy of it.
  void SetUp() override {
    run_job(committed.path(), [](int rank, Store& store, std::vector<int>& state) {
      ASSERT_EQ(checkpoint(store, state, 1, rank), "");
    });
  }

  // Versions 2 and 3 written by a job whose rank `faulty` fails `fault`
  // (none: counts the calls of version 2 on that rank into `counts`); what
  // the checks found wrong, appended to `violations`. Whether the fault fired.
  bool run(int faulty, const std::optional<FaultEnv::Fault>& fault, std::map<Op, int>* counts = nullptr) {
    TempDir root;
    fs::copy(committed.path(), root.path(), fs::copy_options::recursive);
    const std::string what = fault ? describe(faulty, *fault) : "no fault";
    std::vector<std::string> errors_2(kRanks), errors_3(kRanks);
    std::shared_ptr<FaultEnv> watched;
    run_job(
        root.path(),
        [&](int rank, Store& store, std::vector<int>& state) {
          // The store is open: from here on, each call is one of writing version 2.
          std::map<Op, int> opened;
          if (rank == faulty) {
            for (Op op : kOps) opened[op] = watched->calls(op);
            if (fault) watched->inject(*fault);
          }
          errors_2[static_cast<std::size_t>(rank)] = checkpoint(store, state, 2, rank);
          if (counts && rank == faulty) {
            for (Op op : kOps) (*counts)[op] = watched->calls(op) - opened[op];
          }
          errors_3[static_cast<std::size_t>(rank)] = checkpoint(store, state, 3, rank);
        },
        [&](int rank) -> std::shared_ptr<Env> {
          auto env = std::make_shared<FaultEnv>();
          if (rank == faulty) watched = env;
          return env;
        },
        GetParam());
    check(what, root.path(), errors_2, errors_3);
    return watched->failures() > 0;
  }

  void check(const std::string& what, const std::string& root, const std::vector<std::string>& errors_2,
             const std::vector<std::string>& errors_3) {
    const bool reported_durable = std::all_of(errors_2.begin(), errors_2.end(), [](auto& e) { return e.empty(); });
    for (int rank = 0; rank < kRanks; ++rank) {
      const std::string& error = errors_3[static_cast<std::size_t>(rank)];
      if (!error.empty()) violations.push_back(what + ": rank " + std::to_string(rank) + "'s next checkpoint: " +
                                               error);
    }
    if (reported_durable) {
      const std::string problem = restores(root, 2, 2);
      if (!problem.empty()) violations.push_back(what + ": version 2 reported durable but" + problem);
    }
    const std::string previous = restores(root, 1, 1);
    if (!previous.empty()) violations.push_back(what + ": version 1 not restorable:" + previous);
    const std::string latest = restores(root, kLatest, 3);
    if (!latest.empty()) violations.push_back(what + ": version 3 not restored:" + latest);
  }

  TempDir committed;
  std::vector<std::string> violations;
};

TEST_P(SharedLayoutFault, EveryFaultPointOfWritingASharedVersion) {
  std::vector<std::map<Op, int>> counts(kRanks);
  for (int faulty = 0; faulty < kRanks; ++faulty) {
    run(faulty, std::nullopt, &counts[static_cast<std::size_t>(faulty)]);
    ASSERT_EQ(violations, std::vector<std::string>{}) << "the fault-free run";
    std::map<Op, int>& calls = counts[static_cast<std::size_t>(faulty)];
    ASSERT_GT(calls[Op::kWriteAt], 0) << "rank " << faulty << " wrote no part through the Env seam";
    // The commit's, into its slot, and the job's, to sync the part.
    ASSERT_EQ(calls[Op::kOpenPositional], 2);
    ASSERT_EQ(calls[Op::kSyncPositional], 1);
    std::string line;
    for (Op op : kOps) line += std::string(" ") + FaultEnv::op_name(op) + "=" + std::to_string(calls[op]);
    std::printf("shared-layout fault (%s): rank %d's calls for one version:%s\n",
                GetParam() ? "rank 1's part copied" : "parts in their slots", faulty, line.c_str());
  }
  int fault_points = 0;
  int not_fired = 0;
  for (int faulty = 0; faulty < kRanks; ++faulty) {
    for (Op op : kOps) {
      for (int n = 0; n < counts[static_cast<std::size_t>(faulty)][op]; n += kFaultPointStride) {
        // EIO everywhere; a full disk, whole or part way, where bytes are written.
        std::vector<FaultEnv::Fault> faults = {{op, EIO, "", n, 1, false}};
        if (op == Op::kAppend || op == Op::kWriteAt) {
          faults.push_back({op, ENOSPC, "", n, 1, false});
          faults.push_back({op, ENOSPC, "", n, 1, true});
        }
        for (const FaultEnv::Fault& fault : faults) {
          ++fault_points;
          if (!run(faulty, fault)) ++not_fired;
        }
      }
    }
  }
  std::printf("shared-layout fault (%s): %d fault points, %d did not fire, %zu violations\n",
              GetParam() ? "rank 1's part copied" : "parts in their slots", fault_points, not_fired,
              violations.size());
  EXPECT_EQ(not_fired, 0);
  for (const std::string& violation : violations) ADD_FAILURE() << violation;
}

std::string placement_name(const ::testing::TestParamInfo<bool>& copied) {
  return copied.param ? "OnePartCopied" : "PartsInTheirSlots";
}
INSTANTIATE_TEST_SUITE_P(Placement, SharedLayoutFault, ::testing::Bool(), placement_name);

// ------------------------------------------------- FaultEnv's positional calls

class FaultEnvPositional : public ::testing::Test {
 protected:
  // A file of 16 bytes 'a' that rank 0 would have created.
  void SetUp() override {
    path = dir.path() + "/shared";
    env->create(path, 0600)->append(std::string(16, 'a').data(), 16);
  }
  std::string content() const {
    std::string bytes(fs::file_size(path), '\0');
    Env::posix()->open(path)->read_at(0, bytes.data(), bytes.size());
    return bytes;
  }

  TempDir dir;
  std::shared_ptr<FaultEnv> env = std::make_shared<FaultEnv>();
  std::string path;
};

TEST_F(FaultEnvPositional, WritesAtAnOffsetAndSyncs) {
  const std::unique_ptr<PositionalFile> file = env->open_positional(path);
  file->write_at(4, "bcd", 3);
  file->write_at(20, "z", 1);  // beyond the end: the hole reads as zeros
  file->sync();
  EXPECT_EQ(content(), std::string("aaaabcdaaaaaaaaa") + std::string(4, '\0') + "z");
  EXPECT_EQ(env->calls(Op::kOpenPositional), 1);
  EXPECT_EQ(env->calls(Op::kWriteAt), 2);
  EXPECT_EQ(env->calls(Op::kSyncPositional), 1);
}

TEST_F(FaultEnvPositional, FailsWriteAtSyncAndOpenNamingThePath) {
  env->inject({Op::kWriteAt, EIO, "shared", 0, 1, false});
  env->inject({Op::kSyncPositional, ENOSPC, "", 0, 1, false});
  const std::unique_ptr<PositionalFile> file = env->open_positional(path);
  try {
    file->write_at(0, "xyz", 3);
    ADD_FAILURE() << "write_at passed an injected EIO";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(std::strerror(EIO)), std::string::npos) << error.what();
  }
  EXPECT_EQ(content(), std::string(16, 'a')) << "a failed write wrote nothing";
  EXPECT_THROW(file->sync(), StorageError);
  file->write_at(0, "xyz", 3);
  file->sync();
  EXPECT_EQ(content().substr(0, 4), "xyza");
  env->inject({Op::kOpenPositional, EIO, "", 0, 1, false});
  EXPECT_THROW(env->open_positional(path), StorageError);
  EXPECT_EQ(env->failures(), 3);
}

TEST_F(FaultEnvPositional, APartialWriteAtWritesHalfThenFails) {
  env->inject({Op::kWriteAt, ENOSPC, "", 0, 1, true});
  EXPECT_THROW(env->open_positional(path)->write_at(2, "bbbbbbbb", 8), StorageError);
  EXPECT_EQ(content(), "aabbbbaaaaaaaaaa");
}

// A pwrite or fdatasync interrupted (EINTR) or a pwrite that stores only
// part of its bytes, as a kernel may under signals: the POSIX positional
// file retries, and the bytes land where they were asked to.
int tick = 0;
ssize_t flaky_pwrite(int fd, const void* data, size_t bytes, off_t offset) {
  if (tick++ % 2 == 0) {
    errno = EINTR;
    return -1;
  }
  return ::pwrite(fd, data, bytes > 1 ? bytes / 3 + 1 : bytes, offset);
}
int flaky_fdatasync(int fd) {
  if (tick++ % 2 == 0) {
    errno = EINTR;
    return -1;
  }
  return ::fdatasync(fd);
}

TEST_F(FaultEnvPositional, InterruptedAndShortPwritesAreRetried) {
  SystemCalls flaky;
  flaky.pwrite = flaky_pwrite;
  flaky.fdatasync = flaky_fdatasync;
  const std::unique_ptr<PositionalFile> file = posix_env_with(flaky)->open_positional(path);
  file->write_at(3, "0123456789", 10);
  file->sync();
  EXPECT_EQ(content(), "aaa0123456789aaa");
  EXPECT_GT(tick, 6) << "the flaky calls were not called";
}

// The POSIX Env's own checks, by path and through a checked directory.
TEST_F(FaultEnvPositional, RefusesALinkAFifoAMissingFileAndAnAppendOnlyEnv) {
  const std::unique_ptr<Directory> directory = Env::posix()->open_directory(dir.path(), DirectoryRules{});
  fs::create_symlink(path, dir.path() + "/link");
  ASSERT_EQ(::mkfifo((dir.path() + "/fifo").c_str(), 0600), 0);
  for (const std::string name : {"link", "fifo"}) {
    EXPECT_THROW(Env::posix()->open_positional(dir.path() + "/" + name), StorageError) << name;
    EXPECT_THROW(directory->open_positional(name), StorageError) << name;  // and returns: no FIFO blocks
  }
  EXPECT_THROW(directory->open_positional("missing"), NotFoundError);
  directory->open_positional("shared")->write_at(0, "q", 1);
  EXPECT_EQ(content()[0], 'q');

  class AppendOnlyEnv final : public Env {
    std::unique_ptr<WritableFile> create(const std::string&, unsigned) override { return nullptr; }
    std::unique_ptr<ReadableFile> open(const std::string&) override { return nullptr; }
    void rename(const std::string&, const std::string&) override {}
    void remove(const std::string&) override {}
    void sync_dir(const std::string&) override {}
    void create_dirs(const std::string&) override {}
    std::vector<std::string> list_dir(const std::string&) override { return {}; }
    bool exists(const std::string&) override { return true; }
    std::unique_ptr<FileLock> lock(const std::string&) override { return nullptr; }
  } append_only;
  try {
    append_only.open_positional(path);
    ADD_FAILURE() << "an append-only Env wrote at offsets";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("persistent.layout"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace resurgo
