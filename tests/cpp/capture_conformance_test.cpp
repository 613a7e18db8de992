// Capture conformance (DESIGN.md, "Data flow and modules"; issue 25): every
// Capture that make_capture() builds runs through one suite at the Capture
// interface (src/capture/capture.h), driven as the Store drives it:
// check() and resize() at protect(), take() on the application thread, and
// the Snapshot written the way the Scheduler writes it (await_writer for a
// forked writer; else stage, then format::VersionWriter into the first
// level, a DirectoryLevel), released once, then read back with
// restore_version through restart_targets() and write_back(). The cases:
//   - take() gives a snapshot whose version holds every region's bytes as
//     they were when take() returned, though the application writes them
//     right after (a synchronous snapshot is written before take()'s caller
//     returns to the application: checkpoint() waits for it); a delta
//     capture's second version is a delta on the first and restores whole;
//   - so do versions taken while a worker thread writes the earlier ones,
//     as the Scheduler does;
//   - each snapshot released once gives its memory back: takes far beyond
//     the host buffer and the L0 cache never wait forever;
//   - a write that fails still releases its snapshot, and after
//     start_new_chain (what the Store calls then) the next version is whole;
//   - resize, unprotected and start_new_chain keep the capture working on a
//     protected set that changes;
//   - check() refuses what the capture cannot take (device regions under
//     fork and auto; with device.backend = cuda, a host pointer given as
//     device memory and a device pointer given as host memory);
//   - restart_targets() and write_back() change device regions only once the
//     rest of the version was read, from L0 when it still holds the version.
// make_capture() always returns a DeviceCapture wrapping the mode's capture;
// the device kinds protect the field as a device region (device.backend =
// host: host memory stands for device memory), with and without an L0
// DeviceLevel. The kinds with device.backend = cuda run only against the
// fake CUDA driver (instantiation FakeDriver) and skip elsewhere, saying
// why. Forking kinds skip under a sanitizer (tests/sanitized.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "../sanitized.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "capture/capture.h"
#include "core/registry.h"
#include "fake_cuda_lookup.h"
#include "format/container.h"
#include "format/version_writer.h"
#include "io/fault_env.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "store/restore.h"
#include "test_util.h"
#include "tier/device_level.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

constexpr char kStore[] = "c";
constexpr std::uint64_t kFieldBytes = 320000;  // larger than the 64 KiB buffer of the synchronous kinds
constexpr std::uint64_t kStepBytes = 8;
constexpr std::uint64_t kTagBytes = 1000;

// ------------------------------------------------------------ parameters

struct CaptureKind {
  const char* name;
  std::map<std::string, std::string> keys;
  const char* mode;        // Capture::mode() of the host part of the state
  bool synchronous;        // snapshots are written from the application's memory
  bool forks;              // a forked child writes the version (await_writer)
  bool deltas;             // the second version is a delta on the first
  bool device;             // the field is a device region
  bool l0;                 // with an L0 DeviceLevel in the context
  bool needs_fake_driver;  // device.backend = cuda
};

const CaptureKind kCaptures[] = {
    {"copy", {{"capture.mode", "copy"}}, "copy", false, false, false, false, false, false},
    {"synchronous", {{"capture.mode", "copy"}, {"buffer.capacity", "64KiB"}}, "synchronous", true, false, false,
     false, false, false},
    {"fork", {{"capture.mode", "fork"}}, "fork", false, true, false, false, false, false},
    {"auto_copy", {{"capture.mode", "auto"}}, "copy", false, false, false, false, false, false},
    {"auto_fork", {{"capture.mode", "auto"}, {"buffer.capacity", "64KiB"}}, "fork", false, true, false, false, false,
     false},
    {"delta", {{"capture.mode", "delta"}, {"delta.full_every", "2"}}, "copy", false, false, true, false, false, false},
    {"delta_hash", {{"capture.mode", "delta"}, {"delta.full_every", "2"}, {"track.method", "hash"}}, "copy", false,
     false, true, false, false, false},
    {"device_l0",
     {{"capture.mode", "copy"}, {"device.backend", "host"}, {"device.capacity", "4MiB"}, {"device.chunk", "1MiB"}},
     "copy", false, false, false, true, true, false},
    {"device_without_l0", {{"capture.mode", "copy"}, {"device.backend", "host"}}, "copy", false, false, false, true,
     false, false},
    {"device_delta_l0",
     {{"capture.mode", "delta"}, {"delta.full_every", "2"}, {"device.backend", "host"}, {"device.capacity", "4MiB"},
      {"device.chunk", "1MiB"}},
     "copy", false, false, true, true, true, false},
};

