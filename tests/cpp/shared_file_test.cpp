// persistent.layout = shared (src/job/shared_version.h, format/shared_file.h):
// an MPI store packs each version's L4 files into one file, restart and
// `resurgo verify` read it, and a torn or missing part, a crash before the
// manifest or an I/O fault on one rank leave the previous version
// restorable, the damaged one refused and named. The ranks are threads
// (thread_job.h); tests/mpi/shared_file.cmake runs real ranks.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include <gtest/gtest.h>

#include "format/file_names.h"
#include "format/shared_file.h"
#include "io/bytes_file.h"
#include "io/fault_env.h"
#include "job/shared_version.h"
#include "resurgo/resurgo.hpp"
#include "resurgo/tools.hpp"
#include "test_util.h"
#include "job_levels.h"
#include "job_run.h"
#include "thread_job.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using testing::ThreadComm;
using testing::ThreadJob;

TEST(SharedFileFormat, PartsStartAtTheExclusivePrefixSumOfTheirSizes) {
  EXPECT_EQ(part_offsets({3, 0, 5, 2}), (std::vector<std::uint64_t>{0, 3, 3, 8}));
  EXPECT_THROW(part_offsets({~std::uint64_t{0}, 2}), StateError);
}

TEST(SharedFileFormat, SharedNamesParseBackAndAreNoContainerNames) {
  int version = 0;
  int rank = 0;
  EXPECT_TRUE(format::parse_shared_file_name(format::shared_file_name(12), version));
  EXPECT_EQ(version, 12);
  EXPECT_FALSE(format::parse_container_file_name(format::shared_file_name(12), version, rank));
  EXPECT_FALSE(format::parse_shared_file_name(format::container_file_name(12, 0), version));
}

// Parts of 10 and 20 bytes, then the index; `tamper` changes the bytes.
std::vector<std::byte> shared_bytes(const std::function<void(format::SharedIndex&, std::uint64_t&)>& tamper = {}) {
  format::SharedIndex index{7, {{0, 10, 1}, {10, 20, 2}}};
  std::uint64_t index_offset = 30;
  if (tamper) tamper(index, index_offset);
  std::vector<std::byte> bytes(30, std::byte{0x11});
  const std::vector<std::byte> tail = format::encode_shared_index(index, index_offset);
  bytes.insert(bytes.end(), tail.begin(), tail.end());
  return bytes;
}

