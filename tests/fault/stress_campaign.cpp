// Load campaign (docs/reliability.md): several processes, each with several
// stores checkpointing continuously from their own threads into one shared
// L2 and one shared L4 directory, with buffers so small that backpressure,
// synchronous writes, evictions, L4 copies and concurrent flushes interleave.
// The processes share store names and differ by rank (PMI_RANK), as the ranks
// of an MPI job do; the stores of one process differ by name.
//
// After the time is up every store is closed, reopened and restarted: it must
// restore its newest version, bit for bit. Then every file left in the tree
// must be an intact container, no temporary may remain, and no level may hold
// more than `keep` versions of a store and rank.
//
//   stress_campaign [--seconds S] [--processes P] [--stores N] [--dir PATH]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "application.h"
#include "format/file_names.h"
#include "campaign_main.h"
#include "format/container.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "tier/directory_level.h"

namespace resurgo::fault {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kFieldValues = 16 * 1024;  // 128 KiB
constexpr std::size_t kTagBytes = 10007;
constexpr int kLocalKeep = 2;
constexpr int kPersistentKeep = 3;

// How store i of every process captures: every capture mode, with buffers
// from smaller than one version (copy: every checkpoint synchronous; auto:
// every checkpoint forks) to a little more than one (every checkpoint waits).
struct CaptureSetting {
  const char* mode;
  const char* buffer;
};
constexpr CaptureSetting kCaptureSettings[] = {
    {"copy", "64KiB"},  {"copy", "160KiB"}, {"fork", "160KiB"},
    {"auto", "64KiB"},  {"auto", "300KiB"}, {"copy", "1MiB"},
};
constexpr int kDefaultStores = static_cast<int>(std::size(kCaptureSettings));

const CaptureSetting& capture_of(int store) {
  return kCaptureSettings[static_cast<std::size_t>(store) % std::size(kCaptureSettings)];
}
const char* capture_mode_of(int store) { return kSanitized ? "copy" : capture_of(store).mode; }  // see campaign_main.h

Config store_config(const std::string& root, int store) {
  static const char* const kCodecs[] = {"none", "lz4", "zstd", "blosc-lz4", "blosc-zstd"};
  const CaptureSetting& capture = capture_of(store);
  return Config::load("", {{"local.path", root + "/l2"},
                           {"persistent.path", root + "/l4"},
                           {"local.keep", std::to_string(kLocalKeep)},
                           {"persistent.keep", std::to_string(kPersistentKeep)},
                           {"persistent.every", std::to_string(1 + store % 3)},
                           {"capture.mode", capture_mode_of(store)},
                           {"buffer.capacity", capture.buffer},
                           {"pipeline.chunk_size", "64KiB"},
                           {"pipeline.compress", kCodecs[store % std::size(kCodecs)]},
                           {"pipeline.threads", std::to_string(1 + store % 2)},
                           {"log.level", "off"}});
}

std::string store_name(int store) { return "stress" + std::to_string(store); }

struct StoreResult {
  int checkpoints = 0;
  int synchronous = 0;
  int forked = 0;
  double backpressure_seconds = 0;
  std::size_t most_local_files = 0;  // L2 files of this store and rank, sampled every 8 versions
  std::string failure;  // empty when every check passed
};

StoreResult run_store(const std::string& root, int store, int rank, Clock::time_point deadline) {
  StoreResult result;
  const Config config = store_config(root, store);
  DirectoryLevel local_files(2, root + "/l2", store_name(store), rank, 0600, 0, Env::posix());  // only listed
  int newest = -1;
  try {
    Application application(kFieldValues, kTagBytes);
    {
      Store writer(store_name(store), config);
      application.protect(writer);
      for (int version = 0; Clock::now() < deadline; ++version) {
        application.advance_to(writer, version);
        writer.checkpoint(version);
        const VersionStats stats = writer.stats().back();
        result.synchronous += stats.capture == "synchronous" ? 1 : 0;
        result.forked += stats.capture == "fork" ? 1 : 0;
        result.backpressure_seconds += stats.backpressure_seconds;
        if (version % 8 == 7) {
          writer.wait(version, 2);
          result.most_local_files = std::max(result.most_local_files, local_files.versions().size());
        }
        newest = version;
        ++result.checkpoints;
      }
      writer.wait();
    }
    Application restored(kFieldValues, kTagBytes);
    Store reader(store_name(store), config);
    restored.protect(reader);
    const int version = reader.restart();
    const std::string difference = restored.difference_from(reader, version);
    if (version != newest) {
      result.failure = "restored version " + std::to_string(version) + ", newest written " + std::to_string(newest);
    } else if (!difference.empty()) {
      result.failure = "restored version " + std::to_string(version) + " but " + difference;
    }
  } catch (const std::exception& error) {
    result.failure = error.what();
  }
  return result;
}

// One process: `stores` stores in parallel threads. Prints one line per
// store; returns the number of failed stores.
int run_process(const std::string& root, int rank, int stores, double seconds) {
  ::setenv("PMI_RANK", std::to_string(rank).c_str(), 1);
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                         std::chrono::duration<double>(seconds));
  std::vector<StoreResult> results(static_cast<std::size_t>(stores));
  std::vector<std::thread> threads;
  for (int store = 0; store < stores; ++store) {
    threads.emplace_back([&, store] { results[static_cast<std::size_t>(store)] = run_store(root, store, rank, deadline); });
  }
  for (std::thread& thread : threads) thread.join();
  int failed = 0;
  for (int store = 0; store < stores; ++store) {
    const StoreResult& r = results[static_cast<std::size_t>(store)];
    std::printf("  rank %d %s (capture.mode %s): %d checkpoints, %d synchronous, %d forked, %.2f s backpressure, "
                "at most %zu files at L2: %s\n",
                rank, store_name(store).c_str(),
                capture_mode_of(store), r.checkpoints, r.synchronous, r.forked, r.backpressure_seconds, r.most_local_files,
                r.failure.empty() ? "restored the newest version bit for bit" : ("FAILED: " + r.failure).c_str());
    failed += r.failure.empty() ? 0 : 1;
  }
  std::fflush(stdout);
  return failed;
}

