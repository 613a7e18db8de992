#include "job/partner_memory.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "format/container.h"
#include "io/bytes_file.h"
#include "job/partner_transfer.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

using partner_transfer::Bytes;

// Shared memory of the node (tmpfs): lost with the node, kept when the
// processes die. A directory of the user's own below it, as the GPU
// registration token's: /dev/shm is writable by every user.
constexpr char kSharedMemory[] = "/dev/shm";
constexpr std::size_t kLongestName = 160;
constexpr unsigned kMode = 0600;

// Bits of a rank's offer at recovery.
constexpr long kOwnIntact = 1;
constexpr long kHeldIntact = 2;

std::string name_for(const std::string& local_dir) {
  std::string name = std::filesystem::absolute(local_dir).lexically_normal().string();
  for (char& c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '/' || byte < 0x20 || byte == 0x7f) c = '_';
  }
  name.erase(0, name.find_first_not_of('_'));
  if (name.size() > kLongestName) {
    // Keep the tail (the store and the node's directory), and tell longer
    // paths with the same tail apart by a hash of the whole.
    const std::size_t hash = std::hash<std::string>{}(name);
    name = name.substr(name.size() - kLongestName) + "-" + std::to_string(hash);
  }
  return "memory-" + name;
}

void add_lost(PartnerMemory::Recovery& recovery, int version, const std::string& why) {
  recovery.lost += (recovery.lost.empty() ? "" : "; ") + std::string("version ") + std::to_string(version) + ": " + why;
}

void remove_empty_directory(const std::string& path) {
  ::rmdir(path.c_str());  // fails, harmlessly, while another rank of the node still keeps copies there
}

}  // namespace

bool PartnerMemory::wanted(const Config& config, int ranks) {
  return ranks > 1 && config.partner.scheme != PartnerScheme::kNone && config.memory.every > 0 &&
         config.local.every == 0 && config.persistent.every == 0;
}

std::string PartnerMemory::directory_for(const std::string& local_dir) {
  return std::string(kSharedMemory) + "/resurgo-" + std::to_string(::geteuid()) + "/" + name_for(local_dir);
}

PartnerMemory::PartnerMemory(PartnerTopology topology, int rank, const std::string& local_dir, MemoryLevel& memory,
                             int keep, double timeout_seconds, std::shared_ptr<Env> env, const Logger& log)
    : topology_(std::move(topology)),
      rank_(rank),
      memory_(memory),
      timeout_seconds_(timeout_seconds),
      log_(log),
      root_(directory_for(local_dir)),
      own_(kL1, root_, "own", rank, kMode, std::max(keep, 1), env),
      partner_(kL1, root_, "partner", topology_.source_of(rank), kMode, std::max(keep, 1), env) {
  own_.prepare();
  partner_.prepare();
  const std::string weakness = topology_.partner_weakness();
  if (!weakness.empty() && rank == 0) log_.warn("partner memory in " + root_ + ": " + weakness);
}

PartnerMemory::~PartnerMemory() = default;

// ---------------------------------------------------------- checkpoint

bool PartnerMemory::replicate(int version, bool held, Comm& comm) {
  const std::vector<long> offers = comm.allgather(held ? version : -1, timeout_seconds_);
  const bool every_rank = std::all_of(offers.begin(), offers.end(), [&](long offer) { return offer == version; });
  if (!every_rank) return false;
  bool stored = true;
  try {
    protect(version, comm);
  } catch (const Error& error) {
    log_.warn("partner memory of version " + std::to_string(version) + ": " + error.what());
    stored = false;
  }
  if (comm.allreduce_min(stored ? 1 : 0) == 0) return false;
  std::lock_guard lock(mutex_);
  complete_.insert(version);
  // Only now may the older copies go: a kill before leaves every rank an older complete version.
  const auto none_pinned = [](int) { return false; };
  own_.evict(none_pinned);
  partner_.evict(none_pinned);
  std::erase_if(complete_, [&](int kept) { return !own_.holds(kept); });
  return true;
}

