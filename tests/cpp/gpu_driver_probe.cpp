// gpu_driver_probe: the rules of the CUDA driver that resurgo relies on,
// or must know, checked against whatever libcuda.so.1 this process loads (a
// GPU's driver; the fake one of tests/cpp/fake_cuda through
// LD_LIBRARY_PATH). It prints the driver and its devices, then one Markdown
// table (rule | expected | observed | verdict), and exits with 0 when every
// rule relied upon holds, 1 when one does not, 3 when no driver or device is
// usable (saying why). Where NVIDIA documents nothing it reports a fact
// without a verdict; so it does for the variant of cuCtxGetDevice that
// cuGetProcAddress hands out at the version resurgo asks for (from CUDA 13
// one that takes a context, unlike <cuda.h>'s prototype). Everything it
// makes is given back; it runs in seconds.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/units.h"
#include "gpu/cuda_driver.h"
#include "host_pages.h"

namespace {

using resurgo::kMiB;
using resurgo::gpu::CudaDriver;

using GetProcAddress = decltype(&::cuGetProcAddress);

const CudaDriver& cuda() { return CudaDriver::instance(); }

// "CUDA_ERROR_INVALID_VALUE" for a result.
std::string name_of(CUresult result) {
  const std::string described = cuda().describe(result);
  return described.substr(0, described.find(':'));
}

// The table.
class Report {
 public:
  // What the driver did, where resurgo must know it but does not rely on it.
  void fact(const std::string& rule, const std::string& observed, const std::string& expected = "(undocumented)") {
    rows_.push_back({rule, expected, observed, "fact"});
  }
  // What NVIDIA documents and resurgo does not depend on.
  void documented(const std::string& rule, const std::string& expected, const std::string& observed, bool holds) {
    rows_.push_back({rule, expected, observed, holds ? "as documented" : "differs from the documentation"});
  }
  // What resurgo relies on: a failure is the exit status.
  void relied(const std::string& rule, const std::string& expected, const std::string& observed, bool holds) {
    rows_.push_back({rule, expected, observed, holds ? "holds (relied upon)" : "**FAILS** (relied upon)"});
    failures_ += holds ? 0 : 1;
  }
  void print() const {
    std::printf("| rule | expected | observed | verdict |\n|---|---|---|---|\n");
    for (const Row& row : rows_) {
      std::printf("| %s | %s | %s | %s |\n", row.rule.c_str(), row.expected.c_str(), row.observed.c_str(),
                  row.verdict.c_str());
    }
  }
  int failures() const { return failures_; }

 private:
  struct Row {
    std::string rule, expected, observed, verdict;
  };
  std::vector<Row> rows_;
  int failures_ = 0;
};

unsigned char pattern(std::size_t i) { return static_cast<unsigned char>(i * 131 + 7); }

// Whether `host` holds the pattern from `offset` on, for `bytes`.
bool has_pattern(const unsigned char* host, std::size_t offset, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) {
    if (host[i] != pattern(offset + i)) return false;
  }
  return true;
}

// A cuMemcpyDtoH into `host` of `bytes` at `offset` of `device`:
// "accepted" with the bytes checked, or the error.
std::string download(unsigned char* host, CUdeviceptr device, std::size_t offset, std::size_t bytes, bool& accepted) {
  std::memset(host, 0, bytes);
  const CUresult result = cuda().cuMemcpyDtoH(host, device + offset, bytes);
  accepted = result == CUDA_SUCCESS;
  if (!accepted) return "refused: " + name_of(result);
  return has_pattern(host, offset, bytes) ? "accepted, bytes right" : "accepted, bytes WRONG";
}

