#include "tier/level.h"

#include "format/container.h"
#include "resurgo/errors.hpp"

namespace resurgo {

std::optional<int> Level::base_of(int version, const KnownBases& known_bases) {
  if (const std::optional<int> known = known_bases ? known_bases(version) : std::nullopt) {
    return *known < 0 ? std::nullopt : known;
  }
  try {
    const format::Header header = format::read_container(*open(version)).header;
    if (!format::is_delta(header)) return std::nullopt;
    return static_cast<int>(header.base_version);
  } catch (const NotFoundError&) {
    return std::nullopt;
  } catch (const CorruptionError&) {
    return std::nullopt;
  } catch (const FormatError&) {
    return std::nullopt;
  }
}

std::vector<std::exception_ptr> Level::commit_group(const std::vector<PendingCommit>& group) {
  std::vector<std::exception_ptr> failures(group.size());
  for (std::size_t i = 0; i < group.size(); ++i) {
    try {
      if (group[i].source != nullptr) {
        commit_copy(group[i].version, *group[i].source);
      } else {
        commit(group[i].version, group[i].write);
      }
    } catch (const Error&) {
      failures[i] = std::current_exception();
    }
  }
  return failures;
}

std::map<int, std::vector<int>> committed_versions(const std::vector<Level*>& levels) {
  std::map<int, std::vector<int>> found;
  for (Level* level : levels) {
    for (int version : level->versions()) found[version].push_back(level->number());
  }
  return found;
}

bool copy_with_bases(const std::vector<Level*>& sources, int version, Level& target) {
  if (target.holds(version)) return true;
  for (Level* source : sources) {
    if (source == &target || !source->holds(version)) continue;
    if (const std::optional<int> base = source->base_of(version)) {
      if (!copy_with_bases(sources, *base, target)) return false;
    }
    target.commit_copy(version, *source->open(version));
    return true;
  }
  return false;
}

std::vector<int> level_numbers(const std::vector<Level*>& levels) {
  std::vector<int> numbers;
  for (const Level* level : levels) numbers.push_back(level->number());
  return numbers;
}

}  // namespace resurgo
