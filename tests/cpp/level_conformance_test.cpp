// Level conformance (DESIGN.md, "Data flow and modules"; issue 25): every
// Level runs through one suite at the Level interface (src/tier/level.h),
// as TensorStore's drivers share one suite. A new Level is one more
// LevelKind: its factory, its number, its features and its eviction
// contract. The cases:
//   - number() is the level's named constant (kL0 ... kL4), features() say
//     what it is (volatile, node-local, collective, device);
//   - a committed version reads back byte for byte through versions(),
//     holds() and open(), and is a container that verifies;
//   - a version is visible only once complete: not while its write runs,
//     and never when the write throws;
//   - commit_copy copies a version from another level exactly, and refuses
//     a damaged source naming the chunk, or a file of another version,
//     committing nothing;
//   - quarantine and remove make a version invisible and leave the others;
//   - readers racing a writer that commits and removes see every listed
//     version whole (or not found once removed), never part of one;
//   - eviction follows the level's contract (below); on the directory
//     levels, one stopped part way by a failing removal leaves no delta
//     without its base (newest first);
//   - the directory levels (L2, L3, L4): an I/O fault (through FaultEnv) at
//     any step of a commit fails that commit only: the previous versions
//     stay intact, nothing partial or temporary is left, and the level takes
//     the next version once the fault is gone.
// The containers are written with format::VersionWriter (write_extents), so
// commit_copy and restore verify them as they do the Scheduler's.
//
// Eviction contracts, where the levels differ:
//   - L1, L2, L4 (kKeepsNewest): evict() removes the versions beyond the
//     newest `keep`, except pinned ones and the bases (read from the level's
//     own copies) of every version kept; it returns them ascending.
//   - L3 (kKeepsNewestAfterProtect): the same evict() (its level is a
//     directory level), and protect() itself evicts beyond `keep` after every
//     version it protects, nothing pinned: a partner copy is no later
//     level's source.
//   - L0 (kFirstInFirstOutWhenFull): evict() removes nothing; a commit that
//     does not fit drops the oldest released versions first (commit()
//     releases at once), pinned or not: L0 holds device images, no chain
//     depends on them and they are no later level's source.
// L0 also takes a file of another version in commit_copy (it checks no
// identity, unlike L1, L2, L3 and L4): that case skips for it, saying so,
// until the contract is settled.
//
// L3 at the interface. Its level is PartnerCopies::level(): the directory
// <L2>/<store>/partner of the rank that keeps the copies of its partner (the
// source rank, PartnerTopology::source_of); its versions are the source's
// files, named and identified (header.rank) as the source's. It is filled
// collectively: every rank commits its own version to its L2, then every
// rank calls protect(), over a job of threads (thread_job.h) standing for
// the ranks, one rank per node or two. The suite then checks one rank's L3
// level: it holds the source's container byte for byte; the interface calls
// (commit of the source's container, commit_copy, quarantine, remove,
// evict) behave as on any directory level; a fault in that rank's L3
// directory fails that rank's protection only (PartnerCopies::outcome says
// why) while the other ranks protect the version. It is not node-local: the
// copy outlives the node of the rank whose version it is (its purpose). The
// XOR scheme's level holds parity containers derived from the set's files,
// not a copy of any one of them, so the byte-for-byte cases do not apply to
// it; partner_copies_test.cpp rebuilds lost files from it.
//
// L0 with device.backend = cuda runs only against the fake CUDA driver
// (tests/cpp/fake_cuda; the fake_cuda.* ctest registration and the Makefile's
// FAKE_CUDA_TESTS put it on LD_LIBRARY_PATH) and skips elsewhere, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <atomic>
#include <cerrno>
#include <exception>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/units.h"
#include "fake_cuda_lookup.h"
#include "format/container.h"
#include "format/file_names.h"
#include "format/version_writer.h"
#include "io/bytes_file.h"
#include "io/fault_env.h"
#include "job/partner_copies.h"
#include "job/partner_topology.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "thread_job.h"
#include "tier/device_level.h"
#include "tier/directory_level.h"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

constexpr char kConformanceStore[] = "s";
constexpr std::uint64_t kConformanceChunk = 32u << 10;     // several chunks per version
constexpr std::uint64_t kFieldBytes = 96u << 10;  // 3 chunks
constexpr std::uint64_t kTagBytes = 3000;         // 1 chunk

// ------------------------------------------------------------ versions

