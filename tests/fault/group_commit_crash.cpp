// Group commit under kills (docs/reliability.md): a child process commits
// one group of versions to an L2 directory level (Level::commit_group) and
// is killed with SIGKILL at the n-th pass of one of the commit's crash
// points (L2.commit.created, .written, .synced, .renamed, .done: each is
// passed once per file of the group). A fresh level over the directory then
// must hold every version either whole (byte for byte what was written) or
// not at all, no temporary after prepare(), and exactly the versions the
// point says: none before the renames, the first n at the n-th rename, all
// once the directory is synced. Links the library with the points enabled.
//
//   group_commit_crash
//
// Prints each failed check and exits 1 if there was one.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/crash_point.h"
#include "base/thread_pool.h"
#include "format/file_names.h"
#include "format/version_writer.h"
#include "io/bytes_file.h"
#include "resurgo/config.hpp"
#include "tier/directory_level.h"

namespace {

using namespace resurgo;

constexpr int kGroup = 4;  // versions 1 to kGroup
constexpr std::uint64_t kChunk = 64u << 10;
constexpr char kStore[] = "group";

std::vector<std::byte> container_of(int version) {
  format::Header header;
  header.store = kStore;
  header.version = version;
  header.chunk_size = kChunk;
  std::vector<std::byte> state(3 * kChunk + 100);
  for (std::size_t i = 0; i < state.size(); ++i) state[i] = static_cast<std::byte>((i * 131 + version * 37) & 0xff);
  header.regions = {{0, "state", format::RegionKind::kHost, state.size(), "uint8", {static_cast<std::int64_t>(state.size())}}};
  Config::Pipeline pipeline;
  pipeline.chunk_size = kChunk;
  ThreadPool pool(0);
  BytesFile file("expected");
  write_extents(file, header, {{0, 0, state.size(), state.data()}}, pipeline, pool);
  return file.take();
}

// The child: commits the group, killed at the armed point.
[[noreturn]] void commit_group_until_killed(const std::string& root, const std::string& point, int hit,
                                            const std::vector<std::vector<std::byte>>& containers) {
  crash_points::arm(point, hit);
  DirectoryLevel level(kL2, root, kStore, 0, 0600, 0, Env::posix());
  level.prepare();
  std::vector<PendingCommit> group;
  for (int version = 1; version <= kGroup; ++version) {
    const std::vector<std::byte>& bytes = containers[static_cast<std::size_t>(version)];
    group.push_back({version, [&bytes](WritableFile& file) { file.append(bytes.data(), bytes.size()); }, nullptr});
  }
  level.commit_group(group);
  ::_exit(3);  // the point was never passed `hit` times
}

std::vector<std::byte> read_whole(ReadableFile& file) {
  std::vector<std::byte> bytes(file.size());
  file.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

// The versions visible after a kill at the `hit`-th pass of `point`.
int expected_visible(const std::string& point, int hit) {
  if (point == "L2.commit.done") return kGroup;  // passed after the one directory sync
  if (point == "L2.commit.renamed") return hit;
  return 0;
}

// One kill and its checks; the number of failed checks.
int run_case(const std::string& root, const std::string& point, int hit,
             const std::vector<std::vector<std::byte>>& containers) {
  int failures = 0;
  const auto check = [&](bool ok, const std::string& what) {
    if (!ok) std::printf("FAILED %s hit %d: %s\n", point.c_str(), hit, what.c_str());
    failures += ok ? 0 : 1;
  };
  const pid_t child = ::fork();
  if (child == 0) commit_group_until_killed(root, point, hit, containers);
  int status = 0;
  ::waitpid(child, &status, 0);
  check(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child was not killed at the point");
  DirectoryLevel level(kL2, root, kStore, 0, 0600, 0, Env::posix());
  level.prepare();  // removes the dead writer's temporaries
  const std::vector<int> versions = level.versions();
  check(static_cast<int>(versions.size()) == expected_visible(point, hit),
        std::to_string(versions.size()) + " versions visible");
  for (int version : versions) {
    const bool whole = read_whole(*level.open(version)) == containers[static_cast<std::size_t>(version)];
    check(whole, "version " + std::to_string(version) + " is visible but not whole");
    check(version <= expected_visible(point, hit), "version " + std::to_string(version) + " visible out of order");
  }
  for (const auto& entry : std::filesystem::directory_iterator(level.dir())) {
    const std::string name = entry.path().filename().string();
    check(!format::temporary_owner(name).has_value(), "temporary " + name + " left after prepare()");
  }
  return failures;
}

}  // namespace

int main() {
  std::vector<std::vector<std::byte>> containers(kGroup + 1);
  for (int version = 1; version <= kGroup; ++version) containers[static_cast<std::size_t>(version)] = container_of(version);
  char pattern[] = "/tmp/group-commit-crash-XXXXXX";
  const std::string scratch = ::mkdtemp(pattern);
  int failures = 0;
  int cases = 0;
  for (const char* step : {"created", "written", "synced", "renamed", "done"}) {
    for (int hit = 1; hit <= kGroup; ++hit) {
      const std::string root = scratch + "/" + step + "-" + std::to_string(hit);
      failures += run_case(root, std::string("L2.commit.") + step, hit, containers);
      ++cases;
    }
  }
  std::filesystem::remove_all(scratch);
  std::printf("group commit crash: %d kills, %d failed checks\n", cases, failures);
  return failures == 0 ? 0 : 1;
}