// The fake driver's VMM granularity is 2 MiB: an L0 of two chunks.
const CaptureKind kFakeDriverCaptures[] = {
    {"device_cuda_l0",
     {{"capture.mode", "copy"}, {"device.backend", "cuda"}, {"device.capacity", "4MiB"}, {"device.chunk", "2MiB"},
      {"buffer.pin_token_dir", ""}},
     "copy", false, false, false, true, true, true},
    {"device_cuda_without_l0",
     {{"capture.mode", "copy"}, {"device.backend", "cuda"}, {"buffer.pin_token_dir", ""}}, "copy", false, false,
     false, true, false, true},
};

// Its name in failure messages (not its bytes).
void PrintTo(const CaptureKind& kind, std::ostream* out) { *out << kind.name; }

// ------------------------------------------------------------- the state

// The field's memory: host memory, or device memory of the fake driver.
class FieldMemory {
 public:
  virtual ~FieldMemory() = default;
  virtual std::byte* data() = 0;
  virtual void write(std::uint64_t offset, const std::byte* from, std::uint64_t bytes) = 0;
  virtual std::vector<std::byte> read() = 0;
};

class HostField final : public FieldMemory {
 public:
  std::byte* data() override { return bytes_.data(); }
  void write(std::uint64_t offset, const std::byte* from, std::uint64_t bytes) override {
    std::memcpy(bytes_.data() + offset, from, bytes);
  }
  std::vector<std::byte> read() override { return bytes_; }

 private:
  std::vector<std::byte> bytes_ = std::vector<std::byte>(kFieldBytes);
};

#ifdef RESURGO_HAVE_CUDA_HEADERS
// cuMemAlloc memory; written as an application finishes writing a region
// before checkpoint(): the copy synchronised.
class CudaField final : public FieldMemory {
 public:
  CudaField() { check(driver().cuMemAlloc(&address_, kFieldBytes), "cuMemAlloc"); }
  ~CudaField() override { driver().cuMemFree(address_); }
  std::byte* data() override { return reinterpret_cast<std::byte*>(address_); }
  void write(std::uint64_t offset, const std::byte* from, std::uint64_t bytes) override {
    check(driver().cuMemcpyHtoD(address_ + offset, from, bytes), "cuMemcpyHtoD");
    check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  }
  std::vector<std::byte> read() override {
    std::vector<std::byte> bytes(kFieldBytes);
    check(driver().cuMemcpyDtoH(bytes.data(), address_, kFieldBytes), "cuMemcpyDtoH");
    return bytes;
  }

 private:
  static const gpu::CudaDriver& driver() { return gpu::CudaDriver::instance(); }
  static void check(CUresult result, const char* call) { driver().check(result, call, "test"); }
  CUdeviceptr address_ = 0;
};
#endif

std::byte pattern(int seed, int region, std::uint64_t index) {
  return static_cast<std::byte>((index * 29 + index / 253 + static_cast<std::uint64_t>(seed) * 53 +
                                 static_cast<std::uint64_t>(region) * 101) &
                                0xff);
}

// The regions' bytes at one instant.
struct Image {
  std::vector<std::byte> field, step, tags;
};

// Three regions of different sizes; the field on the device for the device kinds.
class State {
 public:
  explicit State(std::unique_ptr<FieldMemory> field, bool on_device) : field_(std::move(field)), on_device_(on_device) {}

