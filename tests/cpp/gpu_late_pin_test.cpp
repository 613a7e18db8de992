// The L1 host buffer that pins late, through the host path: the forerunner
// touching ahead of the flushes and pinning once in pieces, the two touch
// strategies, the pin policies, pin failures, stopping and destruction at
// any point, the registration token serialising two buffers, the touch model
// as a pure function, and the mlock pinner. The forerunner is stepped with
// its before_touch_step hook and the pins recorded by a fake pinner, so no
// assertion depends on timing.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../sanitized.h"
#include "gpu/gpu_error.h"
#include "gpu/host_pinner.h"
#include "gpu/late_pin_buffer.h"
#include "gpu/registration_token.h"
#include "gpu/touch_model.h"
#include "resurgo/errors.hpp"
#include "test_util.h"
#ifdef RESURGO_HAVE_CUDA_HEADERS
#include "gpu/cuda_host_pinner.h"
#endif

namespace resurgo::gpu {
namespace {

constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();
const std::size_t kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

// Lets the forerunner take `allowed` steps, then holds it in its
// before_touch_step hook.
struct StepGate {
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t allowed = kNever;
  std::size_t taken = 0;
  std::function<void(std::size_t)> on_step;  // with the 0-based attempt, once let through

  void allow(std::size_t steps) {
    std::lock_guard lock(mutex);
    allowed = steps;
    changed.notify_all();
  }
  void pass() {
    std::size_t index = 0;
    {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return taken < allowed; });
      index = taken++;
    }
    if (on_step) on_step(index);
  }
};

using Piece = std::pair<std::byte*, std::size_t>;
std::atomic<std::uint64_t> pin_clock{0};  // orders pins across pinners

// What a RecordingPinner did and will do; the test keeps it while the
// buffer owns the pinner.
struct PinScript {
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t max_piece = 3 * kPage;
  std::size_t fail_at = kNever;  // pin call that throws
  std::size_t hold_at = kNever;  // pin call that waits for release_hold()
  bool holding = false;
  bool hold_released = false;
  std::function<void(std::size_t)> during_pin;  // with the call index
  std::vector<Piece> pinned;                    // in call order
  std::vector<Piece> unpinned;
  std::vector<std::uint64_t> pinned_at;  // pin_clock of each pin

  void release_hold() {
    std::lock_guard lock(mutex);
    hold_released = true;
    changed.notify_all();
  }
  void wait_holding() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return holding; });
  }
  std::vector<Piece> pins() {
    std::lock_guard lock(mutex);
    return pinned;
  }
  std::vector<Piece> unpins() {
    std::lock_guard lock(mutex);
    return unpinned;
  }
};

class RecordingPinner : public HostPinner {
 public:
  explicit RecordingPinner(std::shared_ptr<PinScript> script) : script_(std::move(script)) {}
  std::string name() const override { return "recording"; }
  std::size_t max_piece() const override { return script_->max_piece; }

  void pin(void* data, std::size_t bytes) override {
    std::unique_lock lock(script_->mutex);
    const std::size_t call = script_->pinned.size();
    if (call == script_->fail_at) throw GpuError("injected pin failure at piece " + std::to_string(call), 2);
    if (call == script_->hold_at) {
      script_->holding = true;
      script_->changed.notify_all();
      script_->changed.wait(lock, [&] { return script_->hold_released; });
    }
    script_->pinned.emplace_back(static_cast<std::byte*>(data), bytes);
    script_->pinned_at.push_back(pin_clock++);
    lock.unlock();
    if (script_->during_pin) script_->during_pin(call);
  }

  void unpin(void* data, std::size_t bytes) noexcept override {
    std::lock_guard lock(script_->mutex);
    script_->unpinned.emplace_back(static_cast<std::byte*>(data), bytes);
  }

 private:
  std::shared_ptr<PinScript> script_;
};

class LatePinBufferTest : public ::testing::Test {
 protected:
  LatePinBuffer& open(std::size_t pages, PinPolicy pin = PinPolicy::kLazy,
                      TouchSetting touch = TouchSetting::kConcurrent, RegistrationToken* token = nullptr) {
    LatePinOptions options;
    options.capacity = pages * kPage;
    options.pin = pin;
    options.touch = touch;
    options.token = token;
    options.touch_step = kPage;
    options.before_touch_step = [gate = gate_] { gate->pass(); };
    buffer_ = std::make_unique<LatePinBuffer>(options, std::make_unique<RecordingPinner>(script_), log_);
    return *buffer_;
  }
  // Lets the forerunner and any held pin go, so that the destructor does not
  // wait for the test.
  void TearDown() override {
    gate_->allow(kNever);
    script_->release_hold();
    buffer_.reset();
  }
  void wait_touched(LatePinBuffer& buffer, std::size_t pages) {
    ASSERT_TRUE(eventually([&] { return buffer.stats().touched_bytes == pages * kPage; }))
        << "touched " << buffer.stats().touched_bytes << " bytes, want " << pages * kPage;
  }
  void wait_state(LatePinBuffer& buffer, LatePinState state) {
    ASSERT_TRUE(eventually([&] { return buffer.stats().state == state; }))
        << "state " << to_string(buffer.stats().state) << ", want " << to_string(state);
  }

