// The memory mappings of this process as /proc/self/smaps lists them
// (proc(5)): the address range and the VmFlags of each. Reading smaps walks
// every page table of the process: once per protected set, never per
// checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace resurgo {

struct Mapping {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;  // exclusive
  std::string vm_flags;    // two-letter flags separated by spaces ("rd wr mr mw me ac hg")
  std::uint64_t anon_huge_page_bytes = 0;  // AnonHugePages: backed by transparent huge pages now

  bool has_flag(const std::string& flag) const;
  bool overlaps(const void* data, std::uint64_t bytes) const;
};

// Empty where /proc is not mounted.
std::vector<Mapping> mappings_of_this_process();

// AnonHugePages of the mapping holding `address` (0 when none holds it):
// how the tests and benchmarks see huge pages split and collapsed.
std::uint64_t anon_huge_page_bytes_at(const void* address);

}  // namespace resurgo
