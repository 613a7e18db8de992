// The C API: a thin shell over resurgo::Store that turns exceptions into
// RSG_E* codes and a thread-local message.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/c_status.h"
#include "base/c_store.h"
#include "base/names.h"
#include "format/container.h"

using resurgo::c_api::guarded;
using resurgo::c_api::invalid;
using resurgo::c_api::last_error;
using resurgo::c_api::refuse_unusable;

namespace {

// A string into a fixed C array, truncated and terminated.
template <std::size_t N>
void copy_text(char (&target)[N], const std::string& text) {
  std::snprintf(target, N, "%s", text.c_str());
}

void fill_cache(const resurgo::DeviceCacheStats& cache, rsg_device_caches& out) {
  out.has_cache = 1;
  out.cache_capacity = cache.capacity;
  out.cache_mapped = cache.mapped;
  out.cache_used = cache.used;
  out.cache_versions = cache.versions;
  out.cache_evicted = cache.evicted;
  out.cache_bypassed = cache.bypassed;
  out.cache_growth_done = cache.growth_done ? 1 : 0;
  copy_text(out.cache_growth_stopped, cache.growth_stopped);
  out.cache_mapping_seconds = cache.mapping_seconds;
  out.cache_map_wait_seconds = cache.map_wait_seconds;
  out.cache_flush_wait_seconds = cache.flush_wait_seconds;
  out.cache_device = cache.device;
  out.cache_prefetched = cache.prefetched;
  out.cache_prefetch_too_large = cache.prefetch_too_large;
  out.cache_prefetch_failed = cache.prefetch_failed;
  out.cache_restored_from_prefetch = cache.restored_from_prefetch;
}

void fill_staging(const resurgo::LatePinStats& staging, rsg_device_caches& out) {
  out.has_staging = 1;
  out.staging_capacity = staging.capacity;
  copy_text(out.pin, resurgo::to_string(staging.pin));
  copy_text(out.touch, resurgo::to_string(staging.touch));
  copy_text(out.state, resurgo::to_string(staging.state));
  copy_text(out.strategy, resurgo::to_string(staging.strategy));
  out.touched_bytes = staging.touched_bytes;
  out.touch_seconds = staging.touch_seconds;
  out.pinned = staging.pinned ? 1 : 0;
  out.pin_pieces = staging.pin_pieces;
  out.pin_seconds = staging.pin_seconds;
  out.token_wait_seconds = staging.token_wait_seconds;
  copy_text(out.pin_failure, staging.pin_failure);
  out.flushes = staging.flushes;
  out.flushes_to_untouched = staging.flushes_to_untouched;
  out.checkpoints = staging.checkpoints;
  out.touch_alone = staging.measured.touch_alone;
  out.touch_concurrent = staging.measured.touch_concurrent;
  out.flush_touched = staging.measured.flush_touched;
  out.flush_untouched = staging.measured.flush_untouched;
  out.flush_concurrent = staging.measured.flush_concurrent;
  if (staging.decision) copy_text(out.decision, staging.decision->describe());
}

// rsg_region_description holds every region table the reader accepts, untruncated.
static_assert(RSG_LABEL_CAPACITY == resurgo::kMaxLabelBytes + 1);
static_assert(RSG_DTYPE_CAPACITY == resurgo::format::kMaxDtypeBytes + 1);
static_assert(RSG_MAX_DIMS == resurgo::format::kMaxShapeRank);
static_assert(RSG_KIND_HOST == static_cast<int>(resurgo::MemoryKind::kHost) &&
              RSG_KIND_DEVICE == static_cast<int>(resurgo::MemoryKind::kDevice) &&
              RSG_KIND_MANAGED == static_cast<int>(resurgo::MemoryKind::kManaged));

rsg_region_description to_c(const resurgo::RegionDescription& region) {
  rsg_region_description out{};
  out.id = region.id;
  out.kind = static_cast<int>(region.kind);
  out.bytes = region.bytes;
  copy_text(out.label, region.label);
  copy_text(out.dtype, region.type.dtype);
  out.ndims = static_cast<int>(region.type.shape.size());
  std::copy(region.type.shape.begin(), region.type.shape.end(), out.shape);
  return out;
}

rsg_version_info to_c(const resurgo::VersionInfo& info) {
  rsg_version_info out{};
  out.version = info.version;
  out.pending = info.pending ? 1 : 0;
  for (int level = 0; level < RSG_LEVELS; ++level) {
    out.levels[level] = std::find(info.levels.begin(), info.levels.end(), level) != info.levels.end() ? 1 : 0;
  }
  return out;
}

// Hands `list` to the caller's array as resurgo.h describes for lists: the
// full count always, the entries only when all of them fit. `what` names
// the list for the refusal ("rsg_versions: store 'x' holds 3 versions").
template <class Entry, class Item>
void hand_over(const std::vector<Item>& list, Entry* out, size_t capacity, size_t* count, const std::string& what) {
  *count = list.size();
  if (list.size() > capacity) {
    throw resurgo::InvalidArgumentError(what + ", more than the capacity of " + std::to_string(capacity) +
                                        ": call again with capacity " + std::to_string(list.size()));
  }
  std::transform(list.begin(), list.end(), out, [](const Item& item) { return to_c(item); });
}

// Frees the store and keeps its handle, marked closed, on a list that is
// never freed (c_store.h says why). Without a mutex: a child forked while
// another thread closes a store must still be able to close its own.
void keep_closed(rsg_store* s) {
  static std::atomic<rsg_store*> closed{nullptr};
  {
    const resurgo::Store freed = std::move(s->store);
  }
  s->state = rsg_store::kClosed;
  s->next_closed = closed.load();
  while (!closed.compare_exchange_weak(s->next_closed, s)) {
  }
}

}  // namespace