  std::shared_ptr<StepGate> gate_ = std::make_shared<StepGate>();
  std::shared_ptr<PinScript> script_ = std::make_shared<PinScript>();
  Logger log_{"late-pin-test", LogLevel::kWarn};
  std::unique_ptr<LatePinBuffer> buffer_;
};

void expect_pieces_cover(const std::vector<Piece>& pieces, const std::byte* base, std::size_t capacity,
                         std::size_t max_piece) {
  std::size_t offset = 0;
  for (const Piece& piece : pieces) {
    EXPECT_EQ(piece.first, base + offset) << "pieces in ascending order, back to back";
    EXPECT_LE(piece.second, max_piece);
    offset += piece.second;
  }
  EXPECT_EQ(offset, capacity);
}

bool resident(const std::byte* page) {
  unsigned char in_core = 0;
  return ::mincore(const_cast<std::byte*>(page), kPage, &in_core) == 0 && (in_core & 1) != 0;
}

TEST_F(LatePinBufferTest, TouchesToTheEndThenPinsOnceInPiecesOfAtMostMaxPiece) {
  LatePinBuffer& buffer = open(10);
  EXPECT_TRUE(buffer.wait_pinned());
  const LatePinStats stats = buffer.stats();
  EXPECT_EQ(stats.state, LatePinState::kPinned);
  EXPECT_EQ(stats.touched_bytes, 10 * kPage);
  EXPECT_EQ(stats.pin_pieces, 4u);
  EXPECT_TRUE(stats.pin_failure.empty());
  const std::vector<Piece> pins = script_->pins();
  ASSERT_EQ(pins.size(), 4u);  // 3 + 3 + 3 + 1 pages, pinned once
  expect_pieces_cover(pins, buffer.data(), buffer.capacity(), script_->max_piece);
  buffer_.reset();
  std::vector<Piece> unpins = script_->unpins();
  std::reverse(unpins.begin(), unpins.end());
  EXPECT_EQ(unpins, pins);
}

TEST_F(LatePinBufferTest, TouchesAheadOfTheLatestFlush) {
  gate_->allow(0);
  LatePinBuffer& buffer = open(10);
  buffer.flush_begins(4 * kPage, 2 * kPage);
  buffer.flush_ends(4 * kPage, 2 * kPage);
  EXPECT_EQ(buffer.stats().touched_bytes, 2 * kPage);  // the flush's own pages
  gate_->allow(1);
  wait_touched(buffer, 3);
  EXPECT_TRUE(resident(buffer.data() + 6 * kPage)) << "the page right after the flush";
  EXPECT_FALSE(resident(buffer.data())) << "not the first page";
}

TEST_F(LatePinBufferTest, SequentialStrategyPausesTouchingWhileAFlushIsOpen) {
  gate_->allow(2);
  LatePinBuffer& buffer = open(8, PinPolicy::kLazy, TouchSetting::kSequential);
  wait_touched(buffer, 2);
  buffer.flush_begins(5 * kPage, kPage);
  gate_->allow(kNever);
  wait_state(buffer, LatePinState::kPausedForFlush);
  EXPECT_EQ(buffer.stats().touched_bytes, 2 * kPage);
  EXPECT_EQ(buffer.stats().strategy, TouchStrategy::kSequential);
  EXPECT_TRUE(script_->pins().empty());
  buffer.flush_ends(5 * kPage, kPage);
  EXPECT_TRUE(buffer.wait_pinned());
  EXPECT_EQ(buffer.stats().touched_bytes, 8 * kPage);
}

TEST_F(LatePinBufferTest, ConcurrentStrategyTouchesWhileAFlushIsOpen) {
  gate_->allow(0);
  LatePinBuffer& buffer = open(8, PinPolicy::kLazy, TouchSetting::kConcurrent);
  buffer.flush_begins(0, kPage);
  gate_->allow(kNever);
  wait_touched(buffer, 7);  // every page but the flush's own, which the flush touches
  EXPECT_EQ(buffer.stats().state, LatePinState::kTouching);
  EXPECT_TRUE(script_->pins().empty()) << "not pinned before every page is touched";
  buffer.flush_ends(0, kPage);
  EXPECT_TRUE(buffer.wait_pinned());
  EXPECT_EQ(buffer.stats().touched_bytes, 8 * kPage);
}

TEST_F(LatePinBufferTest, AFlushIntoUntouchedPagesWorksAndIsCounted) {
  gate_->allow(0);
  LatePinBuffer& buffer = open(8);
  std::vector<std::byte> bytes(3 * kPage);
  std::mt19937 rng(7);
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng());
  buffer.flush_begins(2 * kPage, bytes.size());
  std::memcpy(buffer.data() + 2 * kPage, bytes.data(), bytes.size());
  buffer.flush_ends(2 * kPage, bytes.size());
  LatePinStats stats = buffer.stats();
  EXPECT_EQ(stats.flushes, 1u);
  EXPECT_EQ(stats.flushes_to_untouched, 1u);
  EXPECT_EQ(stats.bytes_flushed_to_untouched, 3 * kPage);
  EXPECT_EQ(stats.touched_bytes, 3 * kPage);
  EXPECT_GT(stats.measured.flush_untouched, 0);
  gate_->allow(kNever);
  EXPECT_TRUE(buffer.wait_pinned());
  EXPECT_EQ(std::memcmp(buffer.data() + 2 * kPage, bytes.data(), bytes.size()), 0) << "touching keeps the bytes";
}