// Container bytes of a version, as the Scheduler writes them
// (format::VersionWriter), from content derived from the version and the
// rank: the same arguments give the same bytes.
class Containers {
 public:
  // `base` >= 0: a delta on it holding only a block of the field.
  const std::vector<std::byte>& bytes(int version, int rank, int base = -1) {
    const auto key = std::make_tuple(version, rank, base);
    auto found = made_.find(key);
    if (found == made_.end()) found = made_.emplace(key, make(version, rank, base)).first;
    return found->second;
  }
  // Writes `bytes(...)` in pieces, as a writer streams chunks.
  std::function<void(WritableFile&)> writer(int version, int rank, int base = -1) {
    const std::vector<std::byte>& content = bytes(version, rank, base);
    return [&content](WritableFile& file) { append_in_pieces(file, content, content.size()); };
  }
  static void append_in_pieces(WritableFile& file, const std::vector<std::byte>& content, std::size_t until) {
    constexpr std::size_t kPiece = 16u << 10;
    for (std::size_t done = 0; done < until; done += kPiece) {
      file.append(content.data() + done, std::min(kPiece, until - done));
    }
  }
  // Where the stored bytes of the container's chunk `index` start in the
  // file, and where its bytes lie in its region.
  static std::uint64_t chunk_data_offset(const std::vector<std::byte>& content, std::size_t index) {
    const format::Container container = format::read_container(BytesFile(content, "expected"));
    return container.chunks.at(index).file_offset;
  }
  static std::uint64_t chunk_region_offset(const std::vector<std::byte>& content, std::size_t index) {
    const format::Container container = format::read_container(BytesFile(content, "expected"));
    return container.chunks.at(index).offset;
  }

 private:
  static std::vector<std::byte> make(int version, int rank, int base) {
    format::Header header;
    header.store = kConformanceStore;
    header.version = version;
    header.rank = static_cast<std::uint32_t>(rank);
    header.base_version = base;
    header.chunk_size = kConformanceChunk;
    header.regions = {{0, "field", format::RegionKind::kHost, kFieldBytes, "float64", {12, 1024}},
                      {1, "tags", format::RegionKind::kHost, kTagBytes, "uint8", {3000}}};
    const std::string metadata = "version " + std::to_string(version) + " of rank " + std::to_string(rank);
    for (char c : metadata) header.metadata.push_back(static_cast<std::byte>(c));
    std::vector<std::byte> field(kFieldBytes), tags(kTagBytes);
    for (std::size_t i = 0; i < field.size(); ++i) field[i] = static_cast<std::byte>((i * 131 + version * 37 + rank * 11) & 0xff);
    for (std::size_t i = 0; i < tags.size(); ++i) tags[i] = static_cast<std::byte>((i * 7 + version * 5 + rank) & 0xff);
    std::vector<Extent> extents;
    if (base < 0) {
      extents = {{0, 0, kFieldBytes, field.data()}, {1, 0, kTagBytes, tags.data()}};
    } else {
      extents = {{0, kConformanceChunk, kConformanceChunk / 2, field.data() + kConformanceChunk}};
    }
    Config::Pipeline pipeline;
    pipeline.chunk_size = kConformanceChunk;
    ThreadPool pool(0);
    BytesFile file("memory");
    write_extents(file, header, extents, pipeline, pool);
    return file.take();
  }

  std::map<std::tuple<int, int, int>, std::vector<std::byte>> made_;
};

// ------------------------------------------------------------ parameters

enum class Eviction { kKeepsNewest, kKeepsNewestAfterProtect, kFirstInFirstOutWhenFull };

// What a kind's factory is given.
struct LevelSetup {
  std::string root;                // a fresh directory of the test
  std::shared_ptr<FaultEnv> env;   // every file access of the directory levels
  int keep = 0;                    // versions kept by eviction (0 = all); L0 has none
};

// A level under test and how versions reach it.
class Subject {
 public:
  virtual ~Subject() = default;
  virtual Level& level() = 0;
  // The rank whose versions the level holds (header.rank of its files).
  virtual int owner() const { return 0; }
  // Makes `version` committed in level() the way a store fills the level:
  // commit() (the Scheduler's first write), or protect() over the job (L3).
  // Throws StorageError when that fails.
  virtual void put(int version, Containers& containers) {
    level().commit(version, containers.writer(version, owner()));
  }
};

class Plain final : public Subject {
 public:
  explicit Plain(std::unique_ptr<Level> level) : level_(std::move(level)) {}
  Level& level() override { return *level_; }

 private:
  std::unique_ptr<Level> level_;
};

// L0 over the device cache; the logger outlives the cache, which keeps a reference.
class DeviceSubject final : public Subject {
 public:
  DeviceSubject(DeviceBackend backend, std::uint64_t capacity, std::uint64_t chunk) {
    Config::Device device;
    device.backend = backend;
    device.capacity = capacity;
    device.chunk = chunk;
    level_ = std::make_unique<DeviceLevel>(kConformanceStore, 0, device, 0, log_);
  }
  Level& level() override { return *level_; }

 private:
  Logger log_{kConformanceStore, LogLevel::kOff};
  std::unique_ptr<DeviceLevel> level_;
};

