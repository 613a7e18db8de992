// The updates this rank issued and has not sent yet (messages backend):
// update() copies the caller's values and indices in and returns, and the
// progress thread (without one: the same thread, right after) bins and
// sends them in the order they came. The bytes held are capped: an update
// waits for room, except into an empty queue (an update larger than the cap
// goes alone). One thread pushes (the application's); any thread may take
// the front, under the caller's own lock (MessageBackend's send mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "matrix/update_bins.h"

namespace resurgo {

// An update copied out of the caller's arrays.
template <typename T>
struct QueuedUpdate {
  explicit QueuedUpdate(const UpdateSlice<T>& update);

  UpdateSlice<T> slice() const { return {values, rows, cols, upper_only}; }
  // What the copy of `update` holds.
  static std::size_t bytes_of(const UpdateSlice<T>& update);
  std::size_t bytes() const { return bytes_of(slice()); }

  std::vector<T> values;
  std::vector<std::int64_t> rows;
  std::vector<std::int64_t> cols;
  bool upper_only = false;
};

template <typename T>
class UpdateQueue {
 public:
  explicit UpdateQueue(std::size_t capacity) : capacity_(capacity) {}

  // Whether an update of `bytes` would be taken now. Room only grows
  // between this and push(), there being one pusher.
  bool has_room(std::size_t bytes) const;
  void push(QueuedUpdate<T> update);
  // The oldest update, or nullptr. It stays in place (push does not move
  // it) until pop_front().
  const QueuedUpdate<T>* front() const;
  void pop_front();
  bool empty() const;

 private:
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::deque<QueuedUpdate<T>> updates_;
  std::size_t bytes_ = 0;
};

}  // namespace resurgo
