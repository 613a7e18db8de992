#include "job/solo_job.h"

#include "job/collective_job.h"
#include "job/restorable.h"
#include "job/store_identity.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

std::string no_restorable_version(const std::string& store, const std::vector<std::string>& problems) {
  std::string lines;
  for (const std::string& problem : problems) lines += "; " + problem;
  return "latest on store '" + store + "': it holds versions, but none that restart could restore" + lines +
         "; restart() sets damaged copies aside and says why, or remove the versions (`resurgo rm`) to start again";
}

}  // namespace

void SoloJob::wait(int version, int level) {
  Catalog& catalog = context_.catalog;
  if (version == kAllVersions) return catalog.wait_all(level);
  if (!catalog.known(version)) {
    Level* held = context_.route.level(level);
    if (held != nullptr && held->holds(version)) return;
    throw NotFoundError("wait: store '" + context_.store + "' has no version " + std::to_string(version) +
                        (held != nullptr ? " at L" + std::to_string(level) + " (" + held->where() + ")" : ""));
  }
  if (level >= kL2 && !catalog.routed(version, level)) {
    throw InvalidArgumentError("wait: version " + std::to_string(version) + " does not go to L" +
                               std::to_string(level) + " (" + context_.route.every_text(level) +
                               ": only the checkpoints whose number it divides go there)");
  }
  catalog.wait(version, level);
}

CopyOwner SoloJob::owner() const {
  return {context_.store, context_.route.identity(), context_.comm.rank(), context_.config.restart.accept_foreign};
}

// The newest version whose chain passes restore_problem(). A store that
// holds versions but none restart could restore cannot start from scratch
// either (versions must increase): that throws, naming each and why.
std::optional<int> SoloJob::latest() {
  const std::map<int, std::vector<int>> committed = committed_versions(context_.route.readable());
  std::vector<std::string> problems;
  for (auto version = committed.rbegin(); version != committed.rend(); ++version) {
    if (context_.catalog.discarded(version->first)) continue;
    const std::string problem = restore_problem(context_.route.readable(), owner(), version->first);
    if (problem.empty()) return version->first;
    problems.push_back("version " + std::to_string(version->first) + ": " + problem);
  }
  if (problems.empty()) return std::nullopt;
  throw StateError(no_restorable_version(context_.store, problems));
}

// A version its first level still writes is copied from the capture's
// buffer when it is there, without waiting for that write: an adjoint's
// reverse pass restores a version saved a moment before at each turn, and
// on a directory level the write ends with fdatasyncs (issue 27).
Restored SoloJob::restart(int version, const RestoreSteps& steps) {
  const auto prefix = [] { return std::string("restart not done: "); };
  if (version == kLatest) {
    context_.scheduler.drain();
  } else {
    context_.catalog.report_failure(prefix);
    if (std::optional<Restored> copied = steps.from_buffer(version)) return std::move(*copied);
    context_.catalog.wait_first_level(version);
  }
  context_.catalog.report_failure(prefix);
  return steps.from_levels(version);
}

int node_of(const Config& config, const Comm& comm) {
  return config.mpi.ranks_per_node > 0 ? comm.rank() / config.mpi.ranks_per_node : comm.node();
}

std::unique_ptr<Job> make_job(const JobContext& context, bool collective) {
  if (collective) {
    const ChosenIdentity chosen =
        collective_identity(context.store, context.route, context.comm, context.config.mpi.timeout);
    context.route.set_identity(chosen.id, chosen.drawn);
    return std::make_unique<CollectiveJob>(context);
  }
  const ChosenIdentity chosen = solo_identity(context.store, context.route);
  context.route.set_identity(chosen.id, chosen.drawn);
  if (context.config.partner.scheme != PartnerScheme::kNone) {
    context.log.warn("store '" + context.store + "': partner.scheme is set, but the store has no communicator (L3 "
                     "is for MPI stores: open it with one); no L3");
  }
  return std::make_unique<SoloJob>(context);
}

}  // namespace resurgo