// L3: `ranks` ranks as threads, `per_node` to a node; every rank's L2 is
// <root>/node<n>, its L3 <root>/node<n>/<store>/partner. The level under test
// is rank `inspected`'s.
class PartnerSubject final : public Subject {
 public:
  PartnerSubject(const LevelSetup& setup, int ranks, int per_node, int inspected)
      : job_(ranks, per_node), inspected_(inspected) {
    std::vector<int> nodes;
    for (int rank = 0; rank < ranks; ++rank) nodes.push_back(job_.node_of(rank));
    const PartnerTopology topology(nodes, 2);
    owner_ = topology.source_of(inspected);
    // Only the inspected rank's files go through the test's FaultEnv: a
    // fault injected there hits that rank, not the other rank of its node
    // that shares its directories.
    const auto env_of = [&](int rank) { return rank == inspected ? std::shared_ptr<Env>(setup.env) : Env::posix(); };
    for (int rank = 0; rank < ranks; ++rank) {
      comms_.push_back(std::make_unique<testing::ThreadComm>(job_, rank));
      locals_.push_back(std::make_unique<DirectoryLevel>(kL2, setup.root + "/node" + std::to_string(job_.node_of(rank)),
                                                          kConformanceStore, rank, 0600, 0, env_of(rank)));
      locals_.back()->prepare();
    }
    for (int rank = 0; rank < ranks; ++rank) {
      copies_.push_back(std::make_unique<PartnerCopies>(PartnerScheme::kPartner, topology, rank, kConformanceStore,
                                                        *locals_[rank], 0600, setup.keep, kConformanceChunk, env_of(rank), log_));
    }
  }
  Level& level() override { return copies_[inspected_]->level(); }
  int owner() const override { return owner_; }

  // Every rank commits its own version to its L2, then all protect it.
  void put(int version, Containers& containers) override {
    for (int rank = 0; rank < job_.size(); ++rank) {
      containers.bytes(version, rank);  // made here: the threads only read
      if (!locals_[rank]->holds(version)) locals_[rank]->commit(version, containers.writer(version, rank));
    }
    testing::run_ranks(job_, [&](int rank) { copies_[rank]->protect(version, Clock::now(), *comms_[rank]); });
    for (int rank = 0; rank < job_.size(); ++rank) {
      const std::optional<PartnerCopies::Outcome> outcome = copies_[rank]->outcome(version);
      if (!outcome) throw StateError("rank " + std::to_string(rank) + " reports no protection of version " +
                                     std::to_string(version));
      if (rank == inspected_ && !outcome->error.empty()) throw StorageError(outcome->error);
      // A fault in the inspected rank's L3 must not fail another rank's protection.
      EXPECT_EQ(outcome->error, "") << "rank " << rank << ", version " << version;
    }
  }

 private:
  Logger log_{kConformanceStore, LogLevel::kOff};
  testing::ThreadJob job_;
  int inspected_;
  int owner_ = 0;
  std::vector<std::unique_ptr<testing::ThreadComm>> comms_;
  std::vector<std::unique_ptr<DirectoryLevel>> locals_;
  std::vector<std::unique_ptr<PartnerCopies>> copies_;
};

struct LevelKind {
  const char* name;
  int number;
  Level::Features features;
  Eviction eviction;
  bool directory;           // file accesses go through LevelSetup::env (I/O fault cases)
  bool needs_fake_driver;   // device.backend = cuda: only against the fake CUDA driver
  std::unique_ptr<Subject> (*make)(const LevelSetup& setup);
  // Commits sync files and directories (false: local.durable = false).
  bool syncs = true;
};

// Its name in failure messages (not its bytes).
void PrintTo(const LevelKind& kind, std::ostream* out) { *out << kind.name; }

Level::Features features(bool is_volatile, bool node_local, bool collective, bool device) {
  Level::Features result;
  result.is_volatile = is_volatile;
  result.node_local = node_local;
  result.collective = collective;
  result.device = device;
  return result;
}

const LevelKind kLevels[] = {
    // L0 of 2 MiB: about twenty versions before the first one is dropped.
    {"L0_host", kL0, features(true, true, false, true), Eviction::kFirstInFirstOutWhenFull, false, false,
     [](const LevelSetup&) -> std::unique_ptr<Subject> {
       return std::make_unique<DeviceSubject>(DeviceBackend::kHost, 2 * kMiB, kMiB);
     }},
    // Each version takes whole 2 MiB pieces: 32 MiB hold every case's versions.
    {"L1", kL1, features(true, true, false, false), Eviction::kKeepsNewest, false, false,
     [](const LevelSetup& setup) -> std::unique_ptr<Subject> {
       return std::make_unique<Plain>(std::make_unique<MemoryLevel>(kConformanceStore, 0, 32 * kMiB, setup.keep));
     }},
    {"L2", kL2, features(false, true, false, false), Eviction::kKeepsNewest, true, false,
     [](const LevelSetup& setup) -> std::unique_ptr<Subject> {
       auto level = std::make_unique<DirectoryLevel>(kL2, setup.root + "/l2", kConformanceStore, 0, 0600, setup.keep, setup.env);
       level->prepare();
       return std::make_unique<Plain>(std::move(level));
     }},
    // local.durable = false: nothing synced, removed versions' files reused.
    {"L2_scratch", kL2, features(false, true, false, false), Eviction::kKeepsNewest, true, false,
     [](const LevelSetup& setup) -> std::unique_ptr<Subject> {
       auto level = std::make_unique<DirectoryLevel>(kL2, setup.root + "/l2", kConformanceStore, 0, 0600, setup.keep, setup.env);
       level->set_scratch();
       level->prepare();
       return std::make_unique<Plain>(std::move(level));
     },
     false},
    // Two ranks on two nodes: rank 1 keeps rank 0's copies.
    {"L3_partner_2ranks", kL3, features(false, false, false, false), Eviction::kKeepsNewestAfterProtect, true, false,
     [](const LevelSetup& setup) -> std::unique_ptr<Subject> { return std::make_unique<PartnerSubject>(setup, 2, 1, 1); }},
    // Four ranks, two per node: rank 2 (node 1) keeps the copies of a rank of node 0.
    {"L3_partner_4ranks", kL3, features(false, false, false, false), Eviction::kKeepsNewestAfterProtect, true, false,
     [](const LevelSetup& setup) -> std::unique_ptr<Subject> { return std::make_unique<PartnerSubject>(setup, 4, 2, 2); }},
    {"L4", kL4, features(false, false, false, false), Eviction::kKeepsNewest, true, false,
     [](const LevelSetup& setup) -> std::unique_ptr<Subject> {
       auto level = std::make_unique<DirectoryLevel>(kL4, setup.root + "/l4", kConformanceStore, 0, 0600, setup.keep, setup.env);
       level->prepare();
       return std::make_unique<Plain>(std::move(level));
     }},
};

