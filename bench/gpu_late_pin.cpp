// gpu_late_pin: what the L1 host buffer's pinning costs the application
// (bench/gpu_late_pin.py runs every method and reports).
//
// Backends (--backend): host, the host analog (the default): a flush is a
// memcpy from a host source buffer (the stand-in for a device-to-host copy)
// and pinning is mlock, which, like cuMemHostRegister, faults in and locks
// every page. cuda: a flush is a cuMemcpyDtoHAsync from device memory
// (cuMemAlloc'd and filled before the clock starts) on a non-blocking stream
// of the program's own, then cuStreamSynchronize; pinning is
// cuMemHostRegister (open_host_pinner). Device 0's primary context is pushed
// for the whole run and popped at the end. The buffer is pinned in pieces
// (HostPinner::max_piece, or --pin-piece-mib when smaller) from its start,
// and the driver refuses a copy into memory registered in part, so each
// flush is one copy per piece it spans, all bracketed once by
// flush_begins/flush_ends.
//
// Modes (times are what the calling thread is blocked, steady clock):
//   trace  --method M --capacity-mib B --mib S --count K --interval-ms C:
//          a forward pass of K checkpoints of S MiB into a buffer of B MiB
//          (a ring), each after C ms of "compute" (a sleep), its flush
//          bracketed by flush_begins/flush_ends and followed by
//          checkpoint_taken. Blocking = building the buffer + every flush.
//          Methods: eager (populate + pin in the constructor: the
//          traditional baseline), concurrent | sequential | auto (lazy pin
//          with that touch setting), off (touching, no pin).
//   rates  --mib S: the model's rates, each on fresh memory of S MiB:
//          touch alone (MADV_POPULATE_WRITE), flush into untouched, touched
//          and pinned pages, flush into touched pages beside a touching
//          thread (and that thread's touch rate), pin of touched and of
//          untouched pages.
//
// Both modes first touch and give back as much memory as they use: this
// virtual machine reports freed memory to its host at once (virtio_balloon
// free page reporting), and touching such memory again costs a host-side
// fault on top of the kernel's (0.3-0.6 GB/s instead of 4-9 GB/s). Memory
// given back a moment ago is handed out again before it is reported, so the
// figures are the kernel's first-touch cost, as on a physical machine.
//
// Output: one JSON object on stdout, with the backend, the pinner and its
// piece (cuda: also the device's name and the driver's version). Exit status
// 3 and "unavailable: REASON" on stderr when the backend is unavailable here.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/log.h"
#include "gpu/device_access.h"
#include "gpu/host_pinner.h"
#include "gpu/late_pin_buffer.h"
#include "option_pairs.h"
#include "piece_pinner.h"
#ifdef RESURGO_HAVE_CUDA_HEADERS
#include "gpu/cuda_context.h"
#endif

namespace {

using namespace resurgo::gpu;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr int kUnavailable = 3;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Options {
  std::string backend = "host";
  std::string mode = "trace";
  std::string method = "auto";
  std::size_t capacity = 1024 * kMiB;
  std::size_t bytes = 64 * kMiB;
  std::size_t pin_piece = 0;  // 0: the pinner's own
  int count = 16;
  double interval_ms = 10;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gpu_late_pin: %s\n"
               "usage: gpu_late_pin [--backend cuda|host] [--pin-piece-mib P] --mode trace\n"
               "                    --method eager|concurrent|sequential|auto|off\n"
               "                    [--capacity-mib B] [--mib S] [--count K] [--interval-ms C]\n"
               "       gpu_late_pin [--backend cuda|host] [--pin-piece-mib P] --mode rates [--mib S]\n",
               why.c_str());
  std::exit(64);
}

Options parse(int argc, char** argv) {
  Options opt;
  for (const auto& [arg, value] : option_pairs(argc, argv, usage)) {
    if (arg == "--backend") opt.backend = value;
    else if (arg == "--mode") opt.mode = value;
    else if (arg == "--method") opt.method = value;
    else if (arg == "--capacity-mib") opt.capacity = std::stoull(value) * kMiB;
    else if (arg == "--mib") opt.bytes = std::stoull(value) * kMiB;
    else if (arg == "--pin-piece-mib") opt.pin_piece = std::stoull(value) * kMiB;
    else if (arg == "--count") opt.count = std::stoi(value);
    else if (arg == "--interval-ms") opt.interval_ms = std::stod(value);
    else usage("unknown option " + std::string(arg));
  }
  if (opt.backend != "cuda" && opt.backend != "host") usage("unknown backend " + opt.backend);
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

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  }
  return out + "\"";
}

