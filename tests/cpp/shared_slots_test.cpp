// SharedSlots (tier/shared_slots.h): the hand-off between the job, which
// reserves a rank's slot in a version's shared file, and the L4 commit that
// waits for it. The store-level behaviour is in shared_file_test.cpp.
#include "tier/shared_slots.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace resurgo {
namespace {

using std::chrono::steady_clock;

constexpr double kLongTimeout = 30;

SharedSlot slot_at(std::uint64_t offset) { return SharedSlot{"temporary", offset, 1 << 20, 4 << 20}; }

TEST(SharedSlots, AVersionAnsweredWithoutASlotIsForgotten) {
  SharedSlots slots;
  for (int version = 0; version < 100; ++version) {
    slots.expect(version, kLongTimeout);
    slots.answer(version, std::nullopt);  // e.g. the ranks did not agree on it
    EXPECT_FALSE(slots.wait(version).has_value());
    EXPECT_FALSE(slots.find(version).slot.has_value());
  }
  EXPECT_EQ(slots.remembered(), 0u);
}

TEST(SharedSlots, AVersionWithASlotIsRememberedUntilTheJobForgetsIt) {
  SharedSlots slots;
  slots.expect(7, kLongTimeout);
  slots.answer(7, slot_at(3 << 20));
  const std::optional<SharedSlot> slot = slots.wait(7);
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->offset, 3u << 20);
  slots.filled(7, 1000);
  EXPECT_EQ(slots.find(7).bytes, 1000u);
  EXPECT_EQ(slots.remembered(), 1u);
  slots.forget(7);
  EXPECT_EQ(slots.remembered(), 0u);
}

// The commit may already wait when the answer comes; an answer of no slot
// erases the entry it waits on, and it must wake with none, at once.
TEST(SharedSlots, ACommitWaitingWhenNoSlotIsAnsweredWakesWithNone) {
  SharedSlots slots;
  slots.expect(3, kLongTimeout);
  const auto started = steady_clock::now();
  auto waited = std::async(std::launch::async, [&] { return slots.wait(3); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  slots.answer(3, std::nullopt);
  EXPECT_FALSE(waited.get().has_value());
  EXPECT_LT(steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_EQ(slots.remembered(), 0u);
}

TEST(SharedSlots, ACommitWaitingWhenASlotIsAnsweredGetsIt) {
  SharedSlots slots;
  slots.expect(4, kLongTimeout);
  auto waited = std::async(std::launch::async, [&] { return slots.wait(4); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  slots.answer(4, slot_at(1 << 20));
  const std::optional<SharedSlot> slot = waited.get();
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->offset, 1u << 20);
}

// A commit that gave up waiting writes the rank's own file: a slot
// answered later must not count as filled.
TEST(SharedSlots, ASlotAnsweredAfterTheCommitGaveUpIsNeverFilled) {
  SharedSlots slots;
  slots.expect(5, 0.01);
  EXPECT_FALSE(slots.wait(5).has_value());
  slots.answer(5, slot_at(0));
  slots.filled(5, 10);
  EXPECT_TRUE(slots.find(5).slot.has_value());
  EXPECT_FALSE(slots.find(5).bytes.has_value());
}

}  // namespace
}  // namespace resurgo