// L0 on the fake driver: its VMM granularity is 2 MiB, so 4 MiB is two chunks.
const LevelKind kFakeDriverLevels[] = {
    {"L0_cuda", kL0, features(true, true, false, true), Eviction::kFirstInFirstOutWhenFull, false, true,
     [](const LevelSetup&) -> std::unique_ptr<Subject> {
       return std::make_unique<DeviceSubject>(DeviceBackend::kCuda, 4 * kMiB, 2 * kMiB);
     }},
};

// ------------------------------------------------------------- helpers

std::vector<std::byte> read_back(Level& level, int version) { return read_whole(*level.open(version)); }

// Empty when every version `level` lists verifies (header, index, every chunk).
std::string first_unverified(Level& level) {
  for (int version : level.versions()) {
    try {
      const std::unique_ptr<ReadableFile> file = level.open(version);
      format::verify_chunks(*file, format::read_container(*file), [](std::uint64_t, std::uint64_t) {});
    } catch (const Error& error) {
      return "version " + std::to_string(version) + ": " + error.what();
    }
  }
  return {};
}

// Temporaries left in a directory level's directory (none for the others).
std::vector<std::string> temporaries(Level& level, bool directory) {
  std::vector<std::string> found;
  if (!directory) return found;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(level.where(), ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) found.push_back(name);
  }
  return found;
}

// ------------------------------------------------------------- the suite

class LevelConformanceTest : public ::testing::TestWithParam<LevelKind> {
 protected:
  void SetUp() override {
    if (GetParam().needs_fake_driver) {
#ifdef RESURGO_HAVE_CUDA_HEADERS
      if (!gpu::fake().control) GTEST_SKIP() << gpu::fake().why_not;
      ASSERT_EQ(gpu::start_fake_turn(context_), "");
#else
      GTEST_SKIP() << "built without the CUDA headers: the fake CUDA driver is not built";
#endif
    }
  }

  void TearDown() override {
    subject_.reset();
#ifdef RESURGO_HAVE_CUDA_HEADERS
    if (context_ != nullptr) {
      EXPECT_EQ(gpu::finish_fake_turn(context_), "");
    }
#endif
  }

  const LevelKind& kind() const { return GetParam(); }
  Subject& open(int keep = 0) {
    subject_.reset();
    subject_ = kind().make(LevelSetup{dir.path(), env, keep});
    return *subject_;
  }
  Level& level() { return subject_->level(); }
  void subject_put(int version) { subject_->put(version, containers); }
  int owner() const { return subject_->owner(); }
  // What the level must hold for `version` put there.
  const std::vector<std::byte>& expected(int version, int base = -1) { return containers.bytes(version, owner(), base); }

  TempDir dir;
  std::shared_ptr<FaultEnv> env = std::make_shared<FaultEnv>();
  Containers containers;

 private:
  std::unique_ptr<Subject> subject_;
#ifdef RESURGO_HAVE_CUDA_HEADERS
  CUcontext context_ = nullptr;
#endif
};

TEST_P(LevelConformanceTest, NumberIsTheLevelsNamedConstant) {
  open();
  EXPECT_EQ(level().number(), kind().number);
  EXPECT_EQ(level_numbers({&level()}), std::vector<int>{kind().number});
  EXPECT_FALSE(level().where().empty()) << "messages name where the level is";
}

TEST_P(LevelConformanceTest, FeaturesSayWhatTheLevelIs) {
  open();
  const Level::Features have = level().features();
  const Level::Features& want = kind().features;
  EXPECT_EQ(have.is_volatile, want.is_volatile);
  EXPECT_EQ(have.node_local, want.node_local);
  EXPECT_EQ(have.collective, want.collective);
  EXPECT_EQ(have.device, want.device);
}

