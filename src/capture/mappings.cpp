#include "capture/mappings.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace resurgo {

bool Mapping::has_flag(const std::string& flag) const {
  return (" " + vm_flags + " ").find(" " + flag + " ") != std::string::npos;
}

bool Mapping::overlaps(const void* data, std::uint64_t bytes) const {
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  return bytes > 0 && first < end && first + bytes > begin;
}

// Each mapping is a header line ("start-end perms offset dev inode path"),
// then "Key: value" lines, "VmFlags:" last.
std::vector<Mapping> mappings_of_this_process() {
  std::vector<Mapping> mappings;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  Mapping current;
  while (std::getline(smaps, line)) {
    unsigned long long low = 0;
    unsigned long long high = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &low, &high) == 2) {
      current = Mapping{low, high, "", 0};
    } else if (line.rfind("AnonHugePages:", 0) == 0) {
      current.anon_huge_page_bytes = std::strtoull(line.c_str() + sizeof("AnonHugePages:") - 1, nullptr, 10) * 1024;
    } else if (line.rfind("VmFlags:", 0) == 0) {
      const std::size_t first = line.find_first_not_of(' ', sizeof("VmFlags:") - 1);
      const std::size_t last = line.find_last_not_of(' ');
      current.vm_flags = first == std::string::npos ? "" : line.substr(first, last - first + 1);
      mappings.push_back(current);
    }
  }
  return mappings;
}

std::uint64_t anon_huge_page_bytes_at(const void* address) {
  for (const Mapping& mapping : mappings_of_this_process()) {
    if (mapping.overlaps(address, 1)) return mapping.anon_huge_page_bytes;
  }
  return 0;
}

}  // namespace resurgo
