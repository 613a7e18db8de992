#include "track/tracker.h"

#include <unistd.h>

#include <bit>
#include <cstdint>
#include <sstream>

namespace resurgo::track {


bool reports_pages(Method method) { return method == Method::kUffd || method == Method::kSoftDirty; }

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t pages_spanned(const std::byte* base, std::size_t bytes) {
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(base) / page_size();
  const std::uintptr_t last = (reinterpret_cast<std::uintptr_t>(base) + bytes - 1) / page_size();
  return bytes == 0 ? 0 : static_cast<std::size_t>(last - first + 1);
}

std::string describe_region(int id, const std::byte* base, std::size_t bytes) {
  std::ostringstream text;
  text << "region " << id << " [" << static_cast<const void*>(base) << ", " << static_cast<const void*>(base + bytes)
       << ")";
  return text.str();
}

void check_block_pages(std::string_view method, int id, std::size_t block_pages) {
  if (!std::has_single_bit(block_pages)) {
    throw InvalidArgumentError(std::string(method) + ": collect of region " + std::to_string(id) + ": block_pages " +
                               std::to_string(block_pages) + " is not a power of two >= 1");
  }
}

}  // namespace resurgo::track
