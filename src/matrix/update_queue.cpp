#include "matrix/update_queue.h"

#include <algorithm>

namespace resurgo {

template <typename T>
void QueuedUpdate<T>::assign(const UpdateSlice<T>& update) {
  rows.assign(update.rows.begin(), update.rows.end());
  cols.assign(update.cols.begin(), update.cols.end());
  upper_only = update.upper_only;
  if (upper_only && std::is_sorted(cols.begin(), cols.end())) {
    assign_upper_pairs(update.values);
  } else {
    values.assign(update.values.begin(), update.values.end());
  }
}

template <typename T>
void QueuedUpdate<T>::assign_upper_pairs(std::span<const T> source) {
  values.resize(source.size());
  const std::size_t stride = cols.size();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto first = static_cast<std::size_t>(std::lower_bound(cols.begin(), cols.end(), rows[i]) - cols.begin());
    const std::size_t begin = i * stride + first;
    const std::size_t end = (i + 1) * stride;
    std::copy(source.begin() + static_cast<std::ptrdiff_t>(begin), source.begin() + static_cast<std::ptrdiff_t>(end),
              values.begin() + static_cast<std::ptrdiff_t>(begin));
  }
}

template <typename T>
std::size_t QueuedUpdate<T>::bytes_of(const UpdateSlice<T>& update) {
  return update.values.size() * sizeof(T) + (update.rows.size() + update.cols.size()) * sizeof(std::int64_t);
}

template <typename T>
bool UpdateQueue<T>::has_room(std::size_t bytes) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return updates_.empty() || (bytes_ <= capacity_ && bytes <= capacity_ - bytes_);
}

template <typename T>
void UpdateQueue<T>::push(QueuedUpdate<T> update) {
  const std::lock_guard<std::mutex> lock(mutex_);
  bytes_ += update.bytes();
  updates_.push_back(std::move(update));
}

template <typename T>
void UpdateQueue<T>::push_copy(const UpdateSlice<T>& update) {
  QueuedUpdate<T> copy;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!spares_.empty()) {
      copy = std::move(spares_.back());
      spares_.pop_back();
    }
  }
  copy.assign(update);  // outside the lock: the progress thread takes the front meanwhile
  push(std::move(copy));
}

template <typename T>
const QueuedUpdate<T>* UpdateQueue<T>::front() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return updates_.empty() ? nullptr : &updates_.front();
}

template <typename T>
void UpdateQueue<T>::pop_front() {
  const std::lock_guard<std::mutex> lock(mutex_);
  bytes_ -= updates_.front().bytes();
  if (spares_.size() < kSpares && updates_.front().capacity_bytes() <= capacity_ / kSpares) {
    spares_.push_back(std::move(updates_.front()));
  }
  updates_.pop_front();
}

template <typename T>
bool UpdateQueue<T>::empty() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return updates_.empty();
}

template struct QueuedUpdate<float>;
template struct QueuedUpdate<double>;
template class UpdateQueue<float>;
template class UpdateQueue<double>;

}  // namespace resurgo
