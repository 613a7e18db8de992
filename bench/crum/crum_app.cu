// CRUM's evaluation application (bench/crum.py; issue 29 part 6): a
// unified-memory program, a 3-D 7-point Jacobi smoother over two managed
// arrays, run for a fixed wall time and checkpointed through the Resurgo C
// API every --interval seconds. It prints one JSON line: its step times,
// what each checkpoint cost, the bare device-to-host copy of the state (the
// floor managed capture is set against) and the restart of the last
// version, verified against a checksum of the state it holds.
//
// One source, two builds, so that the loop the figures come from is the
// same code:
//   nvcc  (bench/crum.py on a GPU machine): cudaMallocManaged, the sweep a
//         kernel, cudaDeviceSynchronize after each step;
//   c++ -x c++ (the host analog, for CI): the driver API loaded at run time
//         from libcuda.so.1, which the script points at the test fake
//         (tests/cpp/fake_cuda), so managed memory is host memory the fake
//         knows and the sweep runs on the CPU. Its timings are no GPU figures.
//
//   crum_app --mib 1024 --seconds 4 --interval 1 --config store.toml --store crum [--sync] [--restart]
//   crum_app --probe        prints the device's name, exits 1 without a usable one
#include <resurgo/resurgo.h>

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define CRUM_HD __host__ __device__
#else
#include <dlfcn.h>
#define CRUM_HD
#endif

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "crum_app: %s\n", what.c_str());
  std::exit(1);
}

// The JSON line, printed once at the end: a forked checkpoint's child must
// find no output of the parent's buffered in stdio to print again.
std::string report;

void emit(const char* format, ...) {
  char piece[512];
  va_list args;
  va_start(args, format);
  const int length = std::vsnprintf(piece, sizeof piece, format, args);
  va_end(args);
  if (length < 0 || static_cast<std::size_t>(length) >= sizeof piece) die("report piece too long");
  report += piece;
}

// ------------------------------------------------------------ the stencil
// Shared by the kernel and the host loop: a hot cube in the middle of a cold
// domain (so the state compresses at first and less as the heat spreads),
// and one Jacobi point update with fixed boundaries.
CRUM_HD float initial_value(std::size_t x, std::size_t y, std::size_t z, std::size_t n) {
  const std::size_t low = 3 * n / 8, high = 5 * n / 8;
  return (x >= low && x < high && y >= low && y < high && z >= low && z < high) ? 1.0f : 0.0f;
}

CRUM_HD float smoothed(const float* u, std::size_t x, std::size_t y, std::size_t z, std::size_t n) {
  const std::size_t i = (z * n + y) * n + x;
  if (x == 0 || y == 0 || z == 0 || x + 1 == n || y + 1 == n || z + 1 == n) return u[i];
  const std::size_t plane = n * n;
  return (u[i] + u[i - 1] + u[i + 1] + u[i - n] + u[i + n] + u[i - plane] + u[i + plane]) * (1.0f / 7.0f);
}

// ------------------------------------------------------------ the two builds
#ifdef __CUDACC__
void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) die(std::string(call) + ": " + cudaGetErrorString(status));
}

__global__ void init_kernel(float* u, std::size_t n) {
  const std::size_t x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < n && y < n) u[(blockIdx.z * n + y) * n + x] = initial_value(x, y, blockIdx.z, n);
}

__global__ void sweep_kernel(const float* u, float* v, std::size_t n) {
  const std::size_t x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < n && y < n) v[(blockIdx.z * n + y) * n + x] = smoothed(u, x, y, blockIdx.z, n);
}