// Problems with the files left: damaged or temporary files, more versions
// than `keep` per store, rank and level.
std::vector<std::string> check_tree(const std::string& root) {
  std::vector<std::string> problems;
  std::map<std::string, int> versions_held;  // "level dir/rank" -> count
  const std::shared_ptr<Env> env = Env::posix();
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    const std::string path = entry.path().string();
    int version = 0;
    int rank = 0;
    if (format::parse_container_file_name(name, version, rank)) {
      ++versions_held[entry.path().parent_path().string() + " rank " + std::to_string(rank)];
      try {
        const std::unique_ptr<ReadableFile> file = env->open(path);
        const format::Container container = format::read_container(*file);
        format::check_identity(container, path, entry.path().parent_path().filename().string(), version, rank);
        format::verify_chunks(*file, container, [](std::uint64_t, std::uint64_t) {});
      } catch (const Error& error) {
        problems.push_back(error.what());
      }
    } else if (name.rfind(".lock.r", 0) != 0 && name != format::kStoreIdFileName) {
      problems.push_back("unexpected file left: " + path);
    }
  }
  for (const auto& [where, count] : versions_held) {
    const int keep = where.find("/l2/") != std::string::npos ? kLocalKeep : kPersistentKeep;
    if (count > keep) {
      problems.push_back(where + " holds " + std::to_string(count) + " versions, keep is " + std::to_string(keep));
    }
  }
  return problems;
}

}  // namespace
}  // namespace resurgo::fault

int main(int argc, char** argv) {
  using namespace resurgo::fault;
  const std::set<std::string> known = {"--seconds", "--processes", "--stores"};
  return campaign_main("stress", argc, argv, known, [](const Flags& flags, const std::string& dir) {
    const double seconds = std::stod(flags.get("--seconds", "10"));
    const int processes = std::stoi(flags.get("--processes", "3"));
    const int stores = std::stoi(flags.get("--stores", std::to_string(kDefaultStores)));
    std::printf("stress campaign: %d processes x %d stores for %.0f s in %s\n", processes, stores, seconds, dir.c_str());
    std::fflush(stdout);
    std::vector<pid_t> children;
    for (int rank = 0; rank < processes; ++rank) {
      const pid_t child = ::fork();
      if (child < 0) throw std::runtime_error("fork failed");
      if (child == 0) _exit(run_process(dir, rank, stores, seconds) == 0 ? 0 : 1);
      children.push_back(child);
    }
    int failed_processes = 0;
    for (pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed_processes;
    }
    const std::vector<std::string> problems = check_tree(dir);
    for (const std::string& problem : problems) std::printf("  FAILED: %s\n", problem.c_str());
    std::printf("  processes failed: %d; problems with the files left: %zu\n", failed_processes, problems.size());
    return failed_processes == 0 && problems.empty();
  });
}
