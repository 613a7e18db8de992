// Directory tier (L2/L4): file names, atomic commit, failure paths through
// FaultEnv, eviction, temporaries of dead processes, quarantine, copies.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <ostream>
#include <stdexcept>
#include <utility>

#include "chain_files.h"
#include "format/file_names.h"
#include "hook_env.h"
#include "format/container.h"
#include "io/fault_env.h"
#include "base/thread_pool.h"
#include "format/version_writer.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> payload(std::size_t bytes, int seed) {
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed)) & 0xff);
  return data;
}

std::function<void(WritableFile&)> writes(const std::vector<std::byte>& data) {
  return [&data](WritableFile& file) {
    // Several appends, as a container writer does.
    const std::size_t half = data.size() / 2;
    file.append(data.data(), half);
    file.append(data.data() + half, data.size() - half);
  };
}

// Writes `data` as a container file of `version` (rank 0), in 64 KiB chunks.
std::function<void(WritableFile&)> container_of(int version, const std::vector<std::byte>& data) {
  return [version, &data](WritableFile& file) {
    format::Header header;
    header.store = "store";
    header.version = version;
    header.chunk_size = 64u << 10;
    header.regions.push_back({0, "data", format::RegionKind::kHost, data.size(), "uint8", {}});
    Config::Pipeline pipeline;
    pipeline.chunk_size = header.chunk_size;
    ThreadPool pool(0);
    write_version(file, header, {data.data()}, pipeline, pool);
  };
}

// Every name in the directory, sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::size_t temporaries_in(const std::string& dir) {
  const auto names = names_in(dir);
  return static_cast<std::size_t>(
      std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.find(".tmp-") != std::string::npos; }));
}

bool has_temporary(const std::string& dir) { return temporaries_in(dir) > 0; }

ino_t inode_of(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_ino;
}

// A pid that belonged to a process which has exited and been reaped.
int dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return static_cast<int>(child);
}

bool nothing_pinned(int) { return false; }

std::function<bool(int)> pinned_among(std::set<int> versions) {
  return [versions = std::move(versions)](int version) { return versions.count(version) > 0; };
}

class DirectoryLevelTest : public ::testing::Test {
 protected:
  DirectoryLevel tier(int keep = 2, unsigned mode = 0600, int rank = 0, std::shared_ptr<Env> env = Env::posix(),
                     const std::string& sub = "l2") {
    return DirectoryLevel(2, dir_.path() + "/" + sub, "store", rank, mode, keep, std::move(env));
  }
  std::string store_dir() const { return dir_.path() + "/l2/store"; }
  TempDir dir_;
};

TEST(DirectoryLevelNames, RoundTrip) {
  EXPECT_EQ(format::container_file_name(12, 3), "v0000000012.r000003.rsg");
  EXPECT_EQ(format::container_file_name(0, 0), "v0000000000.r000000.rsg");
  for (const auto& [version, rank] : std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {42, 7}, {2147483647, 999999}}) {
    int v = -1;
    int r = -1;
    ASSERT_TRUE(format::parse_container_file_name(format::container_file_name(version, rank), v, r)) << version << " " << rank;
    EXPECT_EQ(v, version);
    EXPECT_EQ(r, rank);
  }
}

TEST(DirectoryLevelNames, RejectsEverythingElse) {
  for (const std::string name : {"v-000000001.r000000.rsg", "v0000000001.r-00001.rsg", ".v0000000001.r000000.rsg",
                                 ".v0000000001.r000000.rsg.tmp-1234", "v0000000001.r000000.rsg.tmp-1234",
                                 "v0000000001.r000000.rsg.damaged", "v0000000001.r000000.rsx", "V0000000001.r000000.rsg",
                                 "v000000001.r0000000.rsg", "v00000000a1.r000000.rsg", "v+000000001.r000000.rsg",
                                 "v 000000001.r000000.rsg", "v0000000001.r000000.rs", "v0000000001.r000000.rsgx",
                                 "v0000000001_r000000.rsg", "lock", "", "v"}) {
    int v = -1;
    int r = -1;
    EXPECT_FALSE(format::parse_container_file_name(name, v, r)) << "'" << name << "'";
  }
}