TEST_P(LevelConformanceTest, CommittedVersionsReadBackByteForByteInAscendingOrder) {
  open();
  EXPECT_EQ(level().versions(), std::vector<int>{}) << "a fresh level holds nothing";
  for (int version : {4, 1, 3}) subject_put(version);
  EXPECT_EQ(level().versions(), (std::vector<int>{1, 3, 4}));
  for (int version : {1, 3, 4}) {
    EXPECT_TRUE(level().holds(version)) << version;
    EXPECT_TRUE(read_back(level(), version) == expected(version)) << "version " << version << " differs";
  }
  EXPECT_FALSE(level().holds(2));
  EXPECT_THROW(level().open(2), NotFoundError);
  EXPECT_EQ(first_unverified(level()), "");
  // What the versions hold is the level's, not the writer's: a reader reads
  // a version in any order and any piece.
  const std::unique_ptr<ReadableFile> file = level().open(3);
  const std::vector<std::byte>& want = expected(3);
  ASSERT_EQ(file->size(), want.size());
  std::vector<std::byte> tail(1000);
  file->read_at(want.size() - tail.size(), tail.data(), tail.size());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), want.end() - static_cast<std::ptrdiff_t>(tail.size())));
  EXPECT_ANY_THROW(file->read_at(want.size() - 1, tail.data(), 2)) << "a read past the end must fail";
}

TEST_P(LevelConformanceTest, AVersionIsInvisibleWhileItsWriteRunsAndWhenTheWriteThrows) {
  open();
  subject_put(1);
  const std::vector<std::byte>& partial = containers.bytes(2, owner());
  bool checked_while_writing = false;
  try {
    level().commit(2, [&](WritableFile& file) {
      Containers::append_in_pieces(file, partial, partial.size() / 2);
      // Half written: no reader may see the version yet.
      EXPECT_FALSE(level().holds(2));
      EXPECT_EQ(level().versions(), std::vector<int>{1});
      checked_while_writing = true;
      throw StorageError("the encoder failed");
    });
    ADD_FAILURE() << "a commit whose write threw succeeded";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("the encoder failed"), std::string::npos)
        << "the write's own error must reach the caller: " << error.what();
  }
  EXPECT_TRUE(checked_while_writing);
  EXPECT_FALSE(level().holds(2));
  EXPECT_THROW(level().open(2), NotFoundError);
  EXPECT_EQ(level().versions(), std::vector<int>{1});
  EXPECT_TRUE(read_back(level(), 1) == expected(1)) << "the failed commit touched version 1";
  EXPECT_EQ(temporaries(level(), kind().directory), std::vector<std::string>{});
  // Nothing of the failed write stays in the way of the version.
  level().commit(2, containers.writer(2, owner()));
  EXPECT_TRUE(read_back(level(), 2) == expected(2));
  EXPECT_EQ(level().versions(), (std::vector<int>{1, 2}));
}

TEST_P(LevelConformanceTest, CommitCopyCopiesAVersionOfAnotherLevelExactly) {
  open();
  DirectoryLevel source(kL2, dir.path() + "/source", kConformanceStore, owner(), 0600, 0, Env::posix());
  source.prepare();
  source.commit(5, containers.writer(5, owner()));
  level().commit_copy(5, *source.open(5));
  EXPECT_EQ(level().versions(), std::vector<int>{5});
  EXPECT_TRUE(read_back(level(), 5) == expected(5));
  EXPECT_EQ(first_unverified(level()), "");
}

TEST_P(LevelConformanceTest, CommitCopyRefusesADamagedSourceNamingTheChunkAndCommitsNothing) {
  open();
  subject_put(1);
  DirectoryLevel source(kL2, dir.path() + "/source", kConformanceStore, owner(), 0600, 0, Env::posix());
  source.prepare();
  source.commit(5, containers.writer(5, owner()));
  // Chunk 2 (the field's third) damaged in the middle of its stored bytes.
  const std::vector<std::byte>& good = expected(5);
  flip_bit(source.path(5), Containers::chunk_data_offset(good, 2) + kConformanceChunk / 2, 3);
  try {
    level().commit_copy(5, *source.open(5));
    ADD_FAILURE() << "a damaged source was copied";
  } catch (const CorruptionError& error) {
    const std::string message = error.what();
    const std::string chunk = "chunk 2 (byte " + std::to_string(Containers::chunk_region_offset(good, 2)) +
                              " of region 'field')";
    EXPECT_NE(message.find(chunk), std::string::npos) << message;
    EXPECT_NE(message.find(source.path(5)), std::string::npos) << message;
  }
  EXPECT_FALSE(level().holds(5));
  EXPECT_EQ(level().versions(), std::vector<int>{1});
  EXPECT_EQ(temporaries(level(), kind().directory), std::vector<std::string>{});
  EXPECT_TRUE(read_back(level(), 1) == expected(1));
}

