// The element size of a region from its dtype name: the unit a shuffle
// groups bytes by.
#pragma once

#include <cstddef>
#include <string_view>

namespace resurgo::format {

// Bytes per element of a NumPy dtype name ("float32" -> 4, "complex128" ->
// 16, "bool" -> 1, "datetime64[ns]" -> 8); 1 when the name is empty or not a
// fixed-size numeric type, which makes a shuffle a no-op, never an error.
std::size_t element_size(std::string_view dtype);

}  // namespace resurgo::format
