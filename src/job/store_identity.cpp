#include "job/store_identity.h"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

using Found = std::vector<std::pair<format::StoreId, std::string>>;

[[noreturn]] void disagree(const std::string& store, const std::string& first, const std::string& second) {
  throw MismatchError("store '" + store + "': " + first + " and " + second +
                      " hold different store identities: they are the directories of two different stores of that "
                      "name (one left by another run?); remove the one that is not this store's, or give this store "
                      "another name or path");
}

std::optional<format::StoreId> single_identity(const std::string& store, const Found& found) {
  for (const auto& [id, dir] : found) {
    if (id != found.front().first) disagree(store, "'" + found.front().second + "'", "'" + dir + "'");
  }
  if (found.empty()) return std::nullopt;
  return found.front().first;
}

// An identity as the two longs Comm::allgather carries.
long half_of(const format::StoreId& id, int half) {
  long value = 0;
  std::memcpy(&value, id.bytes.data() + 8 * half, 8);
  return value;
}

format::StoreId joined(long first, long second) {
  format::StoreId id;
  std::memcpy(id.bytes.data(), &first, 8);
  std::memcpy(id.bytes.data() + 8, &second, 8);
  return id;
}

enum Status : long { kNone = 0, kFound = 1, kDrawn = 2, kConflict = 3 };

}  // namespace

ChosenIdentity solo_identity(const std::string& store, Route& route) {
  if (const std::optional<format::StoreId> found = single_identity(store, route.identities_found())) return {*found};
  return {format::StoreId::random(), true};
}

ChosenIdentity collective_identity(const std::string& store, Route& route, Comm& comm, double timeout_seconds) {
  Status status = kNone;
  format::StoreId candidate;
  std::string conflict;
  try {
    if (const std::optional<format::StoreId> found = single_identity(store, route.identities_found())) {
      status = kFound;
      candidate = *found;
    }
  } catch (const MismatchError& error) {
    status = kConflict;
    conflict = error.what();
  }
  if (status == kNone && comm.rank() == 0) {
    status = kDrawn;
    candidate = format::StoreId::random();
  }
  const std::vector<long> statuses = comm.allgather(status, timeout_seconds);
  const std::vector<long> firsts = comm.allgather(half_of(candidate, 0), timeout_seconds);
  const std::vector<long> seconds = comm.allgather(half_of(candidate, 1), timeout_seconds);
  if (!conflict.empty()) throw MismatchError(conflict);
  std::optional<format::StoreId> agreed;
  std::optional<format::StoreId> drawn;
  int agreed_rank = -1;
  for (int rank = 0; rank < static_cast<int>(statuses.size()); ++rank) {
    const format::StoreId id = joined(firsts[rank], seconds[rank]);
    if (statuses[rank] == kConflict) {
      throw MismatchError("store '" + store + "': rank " + std::to_string(rank) +
                          "'s directories hold different store identities (its error says which)");
    }
    if (statuses[rank] == kDrawn) drawn = id;
    if (statuses[rank] != kFound) continue;
    if (agreed && *agreed != id) {
      disagree(store, "rank " + std::to_string(agreed_rank) + "'s directories",
               "rank " + std::to_string(rank) + "'s");
    }
    agreed = id;
    agreed_rank = rank;
  }
  return agreed ? ChosenIdentity{*agreed} : ChosenIdentity{*drawn, true};
}

}  // namespace resurgo
