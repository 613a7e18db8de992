#include "tier/route.h"

#include <filesystem>

#include "base/units.h"
#include "gpu/device_access.h"
#include "gpu/gpu_error.h"
#include "resurgo/errors.hpp"

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
    return std::make_unique<DeviceLevel>(store, rank, config.device, gpu::current_device(config.device.backend), log);
  } catch (const gpu::GpuError& error) {
    log.warn("store '" + store + "': device.capacity is set but L0 is off: " + error.what() +
             "; device regions go to host memory at once, if they can be protected at all");
    return nullptr;
  }
}

}  // namespace

Route::Route(const std::string& store, int rank, int node, const Config& config, std::shared_ptr<Env> env,
             const Logger& log)
    : store_(store),
      config_(config),
      memory_(store, rank, memory_capacity(config), config.memory.keep),
      local_(kL2, local_root(config, node), store, rank, config.local.mode, config.local.keep, env,
             config.local.shared_group),
      persistent_(kL4, absolute(config.persistent.path), store, rank, config.persistent.mode, config.persistent.keep,
                  env, config.persistent.shared_group) {
  if (config.memory.every <= 0 && config.local.every <= 0 && config.persistent.every <= 0) {
    throw ConfigError(
        "no level takes checkpoints: memory.every, local.every and persistent.every are all 0; set one of them");
  }
  local_.prepare();
  local_lock_ = local_.lock();
  if (config.persistent.every > 0 || env->exists(persistent_.dir())) prepare_persistent();
  device_ = open_device_level(store, rank, config, log);
}

void Route::prepare_persistent() {
  if (persistent_prepared_) return;
  persistent_.prepare();
  persistent_lock_ = persistent_.lock();
  if (!identity_.unknown()) adopt_identity(persistent_);
  persistent_prepared_ = true;
}

void Route::close() {
  device_.reset();
  local_lock_.reset();
  persistent_lock_.reset();
}

std::vector<std::pair<format::StoreId, std::string>> Route::identities_found() {
  std::vector<std::pair<format::StoreId, std::string>> found;
  for (DirectoryLevel* level : {&local_, &persistent_}) {
    if (const std::optional<format::StoreId> id = level->identity()) found.emplace_back(*id, level->dir());
  }
  return found;
}

void Route::set_identity(const format::StoreId& id, bool drawn) {
  DirectoryLevel& first = persistent_prepared_ ? persistent_ : local_;
  identity_ = drawn ? first.adopt_identity(id) : id;
  if (persistent_prepared_) adopt_identity(persistent_);
  adopt_identity(local_);
}

void Route::adopt_identity(DirectoryLevel& level) {
  const format::StoreId held = level.adopt_identity(identity_);
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
    if (level == &persistent_) prepare_persistent();
  }
  return levels;
}

std::vector<Level*> Route::readable() const {
  auto* self = const_cast<Route*>(this);
  std::vector<Level*> levels{&self->memory_, &self->local_};
  if (persistent_prepared_) levels.push_back(&self->persistent_);
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
  std::vector<DirectoryLevel*> found{&self->local_};
  if (persistent_prepared_) found.push_back(&self->persistent_);
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
  if (number == kL2) return local_;
  if (number == kL4) {
    prepare_persistent();
    return persistent_;
  }
  throw InvalidArgumentError("persist: level " + std::to_string(number) +
                             " is not a directory level; use 2 (local) or 4 (persistent)");
}

}  // namespace resurgo
