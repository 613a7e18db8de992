#include "tier/device_level.h"

#include <algorithm>
#include <vector>

#include "format/container.h"
#include "io/bytes_file.h"
#include "gpu/device_access.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

class DeviceReader final : public ReadableFile {
 public:
  DeviceReader(DeviceLevel& level, int version, std::uint64_t size, std::string path)
      : level_(level), version_(version), size_(size), path_(std::move(path)) {}
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
    if (offset > size_ || bytes > size_ - offset) {
      throw StorageError("read of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " of '" +
                         path_ + "' goes past its end (" + std::to_string(size_) + " bytes)");
    }
    level_.read(version_, offset, data, bytes);
  }
  std::uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  DeviceLevel& level_;
  int version_;
  std::uint64_t size_;
  std::string path_;
};

std::unique_ptr<gpu::DeviceCache> open_cache(const Config::Device& config, int device, const Logger& log) {
  gpu::DeviceCacheOptions options;
  options.capacity = config.capacity;
  options.chunk = config.chunk;
  return std::make_unique<gpu::DeviceCache>(gpu::open_device_memory(config.backend, device), options, log);
}

}  // namespace

DeviceLevel::DeviceLevel(const std::string& store, int rank, const Config::Device& config, int device,
                         const Logger& log)
    : store_(store),
      rank_(rank),
      device_(device),
      cache_(open_cache(config, device, log)),
      capacity_(cache_->stats().capacity) {}

DeviceLevel::~DeviceLevel() = default;

Level::Features DeviceLevel::features() const {
  Features features;
  features.is_volatile = true;
  features.node_local = true;
  features.device = true;
  return features;
}

std::string DeviceLevel::where() const { return "the L0 device cache of store '" + store_ + "' on " + memory_name(); }

void DeviceLevel::commit(int version, const std::function<void(WritableFile&)>& write) {
  BytesFile writer(where() + ", version " + std::to_string(version));
  write(writer);
  const gpu::CaptureResult result = cache_->capture(version, {{writer.bytes().data(), writer.bytes().size()}});
  if (result.status != gpu::CaptureResult::Status::kCached) {
    throw LevelFullError("version " + std::to_string(version) + " (" + std::to_string(writer.bytes().size()) +
                         " bytes) does not fit in " + where() + "; raise device.capacity");
  }
  cache_->flushed(version);
}

void DeviceLevel::commit_copy(int version, const ReadableFile& source) {
  const format::Container container = format::read_container(source);
  format::check_identity(container, source.path(), "", version, rank_);
  commit(version, [&](WritableFile& file) { format::copy_verified(source, container, file); });
}

std::vector<int> DeviceLevel::versions() {
  std::vector<int> found;
  for (const std::int64_t version : cache_->versions()) found.push_back(static_cast<int>(version));
  std::sort(found.begin(), found.end());
  return found;
}

bool DeviceLevel::holds(int version) { return cache_->contains(version); }

std::unique_ptr<ReadableFile> DeviceLevel::open(int version) {
  const std::optional<std::size_t> size = cache_->size_of(version);
  if (!size) throw NotFoundError("version " + std::to_string(version) + " is not in " + where());
  return std::make_unique<DeviceReader>(*this, version, *size, where() + ", version " + std::to_string(version));
}

void DeviceLevel::quarantine(int version) { remove(version); }

void DeviceLevel::remove(int version) {
  if (cache_->contains(version)) cache_->remove(version);
}

std::vector<int> DeviceLevel::evict(const std::function<bool(int)>&, const KnownBases&) { return {}; }

gpu::CaptureResult DeviceLevel::capture(int version, const std::vector<gpu::CaptureSpan>& spans) {
  return cache_->capture(version, spans);
}

void DeviceLevel::read(int version, std::size_t offset, void* target, std::size_t bytes) {
  cache_->read(version, offset, target, bytes);
}

void DeviceLevel::release(int version) { cache_->flushed(version); }

bool DeviceLevel::admit_prefetch(std::size_t bytes) {
  if (bytes <= capacity_) return true;
  prefetch_too_large_++;
  return false;
}

gpu::CaptureResult DeviceLevel::stage(int version, const std::vector<gpu::CaptureSpan>& spans) {
  try {
    const gpu::CaptureResult result = cache_->stage(version, spans);
    if (result.status == gpu::CaptureResult::Status::kCached) prefetched_++;
    if (result.status == gpu::CaptureResult::Status::kTooLarge) prefetch_too_large_++;
    return result;
  } catch (...) {
    prefetch_failed_++;
    throw;
  }
}

void DeviceLevel::consumed(int version) {
  if (cache_->contains(version)) cache_->flushed(version);
}

bool DeviceLevel::discard(int version) { return cache_->discard(version); }

DeviceCacheStats DeviceLevel::stats() const {
  DeviceCacheStats stats = cache_->stats();
  stats.prefetched = prefetched_;
  stats.prefetch_too_large = prefetch_too_large_;
  stats.prefetch_failed = prefetch_failed_;
  stats.restored_from_prefetch = restored_from_prefetch_;
  return stats;
}

}  // namespace resurgo
