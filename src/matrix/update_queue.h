// The updates this rank issued and has not sent yet (messages backend):
// update() copies the caller's values and indices in and returns, and the
// progress thread (without one: the same thread, right after) bins and
// sends them in the order they came. The bytes held are capped: an update
// waits for room, except into an empty queue (an update larger than the cap
// goes alone). One thread pushes (the application's); any thread may take
// the front, under the caller's own lock (MessageBackend's send mutex).
// The copies' arrays are recycled: an update taken off the front leaves
// its arrays for the next copy, as a fresh array of a few MiB costs page
// faults on the caller's thread, about as much again as the copy; a fresh
// values array (the first updates) is left uninitialized (scratch_buffer.h),
// not zeroed before the copy. At most
// kSpares are kept, each of at most cap / kSpares bytes: the spares never
// hold more than the cap again. A symmetric update whose column indices
// are ascending (the usual Hessian update) copies only its upper pairs,
// about half the values: the bins read no others (encode_bin).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "matrix/scratch_buffer.h"
#include "matrix/update_bins.h"

namespace resurgo {

// An update copied out of the caller's arrays.
template <typename T>
struct QueuedUpdate {
  QueuedUpdate() = default;
  explicit QueuedUpdate(const UpdateSlice<T>& update) { assign(update); }

  // Copies `update` in, into the arrays' room where they have it. Of an
  // upper-only update with ascending column indices only the pairs with
  // rows[i] <= cols[j] are copied; the others hold whatever the recycled
  // array held, and nothing reads them.
  void assign(const UpdateSlice<T>& update);
  UpdateSlice<T> slice() const { return {values, rows, cols, upper_only}; }
  // What the copy of `update` holds.
  static std::size_t bytes_of(const UpdateSlice<T>& update);
  std::size_t bytes() const { return bytes_of(slice()); }
  // What the arrays hold room for.
  std::size_t capacity_bytes() const {
    return values.capacity() * sizeof(T) + (rows.capacity() + cols.capacity()) * sizeof(std::int64_t);
  }

  // values[i * cols.size() + j] for the pairs with cols[j] >= rows[i], rows
  // and cols already copied; the row's other values are left as they were.
  void assign_upper_pairs(std::span<const T> source);

  ScratchBuffer<T> values;
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
  // Copies `update` into a recycled update and pushes it.
  void push_copy(const UpdateSlice<T>& update);
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
  static constexpr std::size_t kSpares = 2;
  std::vector<QueuedUpdate<T>> spares_;  // popped updates whose arrays the next copies reuse
};

}  // namespace resurgo
