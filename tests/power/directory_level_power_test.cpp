// DirectoryLevel's commit protocol against power loss, state by state: what
// it reports committed is on disk in every state POSIX allows.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "power_loss_env.h"
#include "format/file_names.h"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo::power {
namespace {

namespace fs = std::filesystem;

// A directory's own entry lives in its parent: syncing the directory does
// not make it durable. prepare() used to create <root>/<store> without
// syncing the parents, and a power loss could take the directory away with
// every version committed in it (the campaign's first defect).
TEST(DirectoryLevelPowerLoss, CommittedVersionSurvivesInEveryStateOfAFreshDirectory) {
  const auto env = std::make_shared<PowerLossEnv>("/disk");
  DirectoryLevel tier(2, "/disk/checkpoints/l2", "store", 0, 0600, 0, env);
  tier.prepare();
  const std::string bytes = "a committed version";
  tier.commit(1, [&](WritableFile& file) { file.append(bytes.data(), bytes.size()); });
  TempDir temp;
  std::mt19937_64 random(11);
  for (int draw = 0; draw < 64; ++draw) {
    const std::string state = temp.path() + "/" + std::to_string(draw);
    fs::create_directories(state);
    env->materialise(env->operations(), Semantics::kPosix, random, state);
    const std::string file = state + "/checkpoints/l2/store/" + format::container_file_name(1, 0);
    ASSERT_TRUE(fs::exists(file)) << "state " << draw << " lost " << file;
    const std::vector<std::byte> read = read_file(file);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(read.data()), read.size()), bytes);
  }
}

}  // namespace
}  // namespace resurgo::power