  std::vector<Region> regions() {
    return {region(0, "field", field_->data(), kFieldBytes, on_device_ ? MemoryKind::kDevice : MemoryKind::kHost),
            region(1, "step", step_.data(), kStepBytes, MemoryKind::kHost),
            region(2, "tags", tags_.data(), kTagBytes, MemoryKind::kHost)};
  }
  static Region region(int id, const char* label, std::byte* data, std::uint64_t bytes, MemoryKind kind) {
    Region result;
    result.id = id;
    result.label = label;
    result.data = data;
    result.bytes = bytes;
    result.type = {"uint8", {static_cast<std::int64_t>(bytes)}};
    result.kind = kind;
    return result;
  }

  // Every byte of every region from `seed`.
  void fill(int seed) {
    std::vector<std::byte> field(kFieldBytes);
    for (std::uint64_t i = 0; i < kFieldBytes; ++i) field[i] = pattern(seed, 0, i);
    field_->write(0, field.data(), field.size());
    for (std::uint64_t i = 0; i < kStepBytes; ++i) step_[i] = pattern(seed, 1, i);
    for (std::uint64_t i = 0; i < kTagBytes; ++i) tags_[i] = pattern(seed, 2, i);
  }
  // What an application writes right after checkpoint() returns: parts of
  // every region (a delta of the next version holds only these).
  void scribble(int seed) {
    std::vector<std::byte> part(20000);
    for (std::uint64_t i = 0; i < part.size(); ++i) part[i] = pattern(seed + 1000, 0, i);
    field_->write(100000, part.data(), part.size());
    step_[0] = pattern(seed + 1000, 1, 0);
    for (std::uint64_t i = 0; i < 100; ++i) tags_[500 + i] = pattern(seed + 1000, 2, i);
  }
  Image image() { return {field_->read(), step_, tags_}; }
  // Empty when the regions hold `want`; else where they first differ.
  std::string difference(const Image& want) {
    const Image have = image();
    const auto first = [](const std::vector<std::byte>& a, const std::vector<std::byte>& b, const char* name) {
      const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin());
      return mismatch.first == a.end() ? std::string()
                                       : std::string(name) + "[" + std::to_string(mismatch.first - a.begin()) + "]";
    };
    std::string where = first(have.field, want.field, "field");
    if (where.empty()) where = first(have.step, want.step, "step");
    if (where.empty()) where = first(have.tags, want.tags, "tags");
    return where.empty() ? where : where + " differs";
  }

  FieldMemory& field() { return *field_; }

 private:
  std::unique_ptr<FieldMemory> field_;
  bool on_device_;
  std::vector<std::byte> step_ = std::vector<std::byte>(kStepBytes);
  std::vector<std::byte> tags_ = std::vector<std::byte>(kTagBytes);
};

// ------------------------------------------------------------- the suite

class CaptureConformanceTest : public ::testing::TestWithParam<CaptureKind> {
 protected:
  void SetUp() override {
    if (kind().forks && kSanitized) {
      // The fork capture's child allocates; under a sanitizer it can
      // deadlock in the sanitizer's allocator (docs/reliability.md section 5).
      GTEST_SKIP() << "a forked writer that allocates can deadlock in the sanitizer's allocator";
    }
    if (kind().needs_fake_driver) {
#ifdef RESURGO_HAVE_CUDA_HEADERS
      if (!gpu::fake().control) GTEST_SKIP() << gpu::fake().why_not;
      ASSERT_EQ(gpu::start_fake_turn(context_), "");
#else
      GTEST_SKIP() << "built without the CUDA headers: the fake CUDA driver is not built";
#endif
    }
    std::map<std::string, std::string> keys = {{"log.level", "off"}, {"pipeline.chunk_size", "64KiB"}};
    for (const auto& [key, value] : kind().keys) keys[key] = value;
    config_ = std::make_unique<Config>(Config::load("", keys));
    l2_ = std::make_unique<DirectoryLevel>(kL2, dir_.path() + "/l2", kStore, 0, 0600, 0, env_);
    l2_->prepare();
    if (kind().l0) l0_ = std::make_unique<DeviceLevel>(kStore, 0, config_->device, 0, log_);
    capture_ = make_capture(CaptureContext{*config_, pool_, log_, [this](bool on) { capturing(on); }, l0_.get()});
    state_ = std::make_unique<State>(make_field(), kind().device);
  }

