// Appicpr's calls (resurgo/appic.h): a process-wide table path -> Store, and
// one open cycle at a time. The Store outlives its cycles because the dirty
// tracking of delta captures lives in it: closing it between cycles would
// make every version a full one.
#include "resurgo/appic.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/c_status.h"
#include "resurgo/resurgo.hpp"

namespace resurgo {
namespace {

struct Array {
  const void* data;
  std::size_t bytes;
  std::string label;
};

// One path: its store, its arrays (registration order) and the versions.
struct File {
  File(const std::string& name, const Config& config) : store(name, config) {}

  Store store;
  std::string path;
  std::vector<Array> arrays;
  int newest_written = 0;  // by this process; a failed version may not be on disk
};

enum class Cycle { kNone, kUndecided, kWriting, kReading };

struct State {
  std::map<std::string, std::unique_ptr<File>> files;  // by normalised absolute path
  File* open = nullptr;
  Cycle cycle = Cycle::kNone;
  std::optional<int> version_read;
};

State& state() {
  static State instance;
  return instance;
}

// Closes every store and forgets the arrays; throws the first error after
// closing all of them.
void close_all_files() {
  std::map<std::string, std::unique_ptr<File>> files = std::move(state().files);
  state().files.clear();
  std::optional<Error> first;
  for (auto& [key, file] : files) {
    try {
      file->store.close();
    } catch (const Error& error) {
      if (!first) first = error;
    }
  }
  if (first) rethrow_as_is(*first);
}

// At exit an open cycle is abandoned (it takes no version) and every store
// is closed; a failure can only be printed. Not through rsg_appic_finalize:
// the thread-local rsg_last_error message is destroyed before atexit
// handlers run.
void finalize_at_exit() {
  State& s = state();
  s.open = nullptr;
  s.cycle = Cycle::kNone;
  try {
    close_all_files();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "resurgo: closing the appic stores at exit: %s\n", error.what());
  }
}

std::string normalised(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

// The store of `path`: L2 is dirname(path), the name basename(path) (the
// Store validates it), L4 off, delta captures unless the environment names
// another mode. A store reads an existing L4 directory even with L4 off, and
// the default one (./checkpoints/<name>) may be this very path: L4 is moved
// to path/<name>, inside the store, where no directory ever is.
Config config_for(const std::filesystem::path& path) {
  std::map<std::string, std::string> overrides{
      {"local.path", path.has_parent_path() ? path.parent_path().string() : "."},
      {"persistent.every", "0"},
      {"persistent.path", path.string()},
  };
  if (::getenv("RESURGO_CAPTURE_MODE") == nullptr) overrides["capture.mode"] = "delta";
  return Config::load("", overrides);
}

File& open_file(const std::string& path) {
  State& s = state();
  const std::string key = normalised(path);
  auto it = s.files.find(key);
  if (it == s.files.end()) {
    const std::filesystem::path p(key);
    auto file = std::make_unique<File>(p.filename().string(), config_for(p));
    file->path = path;
    // Registered after the first store exists: handlers run in reverse order
    // of registration and static destruction, so the stores are closed
    // before the statics they initialised (trackers, signal handlers) go.
    static const bool closes_at_exit = ::atexit(finalize_at_exit) == 0;
    (void)closes_at_exit;
    it = s.files.emplace(key, std::move(file)).first;
  }
  return *it->second;
}

File& open_cycle(const char* call) {
  State& s = state();
  if (s.open == nullptr) {
    throw StateError(std::string(call) + ": no file is open; call rsg_appic_open(path) first");
  }
  return *s.open;
}

Array* find_array(File& file, const void* ptr) {
  const auto it = std::find_if(file.arrays.begin(), file.arrays.end(), [&](const Array& a) { return a.data == ptr; });
  return it == file.arrays.end() ? nullptr : &*it;
}

Array& registered(File& file, const void* ptr, const char* call) {
  Array* array = find_array(file, ptr);
  if (array == nullptr) {
    throw InvalidArgumentError(std::string(call) + ": the array at this address is not registered with '" +
                               file.path + "'; call rsg_appic_register(ptr, bytes) first");
  }
  return *array;
}

void enter(Cycle kind, const char* call) {
  State& s = state();
  if (s.cycle != Cycle::kUndecided && s.cycle != kind) {
    throw StateError(std::string(call) + " on '" + s.open->path + "': this cycle already " +
                     (kind == Cycle::kReading ? "wrote" : "read") +
                     "; a cycle either writes a version or reads one (close it and open another)");
  }
  s.cycle = kind;
}

// Checkpoints the cycle's version. The store takes every registered array,
// written in the cycle or not: a delta holds only the blocks changed since
// the previous version, so an array the cycle left alone adds nothing to it.
void commit(File& file) {
  const int version = std::max(file.store.latest().value_or(0), file.newest_written) + 1;
  file.newest_written = version;
  file.store.checkpoint(version);
  file.store.wait(version, kL2);
}

}  // namespace
}  // namespace resurgo

