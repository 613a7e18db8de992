// Host-to-device restore out of the L1 memory level's pieces (issue 30,
// part 3; docs/gpu.md, "Pinned versions in memory"), on the CUDA driver:
// the same bytes copied to the device
//   - pageable: from one unregistered buffer (cuMemcpyHtoD, then the null
//     stream synchronised, as a restore from host copies does),
//   - pieces: from pieces of --piece-mib bytes, each allocated and
//     registered on its own (as MemoryLevel pins them), one
//     cuMemcpyHtoDAsync per piece, one synchronisation,
//   - whole: from one buffer registered once (the paper's host buffer), one
//     cuMemcpyHtoDAsync, one synchronisation;
// and the registration of those touched bytes in pieces against once whole.
// Each repeat registers afresh and runs the three copies in a rotated order
// (the machine is shared: compared cases interleave). Prints one JSON line:
// per case the seconds of each repeat, and per-repeat ratios against the
// pageable copy and against the whole registration. Driven by
// bench/l1_pinned_restore.py; without the CUDA headers or driver it says so
// and exits 3.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"

#ifdef RESURGO_HAVE_CUDA_HEADERS
#include "gpu/cuda_driver.h"
#include "option_pairs.h"
#endif

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

struct Options {
  std::size_t bytes = 256 * kMiB;
  std::size_t piece = 2 * kMiB;
  int repeats = 5;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "l1_pinned_restore: %s\nusage: l1_pinned_restore [--mib N] [--piece-mib P] [--repeats R]\n",
               why.c_str());
  std::exit(64);
}

Options parse(int argc, char** argv) {
  Options opt;
  for (const auto& [arg, value] : option_pairs(argc, argv, usage)) {
    if (arg == "--mib") opt.bytes = std::stoull(value) * kMiB;
    else if (arg == "--piece-mib") opt.piece = std::stoull(value) * kMiB;
    else if (arg == "--repeats") opt.repeats = std::stoi(value);
    else usage("unknown option " + std::string(arg));
  }
  if (opt.bytes == 0 || opt.piece == 0 || opt.bytes % opt.piece != 0 || opt.repeats < 1) {
    usage("--mib must be a positive multiple of --piece-mib, --repeats at least 1");
  }
  return opt;
}

#ifdef RESURGO_HAVE_CUDA_HEADERS

using resurgo::gpu::CudaDriver;

std::string json_list(const std::vector<double>& values) {
  std::string text = "[";
  for (double value : values) text += (text.size() > 1 ? "," : "") + std::to_string(value);
  return text + "]";
}

