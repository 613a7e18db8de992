// track_overhead: what dirty-page tracking costs the application, for one
// method (bench/tracking_overhead.py runs it for every method and reports).
//
// For each repeat: N MiB of anonymous private memory, transparent huge pages
// off for it (MADV_NOHUGEPAGE: the per-page costs are what is measured, and a
// huge page would be one fault for 512 pages), prefaulted by memset, watched
// as one region and collected once (that arms tracking). Then it times
//   (a) the loop that writes one byte into each chosen page, in ascending
//       address order: the first write of the interval to each page;
//   (b) one collect(id, 1): reading the written pages and re-arming.
// Method `none` times the same loop on the same kind of memory without a
// tracker (the floor), and one read of the whole region (the least that a
// method looking at the contents must do).
//
// The tracker is the method's own (make_*_tracker), not open_tracker()'s
// wrapper: a region the method cannot watch fails here instead of being
// tracked by hash without a word, so a figure always belongs to the method
// named. collect() must return exactly the pages written, and nothing at the
// collect after; otherwise the program exits with status 2 and a message.
//
// Output: one JSON object per repeat on stdout. Exit status 3 and a line
// "unavailable: REASON" on stderr when the method is unavailable here.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "option_pairs.h"
#include "track/hash_tracker.h"
#include "track/mprotect_tracker.h"
#include "track/soft_dirty_tracker.h"
#include "track/tracker.h"
#include "track/uffd_tracker.h"

namespace {

using resurgo::track::PageSet;
using resurgo::track::Tracker;
using Clock = std::chrono::steady_clock;

constexpr int kRegion = 1;
constexpr std::uint64_t kSeed = 20240611;  // fixed: every method writes the same pages

struct Options {
  std::string method = "none";
  std::size_t mib = 64;
  double fraction = 1.0;
  std::string pattern = "scattered";
  int repeats = 1;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "track_overhead: %s\n"
               "usage: track_overhead [--method uffd|soft-dirty|mprotect|hash|none] [--mib N]\n"
               "                      [--fraction F] [--pattern scattered|contiguous] [--repeats R]\n",
               why.c_str());
  std::exit(64);
}

Options parse(int argc, char** argv) {
  Options opt;
  for (const auto& [arg, value] : option_pairs(argc, argv, usage)) {
    char* end = nullptr;
    if (arg == "--method") {
      opt.method = value;
    } else if (arg == "--mib") {
      const unsigned long long mib = std::strtoull(value.c_str(), &end, 10);
      if (*end != '\0' || mib == 0) usage("--mib takes a positive integer");
      opt.mib = static_cast<std::size_t>(mib);
    } else if (arg == "--fraction") {
      opt.fraction = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(opt.fraction > 0.0 && opt.fraction <= 1.0)) usage("--fraction takes a number in (0, 1]");
    } else if (arg == "--pattern") {
      if (value != "scattered" && value != "contiguous") usage("--pattern is scattered or contiguous");
      opt.pattern = value;
    } else if (arg == "--repeats") {
      const long repeats = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || repeats < 1 || repeats > 1000000) usage("--repeats takes a positive integer");
      opt.repeats = static_cast<int>(repeats);
    } else {
      usage("unknown argument " + std::string(arg));
    }
  }
  if (opt.method != "none" && opt.method != "uffd" && opt.method != "soft-dirty" && opt.method != "mprotect" &&
      opt.method != "hash") {
    usage("unknown method " + opt.method);
  }
  return opt;
}

std::unique_ptr<Tracker> make_tracker(const std::string& method) {
  if (method == "uffd") return resurgo::track::make_uffd_tracker();
  if (method == "soft-dirty") return resurgo::track::make_soft_dirty_tracker();
  if (method == "mprotect") return resurgo::track::make_mprotect_tracker();
  if (method == "hash") return resurgo::track::make_hash_tracker();
  return nullptr;  // none
}

[[noreturn]] void unavailable(const std::string& method, const char* why) {
  std::fprintf(stderr, "unavailable: %s (--method %s)\n", why, method.c_str());
  std::exit(3);
}

[[noreturn]] void wrong(const std::string& method, const std::string& what) {
  std::fprintf(stderr, "track_overhead: %s reported the wrong pages: %s\n", method.c_str(), what.c_str());
  std::exit(2);
}

