// Store configuration: defaults, then the program's TOML file, then the file
// RESURGO_CONFIG names, then RESURGO_<SECTION>_<KEY> environment variables,
// then explicit overrides. docs/config.md lists every key; unknown keys and
// bad values throw ConfigError naming the key.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace resurgo {

// Chunk codecs; the value is the codec id stored in each chunk record
// (docs/format.md), so values are never reused.
enum class Codec : std::uint8_t { kNone = 0, kLz4 = 1, kZstd = 2, kBloscLz4 = 3, kBloscZstd = 4 };
// Filter the blosc codecs apply before compressing: bytes (or bits) of equal
// significance of consecutive elements are grouped, which makes numeric
// arrays far more compressible.
enum class Shuffle : std::uint8_t { kNone = 0, kByte = 1, kBit = 2 };
enum class CaptureMode : std::uint8_t { kCopy = 0, kFork = 1, kAuto = 2, kDelta = 3 };
// How the delta capture finds the written pages (docs/tracking.md); a
// tracker reports the method it runs, never kAuto.
enum class TrackMethod : std::uint8_t { kAuto = 0, kUffd = 1, kSoftDirty = 2, kMprotect = 3, kHash = 4 };
enum class LogLevel : int { kOff = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };
enum class IntervalPolicy : std::uint8_t { kNone = 0, kSeconds = 1, kOverhead = 2, kYoungDaly = 3 };
enum class PartnerScheme : std::uint8_t { kNone = 0, kPartner = 1, kXor = 2 };
// How an MPI store lays out a version on L4 (docs/mpi.md, "One file per
// version"): a container file per rank, or one file the ranks share.
enum class FileLayout : std::uint8_t { kPerRank = 0, kShared = 1 };
// The L1 host buffer of device regions (docs/gpu_late_pin.md): when it is
// pinned, and how its pages are touched before.
enum class PinPolicy : std::uint8_t {
  kLazy = 0,   // touch every page, then pin (one process of the node at a time)
  kEager = 1,  // populate and pin the whole buffer up front: the traditional way
  kOff = 2,    // touch, never pin
};
enum class TouchSetting : std::uint8_t { kAuto = 0, kConcurrent = 1, kSequential = 2 };
// What stands for the GPU: the CUDA driver, or ordinary host memory (device
// regions are then host memory: tests and the host analog of the benchmarks).
enum class DeviceBackend : std::uint8_t { kCuda = 0, kHost = 1 };

// device.ordinal = "auto": the device the application chose (its current
// context on the opening thread; without L0, the first device region's),
// else the node-local rank modulo the visible devices (docs/gpu.md, "Which
// device").
inline constexpr int kAutoDevice = -1;

// The least staging buffer buffer.capacity = auto gives: a small state
// checkpointed every few milliseconds then has many versions in flight and
// never waits for a disk's fsync (docs/config.md).
inline constexpr std::uint64_t kSmallStateBuffer = std::uint64_t{64} << 20;

