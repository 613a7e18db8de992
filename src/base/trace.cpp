#include "base/trace.h"

#include <pthread.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "base/random.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {
thread_local std::string this_thread_name = "application";
}

Trace::Trace(std::string path) : path_(std::move(path)) {}

void Trace::name_this_thread(const std::string& name) {
  this_thread_name = name;
  ::pthread_setname_np(::pthread_self(), ("rsg " + name).substr(0, 15).c_str());
}

int Trace::thread_index() {
  for (std::size_t i = 0; i < thread_names_.size(); ++i) {
    if (thread_names_[i] == this_thread_name) return static_cast<int>(i);
  }
  thread_names_.push_back(this_thread_name);
  return static_cast<int>(thread_names_.size() - 1);
}

void Trace::record(const std::string& name, Clock::time_point begin, Clock::time_point end, int version,
                   std::uint64_t bytes) {
  using Micro = std::chrono::duration<double, std::micro>;
  std::lock_guard lock(mutex_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back({name, Micro(begin - origin_).count(), Micro(end - begin).count(), thread_index(), version, bytes});
}

void Trace::write(Env& env) const {
  using nlohmann::json;
  std::lock_guard lock(mutex_);
  json events = json::array();
  const int pid = static_cast<int>(::getpid());
  for (std::size_t i = 0; i < thread_names_.size(); ++i) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", i}, {"args", {{"name", thread_names_[i]}}}});
  }
  for (const Event& event : events_) {
    json args = json::object();
    if (event.version >= 0) args["version"] = event.version;
    if (event.bytes > 0) args["bytes"] = event.bytes;
    events.push_back({{"ph", "X"}, {"name", event.name}, {"cat", "resurgo"}, {"pid", pid}, {"tid", event.thread},
                      {"ts", event.begin_us}, {"dur", event.duration_us}, {"args", args}});
  }
  const json document = {{"traceEvents", events}, {"displayTimeUnit", "ms"},
                         {"otherData", {{"dropped_events", dropped_}}}};
  const std::string text = document.dump();
  // Through the directory, checked as a store's is, or sticky as /tmp. The
  // trace replaces only an older trace of this user: another user's file or
  // link under its name is refused, even by a root-run job, which the
  // sticky bit does not stop.
  const std::size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
  const std::string name = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  DirectoryRules rules;
  rules.accept_sticky = true;
  const std::unique_ptr<Directory> directory =
      env.open_directory(std::filesystem::absolute(dir).lexically_normal().string(), rules);
  const std::string temporary = "." + name + ".tmp-" + std::to_string(pid) + "." + random_hex(8);
  try {
    std::unique_ptr<WritableFile> file = directory->create(temporary, 0600);
    file->append(text.data(), text.size());
    file->close();
    if (!directory->rename_new(temporary, name)) {
      directory->open(name);  // a regular file of this user's, or an error saying what it is
      directory->rename(temporary, name);
    }
  } catch (...) {
    directory->remove(temporary);
    throw;
  }
}

}  // namespace resurgo
