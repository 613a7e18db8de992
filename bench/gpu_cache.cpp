// gpu_cache: what the L0 device cache costs the application, for one mode
// and one method (bench/gpu_cache.py runs them all and reports), against the
// baselines of the HiPC'22 cache-allocation paper (section V-B).
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
//   trace    --method l0|direct|memset|direct-each|uvm --bytes N --count M
//            --interval-ms T: M checkpoints of N bytes (or, with --sizes-file,
//            one checkpoint per line of the file, of that many bytes), each
//            after T ms of "compute" (a sleep), then every restore in reverse
//            order, back to back. The method is set up after the first
//            compute, on the clock: the first checkpoint waits for what the
//            method prepares up front. A device buffer of --cache-fraction F
//            of the trace (1: large-device, it holds the whole trace; below
//            1: large-host, behind it a host buffer of the whole trace, each
//            version flushed there in the background so that the device
//            buffer may evict it, and evicted versions restored from there):
//              l0      the L0 cache (VMM, mapped chunk by chunk in the
//                      background) over a LatePinBuffer (touched ahead,
//                      pinned once touched; --touch auto|concurrent|sequential);
//              direct  the paper's baseline: one cuMemAlloc of the device
//                      buffer, set to zero, and one cuMemHostAlloc of the host
//                      buffer (host: mmap, memset; mmap MAP_POPULATE + mlock);
//              memset  the paper's incremental memset: the device buffer as
//                      direct, the host buffer of 4 KiB pages set to zero by a
//                      thread ahead of the flushes, which wait for their pages,
//                      then registered (pinned) in pieces once all are set;
//              direct-each  a cuMemAlloc (host: mmap) per checkpoint, no cache;
//              uvm     one cuMemAllocManaged of the whole trace, the next
//                      version to restore prefetched to the device
//                      (cuMemPrefetchAsync, where the driver has it) during
//                      each restore (cuda only).
//            The host buffers pinned in pieces (l0, memset) are pinned in
//            pieces of at most --pin-piece-mib P (default: the pinner's own,
//            1 GiB with CUDA); a flush into them or a restore out of them is
//            one copy per piece it spans (the driver refuses a copy over two
//            registrations).
//   prefetch --bytes N --count M --interval-ms T: the backward pass through a
//            Store: M checkpoints of a device region into an L0 of two
//            versions (the memory level keeps all), then prefetch() of the
//            reverse order and each restart() after T ms of compute, followed
//            by discard(); the restarts of versions staged by the prefetch
//            against a bare device-to-device copy of the same bytes.
//
// Output: one JSON object on stdout. Exit status 3 and "unavailable: REASON"
// on stderr when the backend is unavailable here.
#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/log.h"
#include "gpu/device_access.h"
#include "gpu/device_cache.h"
#include "gpu/host_memory.h"
#include "gpu/host_pinner.h"
#include "gpu/late_pin_buffer.h"
#include "option_pairs.h"
#include "piece_pinner.h"
#include "resurgo/device_stats.hpp"
#include "resurgo/resurgo.hpp"
#ifdef RESURGO_HAVE_CUDA_HEADERS
#include "gpu/cuda_driver.h"
#include "gpu/cuda_vmm_memory.h"
#endif

namespace {

using namespace resurgo::gpu;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMiB = std::size_t{1} << 20;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void* map_host(std::size_t bytes, int flags = 0) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes failed");
  return p;
}

// The stream a copy runs on: captures and restores on the application's
// thread, flushes on a background one beside them.
enum class Lane { kCapture, kRead };

