// The victim of the security campaign (campaign.py, docs/reliability.md,
// "Security"): an application that opens a store the way a user's job does,
// protects one array whose every value encodes the run's marker and the
// version, checkpoints, and in "restart" mode says whose data came back.
// The driver runs it as the victim, as root, and as the attacker (to make
// the well-formed versions an attacker plants); "forge" writes the hostile
// containers no honest run would write.
//
// Output: one JSON line on stdout. Exit codes (the driver's verdicts rest
// on them):
//   0  checkpointed (or printed)       10 restored its own data
//   11 restored foreign data           12 nothing to restore (starts fresh)
//   20 refused with a Resurgo error    21 another exception
//   22 out of memory (std::bad_alloc)  2  usage
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "format/container.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"

namespace {

enum Exit : int {
  kCheckpointed = 0,
  kUsage = 2,
  kRestoredOwn = 10,
  kRestoredForeign = 11,
  kNothingToRestore = 12,
  kRefused = 20,
  kOtherException = 21,
  kOutOfMemory = 22,
};

constexpr char kRegionLabel[] = "field";
constexpr char kRegionType[] = "uint64";

struct Options {
  std::string mode;
  std::string name = "victim";
  std::string dir;
  std::string config;
  std::map<std::string, std::string> overrides;
  std::uint64_t marker = 1;
  int first = 1;
  int versions = 3;
  double hold_seconds = 0;
  bool device = false;
  int then_checkpoint = 0;
  std::size_t elements = 8192;
  std::string forge_kind;
  std::string out;
};

// ------------------------------------------------------------------ output

std::string json_escape(const std::string& text) {
  std::string escaped;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", byte);
      escaped += code;
    } else {
      escaped += c;
    }
  }
  return escaped;
}

// Fields of the one JSON line, in insertion order.
class Report {
 public:
  void text(const std::string& key, const std::string& value) { add(key, "\"" + json_escape(value) + "\""); }
  void number(const std::string& key, long long value) { add(key, std::to_string(value)); }
  int print(int exit_code) {
    number("exit", exit_code);
    std::cout << "{" << fields_ << "}" << std::endl;
    return exit_code;
  }

 private:
  void add(const std::string& key, const std::string& value) {
    if (!fields_.empty()) fields_ += ", ";
    fields_ += "\"" + key + "\": " + value;
  }
  std::string fields_;
};

// Peak virtual memory, for the driver's RLIMIT_AS baseline.
long long vm_peak_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmPeak:", 0) == 0) return std::atoll(line.c_str() + 7);
  }
  return -1;
}

// ------------------------------------------------------------------- data

