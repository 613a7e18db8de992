#include "capture/mappings.h"

#include <cstdio>
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
      current = Mapping{low, high, ""};
    } else if (line.rfind("VmFlags:", 0) == 0) {
      const std::size_t first = line.find_first_not_of(' ', sizeof("VmFlags:") - 1);
      const std::size_t last = line.find_last_not_of(' ');
      current.vm_flags = first == std::string::npos ? "" : line.substr(first, last - first + 1);
      mappings.push_back(current);
    }
  }
  return mappings;
}

}  // namespace resurgo