// The pages written: `count` of `pages`, in ascending order. Scattered: the
// first `count` of a fixed-seed Fisher-Yates shuffle; contiguous: 0..count-1.
std::vector<std::size_t> chosen_pages(std::size_t pages, std::size_t count, bool scattered) {
  std::vector<std::size_t> order(pages);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (scattered) {
    std::mt19937_64 rng(kSeed);
    for (std::size_t i = pages - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
  }
  order.resize(count);
  std::sort(order.begin(), order.end());
  return order;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Changes one byte of each page (hash sees only writes that change content).
// Through volatile, so every write happens, once, in this order.
void write_pages(std::byte* base, const std::vector<std::size_t>& offsets) {
  volatile unsigned char* bytes = reinterpret_cast<volatile unsigned char*>(base);
  for (std::size_t offset : offsets) bytes[offset] = static_cast<unsigned char>(bytes[offset] + 1u);
}

std::uint64_t read_all(const std::byte* base, std::size_t bytes) {
  const volatile std::uint64_t* words = reinterpret_cast<const volatile std::uint64_t*>(base);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes / sizeof(std::uint64_t); ++i) sum += words[i];
  return sum;
}

std::string describe(const PageSet& got, const PageSet& want) {
  std::size_t missing = 0, extra = 0, first = got.pages();
  for (std::size_t page = 0; page < want.pages(); ++page) {
    if (got.contains(page) == want.contains(page)) continue;
    (want.contains(page) ? missing : extra) += 1;
    first = std::min(first, page);
  }
  return std::to_string(got.count()) + " pages reported, " + std::to_string(want.count()) + " written; " +
         std::to_string(missing) + " missing, " + std::to_string(extra) + " extra, first difference at page " +
         std::to_string(first);
}

int run(const Options& opt) {
  const std::size_t page = resurgo::track::page_size();
  const std::size_t bytes = opt.mib << 20;
  const std::size_t pages = bytes / page;
  const std::size_t count =
      std::clamp<std::size_t>(static_cast<std::size_t>(opt.fraction * static_cast<double>(pages) + 0.5), 1, pages);
  const std::vector<std::size_t> chosen = chosen_pages(pages, count, opt.pattern == "scattered");
  std::vector<std::size_t> offsets(chosen.size());
  for (std::size_t i = 0; i < chosen.size(); ++i) offsets[i] = chosen[i] * page;
  PageSet written(pages);
  for (std::size_t p : chosen) written.insert(p);

  std::unique_ptr<Tracker> tracker;
  try {
    tracker = make_tracker(opt.method);
  } catch (const resurgo::track::Unavailable& why) {
    unavailable(opt.method, why.what());
  }

  for (int repeat = 0; repeat < opt.repeats; ++repeat) {
    void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) {
      std::fprintf(stderr, "track_overhead: mmap of %zu MiB: %s\n", opt.mib, std::strerror(errno));
      return 1;
    }
    std::byte* base = static_cast<std::byte*>(mapped);
    if (madvise(base, bytes, MADV_NOHUGEPAGE) != 0) {
      std::fprintf(stderr, "track_overhead: madvise(MADV_NOHUGEPAGE): %s\n", std::strerror(errno));
      return 1;
    }
    std::memset(base, 1, bytes);

    double write_seconds = 0, read_seconds = -1, collect_seconds = -1;
    if (tracker) {
      try {
        tracker->watch(kRegion, base, bytes);
      } catch (const resurgo::track::Unavailable& why) {
        unavailable(opt.method, why.what());
      }
      PageSet all(pages);
      all.insert_range(0, pages);
      if (tracker->collect(kRegion, 1) != all) wrong(opt.method, "the first collect must report every page");

      Clock::time_point start = Clock::now();
      write_pages(base, offsets);
      write_seconds = seconds_since(start);

      start = Clock::now();
      const PageSet got = tracker->collect(kRegion, 1);
      collect_seconds = seconds_since(start);

      if (got != written) wrong(opt.method, describe(got, written));
      const PageSet after = tracker->collect(kRegion, 1);
      if (after != PageSet(pages)) wrong(opt.method, "the collect after reported written pages: " + describe(after, PageSet(pages)));
      tracker->unwatch(kRegion);
    } else {
      Clock::time_point start = Clock::now();
      write_pages(base, offsets);
      write_seconds = seconds_since(start);

      start = Clock::now();
      const std::uint64_t sum = read_all(base, bytes);
      read_seconds = seconds_since(start);
      if (sum == 0) wrong(opt.method, "the region reads as zeros");  // keeps the read
    }
    munmap(base, bytes);

    std::string extra;
    char number[64];
    if (collect_seconds >= 0) {
      std::snprintf(number, sizeof number, "%.9e", collect_seconds);
      extra += std::string(", \"collect_seconds\": ") + number;
    } else {
      extra += ", \"collect_seconds\": null";
    }
    if (read_seconds >= 0) {
      std::snprintf(number, sizeof number, "%.9e", read_seconds);
      extra += std::string(", \"read_seconds\": ") + number;
    }
    std::printf(
        "{\"method\": \"%s\", \"mib\": %zu, \"fraction\": %.6g, \"pattern\": \"%s\", \"page_bytes\": %zu, "
        "\"region_pages\": %zu, \"pages_written\": %zu, \"write_seconds\": %.9e%s, \"exact\": %s}\n",
        opt.method.c_str(), opt.mib, opt.fraction, opt.pattern.c_str(), page, pages, count, write_seconds,
        extra.c_str(), tracker ? "true" : "null");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    return run(opt);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "track_overhead: %s: %s\n", opt.method.c_str(), error.what());
    return 1;
  }
}