// The CUDA runtime on a GPU: the arrays are made and first touched by
// kernels, so their pages start on the device, as a UVM code's do.
struct Gpu {
  std::string name() {
    int count = 0;
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    return std::string("cuda: ") + prop.name;
  }
  float* alloc_managed(std::size_t bytes) {
    void* p = nullptr;
    check(cudaMallocManaged(&p, bytes), "cudaMallocManaged");
    return static_cast<float*>(p);
  }
  void free_managed(float* p) { check(cudaFree(p), "cudaFree"); }
  dim3 grid(std::size_t n) { return dim3(unsigned((n + 31) / 32), unsigned((n + 7) / 8), unsigned(n)); }
  void init(float* u, std::size_t n) {
    init_kernel<<<grid(n), dim3(32, 8)>>>(u, n);
    synchronize();
  }
  void sweep(const float* u, float* v, std::size_t n) {
    sweep_kernel<<<grid(n), dim3(32, 8)>>>(u, v, n);
    synchronize();
  }
  void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
  void zero(float* p, std::size_t bytes) {
    check(cudaMemset(p, 0, bytes), "cudaMemset");
    synchronize();
  }
  // The floor: a bare device-to-host copy into pinned memory, as the DMA
  // engine moves it with nothing around it.
  void* alloc_host(std::size_t bytes) {
    void* p = nullptr;
    check(cudaMallocHost(&p, bytes), "cudaMallocHost");
    return p;
  }
  void free_host(void* p) { check(cudaFreeHost(p), "cudaFreeHost"); }
  void to_host(void* dst, const float* src, std::size_t bytes) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
};
#else
// The driver API, resolved from libcuda.so.1 (the test fake in the host
// analog) as resurgo resolves it: cuGetProcAddress_v2 at CUDA 12.0, whose
// cuCtxSynchronize takes no context.
struct Gpu {
  using Result = int;
  using DevicePtr = unsigned long long;
  using Context = void*;
  template <typename F>
  F entry(const char* symbol) {
    using GetProcAddress = Result (*)(const char*, void**, int, unsigned long long, int*);
    static void* library = ::dlopen("libcuda.so.1", RTLD_NOW);
    if (library == nullptr) die(std::string("libcuda.so.1: ") + ::dlerror());
    static auto get = reinterpret_cast<GetProcAddress>(::dlsym(library, "cuGetProcAddress_v2"));
    void* fn = nullptr;
    int found = 0;
    if (get == nullptr || get(symbol, &fn, 12000, 0, &found) != 0 || fn == nullptr)
      die(std::string("libcuda.so.1 has no ") + symbol);
    return reinterpret_cast<F>(fn);
  }
  void check(Result status, const char* call) {
    if (status != 0) die(std::string(call) + ": CUresult " + std::to_string(status));
  }
  Gpu() {
    check(entry<Result (*)(unsigned)>("cuInit")(0), "cuInit");
    int device = 0;
    check(entry<Result (*)(int*, int)>("cuDeviceGet")(&device, 0), "cuDeviceGet");
    Context context = nullptr;
    check(entry<Result (*)(Context*, int)>("cuDevicePrimaryCtxRetain")(&context, device), "cuDevicePrimaryCtxRetain");
    check(entry<Result (*)(Context)>("cuCtxSetCurrent")(context), "cuCtxSetCurrent");
  }
  std::string name() {
    char name[256] = {};
    check(entry<Result (*)(char*, int, int)>("cuDeviceGetName")(name, sizeof name, 0), "cuDeviceGetName");
    return std::string("host analog: ") + name;
  }
  float* alloc_managed(std::size_t bytes) {
    DevicePtr p = 0;
    check(entry<Result (*)(DevicePtr*, std::size_t, unsigned)>("cuMemAllocManaged")(&p, bytes, 1), "cuMemAllocManaged");
    return reinterpret_cast<float*>(p);
  }
  void free_managed(float* p) { check(entry<Result (*)(DevicePtr)>("cuMemFree")(DevicePtr(p)), "cuMemFree"); }
  void init(float* u, std::size_t n) {
    for (std::size_t z = 0; z < n; ++z)
      for (std::size_t y = 0; y < n; ++y)
        for (std::size_t x = 0; x < n; ++x) u[(z * n + y) * n + x] = initial_value(x, y, z, n);
  }
  void sweep(const float* u, float* v, std::size_t n) {
    for (std::size_t z = 0; z < n; ++z)
      for (std::size_t y = 0; y < n; ++y)
        for (std::size_t x = 0; x < n; ++x) v[(z * n + y) * n + x] = smoothed(u, x, y, z, n);
  }
  void synchronize() { check(entry<Result (*)()>("cuCtxSynchronize")(), "cuCtxSynchronize"); }
  void zero(float* p, std::size_t bytes) { std::memset(p, 0, bytes); }
  void* alloc_host(std::size_t bytes) { return std::malloc(bytes); }
  void free_host(void* p) { std::free(p); }
  void to_host(void* dst, const float* src, std::size_t bytes) {
    check(entry<Result (*)(void*, DevicePtr, std::size_t)>("cuMemcpyDtoH")(dst, DevicePtr(src), bytes), "cuMemcpyDtoH");
  }
};
#endif

