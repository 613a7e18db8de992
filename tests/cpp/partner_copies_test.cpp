// L3 of MPI stores (src/job/partner_copies.h, partner_topology.h): every
// rank's L2 file protected by a partner copy or an XOR set on other nodes,
// rebuilt at restart after a node's L2 directory is lost; a job of threads
// (thread_job.h) stands in for the ranks.
#include <filesystem>
#include <mutex>
#include <numeric>

#include <gtest/gtest.h>

#include "job/partner_topology.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "thread_job.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using testing::ThreadComm;
using testing::ThreadJob;

TEST(PartnerTopology, PartnersAndSetMembersSitOnOtherNodes) {
  const std::vector<int> nodes{0, 0, 1, 1, 2, 2};  // three nodes of two ranks
  const PartnerTopology topology(nodes, 3);
  for (int rank = 0; rank < 6; ++rank) {
    EXPECT_NE(nodes[topology.holder_of(rank)], nodes[rank]) << rank;
    EXPECT_EQ(topology.source_of(topology.holder_of(rank)), rank);
    std::vector<int> set_nodes;
    for (int member : topology.set_of(rank)) set_nodes.push_back(nodes[member]);
    std::sort(set_nodes.begin(), set_nodes.end());
    EXPECT_EQ(set_nodes, (std::vector<int>{0, 1, 2})) << rank;
    EXPECT_EQ(topology.set_of(rank)[topology.index_in_set(rank)], rank);
  }
  EXPECT_EQ(topology.partner_weakness(), "");
  EXPECT_EQ(topology.xor_weakness(), "");
}

TEST(PartnerTopology, SaysWhenProtectionSharesANode) {
  EXPECT_NE(PartnerTopology({0, 0}, 2).partner_weakness().find("on the same node 0"), std::string::npos);
  const std::string xor_weakness = PartnerTopology({0, 0, 1, 1}, 4).xor_weakness();
  EXPECT_NE(xor_weakness.find("set_size larger than the node count"), std::string::npos) << xor_weakness;
}

TEST(PartnerTopology, ALastSetOfOneJoinsTheSetBefore) {
  const PartnerTopology topology({0, 1, 2, 3, 4}, 4);
  EXPECT_EQ(topology.set_of(4).size(), 5u);
  EXPECT_EQ(topology.set_of(0), topology.set_of(4));
}

class PartnerCopiesTest : public ::testing::Test {
 protected:
  // One rank per node: L2 of rank r is <dir>/node<r>; L4 shared, every
  // other version.
  Config config(PartnerScheme scheme) const {
    Config result;
    result.local.path = dir.path() + "/node{node}";
    result.persistent.path = dir.path() + "/l4";
    result.persistent.every = 2;
    result.local.keep = 3;
    result.persistent.keep = 3;
    result.partner.scheme = scheme;
    result.partner.set_size = 4;
    result.pipeline.chunk_size = 64u << 10;
    return result;
  }
  // Rank r's state: (r + 1) * 40000 + 17 ints (uneven sizes: the XOR pads).
  static std::vector<int> state_of(int rank, int version) {
    std::vector<int> state(static_cast<std::size_t>((rank + 1) * 40000 + 17));
    std::iota(state.begin(), state.end(), version * 1000000 + rank * 100000);
    return state;
  }

  void checkpoint_job(PartnerScheme scheme, int ranks, int versions) {
    ThreadJob job(ranks);
    testing::run_ranks(job, [&](int rank) {
      Store store("job", config(scheme), std::make_shared<ThreadComm>(job, rank));
      std::vector<int> state = state_of(rank, 0);
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      for (int version = 1; version <= versions; ++version) {
        const std::vector<int> values = state_of(rank, version);
        std::copy(values.begin(), values.end(), state.begin());  // the protected memory stays where it is
        store.checkpoint(version);
      }
      store.wait(versions, kL3);
      store.close();
    });
  }

  struct Restarted {
    int version = -1;
    bool same = false;
    std::vector<std::string> rebuilt;
  };
  std::vector<Restarted> restart_job(PartnerScheme scheme, int ranks) {
    ThreadJob job(ranks);
    std::vector<Restarted> restarted(static_cast<std::size_t>(ranks));
    testing::run_ranks(job, [&](int rank) {
      Store store("job", config(scheme), std::make_shared<ThreadComm>(job, rank));
      std::vector<int> state(state_of(rank, 0).size(), -1);
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      Restarted& mine = restarted[static_cast<std::size_t>(rank)];
      mine.version = store.restart();
      mine.same = state == state_of(rank, mine.version);
      mine.rebuilt = store.last_restart().rebuilt;
    });
    return restarted;
  }
  void lose_node(int node) { fs::remove_all(dir.path() + "/node" + std::to_string(node)); }
  std::uint64_t bytes_under(const std::string& path) const {
    std::uint64_t bytes = 0;
    for (const auto& entry : fs::directory_iterator(path)) {
      if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') bytes += entry.file_size();
    }
    return bytes;
  }

  TempDir dir;
};

