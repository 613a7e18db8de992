#include "format/file_names.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/random.h"

namespace resurgo::format {

namespace {
constexpr char kTemporaryMarker[] = ".tmp-";
}  // namespace

std::string container_file_name(int version, int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "v%010d.r%06d.rsg", version, rank);
  return name;
}

bool parse_container_file_name(const std::string& name, int& version, int& rank) {
  char tail = 0;
  return name.size() == 23 && name[0] == 'v' && name[1] != '-' &&
         std::sscanf(name.c_str(), "v%10d.r%6d.rs%c", &version, &rank, &tail) == 3 && tail == 'g' && rank >= 0 &&
         container_file_name(version, rank) == name;
}

std::string manifest_file_name(int version) {
  char name[32];
  std::snprintf(name, sizeof name, "v%010d.job", version);
  return name;
}

bool parse_manifest_file_name(const std::string& name, int& version) {
  char tail = 0;
  return name.size() == 15 && name[0] == 'v' && name[1] != '-' &&
         std::sscanf(name.c_str(), "v%10d.jo%c", &version, &tail) == 2 && tail == 'b' &&
         manifest_file_name(version) == name;
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
  return std::atoi(name.c_str() + marker + std::strlen(kTemporaryMarker));
}

std::string lock_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, ".lock.r%06d", rank);
  return name;
}

}  // namespace resurgo::format
