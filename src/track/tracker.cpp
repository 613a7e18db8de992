#include "track/tracker.h"

#include <unistd.h>

#include <cstdint>

namespace resurgo::track {

std::string_view method_name(Method method) {
  switch (method) {
    case Method::kUffd:
      return "uffd";
    case Method::kSoftDirty:
      return "soft-dirty";
    case Method::kMprotect:
      return "mprotect";
    case Method::kHash:
      return "hash";
  }
  return "unknown";
}

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t pages_spanned(const std::byte* base, std::size_t bytes) {
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(base) / page_size();
  const std::uintptr_t last = (reinterpret_cast<std::uintptr_t>(base) + bytes - 1) / page_size();
  return bytes == 0 ? 0 : static_cast<std::size_t>(last - first + 1);
}

}  // namespace resurgo::track