// A flush into touched pages while the gate lets the forerunner take one
// step: a sample of Fc.
void flush_beside_one_step(LatePinBuffer& buffer, StepGate& gate, std::size_t page) {
  const std::size_t touched = buffer.stats().touched_bytes;
  buffer.flush_begins(page * kPage, kPage);
  gate.allow(gate.taken + 1);
  ASSERT_TRUE(eventually([&] { return buffer.stats().touched_bytes == touched + kPage; }));
  buffer.flush_ends(page * kPage, kPage);
}

TEST_F(LatePinBufferTest, AutoProbesTheStrategyWhoseFlushRateIsMissing) {
  gate_->allow(2);
  LatePinBuffer& buffer = open(64, PinPolicy::kLazy, TouchSetting::kAuto);
  wait_touched(buffer, 2);
  EXPECT_EQ(buffer.stats().strategy, TouchStrategy::kConcurrent);
  flush_beside_one_step(buffer, *gate_, 0);
  buffer.checkpoint_taken(kPage, 1000.0);
  LatePinStats stats = buffer.stats();
  EXPECT_GT(stats.measured.flush_concurrent, 0);
  EXPECT_EQ(stats.measured.flush_touched, 0);
  EXPECT_FALSE(stats.decision.has_value()) << "not before Ft is measured";
  EXPECT_EQ(stats.strategy, TouchStrategy::kSequential) << "the strategy that measures Ft";
}

TEST_F(LatePinBufferTest, AutoAppliesTheModelsChoiceAndRecordsItsInputs) {
  gate_->allow(2);
  LatePinBuffer& buffer = open(64, PinPolicy::kLazy, TouchSetting::kAuto);
  wait_touched(buffer, 2);
  buffer.flush_begins(0, kPage);  // the forerunner is held: no touching beside this flush
  std::memset(buffer.data(), 1, kPage);
  buffer.flush_ends(0, kPage);
  flush_beside_one_step(buffer, *gate_, 1);
  buffer.checkpoint_taken(kPage, 1000.0);  // compute long enough to touch everything in between
  const LatePinStats stats = buffer.stats();
  EXPECT_GT(stats.measured.touch_alone, 0);
  EXPECT_GT(stats.measured.flush_touched, 0);
  EXPECT_GT(stats.measured.flush_concurrent, 0);
  ASSERT_TRUE(stats.decision.has_value());
  EXPECT_EQ(stats.decision->derived, "Fu") << "T, Tc, Ft and Fc measured";
  EXPECT_EQ(stats.decision->strategy, TouchStrategy::kSequential);
  EXPECT_EQ(stats.strategy, TouchStrategy::kSequential);
  EXPECT_EQ(stats.decision->inputs.checkpoint_bytes, static_cast<double>(kPage));
  EXPECT_EQ(stats.decision->inputs.compute_seconds, 1000.0);
  EXPECT_EQ(stats.decision->inputs.untouched_bytes, static_cast<double>(61 * kPage));
  EXPECT_EQ(stats.decision->inputs.touched_ahead_bytes, static_cast<double>(kPage));  // page 2
  EXPECT_LT(stats.decision->sequential.flush_seconds, stats.decision->concurrent.flush_seconds);
}

TEST_F(LatePinBufferTest, AFixedTouchSettingRecordsTheModelButKeepsItsStrategy) {
  gate_->allow(2);
  LatePinBuffer& buffer = open(64, PinPolicy::kLazy, TouchSetting::kConcurrent);
  wait_touched(buffer, 2);
  buffer.flush_begins(0, kPage);
  buffer.flush_ends(0, kPage);
  buffer.checkpoint_taken(kPage, 1000.0);
  const LatePinStats stats = buffer.stats();
  ASSERT_TRUE(stats.decision.has_value());
  EXPECT_EQ(stats.decision->strategy, TouchStrategy::kSequential);
  EXPECT_EQ(stats.strategy, TouchStrategy::kConcurrent);
}

TEST_F(LatePinBufferTest, EagerPopulatesAndPinsTheWholeBufferInTheConstructor) {
  LatePinBuffer& buffer = open(7, PinPolicy::kEager);
  EXPECT_TRUE(buffer.pinned());
  const LatePinStats stats = buffer.stats();
  EXPECT_EQ(stats.state, LatePinState::kPinned);
  EXPECT_EQ(stats.touched_bytes, 7 * kPage);
  expect_pieces_cover(script_->pins(), buffer.data(), buffer.capacity(), script_->max_piece);
  EXPECT_EQ(gate_->taken, 0u) << "no forerunner";
  EXPECT_TRUE(buffer.wait_pinned());
}