TEST_F(DirectoryLevelTest, CommitMakesExactlyOneFileWithTheMode) {
  DirectoryLevel t = tier();
  t.prepare();
  EXPECT_EQ(t.dir(), store_dir());
  EXPECT_TRUE(fs::is_directory(store_dir()));
  EXPECT_TRUE(names_in(store_dir()).empty());
  const auto data = payload(10000, 1);
  t.commit(7, writes(data));
  EXPECT_EQ(names_in(store_dir()), std::vector<std::string>{"v0000000007.r000000.rsg"});
  EXPECT_EQ(t.path(7), store_dir() + "/v0000000007.r000000.rsg");
  EXPECT_EQ(read_file(t.path(7)), data);
  struct stat info {};
  ASSERT_EQ(::stat(t.path(7).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  EXPECT_TRUE(t.holds(7));
  EXPECT_FALSE(t.holds(8));
  EXPECT_EQ(t.versions(), std::vector<int>{7});
  auto file = t.open(7);
  EXPECT_EQ(file->size(), data.size());
  EXPECT_THROW(t.open(8), NotFoundError);
}

TEST_F(DirectoryLevelTest, ModeIsExactWhateverTheUmask) {
  const mode_t old_umask = ::umask(077);
  DirectoryLevel t = tier(2, 0640);
  t.prepare();
  t.commit(1, writes(payload(100, 1)));
  ::umask(old_umask);
  struct stat info {};
  ASSERT_EQ(::stat(t.path(1).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0640u);
}

TEST_F(DirectoryLevelTest, RecommitReplacesTheVersion) {
  DirectoryLevel t = tier();
  t.prepare();
  t.commit(3, writes(payload(100, 1)));
  const auto second = payload(50, 2);
  t.commit(3, writes(second));
  EXPECT_EQ(read_file(t.path(3)), second);
  EXPECT_EQ(names_in(store_dir()).size(), 1u);
}

// local.durable = false: versions are committed (temporary, rename) and read
// back as usual, and nothing is synced: no file, no directory, by a commit,
// a group commit, a removal or an eviction. A durable level syncs each.
TEST_F(DirectoryLevelTest, AScratchLevelCommitsAndRemovesWithoutSyncing) {
  for (const bool scratch : {true, false}) {
    SCOPED_TRACE(scratch ? "scratch" : "durable");
    auto env = std::make_shared<FaultEnv>();
    DirectoryLevel t = tier(2, 0600, 0, env, scratch ? "scratch" : "durable");
    if (scratch) t.set_scratch();
    t.prepare();
    const int directory_syncs_at_prepare = env->calls(FaultEnv::Op::kSyncDir);
    const auto v1 = payload(3000, 1);
    const auto v2 = payload(2000, 2);
    const auto v3 = payload(1000, 3);
    t.commit(1, writes(v1));
    PendingCommit second;
    second.version = 2;
    second.write = writes(v2);
    PendingCommit third;
    third.version = 3;
    third.write = writes(v3);
    const std::vector<std::exception_ptr> failures = t.commit_group({second, third});
    EXPECT_FALSE(failures.at(0) || failures.at(1));
    EXPECT_EQ(t.evict(nothing_pinned), std::vector<int>{1});
    t.remove(2);
    EXPECT_EQ(t.versions(), std::vector<int>{3});
    EXPECT_EQ(read_file(t.path(3)), v3);
    // The removed versions' files, kept as spares by the scratch level.
    EXPECT_EQ(temporaries_in(t.dir()), scratch ? 2u : 0u)
        << ::testing::PrintToString(names_in(t.dir()));
    const int file_syncs = env->calls(FaultEnv::Op::kSync);
    const int directory_syncs = env->calls(FaultEnv::Op::kSyncDir) - directory_syncs_at_prepare;
    if (scratch) {
      EXPECT_EQ(file_syncs, 0);
      EXPECT_EQ(directory_syncs, 0);
    } else {
      EXPECT_EQ(file_syncs, 3);
      // The commit, the group and the removal; the first also syncs the
      // directories above that prepare() made (DirectoryRules::create).
      EXPECT_GE(directory_syncs, 3);
    }
  }
}

// Its identity is what a scratch level syncs, once, with the directory:
// a power loss that tore it would keep the store from opening at all.
TEST_F(DirectoryLevelTest, AScratchLevelSyncsItsIdentityOnceBeforeItsFirstVersion) {
  auto env = std::make_shared<FaultEnv>();
  DirectoryLevel t = tier(2, 0600, 0, env);
  t.set_scratch();
  t.prepare();
  const format::StoreId id = format::StoreId::random();
  EXPECT_EQ(t.adopt_identity(id), id);
  const int directory_syncs = env->calls(FaultEnv::Op::kSyncDir);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), 0);
  t.commit(1, writes(payload(1000, 1)));
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), 1);
  // (The first directory sync also syncs the directories prepare() made.)
  const int directory_syncs_after = env->calls(FaultEnv::Op::kSyncDir);
  EXPECT_GT(directory_syncs_after, directory_syncs);
  t.commit(2, writes(payload(1000, 2)));
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), 1);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSyncDir), directory_syncs_after);
  EXPECT_EQ(t.identity(), id);
}