void expect_torn(std::vector<std::byte> bytes, const std::string& why) {
  try {
    format::read_shared_index(BytesFile(std::move(bytes), "v7.shared.rsg"));
    ADD_FAILURE() << "a shared file refused for " << why << " was read";
  } catch (const CorruptionError& error) {
    EXPECT_NE(std::string(error.what()).find("v7.shared.rsg"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(why), std::string::npos) << error.what();
  }
}

TEST(SharedFileFormat, TheIndexReadsBackAndEachPartIsAWindowNamingItsRank) {
  const auto file = std::make_shared<BytesFile>(shared_bytes(), "v7.shared.rsg");
  const format::SharedIndex index = format::read_shared_index(*file);
  EXPECT_EQ(index.version, 7);
  ASSERT_EQ(index.parts.size(), 2u);
  EXPECT_EQ(index.parts[1].offset, 10u);
  EXPECT_EQ(index.parts[1].checksum, 2u);
  const std::unique_ptr<ReadableFile> part = format::open_part(file, index.parts[1], 1);
  EXPECT_EQ(part->size(), 20u);
  EXPECT_NE(part->path().find("rank 1's part"), std::string::npos);
  std::byte byte{};
  EXPECT_THROW(part->read_at(20, &byte, 1), StorageError) << "a part's reads stay inside it";
}

TEST(SharedFileFormat, TornOrHostileIndexesAreRefusedNamingTheFile) {
  std::vector<std::byte> truncated = shared_bytes();
  truncated.pop_back();
  expect_torn(truncated, "no shared footer");
  std::vector<std::byte> flipped = shared_bytes();
  flipped[35] ^= std::byte{1};  // in the index
  expect_torn(flipped, "checksum");
  expect_torn(shared_bytes([](format::SharedIndex& index, std::uint64_t&) { index.parts[1].offset = 5; }), "overlaps");
  expect_torn(shared_bytes([](format::SharedIndex& index, std::uint64_t&) { index.parts[1].bytes = 21; }),
              "runs into the part index");
  expect_torn(shared_bytes([](format::SharedIndex&, std::uint64_t& index_offset) { index_offset = 1u << 30; }),
              "do not end at its size");
  // 2^24 + 1 parts announced by a 118-byte file: refused before any allocation.
  std::vector<std::byte> hostile = shared_bytes();
  const std::uint32_t ranks = format::kMaxSharedRanks + 1;
  std::memcpy(hostile.data() + hostile.size() - format::kSharedFooterBytes + 12, &ranks, sizeof ranks);
  expect_torn(hostile, std::to_string(ranks) + " parts");
  expect_torn(std::vector<std::byte>(10), "shorter than its footer");
}

class SharedLayoutTest : public ::testing::TestWithParam<int> {
 protected:
  int ranks() const { return GetParam(); }
  Config config(FileLayout layout = FileLayout::kShared) const {
    Config result = testing::job_levels(dir.path());
    result.persistent.layout = layout;
    result.pipeline.chunk_size = 256u << 10;
    return result;
  }
  std::string l4() const { return dir.path() + "/l4/job"; }
  std::string shared(int version) const { return l4() + "/" + format::shared_file_name(version); }
  static int value_of(int version, int rank) { return version * 1000 + rank; }

  // Every rank opens the store (through `env` when given) and runs `body`;
  // without `job_thread`, the job's steps run inside the store's calls, as
  // under MPI without MPI_THREAD_MULTIPLE.
  void run_job(const Config& config, const std::function<void(int rank, Store&, std::vector<int>&)>& body,
               const std::function<std::shared_ptr<Env>(int rank)>& env = {}, bool job_thread = true) {
    ThreadJob job(ranks(), 1);
    testing::run_ranks(job, [&](int rank) {
      Store store("job", config, std::make_shared<ThreadComm>(job, rank, job_thread), env ? env(rank) : nullptr);
      std::vector<int> state(300000, -1);  // ~1.2 MB: several chunks of 256 KiB
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      body(rank, store, state);
    });
  }
  void write(const std::vector<int>& versions) {
    run_job(config(), [&](int rank, Store& store, std::vector<int>& state) {
      for (int version : versions) {
        std::fill(state.begin(), state.end(), value_of(version, rank));
        store.checkpoint(version);
      }
      store.wait(kAllVersions, kL4);
    });
  }
  // Every node lost: restart reads L4 only.
  void lose_nodes() {
    for (int node = 0; node < ranks(); ++node) fs::remove_all(dir.path() + "/node" + std::to_string(node));
  }
  struct Restart {
    int restored = -1;
    bool bytes_right = false;
    std::vector<std::string> skipped;
    std::string error;
  };
  std::vector<Restart> restart(FileLayout layout = FileLayout::kShared) {
    std::vector<Restart> runs(static_cast<std::size_t>(ranks()));
    run_job(config(layout), [&](int rank, Store& store, std::vector<int>& state) {
      Restart& run = runs[static_cast<std::size_t>(rank)];
      try {
        run.restored = store.restart();
        run.skipped = store.last_restart().skipped;
      } catch (const Error& error) {
        run.error = error.what();
      }
      run.bytes_right = state == std::vector<int>(state.size(), value_of(run.restored, rank));
    });
    return runs;
  }
  // Flips one byte in the middle of rank `rank`'s part of `version`'s shared file.
  void flip_byte_of_part(int version, int rank) {
    const std::shared_ptr<const ReadableFile> file = Env::posix()->open(shared(version));
    const format::SharedPart part = format::read_shared_index(*file).parts[static_cast<std::size_t>(rank)];
    std::fstream stream(shared(version), std::ios::in | std::ios::out | std::ios::binary);
    stream.seekg(static_cast<std::streamoff>(part.offset + part.bytes / 2));
    const char byte = static_cast<char>(stream.get() ^ 0x5a);
    stream.seekp(static_cast<std::streamoff>(part.offset + part.bytes / 2));
    stream.put(byte);
  }
  // Version 2 checkpointed with `fault` injected on the last rank: each
  // rank's error from its wait for L4 ("" where it had none).
  std::vector<std::string> checkpoint_2_with_a_fault_on_the_last_rank(const FaultEnv::Fault& fault) {
    std::vector<std::string> errors(static_cast<std::size_t>(ranks()));
    run_job(
        config(),
        [&](int rank, Store& store, std::vector<int>& state) {
          std::fill(state.begin(), state.end(), value_of(2, rank));
          store.checkpoint(2);
          try {
            store.wait(kAllVersions, kL4);
          } catch (const Error& error) {
            errors[static_cast<std::size_t>(rank)] = error.what();
          }
        },
        [&](int rank) -> std::shared_ptr<Env> {
          auto env = std::make_shared<FaultEnv>();
          if (rank == ranks() - 1) env->inject(fault);
          return env;
        });
    return errors;
  }
  // Every node lost, each rank restarts version 1 bit for bit: the runs.
  std::vector<Restart> expect_version_1_restored() {
    lose_nodes();
    std::vector<Restart> runs = restart();
    for (const Restart& run : runs) {
      EXPECT_EQ(run.restored, 1) << run.error;
      EXPECT_TRUE(run.bytes_right);
    }
    return runs;
  }
  static bool mentions(const std::vector<std::string>& lines, const std::string& text) {
    for (const std::string& line : lines) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }

  TempDir dir;
};

TEST_P(SharedLayoutTest, EachVersionIsOneFileOnL4AndRestoresBitForBit) {
  write({1, 2});
  for (int version : {1, 2}) {
    EXPECT_TRUE(fs::exists(shared(version)));
    for (int rank = 0; rank < ranks(); ++rank) {
      EXPECT_FALSE(fs::exists(l4() + "/" + format::container_file_name(version, rank))) << "packed, then removed";
    }
    EXPECT_EQ(tools::verify(shared(version)).chunks, static_cast<std::size_t>(ranks()) * 5);
  }
  lose_nodes();
  for (const Restart& run : restart()) {
    EXPECT_EQ(run.error, "");
    EXPECT_EQ(run.restored, 2);
    EXPECT_TRUE(run.bytes_right);
  }
}

TEST_P(SharedLayoutTest, AStorePerRankReadsTheSharedFilesOfAnEarlierRun) {
  write({1});
  lose_nodes();
  for (const Restart& run : restart(FileLayout::kPerRank)) {
    EXPECT_EQ(run.restored, 1) << run.error;
    EXPECT_TRUE(run.bytes_right);
  }
}

TEST_P(SharedLayoutTest, AFlippedByteInOneRanksPartIsNamedAndTheVersionBeforeRestored) {
  write({1, 2});
  const int damaged_rank = ranks() - 1;
  flip_byte_of_part(2, damaged_rank);
  try {
    tools::verify(shared(2));
    ADD_FAILURE() << "verify passed a damaged part";
  } catch (const CorruptionError& error) {
    EXPECT_NE(std::string(error.what()).find("rank " + std::to_string(damaged_rank) + "'s part"), std::string::npos)
        << error.what();
  }
  const std::vector<Restart> runs = expect_version_1_restored();
  for (const Restart& run : runs) EXPECT_TRUE(mentions(run.skipped, "version 2")) << "the version refused is named";
  EXPECT_TRUE(mentions(runs[static_cast<std::size_t>(damaged_rank)].skipped,
                       "rank " + std::to_string(damaged_rank) + "'s part"));
}

TEST_P(SharedLayoutTest, ATruncatedSharedFileIsRefusedByRestartAndVerify) {
  write({1, 2});
  fs::resize_file(shared(2), fs::file_size(shared(2)) - 100);
  EXPECT_THROW(tools::verify(shared(2)), CorruptionError);
  for (const Restart& run : expect_version_1_restored()) {
    EXPECT_TRUE(mentions(run.skipped, "version 2")) << "the version refused is named";
    EXPECT_TRUE(mentions(run.skipped, "torn")) << "and why";
  }
}

// A kill after the shared file was published and before the manifest: the
// version is no version of the job; the one before is restored, and the
// next run writes the interrupted version again.
TEST_P(SharedLayoutTest, ACrashBeforeTheManifestLeavesTheVersionBeforeRestorable) {
  write({1, 2});
  fs::remove(l4() + "/" + format::manifest_file_name(2));
  lose_nodes();
  for (const Restart& run : restart()) {
    EXPECT_EQ(run.restored, 1) << run.error;
    EXPECT_TRUE(run.bytes_right);
  }
  write({2});  // over the interrupted version's shared file
  for (const Restart& run : restart()) {
    EXPECT_EQ(run.restored, 2) << run.error;
    EXPECT_TRUE(run.bytes_right);
  }
}

TEST_P(SharedLayoutTest, ResurgoRmRemovesASharedVersion) {
  write({1, 2});
  EXPECT_EQ(remove_version(l4(), 2), std::vector<int>{2});
  EXPECT_FALSE(fs::exists(shared(2)));
  EXPECT_TRUE(fs::exists(shared(1)));
}

// A power loss after the manifest, before the ranks removed their own
// files, may leave those (never synced) torn beside the shared file: a
// store with the shared layout reads the shared file.
TEST_P(SharedLayoutTest, ATornRankFileBesideTheSharedFileIsNotRead) {
  write({1});
  for (int rank = 0; rank < ranks(); ++rank) {
    std::ofstream(l4() + "/" + format::container_file_name(1, rank), std::ios::binary) << "torn";
  }
  expect_version_1_restored();
}

// Each rank's commit writes its container once, straight into its slot of
// the version's shared temporary: the parts start where the slots do (a
// slot per rank, bounded by its regions' bytes), and no rank file is left.
TEST_P(SharedLayoutTest, EachPartIsWrittenOnceInItsSlot) {
  write({1});
  const format::SharedIndex index = format::read_shared_index(*Env::posix()->open(shared(1)));
  const std::uint64_t slot = slot_capacity(300000 * sizeof(int));
  ASSERT_EQ(index.parts.size(), static_cast<std::size_t>(ranks()));
  for (int rank = 0; rank < ranks(); ++rank) {
    const format::SharedPart& part = index.parts[static_cast<std::size_t>(rank)];
    EXPECT_EQ(part.offset, static_cast<std::uint64_t>(rank) * slot) << "rank " << rank;
    EXPECT_LE(part.bytes, slot);
  }
  EXPECT_EQ(tools::verify(shared(1)).chunks, static_cast<std::size_t>(ranks()) * 5);
}

// The last rank's metadata makes its container larger than its slot: it
// writes its own file, and every rank's part is copied, end to end, into a
// new temporary (the others' from their slots); the version restores. L4
// only, so the pipeline writes the snapshot itself into the slot (the fault
// sweep's jobs copy L2's file there).
TEST_P(SharedLayoutTest, APartLargerThanItsSlotIsCopiedAndTheVersionRestores) {
  Config l4_only = config();
  l4_only.local.every = 0;
  run_job(l4_only, [&](int rank, Store& store, std::vector<int>& state) {
    const std::vector<std::byte> metadata(rank == ranks() - 1 ? slot_capacity(state.size() * sizeof(int)) : 0);
    if (!metadata.empty()) store.set_metadata(metadata.data(), metadata.size());
    std::fill(state.begin(), state.end(), value_of(1, rank));
    store.checkpoint(1);
    store.wait(kAllVersions, kL4);
  });
  const format::SharedIndex index = format::read_shared_index(*Env::posix()->open(shared(1)));
  std::uint64_t next = 0;
  for (const format::SharedPart& part : index.parts) {
    EXPECT_EQ(part.offset, next) << "packed end to end";
    next += part.bytes;
  }
  EXPECT_GT(index.parts.back().bytes, slot_capacity(300000 * sizeof(int)));
  for (int rank = 0; rank < ranks(); ++rank) {
    EXPECT_FALSE(fs::exists(l4() + "/" + format::container_file_name(1, rank))) << "packed, then removed";
  }
  expect_version_1_restored();
}

// Without a job thread nobody would answer a commit waiting for its slot
// until the store's next call: no slots are reserved, each rank writes its
// own file and copies it into the shared file, packed end to end.
TEST_P(SharedLayoutTest, WithoutAJobThreadEachRanksFileIsCopiedIntoTheSharedFile) {
  run_job(
      config(),
      [&](int rank, Store& store, std::vector<int>& state) {
        std::fill(state.begin(), state.end(), value_of(1, rank));
        store.checkpoint(1);
        store.wait(kAllVersions, kL4);
      },
      {}, false);
  const format::SharedIndex index = format::read_shared_index(*Env::posix()->open(shared(1)));
  ASSERT_EQ(index.parts.size(), static_cast<std::size_t>(ranks()));
  EXPECT_EQ(index.parts[1].offset, index.parts[0].bytes) << "packed end to end";
  expect_version_1_restored();
}

// The last rank's part cannot be written into its slot: no rank packs the
// version, every rank's wait reports it, and the version before stays.
TEST_P(SharedLayoutTest, AnIOFaultOnOneRankFailsTheVersionOnEveryRank) {
  write({1});
  const std::vector<std::string> errors =
      checkpoint_2_with_a_fault_on_the_last_rank({FaultEnv::Op::kWriteAt, EIO, "l4/job/.v0000000002", 0, -1});
  for (const std::string& error : errors) EXPECT_NE(error, "") << "every rank learns that version 2 failed";
  EXPECT_FALSE(fs::exists(shared(2)));
  expect_version_1_restored();
}

// The last rank cannot read its part back from its slot to check it: the
// version fails on every rank, no shared file is published, the version
// before stays.
TEST_P(SharedLayoutTest, AReadFaultWhilePackingFailsTheVersionOnEveryRank) {
  write({1});
  const std::vector<std::string> errors =
      checkpoint_2_with_a_fault_on_the_last_rank({FaultEnv::Op::kRead, EIO, "l4/job/.v0000000002.shared", 0, -1});
  for (const std::string& error : errors) EXPECT_NE(error.find("did not reach L4"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(shared(2)));
  EXPECT_FALSE(fs::exists(l4() + "/" + format::manifest_file_name(2)));
  expect_version_1_restored();
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedLayoutTest, ::testing::Values(2, 4));

// A store without a communicator already writes one file per version: the
// option is accepted and changes nothing.
TEST(SharedLayoutSolo, TheOptionIsAcceptedAndTheVersionIsOneContainerFile) {
  TempDir dir;
  Config config = testing::job_levels(dir.path());
  config.set("persistent.layout", "shared");
  EXPECT_EQ(config.persistent.layout, FileLayout::kShared);
  EXPECT_THROW(config.set("persistent.layout", "one-file"), ConfigError);
  std::vector<int> state(1000, 7);
  {
    Store store("solo", config);
    store.protect(0, state.data(), state.size() * sizeof(int), "state");
    store.checkpoint(1);
    store.wait(1, kL4);
  }
  EXPECT_TRUE(fs::exists(dir.path() + "/l4/solo/" + format::container_file_name(1, 0)));
}

}  // namespace
}  // namespace resurgo