using resurgo::c_api::guarded;
using resurgo::c_api::invalid;

extern "C" {

int rsg_appic_open(const char* path) {
  if (path == nullptr || *path == '\0') return invalid("rsg_appic_open: path is NULL or empty");
  return guarded([&] {
    resurgo::State& s = resurgo::state();
    if (s.open != nullptr) {
      throw resurgo::StateError(std::string("rsg_appic_open('") + path + "'): '" + s.open->path +
                                "' is still open; call rsg_appic_close first (one file at a time)");
    }
    s.open = &resurgo::open_file(path);
    s.cycle = resurgo::Cycle::kUndecided;
    s.version_read.reset();
  });
}

int rsg_appic_register(void* ptr, size_t bytes) {
  if (ptr == nullptr) return invalid("rsg_appic_register: ptr is NULL");
  return guarded([&] {
    resurgo::File& file = resurgo::open_cycle("rsg_appic_register");
    if (resurgo::state().version_read) {
      throw resurgo::StateError("rsg_appic_register on '" + file.path +
                                "': this cycle already read its version; register every array before the "
                                "first rsg_appic_read");
    }
    if (const resurgo::Array* known = resurgo::find_array(file, ptr)) {
      if (known->bytes == bytes) return;
      throw resurgo::InvalidArgumentError("rsg_appic_register: " + known->label + " of '" + file.path +
                                          "' was registered with " + std::to_string(known->bytes) +
                                          " bytes, now with " + std::to_string(bytes) +
                                          "; an array keeps its size (use another path for a new layout)");
    }
    const int id = static_cast<int>(file.arrays.size()) + 1;
    const std::string label = "array" + std::to_string(id);
    file.store.protect(id, ptr, bytes, label);
    file.arrays.push_back({ptr, bytes, label});
  });
}

int rsg_appic_write(const void* ptr) {
  return guarded([&] {
    resurgo::registered(resurgo::open_cycle("rsg_appic_write"), ptr, "rsg_appic_write");
    resurgo::enter(resurgo::Cycle::kWriting, "rsg_appic_write");
  });
}

int rsg_appic_read(void* ptr) {
  return guarded([&] {
    resurgo::File& file = resurgo::open_cycle("rsg_appic_read");
    resurgo::registered(file, ptr, "rsg_appic_read");
    resurgo::enter(resurgo::Cycle::kReading, "rsg_appic_read");
    resurgo::State& s = resurgo::state();
    if (s.version_read) return;
    if (!file.store.latest()) {
      throw resurgo::NotFoundError("rsg_appic_read: '" + file.path + "' holds no checkpoint (no version in " +
                                   std::filesystem::path(resurgo::normalised(file.path)).parent_path().string() +
                                   "); start from the initial state");
    }
    s.version_read = file.store.restart(resurgo::kLatest);
    file.newest_written = 0;
  });
}

int rsg_appic_version(int* version) {
  if (version == nullptr) return invalid("rsg_appic_version: version is NULL");
  return guarded([&] {
    resurgo::File& file = resurgo::open_cycle("rsg_appic_version");
    const resurgo::State& s = resurgo::state();
    const std::optional<int> found = s.version_read ? s.version_read : file.store.latest();
    if (!found) throw resurgo::NotFoundError("rsg_appic_version: '" + file.path + "' holds no checkpoint");
    *version = *found;
  });
}

int rsg_appic_close(void) {
  return guarded([&] {
    resurgo::State& s = resurgo::state();
    resurgo::File& file = resurgo::open_cycle("rsg_appic_close");
    const resurgo::Cycle cycle = s.cycle;
    s.open = nullptr;
    s.cycle = resurgo::Cycle::kNone;
    s.version_read.reset();
    if (cycle == resurgo::Cycle::kWriting) resurgo::commit(file);
  });
}

int rsg_appic_finalize(void) {
  return guarded([&] {
    resurgo::State& s = resurgo::state();
    if (s.open != nullptr) {
      throw resurgo::StateError("rsg_appic_finalize: '" + s.open->path +
                                "' is still open; call rsg_appic_close first");
    }
    resurgo::close_all_files();
  });
}

}  // extern "C"