// A file of another version renamed in place passes every checksum: the
// identity in its header is what tells.
TEST_P(LevelConformanceTest, CommitCopyRefusesASourceHoldingAnotherVersion) {
  open();
  DirectoryLevel source(kL2, dir.path() + "/source", kConformanceStore, owner(), 0600, 0, Env::posix());
  source.prepare();
  source.commit(5, containers.writer(6, owner()));  // version 6's container under version 5's name
  try {
    level().commit_copy(5, *source.open(5));
    ADD_FAILURE() << "version 6's file was copied as version 5";
  } catch (const CorruptionError& error) {
    EXPECT_NE(std::string(error.what()).find(source.path(5)), std::string::npos) << error.what();
  }
  EXPECT_FALSE(level().holds(5));
  EXPECT_EQ(level().versions(), std::vector<int>{});
}

// What restore and the Scheduler's copies meet: readers list and read the
// level while a writer commits and removes other versions. Every version
// listed is complete; one removed meanwhile is not found, never half there.
TEST_P(LevelConformanceTest, EveryListedVersionReadsWholeWhileOthersAreCommittedAndRemoved) {
  open();
  constexpr int kVersions = 12;
  for (int version = 1; version <= kVersions; ++version) containers.bytes(version, owner());  // made before the threads
  std::atomic<bool> writing{true};
  std::atomic<int> reads{0};
  std::mutex mutex;
  std::string first_problem;
  std::thread reader([&] {
    // Reads until the writer is done, and once more after.
    for (bool last = false; !last;) {
      last = !writing.load();
      for (int version : level().versions()) {
        std::string problem;
        try {
          if (read_back(level(), version) != containers.bytes(version, owner())) problem = "bytes differ";
          reads.fetch_add(1);
        } catch (const NotFoundError&) {
          // Removed between the listing and the read.
        } catch (const Error& error) {
          problem = error.what();
        }
        if (!problem.empty()) {
          std::lock_guard lock(mutex);
          if (first_problem.empty()) first_problem = "version " + std::to_string(version) + ": " + problem;
        }
      }
    }
  });
  for (int version = 1; version <= kVersions; ++version) {
    level().commit(version, containers.writer(version, owner()));
    if (version > 3) level().remove(version - 3);
  }
  writing = false;
  reader.join();
  EXPECT_EQ(first_problem, "");
  EXPECT_GE(reads.load(), 3) << "the reader read nothing: the case proves nothing";
  EXPECT_EQ(level().versions(), (std::vector<int>{kVersions - 2, kVersions - 1, kVersions}));
}

TEST_P(LevelConformanceTest, QuarantineAndRemoveMakeAVersionInvisibleAndLeaveTheOthers) {
  open();
  for (int version : {1, 2, 3}) subject_put(version);
  level().quarantine(2);
  EXPECT_FALSE(level().holds(2));
  EXPECT_THROW(level().open(2), NotFoundError);
  EXPECT_EQ(level().versions(), (std::vector<int>{1, 3}));
  level().remove(3);
  EXPECT_FALSE(level().holds(3));
  EXPECT_EQ(level().versions(), std::vector<int>{1});
  level().remove(3);  // removing what is gone already is no error (discard after eviction)
  EXPECT_TRUE(read_back(level(), 1) == expected(1));
  // The numbers are free again.
  level().commit(3, containers.writer(3, owner()));
  EXPECT_TRUE(read_back(level(), 3) == expected(3));
  EXPECT_EQ(first_unverified(level()), "");
}

TEST_P(LevelConformanceTest, EvictionFollowsTheLevelsContract) {
  if (kind().eviction == Eviction::kFirstInFirstOutWhenFull) {
    open();
    for (int version = 1; version <= 3; ++version) level().commit(version, containers.writer(version, owner()));
    EXPECT_EQ(level().evict([](int) { return false; }), std::vector<int>{}) << "L0 evicts only for space";
    EXPECT_EQ(level().versions(), (std::vector<int>{1, 2, 3}));
    // Committing until the first version no longer fits: the oldest goes
    // first, the versions held are always the newest ones, and each reads back.
    int version = 3;
    while (level().holds(1) && version < 200) {
      ++version;
      level().commit(version, containers.writer(version, owner()));
      const std::vector<int> held = level().versions();
      ASSERT_FALSE(held.empty());
      EXPECT_EQ(held.back(), version) << "the newest version was dropped";
      EXPECT_EQ(static_cast<int>(held.size()), version - held.front() + 1)
          << "a version was dropped before an older one (not first in, first out)";
    }
    EXPECT_FALSE(level().holds(1)) << "200 versions fit in L0: the case proves nothing";
    for (int held : level().versions()) {
      EXPECT_TRUE(read_back(level(), held) == containers.bytes(held, owner())) << "version " << held;
    }
    return;
  }
  // keep 2: versions 1 to 6, 6 a delta on 3, 4 pinned (a later level still
  // copies it). The bases are read from the level's own copies.
  open(2);
  for (int version = 1; version <= 5; ++version) level().commit(version, containers.writer(version, owner()));
  level().commit(6, containers.writer(6, owner(), 3));
  EXPECT_EQ(level().evict([](int version) { return version == 4; }), (std::vector<int>{1, 2}));
  EXPECT_EQ(level().versions(), (std::vector<int>{3, 4, 5, 6}));
  // Unpinned, 4 goes; 3 stays while 6 needs it.
  EXPECT_EQ(level().evict([](int) { return false; }), std::vector<int>{4});
  EXPECT_EQ(level().versions(), (std::vector<int>{3, 5, 6}));
  EXPECT_TRUE(read_back(level(), 6) == expected(6, 3));
  EXPECT_EQ(first_unverified(level()), "");
  if (kind().eviction == Eviction::kKeepsNewestAfterProtect) {
    // protect() evicts by itself: after two more versions, the newest two.
    subject_put(7);
    subject_put(8);
    EXPECT_EQ(level().versions(), (std::vector<int>{7, 8}));
  } else {
    EXPECT_EQ(level().evict([](int) { return false; }), std::vector<int>{}) << "nothing beyond keep is left";
  }
}