TEST_F(LatePinBufferTest, OffTouchesEverythingAndNeverPins) {
  LatePinBuffer& buffer = open(6, PinPolicy::kOff);
  EXPECT_FALSE(buffer.wait_pinned());
  const LatePinStats stats = buffer.stats();
  EXPECT_EQ(stats.state, LatePinState::kNotPinned);
  EXPECT_EQ(stats.touched_bytes, 6 * kPage);
  EXPECT_TRUE(script_->pins().empty());
}

TEST_F(LatePinBufferTest, APinFailureIsLoggedOnceUnpinsThePiecesAndFlushesGoOn) {
  script_->fail_at = 1;
  ::testing::internal::CaptureStderr();
  LatePinBuffer& buffer = open(8);
  EXPECT_FALSE(buffer.wait_pinned());
  const std::string logged = ::testing::internal::GetCapturedStderr();
  const LatePinStats stats = buffer.stats();
  EXPECT_EQ(stats.state, LatePinState::kPinFailed);
  EXPECT_NE(stats.pin_failure.find("injected pin failure at piece 1"), std::string::npos) << stats.pin_failure;
  EXPECT_EQ(stats.pin_pieces, 0u);
  EXPECT_NE(logged.find("cannot pin"), std::string::npos) << logged;
  EXPECT_EQ(logged.find("cannot pin"), logged.rfind("cannot pin")) << "logged once: " << logged;
  EXPECT_NE(logged.find("injected pin failure"), std::string::npos) << logged;
  EXPECT_EQ(script_->unpins(), script_->pins()) << "the piece pinned before the failure is given back";

  std::vector<std::byte> bytes(2 * kPage, std::byte{0x5a});
  buffer.flush_begins(kPage, bytes.size());
  std::memcpy(buffer.data() + kPage, bytes.data(), bytes.size());
  buffer.flush_ends(kPage, bytes.size());
  EXPECT_EQ(std::memcmp(buffer.data() + kPage, bytes.data(), bytes.size()), 0);
  EXPECT_EQ(buffer.stats().flushes, 1u);
  buffer_.reset();
  EXPECT_EQ(script_->unpins().size(), 1u) << "nothing unpinned twice";
}

TEST_F(LatePinBufferTest, StopDuringTouchingStopsBeforeTheNextStep) {
  gate_->allow(0);
  LatePinBuffer& buffer = open(16);
  gate_->on_step = [&](std::size_t attempt) {
    if (attempt == 2) buffer.stop();
  };
  gate_->allow(kNever);
  EXPECT_FALSE(buffer.wait_pinned());
  const LatePinStats stats = buffer.stats();
  EXPECT_EQ(stats.state, LatePinState::kStopped);
  EXPECT_EQ(stats.touched_bytes, 2 * kPage);
  EXPECT_TRUE(script_->pins().empty());
}

TEST_F(LatePinBufferTest, StopDuringPinningStopsBeforeTheNextPieceAndDestructionUnpins) {
  script_->max_piece = kPage;
  LatePinBuffer* opened = nullptr;
  script_->during_pin = [&](std::size_t call) {
    if (call == 1) opened->stop();
  };
  gate_->allow(0);
  opened = &open(8);
  gate_->allow(kNever);
  EXPECT_FALSE(opened->wait_pinned());
  EXPECT_EQ(opened->stats().state, LatePinState::kStopped);
  EXPECT_EQ(opened->stats().pin_pieces, 2u);
  const std::vector<Piece> pins = script_->pins();
  ASSERT_EQ(pins.size(), 2u);
  buffer_.reset();
  std::vector<Piece> unpins = script_->unpins();
  std::reverse(unpins.begin(), unpins.end());
  EXPECT_EQ(unpins, pins);
}

TEST_F(LatePinBufferTest, DestructionAtAnyMomentUnpinsExactlyWhatWasPinned) {
  script_->max_piece = kPage;
  for (int round = 0; round < 20; ++round) {
    open(64);
    if (round % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(50 * round));
    buffer_.reset();
    std::vector<Piece> pins = script_->pins();
    std::vector<Piece> unpins = script_->unpins();
    std::sort(pins.begin(), pins.end());
    std::sort(unpins.begin(), unpins.end());
    ASSERT_EQ(pins, unpins) << "round " << round;
  }
}

TEST_F(LatePinBufferTest, MisuseIsRefusedWithTheRangeNamed) {
  gate_->allow(0);
  LatePinBuffer& buffer = open(4);
  EXPECT_THROW(buffer.flush_begins(3 * kPage, 2 * kPage), InvalidArgumentError);
  EXPECT_THROW(buffer.flush_begins(0, 0), InvalidArgumentError);
  EXPECT_THROW(buffer.flush_ends(0, kPage), StateError);
  EXPECT_THROW(buffer.checkpoint_taken(kPage, -1.0), InvalidArgumentError);
  LatePinOptions options;
  options.capacity = 0;
  EXPECT_THROW(LatePinBuffer(options, std::make_unique<RecordingPinner>(script_), log_), InvalidArgumentError);
  options.capacity = kPage;
  options.touch_step = kPage + 1;
  EXPECT_THROW(LatePinBuffer(options, std::make_unique<RecordingPinner>(script_), log_), InvalidArgumentError);
}

