#include "format/element_size.h"

#include <charconv>

namespace resurgo::format {

namespace {

// NumPy names numeric types by kind and width in bits: int16, uint8,
// float64, complex64, and bfloat16 from ml_dtypes.
constexpr std::string_view kSizedKinds[] = {"uint", "int", "float", "complex", "bfloat"};

std::size_t bits_after(std::string_view dtype, std::string_view kind) {
  if (!dtype.starts_with(kind)) return 0;
  const std::string_view digits = dtype.substr(kind.size());
  std::size_t bits = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
  if (error != std::errc() || end != digits.data() + digits.size()) return 0;
  return bits;
}

}  // namespace

std::size_t element_size(std::string_view dtype) {
  if (dtype == "bool") return 1;
  if (dtype.starts_with("datetime64") || dtype.starts_with("timedelta64")) return 8;
  for (std::string_view kind : kSizedKinds) {
    const std::size_t bits = bits_after(dtype, kind);
    if (bits >= 8 && bits <= 256 && bits % 8 == 0) return bits / 8;
  }
  return 1;
}

}  // namespace resurgo::format