// A scratch level keeps the files of removed versions as spares, under
// temporary names, and writes new versions into them: the same inode, the
// new bytes only (a shorter version leaves no tail of the older one).
TEST_F(DirectoryLevelTest, AScratchLevelWritesNewVersionsIntoTheFilesOfRemovedOnes) {
  DirectoryLevel t = tier();
  t.set_scratch();
  t.prepare();
  t.commit(1, writes(payload(10000, 1)));
  t.commit(2, writes(payload(3000, 2)));
  const ino_t first = inode_of(t.path(1));
  t.remove(1);
  EXPECT_EQ(temporaries_in(store_dir()), 1u);
  const auto v3 = payload(5000, 3);
  t.commit(3, writes(v3));
  EXPECT_EQ(inode_of(t.path(3)), first);
  EXPECT_EQ(read_file(t.path(3)), v3);
  EXPECT_EQ(temporaries_in(store_dir()), 0u);
  EXPECT_EQ(t.versions(), (std::vector<int>{2, 3}));
  EXPECT_EQ(read_file(t.open(3)->path()), v3);
}

// A commit creates a file only when no spare is left: the level never holds
// more files than the most versions it held at once.
TEST_F(DirectoryLevelTest, AScratchLevelCreatesAFileOnlyWhenNoSpareIsLeft) {
  DirectoryLevel t = tier(0);
  t.set_scratch();
  t.prepare();
  for (int version = 1; version <= 4; ++version) t.commit(version, writes(payload(2000, version)));
  for (int version = 1; version <= 4; ++version) t.remove(version);
  EXPECT_EQ(temporaries_in(store_dir()), 4u);
  for (int version = 5; version <= 9; ++version) t.commit(version, writes(payload(2000, version)));
  EXPECT_EQ(t.versions(), (std::vector<int>{5, 6, 7, 8, 9}));
  EXPECT_EQ(names_in(store_dir()).size(), 5u) << ::testing::PrintToString(names_in(store_dir()));
}

// At most kSpares are kept (the rest removed), by removals and evictions
// alike, and the level removes them when it goes.
TEST_F(DirectoryLevelTest, AScratchLevelKeepsAFewSparesAndRemovesThemWhenItGoes) {
  {
    DirectoryLevel t = tier(1);
    t.set_scratch();
    t.prepare();
    const int newest = static_cast<int>(DirectoryLevel::kSpares) + 3;
    for (int version = 1; version <= newest; ++version) t.commit(version, writes(payload(400, version)));
    EXPECT_EQ(t.evict(nothing_pinned).size(), DirectoryLevel::kSpares + 2);
    EXPECT_EQ(temporaries_in(store_dir()), DirectoryLevel::kSpares);
    EXPECT_EQ(t.versions(), std::vector<int>{newest});
  }
  EXPECT_EQ(names_in(store_dir()), std::vector<std::string>{format::container_file_name(DirectoryLevel::kSpares + 3, 0)});
}

// A durable level removes what it removes: a spare renamed from a version's
// name could bring that name back after a power loss, pointing at another
// version's bytes.
TEST_F(DirectoryLevelTest, ADurableLevelKeepsNoSpares) {
  DirectoryLevel t = tier();
  t.prepare();
  t.commit(1, writes(payload(4000, 1)));
  t.remove(1);
  EXPECT_TRUE(names_in(store_dir()).empty()) << ::testing::PrintToString(names_in(store_dir()));
}

// A commit that cannot write into a spare fails as a commit that cannot
// create its file does, and leaves neither the spare nor a temporary.
TEST_F(DirectoryLevelTest, AFailedReuseOfASpareFailsTheCommitAndLeavesNothing) {
  auto env = std::make_shared<FaultEnv>();
  DirectoryLevel t = tier(2, 0600, 0, env);
  t.set_scratch();
  t.prepare();
  t.commit(1, writes(payload(4000, 1)));
  t.remove(1);
  ASSERT_EQ(temporaries_in(store_dir()), 1u);
  FaultEnv::Fault create;
  create.op = FaultEnv::Op::kCreate;
  create.error_number = ENOSPC;
  create.path_part = "v0000000002";
  env->inject(create);
  EXPECT_THROW(t.commit(2, writes(payload(4000, 2))), StorageError);
  EXPECT_TRUE(names_in(store_dir()).empty()) << ::testing::PrintToString(names_in(store_dir()));
  const auto v2 = payload(4000, 2);
  t.commit(2, writes(v2));
  EXPECT_EQ(read_file(t.path(2)), v2);
}

