#include "mpi/collective_versions.h"

#include <algorithm>

#include "format/container.h"
#include "resurgo/errors.hpp"

namespace resurgo {

CollectiveVersions::CollectiveVersions(Comm& comm, int node, std::string store, const Logger& log,
                                       double timeout_seconds)
    : comm_(comm), store_(std::move(store)), log_(log), timeout_seconds_(timeout_seconds) {
  for (long each : alone() ? std::vector<long>{node} : comm_.allgather(node, timeout_seconds_)) {
    nodes_.push_back(static_cast<int>(each));
  }
}

CollectiveVersions::~CollectiveVersions() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void CollectiveVersions::agree_on_version(int version) {
  if (alone()) return;
  const std::vector<long> versions = comm_.allgather(version, timeout_seconds_);
  if (std::all_of(versions.begin(), versions.end(), [&](long other) { return other == version; })) return;
  std::string listing;
  for (std::size_t rank = 0; rank < versions.size(); ++rank) {
    listing += (listing.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) + ": " +
               std::to_string(versions[rank]);
  }
  throw InvalidArgumentError("checkpoint of store '" + store_ + "': the ranks name different versions (" + listing +
                             "); every rank must checkpoint the same version; nothing was captured");
}

void CollectiveVersions::expect(int version, DirectoryTier& level, std::vector<format::ManifestRegion> regions) {
  expected_[level.number()].push_back(Expected{version, &level, std::move(regions)});
}

void CollectiveVersions::progress(const Outcome& outcome, const std::function<void(int, int)>& settle) {
  for (auto& [level, queue] : expected_) {
    while (!queue.empty()) {
      const Expected& front = queue.front();
      if (settle) settle(front.version, level);
      const long job = alone() ? outcome(front.version, level) : comm_.allreduce_min(outcome(front.version, level));
      if (job == 0) break;  // not settled on some rank: later versions wait their turn
      if (job > 0) {
        commit_manifest(front);
      } else {
        failed_.insert({front.version, level});
        unreported_failure_levels_.insert(level);
        log_.warn("version " + std::to_string(front.version) + " is not a version of the job at L" +
                  std::to_string(level) + ": writing it failed on some rank (that rank reports why)");
      }
      queue.pop_front();
    }
  }
}

// Rank 0 joins every rank's part (its file and regions) into the manifest
// and sends it to the ranks that write it: itself for a shared level, the
// lowest rank of each node for a node-local one.
void CollectiveVersions::commit_manifest(const Expected& expected) {
  const std::unique_ptr<ReadableFile> file = expected.level->open(expected.version);
  const format::Container container = format::read_container(*file);
  const format::ManifestFile mine{comm_.rank(), node_of(comm_.rank()),
                                  container_file_name(expected.version, comm_.rank()), container.file_size,
                                  container.checksum};
  const std::vector<std::string> parts = gather_at_root(format::encode_manifest_part(mine, expected.regions));
  const bool node_local = expected.level->features().node_local;
  std::vector<int> writers{0};
  for (int rank = 1; node_local && rank < comm_.size(); ++rank) {
    const auto lower_ranks_end = nodes_.begin() + rank;
    if (std::find(nodes_.begin(), lower_ranks_end, node_of(rank)) == lower_ranks_end) writers.push_back(rank);
  }
  std::string text;
  if (comm_.rank() == 0) {
    format::Manifest manifest{store_, expected.version, comm_.size(), {}, {}};
    for (const std::string& part : parts) format::decode_manifest_part(part, manifest);
    text = format::encode_manifest(manifest);
    for (std::size_t index = 1; index < writers.size(); ++index) {
      const std::uint64_t bytes = text.size();
      comm_.send(writers[index], &bytes, sizeof bytes);
      comm_.send(writers[index], text.data(), text.size());
    }
  } else if (std::count(writers.begin(), writers.end(), comm_.rank()) > 0) {
    std::uint64_t bytes = 0;
    comm_.receive(0, &bytes, sizeof bytes);
    if (bytes > format::kMaxManifestBytes) {
      throw StateError("rank 0 announced a job manifest of " + std::to_string(bytes) + " bytes");
    }
    text.resize(bytes);
    comm_.receive(0, text.data(), text.size());
  }
  if (!text.empty()) write_in_background(Write{expected.level, expected.version, std::move(text)});
}

std::vector<std::string> CollectiveVersions::gather_at_root(const std::string& mine) {
  if (comm_.rank() != 0) {
    const std::uint64_t bytes = mine.size();
    comm_.send(0, &bytes, sizeof bytes);
    comm_.send(0, mine.data(), mine.size());
    return {};
  }
  std::vector<std::string> parts{mine};
  for (int rank = 1; rank < comm_.size(); ++rank) {
    std::uint64_t bytes = 0;
    comm_.receive(rank, &bytes, sizeof bytes);
    if (bytes > format::kMaxManifestBytes) {
      throw StateError("rank " + std::to_string(rank) + " sent a manifest part of " + std::to_string(bytes) + " bytes");
    }
    std::string part(bytes, '\0');
    comm_.receive(rank, part.data(), part.size());
    parts.push_back(std::move(part));
  }
  return parts;
}

void CollectiveVersions::write_in_background(Write write) {
  std::lock_guard lock(mutex_);
  writes_.push_back(std::move(write));
  if (!writer_.joinable()) writer_ = std::thread([this] { write_loop(); });
  changed_.notify_all();
}

void CollectiveVersions::write_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !writes_.empty(); });
    if (writes_.empty()) return;
    Write write = std::move(writes_.front());
    writes_.pop_front();
    writing_ = true;
    lock.unlock();
    try {
      write.level->commit_manifest(write.version, write.text);
    } catch (const Error& error) {
      log_.error("job manifest of version " + std::to_string(write.version) + " not written to " +
                 write.level->where() + " (the version is not complete there): " + error.what());
    }
    lock.lock();
    writing_ = false;
    changed_.notify_all();
  }
}

bool CollectiveVersions::take_failures(int level) { return unreported_failure_levels_.erase(level) > 0; }

void CollectiveVersions::flush() {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return writes_.empty() && !writing_; });
  }
  if (!alone()) comm_.barrier();
}

int CollectiveVersions::agree_newest(std::vector<int> candidates) {
  std::sort(candidates.begin(), candidates.end());
  const auto newest_up_to = [&](long bound) -> long {
    const auto above = std::upper_bound(candidates.begin(), candidates.end(), bound);
    return above == candidates.begin() ? -1 : *(above - 1);
  };
  long agreed = candidates.empty() ? -1 : candidates.back();
  if (alone()) return static_cast<int>(agreed);
  agreed = comm_.allreduce_min(agreed);
  // Each round lowers the bound to the newest version every rank holds at
  // or below it; it stops once no rank lowers it.
  for (;;) {
    const long lowered = comm_.allreduce_min(newest_up_to(agreed));
    if (lowered == agreed) return static_cast<int>(agreed);
    agreed = lowered;
  }
}

}  // namespace resurgo
