// Compiled only into the crash campaign's library (see crash_point.h).
#include "base/crash_point.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <new>
#include <stdexcept>

namespace resurgo::crash_points {

namespace {

// Written by arm() before any thread passes a point, read-only afterwards.
char armed_name[64] = {};
int armed_level = -1;
int armed_hit = 0;
// In a MAP_SHARED page mapped by arm(), so that a forked child's passes are
// counted with its parent's (a lock-free atomic works across processes).
std::atomic<int>* passes = nullptr;

}  // namespace

void pass(const char* name, int level) {
  if (passes == nullptr || level != armed_level || std::strcmp(name, armed_name) != 0) return;
  if (passes->fetch_add(1, std::memory_order_relaxed) + 1 == armed_hit) ::kill(::getpid(), SIGKILL);
}

bool fired() { return passes != nullptr && passes->load() >= armed_hit; }

void arm(const std::string& full_name, int hit) {
  int level = 0;
  std::string name = full_name;
  if (name.size() > 3 && name[0] == 'L' && (name[1] == '2' || name[1] == '4') && name[2] == '.') {
    level = name[1] - '0';
    name = name.substr(3);
  }
  if (name.empty() || name.size() >= sizeof armed_name || hit < 1) {
    throw std::invalid_argument("crash point '" + full_name + "' hit " + std::to_string(hit) +
                                ": the name must be 1-63 characters and the hit at least 1");
  }
  std::memcpy(armed_name, name.c_str(), name.size() + 1);
  armed_level = level;
  armed_hit = hit;
  static_assert(std::atomic<int>::is_always_lock_free);
  if (passes == nullptr) {
    void* page = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) throw std::runtime_error("crash points: cannot map the shared pass counter");
    passes = new (page) std::atomic<int>(0);
  }
  passes->store(0);
}

}  // namespace resurgo::crash_points
