#include "base/log.h"

#include <cstdio>
#include <mutex>

#include "base/printable.h"

namespace resurgo {

namespace {
std::mutex log_mutex;  // keeps lines from different threads whole
}  // namespace

// A label or a path with a newline in it cannot forge a line of its own.
void Logger::log(LogLevel level, const std::string& message) const {
  if (!enabled(level)) return;
  const std::string line = printable(message);
  std::lock_guard lock(log_mutex);
  std::fprintf(stderr, "resurgo[%s] %s: %s\n", store_.c_str(), to_string(level), line.c_str());
}

}  // namespace resurgo
