// Sized transfers of whole files between the ranks of a job, for the
// partner schemes (partner_copies.h, partner_memory.h): the size first,
// bounded before the receiver allocates, then the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resurgo/comm.hpp"
#include "resurgo/errors.hpp"

namespace resurgo::partner_transfer {

using Bytes = std::vector<std::byte>;

inline constexpr std::uint64_t kMaxFileBytes = std::uint64_t{1} << 42;  // bounds an announced size before allocating

inline std::uint64_t checked_size(std::uint64_t bytes, int from) {
  if (bytes > kMaxFileBytes) {
    throw StateError("rank " + std::to_string(from) + " announced " + std::to_string(bytes) +
                     " bytes for a partner copy, more than the " + std::to_string(kMaxFileBytes) + " allowed");
  }
  return bytes;
}

inline void send_sized(Comm& comm, int to, const Bytes& bytes) {
  const std::uint64_t size = bytes.size();
  comm.send(to, &size, sizeof size);
  if (size > 0) comm.send(to, bytes.data(), bytes.size());
}

inline Bytes receive_sized(Comm& comm, int from) {
  std::uint64_t size = 0;
  comm.receive(from, &size, sizeof size);
  Bytes bytes(checked_size(size, from));
  if (size > 0) comm.receive(from, bytes.data(), bytes.size());
  return bytes;
}

// Sends `out` to `to` while receiving from `from` (the ring's shift).
inline Bytes exchange_sized(Comm& comm, int to, const Bytes& out, int from) {
  std::uint64_t out_size = out.size();
  std::uint64_t in_size = 0;
  comm.exchange(to, &out_size, sizeof out_size, from, &in_size, sizeof in_size);
  Bytes in(checked_size(in_size, from));
  comm.exchange(to, out.data(), out.size(), from, in.data(), in.size());
  return in;
}

}  // namespace resurgo::partner_transfer