TEST_F(DirectoryLevelTest, ThrowingWriterLeavesNothing) {
  DirectoryLevel t = tier();
  t.prepare();
  const auto old = payload(500, 1);
  t.commit(1, writes(old));
  EXPECT_THROW(t.commit(2,
                        [](WritableFile& file) {
                          const auto some = payload(4096, 2);
                          file.append(some.data(), some.size());
                          throw std::runtime_error("capture failed");
                        }),
               std::runtime_error);
  EXPECT_EQ(names_in(store_dir()), std::vector<std::string>{"v0000000001.r000000.rsg"});
  EXPECT_FALSE(t.holds(2));
  EXPECT_EQ(read_file(t.path(1)), old);
}

struct FaultCase {
  const char* name;
  FaultEnv::Op op;
  int error_number;
  bool partial_write;
  int skip;
};

void PrintTo(const FaultCase& fault, std::ostream* out) { *out << fault.name; }

class DirectoryLevelFault : public DirectoryLevelTest, public ::testing::WithParamInterface<FaultCase> {};

TEST_P(DirectoryLevelFault, FailedCommitLeavesOlderVersionsIntact) {
  const FaultCase fault = GetParam();
  auto env = std::make_shared<FaultEnv>();
  DirectoryLevel t = tier(2, 0600, 0, env);
  t.prepare();
  const auto v1 = payload(3000, 1);
  const auto v2 = payload(3000, 2);
  t.commit(1, writes(v1));
  t.commit(2, writes(v2));

  FaultEnv::Fault f;
  f.op = fault.op;
  f.error_number = fault.error_number;
  const bool on_file = fault.op != FaultEnv::Op::kSyncDir;  // sync_dir sees the directory only
  f.path_part = on_file ? "v0000000003" : "";
  f.skip = fault.skip;
  f.partial_write = fault.partial_write;
  env->inject(f);
  try {
    t.commit(3, writes(payload(3000, 3)));
    ADD_FAILURE() << "commit succeeded despite the fault";
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find(on_file ? "v0000000003" : store_dir()), std::string::npos) << e.what();
  }
  EXPECT_EQ(env->failures(), 1);
  EXPECT_FALSE(t.holds(3));
  EXPECT_FALSE(has_temporary(store_dir())) << ::testing::PrintToString(names_in(store_dir()));
  EXPECT_EQ(t.versions(), (std::vector<int>{1, 2}));
  EXPECT_EQ(read_file(t.path(1)), v1);
  EXPECT_EQ(read_file(t.path(2)), v2);

  // The fault was one-shot: the same version commits now.
  const auto v3 = payload(3000, 3);
  t.commit(3, writes(v3));
  EXPECT_EQ(read_file(t.path(3)), v3);
  EXPECT_EQ(t.versions(), (std::vector<int>{1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(
    DirectoryLevel, DirectoryLevelFault,
    ::testing::Values(FaultCase{"create_eacces", FaultEnv::Op::kCreate, EACCES, false, 0},
                      FaultCase{"first_append_enospc", FaultEnv::Op::kAppend, ENOSPC, false, 0},
                      FaultCase{"second_append_partial_enospc", FaultEnv::Op::kAppend, ENOSPC, true, 1},
                      FaultCase{"append_eio", FaultEnv::Op::kAppend, EIO, true, 0},
                      FaultCase{"sync_eio", FaultEnv::Op::kSync, EIO, false, 0},
                      FaultCase{"close_eio", FaultEnv::Op::kClose, EIO, false, 0},
                      FaultCase{"rename_exdev", FaultEnv::Op::kRename, EXDEV, false, 0},
                      // After the rename: the file must not stay visible when commit reports failure.
                      FaultCase{"sync_dir_eio", FaultEnv::Op::kSyncDir, EIO, false, 0}),
    [](const ::testing::TestParamInfo<FaultCase>& case_info) { return std::string(case_info.param.name); });

TEST_F(DirectoryLevelTest, FailedRemovalOfTheTemporaryKeepsTheCommitError) {
  auto env = std::make_shared<FaultEnv>();
  DirectoryLevel t = tier(2, 0600, 0, env);
  t.prepare();
  FaultEnv::Fault sync;
  sync.op = FaultEnv::Op::kSync;
  sync.error_number = EIO;
  env->inject(sync);
  FaultEnv::Fault remove;
  remove.op = FaultEnv::Op::kRemove;
  remove.error_number = EACCES;
  env->inject(remove);
  EXPECT_THROW(t.commit(1, writes(payload(100, 1))), StorageError);
  EXPECT_EQ(env->failures(), 2);
  EXPECT_FALSE(t.holds(1));
  EXPECT_TRUE(t.versions().empty());
  // The temporary stays, invisible; prepare() of a later run removes it.
  ASSERT_TRUE(has_temporary(store_dir()));
}

TEST_F(DirectoryLevelTest, EvictKeepsTheNewestAndThePinned) {
  DirectoryLevel t = tier(2);
  t.prepare();
  for (int v = 1; v <= 5; ++v) t.commit(v, writes(payload(10, v)));
  EXPECT_EQ(t.evict(nothing_pinned), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(t.versions(), (std::vector<int>{4, 5}));
  EXPECT_TRUE(t.evict(nothing_pinned).empty());

  for (int v = 6; v <= 9; ++v) t.commit(v, writes(payload(10, v)));
  // 4..9 committed; keep 8 and 9; 5 and 6 are pinned (e.g. being read).
  EXPECT_EQ(t.evict(pinned_among({5, 6, 42})), (std::vector<int>{4, 7}));
  EXPECT_EQ(t.versions(), (std::vector<int>{5, 6, 8, 9}));
  // Once unpinned, they go.
  EXPECT_EQ(t.evict(nothing_pinned), (std::vector<int>{5, 6}));
  EXPECT_EQ(t.versions(), (std::vector<int>{8, 9}));
}

// A writer (the flush thread) commits and pins versions while an eviction
// (the persist thread) runs. A version committed before the listing and
// pinned before the listing ends must survive, though it was not pinned
// when the eviction started.
TEST_F(DirectoryLevelTest, EvictAsksWhatIsPinnedAfterListing) {
  const auto env = std::make_shared<HookEnv>();
  DirectoryLevel evicting = tier(1, 0600, 0, env);
  DirectoryLevel writer = tier(1);
  evicting.prepare();
  for (int v = 1; v <= 2; ++v) writer.commit(v, writes(payload(10, v)));
  std::set<int> pinned;
  bool committed_meanwhile = false;
  env->before_list = [&](const std::string&) {
    if (std::exchange(committed_meanwhile, true)) return;
    for (int v = 3; v <= 4; ++v) {
      writer.commit(v, writes(payload(10, v)));
      pinned.insert(v);  // e.g. queued for its L4 copy
    }
  };
  EXPECT_EQ(evicting.evict([&](int version) { return pinned.count(version) > 0; }), (std::vector<int>{1, 2}));
  EXPECT_EQ(evicting.versions(), (std::vector<int>{3, 4}));
}

// An eviction running between a commit's rename and its directory sync
// (the scheduler's eviction thread beside a worker) must not count the new
// version among those it keeps: a power loss before the sync may take back
// the rename, and the version it superseded, removed meanwhile, would be
// gone too (power campaign, POSIX semantics). Once the sync returned, the
// new version counts. A rewrite of a committed version does not hide it.
TEST_F(DirectoryLevelTest, EvictDoesNotCountAVersionWhoseCommitIsNotDurableYet) {
  const auto env = std::make_shared<HookEnv>();
  DirectoryLevel t = tier(1, 0600, 0, env);
  t.prepare();
  t.commit(1, writes(payload(10, 1)));
  std::optional<std::vector<int>> evicted_before_sync;
  env->after_rename = [&](const std::string&, const std::string& to) {
    if (to == t.path(2)) evicted_before_sync = t.evict(nothing_pinned);
  };
  t.commit(2, writes(payload(10, 2)));
  ASSERT_TRUE(evicted_before_sync.has_value());
  EXPECT_TRUE(evicted_before_sync->empty()) << ::testing::PrintToString(*evicted_before_sync);
  EXPECT_EQ(t.evict(nothing_pinned), std::vector<int>{1});

  evicted_before_sync.reset();
  t.commit(3, writes(payload(10, 3)));  // 2 and 3 held; 3 is rewritten in place (a compaction)
  env->after_rename = [&](const std::string&, const std::string& to) {
    if (to == t.path(3)) evicted_before_sync = t.evict(nothing_pinned);
  };
  t.commit(3, writes(payload(20, 3)));
  ASSERT_TRUE(evicted_before_sync.has_value());
  EXPECT_EQ(*evicted_before_sync, std::vector<int>{2});
}

TEST_F(DirectoryLevelTest, EvictWithKeepZeroKeepsEverything) {
  DirectoryLevel t = tier(0);
  t.prepare();
  for (int v = 1; v <= 4; ++v) t.commit(v, writes(payload(10, v)));
  EXPECT_TRUE(t.evict(nothing_pinned).empty());
  EXPECT_EQ(t.versions(), (std::vector<int>{1, 2, 3, 4}));
}

TEST_F(DirectoryLevelTest, EvictIgnoresOtherRanksAndForeignFiles) {
  DirectoryLevel rank0 = tier(1, 0600, 0);
  DirectoryLevel rank1 = tier(1, 0600, 1);
  rank0.prepare();
  rank1.prepare();
  for (int v = 1; v <= 3; ++v) {
    rank0.commit(v, writes(payload(10, v)));
    rank1.commit(v, writes(payload(10, v + 10)));
  }
  write_file(store_dir() + "/notes.txt", payload(5, 0));
  write_file(store_dir() + "/v0000000000.r000000.rsg.damaged", payload(5, 0));
  EXPECT_EQ(rank0.versions(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(rank0.evict(nothing_pinned), (std::vector<int>{1, 2}));
  EXPECT_EQ(rank0.versions(), std::vector<int>{3});
  EXPECT_EQ(rank1.versions(), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(fs::exists(store_dir() + "/notes.txt"));
  EXPECT_TRUE(fs::exists(store_dir() + "/v0000000000.r000000.rsg.damaged"));
}

// Chains on one level: 1 <- 2 <- 3 and 4 <- 5 <- 6 (deltas on the previous
// version), written through ContainerWriter.
class DirectoryLevelChainTest : public DirectoryLevelTest {
 protected:
  void write_chains(DirectoryLevel& t, const std::map<int, int>& bases) {
    t.prepare();
    const std::vector<format::RegionEntry> regions = {{0, "u", format::RegionKind::kHost, 1000, "", {}}};
    for (const auto& [version, base] : bases) {
      t.commit(version, chain_file("store", version, base, regions, {{0, 100, 10}}, 64));
    }
  }
  // Records into removed_ the version of every container file removed through `env`.
  void record_removals(HookEnv& env) {
    env.before_remove = [this](const std::string& path) {
      int version = 0;
      int rank = 0;
      if (format::parse_container_file_name(fs::path(path).filename().string(), version, rank)) removed_.push_back(version);
    };
  }
  std::vector<int> removed_;
  const std::map<int, int> two_chains_ = {{1, -1}, {2, 1}, {3, 2}, {4, -1}, {5, 4}, {6, 5}};
};

TEST_F(DirectoryLevelChainTest, EvictKeepsTheBasesOfEveryVersionKept) {
  DirectoryLevel t = tier(2);
  write_chains(t, two_chains_);
  // Keeping 5 and 6 keeps their base 4; 1..3 go.
  EXPECT_EQ(t.evict(nothing_pinned), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(t.versions(), (std::vector<int>{4, 5, 6}));
}

TEST_F(DirectoryLevelChainTest, APinnedDeltaPinsItsWholeChain) {
  DirectoryLevel t = tier(1);
  write_chains(t, two_chains_);
  EXPECT_EQ(t.evict(pinned_among({2})), std::vector<int>{3});
  EXPECT_EQ(t.versions(), (std::vector<int>{1, 2, 4, 5, 6}));
}

TEST_F(DirectoryLevelChainTest, EvictRemovesNewestFirst) {
  const auto env = std::make_shared<HookEnv>();
  DirectoryLevel t = tier(1, 0600, 0, env);
  write_chains(t, {{1, -1}, {2, 1}, {3, 2}, {4, -1}});
  record_removals(*env);
  EXPECT_EQ(t.evict(nothing_pinned), (std::vector<int>{1, 2, 3}));
  // A crash after any of these removals leaves no delta without its base.
  EXPECT_EQ(removed_, (std::vector<int>{3, 2, 1}));
}

TEST_F(DirectoryLevelChainTest, ADamagedDeltaPinsNothing) {
  DirectoryLevel t = tier(1);
  write_chains(t, {{1, -1}, {2, 1}});
  flip_bit(t.path(2), 30);  // header: its base can no longer be read
  EXPECT_EQ(t.base_of(2), std::nullopt);
  EXPECT_EQ(t.evict(nothing_pinned), std::vector<int>{1});
}

TEST_F(DirectoryLevelChainTest, RemoveVersionRefusesToBreakAChain) {
  DirectoryLevel t = tier(0);
  write_chains(t, two_chains_);
  try {
    remove_version(store_dir(), 1);
    ADD_FAILURE() << "removed the base of versions 2 and 3";
  } catch (const InvalidArgumentError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("base of version(s) 2, 3"), std::string::npos) << message;
    EXPECT_NE(message.find("--with-dependents"), std::string::npos) << message;
  }
  EXPECT_EQ(t.versions(), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(remove_version(store_dir(), 6), std::vector<int>{6});  // nothing stands on it
  EXPECT_EQ(remove_version(store_dir(), 2, nullptr, true), (std::vector<int>{3, 2}));
  EXPECT_EQ(t.versions(), (std::vector<int>{1, 4, 5}));
}

TEST_F(DirectoryLevelChainTest, RemoveVersionWithDependentsRemovesNewestFirst) {
  const auto env = std::make_shared<HookEnv>();
  DirectoryLevel t = tier(0, 0600, 0, env);
  write_chains(t, two_chains_);
  record_removals(*env);
  EXPECT_EQ(remove_version(store_dir(), 4, env, true), (std::vector<int>{6, 5, 4}));
  EXPECT_EQ(removed_, (std::vector<int>{6, 5, 4}));
  EXPECT_EQ(t.versions(), (std::vector<int>{1, 2, 3}));
}

TEST_F(DirectoryLevelTest, PrepareRemovesTemporariesOfDeadProcessesOnly) {
  DirectoryLevel t = tier();
  t.prepare();
  t.commit(1, writes(payload(10, 1)));
  const int dead = dead_pid();
  ASSERT_NE(::kill(dead, 0), 0);
  const int alive = static_cast<int>(::getppid());
  const std::string dead_temp = ".v0000000002.r000000.rsg.tmp-" + std::to_string(dead);
  const std::string live_temp = ".v0000000003.r000000.rsg.tmp-" + std::to_string(alive);
  const std::string other_rank = ".v0000000002.r000001.rsg.tmp-" + std::to_string(dead);
  const std::string unrelated = ".hidden";
  for (const std::string& name : {dead_temp, live_temp, other_rank, unrelated}) {
    write_file(store_dir() + "/" + name, payload(64, 9));
  }
  t.prepare();
  const auto names = names_in(store_dir());
  EXPECT_EQ(std::count(names.begin(), names.end(), dead_temp), 0) << "temporary of a dead process survived";
  EXPECT_EQ(std::count(names.begin(), names.end(), live_temp), 1) << "temporary of a live process was removed";
  EXPECT_EQ(std::count(names.begin(), names.end(), other_rank), 1) << "another rank's temporary was touched";
  EXPECT_EQ(std::count(names.begin(), names.end(), unrelated), 1);
  EXPECT_EQ(t.versions(), std::vector<int>{1});
  // The other rank cleans up its own.
  tier(2, 0600, 1).prepare();
  const auto after = names_in(store_dir());
  EXPECT_EQ(std::count(after.begin(), after.end(), other_rank), 0);
  EXPECT_EQ(std::count(after.begin(), after.end(), live_temp), 1);
}

// A process that has exited but is not reaped yet (a zombie) answers
// kill(pid, 0), yet writes nothing more. A forked writer killed with its
// application is such a zombie until init reaps it, forever where pid 1 does
// not reap (containers without an init): its temporary is stale all the same.
TEST_F(DirectoryLevelTest, PrepareRemovesTheTemporaryOfAZombie) {
  DirectoryLevel t = tier();
  t.prepare();
  const pid_t zombie = ::fork();
  ASSERT_GE(zombie, 0);
  if (zombie == 0) ::_exit(0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);  // exited, not reaped
  ASSERT_EQ(::kill(zombie, 0), 0);
  const std::string temp = ".v0000000002.r000000.rsg.tmp-" + std::to_string(zombie);
  write_file(store_dir() + "/" + temp, payload(64, 9));
  t.prepare();
  const auto names = names_in(store_dir());
  EXPECT_EQ(std::count(names.begin(), names.end(), temp), 0) << "temporary of a zombie survived";
  ASSERT_EQ(::waitpid(zombie, nullptr, 0), zombie);
}

TEST_F(DirectoryLevelTest, PrepareCreatesNestedDirectories) {
  DirectoryLevel t(4, dir_.path() + "/a/b/c", "store", 0, 0600, 2, Env::posix());
  t.prepare();
  EXPECT_TRUE(fs::is_directory(dir_.path() + "/a/b/c/store"));
  t.prepare();  // idempotent
  t.commit(1, writes(payload(10, 1)));
  EXPECT_EQ(t.versions(), std::vector<int>{1});
  EXPECT_EQ(t.level(), 4);
}

TEST_F(DirectoryLevelTest, QuarantineHidesTheVersion) {
  DirectoryLevel t = tier();
  t.prepare();
  const auto data = payload(100, 1);
  t.commit(1, writes(data));
  t.commit(2, writes(payload(100, 2)));
  t.quarantine(2);
  EXPECT_EQ(t.versions(), std::vector<int>{1});
  EXPECT_FALSE(t.holds(2));
  EXPECT_THROW(t.open(2), NotFoundError);
  const std::string damaged = t.path(2) + ".damaged";
  ASSERT_TRUE(fs::exists(damaged));
  EXPECT_EQ(read_file(damaged), payload(100, 2));
  EXPECT_EQ(read_file(t.path(1)), data);
}

TEST_F(DirectoryLevelTest, CommitCopyIsByteForByte) {
  DirectoryLevel l2 = tier(2, 0600, 0, Env::posix(), "l2");
  DirectoryLevel l4 = tier(2, 0640, 0, Env::posix(), "l4");
  l2.prepare();
  l4.prepare();
  // Larger than the copy block (1 MiB: format::copy_verified), and not a
  // multiple of the chunk size.
  const auto big = payload((2u << 20) + 12345, 4);
  l2.commit(5, container_of(5, big));
  l4.commit_copy(5, *l2.open(5));
  EXPECT_EQ(read_file(l4.path(5)), read_file(l2.path(5)));
  EXPECT_EQ(l4.versions(), std::vector<int>{5});
  EXPECT_FALSE(has_temporary(l4.dir()));
  struct stat info {};
  ASSERT_EQ(::stat(l4.path(5).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0640u);

  const std::vector<std::byte> small = payload(1, 5);
  l2.commit(6, container_of(6, small));
  l4.commit_copy(6, *l2.open(6));
  EXPECT_EQ(read_file(l4.path(6)), read_file(l2.path(6)));
}

// A copy verifies every chunk on the way: damage in the source is named and
// never reaches the destination.
TEST_F(DirectoryLevelTest, CopyOfADamagedChunkFailsNamingItAndCommitsNothing) {
  DirectoryLevel l2 = tier(2, 0600, 0, Env::posix(), "l2");
  DirectoryLevel l4 = tier(2, 0600, 0, Env::posix(), "l4");
  l2.prepare();
  l4.prepare();
  const auto data = payload(300u << 10, 2);  // 5 chunks of 64 KiB
  l2.commit(1, container_of(1, data));
  const format::Container container = format::read_container(*l2.open(1));
  ASSERT_GE(container.chunks.size(), 3u);
  auto bytes = read_file(l2.path(1));
  bytes[container.chunks[2].file_offset + 100] ^= std::byte{0x10};
  write_file(l2.path(1), bytes);
  try {
    l4.commit_copy(1, *l2.open(1));
    FAIL() << "the copy of a damaged file was committed";
  } catch (const CorruptionError& error) {
    EXPECT_NE(std::string(error.what()).find("chunk 2"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(l4.versions().empty());
  EXPECT_FALSE(has_temporary(l4.dir()));
}

// A file of another version under this version's name is refused too.
TEST_F(DirectoryLevelTest, CopyRefusesAFileOfAnotherVersion) {
  DirectoryLevel l2 = tier(2, 0600, 0, Env::posix(), "l2");
  DirectoryLevel l4 = tier(2, 0600, 0, Env::posix(), "l4");
  l2.prepare();
  l4.prepare();
  const auto data = payload(1000, 3);
  l2.commit(1, container_of(2, data));
  EXPECT_THROW(l4.commit_copy(1, *l2.open(1)), CorruptionError);
  EXPECT_TRUE(l4.versions().empty());
}

TEST_F(DirectoryLevelTest, FailedCopyLeavesNothing) {
  auto env = std::make_shared<FaultEnv>();
  DirectoryLevel l2 = tier(2, 0600, 0, Env::posix(), "l2");
  DirectoryLevel l4 = tier(2, 0600, 0, env, "l4");
  l2.prepare();
  l4.prepare();
  const auto data = payload(10000, 1);
  l2.commit(1, container_of(1, data));
  FaultEnv::Fault f;
  f.op = FaultEnv::Op::kAppend;
  f.error_number = ENOSPC;
  f.partial_write = true;
  env->inject(f);
  EXPECT_THROW(l4.commit_copy(1, *l2.open(1)), StorageError);
  EXPECT_TRUE(l4.versions().empty());
  EXPECT_FALSE(has_temporary(l4.dir()));
  EXPECT_EQ(l2.versions(), std::vector<int>{1});
}

}  // namespace
}  // namespace resurgo
