// The command line shared by the C++ campaigns: "--flag value" pairs, and a
// working directory (--dir, or a fresh one under /tmp that is removed when
// the campaign passes and kept for inspection when it fails).
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace resurgo::fault {

// Built with ThreadSanitizer (make test-tsan)? The TSan runtime does not
// support fork capture in these campaigns: a forked writer's compression
// helpers are threads started in the child of a multi-threaded process
// ("not supported", or with die_after_fork=0 "dup thread with used id"),
// and a writer forked while other threads allocate deadlocked in TSan's own
// allocator (stress campaign, six stores forking from six threads). Under
// TSan the campaigns therefore capture by copy only; the GoogleTest suite
// still runs fork capture under TSan (conformance and fork tests), and every
// other build draws every capture mode.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

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

}  // namespace resurgo::fault