// What a mode needs from a backend besides the cache's memory.
class Platform {
 public:
  virtual ~Platform() = default;
  virtual std::unique_ptr<DeviceMemory> cache_memory() = 0;
  virtual std::unique_ptr<HostPinner> pinner() = 0;
  virtual void* allocate(std::size_t bytes) = 0;  // not touched
  virtual void release(void* pointer, std::size_t bytes) = 0;
  virtual void fill(void* pointer, std::size_t bytes, int value) = 0;  // and wait
  // Between any two of device, pinned and pageable memory, and wait.
  virtual void copy(void* target, const void* source, std::size_t bytes, Lane lane = Lane::kCapture) = 0;
  // Host memory pinned as it is allocated (cuMemHostAlloc), every page there.
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void release_pinned(void* pointer, std::size_t bytes) = 0;
  // Managed (UVM) memory, or nullptr where the backend has none.
  virtual void* allocate_managed(std::size_t) { return nullptr; }
  // Starts moving managed memory to the device without waiting; false where
  // the driver cannot.
  virtual bool prefetch_to_device(void*, std::size_t) { return false; }
};

class HostPlatform : public Platform {
 public:
  std::unique_ptr<DeviceMemory> cache_memory() override { return std::make_unique<HostMemory>(); }
  std::unique_ptr<HostPinner> pinner() override { return open_host_pinner(resurgo::DeviceBackend::kHost); }
  void* allocate(std::size_t bytes) override { return map_host(bytes); }
  void release(void* pointer, std::size_t bytes) override { ::munmap(pointer, bytes); }
  void fill(void* pointer, std::size_t bytes, int value) override { std::memset(pointer, value, bytes); }
  void copy(void* target, const void* source, std::size_t bytes, Lane) override {
    std::memcpy(target, source, bytes);
  }
  // Populated at once; locked too where RLIMIT_MEMLOCK allows (a refused
  // mlock leaves the pages there, unlocked: the analog's pinning is only
  // that they are there).
  void* allocate_pinned(std::size_t bytes) override {
    void* p = map_host(bytes, MAP_POPULATE);
    (void)::mlock(p, bytes);
    return p;
  }
  void release_pinned(void* pointer, std::size_t bytes) override { ::munmap(pointer, bytes); }
};

#ifdef RESURGO_HAVE_CUDA_HEADERS
// cuMemPrefetchAsync, which the library's loader does not list: asked of the
// loaded driver in its CUDA 8 variant (a device ordinal as destination);
// nullptr where the driver has none (the test fake).
using PrefetchAsync = CUresult (*)(CUdeviceptr, std::size_t, CUdevice, CUstream);

PrefetchAsync find_prefetch_async() {
  using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return nullptr;
  auto get_proc_address = reinterpret_cast<GetProcAddress>(::dlsym(library, "cuGetProcAddress_v2"));
  void* entry = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get_proc_address == nullptr ||
      get_proc_address("cuMemPrefetchAsync", &entry, 8000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
      status != CU_GET_PROC_ADDRESS_SUCCESS) {
    return nullptr;
  }
  return reinterpret_cast<PrefetchAsync>(entry);
}

class CudaPlatform : public Platform {
 public:
  CudaPlatform() : driver_(CudaDriver::instance()) {
    driver_.require();
    driver_.check(driver_.cuDeviceGet(&device_, 0), "cuDeviceGet", "device 0");
    driver_.check(driver_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain", "device 0");
    driver_.check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent", "device 0");
    for (CUstream& stream : streams_) {
      driver_.check(driver_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "bench");
    }
  }
  std::unique_ptr<DeviceMemory> cache_memory() override { return std::make_unique<CudaVmmMemory>(0); }
  std::unique_ptr<HostPinner> pinner() override { return open_host_pinner(resurgo::DeviceBackend::kCuda); }
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
  void* allocate_pinned(std::size_t bytes) override {
    void* p = nullptr;
    driver_.check(driver_.cuMemHostAlloc(&p, bytes, 0), "cuMemHostAlloc", std::to_string(bytes) + " bytes");
    return p;
  }
  void release_pinned(void* pointer, std::size_t) override { driver_.cuMemFreeHost(pointer); }
  void fill(void* pointer, std::size_t bytes, int value) override {
    driver_.check(driver_.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(pointer), static_cast<unsigned char>(value),
                                          bytes, streams_[0]),
                  "cuMemsetD8Async", "bench");
    sync(streams_[0]);
  }
  void copy(void* target, const void* source, std::size_t bytes, Lane lane) override;
  bool prefetch_to_device(void* pointer, std::size_t bytes) override {
    if (prefetch_async_ == nullptr) return false;
    driver_.check(prefetch_async_(reinterpret_cast<CUdeviceptr>(pointer), bytes, device_, streams_[1]),
                  "cuMemPrefetchAsync", std::to_string(bytes) + " bytes to device 0");
    return true;
  }

