// The command line shared by the C++ campaigns: "--flag value" pairs, and a
// working directory (--dir, or a fresh one under /tmp that is removed when
// the campaign passes and kept for inspection when it fails).
#pragma once

#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "../sanitized.h"

namespace resurgo::fault {

// Built with a sanitizer (make test-asan, make test-tsan)? Their runtimes
// (GCC 12's libsanitizer) do not support fork capture in these campaigns:
// a writer forked while other threads of the application allocate can
// deadlock in the sanitizer's own allocator (seen under TSan in the stress
// campaign and under ASan in the crash campaign: gdb shows the child in
// SizeClassAllocator64::GetFromAllocator; glibc's malloc, used by every
// other build, is made fork-safe by its own handlers), and TSan does not
// follow threads started in such a child (a forked writer's compression
// helpers: "starting new threads after multi-threaded fork is not
// supported"). Under a sanitizer the campaigns therefore never fork (copy,
// or delta tracked by hash, whose faults-free reads suit the sanitizers'
// own SIGSEGV handlers); the GoogleTest suite still runs fork capture under
// both, and every other build draws every capture mode (kSanitized:
// tests/sanitized.h).

class Flags {
 public:
  Flags(int argc, char** argv, const std::set<std::string>& known) {
    for (int i = 1; i < argc; i += 2) {
      const std::string flag = argv[i];
      if (!known.count(flag)) {
        std::string names;
        for (const std::string& name : known) names += " " + name;
        throw std::invalid_argument("unknown option " + flag + " (known:" + names + ")");
      }
      if (i + 1 == argc) throw std::invalid_argument("option " + flag + " needs a value");
      values_[flag] = argv[i + 1];
    }
  }
  std::string get(const std::string& flag, const std::string& fallback) const {
    const auto found = values_.find(flag);
    return found == values_.end() ? fallback : found->second;
  }

 private:
  std::map<std::string, std::string> values_;
};

// Parses the flags (plus --dir), runs `body(flags, directory)`, which returns
// whether the campaign passed, and turns the outcome into an exit status:
// 0 passed, 1 failed, 2 could not run.
template <class Body>
int campaign_main(const char* campaign, int argc, char** argv, std::set<std::string> known, Body&& body) {
  try {
    known.insert("--dir");
    const Flags flags(argc, argv, known);
    std::string directory = flags.get("--dir", "");
    const bool temporary = directory.empty();
    if (temporary) {
      std::string pattern = std::string("/tmp/resurgo-") + campaign + "-XXXXXX";
      if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a directory under /tmp");
      directory = pattern;
    }
    const bool passed = body(flags, directory);
    if (passed && temporary) std::filesystem::remove_all(directory);
    if (!passed) std::printf("%s campaign failed; its files are kept in %s\n", campaign, directory.c_str());
    return passed ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s campaign: %s\n", campaign, error.what());
    return 2;
  }
}

// The main of a campaign of numbered trials: --trials (default 200),
// --seed (default: the clock, printed in the report so a run can be
// repeated) and the campaign's own `campaign_flags`;
// Campaign(directory, seed, flags) runs run_trial(n) and
// report(seconds, seed), which returns whether every trial passed.
template <class Campaign>
int trials_main(const char* campaign, int argc, char** argv, const std::set<std::string>& campaign_flags = {}) {
  std::set<std::string> known{"--trials", "--seed"};
  known.insert(campaign_flags.begin(), campaign_flags.end());
  return campaign_main(campaign, argc, argv, known, [](const Flags& flags, const std::string& dir) {
    const long trials = std::stol(flags.get("--trials", "200"));
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    const std::uint64_t seed = std::stoull(flags.get("--seed", std::to_string(now)));
    Campaign runner(dir, seed, flags);
    const auto started = std::chrono::steady_clock::now();
    for (long trial = 0; trial < trials; ++trial) runner.run_trial(trial);
    return runner.report(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), seed);
  });
}

}  // namespace resurgo::fault
