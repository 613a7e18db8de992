#include "base/units.h"

#include <unistd.h>

#include <cstdio>

namespace resurgo {

std::string size_text(std::uint64_t bytes) {
  if (bytes < kMiB) return std::to_string(bytes) + " bytes";
  const bool gib = bytes >= kGiB;
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", static_cast<double>(bytes) / static_cast<double>(gib ? kGiB : kMiB),
                gib ? "GiB" : "MiB");
  return text;
}

std::uint64_t quarter_of_physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size) / 4
                                    : 0;
}

}  // namespace resurgo
