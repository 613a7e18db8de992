// Little-endian encoding of the container's fixed-width fields, with a reader
// that refuses to run past the end of its buffer, and the checked arithmetic
// every parser of src/format/ does on numbers read from a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace resurgo::format {

// a + b and a * b, or none when the result does not fit in T: a length or
// offset read from a file may be anything, and a signed overflow is
// undefined behaviour, an unsigned one a wrong bound.
template <class T>
std::optional<T> checked_add(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T sum;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

template <class T>
std::optional<T> checked_mul(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T product;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::byte>& out) : out_(out) {}
  template <class T>
  void put(T value) {  // integers only; the library targets little-endian hosts
    static_assert(std::is_integral_v<T>);
    put_bytes(&value, sizeof(T));
  }
  // resize + memcpy: vector::insert of a byte range costs several times more
  // per call, and a container's records are written a field at a time.
  void put_bytes(const void* data, std::size_t bytes) {
    if (bytes == 0) return;
    const std::size_t at = out_.size();
    out_.resize(at + bytes);
    std::memcpy(out_.data() + at, data, bytes);
  }
  void put_string(const std::string& text) {
    put(static_cast<std::uint32_t>(text.size()));
    put_bytes(text.data(), text.size());
  }

 private:
  std::vector<std::byte>& out_;
};

// Throws via `fail(what)` (a callable taking a std::string) on overrun.
template <class Fail>
class ByteReader {
 public:
  ByteReader(const std::byte* data, std::size_t bytes, Fail fail)
      : data_(data), end_(bytes), fail_(fail) {}
  template <class T>
  T get(const char* what) {
    static_assert(std::is_integral_v<T>);
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }
  // A length-prefixed string of at most `max_bytes`.
  std::string get_string(const char* what, std::size_t max_bytes) {
    const auto length = get<std::uint32_t>(what);
    if (length > max_bytes) fail_(std::string(what) + " length " + std::to_string(length) +
                                  " exceeds the limit " + std::to_string(max_bytes));
    need(length, what);
    std::string text(reinterpret_cast<const char*>(data_ + position_), length);
    position_ += length;
    return text;
  }
  const std::byte* take(std::size_t bytes, const char* what) {
    need(bytes, what);
    const std::byte* p = data_ + position_;
    position_ += bytes;
    return p;
  }
  std::size_t remaining() const { return end_ - position_; }
  std::size_t position() const { return position_; }

 private:
  void need(std::size_t bytes, const char* what) {
    if (bytes > end_ - position_) fail_(std::string(what) + " runs past the end of its section");
  }
  const std::byte* data_;
  std::size_t end_;
  std::size_t position_ = 0;
  Fail fail_;
};

}  // namespace resurgo::format
