// gpu_late_pin: what the L1 host buffer's pinning costs the application, in
// the host analog (bench/gpu_late_pin.py runs every method and reports).
// Without a GPU a flush is a memcpy from a source buffer (the stand-in for a
// device-to-host copy) and pinning is mlock, which, like cuMemHostRegister,
// faults in and locks every page.
//
// Modes (times are what the calling thread is blocked, steady clock):
//   trace  --method M --capacity-mib B --mib S --count K --interval-ms C:
//          a forward pass of K checkpoints of S MiB into a buffer of B MiB
//          (a ring), each after C ms of "compute" (a sleep), its flush
//          bracketed by flush_begins/flush_ends and followed by
//          checkpoint_taken. Blocking = building the buffer + every flush.
//          Methods: eager (populate + mlock in the constructor: the
//          traditional baseline), concurrent | sequential | auto (lazy pin
//          with that touch setting), off (touching, no pin).
//   rates  --mib S: the model's rates, each on fresh memory of S MiB:
//          touch alone (MADV_POPULATE_WRITE), flush (memcpy) into untouched,
//          touched and mlocked pages, flush into touched pages beside a
//          touching thread (and that thread's touch rate), mlock of touched
//          and of untouched pages.
//
// Both modes first touch and give back as much memory as they use: this
// virtual machine reports freed memory to its host at once (virtio_balloon
// free page reporting), and touching such memory again costs a host-side
// fault on top of the kernel's (0.3-0.6 GB/s instead of 4-9 GB/s). Memory
// given back a moment ago is handed out again before it is reported, so the
// figures are the kernel's first-touch cost, as on a physical machine.
//
// Output: one JSON object on stdout.
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/log.h"
#include "gpu/host_pinner.h"
#include "gpu/late_pin_buffer.h"

namespace {

using namespace resurgo::gpu;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMiB = std::size_t{1} << 20;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Options {
  std::string mode = "trace";
  std::string method = "auto";
  std::size_t capacity = 1024 * kMiB;
  std::size_t bytes = 64 * kMiB;
  int count = 16;
  double interval_ms = 10;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gpu_late_pin: %s\n"
               "usage: gpu_late_pin --mode trace --method eager|concurrent|sequential|auto|off\n"
               "                    [--capacity-mib B] [--mib S] [--count K] [--interval-ms C]\n"
               "       gpu_late_pin --mode rates [--mib S]\n",
               why.c_str());
  std::exit(64);
}

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) usage("missing value after " + std::string(arg));
    const std::string value = argv[++i];
    if (arg == "--mode") opt.mode = value;
    else if (arg == "--method") opt.method = value;
    else if (arg == "--capacity-mib") opt.capacity = std::stoull(value) * kMiB;
    else if (arg == "--mib") opt.bytes = std::stoull(value) * kMiB;
    else if (arg == "--count") opt.count = std::stoi(value);
    else if (arg == "--interval-ms") opt.interval_ms = std::stod(value);
    else usage("unknown option " + std::string(arg));
  }
  if (opt.bytes == 0 || opt.bytes > opt.capacity) usage("--mib must be between 1 and --capacity-mib");
  return opt;
}

const resurgo::Logger& logger() {
  static const resurgo::Logger log("gpu_late_pin", resurgo::LogLevel::kWarn);
  return log;
}

void warm_up(std::size_t bytes) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes failed");
  ::madvise(memory, bytes, MADV_HUGEPAGE);
  ::madvise(memory, bytes, MADV_POPULATE_WRITE);
  ::munmap(memory, bytes);
}

// The source of the flushes: touched before the clock starts, as device
// memory would be.
std::vector<std::byte> source_of(std::size_t bytes) { return std::vector<std::byte>(bytes, std::byte{0x5a}); }

LatePinOptions options_for(const Options& opt) {
  LatePinOptions options;
  options.capacity = opt.capacity;
  options.flushes_overlap_compute = false;  // the application waits for each memcpy
  if (opt.method == "eager") {
    options.pin = PinPolicy::kEager;
  } else if (opt.method == "off") {
    options.pin = PinPolicy::kOff;
  } else {
    resurgo::Config config;
    config.set("buffer.touch", opt.method);  // concurrent | sequential | auto
    options.touch = config.buffer.touch;
  }
  return options;
}

std::string json_rates(const TouchRates& r) {
  char text[256];
  std::snprintf(text, sizeof text,
                "{\"touch_alone\":%.6g,\"touch_concurrent\":%.6g,\"flush_touched\":%.6g,\"flush_untouched\":%.6g,"
                "\"flush_concurrent\":%.6g}",
                r.touch_alone, r.touch_concurrent, r.flush_touched, r.flush_untouched, r.flush_concurrent);
  return text;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  }
  return out + "\"";
}

std::string json_decision(const std::optional<TouchDecision>& d) {
  if (!d) return "null";
  char text[256];
  std::snprintf(text, sizeof text,
                "{\"strategy\":\"%s\",\"concurrent_seconds\":%.6g,\"sequential_seconds\":%.6g,\"horizon\":%llu,"
                "\"derived\":",
                to_string(d->strategy), d->concurrent.flush_seconds, d->sequential.flush_seconds,
                static_cast<unsigned long long>(d->horizon_iterations));
  return text + json_string(d->derived) + "}";
}