// Rules 1-3: copies into host memory registered in two pieces back to back
// (A, B), and into B and the pageable memory after it (C).
void registration_rules(Report& report) {
  const std::size_t piece = 2 * kMiB;
  HostPages host(3 * piece);
  CUdeviceptr device = 0;
  if (host.data() == nullptr || cuda().cuMemAlloc(&device, 3 * piece) != CUDA_SUCCESS) {
    report.relied("setup: 6 MiB of host and of device memory", "allocated", "allocation failed", false);
    return;
  }
  std::vector<unsigned char> bytes(3 * piece);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern(i);
  CUresult result = cuda().cuMemcpyHtoD(device, bytes.data(), bytes.size());
  const CUresult first = cuda().cuMemHostRegister(host.data(), piece, 0);
  const CUresult second = cuda().cuMemHostRegister(host.data() + piece, piece, 0);
  if (result != CUDA_SUCCESS || first != CUDA_SUCCESS || second != CUDA_SUCCESS) {
    report.relied("setup: two 2 MiB pieces registered back to back", "CUDA_SUCCESS",
                  "cuMemcpyHtoD " + name_of(result) + ", cuMemHostRegister " + name_of(first) + " and " +
                      name_of(second),
                  false);
  } else {
    bool accepted = false;
    report.fact("cuMemcpyDtoH into a span over two registrations back to back (A+B)",
                download(host.data() + kMiB, device, kMiB, piece, accepted));
    const std::string half = download(host.data() + piece + kMiB, device, piece + kMiB, piece, accepted);
    report.documented("cuMemcpyDtoH into a span half registered, half pageable (B+C)",
                      "refused: CUDA_ERROR_INVALID_VALUE", half, half == "refused: CUDA_ERROR_INVALID_VALUE");
    for (const auto& [name, offset] : {std::pair{"A", std::size_t{0}}, std::pair{"B", piece}}) {
      const std::string alone = download(host.data() + offset, device, offset, piece, accepted);
      report.relied(std::string("cuMemcpyDtoH into registered piece ") + name + " alone",
                    "accepted, bytes right", alone, alone == "accepted, bytes right");
    }
  }
  if (first == CUDA_SUCCESS) cuda().cuMemHostUnregister(host.data());
  if (second == CUDA_SUCCESS) cuda().cuMemHostUnregister(host.data() + piece);
  cuda().cuMemFree(device);
}

// Rule 4: the three pointer attributes of one pointer, as observed.
struct Attributes {
  CUresult type_result, managed_result, ordinal_result;
  std::uint64_t type = 0, managed = 0, ordinal = 0;  // wider than the driver writes, read low bytes first

  static Attributes of(CUdeviceptr pointer) {
    Attributes a{};
    a.type_result = cuda().cuPointerGetAttribute(&a.type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pointer);
    a.managed_result = cuda().cuPointerGetAttribute(&a.managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, pointer);
    a.ordinal_result = cuda().cuPointerGetAttribute(&a.ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer);
    return a;
  }
  bool device() const { return type_result == CUDA_SUCCESS && (type & 0xffffffff) == CU_MEMORYTYPE_DEVICE; }
  bool not_device() const {
    return type_result != CUDA_SUCCESS || (type & 0xffffffff) == CU_MEMORYTYPE_HOST;
  }
  bool is_managed() const { return managed_result == CUDA_SUCCESS && managed != 0; }
  bool on_device_zero() const { return ordinal_result == CUDA_SUCCESS && (ordinal & 0xffffffff) == 0; }

  std::string describe() const {
    const auto field = [](const char* what, CUresult result, std::string value) {
      return std::string(what) + " " + name_of(result) + (result == CUDA_SUCCESS ? " " + value : "");
    };
    const unsigned int kind = static_cast<unsigned int>(type & 0xffffffff);
    const std::string kind_name = kind == CU_MEMORYTYPE_DEVICE ? " (device)"
                                  : kind == CU_MEMORYTYPE_HOST ? " (host)"
                                                               : "";
    return field("MEMORY_TYPE", type_result, std::to_string(kind) + kind_name) + "; " +
           field("IS_MANAGED", managed_result, std::to_string(managed != 0 ? 1 : 0)) + "; " +
           field("DEVICE_ORDINAL", ordinal_result, std::to_string(static_cast<std::int32_t>(ordinal & 0xffffffff)));
  }
};

