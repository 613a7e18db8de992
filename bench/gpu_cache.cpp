// gpu_cache: what the L0 device cache costs the application, for one mode
// and one method (bench/gpu_cache.py runs them all and reports).
//
// Backends: `cuda` (device memory through the driver loaded at run time; the
// cache over CUDA virtual memory management) and `host` (the same cache over
// host memory, baselines with malloc-like memory: the analog that runs
// without a GPU).
//
// Modes (times are what the calling thread is blocked, host clock):
//   capture  --bytes N --iterations I: a fully mapped cache against a bare
//            copy of the same bytes into memory allocated and touched before
//            (cuMemcpyDtoDAsync + cuStreamSynchronize; memcpy on host),
//            interleaved, each version marked flushed at once; and what
//            Store::checkpoint() blocks for the same bytes as a device
//            region (L0 of twice the size, fully mapped; versions kept in
//            the memory level, so no disk; each version settled before the
//            next checkpoint).
//   init     --method incremental|direct --capacity C --chunk K --bytes N:
//            incremental: open the cache, capture one version of N bytes at
//            once, then wait until the whole cache is mapped; direct: one
//            allocation of C and a first-touch memset of it, then the copy of
//            N bytes. The context is created before the clock starts.
//   trace    --method l0|direct|uvm --bytes N --count M --interval-ms T: M
//            checkpoints of N bytes (or, with --sizes-file, one checkpoint per
//            line of the file, of that many bytes), each after T ms of
//            "compute" (a sleep), then every restore in reverse order, back
//            to back. l0: the cache opened before the first compute, of
//            --cache-fraction F of the whole trace (1: large-device, the
//            cache holds it all; below 1: large-host, each version flushed
//            to a host buffer in the background so that the cache may evict
//            it, and evicted versions restored from there); direct: a
//            cuMemAlloc (host: mmap) per checkpoint, no cache; uvm: one
//            cuMemAllocManaged of the whole trace before the first compute
//            (cuda only).
//
// Output: one JSON object on stdout. Exit status 3 and "unavailable: REASON"
// on stderr when the backend is unavailable here.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/log.h"
#include "resurgo/resurgo.hpp"
#include "gpu/device_cache.h"
#include "gpu/host_memory.h"
#ifdef RESURGO_HAVE_CUDA_HEADERS
#include "gpu/cuda_driver.h"
#include "gpu/cuda_vmm_memory.h"
#endif

