#include "core/config_checks.h"

#include <cstdio>

#include "base/log.h"
#include "base/printable.h"
#include "base/units.h"
#include "core/config_names.h"
#include "core/errors.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

std::string size_or_auto(std::uint64_t bytes) { return bytes == 0 ? "auto" : size_text(bytes); }

std::string granularity_text(std::uint64_t bytes) {
  return bytes == kDoublingGranularity ? "doubling" : size_or_auto(bytes);
}

std::string mode_text(unsigned mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", mode);
  return text;
}

// "L2 /scratch/x every 1 keep 2 mode 0600", or "L2 off".
std::string directory_summary(const char* level, const std::string& path, int every, int keep, unsigned mode) {
  if (every == 0) return std::string(level) + " off";
  return std::string(level) + " " + printable(path) + " every " + std::to_string(every) + " keep " +
         std::to_string(keep) + " mode " + mode_text(mode);
}

std::string capture_summary(const Config& c) {
  std::string text = std::string("capture ") + to_string(c.capture.mode) + " (buffer " +
                     size_or_auto(c.buffer.capacity) + ")";
  if (c.capture.mode == CaptureMode::kAuto) {
    char share[32];
    std::snprintf(share, sizeof share, "%g", c.capture.auto_copy_above);
    text += std::string(", regions written above ") + share + " per interval copied, the rest forked";
  }
  if (c.capture.mode == CaptureMode::kDelta) {
    text += ", track " + std::string(to_string(c.track.method)) + " granularity " +
            granularity_text(c.track.granularity) + ", a full version every " + std::to_string(c.delta.full_every);
    if (c.delta.compact_after > 0) {
      char share[32];
      std::snprintf(share, sizeof share, "%g", c.delta.compact_share);
      text += ", compacted after " + std::to_string(c.delta.compact_after) + " deltas, working " + share +
              " of the time";
    }
  }
  return text;
}

std::string levels_summary(const Config& c) {
  const std::string local = c.local.path.empty() ? Config::default_local_path() : c.local.path;
  const std::string device = c.device.ordinal == kAutoDevice ? "auto" : std::to_string(c.device.ordinal);
  std::string text = c.device.capacity > 0 ? "L0 " + size_text(c.device.capacity) + " (" +
                                                 to_string(c.device.backend) + ", device " + device + ")"
                                           : "L0 off";
  text += c.memory.every > 0 ? "; L1 every " + std::to_string(c.memory.every) + " keep " +
                                   std::to_string(c.memory.keep) + " capacity " + size_or_auto(c.memory.capacity)
                             : "; L1 off";
  text += "; " + directory_summary("L2", local, c.local.every, c.local.keep, c.local.mode);
  text += "; L3 " + std::string(to_string(c.partner.scheme));
  return text + "; " + directory_summary("L4", c.persistent.path, c.persistent.every, c.persistent.keep,
                                         c.persistent.mode);
}

}  // namespace

std::string config_summary(const Config& c) {
  const std::string threads = c.pipeline.threads == 0 ? "auto" : std::to_string(c.pipeline.threads);
  return capture_summary(c) + "; " + levels_summary(c) + "; pipeline threads " + threads + " compress " +
         to_string(c.pipeline.compress) + " chunk " + size_text(c.pipeline.chunk_size) + "; interval " +
         to_string(c.interval.policy) + "; trace " + (c.trace.path.empty() ? "off" : printable(c.trace.path));
}

const Config& check_store_config(const std::string& store, const Config& config) {
  if (config.interval.policy == IntervalPolicy::kSeconds && config.interval.seconds <= 0) {
    throw ConfigError(store_call_message("open", store,
                                         "interval.policy = seconds needs interval.seconds; set it (e.g. \"15min\")"));
  }
  const bool forks = config.capture.mode == CaptureMode::kFork || config.capture.mode == CaptureMode::kAuto;
  if (config.memory.every > 0 && forks) {
    throw ConfigError(store_call_message(
        "open", store,
        "capture.mode = fork (or auto) writes versions from a child process, which cannot fill the memory level "
        "that memory.every > 0 routes them to; use capture.mode = copy or delta"));
  }
  Logger(store, config.log.level).debug([&] { return "configuration: " + config_summary(config); });
  return config;
}

}  // namespace resurgo