void pointer_rules(Report& report) {
  void* pageable = std::malloc(4096);
  CUdeviceptr managed = 0, device = 0, reserved = 0;
  CUmemGenericAllocationHandle physical = 0;
  std::size_t granularity = 0;
  CUmemAllocationProp properties = {};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = 0;
  const CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  const CUresult made[] = {
      cuda().cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL),
      cuda().cuMemAlloc(&device, 4096),
      cuda().cuMemGetAllocationGranularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      cuda().cuMemAddressReserve(&reserved, granularity, 0, 0, 0),
      cuda().cuMemCreate(&physical, granularity, &properties, 0),
      cuda().cuMemMap(reserved, granularity, 0, physical, 0),
      cuda().cuMemSetAccess(reserved, granularity, &access, 1),
  };
  if (pageable == nullptr || std::any_of(std::begin(made), std::end(made), [](CUresult r) { return r != 0; })) {
    report.relied("setup: malloc, managed, device and VMM memory", "allocated", "allocation failed", false);
  } else {
    // With a context current, what resurgo relies on.
    struct Memory {
      const char* name;
      CUdeviceptr pointer;
      const char* expected;
      bool (*holds)(const Attributes&);
    };
    const Memory memories[] = {
        {"malloc'd memory", reinterpret_cast<CUdeviceptr>(pageable), "MEMORY_TYPE fails or is host",
         [](const Attributes& a) { return a.not_device(); }},
        {"cuMemAllocManaged memory", managed, "IS_MANAGED 1", [](const Attributes& a) { return a.is_managed(); }},
        {"cuMemAlloc memory", device, "MEMORY_TYPE device, DEVICE_ORDINAL 0",
         [](const Attributes& a) { return a.device() && a.on_device_zero(); }},
        {"a VMM mapping", reserved, "MEMORY_TYPE device", [](const Attributes& a) { return a.device(); }},
    };
    for (const Memory& memory : memories) {
      const Attributes with = Attributes::of(memory.pointer);
      Attributes without{};
      std::thread([&] { without = Attributes::of(memory.pointer); }).join();  // no context current there
      const std::string rule = std::string("pointer attributes of ") + memory.name;
      report.relied(rule + ", context current", memory.expected, with.describe(), memory.holds(with));
      report.fact(rule + ", no context current", without.describe());
    }
  }
  if (made[5] == CUDA_SUCCESS) cuda().cuMemUnmap(reserved, granularity);
  if (made[4] == CUDA_SUCCESS) cuda().cuMemRelease(physical);
  if (made[3] == CUDA_SUCCESS) cuda().cuMemAddressFree(reserved, granularity);
  if (made[1] == CUDA_SUCCESS) cuda().cuMemFree(device);
  if (made[0] == CUDA_SUCCESS) cuda().cuMemFree(managed);
  std::free(pageable);
}

// Rule 5: whether a reader on a non-blocking stream, synchronised with
// nothing else, finds the bytes of a cuMemcpyHtoD from pageable memory
// that returned just before (the driver may return before its DMA is done).
void pageable_copy_rule(Report& report) {
  const std::size_t bytes = 64 * kMiB;
  std::vector<unsigned char> source(bytes, 0xa5), read(bytes, 0);
  CUdeviceptr device = 0;
  CUstream reader = nullptr;
  CUresult result = cuda().cuMemAlloc(&device, bytes);
  if (result == CUDA_SUCCESS) result = cuda().cuStreamCreate(&reader, CU_STREAM_NON_BLOCKING);
  if (result == CUDA_SUCCESS) result = cuda().cuMemsetD8Async(device, 0, bytes, nullptr);
  if (result == CUDA_SUCCESS) result = cuda().cuStreamSynchronize(nullptr);
  if (result == CUDA_SUCCESS) result = cuda().cuMemcpyHtoD(device, source.data(), bytes);
  if (result == CUDA_SUCCESS) result = cuda().cuMemcpyDtoHAsync(read.data(), device, bytes, reader);
  if (result == CUDA_SUCCESS) result = cuda().cuStreamSynchronize(reader);
  const std::string rule =
      "64 MiB cuMemcpyHtoD from pageable memory, then at once cuMemcpyDtoHAsync on a non-blocking stream "
      "synchronised alone";
  if (result != CUDA_SUCCESS) {
    report.relied(rule, "the calls succeed", name_of(result), false);
  } else {
    const auto fresh = static_cast<std::size_t>(std::count(read.begin(), read.end(), 0xa5));
    report.fact(rule, fresh == bytes ? "the reader found all the new bytes"
                                     : "the reader found " + std::to_string(bytes - fresh) + " of " +
                                           std::to_string(bytes) + " bytes old");
  }
  cuda().cuStreamSynchronize(nullptr);  // the copy may still be on its way
  if (reader != nullptr) cuda().cuStreamDestroy(reader);
  if (device != 0) cuda().cuMemFree(device);
}