extern "C" {

int rsg_open(const char* config_path, const char* name, rsg_store** out) {
  if (name == nullptr || out == nullptr) return invalid("rsg_open: name and out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    const resurgo::Config config = resurgo::Config::load(config_path == nullptr ? "" : config_path);
    *out = new rsg_store{resurgo::Store(name, config)};
  });
}

int rsg_close(rsg_store* s) {
  if (const int refused = refuse_unusable(s, "rsg_close")) return refused;
  const int status = guarded([&] { s->store.close(); });
  keep_closed(s);
  return status;
}

int rsg_protect(rsg_store* s, int id, void* ptr, size_t bytes, const char* label) {
  if (const int refused = refuse_unusable(s, "rsg_protect")) return refused;
  return guarded([&] { s->store.protect(id, ptr, bytes, label == nullptr ? "" : label); });
}

int rsg_protect_device(rsg_store* s, int id, void* device_ptr, size_t bytes, const char* label) {
  if (const int refused = refuse_unusable(s, "rsg_protect_device")) return refused;
  return guarded([&] { s->store.protect_device(id, device_ptr, bytes, label == nullptr ? "" : label); });
}

int rsg_protect_managed(rsg_store* s, int id, void* ptr, size_t bytes, const char* label) {
  if (const int refused = refuse_unusable(s, "rsg_protect_managed")) return refused;
  return guarded([&] { s->store.protect_managed(id, ptr, bytes, label == nullptr ? "" : label); });
}

int rsg_unprotect(rsg_store* s, int id) {
  if (const int refused = refuse_unusable(s, "rsg_unprotect")) return refused;
  return guarded([&] { s->store.unprotect(id); });
}

int rsg_set_metadata(rsg_store* s, const void* data, size_t bytes) {
  if (const int refused = refuse_unusable(s, "rsg_set_metadata")) return refused;
  return guarded([&] { s->store.set_metadata(data, bytes); });
}