TEST_F(LatePinBufferTest, CapacityIsRoundedUpToWholeTouchSteps) {
  LatePinOptions options;
  options.capacity = 5 * kPage + 1;
  options.touch_step = 2 * kPage;
  options.pin = PinPolicy::kOff;
  LatePinBuffer buffer(options, std::make_unique<RecordingPinner>(script_), log_);
  EXPECT_EQ(buffer.capacity(), 6 * kPage);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % (std::size_t{2} << 20), 0u) << "huge-page aligned";
}

TEST(LatePinSettingsTest, ParseTheConfigurationValues) {
  const auto parsed = [](const std::string& key, const std::string& value) { return Config::load("", {{key, value}}); };
  EXPECT_EQ(parsed("buffer.pin", "lazy").buffer.pin, PinPolicy::kLazy);
  EXPECT_EQ(parsed("buffer.pin", "eager").buffer.pin, PinPolicy::kEager);
  EXPECT_EQ(parsed("buffer.pin", "off").buffer.pin, PinPolicy::kOff);
  EXPECT_EQ(parsed("buffer.touch", "auto").buffer.touch, TouchSetting::kAuto);
  EXPECT_EQ(parsed("buffer.touch", "concurrent").buffer.touch, TouchSetting::kConcurrent);
  EXPECT_EQ(parsed("buffer.touch", "sequential").buffer.touch, TouchSetting::kSequential);
  EXPECT_EQ(parsed("buffer.pin_token_dir", "").buffer.pin_token_dir, "");
  EXPECT_THROW(parsed("buffer.pin", "later"), ConfigError);
  EXPECT_THROW(parsed("buffer.touch", "sometimes"), ConfigError);
}

// ---------------------------------------------------------------- the token

class RegistrationTokenTest : public ::testing::Test {
 protected:
  // The user's own directory inside the token directory, which holds the lock files.
  std::string own_directory() const { return dir_.path() + "/resurgo-" + std::to_string(::geteuid()); }
  ::TempDir dir_;
};

TEST_F(RegistrationTokenTest, TryAcquireFailsWhileHeldAndSucceedsOnceReleased) {
  RegistrationToken first(dir_.path(), "pin");
  RegistrationToken second(dir_.path(), "pin");
  RegistrationToken::Hold held = first.try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(second.try_acquire()) << "another open file description of the same process";
  EXPECT_FALSE(first.try_acquire()) << "the same token object";
  held.release();
  EXPECT_TRUE(second.try_acquire());
}

TEST_F(RegistrationTokenTest, AcquireGivesUpAfterTheTimeoutOrWhenAsked) {
  RegistrationToken token(dir_.path(), "pin");
  RegistrationToken::Hold held = token.try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(token.acquire_for(std::chrono::milliseconds(20)));
  int asked = 0;
  EXPECT_FALSE(token.acquire([&] { return ++asked == 3; }));
  EXPECT_EQ(asked, 3);
  RegistrationToken::Hold moved = std::move(held);
  EXPECT_FALSE(held);  // NOLINT(bugprone-use-after-move): moved-from is empty
  moved = RegistrationToken::Hold();
  EXPECT_TRUE(token.acquire_for(std::chrono::milliseconds(20)));
}