// The source of the flushes, `bytes` long, filled before the clock starts as
// an application's device memory would be. Copies are queued by copy() and
// have all landed when wait() returns.
class Source {
 public:
  virtual ~Source() = default;
  virtual void copy(std::byte* target, std::size_t from, std::size_t bytes) = 0;
  virtual void wait() {}
  // ,"device":...: what the JSON output says of the backend besides its name.
  virtual std::string json() const { return ""; }
};

class HostSource : public Source {
 public:
  explicit HostSource(std::size_t bytes) : data_(bytes, std::byte{0x5a}) {}
  void copy(std::byte* target, std::size_t from, std::size_t bytes) override {
    std::memcpy(target, data_.data() + from, bytes);
  }

 private:
  std::vector<std::byte> data_;
};

#ifdef RESURGO_HAVE_CUDA_HEADERS
// Device memory of device 0, whose primary context is current on the
// calling thread (pushed) for the object's lifetime.
class CudaSource : public Source {
 public:
  explicit CudaSource(std::size_t bytes) : context_(0), scope_(context_) {
    check(driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "bench");
    check(driver().cuMemAlloc(&source_, bytes), "cuMemAlloc", std::to_string(bytes) + " bytes");
    check(driver().cuMemsetD8Async(source_, 0x5a, bytes, stream_), "cuMemsetD8Async", "the source");
    wait();
  }
  ~CudaSource() override {
    driver().cuMemFree(source_);
    driver().cuStreamDestroy(stream_);
  }
  CudaSource(const CudaSource&) = delete;
  CudaSource& operator=(const CudaSource&) = delete;

  void copy(std::byte* target, std::size_t from, std::size_t bytes) override {
    check(driver().cuMemcpyDtoHAsync(target, source_ + from, bytes, stream_), "cuMemcpyDtoHAsync",
          std::to_string(bytes) + " bytes");
  }
  void wait() override { check(driver().cuStreamSynchronize(stream_), "cuStreamSynchronize", "bench"); }
  std::string json() const override {
    return ",\"device\":" + json_string(context_.name()) + ",\"driver_version\":" + std::to_string(driver().version());
  }

 private:
  const CudaDriver& driver() const { return context_.driver(); }
  void check(CUresult result, const char* call, const std::string& what) const { driver().check(result, call, what); }

  CudaContext context_;
  CudaContext::Scope scope_;
  CUstream stream_ = nullptr;
  CUdeviceptr source_ = 0;
};
#endif

// Exits with kUnavailable when the backend cannot run here, as gpu_cache does.
std::unique_ptr<Source> open_source(const Options& opt, std::size_t bytes) {
  if (opt.backend == "host") return std::make_unique<HostSource>(bytes);
#ifdef RESURGO_HAVE_CUDA_HEADERS
  if (!CudaDriver::instance().available()) {
    std::fprintf(stderr, "unavailable: %s\n", CudaDriver::instance().why_unavailable().c_str());
    std::exit(kUnavailable);
  }
  return std::make_unique<CudaSource>(bytes);
#else
  std::fprintf(stderr, "unavailable: built without the CUDA headers\n");
  std::exit(kUnavailable);
#endif
}

std::unique_ptr<HostPinner> open_pinner(const Options& opt) {
  std::unique_ptr<HostPinner> pinner = open_host_pinner(opt.backend == "cuda" ? resurgo::DeviceBackend::kCuda
                                                                              : resurgo::DeviceBackend::kHost);
  return in_pieces_of(std::move(pinner), opt.pin_piece);
}

// One flush: the first `bytes` of the source into [base + offset, + bytes),
// one copy per pin piece (counted from base) it spans, then the wait.
void flush(Source& source, std::byte* base, std::size_t offset, std::size_t bytes, std::size_t piece) {
  for_each_pin_piece(offset, bytes, piece, [&](std::uint64_t done, std::uint64_t n) {
    source.copy(base + offset + done, done, n);
  });
  source.wait();
}

// "backend":...,"pinner":...,"pin_piece":N and the source's fields.
std::string json_backend(const Options& opt, const Source& source, const HostPinner& pinner, std::size_t piece) {
  return "\"backend\":" + json_string(opt.backend) + ",\"pinner\":" + json_string(pinner.name()) +
         ",\"pin_piece\":" + std::to_string(piece) + source.json();
}

