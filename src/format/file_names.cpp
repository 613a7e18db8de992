#include "format/file_names.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "base/random.h"

namespace resurgo::format {

namespace {

constexpr char kTemporaryMarker[] = ".tmp-";

// The non-negative int written with exactly `count` decimal digits at
// name[from], or none: sscanf would accept a sign or spaces, and its
// overflow of an int is undefined behaviour.
std::optional<int> fixed_digits(const std::string& name, std::size_t from, std::size_t count) {
  if (from + count > name.size()) return std::nullopt;
  const char* first = name.data() + from;
  const char* last = first + count;
  if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  int value = 0;
  const auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc() || end != last) return std::nullopt;
  return value;
}

}  // namespace

std::string container_file_name(int version, int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "v%010d.r%06d.rsg", version, rank);
  return name;
}

bool parse_container_file_name(const std::string& name, int& version, int& rank) {
  // v<10 digits>.r<6 digits>.rsg
  const std::optional<int> v = fixed_digits(name, 1, 10);
  const std::optional<int> r = fixed_digits(name, 13, 6);
  if (name.size() != 23 || name[0] != 'v' || name.compare(11, 2, ".r") != 0 || name.compare(19, 4, ".rsg") != 0 ||
      !v || !r) {
    return false;
  }
  version = *v;
  rank = *r;
  return true;
}

std::string shared_file_name(int version) {
  char name[32];
  std::snprintf(name, sizeof name, "v%010d.shared.rsg", version);
  return name;
}

bool parse_shared_file_name(const std::string& name, int& version) {
  // v<10 digits>.shared.rsg
  const std::optional<int> v = fixed_digits(name, 1, 10);
  if (name.size() != 22 || name[0] != 'v' || name.compare(11, 11, ".shared.rsg") != 0 || !v) return false;
  version = *v;
  return true;
}

std::string manifest_file_name(int version) {
  char name[32];
  std::snprintf(name, sizeof name, "v%010d.job", version);
  return name;
}

bool parse_manifest_file_name(const std::string& name, int& version) {
  // v<10 digits>.job
  const std::optional<int> v = fixed_digits(name, 1, 10);
  if (name.size() != 15 || name[0] != 'v' || name.compare(11, 4, ".job") != 0 || !v) return false;
  version = *v;
  return true;
}

std::string temporary_prefix(const std::string& final_name, std::optional<int> writer) {
  char rank[16] = "";
  if (writer) std::snprintf(rank, sizeof rank, "-r%06d", *writer);
  return "." + final_name + rank + kTemporaryMarker;
}

std::string temporary_file_name(const std::string& final_name, int pid, std::optional<int> writer) {
  // The random part makes the name unguessable: nobody can plant a file (or
  // a link) under it before the writer creates it.
  return temporary_prefix(final_name, writer) + std::to_string(pid) + "." + random_hex(8);
}

std::optional<int> temporary_owner(const std::string& name) {
  const auto marker = name.find(kTemporaryMarker);
  if (name.empty() || name[0] != '.' || marker == std::string::npos) return std::nullopt;
  // The pid ends at the '.' before the random part; std::atoi would
  // overflow on a long run of digits. A name without one is no temporary.
  const char* first = name.data() + marker + std::strlen(kTemporaryMarker);
  int pid = 0;
  if (std::from_chars(first, name.data() + name.size(), pid).ec != std::errc()) return std::nullopt;
  return pid;
}

std::string lock_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, ".lock.r%06d", rank);
  return name;
}

}  // namespace resurgo::format
