#include "tier/route.h"

#include <filesystem>
#include <utility>

#include "base/units.h"
#include "gpu/device_access.h"
#include "gpu/gpu_error.h"
#include "resurgo/errors.hpp"
#include "tier/store_claim.h"

namespace resurgo {

namespace {

std::string absolute(const std::string& path) { return std::filesystem::absolute(path).lexically_normal().string(); }

// L2's directory: "{node}" in local.path becomes the rank's node number, so
// that the nodes of a job faked on one machine keep apart what real nodes
// would (docs/mpi.md).
std::string local_root(const Config& config, int node) {
  std::string path = config.local.path.empty() ? Config::default_local_path() : config.local.path;
  for (auto at = path.find("{node}"); at != std::string::npos; at = path.find("{node}", at)) {
    path.replace(at, 6, std::to_string(node));
  }
  return absolute(path);
}

std::uint64_t memory_capacity(const Config& config) {
  if (config.memory.capacity > 0) return config.memory.capacity;
  const std::uint64_t quarter = quarter_of_physical_memory();
  return quarter > 0 ? quarter : kGiB;
}

// L0 is reserved now and mapped while the application computes its first
// steps (the cache paper's incremental allocation), not at the first
// device region.
std::unique_ptr<DeviceLevel> open_device_level(const std::string& store, int rank, const Config& config,
                                               const Logger& log) {
  if (config.device.capacity == 0) return nullptr;
  try {
    return std::make_unique<DeviceLevel>(store, rank, config.device, gpu::store_device(config.device), log);
  } catch (const gpu::GpuError& error) {
    log.warn("store '" + store + "': device.capacity is set but L0 is off: " + error.what() +
             "; device regions go to host memory at once, if they can be protected at all");
    return nullptr;
  }
}

// A level that takes checkpoints has the existing part of its path checked
// at open, so that a file in the way fails the open, not the first version.
bool exists_at_open(DirectoryLevel& level, int every, Env& env) {
  return every > 0 ? level.exists() : env.exists(level.dir());
}

}  // namespace

Route::Route(const std::string& store, int rank, int node, const Config& config, std::shared_ptr<Env> env,
             const Logger& log)
    : store_(store),
      config_(config),
      log_(log),
      memory_(store, rank, memory_capacity(config), config.memory.keep),
      local_(kL2, local_root(config, node), store, rank, config.local.mode, config.local.keep, env,
             config.local.shared_group),
      persistent_(kL4, absolute(config.persistent.path), store, rank, config.persistent.mode, config.persistent.keep,
                  env, config.persistent.shared_group) {
  if (config.memory.every <= 0 && config.local.every <= 0 && config.persistent.every <= 0) {
    throw ConfigError(
        "no level takes checkpoints: memory.every, local.every and persistent.every are all 0; set one of them");
  }
  if (!config.local.durable) local_.set_scratch();
  const bool partner = config.partner.scheme != PartnerScheme::kNone;
  if (exists_at_open(persistent_, config.persistent.every, *env)) prepare(persistent_);
  if (exists_at_open(local_, config.local.every, *env) || partner) prepare(local_);
  for (DirectoryLevel* level : {&local_, &persistent_}) {
    if (!held(*level).prepared) held(*level).claim = claim_store_directory(level->dir(), rank);
  }
  device_ = open_device_level(store, rank, config, log);
}

Route::Held& Route::held(const DirectoryLevel& level) { return &level == &local_ ? local_held_ : persistent_held_; }

// persist() may prepare a level on another thread while checkpoint() does.
// A level prepared at open whose identity waits (set_identity) takes it
// here, before the first version goes there.
void Route::prepare(DirectoryLevel& level) {
  Held& state = held(level);
  if (state.prepared && !state.identity_waits) return;
  std::lock_guard guard(prepare_mutex_);
  if (state.prepared) {
    if (state.identity_waits.exchange(false)) adopt_identity(level);
    return;
  }
  try {
    level.prepare();
  } catch (const StorageError& error) {
    const std::string key = level.number() == kL2 ? "local" : "persistent";
    throw StorageError("store '" + store_ + "': the L" + std::to_string(level.number()) + " directory (" + key +
                       ".path) cannot be used: " + error.what() + "; set " + key +
                       ".path to a directory you can write" +
                       (level.number() == kL4 ? ", or persistent.every = 0 to keep versions off L4" : ""));
  }
  if (!state.lock) state.lock = level.lock();
  if (!identity_.unknown()) adopt_identity(level);
  level.refuse_writes(nullptr);
  state.prepared = true;
}

// A directory that cannot be made (or locked) fails the version routed
// there in the background, as a failed write of it would: the level's
// writes throw why. It is tried again for the next version that goes
// there, here on the application's thread: a write does not prepare the
// level itself, since a forked writer must not make, lock or write the
// identity of a directory in its own process.
void Route::prepare_for_version(DirectoryLevel& level) {
  try {
    prepare(level);
  } catch (const Error&) {
    level.refuse_writes(std::current_exception());
  }
}

// Each level's eviction rule (collective levels keep what the job has not
// completed elsewhere) with nothing pinned: every version has settled.
void Route::evict_surplus() {
  for (DirectoryLevel* level : directories()) {
    if (every_of(*level) <= 0) continue;
    try {
      level->evict([](int) { return false; });
    } catch (const Error& error) {
      log_.warn("store '" + store_ + "': removing the versions beyond keep from L" +
                std::to_string(level->number()) + " at close: " + error.what());
    }
  }
}

void Route::close() {
  evict_surplus();
  device_.reset();
  for (Held* state : {&local_held_, &persistent_held_}) {
    state->lock.reset();
    state->claim.reset();
  }
}

std::vector<std::pair<format::StoreId, std::string>> Route::identities_found() {
  std::vector<std::pair<format::StoreId, std::string>> found;
  for (DirectoryLevel* level : {&local_, &persistent_}) {
    if (const std::optional<format::StoreId> id = level->identity()) found.emplace_back(*id, level->dir());
  }
  return found;
}

// The identity in the store's other directory, if one is there and can be
// read: a directory that cannot be used (a file in the way, a damaged
// identity) fails the versions routed there when it is prepared, not this
// one's.
std::optional<format::StoreId> Route::identity_written_elsewhere(const DirectoryLevel& level) {
  DirectoryLevel& other = &level == &local_ ? persistent_ : local_;
  try {
    return other.identity();
  } catch (const Error&) {
    return std::nullopt;
  }
}

void Route::set_identity(const format::StoreId& id, bool drawn) {
  identity_ = id;
  identity_drawn_ = drawn;
  for (DirectoryLevel* level : {&local_, &persistent_}) {
    if (!held(*level).prepared) continue;
    if (identity_drawn_ && level == &persistent_ && every_of(local_) > 0 && !held(local_).prepared) {
      held(*level).identity_waits = true;  // for L2 to settle it (adopt_identity)
    } else {
      adopt_identity(*level);
    }
  }
}

// A drawn identity gives way to the one another process of the store (a
// rank opening at the same moment) wrote first, until a version carries
// it: the one already in any of the store's directories, else the one in
// this directory once written. Ranks prepare their directories in
// different orders (one finds L4 at open, another makes L2 first), so
// looking only at the directory being prepared let two ranks write two
// identities into L2 and L4 (the TSan stress campaign, once), and looking
// at the other directory first still let a rank write L4 while another,
// having found L4 empty a moment before, wrote L2 (the ASan stress
// campaign, once). So where L2 takes checkpoints, a drawn identity is
// settled there first: its identity file is written only if absent, so
// the ranks agree on it. L4, prepared at open before L2, waits for that
// (set_identity) until a version goes there (prepare), which comes after
// L2 where the version goes to both.
void Route::adopt_identity(DirectoryLevel& level) {
  if (identity_drawn_) {
    if (const std::optional<format::StoreId> written = identity_written_elsewhere(level)) {
      identity_ = *written;
      identity_drawn_ = false;
    }
  }
  const format::StoreId held = level.adopt_identity(identity_);
  if (std::exchange(identity_drawn_, false)) identity_ = held;
  if (held == identity_) return;
  throw MismatchError("store '" + store_ + "': directory '" + level.dir() + "' holds the versions of another store " +
                      "(identity " + held.hex() + ", this store's is " + identity_.hex() +
                      "): it was made by another run under the same name; remove it, or give this store another " +
                      "name or path");
}

std::vector<Route::Step> Route::scheduled() const {
  auto* self = const_cast<Route*>(this);
  return {{&self->memory_, config_.memory.every},
          {&self->local_, config_.local.every},
          {&self->persistent_, config_.persistent.every}};
}

// e.g. local.every = 0 and persistent.every = 10: a checkpoint no period
// names goes to the first level with a period.
std::vector<Level*> Route::levels_for(long checkpoint_number) {
  std::vector<Level*> levels;
  const std::vector<Step> steps = scheduled();
  for (const Step& step : steps) {
    if (step.every > 0 && checkpoint_number % step.every == 0) levels.push_back(step.level);
  }
  if (levels.empty()) {
    for (const Step& step : steps) {
      if (step.every > 0) {
        levels.push_back(step.level);
        break;
      }
    }
  }
  for (Level* level : levels) {
    if (DirectoryLevel* made = directory(level)) prepare_for_version(*made);
  }
  identity_drawn_ = false;  // the version captured next carries the identity
  return levels;
}

std::vector<Level*> Route::readable() const {
  auto* self = const_cast<Route*>(this);
  std::vector<Level*> levels{&self->memory_};
  for (DirectoryLevel* level : directories()) levels.push_back(level);
  return levels;
}

std::vector<Level*> Route::readable_after(int number) const {
  std::vector<Level*> levels = readable();
  std::erase_if(levels, [number](const Level* level) { return level->number() <= number; });
  return levels;
}

Level* Route::level(int number) const {
  auto* self = const_cast<Route*>(this);
  switch (number) {
    case kL0: return device_.get();
    case kL1: return &self->memory_;
    case kL2: return &self->local_;
    case kL3: return partner_;
    case kL4: return &self->persistent_;
    default: return nullptr;
  }
}

std::vector<DirectoryLevel*> Route::directories() const {
  auto* self = const_cast<Route*>(this);
  std::vector<DirectoryLevel*> found;
  if (local_held_.prepared) found.push_back(&self->local_);
  if (persistent_held_.prepared) found.push_back(&self->persistent_);
  return found;
}

DirectoryLevel* Route::directory(const Level* level) const {
  auto* self = const_cast<Route*>(this);
  if (level == &local_) return &self->local_;
  if (level == &persistent_) return &self->persistent_;
  return nullptr;
}

int Route::every_of(const Level& level) const {
  if (&level == &memory_) return config_.memory.every;
  if (&level == &local_) return config_.local.every;
  if (&level == &persistent_) return config_.persistent.every;
  return 0;
}

bool Route::takes_every_checkpoint(const Level& level) const { return every_of(level) == 1; }

std::string Route::every_text(int number) const {
  switch (number) {
    case kL1: return "memory.every = " + std::to_string(config_.memory.every);
    case kL2: return "local.every = " + std::to_string(config_.local.every);
    case kL4: return "persistent.every = " + std::to_string(config_.persistent.every);
    default: return "";
  }
}

void Route::check_wait(int number) const {
  if (number == kL3 && partner_ != nullptr) return;
  if (number != kL1 && number != kL2 && number != kL4) {
    throw InvalidArgumentError("wait: level " + std::to_string(number) +
                               " is not a level of this store; use 1 (host memory), 2 (local) or 4 (persistent), and 3 "
                               "(partner) for an MPI store with partner.scheme set");
  }
  if (number == kL4 && config_.persistent.every == 0) {
    throw InvalidArgumentError("wait: level 4 is disabled for store '" + store_ + "' (persistent.every = 0)");
  }
  if (number == kL2 && config_.local.every == 0) {
    throw InvalidArgumentError("wait: level 2 is disabled for store '" + store_ + "' (local.every = 0)");
  }
}

Level& Route::persist_target(int number) {
  if (number == kL2 || number == kL4) {
    DirectoryLevel& target = number == kL2 ? local_ : persistent_;
    prepare(target);
    return target;
  }
  throw InvalidArgumentError("persist: level " + std::to_string(number) +
                             " is not a directory level; use 2 (local) or 4 (persistent)");
}

}  // namespace resurgo