namespace {

using namespace resurgo::gpu;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMiB = std::size_t{1} << 20;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void* map_host(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes failed");
  return p;
}

// What a mode needs from a backend besides the cache's memory.
class Platform {
 public:
  virtual ~Platform() = default;
  virtual std::unique_ptr<DeviceMemory> cache_memory() = 0;
  virtual void* allocate(std::size_t bytes) = 0;  // not touched
  virtual void release(void* pointer, std::size_t bytes) = 0;
  virtual void fill(void* pointer, std::size_t bytes, int value) = 0;  // and wait
  virtual void copy(void* target, const void* source, std::size_t bytes) = 0;  // and wait
  // From (pageable) host memory into memory from allocate(), and wait.
  virtual void copy_from_host(void* target, const void* source, std::size_t bytes) = 0;
  // Managed (UVM) memory, or nullptr where the backend has none.
  virtual void* allocate_managed(std::size_t) { return nullptr; }
};

class HostPlatform : public Platform {
 public:
  std::unique_ptr<DeviceMemory> cache_memory() override { return std::make_unique<HostMemory>(); }
  void* allocate(std::size_t bytes) override { return map_host(bytes); }
  void release(void* pointer, std::size_t bytes) override { ::munmap(pointer, bytes); }
  void fill(void* pointer, std::size_t bytes, int value) override { std::memset(pointer, value, bytes); }
  void copy(void* target, const void* source, std::size_t bytes) override { std::memcpy(target, source, bytes); }
  void copy_from_host(void* target, const void* source, std::size_t bytes) override {
    std::memcpy(target, source, bytes);
  }
};

#ifdef RESURGO_HAVE_CUDA_HEADERS
class CudaPlatform : public Platform {
 public:
  CudaPlatform() : driver_(CudaDriver::instance()) {
    driver_.require();
    driver_.check(driver_.cuDeviceGet(&device_, 0), "cuDeviceGet", "device 0");
    driver_.check(driver_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain", "device 0");
    driver_.check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent", "device 0");
    driver_.check(driver_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "bench");
  }
  std::unique_ptr<DeviceMemory> cache_memory() override { return std::make_unique<CudaVmmMemory>(0); }
  void* allocate(std::size_t bytes) override {
    CUdeviceptr p = 0;
    driver_.check(driver_.cuMemAlloc(&p, bytes), "cuMemAlloc", std::to_string(bytes) + " bytes");
    return reinterpret_cast<void*>(p);
  }
  void* allocate_managed(std::size_t bytes) override {
    CUdeviceptr p = 0;
    driver_.check(driver_.cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged",
                  std::to_string(bytes) + " bytes");
    return reinterpret_cast<void*>(p);
  }
  void release(void* pointer, std::size_t) override { driver_.cuMemFree(reinterpret_cast<CUdeviceptr>(pointer)); }
  void fill(void* pointer, std::size_t bytes, int value) override {
    driver_.check(driver_.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(pointer), static_cast<unsigned char>(value),
                                          bytes, stream_),
                  "cuMemsetD8Async", "bench");
    sync();
  }
  void copy(void* target, const void* source, std::size_t bytes) override {
    driver_.check(driver_.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(target),
                                            reinterpret_cast<CUdeviceptr>(source), bytes, stream_),
                  "cuMemcpyDtoDAsync", "bench");
    sync();
  }
  void copy_from_host(void* target, const void* source, std::size_t bytes) override {
    driver_.check(driver_.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(target), source, bytes, stream_),
                  "cuMemcpyHtoDAsync", "bench");
    sync();
  }

 private:
  void sync() { driver_.check(driver_.cuStreamSynchronize(stream_), "cuStreamSynchronize", "bench"); }
  const CudaDriver& driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
};
#endif

struct Options {
  std::string backend = "host";
  std::string mode = "capture";
  std::string method;
  std::size_t bytes = 128 * kMiB;
  std::size_t capacity = 0;
  std::size_t chunk = 1024 * kMiB;
  int iterations = 20;
  int count = 256;
  double interval_ms = 10;
  std::string sizes_file;  // trace: one checkpoint size in bytes per line, in place of --mib and --count
  double cache_fraction = 1;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gpu_cache: %s\n"
               "usage: gpu_cache --backend cuda|host --mode capture|init|trace [--method M] [--mib N]\n"
               "                 [--capacity-mib C] [--chunk-mib K] [--iterations I] [--count M]\n"
               "                 [--interval-ms T] [--sizes-file PATH] [--cache-fraction F]\n",
               why.c_str());
  std::exit(64);
}

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) usage("missing value after " + std::string(arg));
    const std::string value = argv[++i];
    if (arg == "--backend") opt.backend = value;
    else if (arg == "--mode") opt.mode = value;
    else if (arg == "--method") opt.method = value;
    else if (arg == "--mib") opt.bytes = std::stoull(value) * kMiB;
    else if (arg == "--capacity-mib") opt.capacity = std::stoull(value) * kMiB;
    else if (arg == "--chunk-mib") opt.chunk = std::stoull(value) * kMiB;
    else if (arg == "--iterations") opt.iterations = std::stoi(value);
    else if (arg == "--count") opt.count = std::stoi(value);
    else if (arg == "--interval-ms") opt.interval_ms = std::stod(value);
    else if (arg == "--sizes-file") opt.sizes_file = value;
    else if (arg == "--cache-fraction") opt.cache_fraction = std::stod(value);
    else usage("unknown option " + std::string(arg));
  }
  if (!(opt.cache_fraction > 0 && opt.cache_fraction <= 1)) usage("--cache-fraction must be in (0, 1]");
  return opt;
}