 private:
  // Pageable host memory is unknown to the driver: the query fails for it.
  bool on_device(const void* pointer) const {
    CUmemorytype kind = CU_MEMORYTYPE_HOST;
    return driver_.cuPointerGetAttribute(&kind, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                         reinterpret_cast<CUdeviceptr>(pointer)) == CUDA_SUCCESS &&
           kind == CU_MEMORYTYPE_DEVICE;
  }
  void sync(CUstream stream) { driver_.check(driver_.cuStreamSynchronize(stream), "cuStreamSynchronize", "bench"); }
  const CudaDriver& driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream streams_[2] = {nullptr, nullptr};  // by Lane
  const PrefetchAsync prefetch_async_ = find_prefetch_async();
};

void CudaPlatform::copy(void* target, const void* source, std::size_t bytes, Lane lane) {
  driver_.check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent", "device 0");  // flushes: another thread
  CUstream stream = streams_[lane == Lane::kRead ? 1 : 0];
  const auto to = reinterpret_cast<CUdeviceptr>(target);
  const auto from = reinterpret_cast<CUdeviceptr>(source);
  const bool to_device = on_device(target);
  const bool from_device = on_device(source);
  const std::string what = std::to_string(bytes) + " bytes";
  if (to_device && from_device) {
    driver_.check(driver_.cuMemcpyDtoDAsync(to, from, bytes, stream), "cuMemcpyDtoDAsync", what);
  } else if (to_device) {
    driver_.check(driver_.cuMemcpyHtoDAsync(to, source, bytes, stream), "cuMemcpyHtoDAsync", what);
  } else if (from_device) {
    driver_.check(driver_.cuMemcpyDtoHAsync(target, from, bytes, stream), "cuMemcpyDtoHAsync", what);
  } else {
    std::memcpy(target, source, bytes);
  }
  sync(stream);
}
#endif

// The paper's direct allocation of the device buffer: one allocation of the
// whole capacity (cuMemAlloc; host: mmap), set to zero before the first
// version can use it, so the cache's mapping thread finds nothing to do.
class PreallocatedMemory : public DeviceMemory {
 public:
  explicit PreallocatedMemory(Platform& platform) : platform_(platform) {}
  ~PreallocatedMemory() override {
    if (base_ != nullptr) platform_.release(base_, bytes_);
  }
  std::string name() const override { return "one allocation"; }
  int device() const override { return 0; }
  std::size_t granularity() const override { return 4096; }
  void reserve(std::size_t bytes) override {
    base_ = static_cast<char*>(platform_.allocate(bytes));
    bytes_ = bytes;
    platform_.fill(base_, bytes, 0);
  }
  MapResult map(std::size_t, std::size_t) override { return MapResult::kMapped; }
  void copy_in(std::size_t offset, const void* source, std::size_t bytes) override {
    platform_.copy(base_ + offset, source, bytes, Lane::kCapture);
  }
  void wait_copies_in() override {}
  void copy_out(std::size_t offset, void* target, std::size_t bytes) override {
    platform_.copy(target, base_ + offset, bytes, Lane::kRead);
  }