// Collective: this rank's L1 image of `version` into its own copy (unless
// there) and its partner's (sent round the ring, while the copy of the
// rank before arrives for this node). Every rank takes part in the shift,
// an empty image standing for one it could not read; throws why a copy is
// missing once the shift is over.
void PartnerMemory::protect(int version, Comm& comm) {
  const std::string what = "version " + std::to_string(version);
  std::string problem;
  Bytes image;
  try {
    image = read_whole(*memory_.open(version));
  } catch (const Error& error) {
    problem = error.what();
  }
  const int source = topology_.source_of(rank_);
  const Bytes received = partner_transfer::exchange_sized(comm, topology_.holder_of(rank_), image, source);
  if (!problem.empty()) throw StorageError("this rank's copy of " + what + " cannot be read from L1: " + problem);
  if (!own_.holds(version)) own_.commit_copy(version, BytesFile(image, what + " of this rank (L1)"));
  if (received.empty()) throw StorageError("rank " + std::to_string(source) + " sent no copy of " + what);
  if (!partner_.holds(version)) {
    partner_.commit_copy(version, BytesFile(received, what + " of rank " + std::to_string(source) +
                                                          " (received for partner memory)"));
  }
}

// ------------------------------------------------------------ recovery

PartnerMemory::Recovery PartnerMemory::recover(Comm& comm) {
  Recovery recovery;
  std::vector<int> held = held_versions();
  long candidate = held.empty() ? -1 : held.back();
  candidate = -comm.allreduce_min(-candidate);  // the newest any rank holds
  while (candidate >= 0) {
    if (restore_version(static_cast<int>(candidate), comm, recovery)) {
      recovery.version = static_cast<int>(candidate);
      break;
    }
    const auto below = std::lower_bound(held.begin(), held.end(), static_cast<int>(candidate));
    candidate = -comm.allreduce_min(below == held.begin() ? 1 : -*std::prev(below));
  }
  if (recovery.version >= 0) {
    try {
      protect(recovery.version, comm);  // the lost node's copies again
    } catch (const Error& error) {
      log_.warn("partner memory: version " + std::to_string(recovery.version) + " restored but not protected "
                "again: " + error.what());
    }
    std::lock_guard lock(mutex_);
    complete_.insert(recovery.version);
  }
  for (const std::string& note : recovery.notes) log_.warn(note);
  recovery_ = recovery;
  return recovery;
}

std::vector<int> PartnerMemory::complete() const {
  std::lock_guard lock(mutex_);
  return {complete_.begin(), complete_.end()};
}

bool PartnerMemory::complete(int version) const {
  std::lock_guard lock(mutex_);
  return complete_.count(version) != 0;
}

std::vector<int> PartnerMemory::held_versions() {
  std::vector<int> versions = own_.versions();
  for (int version : partner_.versions()) versions.push_back(version);
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  return versions;
}

bool PartnerMemory::copy_in(int version, std::string& problem) {
  try {
    memory_.commit_copy(version, *own_.open(version));
    return true;
  } catch (const Error& error) {
    problem = error.what();
    return false;
  }
}

bool PartnerMemory::intact(DirectoryLevel& level, int version, std::string& problem) {
  try {
    BytesFile copy(read_whole(*level.open(version)), level.path(version));
    const format::Container container = format::read_container(copy);
    format::check_identity(container, copy.path(), "", version, topology_.source_of(rank_));
    format::verify_chunks(copy, container, [](std::uint64_t, std::uint64_t) {});
    return true;
  } catch (const Error& error) {
    problem = error.what();
    return false;
  }
}