int rsg_get_metadata(rsg_store* s, void* data, size_t capacity, size_t* bytes) {
  if (s == nullptr || bytes == nullptr) return invalid("rsg_get_metadata: store and bytes must not be NULL");
  if (const int refused = refuse_unusable(s, "rsg_get_metadata")) return refused;
  const auto& metadata = s->store.metadata();
  *bytes = metadata.size();
  if (metadata.size() > capacity) {
    last_error = "rsg_get_metadata: metadata has " + std::to_string(metadata.size()) +
                 " bytes, more than the capacity of " + std::to_string(capacity);
    return RSG_EINVAL;
  }
  if (!metadata.empty()) {
    if (data == nullptr) return invalid("rsg_get_metadata: data is NULL");
    std::memcpy(data, metadata.data(), metadata.size());
  }
  last_error.clear();
  return RSG_OK;
}

int rsg_checkpoint(rsg_store* s, int version) {
  if (const int refused = refuse_unusable(s, "rsg_checkpoint")) return refused;
  return guarded([&] { s->store.checkpoint(version); });
}

int rsg_wait(rsg_store* s, int version, int level) {
  if (const int refused = refuse_unusable(s, "rsg_wait")) return refused;
  return guarded([&] { s->store.wait(version, level); });
}

int rsg_latest(rsg_store* s, int* version) {
  if (s == nullptr || version == nullptr) return invalid("rsg_latest: store and version must not be NULL");
  if (const int refused = refuse_unusable(s, "rsg_latest")) return refused;
  return guarded([&] {
    const std::optional<int> newest = s->store.latest();
    if (!newest) throw resurgo::NotFoundError("store '" + s->store.name() + "' has no committed version");
    *version = *newest;
  });
}

int rsg_restart(rsg_store* s, int version, int* restored) {
  if (const int refused = refuse_unusable(s, "rsg_restart")) return refused;
  return guarded([&] {
    const int got = s->store.restart(version);
    if (restored != nullptr) *restored = got;
  });
}

int rsg_prefetch(rsg_store* s, const int* versions, size_t count) {
  if (const int refused = refuse_unusable(s, "rsg_prefetch")) return refused;
  if (versions == nullptr && count > 0) return invalid("rsg_prefetch: versions is NULL but count is not 0");
  return guarded([&] { s->store.prefetch(std::vector<int>(versions, versions + count)); });
}

int rsg_set_capture_streams(rsg_store* s, void* const* streams, size_t count) {
  if (const int refused = refuse_unusable(s, "rsg_set_capture_streams")) return refused;
  if (streams == nullptr && count > 0) return invalid("rsg_set_capture_streams: streams is NULL but count is not 0");
  return guarded([&] { s->store.set_capture_streams(std::vector<void*>(streams, streams + count)); });
}

int rsg_discard(rsg_store* s, int version) {
  if (const int refused = refuse_unusable(s, "rsg_discard")) return refused;
  return guarded([&] { s->store.discard(version); });
}

int rsg_need_checkpoint(rsg_store* s, int* need) {
  if (s == nullptr || need == nullptr) return invalid("rsg_need_checkpoint: store and need must not be NULL");
  if (const int refused = refuse_unusable(s, "rsg_need_checkpoint")) return refused;
  return guarded([&] { *need = s->store.need_checkpoint() ? 1 : 0; });
}