// evict() removes newest first, so that an eviction stopped part way (a
// crash, an I/O error) leaves no delta without its base. A removal that
// fails stops it where a crash would.
TEST_P(LevelConformanceTest, AnEvictionStoppedPartWayLeavesNoDeltaWithoutItsBase) {
  if (!kind().directory) GTEST_SKIP() << kind().name << " is no directory level: no file system under it to fail";
  open(2);
  // 1 full, 2 a delta on 1, 3 a delta on 2, then 4, 5, 6 full: keep 2
  // evicts 1 to 4.
  level().commit(1, containers.writer(1, owner()));
  level().commit(2, containers.writer(2, owner(), 1));
  level().commit(3, containers.writer(3, owner(), 2));
  for (int version = 4; version <= 6; ++version) level().commit(version, containers.writer(version, owner()));
  // A scratch level renames its first removals into spares: the removal
  // that fails is then a later one.
  env->inject({FaultEnv::Op::kRemove, EIO, level().where(), 1, 1, false});  // the second unlink fails
  EXPECT_THROW(level().evict([](int) { return false; }), StorageError);
  env->clear();
  const std::vector<int> left = level().versions();
  std::vector<int> left_of_evicted;
  std::copy_if(left.begin(), left.end(), std::back_inserter(left_of_evicted), [](int version) { return version <= 4; });
  std::vector<int> oldest(left_of_evicted.size());
  std::iota(oldest.begin(), oldest.end(), 1);
  EXPECT_EQ(left_of_evicted, oldest) << "not removed newest first";
  EXPECT_FALSE(left_of_evicted.empty()) << "the eviction did not stop part way";
  EXPECT_TRUE(std::find(left.begin(), left.end(), 5) != left.end() && std::find(left.begin(), left.end(), 6) != left.end());
  for (int version : left) {
    const std::optional<int> base = level().base_of(version);
    if (base) {
      EXPECT_TRUE(level().holds(*base)) << "version " << version << " lost its base " << *base;
    }
  }
  EXPECT_EQ(level().evict([](int) { return false; }), oldest);
  EXPECT_EQ(level().versions(), (std::vector<int>{5, 6}));
}

// Each step of DirectoryLevel::commit through the Env, failed in turn.
TEST_P(LevelConformanceTest, IoFaultAtAnyStepOfACommitFailsOnlyThatCommit) {
  if (!kind().directory) GTEST_SKIP() << kind().name << " is no directory level: no file system under it";
  struct Case {
    const char* name;
    FaultEnv::Op op;
    int error_number;
    bool partial;
  };
  const Case cases[] = {{"EACCES on create", FaultEnv::Op::kCreate, EACCES, false},
                        {"ENOSPC on append", FaultEnv::Op::kAppend, ENOSPC, false},
                        {"ENOSPC after half an append", FaultEnv::Op::kAppend, ENOSPC, true},
                        {"EIO on append", FaultEnv::Op::kAppend, EIO, false},
                        {"EIO on sync", FaultEnv::Op::kSync, EIO, false},
                        {"EIO on close", FaultEnv::Op::kClose, EIO, false},
                        {"EIO on rename", FaultEnv::Op::kRename, EIO, false},
                        {"EIO on directory sync", FaultEnv::Op::kSyncDir, EIO, false}};
  open();
  subject_put(1);
  subject_put(2);
  int version = 2;
  for (const Case& c : cases) {
    const bool syncing = c.op == FaultEnv::Op::kSync || c.op == FaultEnv::Op::kSyncDir;
    if (syncing && !kind().syncs) continue;  // a step the level does not take
    ++version;
    // The level's own directory only (for L3, the inspected rank's partner
    // directory: the other ranks' protections go on).
    const int fired = env->failures();
    env->inject({c.op, c.error_number, level().where(), 0, 1, c.partial});
    std::string message;
    try {
      subject_put(version);
    } catch (const StorageError& error) {
      message = error.what();
    }
    EXPECT_EQ(env->failures(), fired + 1) << c.name << ": the fault did not fire";
    env->clear();
    EXPECT_FALSE(message.empty()) << c.name << ": the commit of version " << version << " succeeded";
    EXPECT_NE(message.find(level().where()), std::string::npos) << c.name << ": " << message;
    EXPECT_FALSE(level().holds(version)) << c.name << ": a failed version is visible";
    EXPECT_EQ(level().versions(), (std::vector<int>{1, 2})) << c.name;
    EXPECT_TRUE(read_back(level(), 1) == expected(1)) << c.name;
    EXPECT_TRUE(read_back(level(), 2) == expected(2)) << c.name;
    EXPECT_EQ(temporaries(level(), true), std::vector<std::string>{}) << c.name;
  }
  // Once the fault is gone, the level takes the next version.
  subject_put(++version);
  EXPECT_EQ(level().versions(), (std::vector<int>{1, 2, version}));
  EXPECT_TRUE(read_back(level(), version) == expected(version));
  EXPECT_EQ(first_unverified(level()), "");
}