LatePinOptions options_for(const Options& opt) {
  LatePinOptions options;
  options.capacity = opt.capacity;
  options.flushes_overlap_compute = false;  // the application waits for each flush
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

void run_trace(const Options& opt, Source& source) {
  warm_up(opt.capacity + opt.bytes + 2 * kMiB);
  const auto compute = std::chrono::duration<double, std::milli>(opt.interval_ms);
  std::unique_ptr<HostPinner> pinner = open_pinner(opt);
  const std::size_t piece = pin_piece(*pinner);
  const std::string backend = json_backend(opt, source, *pinner, piece);
  const Clock::time_point start = Clock::now();
  LatePinBuffer buffer(options_for(opt), std::move(pinner), logger());
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
    flush(source, buffer.data(), offset, opt.bytes, piece);
    buffer.flush_ends(offset, opt.bytes);
    const double seconds = since(flush_start);
    buffer.checkpoint_taken(opt.bytes, opt.interval_ms / 1000);
    flushes += seconds;
    if (i == 0) first_flush = seconds;
    offset += opt.bytes;
  }
  const double pass = since(start);
  const bool pinned = buffer.wait_pinned();
  const double settled = since(start);
  const LatePinStats s = buffer.stats();
  std::printf("{\"mode\":\"trace\",%s,\"method\":\"%s\",\"capacity\":%zu,\"bytes\":%zu,\"count\":%d,"
              "\"interval_ms\":%g,\"blocking_seconds\":%.9f,\"construction_seconds\":%.9f,\"flush_seconds\":%.9f,"
              "\"first_flush_seconds\":%.9f,\"pass_seconds\":%.9f,\"pinned\":%s,\"pinned_by_checkpoint\":%d,"
              "\"pinned_seen_seconds\":%.9f,\"settled_seconds\":%.9f,\"touch_seconds\":%.9f,\"pin_seconds\":%.9f,"
              "\"flushes_to_untouched\":%llu,\"bytes_flushed_to_untouched\":%zu,\"strategy\":\"%s\","
              "\"pin_failure\":%s,\"touch_stopped\":%s,\"measured\":%s,\"decision\":%s}\n",
              backend.c_str(), opt.method.c_str(), buffer.capacity(), opt.bytes, opt.count, opt.interval_ms,
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

void run_rates(const Options& opt, Source& source) {
  const std::size_t n = opt.bytes;
  const auto rate = [n](double seconds) { return static_cast<double>(n) / seconds; };
  warm_up(7 * n + 2 * kMiB);
  const std::unique_ptr<HostPinner> pinner = open_pinner(opt);
  const std::size_t piece = pin_piece(*pinner);
  auto copy_into = [&](const Fresh& target) {
    const Clock::time_point start = Clock::now();
    flush(source, target.data(), 0, n, piece);
    return since(start);
  };
  auto pin = [&](const Fresh& target) {
    const Clock::time_point start = Clock::now();
    for (std::size_t at = 0; at < n; at += piece) pinner->pin(target.data() + at, std::min(piece, n - at));
    return since(start);
  };
  auto unpin = [&](const Fresh& target) {
    for (std::size_t at = 0; at < n; at += piece) pinner->unpin(target.data() + at, std::min(piece, n - at));
  };

  const Fresh untouched(n);
  const double flush_untouched = copy_into(untouched);
  const Fresh touched(n);
  const double touch_alone = touched.populate();
  const double flush_touched = copy_into(touched);
  const double pin_touched = pin(touched);
  const double flush_pinned = copy_into(touched);
  unpin(touched);
  const Fresh never_touched(n);
  const double pin_untouched = pin(never_touched);
  unpin(never_touched);

  // A flush into touched pages while a thread touches other fresh pages.
  const Fresh target(n);
  target.populate();
  const Fresh beside(n);
  double touch_concurrent = 0;
  std::thread toucher([&] { touch_concurrent = beside.populate(); });
  const double flush_concurrent = copy_into(target);
  toucher.join();

  // mlock_*: the pinner's rates, whichever it is (the keys predate the cuda backend).
  std::printf("{\"mode\":\"rates\",%s,\"bytes\":%zu,\"touch_alone\":%.6g,\"touch_concurrent\":%.6g,"
              "\"flush_untouched\":%.6g,\"flush_touched\":%.6g,\"flush_concurrent\":%.6g,\"flush_pinned\":%.6g,"
              "\"mlock_touched\":%.6g,\"mlock_untouched\":%.6g}\n",
              json_backend(opt, source, *pinner, piece).c_str(), n, rate(touch_alone), rate(touch_concurrent),
              rate(flush_untouched), rate(flush_touched), rate(flush_concurrent), rate(flush_pinned),
              rate(pin_touched), rate(pin_untouched));
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  if (opt.mode != "trace" && opt.mode != "rates") usage("unknown mode " + opt.mode);
  try {
    const std::unique_ptr<Source> source = open_source(opt, opt.bytes);
    if (opt.mode == "trace") run_trace(opt, *source);
    else run_rates(opt, *source);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpu_late_pin: %s\n", error.what());
    return 2;
  }
  return 0;
}