// Collective: `version` back in L1 on every rank, or on none (false, and
// why in `recovery.lost`).
bool PartnerMemory::restore_version(int version, Comm& comm, Recovery& recovery) {
  std::string own_problem = "missing";
  std::string held_problem = "missing";
  const bool own = own_.holds(version) && copy_in(version, own_problem);
  const bool held = partner_.holds(version) && intact(partner_, version, held_problem);
  if (!own && own_.holds(version)) log_.warn("partner memory: this rank's own copy of version " +
                                             std::to_string(version) + " is refused: " + own_problem);
  if (!held && partner_.holds(version)) log_.warn("partner memory: the copy of version " + std::to_string(version) +
                                                  " kept for rank " + std::to_string(topology_.source_of(rank_)) +
                                                  " is refused: " + held_problem);
  const std::vector<long> offers = comm.allgather((own ? kOwnIntact : 0) | (held ? kHeldIntact : 0), timeout_seconds_);
  std::string lost;
  for (int rank = 0; rank < comm.size(); ++rank) {
    const int holder = topology_.holder_of(rank);
    if ((offers[rank] & kOwnIntact) != 0 || (offers[holder] & kHeldIntact) != 0) continue;
    lost += (lost.empty() ? "" : "; ") + std::string("rank ") + std::to_string(rank) +
            "'s own copy and the one its partner rank " + std::to_string(holder) + " kept are both lost or damaged";
  }
  if (!lost.empty()) {
    if (own) memory_.remove(version);
    add_lost(recovery, version, lost);
    return false;
  }
  std::string failure;
  if (!fetch_missing(version, offers, comm, recovery, failure)) failure = "this rank's copy: " + failure;
  if (comm.allreduce_min(failure.empty() ? 1 : 0) == 1) return true;
  memory_.remove(version);
  add_lost(recovery, version, failure.empty() ? "another rank could not read its copy into L1" : failure);
  return false;
}

// Collective: each rank without an intact own copy of `version` receives
// the one its partner kept, in rank order, into L1; false (and why) when
// this rank's could not be read in. Every rank takes every step.
bool PartnerMemory::fetch_missing(int version, const std::vector<long>& offers, Comm& comm, Recovery& recovery,
                                  std::string& problem) {
  bool fetched = true;
  for (int rank = 0; rank < comm.size(); ++rank) {
    if ((offers[rank] & kOwnIntact) != 0) continue;
    const int holder = topology_.holder_of(rank);
    if (rank_ == holder) partner_transfer::send_sized(comm, rank, held_copy(version));
    if (rank_ != rank) continue;
    const std::string from = "the memory of its partner rank " + std::to_string(holder);
    try {
      memory_.commit_copy(version, BytesFile(partner_transfer::receive_sized(comm, holder),
                                             "version " + std::to_string(version) + " from " + from));
      recovery.notes.push_back("partner memory: version " + std::to_string(version) + " of rank " +
                               std::to_string(rank_) + " restored from " + from);
    } catch (const Error& error) {
      problem = error.what();
      fetched = false;
    }
  }
  return fetched;
}

// The copy of `version` kept here, verified by restore_version; empty when
// it has gone since (the receiver's verification then refuses it).
Bytes PartnerMemory::held_copy(int version) {
  try {
    return read_whole(*partner_.open(version));
  } catch (const Error& error) {
    log_.warn("partner memory: the copy of version " + std::to_string(version) + " kept for rank " +
              std::to_string(topology_.source_of(rank_)) + " cannot be sent: " + error.what());
    return {};
  }
}

// ---------------------------------------------------------------- close

void PartnerMemory::close() {
  // A job that could restore none of the copies it found, and wrote none,
  // leaves them: the next start must refuse as this one did, not begin anew.
  if (!recovery_.lost.empty() && complete().empty()) return;
  for (DirectoryLevel* level : {&own_, &partner_}) {
    for (int version : level->versions()) level->remove(version);
    remove_empty_directory(level->dir());
  }
  remove_empty_directory(root_);
}

}  // namespace resurgo
