// Optional Chrome/Perfetto trace of the pipeline (trace.path or
// RESURGO_TRACE_PATH): complete events ("ph":"X") collected in memory, at
// most kMaxEvents, and written as JSON when the store closes. The file opens
// in ui.perfetto.dev and chrome://tracing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "resurgo/env.hpp"

namespace resurgo {

class Trace {
 public:
  static constexpr std::size_t kMaxEvents = 1u << 20;

  explicit Trace(std::string path);
  bool enabled() const { return !path_.empty(); }

  // Names the calling thread in the trace (e.g. "level L2") and for the
  // system ("rsg level L2" in top -H, perf, gdb; 15 characters at most).
  static void name_this_thread(const std::string& name);

  void record(const std::string& name, Clock::time_point begin, Clock::time_point end, int version = -1,
              std::uint64_t bytes = 0);
  // Writes the JSON file through a temporary name. Throws StorageError.
  void write(Env& env) const;

 private:
  struct Event {
    std::string name;
    double begin_us;
    double duration_us;
    int thread;
    int version;
    std::uint64_t bytes;
  };
  int thread_index();

  std::string path_;
  Clock::time_point origin_ = Clock::now();
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::vector<std::string> thread_names_;
  std::size_t dropped_ = 0;
};

// Records one event from construction to destruction; reads no clock when
// the trace is off (two spans a checkpoint, on the application's thread).
class TraceSpan {
 public:
  // `name`: a string, or a function that makes one, called only when the
  // trace is on: a span of every write or restore then formats and
  // allocates no name that nobody records.
  template <class Name>
  TraceSpan(Trace& trace, Name&& name, int version = -1, std::uint64_t bytes = 0)
      : trace_(trace), version_(version), bytes_(bytes) {
    if (!trace_.enabled()) return;
    if constexpr (std::is_invocable_r_v<std::string, Name>) {
      name_ = name();
    } else {
      name_ = std::forward<Name>(name);
    }
    begin_ = Clock::now();
  }
  ~TraceSpan() {
    if (trace_.enabled()) trace_.record(name_, begin_, Clock::now(), version_, bytes_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Trace& trace_;
  std::string name_;
  int version_;
  std::uint64_t bytes_;
  Clock::time_point begin_{};
};

}  // namespace resurgo