// Touched host memory, 2 MiB aligned as the memory level's pieces.
std::byte* touched(std::size_t bytes, int seed) {
  auto* data = static_cast<std::byte*>(std::aligned_alloc(2 * kMiB, bytes));
  if (data == nullptr) usage("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  std::memset(data, seed, bytes);
  return data;
}

class Bench {
 public:
  explicit Bench(const Options& opt) : opt_(opt), driver_(CudaDriver::instance()) {
    driver_.require();
    CUdevice device = 0;
    driver_.check(driver_.cuDeviceGet(&device, 0), "cuDeviceGet", "device 0");
    driver_.check(driver_.cuDevicePrimaryCtxRetain(&context_, device), "cuDevicePrimaryCtxRetain", "device 0");
    driver_.check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent", "device 0");
    driver_.check(driver_.cuMemAlloc(&device_, opt_.bytes), "cuMemAlloc", "the restore target");
    pageable_ = touched(opt_.bytes, 1);
    whole_ = touched(opt_.bytes, 2);
    for (std::size_t at = 0; at < opt_.bytes; at += opt_.piece) pieces_.push_back(touched(opt_.piece, 3));
  }
  ~Bench() {
    std::free(pageable_);
    std::free(whole_);
    for (std::byte* piece : pieces_) std::free(piece);
    driver_.cuMemFree(device_);
    driver_.cuCtxSetCurrent(nullptr);
    driver_.cuDevicePrimaryCtxRelease(0);
  }

  void run() {
    std::vector<double> copy[3], registration[2];  // copies: pageable, pieces, whole; registrations: pieces, whole
    for (int repeat = 0; repeat < opt_.repeats; ++repeat) {
      for (int i = 0; i < 2; ++i) {
        const int which = (repeat + i) % 2;
        registration[which].push_back(which == 0 ? register_pieces() : register_whole());
      }
      for (int i = 0; i < 3; ++i) {
        const int which = (repeat + i) % 3;
        copy[which].push_back(which == 0 ? copy_pageable() : which == 1 ? copy_pieces() : copy_whole());
      }
      unregister();
    }
    std::vector<double> pageable_over_pieces, pageable_over_whole, pieces_over_whole, registration_ratio;
    for (int r = 0; r < opt_.repeats; ++r) {
      pageable_over_pieces.push_back(copy[0][r] / copy[1][r]);
      pageable_over_whole.push_back(copy[0][r] / copy[2][r]);
      pieces_over_whole.push_back(copy[1][r] / copy[2][r]);
      registration_ratio.push_back(registration[0][r] / registration[1][r]);
    }
    std::printf("{\"bytes\":%zu,\"piece\":%zu,\"repeats\":%d,\"copy_pageable\":%s,\"copy_pieces\":%s,"
                "\"copy_whole\":%s,\"register_pieces\":%s,\"register_whole\":%s,\"pageable_over_pieces\":%s,"
                "\"pageable_over_whole\":%s,\"pieces_over_whole\":%s,\"register_pieces_over_whole\":%s}\n",
                opt_.bytes, opt_.piece, opt_.repeats, json_list(copy[0]).c_str(), json_list(copy[1]).c_str(),
                json_list(copy[2]).c_str(), json_list(registration[0]).c_str(), json_list(registration[1]).c_str(),
                json_list(pageable_over_pieces).c_str(), json_list(pageable_over_whole).c_str(),
                json_list(pieces_over_whole).c_str(), json_list(registration_ratio).c_str());
  }

 private:
  double register_pieces() {
    const auto start = resurgo::Clock::now();
    for (std::byte* piece : pieces_) {
      driver_.check(driver_.cuMemHostRegister(piece, opt_.piece, CU_MEMHOSTREGISTER_PORTABLE), "cuMemHostRegister",
                    "a piece");
    }
    return resurgo::seconds_since(start);
  }
  double register_whole() {
    const auto start = resurgo::Clock::now();
    driver_.check(driver_.cuMemHostRegister(whole_, opt_.bytes, CU_MEMHOSTREGISTER_PORTABLE), "cuMemHostRegister",
                  "the whole buffer");
    return resurgo::seconds_since(start);
  }
  void unregister() {
    for (std::byte* piece : pieces_) driver_.cuMemHostUnregister(piece);
    driver_.cuMemHostUnregister(whole_);
  }
  void synchronize() { driver_.check(driver_.cuStreamSynchronize(nullptr), "cuStreamSynchronize", "the copies"); }
  double copy_pageable() {
    const auto start = resurgo::Clock::now();
    driver_.check(driver_.cuMemcpyHtoD(device_, pageable_, opt_.bytes), "cuMemcpyHtoD", "pageable");
    synchronize();
    return resurgo::seconds_since(start);
  }
  double copy_pieces() {
    const auto start = resurgo::Clock::now();
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      driver_.check(driver_.cuMemcpyHtoDAsync(device_ + i * opt_.piece, pieces_[i], opt_.piece, nullptr),
                    "cuMemcpyHtoDAsync", "a piece");
    }
    synchronize();
    return resurgo::seconds_since(start);
  }
  double copy_whole() {
    const auto start = resurgo::Clock::now();
    driver_.check(driver_.cuMemcpyHtoDAsync(device_, whole_, opt_.bytes, nullptr), "cuMemcpyHtoDAsync", "whole");
    synchronize();
    return resurgo::seconds_since(start);
  }

  const Options opt_;
  const CudaDriver& driver_;
  CUcontext context_ = nullptr;
  CUdeviceptr device_ = 0;
  std::byte* pageable_ = nullptr;
  std::byte* whole_ = nullptr;
  std::vector<std::byte*> pieces_;
};

#endif  // RESURGO_HAVE_CUDA_HEADERS

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
#ifdef RESURGO_HAVE_CUDA_HEADERS
  if (!CudaDriver::instance().available()) {
    std::fprintf(stderr, "unavailable: %s\n", CudaDriver::instance().why_unavailable().c_str());
    return 3;
  }
  try {
    Bench(opt).run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "l1_pinned_restore: %s\n", error.what());
    return 2;
  }
  return 0;
#else
  (void)opt;
  std::fprintf(stderr, "unavailable: built without the CUDA headers\n");
  return 3;
#endif
}