  void TearDown() override {
    capture_.reset();  // before the memory it tracks and the levels it writes
    state_.reset();
    l0_.reset();
#ifdef RESURGO_HAVE_CUDA_HEADERS
    if (context_ != nullptr) {
      EXPECT_EQ(gpu::finish_fake_turn(context_), "");
    }
#endif
  }

  const CaptureKind& kind() const { return GetParam(); }

  std::unique_ptr<FieldMemory> make_field() {
#ifdef RESURGO_HAVE_CUDA_HEADERS
    if (kind().needs_fake_driver) return std::make_unique<CudaField>();
#endif
    return std::make_unique<HostField>();
  }

  // As Store::protect and unprotect.
  void protect(Region region) {
    capture_->check(region, kStore);
    registry_.add(region);
    capture_->resize(registry_.host_bytes());
  }
  void protect_state() {
    for (const Region& region : state_->regions()) protect(region);
  }
  void unprotect(int id) {
    registry_.remove(id);
    capture_->unprotected(id);
    capture_->resize(registry_.host_bytes());
  }

  Snapshot take(int version) {
    // As the Store's header: the regions in the order they were protected.
    format::Header header;
    header.store = kStore;
    header.store_id = store_id_;
    header.version = version;
    header.chunk_size = config_->pipeline.chunk_size;
    for (const Region& region : registry_.regions()) {
      header.regions.push_back({region.id, region.label, static_cast<format::RegionKind>(region.kind), region.bytes,
                                region.type.dtype, region.type.shape});
    }
    const std::string metadata = "version " + std::to_string(version);
    for (char c : metadata) header.metadata.push_back(static_cast<std::byte>(c));
    CaptureTimes times;
    Snapshot snapshot = capture_->take(registry_.regions(), std::move(header), *l2_, times);
    EXPECT_FALSE(capturing_now_) << "take() returned with capturing(true) not undone: evictions would wait forever";
    EXPECT_EQ(snapshot.header.version, version);
    EXPECT_EQ(snapshot.synchronous, kind().synchronous);
    EXPECT_EQ(static_cast<bool>(snapshot.await_writer), kind().forks);
    return snapshot;
  }

  // As the Scheduler's first level: waits for a forked writer, or stages
  // and writes the extents; then releases the snapshot, once, whether the
  // write succeeded or not. Returns the error, empty when written.
  std::string write(Snapshot& snapshot) {
    std::string error;
    try {
      if (snapshot.await_writer) {
        snapshot.await_writer();
      } else {
        if (snapshot.stage) snapshot.stage(snapshot.extents);
        l2_->commit(static_cast<int>(snapshot.header.version), [&](WritableFile& file) {
          write_extents(file, snapshot.header, snapshot.extents, config_->pipeline, pool_);
        });
      }
    } catch (const Error& failure) {
      error = failure.what();
    }
    if (snapshot.release) snapshot.release();
    snapshot.release = nullptr;  // exactly once
    return error;
  }

  // checkpoint(version) then the application's writes `after`: a
  // synchronous snapshot is written before checkpoint() returns.
  std::string checkpoint(int version, const std::function<void()>& after = [] {}) {
    Snapshot snapshot = take(version);
    std::string error;
    if (snapshot.synchronous) error = write(snapshot);
    after();
    if (!snapshot.synchronous) error = write(snapshot);
    return error;
  }