 private:
  Platform& platform_;
  char* base_ = nullptr;
  std::size_t bytes_ = 0;
};

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
  std::string touch = "auto";  // trace, l0: the LatePinBuffer's touch strategy
  std::size_t pin_piece = 0;   // trace: host buffers pinned in pieces of this (0: the pinner's own)
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gpu_cache: %s\n"
               "usage: gpu_cache --backend cuda|host --mode capture|init|trace|prefetch [--method M] [--mib N]\n"
               "                 [--capacity-mib C] [--chunk-mib K] [--iterations I] [--count M]\n"
               "                 [--interval-ms T] [--sizes-file PATH] [--cache-fraction F]\n"
               "                 [--touch auto|concurrent|sequential] [--pin-piece-mib P]\n",
               why.c_str());
  std::exit(64);
}

Options parse(int argc, char** argv) {
  Options opt;
  for (const auto& [arg, value] : option_pairs(argc, argv, usage)) {
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
    else if (arg == "--touch") opt.touch = value;
    else if (arg == "--pin-piece-mib") opt.pin_piece = std::stoull(value) * kMiB;
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
// `keep` versions kept in memory (L1) only, in a fresh directory for its lock.
std::unique_ptr<resurgo::Store> device_store(const Options& opt, void* source, const std::string& directory,
                                             int keep) {
  const std::size_t memory = (static_cast<std::size_t>(keep) + 3) * opt.bytes + (64 << 20);
  auto store = std::make_unique<resurgo::Store>(
      "gpu_cache", resurgo::Config::load("", {{"local.path", directory},
                                               {"local.every", "0"},
                                               {"persistent.every", "0"},
                                               {"memory.every", "1"},
                                               {"memory.keep", std::to_string(keep)},
                                               {"memory.capacity", std::to_string(memory)},
                                               {"device.backend", opt.backend},
                                               {"device.capacity", std::to_string(2 * opt.bytes)},
                                               {"device.chunk", std::to_string(opt.chunk)},
                                               {"log.level", "warn"}}));
  store->protect_device(0, source, opt.bytes, "field");
  return store;
}

// A fresh directory under /tmp for one Store, removed with everything in it.
class TempDirectory {
 public:
  TempDirectory() {
    if (::mkdtemp(path_) == nullptr) throw std::runtime_error("mkdtemp failed");
  }
  ~TempDirectory() { std::filesystem::remove_all(path_); }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  std::string path() const { return path_; }

 private:
  char path_[32] = "/tmp/gpu_cache-XXXXXX";
};

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
  const TempDirectory directory;
  std::unique_ptr<resurgo::Store> store = device_store(opt, source, directory.path(), 1);
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
  bool host_pinned = false;  // the host buffer was pinned by the end of the checkpoints
  bool prefetched = false;   // uvm: the restores prefetched the next version
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

// The host buffer behind a device buffer that holds part of the trace
// (large-host): a slot per version at the trace layout's offsets.
class HostBuffer {
 public:
  virtual ~HostBuffer() = default;
  virtual char* data() = 0;
  // No copy into or out of the buffer spans a multiple of this (pin pieces:
  // the driver refuses a copy over two registrations, gpu_driver_probe).
  virtual std::size_t piece() const { return SIZE_MAX; }
  virtual void flush_begins(std::size_t /*offset*/, std::size_t /*bytes*/) {}
  virtual void flush_ends(std::size_t /*offset*/, std::size_t /*bytes*/) {}
  virtual void checkpoint_taken(std::size_t /*bytes*/, double /*compute_seconds*/) {}
  virtual bool pinned() const = 0;
};

// Ours: the library's buffer that touches ahead and pins late.
class LatePinHost : public HostBuffer {
 public:
  LatePinHost(Platform& platform, const Options& opt, std::size_t bytes)
      : buffer_(options(opt, bytes), in_pieces_of(platform.pinner(), opt.pin_piece), logger()) {}
  char* data() override { return reinterpret_cast<char*>(buffer_.data()); }
  std::size_t piece() const override { return buffer_.pin_piece(); }
  void flush_begins(std::size_t offset, std::size_t bytes) override { buffer_.flush_begins(offset, bytes); }
  void flush_ends(std::size_t offset, std::size_t bytes) override { buffer_.flush_ends(offset, bytes); }
  void checkpoint_taken(std::size_t bytes, double compute_seconds) override {
    buffer_.checkpoint_taken(bytes, compute_seconds);
  }
  bool pinned() const override { return buffer_.pinned(); }

 private:
  static LatePinOptions options(const Options& opt, std::size_t bytes) {
    resurgo::Config config;
    config.set("buffer.touch", opt.touch);  // auto | concurrent | sequential
    LatePinOptions options;
    options.capacity = bytes;
    options.touch = config.buffer.touch;
    return options;
  }
  LatePinBuffer buffer_;
};

// The paper's direct pin: allocated pinned (cuMemHostAlloc) before the
// first version.
class PinnedHost : public HostBuffer {
 public:
  PinnedHost(Platform& platform, std::size_t bytes)
      : platform_(platform), bytes_(bytes), data_(static_cast<char*>(platform.allocate_pinned(bytes))) {}
  ~PinnedHost() override { platform_.release_pinned(data_, bytes_); }
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  char* data() override { return data_; }
  bool pinned() const override { return true; }

 private:
  Platform& platform_;
  const std::size_t bytes_;
  char* const data_;
};

// The paper's incremental memset (its Fig. 1B, concurrent touch and flush):
// 4 KiB pages, set to zero in ascending order by a thread while flushes
// write behind it, each flush waiting until its pages are set; once all are,
// the buffer is registered piece by piece (a failed pin stops pinning).
class MemsetHost : public HostBuffer {
 public:
  MemsetHost(Platform& platform, const Options& opt, std::size_t bytes)
      : bytes_(bytes), data_(small_pages(bytes)), pinner_(in_pieces_of(platform.pinner(), opt.pin_piece)),
        piece_(pin_piece(*pinner_)),
        thread_([this] { run(); }) {}
  ~MemsetHost() override {
    stop_.store(true);
    thread_.join();
    for (std::size_t at = 0; at < pinned_.load(); at += piece_) {
      pinner_->unpin(data_ + at, std::min(piece_, bytes_ - at));
    }
    ::munmap(data_, bytes_);
  }
  MemsetHost(const MemsetHost&) = delete;
  MemsetHost& operator=(const MemsetHost&) = delete;
  char* data() override { return data_; }
  std::size_t piece() const override { return piece_; }
  void flush_begins(std::size_t offset, std::size_t bytes) override {
    for (std::size_t set = set_.load(); set < offset + bytes; set = set_.load()) set_.wait(set);
  }
  bool pinned() const override { return pinned_.load() == bytes_; }

 private:
  static char* small_pages(std::size_t bytes) {
    char* p = static_cast<char*>(map_host(bytes));
    ::madvise(p, bytes, MADV_NOHUGEPAGE);
    return p;
  }
  void run() {
    constexpr std::size_t kStep = 2 * kMiB;  // set, then publish, this much at a time
    for (std::size_t at = 0; at < bytes_ && !stop_.load();) {
      const std::size_t n = std::min(kStep, bytes_ - at);
      std::memset(data_ + at, 0, n);
      set_.store(at += n);
      set_.notify_all();
    }
    for (std::size_t at = 0; at < bytes_ && !stop_.load(); at += piece_) {
      try {
        pinner_->pin(data_ + at, std::min(piece_, bytes_ - at));
      } catch (const std::exception& error) {
        logger().warn(std::string("incremental memset: pinning stopped: ") + error.what());
        return;
      }
      pinned_.store(std::min(at + piece_, bytes_));
    }
  }
  const std::size_t bytes_;
  char* const data_;
  const std::unique_ptr<HostPinner> pinner_;
  const std::size_t piece_;
  std::atomic<std::size_t> set_{0};     // bytes set to zero from the start
  std::atomic<std::size_t> pinned_{0};  // bytes pinned from the start
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A background thread that copies each version out of the device buffer into
// the host buffer once it is captured, then marks it flushed, which is what
// lets the cache evict it.
class Flusher {
 public:
  Flusher(DeviceCache& cache, HostBuffer& host, const TraceLayout& layout)
      : cache_(cache), host_(host), layout_(layout), thread_([this] { run(); }) {}
  ~Flusher() {  // what is not flushed by now is not needed any more
    captured_.store(kStop);
    captured_.notify_one();
    thread_.join();
  }
  Flusher(const Flusher&) = delete;
  Flusher& operator=(const Flusher&) = delete;
  void captured(std::size_t v) {
    captured_.store(v + 1);
    captured_.notify_one();
  }

 private:
  static constexpr std::size_t kStop = SIZE_MAX;
  void run() {
    for (std::size_t v = 0; v < layout_.sizes.size(); ++v) {
      std::size_t seen = captured_.load();
      for (; seen != kStop && seen <= v; seen = captured_.load()) captured_.wait(seen);
      if (seen == kStop) return;
      flush(v);
    }
  }
  void flush(std::size_t v) {
    const std::size_t offset = layout_.offsets[v], bytes = layout_.sizes[v];
    host_.flush_begins(offset, bytes);
    for_each_pin_piece(offset, bytes, host_.piece(), [&](std::uint64_t done, std::uint64_t n) {
      cache_.read(static_cast<std::int64_t>(v), done, host_.data() + offset + done, n);
    });
    host_.flush_ends(offset, bytes);
    cache_.flushed(static_cast<std::int64_t>(v));
  }
  DeviceCache& cache_;
  HostBuffer& host_;
  const TraceLayout& layout_;
  std::atomic<std::size_t> captured_{0};  // versions captured so far, or kStop
  std::thread thread_;
};

// l0, direct and memset: a device buffer of --cache-fraction of the trace but
// never less than its largest version (which could not be cached
// otherwise), managed by the same cache logic (FIFO, evicting only flushed
// versions); below 1 a host buffer of the whole trace behind it, from which
// an evicted version is restored (no prefetch back into the device buffer).
class CachedTrace : public TraceMethod {
 public:
  CachedTrace(Platform& platform, const Options& opt, const TraceLayout& layout, void* state)
      : platform_(platform), layout_(layout), state_(state), compute_seconds_(opt.interval_ms / 1e3),
        cache_(device_memory(platform, opt), cache_options(opt, layout), logger()),
        host_(opt.cache_fraction < 1 ? host_buffer(platform, opt, layout.total) : nullptr) {
    if (host_) flusher_ = std::make_unique<Flusher>(cache_, *host_, layout);
  }
  void checkpoint(std::size_t v) override {
    require_cached(cache_.capture(static_cast<std::int64_t>(v), {{state_, layout_.sizes[v]}}),
                   static_cast<std::int64_t>(v));
    if (!host_) return;
    host_->checkpoint_taken(layout_.sizes[v], compute_seconds_);
    flusher_->captured(v);
    pinned_after_checkpoints_ = host_->pinned();
  }
  void restore(std::size_t v) override {
    if (cache_.contains(static_cast<std::int64_t>(v))) {
      cache_.read(static_cast<std::int64_t>(v), 0, state_, layout_.sizes[v]);
      return;
    }
    const std::size_t offset = layout_.offsets[v];
    for_each_pin_piece(offset, layout_.sizes[v], host_->piece(), [&](std::uint64_t done, std::uint64_t n) {
      platform_.copy(static_cast<std::byte*>(state_) + done, host_->data() + offset + done, n);
    });
    restored_from_host_++;
  }
  TraceCounters counters() const override {
    const DeviceCacheStats stats = cache_.stats();
    return {stats.capacity,     stats.evicted, stats.map_wait_seconds, stats.flush_wait_seconds,
            restored_from_host_, pinned_after_checkpoints_, false};
  }

 private:
  static std::unique_ptr<DeviceMemory> device_memory(Platform& platform, const Options& opt) {
    if (opt.method == "l0") return platform.cache_memory();
    return std::make_unique<PreallocatedMemory>(platform);
  }
  static std::unique_ptr<HostBuffer> host_buffer(Platform& platform, const Options& opt, std::size_t bytes) {
    if (opt.method == "l0") return std::make_unique<LatePinHost>(platform, opt, bytes);
    if (opt.method == "memset") return std::make_unique<MemsetHost>(platform, opt, bytes);
    return std::make_unique<PinnedHost>(platform, bytes);
  }
  static DeviceCacheOptions cache_options(const Options& opt, const TraceLayout& layout) {
    DeviceCacheOptions options;
    const auto part = static_cast<std::size_t>(std::ceil(opt.cache_fraction * static_cast<double>(layout.total)));
    options.capacity = std::max(part, layout.largest);
    options.chunk = opt.method == "l0" ? opt.chunk : options.capacity;
    return options;
  }
  Platform& platform_;
  const TraceLayout& layout_;
  void* const state_;
  const double compute_seconds_;
  DeviceCache cache_;
  std::unique_ptr<HostBuffer> host_;
  std::unique_ptr<Flusher> flusher_;  // declared after what it reads and writes: destroyed first
  std::size_t restored_from_host_ = 0;
  bool pinned_after_checkpoints_ = false;
};

// A cuMemAlloc (host: mmap) per checkpoint, no cache.
class DirectEachTrace : public TraceMethod {
 public:
  DirectEachTrace(Platform& platform, const TraceLayout& layout, void* state)
      : platform_(platform), layout_(layout), state_(state) {}
  ~DirectEachTrace() override {
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

// One cuMemAllocManaged of the whole trace; each restore starts moving the
// next version to restore to the device (the paper leaves prefetching to the
// driver's own for UVM; the issue asks for the explicit one).
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
  void restore(std::size_t v) override {
    platform_.copy(state_, managed_ + layout_.offsets[v], layout_.sizes[v]);
    if (v > 0) prefetched_ = platform_.prefetch_to_device(managed_ + layout_.offsets[v - 1], layout_.sizes[v - 1]);
  }
  TraceCounters counters() const override {
    TraceCounters c;
    c.prefetched = prefetched_;
    return c;
  }

 private:
  Platform& platform_;
  const TraceLayout& layout_;
  void* const state_;
  char* const managed_;
  bool prefetched_ = false;
};

std::unique_ptr<TraceMethod> trace_method(Platform& platform, const Options& opt, const TraceLayout& layout,
                                          void* state) {
  if (opt.method == "l0" || opt.method == "direct" || opt.method == "memset") {
    return std::make_unique<CachedTrace>(platform, opt, layout, state);
  }
  if (opt.method == "direct-each") return std::make_unique<DirectEachTrace>(platform, layout, state);
  if (opt.method == "uvm") return std::make_unique<ManagedTrace>(platform, opt, layout, state);
  usage("trace takes --method l0|direct|memset|direct-each|uvm");
}

double sum(const std::vector<double>& values) {
  double total = 0;
  for (double s : values) total += s;
  return total;
}

// The method is set up after the first compute, on the clock: what it
// prepares up front, the first checkpoint waits for (the paper's Fig. 1A).
void run_trace(Platform& platform, const Options& opt) {
  const TraceLayout layout = trace_layout(opt);
  const std::size_t count = layout.sizes.size();
  void* state = platform.allocate(layout.largest);  // the application's region
  platform.fill(state, layout.largest, 0x5a);
  const auto compute = std::chrono::duration<double, std::milli>(opt.interval_ms);
  std::this_thread::sleep_for(compute);
  const Clock::time_point setup_start = Clock::now();
  std::unique_ptr<TraceMethod> method = trace_method(platform, opt, layout, state);
  const double setup_seconds = since(setup_start);
  std::vector<double> checkpoints, restores;
  for (std::size_t v = 0; v < count; ++v) {
    if (v > 0) std::this_thread::sleep_for(compute);
    const Clock::time_point start = Clock::now();
    method->checkpoint(v);
    checkpoints.push_back(since(start));
  }
  for (std::size_t v = count; v-- > 0;) {  // no compute between restores: nothing grows in the background then
    const Clock::time_point start = Clock::now();
    method->restore(v);
    restores.push_back(since(start));
  }
  const TraceCounters c = method->counters();
  std::printf("{\"mode\":\"trace\",\"method\":\"%s\",\"bytes\":%zu,\"count\":%zu,\"total_bytes\":%zu,"
              "\"interval_ms\":%g,\"cache_fraction\":%g,\"cache_capacity\":%zu,\"setup_seconds\":%.9f,"
              "\"checkpoint_seconds\":%.9f,\"restore_seconds\":%.9f,\"map_wait_seconds\":%.9f,"
              "\"flush_wait_seconds\":%.9f,\"first_checkpoint_seconds\":%.9f,\"evicted\":%llu,"
              "\"restored_from_host\":%zu,\"host_pinned\":%s,\"prefetched\":%s}\n",
              opt.method.c_str(), layout.largest, count, layout.total, opt.interval_ms, opt.cache_fraction,
              c.cache_capacity, setup_seconds, setup_seconds + sum(checkpoints), sum(restores), c.map_wait_seconds,
              c.flush_wait_seconds, setup_seconds + checkpoints.front(), static_cast<unsigned long long>(c.evicted),
              c.restored_from_host, c.host_pinned ? "true" : "false", c.prefetched ? "true" : "false");
  method.reset();
  platform.release(state, layout.largest);
}

// The backward pass through a Store (the mode's comment at the top).
void run_prefetch(Platform& platform, const Options& opt) {
  void* source = platform.allocate(opt.bytes);
  void* bare = platform.allocate(opt.bytes);
  platform.fill(source, opt.bytes, 0x5a);
  platform.fill(bare, opt.bytes, 0);
  const TempDirectory directory;
  std::unique_ptr<resurgo::Store> store = device_store(opt, source, directory.path(), opt.count);
  std::vector<int> order;
  for (int v = 0; v < opt.count; ++v) {
    store->checkpoint(v);
    store->wait(v, resurgo::kL1);
    order.insert(order.begin(), v);
  }
  store->prefetch(order);
  const auto compute = std::chrono::duration<double, std::milli>(opt.interval_ms);
  auto from_prefetch = [&store] {
    return store->device_stats().cache.value_or(DeviceCacheStats{}).restored_from_prefetch;
  };
  std::vector<double> prefetched, others, copies;
  for (int v : order) {
    std::this_thread::sleep_for(compute);
    const std::uint64_t before = from_prefetch();
    Clock::time_point start = Clock::now();
    store->restart(v);
    const double restart_seconds = since(start);
    (from_prefetch() > before ? prefetched : others).push_back(restart_seconds);
    store->discard(v);
    start = Clock::now();
    platform.copy(bare, source, opt.bytes);
    copies.push_back(since(start));
  }
  const DeviceCacheStats stats = store->device_stats().cache.value_or(DeviceCacheStats{});
  store.reset();
  std::printf("{\"mode\":\"prefetch\",\"bytes\":%zu,\"count\":%d,\"interval_ms\":%g,\"prefetched_median\":%.9f,"
              "\"other_median\":%.9f,\"bare_median\":%.9f,\"restored_from_prefetch\":%zu,\"prefetch_too_large\":%llu,"
              "\"prefetch_failed\":%llu}\n",
              opt.bytes, opt.count, opt.interval_ms, prefetched.empty() ? -1.0 : median(prefetched),
              others.empty() ? -1.0 : median(others), median(copies), prefetched.size(),
              static_cast<unsigned long long>(stats.prefetch_too_large),
              static_cast<unsigned long long>(stats.prefetch_failed));
  platform.release(source, opt.bytes);
  platform.release(bare, opt.bytes);
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
    else if (opt.mode == "prefetch") run_prefetch(*platform, opt);
    else usage("unknown mode " + opt.mode);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpu_cache: %s\n", error.what());
    return 2;
  }
  return 0;
}