// ------------------------------------------------------------ the run
struct Options {
  std::size_t mib = 16;
  double seconds = 1.0;
  double interval = 0.25;  // 0: no checkpoints
  const char* config = nullptr;
  const char* store = "crum";
  bool sync = false;     // wait until the version is durable at L2 before going on
  bool restart = false;  // checkpoint at the end, then restart it in a new store
  bool probe = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--sync") o.sync = true;
    else if (a == "--restart") o.restart = true;
    else if (a == "--probe") o.probe = true;
    else if (value == nullptr) die("bad or incomplete option " + a);
    else if (a == "--mib") o.mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seconds") o.seconds = std::atof(argv[++i]);
    else if (a == "--interval") o.interval = std::atof(argv[++i]);
    else if (a == "--config") o.config = argv[++i];
    else if (a == "--store") o.store = argv[++i];
    else die("unknown option " + a);
  }
  if (o.mib == 0) die("--mib must be at least 1");
  return o;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) out += ' ';
    else out += c;
  }
  return out + "\"";
}

// A failed Resurgo call ends the run with its message in the JSON line (exit
// status 3): the script reports it as that row's result (fork mode refusing
// managed regions, say) instead of a crash.
void require(int status, const char* call) {
  if (status == RSG_OK) return;
  std::printf("{\"error\": %s}\n", json_string(std::string(call) + ": " + rsg_last_error()).c_str());
  std::fflush(stdout);
  std::exit(3);
}

// The two arrays as allocated (what the store protects, by fixed ids) and as
// the steps use them (u the current values, v the next; swapped each step).
struct State {
  Gpu& gpu;
  std::size_t n;
  float* first;
  float* second;
  float* u;
  float* v;
  std::size_t array_bytes() const { return n * n * n * sizeof(float); }
};

rsg_store* open_store(const Options& o, State& s) {
  rsg_store* store = nullptr;
  require(rsg_open(o.config, o.store, &store), "rsg_open");
  require(rsg_protect_managed(store, 0, s.first, s.array_bytes(), "first"), "rsg_protect_managed");
  require(rsg_protect_managed(store, 1, s.second, s.array_bytes(), "second"), "rsg_protect_managed");
  return store;
}

// The state's bytes through a host copy (never host loads of managed memory,
// which would migrate it): a 64-bit mix of its words.
std::uint64_t checksum(State& s, void* host) {
  std::uint64_t h = 1469598103934665603ull;
  for (const float* array : {s.first, s.second}) {
    s.gpu.to_host(host, array, s.array_bytes());
    const auto* words = static_cast<const std::uint64_t*>(host);
    for (std::size_t i = 0; i < s.array_bytes() / 8; ++i) h = (h ^ words[i]) * 1099511628211ull;
  }
  return h;
}

struct Checkpoint {
  int version;
  double start, call;  // seconds from the run's start; seconds blocked (with --sync: checkpoint + wait)
};

void print_checkpoints(rsg_store* store, const std::vector<Checkpoint>& taken) {
  emit("\"checkpoints\": [");
  for (std::size_t i = 0; i < taken.size(); ++i) {
    rsg_version_stats st{};
    const bool known = rsg_stats(store, taken[i].version, &st) == RSG_OK;
    emit("%s{\"version\": %d, \"start\": %.6f, \"blocked\": %.6f", i ? ", " : "", taken[i].version,
                taken[i].start, taken[i].call);
    if (known)
      emit(", \"capture\": %s, \"device_path\": %s, \"device_bytes\": %llu, \"blocking\": %.6f, "
                  "\"copy\": %.6f, \"backpressure\": %.6f, \"first_touch\": %.6f, \"to_l2\": %.6f, "
                  "\"stored_l2\": %lld",
                  json_string(st.capture).c_str(), json_string(st.device_path).c_str(), st.device_bytes,
                  st.blocking_seconds, st.copy_seconds, st.backpressure_seconds, st.first_touch_seconds,
                  st.seconds_to_level[RSG_L2], st.stored_bytes[RSG_L2]);
    emit("}");
  }
  emit("], ");
}