// Every value depends on the marker, the version and its index, so a
// restore that mixed two runs' data, or stopped half way, is seen.
std::uint64_t mixed(std::uint64_t marker, std::uint64_t version, std::uint64_t index) {
  std::uint64_t x = marker * 0x9E3779B97F4A7C15ull ^ (version << 24) ^ index;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void fill(std::vector<std::uint64_t>& field, std::uint64_t marker, int version) {
  field[0] = marker;
  field[1] = static_cast<std::uint64_t>(version);
  for (std::size_t i = 2; i < field.size(); ++i) field[i] = mixed(marker, static_cast<std::uint64_t>(version), i);
}

// Whether `field` is exactly what fill(marker, version) writes.
bool holds_pattern(const std::vector<std::uint64_t>& field, std::uint64_t marker, int version) {
  if (field[0] != marker || field[1] != static_cast<std::uint64_t>(version)) return false;
  for (std::size_t i = 2; i < field.size(); ++i) {
    if (field[i] != mixed(marker, static_cast<std::uint64_t>(version), i)) return false;
  }
  return true;
}

// ------------------------------------------------------------------ store

resurgo::Config config_of(const Options& options) {
  return resurgo::Config::load(options.config, options.overrides);
}

void protect_field(resurgo::Store& store, const Options& options, std::vector<std::uint64_t>& field) {
  const resurgo::ElementType type{kRegionType, {static_cast<std::int64_t>(field.size())}};
  const std::size_t bytes = field.size() * sizeof field[0];
  // device.backend = "host": host memory stands for device memory, so the
  // device path (and its pin token) runs without a GPU.
  if (options.device) {
    store.protect_device(0, field.data(), bytes, kRegionLabel, type);
  } else {
    store.protect(0, field.data(), bytes, kRegionLabel, type);
  }
}

void wait_durable(resurgo::Store& store) {
  store.wait(resurgo::kAllVersions, resurgo::kL2);
  if (store.config().persistent.every == 1) store.wait(resurgo::kAllVersions, resurgo::kL4);
}

void checkpoint_range(resurgo::Store& store, std::vector<std::uint64_t>& field, std::uint64_t marker, int first,
                      int count) {
  for (int i = 0; i < count; ++i) {
    const int version = first + i;
    fill(field, marker, version);
    store.checkpoint(version);
    wait_durable(store);
  }
}

int run_checkpoint(const Options& options, Report& report) {
  std::vector<std::uint64_t> field(options.elements);
  resurgo::Store store(options.name, config_of(options));
  protect_field(store, options, field);
  checkpoint_range(store, field, options.marker, options.first, options.versions);
  report.number("first", options.first);
  report.number("last", options.first + options.versions - 1);
  if (options.hold_seconds > 0) {
    // The driver starts a rival once it reads this line.
    std::cerr << "holding" << std::endl;
    std::this_thread::sleep_for(std::chrono::duration<double>(options.hold_seconds));
  }
  store.close();
  report.text("outcome", "checkpointed");
  return kCheckpointed;
}

// The versions after a restart: "" when they were taken, else the error.
std::string checkpoint_after_restart(resurgo::Store& store, std::vector<std::uint64_t>& field,
                                     const Options& options, int restored) {
  try {
    checkpoint_range(store, field, options.marker, restored + 1, options.then_checkpoint);
    return "";
  } catch (const resurgo::Error& error) {
    return error.what();
  }
}

int run_restart(const Options& options, Report& report) {
  std::vector<std::uint64_t> field(options.elements, 0);
  resurgo::Store store(options.name, config_of(options));
  protect_field(store, options, field);
  int version = -1;
  try {
    version = store.restart();
  } catch (const resurgo::NotFoundError& error) {
    report.text("outcome", "nothing to restore");
    report.text("error", error.what());
    report.number("vm_peak_kib", vm_peak_kib());
    return kNothingToRestore;
  }
  const bool own = holds_pattern(field, options.marker, version);
  report.text("outcome", own ? "restored own data" : "restored foreign data");
  report.number("version", version);
  report.text("marker_found", std::to_string(field[0]));
  report.number("vm_peak_kib", vm_peak_kib());
  if (options.then_checkpoint > 0) {
    const std::string error = checkpoint_after_restart(store, field, options, version);
    report.text("then", error.empty() ? "checkpointed" : "refused");
    if (!error.empty()) report.text("then_error", error);
  }
  store.close();
  return own ? kRestoredOwn : kRestoredForeign;
}

int run_default_path(Report& report) {
  report.text("path", resurgo::Config::default_local_path());
  report.text("outcome", "printed");
  return kCheckpointed;
}

// ------------------------------------------------------------------ forge

class FdFile final : public resurgo::WritableFile {
 public:
  explicit FdFile(const std::string& path)
      : path_(path), fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) {
    if (fd_ < 0) throw resurgo::StorageError("forge: cannot create '" + path + "': " + std::strerror(errno));
  }
  ~FdFile() override { close(); }
  void append(const void* data, std::size_t bytes) override {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t written = ::write(fd_, p, bytes);
      if (written <= 0) throw resurgo::StorageError("forge: cannot write '" + path_ + "'");
      p += written;
      bytes -= static_cast<std::size_t>(written);
    }
  }
  void sync() override {}
  void close() override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
};

// A zstd frame whose header announces `content_bytes` zeros, made of RLE
// blocks (4 bytes per 128 KiB): a few KiB that claim a GiB.
std::vector<std::byte> zero_frame(std::uint64_t content_bytes) {
  std::vector<std::byte> frame;
  const auto put = [&](std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) frame.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
  };
  put(0xFD2FB528u, 4);  // magic
  put(0xE0, 1);         // 8-byte content size, single segment
  put(content_bytes, 8);
  constexpr std::uint64_t kBlock = 128u << 10;
  for (std::uint64_t left = content_bytes; left > 0;) {
    const std::uint64_t size = std::min(left, kBlock);
    left -= size;
    const std::uint64_t last = left == 0 ? 1 : 0;
    put(last | (1u << 1) | (size << 3), 3);  // RLE block of `size` bytes
    put(0, 1);                               // the repeated byte
  }
  return frame;
}

resurgo::format::Header forged_header(const Options& options, std::uint64_t region_bytes) {
  resurgo::format::Header header;
  header.store = options.name;
  header.store_id = resurgo::format::StoreId::random();
  header.version = options.first;
  header.chunk_size = resurgo::format::kMaxChunkBytes;
  header.regions.push_back({0, kRegionLabel, resurgo::format::RegionKind::kHost, region_bytes, kRegionType,
                            {static_cast<std::int64_t>(region_bytes / 8)}});
  return header;
}

