// Log messages to stderr at the configured level, from any thread.
#pragma once

#include <string>
#include <type_traits>

#include "resurgo/config.hpp"

namespace resurgo {

class Logger {
 public:
  Logger(std::string store_name, LogLevel level) : store_(std::move(store_name)), level_(level) {}
  bool enabled(LogLevel level) const { return level <= level_ && level != LogLevel::kOff; }
  void log(LogLevel level, const std::string& message) const;
  void error(const std::string& m) const { log(LogLevel::kError, m); }
  void warn(const std::string& m) const { log(LogLevel::kWarn, m); }
  void info(const std::string& m) const { log(LogLevel::kInfo, m); }
  void debug(const std::string& m) const { log(LogLevel::kDebug, m); }
  // Builds the line only when debug lines are logged: for the lines on the
  // path of every version and of every open, which must cost nothing when
  // they are not.
  template <class Build>
    requires std::is_invocable_r_v<std::string, Build>
  void debug(Build&& build) const {
    if (enabled(LogLevel::kDebug)) log(LogLevel::kDebug, build());
  }

 private:
  std::string store_;
  LogLevel level_;
};

}  // namespace resurgo