std::string json_list(const std::vector<double>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void require_cached(const CaptureResult& result, std::int64_t version) {
  if (result.status != CaptureResult::Status::kCached) {
    throw std::runtime_error("version " + std::to_string(version) + " was not cached");
  }
}

const resurgo::Logger& logger() {
  static const resurgo::Logger log("gpu_cache", resurgo::LogLevel::kWarn);
  return log;
}

// A Store whose one device region is `source`: L0 of twice the version,
// versions kept in memory (L1) only, in a fresh directory for its lock.
std::unique_ptr<resurgo::Store> device_store(const Options& opt, void* source, const std::string& directory) {
  auto store = std::make_unique<resurgo::Store>(
      "gpu_cache", resurgo::Config::load("", {{"local.path", directory},
                                               {"local.every", "0"},
                                               {"persistent.every", "0"},
                                               {"memory.every", "1"},
                                               {"memory.keep", "1"},
                                               {"memory.capacity", std::to_string(4 * opt.bytes + (64 << 20))},
                                               {"device.backend", opt.backend},
                                               {"device.capacity", std::to_string(2 * opt.bytes)},
                                               {"device.chunk", std::to_string(opt.chunk)},
                                               {"log.level", "warn"}}));
  store->protect_device(0, source, opt.bytes, "field");
  return store;
}

void run_capture(Platform& platform, const Options& opt) {
  void* source = platform.allocate(opt.bytes);
  void* bare = platform.allocate(opt.bytes);
  platform.fill(source, opt.bytes, 0x5a);
  platform.fill(bare, opt.bytes, 0);
  DeviceCacheOptions cache_options;
  cache_options.capacity = 2 * opt.bytes;
  cache_options.chunk = opt.chunk;
  DeviceCache cache(platform.cache_memory(), cache_options, logger());
  cache.wait_growth_done();
  char directory[] = "/tmp/gpu_cache-XXXXXX";
  if (::mkdtemp(directory) == nullptr) throw std::runtime_error("mkdtemp failed");
  std::unique_ptr<resurgo::Store> store = device_store(opt, source, directory);
  std::vector<double> captures, checkpoints, copies;
  const int warm_up = 2;
  for (int i = 0; i < warm_up + opt.iterations; ++i) {
    Clock::time_point start = Clock::now();
    const CaptureResult result = cache.capture(i, {{source, opt.bytes}});
    const double capture_seconds = since(start);
    require_cached(result, i);
    cache.flushed(i);
    start = Clock::now();
    store->checkpoint(i);
    const double checkpoint_seconds = since(start);
    store->wait(resurgo::kAllVersions, resurgo::kL1);
    start = Clock::now();
    platform.copy(bare, source, opt.bytes);
    const double copy_seconds = since(start);
    if (i < warm_up) continue;
    captures.push_back(capture_seconds);
    checkpoints.push_back(checkpoint_seconds);
    copies.push_back(copy_seconds);
  }
  store.reset();
  std::filesystem::remove_all(directory);
  std::printf("{\"mode\":\"capture\",\"bytes\":%zu,\"capture_median\":%.9f,\"checkpoint_median\":%.9f,"
              "\"bare_median\":%.9f,\"capture\":%s,\"checkpoint\":%s,\"bare\":%s,\"evicted\":%llu}\n",
              opt.bytes, median(captures), median(checkpoints), median(copies), json_list(captures).c_str(),
              json_list(checkpoints).c_str(), json_list(copies).c_str(),
              static_cast<unsigned long long>(cache.stats().evicted));
  platform.release(source, opt.bytes);
  platform.release(bare, opt.bytes);
}

void run_init(Platform& platform, const Options& opt) {
  void* source = platform.allocate(opt.bytes);
  platform.fill(source, opt.bytes, 0x5a);
  double usable = 0, first_capture = 0, first_wait = 0;
  if (opt.method == "incremental") {
    DeviceCacheOptions cache_options;
    cache_options.capacity = opt.capacity;
    cache_options.chunk = opt.chunk;
    const Clock::time_point start = Clock::now();
    DeviceCache cache(platform.cache_memory(), cache_options, logger());
    const Clock::time_point capture_start = Clock::now();
    const CaptureResult result = cache.capture(0, {{source, opt.bytes}});
    first_capture = since(capture_start);
    first_wait = result.map_wait_seconds;
    require_cached(result, 0);
    cache.wait_growth_done();
    usable = since(start);
    if (cache.stats().mapped != cache.stats().capacity) throw std::runtime_error("the cache was not fully mapped");
  } else if (opt.method == "direct") {
    const Clock::time_point start = Clock::now();
    void* whole = platform.allocate(opt.capacity);
    platform.fill(whole, opt.capacity, 0);
    usable = since(start);
    const Clock::time_point copy_start = Clock::now();
    platform.copy(whole, source, opt.bytes);
    first_capture = usable + since(copy_start);  // the first checkpoint waits for all of it
    first_wait = usable;
    platform.release(whole, opt.capacity);
  } else {
    usage("init takes --method incremental|direct");
  }
  std::printf("{\"mode\":\"init\",\"method\":\"%s\",\"capacity\":%zu,\"chunk\":%zu,\"bytes\":%zu,"
              "\"usable_seconds\":%.9f,\"first_capture_seconds\":%.9f,\"first_wait_seconds\":%.9f}\n",
              opt.method.c_str(), opt.capacity, opt.chunk, opt.bytes, usable, first_capture, first_wait);
  platform.release(source, opt.bytes);
}

// --sizes-file: one checkpoint size in bytes per line.
std::vector<std::size_t> read_sizes(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = 0; in >> bytes;) sizes.push_back(bytes);
  if (!in.eof() || sizes.empty() || std::count(sizes.begin(), sizes.end(), 0) != 0) {
    usage("--sizes-file " + path + ": expected one positive byte count per line");
  }
  return sizes;
}

