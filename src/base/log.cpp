#include "base/log.h"

#include <cstdio>
#include <mutex>

namespace resurgo {

namespace {
const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kOff: break;
  }
  return "";
}
std::mutex log_mutex;  // keeps lines from different threads whole
}  // namespace

void Logger::log(LogLevel level, const std::string& message) const {
  if (!enabled(level)) return;
  std::lock_guard lock(log_mutex);
  std::fprintf(stderr, "resurgo[%s] %s: %s\n", store_.c_str(), level_name(level), message.c_str());
}

}  // namespace resurgo