TEST_F(RegistrationTokenTest, TheLockFileHasMode0600) {
  RegistrationToken token(dir_.path(), "pin");
  ASSERT_TRUE(token.try_acquire());
  EXPECT_EQ(token.path(), own_directory() + "/pin.lock");
  struct stat info {};
  ASSERT_EQ(::stat(token.path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST_F(RegistrationTokenTest, NamesMustBeOneHarmlessFileName) {
  for (const std::string& bad : {std::string(), std::string("a/b"), std::string(".."), std::string("x..y"),
                                 std::string("a\nb"), std::string("a\x7f"), std::string(201, 'x')}) {
    EXPECT_THROW(RegistrationToken(dir_.path(), bad), InvalidArgumentError) << "'" << bad << "'";
  }
  EXPECT_NO_THROW(RegistrationToken(dir_.path(), "resurgo-pin_0.node"));
  EXPECT_EQ(RegistrationToken("", "pin").path(), std::string(RegistrationToken::kDefaultDirectory) + "/resurgo-" +
                                                     std::to_string(::geteuid()) + "/pin.lock");
}

// The directory is made as a store's is (0700); a link planted as the lock
// file is refused.
TEST_F(RegistrationTokenTest, AMissingDirectoryIsMadeAndASymbolicLinkIsAStorageErrorNamingThePath) {
  EXPECT_TRUE(RegistrationToken(dir_.path() + "/absent", "pin").try_acquire());
  ASSERT_EQ(::mkdir(own_directory().c_str(), 0700), 0);
  ASSERT_EQ(::symlink((dir_.path() + "/elsewhere").c_str(), (own_directory() + "/linked.lock").c_str()), 0);
  const RegistrationToken linked(dir_.path(), "linked");
  try {
    linked.try_acquire();
    ADD_FAILURE() << "no error";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find(linked.path()), std::string::npos) << error.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/elsewhere"));
}

TEST_F(LatePinBufferTest, TheTokenSerialisesTwoBuffers) {
  ::TempDir dir;
  RegistrationToken token_a(dir.path(), "node");
  RegistrationToken token_b(dir.path(), "node");
  script_->hold_at = 0;
  LatePinBuffer& first = open(4, PinPolicy::kLazy, TouchSetting::kConcurrent, &token_a);
  script_->wait_holding();  // the first buffer holds the token and pins

  auto second_script = std::make_shared<PinScript>();
  LatePinOptions options;
  options.capacity = 4 * kPage;
  options.touch_step = kPage;
  options.token = &token_b;
  LatePinBuffer second(options, std::make_unique<RecordingPinner>(second_script), log_);
  wait_state(second, LatePinState::kWaitingForToken);
  EXPECT_EQ(second.stats().touched_bytes, 4 * kPage) << "touching goes on beside the other's pin";
  EXPECT_TRUE(second_script->pins().empty());
  second.flush_begins(0, kPage);  // flushes go on while it waits
  second.flush_ends(0, kPage);

  script_->release_hold();
  EXPECT_TRUE(first.wait_pinned());
  EXPECT_TRUE(second.wait_pinned());
  std::lock_guard first_lock(script_->mutex);
  std::lock_guard second_lock(second_script->mutex);
  EXPECT_GT(second_script->pinned_at.front(), script_->pinned_at.back()) << "the second pinned after the first";
  EXPECT_GT(second.stats().token_wait_seconds, 0);
}

TEST_F(LatePinBufferTest, DestructionWhileWaitingForTheTokenReturns) {
  ::TempDir dir;
  RegistrationToken token(dir.path(), "node");
  RegistrationToken::Hold held = token.try_acquire();
  ASSERT_TRUE(held);
  LatePinBuffer& buffer = open(4, PinPolicy::kLazy, TouchSetting::kConcurrent, &token);
  wait_state(buffer, LatePinState::kWaitingForToken);
  buffer_.reset();
  EXPECT_TRUE(script_->pins().empty());
}

// ---------------------------------------------------------------- the model

// Rates in the proportions of the paper's A100 node (section IV-A): flushes
// 6 GB/s into touched pages, 3 GB/s into untouched ones; touching and
// flushing slow each other down.
TouchModelInputs paper_inputs(double compute_seconds) {
  TouchModelInputs in;
  in.rates.touch_alone = 20e9;
  in.rates.touch_concurrent = 10e9;
  in.rates.flush_touched = 6e9;
  in.rates.flush_untouched = 3e9;
  in.rates.flush_concurrent = 4.5e9;
  in.checkpoint_bytes = 128.0 * (1 << 20);
  in.compute_seconds = compute_seconds;
  in.untouched_bytes = 8.0 * (1 << 30);
  in.touched_ahead_bytes = 0;
  return in;
}

// With the application waiting for each flush, the paper's rates give the
// paper's crossover (Fig. 5c): concurrent at 5 ms of compute, sequential from
// 10 ms on.
TEST(TouchModelTest, LongComputeIntervalsPickSequential) {
  for (double compute : {0.01, 0.02, 0.05, 0.1}) {
    TouchModelInputs in = paper_inputs(compute);
    in.flushes_overlap_compute = false;
    const TouchDecision d = choose_touch_strategy(in);
    EXPECT_EQ(d.strategy, TouchStrategy::kSequential) << d.describe();
    EXPECT_LT(d.sequential.flush_seconds, d.concurrent.flush_seconds);
    EXPECT_TRUE(d.derived.empty());
  }
  for (double compute : {0.05, 0.1}) {  // longer than a flush into untouched pages (44.7 ms)
    const TouchDecision d = choose_touch_strategy(paper_inputs(compute));
    EXPECT_EQ(d.strategy, TouchStrategy::kSequential) << d.describe();
  }
}

TEST(TouchModelTest, VeryShortComputeIntervalsPickConcurrent) {
  for (bool overlap : {false, true}) {
    for (double compute : {0.0, 0.001, 0.005}) {
      TouchModelInputs in = paper_inputs(compute);
      in.flushes_overlap_compute = overlap;
      const TouchDecision d = choose_touch_strategy(in);
      EXPECT_EQ(d.strategy, TouchStrategy::kConcurrent) << d.describe();
      EXPECT_LT(d.concurrent.flush_seconds, d.sequential.flush_seconds);
      EXPECT_LT(d.concurrent.iterations_to_touch_all, d.sequential.iterations_to_touch_all);
    }
  }
}

TEST(TouchModelTest, TheChoiceSwitchesOnceAsTheComputeIntervalGrows) {
  for (bool overlap : {false, true}) {
    int switches = 0;
    TouchStrategy previous = TouchStrategy::kConcurrent;
    for (int ms = 0; ms <= 200; ++ms) {
      TouchModelInputs in = paper_inputs(ms / 1000.0);
      in.flushes_overlap_compute = overlap;
      const TouchStrategy now = choose_touch_strategy(in).strategy;
      switches += now != previous;
      previous = now;
    }
    EXPECT_EQ(switches, 1) << "overlap " << overlap;
    EXPECT_EQ(previous, TouchStrategy::kSequential);
  }
}

TEST(TouchModelTest, OneIterationFollowsTheFormulas) {
  TouchModelInputs in = paper_inputs(0);
  in.untouched_bytes = in.checkpoint_bytes;  // one flush into untouched pages touches everything
  const TouchDecision d = choose_touch_strategy(in);
  const double s = in.checkpoint_bytes;
  EXPECT_EQ(d.horizon_iterations, 1u);
  EXPECT_DOUBLE_EQ(d.sequential.flush_seconds, s / 3e9);
  EXPECT_DOUBLE_EQ(d.concurrent.flush_seconds, s / (3e9 * 4.5e9 / 6e9));
  EXPECT_EQ(d.strategy, TouchStrategy::kSequential);

  in.untouched_bytes = 2 * s;  // sequential: two untouched flushes; concurrent: one, then touched
  in.compute_seconds = 0;
  const TouchDecision two = choose_touch_strategy(in);
  const double first = s / (3e9 * 4.5e9 / 6e9);
  EXPECT_EQ(two.sequential.iterations_to_touch_all, 2u);
  EXPECT_EQ(two.concurrent.iterations_to_touch_all, 1u) << "Tc * D = 10 GB/s * 74.6 ms covers the rest";
  EXPECT_DOUBLE_EQ(two.sequential.flush_seconds, 2 * s / 3e9);
  EXPECT_DOUBLE_EQ(two.concurrent.flush_seconds, first + s / 6e9) << "padded at Ft to the horizon";
}

TEST(TouchModelTest, TouchedPagesAheadMakeSequentialFree) {
  TouchModelInputs in = paper_inputs(0);
  in.touched_ahead_bytes = 4 * in.checkpoint_bytes;
  in.untouched_bytes = 0;
  const TouchDecision d = choose_touch_strategy(in);
  EXPECT_EQ(d.horizon_iterations, 0u);
  EXPECT_EQ(d.sequential.flush_seconds, 0);
  EXPECT_EQ(d.concurrent.flush_seconds, 0);
  EXPECT_EQ(d.strategy, TouchStrategy::kSequential) << "a tie";
}

// A flush overlapping the compute leaves sequential touching only C - D of
// idle time: none while flushes into untouched pages (44.7 ms) are longer
// than the compute, so they never get faster.
TEST(TouchModelTest, OverlappingFlushesLeaveSequentialTouchingLessIdleTime) {
  TouchModelInputs in = paper_inputs(0.01);
  const TouchDecision overlapping = choose_touch_strategy(in);
  in.flushes_overlap_compute = false;
  const TouchDecision waiting = choose_touch_strategy(in);
  EXPECT_DOUBLE_EQ(overlapping.sequential.flush_seconds, 64 * in.checkpoint_bytes / 3e9) << "every flush untouched";
  EXPECT_LT(waiting.sequential.flush_seconds, overlapping.sequential.flush_seconds);
  EXPECT_EQ(overlapping.strategy, TouchStrategy::kConcurrent) << overlapping.describe();
  EXPECT_EQ(waiting.strategy, TouchStrategy::kSequential) << waiting.describe();
}

TEST(TouchModelTest, MissingRatesFollowTheFaultAndSharingRules) {
  TouchRates m;
  m.touch_alone = 20e9;
  m.flush_touched = 6e9;
  std::string derived;
  TouchRates r = complete_rates(m, &derived);
  EXPECT_EQ(derived, "Fu, Tc, Fc");
  EXPECT_DOUBLE_EQ(r.flush_untouched, 1 / (1 / 6e9 + 1 / 20e9));
  EXPECT_DOUBLE_EQ(r.touch_concurrent, 10e9);
  EXPECT_DOUBLE_EQ(r.flush_concurrent, 3e9);

  m.flush_concurrent = 1.5e9;  // sequential never measures Tc: Tc/T = 1 - Fc/Ft
  derived.clear();
  r = complete_rates(m, &derived);
  EXPECT_EQ(derived, "Fu, Tc");
  EXPECT_DOUBLE_EQ(r.touch_concurrent, 20e9 * 0.75);
  m.flush_concurrent = 4.5e9;  // 1 - Fc/Ft = 0.25: a fair split leaves touching half its rate
  r = complete_rates(m, nullptr);
  EXPECT_DOUBLE_EQ(r.touch_concurrent, 20e9 * 0.5);

  TouchRates only_untouched;
  only_untouched.touch_alone = 20e9;
  only_untouched.flush_untouched = 5e9;
  r = complete_rates(only_untouched, nullptr);
  EXPECT_DOUBLE_EQ(r.flush_touched, 1 / (1 / 5e9 - 1 / 20e9));

  TouchRates concurrent_only;  // what the concurrent strategy measures
  concurrent_only.touch_alone = 20e9;
  concurrent_only.touch_concurrent = 5e9;
  concurrent_only.flush_concurrent = 4.5e9;
  r = complete_rates(concurrent_only, nullptr);
  EXPECT_DOUBLE_EQ(r.flush_touched, 4.5e9 / 0.75);
  concurrent_only.touch_concurrent = 18e9;  // touching barely slowed: Ft at most 2 Fc
  r = complete_rates(concurrent_only, nullptr);
  EXPECT_DOUBLE_EQ(r.flush_touched, 9e9);
}

TEST(TouchModelTest, RefusesMissingOrInvalidInputs) {
  TouchModelInputs in = paper_inputs(0.01);
  in.rates.touch_alone = 0;
  EXPECT_FALSE(in.rates.enough_to_decide());
  EXPECT_THROW(choose_touch_strategy(in), InvalidArgumentError);
  in = paper_inputs(0.01);
  in.checkpoint_bytes = 0;
  EXPECT_THROW(choose_touch_strategy(in), InvalidArgumentError);
  in = paper_inputs(-1);
  EXPECT_THROW(choose_touch_strategy(in), InvalidArgumentError);
}

TEST(TouchModelTest, DescribeNamesTheChoiceTheEstimatesAndEveryInput) {
  const std::string line = choose_touch_strategy(paper_inputs(0.1)).describe();
  for (const char* part : {"sequential", "concurrent", "S=128.00 MiB", "C=0.1 s", "U=8.00 GiB", "L=0 bytes", "T=20 GB/s",
                           "Tc=10 GB/s", "Ft=6 GB/s", "Fu=3 GB/s", "Fc=4.5 GB/s"}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << " in " << line;
  }
}

// ---------------------------------------------------------------- pinners

// The sanitizers replace mlock with a call that does nothing and succeeds.
const char* const kMlockIntercepted =
    kSanitized ? "the sanitizer intercepts mlock: it does nothing and succeeds" : nullptr;

// mlock needs RLIMIT_MEMLOCK of the range, or CAP_IPC_LOCK (root).
std::string why_mlock_cannot(std::size_t bytes) {
  if (kMlockIntercepted != nullptr) return kMlockIntercepted;
  rlimit limit{};
  if (::geteuid() == 0 || (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur >= bytes)) return "";
  return "RLIMIT_MEMLOCK (" + std::to_string(limit.rlim_cur) + " bytes) is below the " + std::to_string(bytes) +
         " bytes this test locks, and the process is not root";
}

long locked_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmLck:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST(HostPinnerTest, MlockLocksAndUnlocksASmallRange) {
  const std::size_t bytes = 16 * kPage;
  if (const std::string why = why_mlock_cannot(bytes); !why.empty()) GTEST_SKIP() << why;
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  std::unique_ptr<HostPinner> pinner = make_mlock_pinner();
  EXPECT_EQ(pinner->name(), "mlock");
  EXPECT_GE(pinner->max_piece(), bytes);
  const long before = locked_kib();
  pinner->pin(memory, bytes);
  EXPECT_EQ(locked_kib() - before, static_cast<long>(bytes / 1024));
  pinner->unpin(memory, bytes);
  EXPECT_EQ(locked_kib(), before);
  ::munmap(memory, bytes);
}

TEST(HostPinnerTest, MlockErrorsNameTheCallTheRangeAndTheReason) {
  if (kMlockIntercepted != nullptr) GTEST_SKIP() << kMlockIntercepted;
  void* memory = ::mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  ::munmap(memory, 4 * kPage);  // an unmapped range: ENOMEM
  try {
    make_mlock_pinner()->pin(memory, 4 * kPage);
    ADD_FAILURE() << "no error";
  } catch (const GpuError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("mlock (" + describe_pin_range(memory, 4 * kPage)), std::string::npos) << what;
    EXPECT_NE(what.find(std::strerror(ENOMEM)), std::string::npos) << what;
    EXPECT_NE(what.find("RLIMIT_MEMLOCK"), std::string::npos) << what;
  }
}

TEST(HostPinnerTest, ALazyBufferPinsWithMlock) {
  const std::size_t bytes = std::size_t{4} << 20;
  if (const std::string why = why_mlock_cannot(bytes); !why.empty()) GTEST_SKIP() << why;
  const Logger log("late-pin-test", LogLevel::kWarn);
  LatePinOptions options;
  options.capacity = bytes;
  LatePinBuffer buffer(options, make_mlock_pinner(), log);
  EXPECT_TRUE(buffer.wait_pinned()) << buffer.stats().pin_failure;
  EXPECT_EQ(buffer.stats().pin_pieces, 1u);
  EXPECT_GE(locked_kib(), static_cast<long>(bytes / 1024));
}

#ifdef RESURGO_HAVE_CUDA_HEADERS
TEST(HostPinnerTest, TheCudaPinnerSaysWhyTheDriverIsUnavailable) {
  const CudaDriver& driver = CudaDriver::instance();
  if (driver.available()) GTEST_SKIP() << "a CUDA driver is usable here; this checks the message without one";
  try {
    CudaHostPinner pinner(0);
    ADD_FAILURE() << "no error";
  } catch (const GpuError& error) {
    EXPECT_NE(std::string(error.what()).find(driver.why_unavailable()), std::string::npos) << error.what();
  }
}
#endif

}  // namespace
}  // namespace resurgo::gpu