// The versions of a trace one after the other, each starting on the 256-byte
// boundary the cache starts a version on (device_cache.cpp), so that a cache
// of `total` bytes holds them all.
struct TraceLayout {
  std::vector<std::size_t> sizes;
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
  std::size_t largest = 0;
};

TraceLayout trace_layout(const Options& opt) {
  constexpr std::size_t kAlignment = 256;
  TraceLayout layout;
  layout.sizes = opt.sizes_file.empty() ? std::vector<std::size_t>(static_cast<std::size_t>(opt.count), opt.bytes)
                                        : read_sizes(opt.sizes_file);
  for (std::size_t bytes : layout.sizes) {
    layout.offsets.push_back(layout.total);
    layout.total += (bytes + kAlignment - 1) / kAlignment * kAlignment;
    layout.largest = std::max(layout.largest, bytes);
  }
  return layout;
}

// What a trace method tells besides its blocking times.
struct TraceCounters {
  std::size_t cache_capacity = 0;
  std::uint64_t evicted = 0;
  double map_wait_seconds = 0;
  double flush_wait_seconds = 0;
  std::size_t restored_from_host = 0;
};

// One way of keeping the versions of a trace: where version v goes, and how
// it comes back into the application's region.
class TraceMethod {
 public:
  virtual ~TraceMethod() = default;
  virtual void checkpoint(std::size_t v) = 0;
  virtual void restore(std::size_t v) = 0;
  virtual TraceCounters counters() const { return {}; }
};

// The next level of the l0 method when the cache holds only part of the
// trace (large-host): a host buffer with a slot per version. A background
// thread copies each version out of the cache once it is captured, then
// marks it flushed, which is what lets the cache evict it. The buffer is
// pageable and not touched before: the flusher faults its pages in, off the
// application's thread.
class Flusher {
 public:
  Flusher(DeviceCache& cache, const TraceLayout& layout)
      : cache_(cache),
        layout_(layout),
        buffer_(static_cast<char*>(map_host(layout.total))),
        thread_([this] { run(); }) {}
  ~Flusher() {  // what is not flushed by now is not needed any more
    captured_.store(kStop);
    captured_.notify_one();
    thread_.join();
    ::munmap(buffer_, layout_.total);
  }
  Flusher(const Flusher&) = delete;
  Flusher& operator=(const Flusher&) = delete;
  void captured(std::size_t v) {
    captured_.store(v + 1);
    captured_.notify_one();
  }
  const char* slot(std::size_t v) const { return buffer_ + layout_.offsets[v]; }