// commit_group (group commit): the versions a level's queue holds at once,
// written or copied, each committed as commit() would.
TEST_P(LevelConformanceTest, CommitGroupCommitsEveryVersionAndEachReadsBackByteForByte) {
  open();
  subject_put(1);
  DirectoryLevel source(kL2, dir.path() + "/source", kConformanceStore, owner(), 0600, 0, Env::posix());
  source.prepare();
  source.commit(3, containers.writer(3, owner()));
  const std::unique_ptr<ReadableFile> copied = source.open(3);
  const std::vector<std::exception_ptr> failures = level().commit_group(
      {{2, containers.writer(2, owner()), nullptr}, {3, {}, copied.get()}, {4, containers.writer(4, owner()), nullptr}});
  ASSERT_EQ(failures.size(), 3u);
  for (const std::exception_ptr& failure : failures) EXPECT_FALSE(failure) << "a version of the group failed";
  EXPECT_EQ(level().versions(), (std::vector<int>{1, 2, 3, 4}));
  for (int version : {1, 2, 3, 4}) {
    EXPECT_TRUE(read_back(level(), version) == expected(version)) << "version " << version << " differs";
  }
  EXPECT_EQ(temporaries(level(), kind().directory), std::vector<std::string>{});
  EXPECT_EQ(first_unverified(level()), "");
}

TEST_P(LevelConformanceTest, CommitGroupFailsOnlyTheVersionsAFailureTouches) {
  open();
  subject_put(1);
  const auto failing_write = [](WritableFile&) { throw StorageError("the encoder failed"); };
  const std::vector<std::exception_ptr> failures = level().commit_group(
      {{2, containers.writer(2, owner()), nullptr}, {3, failing_write, nullptr}, {4, containers.writer(4, owner()), nullptr}});
  ASSERT_EQ(failures.size(), 3u);
  EXPECT_FALSE(failures[0]);
  EXPECT_FALSE(failures[2]);
  ASSERT_TRUE(failures[1]) << "the failed write's version was committed";
  EXPECT_THROW(std::rethrow_exception(failures[1]), StorageError);
  EXPECT_EQ(level().versions(), (std::vector<int>{1, 2, 4}));
  for (int version : {1, 2, 4}) EXPECT_TRUE(read_back(level(), version) == expected(version)) << version;
  EXPECT_EQ(temporaries(level(), kind().directory), std::vector<std::string>{});
  if (!kind().directory) return;
  // An I/O fault in one file of a group (its fdatasync runs beside the
  // others') fails that version only, naming its file.
  // (A level that syncs nothing fails the file's write instead.)
  const FaultEnv::Op file_fault = kind().syncs ? FaultEnv::Op::kSync : FaultEnv::Op::kAppend;
  env->inject({file_fault, EIO, format::container_file_name(6, owner()), 0, 1, false});
  const std::vector<std::exception_ptr> faulted = level().commit_group(
      {{5, containers.writer(5, owner()), nullptr}, {6, containers.writer(6, owner()), nullptr},
       {7, containers.writer(7, owner()), nullptr}});
  env->clear();
  ASSERT_EQ(faulted.size(), 3u);
  EXPECT_FALSE(faulted[0]);
  EXPECT_FALSE(faulted[2]);
  ASSERT_TRUE(faulted[1]) << "the version whose sync failed was committed";
  try {
    std::rethrow_exception(faulted[1]);
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find(format::container_file_name(6, owner())), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(level().versions(), (std::vector<int>{1, 2, 4, 5, 7}));
  for (int version : {5, 7}) EXPECT_TRUE(read_back(level(), version) == expected(version)) << version;
  EXPECT_EQ(temporaries(level(), true), std::vector<std::string>{});
}

std::string level_name(const ::testing::TestParamInfo<LevelKind>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(EveryLevel, LevelConformanceTest, ::testing::ValuesIn(kLevels), level_name);
INSTANTIATE_TEST_SUITE_P(FakeDriver, LevelConformanceTest, ::testing::ValuesIn(kFakeDriverLevels), level_name);

}  // namespace
}  // namespace resurgo