// Which variant cuGetProcAddress hands out for cuCtxGetDevice at the
// version resurgo asks for (min(driver, <cuda.h>)): from 13000 on the
// documentation's rule gives cuCtxGetDevice_v2, which takes a context too,
// while <cuda.h> declares cuCtxGetDevice without one. Told apart by the
// exported symbols the pointer equals.
void variant_fact(Report& report, void* library, GetProcAddress get_proc_address, int version) {
  void* function = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult result =
      get_proc_address("cuCtxGetDevice", &function, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
  std::string observed = name_of(result) + ", ";
  if (function == nullptr) {
    observed += "no function";
  } else if (function == ::dlsym(library, "cuCtxGetDevice_v2")) {
    observed += "the exported cuCtxGetDevice_v2 (device, context)";
  } else if (function == ::dlsym(library, "cuCtxGetDevice")) {
    observed += "the exported cuCtxGetDevice (device)";
  } else {
    observed += "neither exported symbol";
  }
  report.fact("cuGetProcAddress(\"cuCtxGetDevice\", " + std::to_string(version) + ") hands out", observed,
              version >= 13000 ? "cuCtxGetDevice_v2 (the newest variant at the version)" : "cuCtxGetDevice");
}

}  // namespace

int main() {
  const CudaDriver& driver = cuda();
  if (!driver.available()) {
    std::printf("no usable CUDA driver: %s\n", driver.why_unavailable().c_str());
    return 3;
  }
  // cuDeviceGetCount is not among resurgo's entry points: asked for here.
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  const auto get_proc_address = reinterpret_cast<GetProcAddress>(::dlsym(library, "cuGetProcAddress_v2"));
  const int version = std::min(driver.version(), CUDA_VERSION);
  decltype(&::cuDeviceGetCount) get_count = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get_proc_address == nullptr ||
      get_proc_address("cuDeviceGetCount", reinterpret_cast<void**>(&get_count), version,
                       CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS ||
      get_count == nullptr) {
    std::printf("no usable CUDA driver: libcuda.so.1 does not give cuDeviceGetCount\n");
    return 3;
  }
  int count = 0;
  if (const CUresult result = get_count(&count); result != CUDA_SUCCESS || count < 1) {
    std::printf("no usable CUDA device: cuDeviceGetCount %s, %d devices\n", name_of(result).c_str(), count);
    return 3;
  }
  std::printf("driver: CUDA %d.%d (%d)\ndevices: %d\n", driver.version() / 1000, driver.version() % 1000 / 10,
              driver.version(), count);
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    char name[256] = {};
    if (driver.cuDeviceGet(&device, ordinal) == CUDA_SUCCESS) driver.cuDeviceGetName(name, sizeof name, device);
    std::printf("device %d: %s\n", ordinal, name);
  }
  std::printf("\n");

  CUcontext context = nullptr;
  if (const CUresult result = driver.cuDevicePrimaryCtxRetain(&context, 0); result != CUDA_SUCCESS) {
    std::printf("no usable CUDA device: cuDevicePrimaryCtxRetain %s\n", name_of(result).c_str());
    return 3;
  }
  driver.cuCtxSetCurrent(context);
  Report report;
  registration_rules(report);
  pointer_rules(report);
  pageable_copy_rule(report);
  variant_fact(report, library, get_proc_address, version);
  driver.cuCtxSetCurrent(nullptr);
  driver.cuDevicePrimaryCtxRelease(0);
  report.print();
  return report.failures() == 0 ? 0 : 1;
}