 private:
  static constexpr std::size_t kStop = SIZE_MAX;
  void run() {
    for (std::size_t v = 0; v < layout_.sizes.size(); ++v) {
      std::size_t seen = captured_.load();
      for (; seen != kStop && seen <= v; seen = captured_.load()) captured_.wait(seen);
      if (seen == kStop) return;
      cache_.read(v, 0, buffer_ + layout_.offsets[v], layout_.sizes[v]);
      cache_.flushed(v);
    }
  }
  DeviceCache& cache_;
  const TraceLayout& layout_;
  char* const buffer_;
  std::atomic<std::size_t> captured_{0};  // versions captured so far, or kStop
  std::thread thread_;
};

// The L0 cache, opened before the first compute, of --cache-fraction of the
// trace but never less than its largest version (which could not be cached
// otherwise). Below 1 a Flusher lets it evict, and an evicted version is
// restored from the host buffer: no prefetch back into the cache.
class L0Trace : public TraceMethod {
 public:
  L0Trace(Platform& platform, const Options& opt, const TraceLayout& layout, void* state)
      : platform_(platform), layout_(layout), state_(state),
        cache_(platform.cache_memory(), cache_options(opt, layout), logger()) {
    if (opt.cache_fraction < 1) flusher_ = std::make_unique<Flusher>(cache_, layout);
  }
  void checkpoint(std::size_t v) override {
    require_cached(cache_.capture(v, {{state_, layout_.sizes[v]}}), v);
    if (flusher_) flusher_->captured(v);
  }
  void restore(std::size_t v) override {
    if (cache_.contains(v)) {
      cache_.read(v, 0, state_, layout_.sizes[v]);
      return;
    }
    platform_.copy_from_host(state_, flusher_->slot(v), layout_.sizes[v]);
    restored_from_host_++;
  }
  TraceCounters counters() const override {
    const DeviceCacheStats stats = cache_.stats();
    return {stats.capacity, stats.evicted, stats.map_wait_seconds, stats.flush_wait_seconds, restored_from_host_};
  }

 private:
  static DeviceCacheOptions cache_options(const Options& opt, const TraceLayout& layout) {
    DeviceCacheOptions options;
    const auto part = static_cast<std::size_t>(std::ceil(opt.cache_fraction * static_cast<double>(layout.total)));
    options.capacity = std::max(part, layout.largest);
    options.chunk = opt.chunk;
    return options;
  }
  Platform& platform_;
  const TraceLayout& layout_;
  void* const state_;
  DeviceCache cache_;
  std::unique_ptr<Flusher> flusher_;  // declared after the cache it reads: destroyed first
  std::size_t restored_from_host_ = 0;
};

// A cuMemAlloc (host: mmap) per checkpoint, no cache.
class DirectTrace : public TraceMethod {
 public:
  DirectTrace(Platform& platform, const TraceLayout& layout, void* state)
      : platform_(platform), layout_(layout), state_(state) {}
  ~DirectTrace() override {
    for (std::size_t v = 0; v < slots_.size(); ++v) platform_.release(slots_[v], layout_.sizes[v]);
  }
  void checkpoint(std::size_t v) override {
    slots_.push_back(platform_.allocate(layout_.sizes[v]));
    platform_.copy(slots_.back(), state_, layout_.sizes[v]);
  }
  void restore(std::size_t v) override { platform_.copy(state_, slots_[v], layout_.sizes[v]); }

 private:
  Platform& platform_;
  const TraceLayout& layout_;
  void* const state_;
  std::vector<void*> slots_;
};

// One cuMemAllocManaged of the whole trace before the first compute.
class ManagedTrace : public TraceMethod {
 public:
  ManagedTrace(Platform& platform, const Options& opt, const TraceLayout& layout, void* state)
      : platform_(platform), layout_(layout), state_(state),
        managed_(static_cast<char*>(platform.allocate_managed(layout.total))) {
    if (managed_ == nullptr) {
      std::fprintf(stderr, "unavailable: the %s backend has no managed memory\n", opt.backend.c_str());
      std::exit(3);
    }
  }
  ~ManagedTrace() override { platform_.release(managed_, layout_.total); }
  void checkpoint(std::size_t v) override { platform_.copy(managed_ + layout_.offsets[v], state_, layout_.sizes[v]); }
  void restore(std::size_t v) override { platform_.copy(state_, managed_ + layout_.offsets[v], layout_.sizes[v]); }

