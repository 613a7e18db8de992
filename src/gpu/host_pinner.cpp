#include "gpu/host_pinner.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gpu/gpu_error.h"

namespace resurgo::gpu {

namespace {

constexpr std::size_t kMlockPiece = std::size_t{256} << 20;

// What the user can do about a failed mlock. ENOMEM means either an
// unmapped range (a bug of the caller) or the lock limit; EPERM and EAGAIN
// the limit or memory locked elsewhere.
std::string mlock_advice(int error) {
  if (error != ENOMEM && error != EPERM && error != EAGAIN) return "";
  rlimit limit{};
  std::string current = "unknown";
  if (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
    current = limit.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(limit.rlim_cur / 1024) + " KiB";
  }
  return " (the lock limit RLIMIT_MEMLOCK is " + current +
         ": raise it with ulimit -l or memlock in /etc/security/limits.conf, or set [buffer] pin = off)";
}

class MlockPinner : public HostPinner {
 public:
  std::string name() const override { return "mlock"; }
  std::size_t max_piece() const override { return kMlockPiece; }

  void pin(void* data, std::size_t bytes) override {
    if (::mlock(data, bytes) == 0) return;
    const int error = errno;
    throw GpuError("mlock (" + describe_pin_range(data, bytes) + " of the host buffer): " + std::strerror(error) +
                       mlock_advice(error),
                   0);
  }

  void unpin(void* data, std::size_t bytes) noexcept override { ::munlock(data, bytes); }
};

}  // namespace

std::string describe_pin_range(const void* data, std::size_t bytes) {
  char address[32];
  std::snprintf(address, sizeof address, "%p", data);
  return std::to_string(bytes) + " bytes at " + address;
}

std::size_t pin_piece(const HostPinner& pinner) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return std::max(page, pinner.max_piece() / page * page);
}

std::unique_ptr<HostPinner> make_mlock_pinner() { return std::make_unique<MlockPinner>(); }

}  // namespace resurgo::gpu