TEST_F(PartnerCopiesTest, APartnerCopyRebuildsALostNode) {
  checkpoint_job(PartnerScheme::kPartner, 4, 3);
  lose_node(2);
  const std::vector<Restarted> restarted = restart_job(PartnerScheme::kPartner, 4);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(restarted[rank].version, 3) << rank;
    EXPECT_TRUE(restarted[rank].same) << rank;
    ASSERT_EQ(restarted[rank].rebuilt.size(), 1u);
    EXPECT_NE(restarted[rank].rebuilt[0].find("version 3 of rank 2: rebuilt into its L2 from the partner copy"),
              std::string::npos)
        << restarted[rank].rebuilt[0];
  }
  EXPECT_TRUE(fs::exists(dir.path() + "/node2/job/v0000000003.r000002.rsg"));
  EXPECT_TRUE(fs::exists(dir.path() + "/node2/job/v0000000003.job"));
}

TEST_F(PartnerCopiesTest, AnXorSetRebuildsAnyOneLostNodeBitForBit) {
  for (int lost = 0; lost < 4; ++lost) {
    for (const auto& entry : fs::directory_iterator(dir.path())) fs::remove_all(entry.path());
    checkpoint_job(PartnerScheme::kXor, 4, 3);
    lose_node(lost);
    const std::vector<Restarted> restarted = restart_job(PartnerScheme::kXor, 4);
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_EQ(restarted[rank].version, 3) << "node " << lost << " lost, rank " << rank;
      EXPECT_TRUE(restarted[rank].same) << "node " << lost << " lost, rank " << rank;
    }
  }
}

TEST_F(PartnerCopiesTest, TwoLostMembersOfASetFallBackToThePersistentLevel) {
  checkpoint_job(PartnerScheme::kXor, 4, 3);  // L4 holds version 2 only
  lose_node(1);
  lose_node(3);
  const std::vector<Restarted> restarted = restart_job(PartnerScheme::kXor, 4);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(restarted[rank].version, 2) << rank;
    EXPECT_TRUE(restarted[rank].same) << rank;
    ASSERT_EQ(restarted[rank].rebuilt.size(), 2u);
    EXPECT_NE(restarted[rank].rebuilt[0].find("a set rebuilds one member: not rebuilt; restart falls back"),
              std::string::npos)
        << restarted[rank].rebuilt[0];
  }
}

TEST_F(PartnerCopiesTest, ARankAndItsPartnerLostTogetherFallBackToThePersistentLevel) {
  checkpoint_job(PartnerScheme::kPartner, 4, 3);
  lose_node(1);
  lose_node(2);  // rank 2 keeps rank 1's copy
  const std::vector<Restarted> restarted = restart_job(PartnerScheme::kPartner, 4);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(restarted[rank].version, 2) << rank;
    EXPECT_TRUE(restarted[rank].same) << rank;
  }
  EXPECT_NE(restarted[0].rebuilt[0].find("version 3 of rank 1: its L2 file is lost, and rank 2"), std::string::npos)
      << restarted[0].rebuilt[0];
}

TEST_F(PartnerCopiesTest, StorageIsTwiceTheFileForPartnerAndAFractionForXor) {
  checkpoint_job(PartnerScheme::kPartner, 4, 1);
  EXPECT_EQ(fs::file_size(dir.path() + "/node1/job/partner/v0000000001.r000000.rsg"),
            fs::file_size(dir.path() + "/node0/job/v0000000001.r000000.rsg"));
  for (const auto& entry : fs::directory_iterator(dir.path())) fs::remove_all(entry.path());
  checkpoint_job(PartnerScheme::kXor, 4, 1);
  // Rank 1's parity: a third of the largest file of its set of 4, plus its
  // container's header, index and footer.
  const std::uint64_t largest = fs::file_size(dir.path() + "/node3/job/v0000000001.r000003.rsg");
  const std::uint64_t parity = fs::file_size(dir.path() + "/node1/job/xor/v0000000001.r000001.rsg");
  EXPECT_GE(parity, largest / 3);
  EXPECT_LE(parity, largest / 3 + 4096);
}

TEST_F(PartnerCopiesTest, WaitAtL3ReportsEveryRanksProtection) {
  ThreadJob job(2);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", config(PartnerScheme::kPartner), std::make_shared<ThreadComm>(job, rank));
    std::vector<int> state = state_of(rank, 1);
    store.protect(0, state.data(), state.size() * sizeof(int), "state");
    store.checkpoint(1);
    store.wait(1, kL3);
    const std::vector<VersionStats> stats = store.stats();
    ASSERT_EQ(stats.size(), 1u);
    const LevelStats* level = stats[0].at(kL3);
    ASSERT_NE(level, nullptr);
    EXPECT_GT(level->seconds_to_level, 0);
    EXPECT_EQ(level->stored_bytes, fs::file_size(dir.path() + "/node" + std::to_string(1 - rank) +
                                                 "/job/v0000000001.r00000" + std::to_string(1 - rank) + ".rsg"));
  });
}

}  // namespace
}  // namespace resurgo