 private:
  Platform& platform_;
  const TraceLayout& layout_;
  void* const state_;
  char* const managed_;
};

std::unique_ptr<TraceMethod> trace_method(Platform& platform, const Options& opt, const TraceLayout& layout,
                                          void* state) {
  if (opt.method == "l0") return std::make_unique<L0Trace>(platform, opt, layout, state);
  if (opt.method == "direct") return std::make_unique<DirectTrace>(platform, layout, state);
  if (opt.method == "uvm") return std::make_unique<ManagedTrace>(platform, opt, layout, state);
  usage("trace takes --method l0|direct|uvm");
}

void run_trace(Platform& platform, const Options& opt) {
  const TraceLayout layout = trace_layout(opt);
  const std::size_t count = layout.sizes.size();
  void* state = platform.allocate(layout.largest);  // the application's region
  platform.fill(state, layout.largest, 0x5a);
  std::unique_ptr<TraceMethod> method = trace_method(platform, opt, layout, state);
  const auto compute = std::chrono::duration<double, std::milli>(opt.interval_ms);
  std::vector<double> checkpoints, restores;
  for (std::size_t v = 0; v < count; ++v) {
    std::this_thread::sleep_for(compute);
    const Clock::time_point start = Clock::now();
    method->checkpoint(v);
    checkpoints.push_back(since(start));
  }
  for (std::size_t v = count; v-- > 0;) {  // no compute between restores: nothing grows in the background then
    const Clock::time_point start = Clock::now();
    method->restore(v);
    restores.push_back(since(start));
  }
  double checkpoint_total = 0, restore_total = 0;
  for (double s : checkpoints) checkpoint_total += s;
  for (double s : restores) restore_total += s;
  const TraceCounters c = method->counters();
  std::printf("{\"mode\":\"trace\",\"method\":\"%s\",\"bytes\":%zu,\"count\":%zu,\"total_bytes\":%zu,"
              "\"interval_ms\":%g,\"cache_fraction\":%g,\"cache_capacity\":%zu,\"checkpoint_seconds\":%.9f,"
              "\"restore_seconds\":%.9f,\"map_wait_seconds\":%.9f,\"flush_wait_seconds\":%.9f,"
              "\"first_checkpoint_seconds\":%.9f,\"evicted\":%llu,\"restored_from_host\":%zu}\n",
              opt.method.c_str(), layout.largest, count, layout.total, opt.interval_ms, opt.cache_fraction,
              c.cache_capacity, checkpoint_total, restore_total, c.map_wait_seconds, c.flush_wait_seconds,
              checkpoints.front(), static_cast<unsigned long long>(c.evicted), c.restored_from_host);
  method.reset();
  platform.release(state, layout.largest);
}

std::unique_ptr<Platform> open_platform(const std::string& backend) {
  if (backend == "host") return std::make_unique<HostPlatform>();
  if (backend != "cuda") usage("unknown backend " + backend);
#ifdef RESURGO_HAVE_CUDA_HEADERS
  if (!CudaDriver::instance().available()) {
    std::fprintf(stderr, "unavailable: %s\n", CudaDriver::instance().why_unavailable().c_str());
    std::exit(3);
  }
  return std::make_unique<CudaPlatform>();
#else
  std::fprintf(stderr, "unavailable: built without the CUDA headers\n");
  std::exit(3);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    std::unique_ptr<Platform> platform = open_platform(opt.backend);
    if (opt.mode == "capture") run_capture(*platform, opt);
    else if (opt.mode == "init") run_init(*platform, opt);
    else if (opt.mode == "trace") run_trace(*platform, opt);
    else usage("unknown mode " + opt.mode);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpu_cache: %s\n", error.what());
    return 2;
  }
  return 0;
}