int rsg_stats(rsg_store* s, int version, rsg_version_stats* out) {
  if (s == nullptr || out == nullptr) return invalid("rsg_stats: store and out must not be NULL");
  if (const int refused = refuse_unusable(s, "rsg_stats")) return refused;
  return guarded([&] {
    const std::vector<resurgo::VersionStats> all = s->store.stats();
    const auto it = std::find_if(all.begin(), all.end(), [&](const auto& v) { return v.version == version; });
    if (it == all.end()) {
      throw resurgo::NotFoundError("rsg_stats: store '" + s->store.name() + "' keeps no statistics of version " +
                                   std::to_string(version));
    }
    rsg_version_stats stats{};
    stats.version = it->version;
    copy_text(stats.capture, it->capture);
    stats.bytes = it->bytes;
    stats.blocking_seconds = it->blocking_seconds;
    stats.backpressure_seconds = it->backpressure_seconds;
    stats.first_touch_seconds = it->first_touch_seconds;
    stats.copy_seconds = it->copy_seconds;
    stats.copy_on_write_bytes = it->copy_on_write_bytes;
    for (int level = 0; level < RSG_LEVELS; ++level) {
      const resurgo::LevelStats* entry = it->at(level);
      const bool reached = entry != nullptr && entry->seconds_to_level >= 0;
      stats.seconds_to_level[level] = reached ? entry->seconds_to_level : -1;
      stats.stored_bytes[level] = reached ? static_cast<long long>(entry->stored_bytes) : -1;
    }
    stats.failed = it->error.empty() ? 0 : 1;
    stats.base_version = it->base_version;
    stats.captured_bytes = it->captured_bytes;
    stats.dirty_bytes = it->dirty_bytes;
    stats.granularity_bytes = it->granularity_bytes;
    copy_text(stats.tracker, it->tracker);
    stats.device_bytes = it->device_bytes;
    copy_text(stats.device_path, it->device_path);
    stats.device_wait_seconds = it->device_wait_seconds;
    *out = stats;
  });
}

int rsg_device_stats(rsg_store* s, rsg_device_caches* out) {
  if (s == nullptr || out == nullptr) return invalid("rsg_device_stats: store and out must not be NULL");
  if (const int refused = refuse_unusable(s, "rsg_device_stats")) return refused;
  return guarded([&] {
    const resurgo::DeviceStats stats = s->store.device_stats();
    rsg_device_caches caches{};
    if (stats.cache) fill_cache(*stats.cache, caches);
    if (stats.staging) fill_staging(*stats.staging, caches);
    *out = caches;
  });
}

int rsg_last_restart(rsg_store* s, rsg_restart_report* out) {
  if (s == nullptr || out == nullptr) return invalid("rsg_last_restart: store and out must not be NULL");
  if (const int refused = refuse_unusable(s, "rsg_last_restart")) return refused;
  return guarded([&] {
    const resurgo::RestartReport report = s->store.last_restart();
    *out = rsg_restart_report{report.version, report.level, report.seconds, report.bytes,
                              static_cast<int>(report.skipped.size())};
  });
}

int rsg_versions(rsg_store* s, rsg_version_info* out, size_t capacity, size_t* count) {
  if (s == nullptr || count == nullptr) return invalid("rsg_versions: store and count must not be NULL");
  if (const int refused = refuse_unusable(s, "rsg_versions")) return refused;
  *count = 0;
  if (out == nullptr && capacity > 0) return invalid("rsg_versions: out is NULL but capacity is not 0");
  return guarded([&] {
    const std::vector<resurgo::VersionInfo> versions = s->store.versions();
    hand_over(versions, out, capacity, count,
              "rsg_versions: store '" + s->store.name() + "' holds " + std::to_string(versions.size()) + " versions");
  });
}

int rsg_describe(rsg_store* s, int version, rsg_region_description* out, size_t capacity, size_t* count) {
  if (s == nullptr || count == nullptr) return invalid("rsg_describe: store and count must not be NULL");
  if (const int refused = refuse_unusable(s, "rsg_describe")) return refused;
  *count = 0;
  if (out == nullptr && capacity > 0) return invalid("rsg_describe: out is NULL but capacity is not 0");
  return guarded([&] {
    const resurgo::VersionDescription description = s->store.describe(version);
    hand_over(description.regions, out, capacity, count,
              "rsg_describe: version " + std::to_string(version) + " of store '" + s->store.name() + "' has " +
                  std::to_string(description.regions.size()) + " regions");
  });
}

int rsg_persist(rsg_store* s, int version, int level) {
  if (const int refused = refuse_unusable(s, "rsg_persist")) return refused;
  return guarded([&] { s->store.persist(version, level); });
}

const char* rsg_last_error(void) { return last_error.c_str(); }

}  // extern "C"
