// The model of PowerLossEnv: what each semantics keeps, drops and tears.
// Each test draws many states from a fixed seed and checks what every state
// holds, or that some state shows a possible outcome.
#include "power_loss_env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <string>

#include "resurgo/errors.hpp"
#include "test_util.h"

namespace resurgo::power {
namespace {

namespace fs = std::filesystem;

constexpr char kRoot[] = "/root";
constexpr int kDraws = 48;

void append(WritableFile& file, const std::string& text) { file.append(text.data(), text.size()); }

// What one materialised state holds: file path (relative) -> contents.
using State = std::map<std::string, std::string>;

State read_state(const std::string& dir) {
  State state;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::vector<std::byte> bytes = read_file(entry.path().string());
    state[fs::relative(entry.path(), dir).string()] =
        std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return state;
}

// Materialises `kDraws` states of `env` at `cut` and returns them.
std::vector<State> draw_states(const PowerLossEnv& env, std::size_t cut, Semantics semantics) {
  TempDir temp;
  std::mt19937_64 random(7);
  std::vector<State> states;
  for (int i = 0; i < kDraws; ++i) {
    const std::string dir = temp.path() + "/" + std::to_string(i);
    fs::create_directories(dir);
    env.materialise(cut, semantics, random, dir);
    states.push_back(read_state(dir));
  }
  return states;
}

bool any_of(const std::vector<State>& states, const std::function<bool(const State&)>& predicate) {
  return std::any_of(states.begin(), states.end(), predicate);
}

bool all_of(const std::vector<State>& states, const std::function<bool(const State&)>& predicate) {
  return std::all_of(states.begin(), states.end(), predicate);
}

// A directory made, a file written under a temporary name, synced, renamed,
// and the directory synced: the commit protocol of DirectoryLevel.
struct Commit {
  PowerLossEnv env{kRoot};
  std::size_t after_sync = 0;
  std::size_t after_rename = 0;
  std::size_t after_sync_dir = 0;
  Commit() {
    env.create_dirs("/root/d");
    env.sync_dir("/root");
    std::unique_ptr<WritableFile> file = env.create("/root/d/.tmp", 0600);
    append(*file, std::string(1500, 'a'));
    file->sync();
    after_sync = env.operations();
    env.rename("/root/d/.tmp", "/root/d/final");
    after_rename = env.operations();
    env.sync_dir("/root/d");
    after_sync_dir = env.operations();
  }
};

TEST(PowerLossEnv, LiveViewSeesEveryOperation) {
  Commit commit;
  EXPECT_TRUE(commit.env.exists("/root/d/final"));
  EXPECT_FALSE(commit.env.exists("/root/d/.tmp"));
  EXPECT_EQ(commit.env.list_dir("/root/d"), std::vector<std::string>{"final"});
  EXPECT_EQ(commit.env.open("/root/d/final")->size(), 1500u);
  EXPECT_THROW(commit.env.open("/root/d/.tmp"), NotFoundError);
  EXPECT_THROW(commit.env.create("/root/missing/x", 0600), StorageError);
}

TEST(PowerLossEnv, SyncedDirectoryEntryAndDataSurviveEveryState) {
  Commit commit;
  for (Semantics semantics : {Semantics::kPosix, Semantics::kOrdered}) {
    const auto states = draw_states(commit.env, commit.after_sync_dir, semantics);
    EXPECT_TRUE(all_of(states, [](const State& s) { return s == State{{"d/final", std::string(1500, 'a')}}; }))
        << semantics_name(semantics);
  }
}

TEST(PowerLossEnv, UnsyncedRenameMayBeRevertedButNeverExposesUnsyncedData) {
  Commit commit;
  for (Semantics semantics : {Semantics::kPosix, Semantics::kOrdered}) {
    const auto states = draw_states(commit.env, commit.after_rename, semantics);
    const State before{{"d/.tmp", std::string(1500, 'a')}};
    const State after{{"d/final", std::string(1500, 'a')}};
    EXPECT_TRUE(any_of(states, [&](const State& s) { return s == before; })) << semantics_name(semantics);
    EXPECT_TRUE(any_of(states, [&](const State& s) { return s == after; })) << semantics_name(semantics);
    // Under POSIX the temporary's own entry may be lost too.
    EXPECT_TRUE(all_of(states, [&](const State& s) { return s == before || s == after || s.empty(); }))
        << semantics_name(semantics);
  }
}

TEST(PowerLossEnv, UnsyncedMkdirTakesTheDirectoryContentsAwayUnderPosix) {
  PowerLossEnv env(kRoot);
  env.create_dirs("/root/d");
  std::unique_ptr<WritableFile> file = env.create("/root/d/f", 0600);
  append(*file, "x");
  file->sync();
  env.sync_dir("/root/d");  // the entry of f, not that of d
  const auto posix = draw_states(env, env.operations(), Semantics::kPosix);
  EXPECT_TRUE(any_of(posix, [](const State& s) { return s.empty(); }));
  EXPECT_TRUE(any_of(posix, [](const State& s) { return s == State{{"d/f", "x"}}; }));
  // ext4's journal commits the mkdir with the directory fsync.
  const auto ordered = draw_states(env, env.operations(), Semantics::kOrdered);
  EXPECT_TRUE(all_of(ordered, [](const State& s) { return s == State{{"d/f", "x"}}; }));
}

TEST(PowerLossEnv, UnsyncedAppendsAreKeptDroppedOrTornBySectorUnderPosix) {
  PowerLossEnv env(kRoot);
  std::unique_ptr<WritableFile> file = env.create("/root/f", 0600);
  append(*file, std::string(600, 'a'));
  file->sync();
  append(*file, std::string(1000, 'b'));  // bytes 600-1599: sectors 1, 2 and part of 3
  env.sync_dir("/root");
  const auto states = draw_states(env, env.operations(), Semantics::kPosix);
  const std::string synced(600, 'a');
  EXPECT_TRUE(all_of(states, [&](const State& s) { return s.at("f").compare(0, 600, synced) == 0; }));
  EXPECT_TRUE(any_of(states, [&](const State& s) { return s.at("f") == synced; }));
  EXPECT_TRUE(any_of(states, [&](const State& s) { return s.at("f") == synced + std::string(1000, 'b'); }));
  // Torn: some sector of the append zero, the file's size still covering it.
  EXPECT_TRUE(any_of(states, [&](const State& s) {
    const std::string& f = s.at("f");
    return f.size() == 1600 && f.find('\0') != std::string::npos && f.find('b') != std::string::npos;
  }));
  // Tearing follows 512-byte sectors of the file: bytes 600-1023 go together.
  EXPECT_TRUE(all_of(states, [&](const State& s) {
    const std::string& f = s.at("f");
    return f.size() < 1024 || f.substr(600, 424) == std::string(424, 'b') || f.substr(600, 424) == std::string(424, '\0');
  }));
}

TEST(PowerLossEnv, OrderedKeepsWholeAppendsInOrderAndTheDataOfASurvivingRename) {
  PowerLossEnv env(kRoot);
  std::unique_ptr<WritableFile> file = env.create("/root/.tmp", 0600);
  append(*file, "one,");
  append(*file, "two");
  env.rename("/root/.tmp", "/root/final");  // not synced: the rename may or may not survive
  const auto states = draw_states(env, env.operations(), Semantics::kOrdered);
  EXPECT_TRUE(all_of(states, [](const State& s) {
    if (s.count("final")) return s == State{{"final", "one,two"}};
    const std::string& tmp = s.count(".tmp") ? s.at(".tmp") : "absent";
    return tmp == "absent" || tmp == "" || tmp == "one," || tmp == "one,two";
  }));
  EXPECT_TRUE(any_of(states, [](const State& s) { return s.count("final") == 1; }));
  EXPECT_TRUE(any_of(states, [](const State& s) { return s.count(".tmp") == 1; }));
}

TEST(PowerLossEnv, UnsyncedUnlinkMayBringTheFileBack) {
  PowerLossEnv env(kRoot);
  std::unique_ptr<WritableFile> file = env.create("/root/f", 0600);
  append(*file, "old");
  file->sync();
  env.sync_dir("/root");
  env.remove("/root/f");
  for (Semantics semantics : {Semantics::kPosix, Semantics::kOrdered}) {
    const auto states = draw_states(env, env.operations(), semantics);
    EXPECT_TRUE(any_of(states, [](const State& s) { return s == State{{"f", "old"}}; })) << semantics_name(semantics);
    EXPECT_TRUE(any_of(states, [](const State& s) { return s.empty(); })) << semantics_name(semantics);
  }
}

// A compaction (or a repair) commits a file over a committed one: the
// rename is recorded as a replacement, and until the directory sync a state
// holds the old file or the new one under the name, never neither.
TEST(PowerLossEnv, ARenameOverACommittedFileIsAReplacementThatKeepsOneOfTheTwo) {
  PowerLossEnv env(kRoot);
  std::unique_ptr<WritableFile> old_file = env.create("/root/f", 0600);
  append(*old_file, "old");
  old_file->sync();
  env.sync_dir("/root");
  const std::size_t created = env.operations();
  std::unique_ptr<WritableFile> new_file = env.create("/root/.tmp", 0600);
  append(*new_file, "new");
  new_file->sync();
  const std::size_t renamed = env.operations();
  env.rename("/root/.tmp", "/root/f");
  const std::vector<PowerLossEnv::Replacement> replacements = env.replacements();
  ASSERT_EQ(replacements.size(), 1u);
  EXPECT_EQ(replacements[0].created, created);
  EXPECT_EQ(replacements[0].renamed, renamed);
  for (Semantics semantics : {Semantics::kPosix, Semantics::kOrdered}) {
    const auto states = draw_states(env, env.operations(), semantics);
    const auto holds = [](const std::string& text) {
      return [text](const State& s) { return s.count("f") == 1 && s.at("f") == text; };
    };
    EXPECT_TRUE(all_of(states, [&](const State& s) { return holds("old")(s) || holds("new")(s); }))
        << semantics_name(semantics);
    EXPECT_TRUE(any_of(states, holds("old"))) << semantics_name(semantics);
    EXPECT_TRUE(any_of(states, holds("new"))) << semantics_name(semantics);
  }
}

}  // namespace
}  // namespace resurgo::power
