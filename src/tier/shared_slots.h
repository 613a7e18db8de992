// Parts written once (persistent.layout = shared; job/shared_version.h): at
// the agreement on a version routed to L4, the job reserves a slot for each
// rank in the version's shared temporary (rank 0 creates it; a slot per
// rank, with room to spare, at offsets every rank computes alike), and the
// level's commit of that version writes the rank's container straight into
// its slot instead of into a file of its own. The commit waits for the
// job's answer, at most the job's timeout. A version without a slot, a
// container larger than its slot, and a commit made in a forked writer
// (which could not tell its parent what it wrote) go to the rank's own file
// as before, and the job copies that file into the shared file.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "resurgo/env.hpp"

namespace resurgo {

// One rank's room in a version's shared temporary.
struct SharedSlot {
  std::string temporary;     // its name in the level's directory
  std::uint64_t offset = 0;  // where this rank's part starts
  std::uint64_t capacity = 0;
  std::uint64_t end = 0;  // where every rank's slot has ended: the part index goes there
};

// What became of a version's slot: none reserved, or reserved and (bytes)
// filled by the commit.
struct TakenSlot {
  std::optional<SharedSlot> slot;
  std::optional<std::uint64_t> bytes;
};

class SharedSlots {
 public:
  // Thrown by SlotFile when a container outgrows its slot.
  struct Outgrown {};

  // On the application thread, before the version goes to the pipeline:
  // its commit waits for answer().
  void expect(int version, double timeout_seconds) {
    owner_.store(::getpid(), std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    Entry& entry = entries_[version];
    entry.deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double>(timeout_seconds));
  }
  // The job: the version's slot, or none (no slot: the commit writes the
  // rank's own file). A version without a slot is forgotten here: the job
  // takes no later step that would forget it (a version the ranks did not
  // agree on has none), and find() answers the same for it either way.
  void answer(int version, std::optional<SharedSlot> slot) {
    {
      std::lock_guard lock(mutex_);
      if (slot) {
        Entry& entry = entries_[version];
        entry.answered = true;
        entry.slot = std::move(slot);
      } else {
        entries_.erase(version);
      }
    }
    answered_.notify_all();
  }
  // The commit: where to write the version; none when it has no slot, the
  // job did not answer in time, or this is a forked writer (another
  // process than the one that expects: it never takes the mutex, which a
  // thread of its parent may have held at fork()).
  std::optional<SharedSlot> wait(int version) {
    if (owner_.load(std::memory_order_relaxed) != ::getpid()) return std::nullopt;
    std::unique_lock lock(mutex_);
    auto found = entries_.find(version);
    if (found == entries_.end()) return std::nullopt;
    // Copied, and the entry looked up again at each wake-up: an answer of
    // no slot erases it.
    const auto deadline = found->second.deadline;
    answered_.wait_until(lock, deadline, [&] {
      found = entries_.find(version);
      return found == entries_.end() || found->second.answered;
    });
    if (found == entries_.end()) return std::nullopt;
    Entry& entry = found->second;
    entry.gave_up = !entry.answered;
    return entry.gave_up ? std::nullopt : entry.slot;
  }
  // The commit filled the version's slot with `bytes` (unless the job gave
  // the version up meanwhile: a rank that failed it fails it on every rank,
  // whatever this rank's commit still does).
  void filled(int version, std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    const auto found = entries_.find(version);
    if (found != entries_.end() && found->second.slot) found->second.bytes = bytes;
  }
  // What became of the version's slot (the job, once its commit settled;
  // the level, reading the part before the shared file is published).
  TakenSlot find(int version) {
    std::lock_guard lock(mutex_);
    const auto found = entries_.find(version);
    if (found == entries_.end()) return {};
    return {found->second.slot, found->second.gave_up ? std::nullopt : found->second.bytes};
  }
  // The job, once the version's shared file is published or given up.
  void forget(int version) {
    std::lock_guard lock(mutex_);
    entries_.erase(version);
  }
  // Versions whose slot is remembered: expected, or answered with a slot
  // and not forgotten yet.
  std::size_t remembered() {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  struct Entry {
    std::chrono::steady_clock::time_point deadline;
    bool answered = false;
    bool gave_up = false;
    std::optional<SharedSlot> slot;
    std::optional<std::uint64_t> bytes;
  };
  std::atomic<pid_t> owner_{0};
  std::mutex mutex_;
  std::condition_variable answered_;
  std::map<int, Entry> entries_;
};

// A container written into its slot: appends at the slot's offset, and
// throws SharedSlots::Outgrown before a byte would pass its capacity.
class SlotFile final : public WritableFile {
 public:
  SlotFile(std::unique_ptr<PositionalFile> file, SharedSlot slot) : file_(std::move(file)), slot_(std::move(slot)) {}
  void append(const void* data, std::size_t bytes) override {
    if (bytes > slot_.capacity - written_) throw SharedSlots::Outgrown{};
    file_->write_at(slot_.offset + written_, data, bytes);
    written_ += bytes;
  }
  void sync() override {}  // the job syncs every part before it publishes the file
  void close() override {}
  const std::string& path() const override { return file_->path(); }
  std::uint64_t written() const { return written_; }

 private:
  std::unique_ptr<PositionalFile> file_;
  SharedSlot slot_;
  std::uint64_t written_ = 0;
};

}  // namespace resurgo
