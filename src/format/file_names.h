// Every name a store gives a file in its directories (as LevelDB's
// db/filename.h): one place that writes them and one that parses them back.
//   v0000000012.r000003.rsg                   version 12 of rank 3 (a container)
//   v0000000012.job                           the job manifest of version 12
//   v0000000012.shared.rsg                    version 12 of every rank in one file (format/shared_file.h)
//   .<name>.tmp-<pid>.<random>, .<name>-r<rank>.tmp-<pid>.<random>
//                                             a file being written (rank: a manifest's writer)
//   .store-id                                 the store's identity (format/store_id.h)
//   <name>.damaged                            a damaged copy set aside
//   .lock.r000003                             the lock of rank 3's copy of the store
#pragma once

#include <optional>
#include <string>

namespace resurgo::format {

inline constexpr char kDamagedSuffix[] = ".damaged";

std::string container_file_name(int version, int rank);
// False for any other name (the parser takes only what the writer writes).
bool parse_container_file_name(const std::string& name, int& version, int& rank);

// One file for the parts of every rank (persistent.layout = shared).
std::string shared_file_name(int version);
bool parse_shared_file_name(const std::string& name, int& version);

std::string manifest_file_name(int version);
bool parse_manifest_file_name(const std::string& name, int& version);

// The temporary under which `final_name` is written by process `pid`
// (`writer`: a rank, for files several ranks of one process may write).
std::string temporary_file_name(const std::string& final_name, int pid, std::optional<int> writer = std::nullopt);
// What every temporary of `final_name` by `writer` starts with.
std::string temporary_prefix(const std::string& final_name, std::optional<int> writer = std::nullopt);
// The pid in a temporary's name, or none when `name` is no temporary.
std::optional<int> temporary_owner(const std::string& name);

std::string lock_file_name(int rank);

inline constexpr char kStoreIdFileName[] = ".store-id";

}  // namespace resurgo::format