// A well-formed container (header and index checksums right) of one zstd
// chunk whose record claims `raw_bytes` for a frame announcing `frame_bytes`,
// in a region of `region_bytes`.
void forge(const Options& options, std::uint64_t region_bytes, std::uint64_t raw_bytes, std::uint64_t frame_bytes) {
  const std::vector<std::byte> frame = zero_frame(frame_bytes);
  FdFile file(options.out);
  resurgo::format::ContainerWriter writer(file, forged_header(options, region_bytes));
  resurgo::format::ChunkRecord record;
  record.raw_length = raw_bytes;
  record.stored_length = frame.size();
  record.codec = resurgo::Codec::kZstd;
  record.checksum = resurgo::checksum(frame.data(), frame.size());
  writer.add_chunk(record, frame.data());
  writer.finish();
  file.close();
}

int run_forge(const Options& options, Report& report) {
  constexpr std::uint64_t kGiB = 1ull << 30;
  const std::uint64_t field_bytes = options.elements * 8;
  if (options.forge_kind == "chunk-raw-1gib") {
    forge(options, field_bytes, kGiB, kGiB);  // the record claims a GiB in a small region
  } else if (options.forge_kind == "frame-1gib") {
    forge(options, field_bytes, field_bytes, kGiB);  // right record, the frame claims a GiB
  } else if (options.forge_kind == "region-1gib") {
    forge(options, kGiB, kGiB, kGiB);  // a 1 GiB region in one 1 GiB chunk
  } else {
    std::cerr << "unknown forge kind '" << options.forge_kind << "'\n";
    return kUsage;
  }
  report.text("outcome", "forged");
  report.text("path", options.out);
  return kCheckpointed;
}

// ------------------------------------------------------------------ main

const char kUsageText[] =
    "usage: security_victim checkpoint|restart|default-path|forge [--name NAME] [--dir DIR]\n"
    "         [--config FILE] [--set KEY=VALUE]... [--marker N] [--first V] [--versions N]\n"
    "         [--hold SECONDS] [--device] [--then-checkpoint N] [--elements N]\n"
    "         [--kind chunk-raw-1gib|frame-1gib|region-1gib --out FILE]   (forge)\n";

bool parse(int argc, char** argv, Options& options) {
  if (argc < 2) return false;
  options.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--device") {
      options.device = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (flag == "--name") options.name = value;
    else if (flag == "--dir") options.dir = value;
    else if (flag == "--config") options.config = value;
    else if (flag == "--marker") options.marker = std::stoull(value);
    else if (flag == "--first") options.first = std::stoi(value);
    else if (flag == "--versions") options.versions = std::stoi(value);
    else if (flag == "--hold") options.hold_seconds = std::stod(value);
    else if (flag == "--then-checkpoint") options.then_checkpoint = std::stoi(value);
    else if (flag == "--elements") options.elements = std::stoul(value);
    else if (flag == "--kind") options.forge_kind = value;
    else if (flag == "--out") options.out = value;
    else if (flag == "--set") {
      const auto equals = value.find('=');
      if (equals == std::string::npos) return false;
      options.overrides[value.substr(0, equals)] = value.substr(equals + 1);
    } else {
      return false;
    }
  }
  return options.elements >= 2;
}

int dispatch(const Options& options, Report& report) {
  if (!options.dir.empty() && ::chdir(options.dir.c_str()) != 0) {
    throw resurgo::StorageError("cannot enter '" + options.dir + "': " + std::strerror(errno));
  }
  if (options.mode == "checkpoint") return run_checkpoint(options, report);
  if (options.mode == "restart") return run_restart(options, report);
  if (options.mode == "default-path") return run_default_path(report);
  if (options.mode == "forge") return run_forge(options, report);
  std::cerr << kUsageText;
  return kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    if (!parse(argc, argv, options)) {
      std::cerr << kUsageText;
      return kUsage;
    }
  } catch (const std::exception&) {
    std::cerr << kUsageText;
    return kUsage;
  }
  Report report;
  report.text("mode", options.mode);
  report.number("uid", static_cast<long long>(::geteuid()));
  try {
    return report.print(dispatch(options, report));
  } catch (const resurgo::Error& error) {
    report.text("outcome", "refused");
    report.text("error", error.what());
    report.number("vm_peak_kib", vm_peak_kib());
    return report.print(kRefused);
  } catch (const std::bad_alloc&) {
    report.text("outcome", "out of memory");
    return report.print(kOutOfMemory);
  } catch (const std::exception& error) {
    report.text("outcome", "other exception");
    report.text("error", error.what());
    return report.print(kOtherException);
  }
}