struct Config {
  struct Capture {  // how checkpoint() takes the protected bytes
    // copy | fork | auto (per region: copy the write-heavy ones, fork the
    // others; docs/tracking.md) | delta (only the blocks written since the
    // previous version, docs/tracking.md)
    CaptureMode mode = CaptureMode::kCopy;
    // auto: a region whose written share per interval is above this is
    // copied, the others are forked (a fraction in (0, 1]); 0.15: where
    // copy's and fork's costs crossed (bench/results/compression_fork_mixed.md)
    double auto_copy_above = 0.15;
  } capture;
  struct Track {  // dirty tracking of the delta capture
    TrackMethod method = TrackMethod::kAuto;  // auto: uffd where the kernel has it, else hash
    std::uint64_t granularity = 0;    // management block in bytes (a power-of-two number of pages); 0 = auto (tuned); "doubling" in the TOML: Appicpr's rule alone (docs/tracking.md)
  } track;
  struct Delta {
    // A full version every n-th checkpoint: bounds a chain to n - 1 deltas,
    // so restart opens at most n files and eviction frees a chain at once.
    int full_every = 10;
    // Compaction: once a version's chain on L2 or L4 holds more than this
    // many deltas, the version is rewritten there as a full version in the
    // background, so that restart reads one file; 0 = never.
    int compact_after = 0;
    // The share of the wall time a compaction works, in (0, 1]: after each
    // chunk it pauses so that its memory traffic slows the application only
    // that share of the time (docs/tracking.md, "Compaction"); 1 = no pause.
    double compact_share = 0.25;
  } delta;
  struct Buffer {  // L1: bounded host staging buffer
    std::uint64_t capacity = 0;  // bytes; 0 = auto (2x the protected bytes, at least kSmallStateBuffer, at most 1/4 of physical memory)
    // Device regions' buffer only: lazy | eager | off, and auto (the
    // performance model) | concurrent | sequential.
    PinPolicy pin = PinPolicy::kLazy;
    TouchSetting touch = TouchSetting::kAuto;
    // Where the node-local token that lets one process pin at a time lives
    // (in a directory resurgo-<euid> of it); "" = no token.
    std::string pin_token_dir = "/dev/shm";
    // Seconds the eager pin waits for the token (inside a checkpoint) before
    // the copies go on into unpinned memory.
    double pin_token_timeout = 10;
  } buffer;
  struct Device {  // L0: device cache of the device regions (docs/gpu.md)
    std::uint64_t capacity = 0;               // bytes of device memory per store; 0 = no L0
    std::uint64_t chunk = std::uint64_t{1} << 30;  // mapped at a time, in the background
    DeviceBackend backend = DeviceBackend::kCuda;
    // The device a store uses (docs/gpu.md, "Which device"): an ordinal
    // among the visible devices (after CUDA_VISIBLE_DEVICES), or kAutoDevice.
    int ordinal = kAutoDevice;
  } device;
  struct Memory {  // L1 memory level: whole versions kept in process memory (docs/adjoint.md)
    int every = 0;              // every n-th checkpoint is kept in memory; 0 = none
    int keep = 2;               // versions kept; 0 = all that fit
    std::uint64_t capacity = 0; // bytes; 0 = auto (a quarter of physical memory); also bounds prefetch
  } memory;
  struct Local {  // L2: node-local directory
    // "" = $XDG_RUNTIME_DIR/resurgo (else $TMPDIR/resurgo-<uid>, or
    // /tmp/resurgo-<uid>), then a folder per working directory; "{node}" in
    // it is replaced by the rank's node number (MPI stores, docs/mpi.md)
    std::string path;
    int keep = 2;      // versions kept; 0 = all
    int every = 1;     // every n-th checkpoint goes to L2; 0 = never
    unsigned mode = 0600;  // group and others may read at most
    // true: the directory may be shared with its group (writable by the
    // group; files of other members read); false: yours alone
    bool shared_group = false;
    // false: the files are scratch (a staging area, such as the adjoint's
    // DISK store): each version is written and renamed but neither the file
    // nor the directory is synced. A version then survives the process's
    // crash, not the node's (docs/config.md).
    bool durable = true;
  } local;
  struct Persistent {  // L4: shared / parallel file system directory
    std::string path = "checkpoints";
    int keep = 2;    // versions kept; 0 = all
    int every = 10;  // every n-th checkpoint goes to L4 (SCR's default flush period); 0 = never
    unsigned mode = 0600;
    bool shared_group = false;  // as local.shared_group
    // per-rank | shared: one file per version for the whole job (MPI stores;
    // a store without a communicator writes one file per version anyway)
    FileLayout layout = FileLayout::kPerRank;
  } persistent;
  struct Pipeline {
    int threads = 0;  // 0 = auto: min(2, cores)
    Codec compress = Codec::kNone;
    int compress_level = 1;
    Shuffle shuffle = Shuffle::kByte;  // used by the blosc codecs only
    std::uint64_t chunk_size = 4u << 20;
  } pipeline;
  struct Interval {  // Store::need_checkpoint() (docs/interval.md)
    // none | seconds | overhead | young-daly
    IntervalPolicy policy = IntervalPolicy::kNone;
    double seconds = 0;          // policy seconds: the interval
    double max_overhead = 0.05;  // policy overhead: checkpoint cost / interval, at most
    double mtbf = 86400;         // policy young-daly: mean time between failures, seconds
  } interval;
  struct Partner {  // L3 of MPI stores: each version of L2 protected on other nodes (docs/mpi.md)
    // none | partner (a copy on the next node: 2x the L2 bytes) | xor (a
    // parity per set of set_size ranks on different nodes: set_size/(set_size-1)x)
    PartnerScheme scheme = PartnerScheme::kNone;
    int set_size = 8;
  } partner;
  struct Mpi {  // stores of MPI jobs (docs/mpi.md)
    // seconds the ranks wait for each other at checkpoint() before every
    // rank that came fails, naming the ranks that did not
    double timeout = 300;
    // > 0: fake nodes of this many consecutive ranks (node = rank / n), so
    // that a job on one machine runs as several nodes (tests, benchmarks);
    // 0: the nodes MPI reports (MPI_Comm_split_type)
    int ranks_per_node = 0;
  } mpi;
  struct Restart {
    // true: restart also reads versions written by another store (another
    // identity: files copied from someone else's run); false: refused
    bool accept_foreign = false;
  } restart;
  struct Log {
    LogLevel level = LogLevel::kWarn;
  } log;
  struct Trace {
    std::string path;  // "" = no trace; else Chrome/Perfetto JSON written at close
  } trace;

  // Builds a configuration: defaults <- `toml_path` (if non-empty) <- the
  // file RESURGO_CONFIG names <- RESURGO_<SECTION>_<KEY> variables <-
  // overrides. Override keys are "section.key" (e.g. "local.path").
  static Config load(const std::string& toml_path = "",
                     const std::map<std::string, std::string>& overrides = {});

  // Sets one key ("section.key") from its textual value.
  void set(const std::string& key, const std::string& value);

  // Directory L2 uses when local.path is empty (see Local::path).
  static std::string default_local_path();
};

// "512MiB", "4 GiB", "1.5GB", "4096" -> bytes. Throws ConfigError naming `key`.
std::uint64_t parse_size(const std::string& key, const std::string& text);

// The configuration's word for a value ("copy", "soft-dirty", "blosc-lz4"),
// from the table that Config::set parses it with (docs/config.md lists them).
const char* to_string(CaptureMode mode);
const char* to_string(TrackMethod method);
const char* to_string(PinPolicy policy);
const char* to_string(TouchSetting setting);
const char* to_string(DeviceBackend backend);
const char* to_string(IntervalPolicy policy);
const char* to_string(PartnerScheme scheme);
const char* to_string(FileLayout layout);
const char* to_string(Codec codec);
const char* to_string(Shuffle shuffle);
const char* to_string(LogLevel level);

}  // namespace resurgo