  // As Store::restore_into: through the capture's restart targets; the
  // device regions change at write_back() only. `before_write_back` sees
  // the regions between the two.
  RestartReport restore(int version, const std::function<void()>& before_write_back = [] {}) {
    const std::unique_ptr<RestartTargets> targets = capture_->restart_targets(registry_, version);
    capture_->restarting(true);
    RestartReport report;
    std::vector<std::byte> metadata;
    const std::vector<Level*> levels{l2_.get()};
    const StoreIdentity store{store_name_, store_id_};
    const RestoreContext context{store, 0, levels, targets->registry(), pool_, log_, trace_};
    report.version = restore_version(context, version, report, metadata);
    before_write_back();
    report.bytes_from_device_cache = targets->write_back();
    capture_->restarting(false);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(metadata.data()), metadata.size()),
              "version " + std::to_string(report.version));
    return report;
  }

  format::Header header_of(int version) { return format::read_container(*l2_->open(version)).header; }

  void capturing(bool on) {
    EXPECT_NE(on, capturing_now_) << "capturing(" << on << ") twice in a row";
    capturing_now_ = on;
  }

  const std::string store_name_ = kStore;
  const format::StoreId store_id_ = format::StoreId::random();
  TempDir dir_;
  std::shared_ptr<FaultEnv> env_ = std::make_shared<FaultEnv>();
  Logger log_{kStore, LogLevel::kOff};
  Trace trace_{""};
  ThreadPool pool_{1};
  std::unique_ptr<Config> config_;
  std::unique_ptr<DirectoryLevel> l2_;
  std::unique_ptr<DeviceLevel> l0_;
  std::unique_ptr<State> state_;
  Registry registry_;
  std::unique_ptr<Capture> capture_;
  bool capturing_now_ = false;
#ifdef RESURGO_HAVE_CUDA_HEADERS
  CUcontext context_ = nullptr;
#endif
};

TEST_P(CaptureConformanceTest, EveryRegionReadsBackAsItWasWhenTakeReturned) {
  protect_state();
  EXPECT_STREQ(capture_->mode(registry_.host_bytes()), kind().mode);
  state_->fill(1);
  const Image first = state_->image();
  ASSERT_EQ(checkpoint(1, [&] { state_->scribble(1); }), "");
  const Image second = state_->image();  // the scribbles stay: version 2 holds them
  ASSERT_NE(state_->difference(first), "") << "the scribble wrote nothing";
  ASSERT_EQ(checkpoint(2, [&] { state_->fill(9); }), "");
  EXPECT_EQ(header_of(1).base_version, -1);
  EXPECT_EQ(header_of(2).base_version, kind().deltas ? 1 : -1);
  ASSERT_EQ(header_of(2).regions.size(), 3u);
  EXPECT_EQ(header_of(2).regions[0].kind, kind().device ? format::RegionKind::kDevice : format::RegionKind::kHost);

  EXPECT_EQ(restore(2).version, 2);
  EXPECT_EQ(state_->difference(second), "");
  state_->fill(9);
  const RestartReport report = restore(1);
  EXPECT_EQ(report.version, 1);
  EXPECT_EQ(report.chain, std::vector<int>{1});
  EXPECT_EQ(report.bytes, kFieldBytes + kStepBytes + kTagBytes);
  EXPECT_EQ(state_->difference(first), "");
}

// As in a store: the first level's worker writes version n while the
// application computes and takes version n + 1 (a synchronous snapshot is
// waited for, as checkpoint() waits). Each version still holds its own bytes.
TEST_P(CaptureConformanceTest, VersionsTakenWhileEarlierOnesAreWrittenHoldTheirOwnBytes) {
  protect_state();
  constexpr int kVersions = 12;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Snapshot> queue;
  std::map<int, std::string> written;  // version -> error, empty when written
  bool taking = true;
  std::thread worker([&] {
    for (;;) {
      Snapshot snapshot;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return !queue.empty() || !taking; });
        if (queue.empty()) return;
        snapshot = std::move(queue.front());
        queue.pop_front();
      }
      const int version = static_cast<int>(snapshot.header.version);
      std::string error = write(snapshot);
      {
        std::lock_guard lock(mutex);
        written[version] = std::move(error);
      }
      changed.notify_all();
    }
  });
  std::map<int, Image> images;
  state_->fill(1);
  for (int version = 1; version <= kVersions; ++version) {
    images[version] = state_->image();
    Snapshot snapshot = take(version);
    const bool synchronous = snapshot.synchronous;
    {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(snapshot));
    }
    changed.notify_all();
    if (synchronous) {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return written.count(version) != 0; });
    }
    state_->scribble(version);  // the application computes on
  }
  {
    std::lock_guard lock(mutex);
    taking = false;
  }
  changed.notify_all();
  worker.join();
  for (int version = 1; version <= kVersions; ++version) EXPECT_EQ(written[version], "") << "version " << version;
  for (int version : {kVersions, kVersions - 1, 5, 1}) {
    state_->fill(0);
    EXPECT_EQ(restore(version).version, version);
    EXPECT_EQ(state_->difference(images[version]), "") << "version " << version;
  }
}

