// Partner memory (src/job/partner_memory.h; issue 31 part 2): versions kept
// only in memory, copied to the node's shared memory and to the partner's
// node, read back by the next job, a lost node's from its partner's memory;
// a job of threads (thread_job.h) stands in for the ranks, one per node.
// A "kill" drops the objects without close(), as a dead process would.
#include <filesystem>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "base/log.h"
#include "base/thread_pool.h"
#include "format/container.h"
#include "format/version_writer.h"
#include "io/bytes_file.h"
#include "job/partner_memory.h"
#include "resurgo/env.hpp"
#include "test_util.h"
#include "thread_job.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using testing::ThreadComm;
using testing::ThreadJob;

constexpr std::uint64_t kCapacity = 64u << 20;

std::vector<std::byte> state_of(int rank, int version) {
  std::vector<std::byte> data(static_cast<std::size_t>(100000 + rank * 3000));
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>((i * 7 + rank * 13 + version) & 0xff);
  return data;
}

// `rank`'s `version` as the store writes it into L1.
void commit_version(MemoryLevel& memory, int rank, int version) {
  const std::vector<std::byte> data = state_of(rank, version);
  memory.commit(version, [&](WritableFile& file) {
    format::Header header;
    header.store = "job";
    header.version = version;
    header.rank = static_cast<std::uint32_t>(rank);
    header.chunk_size = 16u << 10;
    header.regions.push_back({0, "state", format::RegionKind::kHost, data.size(), "uint8", {}});
    Config::Pipeline pipeline;
    pipeline.chunk_size = header.chunk_size;
    ThreadPool pool(0);
    write_version(file, header, {data.data()}, pipeline, pool);
  });
}

class PartnerMemoryTest : public ::testing::Test {
 protected:
  ~PartnerMemoryTest() override {
    for (int rank = 0; rank < 4; ++rank) fs::remove_all(root(rank));
  }
  std::string local_dir(int rank) const { return dir.path() + "/node" + std::to_string(rank) + "/job"; }
  std::string root(int rank) const { return PartnerMemory::directory_for(local_dir(rank)); }

  // One rank's store side: its L1 and its partner memory (one rank per node).
  struct Rank {
    Rank(const PartnerMemoryTest& test, int rank, int ranks, int keep, const Logger& log)
        : memory("job", rank, kCapacity, keep),
          partner(PartnerTopology(nodes(ranks), 2), rank, test.local_dir(rank), memory, keep, 5.0, Env::posix(), log) {}
    static std::vector<int> nodes(int ranks) {
      std::vector<int> result(static_cast<std::size_t>(ranks));
      for (int rank = 0; rank < ranks; ++rank) result[static_cast<std::size_t>(rank)] = rank;
      return result;
    }
    MemoryLevel memory;
    PartnerMemory partner;
  };

  // A job of `ranks` that keeps versions 1..`versions` and is killed.
  void run_and_kill(int ranks, int versions, int keep) {
    ThreadJob job(ranks);
    testing::run_ranks(job, [&](int rank) {
      ThreadComm comm(job, rank);
      Rank side(*this, rank, ranks, keep, log);
      for (int version = 1; version <= versions; ++version) {
        commit_version(side.memory, rank, version);
        EXPECT_TRUE(side.partner.replicate(version, true, comm)) << rank;
      }
    });
  }

  // The next job's open on every rank: what each recovered, and whether its
  // L1 then holds `rank`'s bytes of that version.
  std::vector<PartnerMemory::Recovery> recover(int ranks, int keep, bool close = true) {
    std::vector<PartnerMemory::Recovery> recoveries(static_cast<std::size_t>(ranks));
    ThreadJob job(ranks);
    testing::run_ranks(job, [&](int rank) {
      ThreadComm comm(job, rank);
      Rank side(*this, rank, ranks, keep, log);
      const PartnerMemory::Recovery recovery = side.partner.recover(comm);
      if (recovery.version >= 0) {
        BytesFile copy(read_whole(*side.memory.open(recovery.version)), "recovered");
        const format::Container container = format::read_container(copy);
        std::vector<std::byte> state(container.header.regions[0].bytes);
        std::vector<std::byte> scratch;
        for (const format::ChunkRecord& chunk : container.chunks) {
          format::read_chunk(copy, container, chunk, state.data() + chunk.offset, scratch);
        }
        EXPECT_EQ(state, state_of(rank, recovery.version)) << rank;
      } else {
        EXPECT_TRUE(side.memory.versions().empty()) << rank;
      }
      if (close) side.partner.close();
      recoveries[static_cast<std::size_t>(rank)] = recovery;
    });
    return recoveries;
  }

  void lose_node(int node) {
    ASSERT_TRUE(fs::exists(root(node) + "/own")) << root(node);
    fs::remove_all(root(node));
  }

  TempDir dir;
  Logger log{"job", LogLevel::kOff};
};

