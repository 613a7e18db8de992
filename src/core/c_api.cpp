// The C API: a thin shell over resurgo::Store that turns exceptions into
// RSG_E* codes and a thread-local message.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/c_status.h"
#include "core/c_store.h"

using resurgo::c_api::guarded;
using resurgo::c_api::invalid;
using resurgo::c_api::last_error;

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
  if (s == nullptr) return invalid("rsg_close: store is NULL");
  const int status = guarded([&] { s->store.close(); });
  delete s;
  return status;
}

int rsg_protect(rsg_store* s, int id, void* ptr, size_t bytes, const char* label) {
  if (s == nullptr) return invalid("rsg_protect: store is NULL");
  return guarded([&] { s->store.protect(id, ptr, bytes, label == nullptr ? "" : label); });
}

int rsg_protect_device(rsg_store* s, int id, void* device_ptr, size_t bytes, const char* label) {
  if (s == nullptr) return invalid("rsg_protect_device: store is NULL");
  return guarded([&] { s->store.protect_device(id, device_ptr, bytes, label == nullptr ? "" : label); });
}

int rsg_protect_managed(rsg_store* s, int id, void* ptr, size_t bytes, const char* label) {
  if (s == nullptr) return invalid("rsg_protect_managed: store is NULL");
  return guarded([&] { s->store.protect_managed(id, ptr, bytes, label == nullptr ? "" : label); });
}

int rsg_unprotect(rsg_store* s, int id) {
  if (s == nullptr) return invalid("rsg_unprotect: store is NULL");
  return guarded([&] { s->store.unprotect(id); });
}

int rsg_set_metadata(rsg_store* s, const void* data, size_t bytes) {
  if (s == nullptr) return invalid("rsg_set_metadata: store is NULL");
  return guarded([&] { s->store.set_metadata(data, bytes); });
}

int rsg_get_metadata(rsg_store* s, void* data, size_t capacity, size_t* bytes) {
  if (s == nullptr || bytes == nullptr) return invalid("rsg_get_metadata: store and bytes must not be NULL");
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
  if (s == nullptr) return invalid("rsg_checkpoint: store is NULL");
  return guarded([&] { s->store.checkpoint(version); });
}

int rsg_wait(rsg_store* s, int version, int level) {
  if (s == nullptr) return invalid("rsg_wait: store is NULL");
  return guarded([&] { s->store.wait(version, level); });
}

int rsg_latest(rsg_store* s, int* version) {
  if (s == nullptr || version == nullptr) return invalid("rsg_latest: store and version must not be NULL");
  return guarded([&] {
    const std::optional<int> newest = s->store.latest();
    if (!newest) throw resurgo::NotFoundError("store '" + s->store.name() + "' has no committed version");
    *version = *newest;
  });
}

int rsg_restart(rsg_store* s, int version, int* restored) {
  if (s == nullptr) return invalid("rsg_restart: store is NULL");
  return guarded([&] {
    const int got = s->store.restart(version);
    if (restored != nullptr) *restored = got;
  });
}

int rsg_prefetch(rsg_store* s, const int* versions, size_t count) {
  if (s == nullptr) return invalid("rsg_prefetch: store is NULL");
  if (versions == nullptr && count > 0) return invalid("rsg_prefetch: versions is NULL but count is not 0");
  return guarded([&] { s->store.prefetch(std::vector<int>(versions, versions + count)); });
}

int rsg_discard(rsg_store* s, int version) {
  if (s == nullptr) return invalid("rsg_discard: store is NULL");
  return guarded([&] { s->store.discard(version); });
}

int rsg_need_checkpoint(rsg_store* s, int* need) {
  if (s == nullptr || need == nullptr) return invalid("rsg_need_checkpoint: store and need must not be NULL");
  return guarded([&] { *need = s->store.need_checkpoint() ? 1 : 0; });
}

int rsg_stats(rsg_store* s, int version, rsg_version_stats* out) {
  if (s == nullptr || out == nullptr) return invalid("rsg_stats: store and out must not be NULL");
  return guarded([&] {
    const std::vector<resurgo::VersionStats> all = s->store.stats();
    const auto it = std::find_if(all.begin(), all.end(), [&](const auto& v) { return v.version == version; });
    if (it == all.end()) {
      throw resurgo::NotFoundError("rsg_stats: store '" + s->store.name() + "' keeps no statistics of version " +
                                   std::to_string(version));
    }
    rsg_version_stats stats{};
    stats.version = it->version;
    std::snprintf(stats.capture, sizeof stats.capture, "%s", it->capture.c_str());
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
    std::snprintf(stats.tracker, sizeof stats.tracker, "%s", it->tracker.c_str());
    *out = stats;
  });
}

int rsg_last_restart(rsg_store* s, rsg_restart_report* out) {
  if (s == nullptr || out == nullptr) return invalid("rsg_last_restart: store and out must not be NULL");
  return guarded([&] {
    const resurgo::RestartReport report = s->store.last_restart();
    *out = rsg_restart_report{report.version, report.level, report.seconds, report.bytes,
                              static_cast<int>(report.skipped.size())};
  });
}

const char* rsg_last_error(void) { return last_error.c_str(); }

}  // extern "C"
