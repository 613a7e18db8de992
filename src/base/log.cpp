#include "base/log.h"

#include <cstdio>
#include <mutex>

namespace resurgo {

namespace {
std::mutex log_mutex;  // keeps lines from different threads whole
}  // namespace

void Logger::log(LogLevel level, const std::string& message) const {
  if (!enabled(level)) return;
  std::lock_guard lock(log_mutex);
  std::fprintf(stderr, "resurgo[%s] %s: %s\n", store_.c_str(), to_string(level), message.c_str());
}

}  // namespace resurgo
