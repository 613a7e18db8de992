#include "job/restorable.h"

#include "format/container.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// The first copy of `version` on `levels` that passes the checks of
// restore_problem(); none, with why in `why`, when no level holds one.
std::optional<format::Container> sound_copy(const std::vector<Level*>& levels, const CopyOwner& owner, int version,
                                            std::optional<std::uint64_t> checksum, std::string& why) {
  why = "it is missing from every level";
  for (Level* level : levels) {
    if (!level->holds(version)) continue;
    try {
      const std::unique_ptr<ReadableFile> file = level->open(version);
      format::Container container = format::read_container(*file);
      if (checksum && container.checksum != *checksum) {
        why = "this rank's files differ from the one the job committed (files of another job?)";
        continue;
      }
      format::check_identity(container, file->path(), owner.store, version, owner.rank);
      if (!owner.accept_foreign) format::check_store_id(container, file->path(), owner.id);
      return container;
    } catch (const NotFoundError&) {
      // Removed since holds() (evicted): not a copy any more.
    } catch (const Error& error) {
      why = error.what();
    }
  }
  return std::nullopt;
}

}  // namespace

std::string restore_problem(const std::vector<Level*>& levels, const CopyOwner& owner, int version,
                            std::optional<std::uint64_t> checksum) {
  std::optional<format::Header> newer;
  int newer_version = version;
  for (int link = version;;) {
    std::string why;
    const std::optional<format::Container> copy = sound_copy(levels, owner, link, checksum, why);
    if (!copy) return link == version ? why : "its base " + std::to_string(link) + ": " + why;
    if (newer) {
      const std::string difference = format::region_table_difference(*newer, copy->header);
      if (!difference.empty()) {
        return "version " + std::to_string(newer_version) + " is a delta of version " + std::to_string(link) +
               " but their region tables differ (" + difference + ")";
      }
    }
    if (!format::is_delta(copy->header)) return "";
    newer = copy->header;
    newer_version = link;
    link = static_cast<int>(copy->header.base_version);  // older than `link`: read_container checks it
    checksum.reset();  // a manifest names the version's own file only
  }
}

std::vector<int> set_aside_newer(const std::vector<Level*>& levels, int version) {
  std::vector<int> set_aside;
  for (const auto& [newer, held] : committed_versions(levels)) {
    if (newer <= version) continue;
    for (Level* level : levels) {
      if (level->holds(newer)) level->quarantine(newer);
    }
    set_aside.push_back(newer);
  }
  return set_aside;
}

}  // namespace resurgo