// Steps for o.seconds, checkpointing every o.interval seconds of stepping;
// prints the steps and checkpoints. Returns the store, still open.
rsg_store* run_steps(const Options& o, State& s) {
  rsg_store* store = o.interval > 0 ? open_store(o, s) : nullptr;
  std::vector<double> starts, times;
  std::vector<Checkpoint> taken;
  const auto begin = Clock::now();
  double last = 0;
  while (seconds_since(begin) < o.seconds) {
    const double start = seconds_since(begin);
    s.gpu.sweep(s.u, s.v, s.n);
    std::swap(s.u, s.v);
    starts.push_back(start);
    times.push_back(seconds_since(begin) - start);
    if (store == nullptr || seconds_since(begin) - last < o.interval) continue;
    const int version = static_cast<int>(taken.size()) + 1;
    const double at = seconds_since(begin);
    require(rsg_checkpoint(store, version), "rsg_checkpoint");
    if (o.sync) require(rsg_wait(store, version, RSG_L2), "rsg_wait");
    taken.push_back({version, at, seconds_since(begin) - at});
    last = seconds_since(begin);
  }
  const double total = seconds_since(begin);
  if (store != nullptr) require(rsg_wait(store, RSG_ALL, RSG_L2), "rsg_wait");
  emit("\"total_seconds\": %.6f, \"step_start\": [", total);
  for (std::size_t i = 0; i < starts.size(); ++i) emit("%s%.6f", i ? ", " : "", starts[i]);
  emit("], \"step_seconds\": [");
  for (std::size_t i = 0; i < times.size(); ++i) emit("%s%.6f", i ? ", " : "", times[i]);
  emit("], ");
  if (store != nullptr) print_checkpoints(store, taken);
  return store;
}

// One more checkpoint, durable at L2; the state wiped; a new store (as a
// restarted process opens it) restores it, timed; the checksum compared.
void restart_check(const Options& o, State& s, rsg_store* store, void* host) {
  const int version = 1000000;
  require(rsg_checkpoint(store, version), "rsg_checkpoint");
  require(rsg_wait(store, version, RSG_L2), "rsg_wait");
  require(rsg_close(store), "rsg_close");
  const std::uint64_t expected = checksum(s, host);
  s.gpu.zero(s.first, s.array_bytes());
  s.gpu.zero(s.second, s.array_bytes());
  rsg_store* reopened = open_store(o, s);
  const auto begin = Clock::now();
  int restored = -1;
  require(rsg_restart(reopened, RSG_LATEST, &restored), "rsg_restart");
  s.gpu.synchronize();
  const double seconds = seconds_since(begin);
  require(rsg_close(reopened), "rsg_close");
  emit("\"restart_seconds\": %.6f, \"restart_version\": %d, \"restart_verified\": %s, ", seconds, restored,
              restored == version && checksum(s, host) == expected ? "true" : "false");
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Gpu gpu;
  const std::string device = gpu.name();
  if (o.probe) {
    std::printf("%s\n", device.c_str());
    return 0;
  }
  // Two arrays of n^3 floats make the state: the largest n that fits (cbrt
  // may land a hair below an exact cube).
  const std::size_t floats = (o.mib << 20) / 2 / sizeof(float);
  auto n = static_cast<std::size_t>(std::cbrt(double(floats)));
  while ((n + 1) * (n + 1) * (n + 1) <= floats) ++n;
  State s{gpu, n, nullptr, nullptr, nullptr, nullptr};
  s.u = s.first = gpu.alloc_managed(s.array_bytes());
  s.v = s.second = gpu.alloc_managed(s.array_bytes());
  gpu.init(s.u, n);
  gpu.init(s.v, n);
  void* host = gpu.alloc_host(s.array_bytes());
  gpu.to_host(host, s.u, s.array_bytes());  // warm-up: the first copy maps the pinned pages
  const auto floor_begin = Clock::now();
  gpu.to_host(host, s.u, s.array_bytes());
  gpu.to_host(host, s.v, s.array_bytes());
  const double floor = seconds_since(floor_begin);
  emit("{\"device\": %s, \"n\": %zu, \"bytes\": %zu, \"d2h_floor_seconds\": %.6f, ", json_string(device).c_str(),
              n, 2 * s.array_bytes(), floor);
  rsg_store* store = run_steps(o, s);
  if (store != nullptr && o.restart) restart_check(o, s, store, host);
  else if (store != nullptr) require(rsg_close(store), "rsg_close");
  std::printf("%s\"error\": null}\n", report.c_str());
  gpu.free_host(host);
  gpu.free_managed(s.first);
  gpu.free_managed(s.second);
  return 0;
}