TEST_F(PartnerMemoryTest, ALostNodeIsRestoredFromItsPartnersMemory) {
  run_and_kill(2, 2, 1);
  // memory.keep = 1: only the newest version is left, on both nodes.
  EXPECT_TRUE(fs::exists(root(0) + "/own/v0000000002.r000000.rsg"));
  EXPECT_FALSE(fs::exists(root(0) + "/own/v0000000001.r000000.rsg"));
  EXPECT_TRUE(fs::exists(root(0) + "/partner/v0000000002.r000001.rsg"));
  EXPECT_EQ((fs::status(root(0) + "/own/v0000000002.r000000.rsg").permissions() & fs::perms::all),
            fs::perms::owner_read | fs::perms::owner_write);
  lose_node(1);
  const std::vector<PartnerMemory::Recovery> recovered = recover(2, 1);
  EXPECT_EQ(recovered[0].version, 2);
  EXPECT_EQ(recovered[1].version, 2);
  EXPECT_TRUE(recovered[0].notes.empty());
  ASSERT_EQ(recovered[1].notes.size(), 1u);
  EXPECT_NE(recovered[1].notes[0].find("version 2 of rank 1 restored from the memory of its partner rank 0"),
            std::string::npos)
      << recovered[1].notes[0];
  // Closed: no shared-memory copy, nor directory, is left.
  EXPECT_FALSE(fs::exists(root(0)));
  EXPECT_FALSE(fs::exists(root(1)));
}

TEST_F(PartnerMemoryTest, ARestoredJobIsProtectedAgainAndCanLoseTheOtherNode) {
  run_and_kill(2, 1, 1);
  lose_node(1);
  EXPECT_EQ(recover(2, 1, false)[1].version, 1);  // killed again: node 1 has its copies back
  lose_node(0);
  const std::vector<PartnerMemory::Recovery> recovered = recover(2, 1);
  EXPECT_EQ(recovered[0].version, 1);
  EXPECT_EQ(recovered[0].notes.size(), 1u);
}

TEST_F(PartnerMemoryTest, BothCopiesLostAreNamedAndKept) {
  run_and_kill(4, 1, 1);
  lose_node(1);
  lose_node(2);  // rank 2 kept rank 1's copy
  const std::vector<PartnerMemory::Recovery> recovered = recover(4, 1);
  for (const PartnerMemory::Recovery& recovery : recovered) {
    EXPECT_EQ(recovery.version, -1);
    EXPECT_EQ(recovery.lost,
              "version 1: rank 1's own copy and the one its partner rank 2 kept are both lost or damaged");
  }
  // Kept, so that the next job refuses as well instead of starting again.
  EXPECT_TRUE(fs::exists(root(0) + "/own/v0000000001.r000000.rsg"));
}

TEST_F(PartnerMemoryTest, ADamagedPartnerCopyIsRefusedForTheVersionBefore) {
  run_and_kill(2, 2, 2);
  lose_node(1);
  const std::string victim = root(0) + "/partner/v0000000002.r000001.rsg";
  {
    std::fstream file(victim, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(victim) / 2);
    file.seekg(middle);
    const char byte = static_cast<char>(file.get());
    file.seekp(middle);
    file.put(static_cast<char>(byte ^ 0x7f));
  }
  const std::vector<PartnerMemory::Recovery> recovered = recover(2, 2);
  EXPECT_EQ(recovered[0].version, 1);
  EXPECT_EQ(recovered[1].version, 1);
  EXPECT_EQ(recovered[1].lost,
            "version 2: rank 1's own copy and the one its partner rank 0 kept are both lost or damaged");
}

TEST_F(PartnerMemoryTest, AVersionARankFailedIsNotComplete) {
  ThreadJob job(2);
  testing::run_ranks(job, [&](int rank) {
    ThreadComm comm(job, rank);
    Rank side(*this, rank, 2, 1, log);
    commit_version(side.memory, rank, 1);
    EXPECT_FALSE(side.partner.replicate(1, rank == 0, comm));
    EXPECT_FALSE(side.partner.complete(1));
    commit_version(side.memory, rank, 2);
    EXPECT_TRUE(side.partner.replicate(2, true, comm));
    EXPECT_EQ(side.partner.complete(), std::vector<int>{2});
    side.partner.close();
  });
}

TEST(PartnerMemoryDirectory, IsTheUsersOwnAndOneNamePerNodeDirectory) {
  const std::string prefix = "/dev/shm/resurgo-" + std::to_string(::geteuid()) + "/memory-";
  EXPECT_EQ(PartnerMemory::directory_for("/scratch/run/node1/job"), prefix + "scratch_run_node1_job");
  EXPECT_NE(PartnerMemory::directory_for("/scratch/run/node1/job"),
            PartnerMemory::directory_for("/scratch/run/node2/job"));
  const std::string deep = "/" + std::string(300, 'a') + "/node1/job";
  const std::string name = fs::path(PartnerMemory::directory_for(deep)).filename().string();
  EXPECT_LT(name.size(), 255u);
  EXPECT_EQ(name.find('/'), std::string::npos);
  EXPECT_NE(PartnerMemory::directory_for(deep), PartnerMemory::directory_for("/b" + deep));
}

}  // namespace
}  // namespace resurgo