// A snapshot holds buffer space (copy, delta), L0 space and a staging block
// (device regions) until released: were one release lost, take() would
// wait for it forever. Forty versions are several times the host buffer
// (twice the state) and the 4 MiB L0.
TEST_P(CaptureConformanceTest, EachSnapshotReleasedOnceGivesItsMemoryBack) {
  protect_state();
  constexpr int kVersions = 40;
  for (int version = 1; version <= kVersions; ++version) {
    state_->fill(version);
    ASSERT_EQ(checkpoint(version), "") << "version " << version;
  }
  EXPECT_EQ(l2_->versions().size(), static_cast<std::size_t>(kVersions));
  if (l0_) {
    EXPECT_GT(l0_->stats().evicted, 0u) << "L0 never had to make room: the case proves nothing for it";
    EXPECT_TRUE(l0_->holds(kVersions)) << "L0 holds the newest version";
  }
  const Image last = state_->image();
  state_->fill(0);
  EXPECT_EQ(restore(kVersions).version, kVersions);
  EXPECT_EQ(state_->difference(last), "");
}

TEST_P(CaptureConformanceTest, AFailedWriteReleasesItsSnapshotAndTheNextChainStartsWhole) {
  protect_state();
  state_->fill(1);
  ASSERT_EQ(checkpoint(1), "");
  state_->scribble(1);
  // A forked writer inherits the fault; the parent's copy is cleared after.
  env_->inject({FaultEnv::Op::kAppend, ENOSPC, "/l2/", 0, 1, false});
  const std::string error = checkpoint(2);
  env_->clear();
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
  EXPECT_FALSE(l2_->holds(2));
  capture_->start_new_chain("an earlier version failed");  // as the Store does
  state_->scribble(3);
  const Image third = state_->image();
  ASSERT_EQ(checkpoint(3), "") << "the capture did not recover from the failed write";
  EXPECT_EQ(header_of(3).base_version, -1) << "version 3 depends on the failed version";
  state_->fill(0);
  EXPECT_EQ(restore(3).version, 3);
  EXPECT_EQ(state_->difference(third), "");
}

TEST_P(CaptureConformanceTest, ResizeUnprotectedAndStartNewChainFollowTheProtectedSet) {
  protect_state();
  state_->fill(1);
  ASSERT_EQ(checkpoint(1), "");
  // A fourth region: the next version holds it, whole.
  std::vector<std::byte> extra(50000);
  for (std::size_t i = 0; i < extra.size(); ++i) extra[i] = pattern(7, 3, i);
  protect(State::region(3, "extra", extra.data(), extra.size(), MemoryKind::kHost));
  EXPECT_STREQ(capture_->mode(registry_.host_bytes()), kind().mode);
  state_->scribble(2);
  ASSERT_EQ(checkpoint(2), "");
  const format::Header with_extra = header_of(2);
  ASSERT_EQ(with_extra.regions.size(), 4u);
  EXPECT_EQ(with_extra.regions[3].label, "extra");
  EXPECT_EQ(with_extra.base_version, -1) << "a changed protected set starts a new chain";
  // Unprotected: the memory may be freed at once, and later versions lack it.
  unprotect(3);
  std::fill(extra.begin(), extra.end(), std::byte{0});
  extra.clear();
  extra.shrink_to_fit();
  state_->scribble(3);
  ASSERT_EQ(checkpoint(3), "");
  EXPECT_EQ(header_of(3).regions.size(), 3u);
  EXPECT_EQ(header_of(3).base_version, -1);
  state_->scribble(4);
  ASSERT_EQ(checkpoint(4), "");
  EXPECT_EQ(header_of(4).base_version, kind().deltas ? 3 : -1);
  capture_->start_new_chain("the test asks for it");
  state_->scribble(5);
  const Image fifth = state_->image();
  ASSERT_EQ(checkpoint(5), "");
  EXPECT_EQ(header_of(5).base_version, -1) << "start_new_chain was not followed";
  state_->fill(0);
  EXPECT_EQ(restore(5).version, 5);
  EXPECT_EQ(state_->difference(fifth), "");
}