void run_trace(const Options& opt) {
  warm_up(opt.capacity + opt.bytes + 2 * kMiB);
  const std::vector<std::byte> source = source_of(opt.bytes);
  const auto compute = std::chrono::duration<double, std::milli>(opt.interval_ms);
  const Clock::time_point start = Clock::now();
  LatePinBuffer buffer(options_for(opt), make_mlock_pinner(), logger());
  const double construction = since(start);
  double flushes = 0, first_flush = 0;
  double pinned_at = -1;  // seconds from start, once seen pinned after a checkpoint
  int pinned_by = -1;     // the first checkpoint that found the buffer pinned
  std::size_t offset = 0;
  for (int i = 0; i < opt.count; ++i) {
    std::this_thread::sleep_for(compute);
    if (offset + opt.bytes > buffer.capacity()) offset = 0;
    if (pinned_by < 0 && buffer.pinned()) {
      pinned_by = i;
      pinned_at = since(start);
    }
    const Clock::time_point flush_start = Clock::now();
    buffer.flush_begins(offset, opt.bytes);
    std::memcpy(buffer.data() + offset, source.data(), opt.bytes);
    buffer.flush_ends(offset, opt.bytes);
    const double flush = since(flush_start);
    buffer.checkpoint_taken(opt.bytes, opt.interval_ms / 1000);
    flushes += flush;
    if (i == 0) first_flush = flush;
    offset += opt.bytes;
  }
  const double pass = since(start);
  const bool pinned = buffer.wait_pinned();
  const double settled = since(start);
  const LatePinStats s = buffer.stats();
  std::printf("{\"mode\":\"trace\",\"method\":\"%s\",\"capacity\":%zu,\"bytes\":%zu,\"count\":%d,\"interval_ms\":%g,"
              "\"blocking_seconds\":%.9f,\"construction_seconds\":%.9f,\"flush_seconds\":%.9f,"
              "\"first_flush_seconds\":%.9f,\"pass_seconds\":%.9f,\"pinned\":%s,\"pinned_by_checkpoint\":%d,"
              "\"pinned_seen_seconds\":%.9f,\"settled_seconds\":%.9f,\"touch_seconds\":%.9f,\"pin_seconds\":%.9f,"
              "\"flushes_to_untouched\":%llu,\"bytes_flushed_to_untouched\":%zu,\"strategy\":\"%s\","
              "\"pin_failure\":%s,\"touch_stopped\":%s,\"measured\":%s,\"decision\":%s}\n",
              opt.method.c_str(), buffer.capacity(), opt.bytes, opt.count, opt.interval_ms,
              construction + flushes, construction, flushes, first_flush, pass, pinned ? "true" : "false", pinned_by,
              pinned_at, settled, s.touch_seconds, s.pin_seconds,
              static_cast<unsigned long long>(s.flushes_to_untouched), s.bytes_flushed_to_untouched,
              to_string(s.strategy), json_string(s.pin_failure).c_str(), json_string(s.touch_stopped).c_str(),
              json_rates(s.measured).c_str(), json_decision(s.decision).c_str());
}

// Fresh anonymous memory with transparent huge pages, as the buffer has.
class Fresh {
 public:
  explicit Fresh(std::size_t bytes) : bytes_(bytes) {
    void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes failed");
    data_ = static_cast<std::byte*>(memory);
    ::madvise(data_, bytes, MADV_HUGEPAGE);
  }
  ~Fresh() { ::munmap(data_, bytes_); }
  Fresh(const Fresh&) = delete;
  Fresh& operator=(const Fresh&) = delete;
  std::byte* data() const { return data_; }

  double populate() const {
    const Clock::time_point start = Clock::now();
    if (::madvise(data_, bytes_, MADV_POPULATE_WRITE) != 0) throw std::runtime_error("MADV_POPULATE_WRITE failed");
    return since(start);
  }

 private:
  std::size_t bytes_;
  std::byte* data_;
};

void run_rates(const Options& opt) {
  const std::size_t n = opt.bytes;
  const auto rate = [n](double seconds) { return static_cast<double>(n) / seconds; };
  warm_up(7 * n + 2 * kMiB);
  const std::vector<std::byte> source = source_of(n);
  const std::unique_ptr<HostPinner> pinner = make_mlock_pinner();
  auto copy_into = [&](const Fresh& target) {
    const Clock::time_point start = Clock::now();
    std::memcpy(target.data(), source.data(), n);
    return since(start);
  };
  auto lock = [&](const Fresh& target) {
    const Clock::time_point start = Clock::now();
    pinner->pin(target.data(), n);
    return since(start);
  };

  const Fresh untouched(n);
  const double flush_untouched = copy_into(untouched);
  const Fresh touched(n);
  const double touch_alone = touched.populate();
  const double flush_touched = copy_into(touched);
  const double lock_touched = lock(touched);
  const double flush_pinned = copy_into(touched);
  pinner->unpin(touched.data(), n);
  const Fresh never_touched(n);
  const double lock_untouched = lock(never_touched);
  pinner->unpin(never_touched.data(), n);

  // A flush into touched pages while a thread touches other fresh pages.
  const Fresh target(n);
  target.populate();
  const Fresh beside(n);
  double touch_concurrent = 0;
  std::thread toucher([&] { touch_concurrent = beside.populate(); });
  const double flush_concurrent = copy_into(target);
  toucher.join();

  std::printf("{\"mode\":\"rates\",\"bytes\":%zu,\"touch_alone\":%.6g,\"touch_concurrent\":%.6g,"
              "\"flush_untouched\":%.6g,\"flush_touched\":%.6g,\"flush_concurrent\":%.6g,\"flush_pinned\":%.6g,"
              "\"mlock_touched\":%.6g,\"mlock_untouched\":%.6g}\n",
              n, rate(touch_alone), rate(touch_concurrent), rate(flush_untouched), rate(flush_touched),
              rate(flush_concurrent), rate(flush_pinned), rate(lock_touched), rate(lock_untouched));
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    if (opt.mode == "trace") run_trace(opt);
    else if (opt.mode == "rates") run_rates(opt);
    else usage("unknown mode " + opt.mode);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpu_late_pin: %s\n", error.what());
    return 2;
  }
  return 0;
}