TEST_P(CaptureConformanceTest, CheckRefusesWhatTheCaptureCannotTake) {
  std::vector<std::byte> host(4096);
  Region host_region = State::region(5, "host", host.data(), host.size(), MemoryKind::kHost);
  EXPECT_NO_THROW(capture_->check(host_region, kStore)) << "host memory is what every capture takes";
  Region as_device = host_region;
  as_device.label = "as_device";
  as_device.kind = MemoryKind::kDevice;
  const std::string mode = kind().keys.at("capture.mode");
  if (mode == "auto") {
    try {
      capture_->check(as_device, kStore);
      ADD_FAILURE() << "the auto capture accepted a device region";
    } catch (const InvalidArgumentError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("'as_device'"), std::string::npos) << message;
      EXPECT_NE(message.find("use capture.mode = fork"), std::string::npos) << message;
    }
    return;
  }
  if (!kind().device) GTEST_SKIP() << "no device backend configured: device regions are the device kinds' cases";
  if (kind().needs_fake_driver) {
    // Backend cuda: the driver tells host from device memory.
    try {
      capture_->check(as_device, kStore);
      ADD_FAILURE() << "a host pointer was accepted as device memory";
    } catch (const InvalidArgumentError& error) {
      EXPECT_NE(std::string(error.what()).find("its pointer is host memory"), std::string::npos) << error.what();
    }
    Region device_as_host =
        State::region(6, "device_as_host", state_->field().data(), kFieldBytes, MemoryKind::kHost);
    try {
      capture_->check(device_as_host, kStore);
      ADD_FAILURE() << "a device pointer was accepted as host memory";
    } catch (const InvalidArgumentError& error) {
      EXPECT_NE(std::string(error.what()).find("its pointer is device memory"), std::string::npos) << error.what();
    }
  }
  // And the device region of the state is taken.
  EXPECT_NO_THROW(protect_state());
  state_->fill(1);
  EXPECT_EQ(checkpoint(1), "");
}

TEST_P(CaptureConformanceTest, RestartWritesDeviceRegionsBackOnlyAfterTheRestWasRead) {
  protect_state();
  state_->fill(1);
  const Image first = state_->image();
  ASSERT_EQ(checkpoint(1, [&] { state_->fill(2); }), "");
  const Image scribbled = state_->image();
  bool looked = false;
  const RestartReport report = restore(1, [&] {
    // The version was read and verified; the device regions are as they were.
    const Image now = state_->image();
    EXPECT_TRUE(now.step == first.step && now.tags == first.tags) << "the host regions were not restored";
    EXPECT_TRUE(now.field == (kind().device ? scribbled.field : first.field))
        << (kind().device ? "a device region changed before write_back()" : "a host region was not restored");
    looked = true;
  });
  EXPECT_TRUE(looked);
  EXPECT_EQ(state_->difference(first), "");
  // From L0, device to device, when it still holds the version.
  EXPECT_EQ(report.bytes_from_device_cache, kind().l0 ? kFieldBytes : 0u);
  // kLatest is not known before the version is read: never from L0.
  state_->fill(3);
  EXPECT_EQ(restore(kLatest).version, 1);
  EXPECT_EQ(state_->difference(first), "");
}

std::string capture_name(const ::testing::TestParamInfo<CaptureKind>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(EveryCapture, CaptureConformanceTest, ::testing::ValuesIn(kCaptures), capture_name);
INSTANTIATE_TEST_SUITE_P(FakeDriver, CaptureConformanceTest, ::testing::ValuesIn(kFakeDriverCaptures), capture_name);

}  // namespace
}  // namespace resurgo
