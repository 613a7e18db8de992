// libFuzzer target: the configuration parser (resurgo/config.hpp).
//
// Each input is (1) a TOML file given to Config::load through a memfd
// (/proc/self/fd/N: there is no string-based entry), (2) a size given to
// parse_size, (3) "key=value" split at the first '=' given to Config::set and
// as an override to Config::load, and (4) the value of every known key.
// Only resurgo::Error (ConfigError) may come out; an accepted configuration
// must hold values in the documented ranges. RESURGO_* environment variables
// are removed at start so that they cannot influence the result. run.sh
// lets inputs reach 1 MiB: nesting that toml++ cannot take (a 50,000-level
// table header is 100 KB) must be refused first (core/toml_depth.h).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"

extern char** environ;

namespace {

int g_fd = -1;
std::string g_path;

const char* const kKeys[] = {
    "buffer.capacity",  "local.path",        "local.keep",          "local.mode",
    "persistent.path",  "persistent.keep",   "persistent.every",    "persistent.mode",
    "pipeline.threads", "pipeline.compress", "pipeline.compress_level", "pipeline.chunk_size",
    "pipeline.shuffle", "log.level",         "trace.path",
};

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "config_fuzzer: %s\n", what.c_str());
  std::abort();
}

// The documented ranges of every key (docs/config.md).
void check(const resurgo::Config& c) {
  if (c.local.keep < 0 || c.local.keep > (1 << 20)) finding("local.keep out of range");
  if (c.persistent.keep < 0 || c.persistent.keep > (1 << 20)) finding("persistent.keep out of range");
  if (c.persistent.every < 0 || c.persistent.every > (1 << 20)) finding("persistent.every out of range");
  for (unsigned mode : {c.local.mode, c.persistent.mode}) {
    if ((mode & 0600) != 0600 || mode > 0777) finding("mode without owner read/write or above 0777");
  }
  if (c.pipeline.threads < 0 || c.pipeline.threads > 64) finding("pipeline.threads out of range");
  if (c.pipeline.compress > resurgo::Codec::kBloscZstd) finding("unknown codec accepted");
  if (c.pipeline.shuffle > resurgo::Shuffle::kBit) finding("unknown shuffle accepted");
  if (c.pipeline.compress_level < 1 || c.pipeline.compress_level > 19) finding("compress_level out of range");
  if (c.pipeline.chunk_size < (64u << 10) || c.pipeline.chunk_size > (1u << 30)) finding("chunk_size out of range");
  if (static_cast<int>(c.log.level) < 0 || static_cast<int>(c.log.level) > 4) finding("unknown log level accepted");
}

template <class F>
void expect_config_error(F&& f) {
  try {
    f();
  } catch (const resurgo::Error&) {
  }
}

void write_memfd(const std::uint8_t* data, std::size_t size) {
  if (::ftruncate(g_fd, 0) != 0) finding("ftruncate of the memfd failed");
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(g_fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) finding("write to the memfd failed");
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::vector<std::string> names;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string assignment(*entry);
    if (assignment.rfind("RESURGO_", 0) == 0) names.push_back(assignment.substr(0, assignment.find('=')));
  }
  for (const std::string& name : names) ::unsetenv(name.c_str());
  g_fd = ::memfd_create("resurgo-config-fuzz", MFD_CLOEXEC);
  if (g_fd < 0) finding("memfd_create failed");
  g_path = "/proc/self/fd/" + std::to_string(g_fd);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    write_memfd(data, size);
    expect_config_error([&] { check(resurgo::Config::load(g_path)); });

    const std::string text(reinterpret_cast<const char*>(data), size);
    expect_config_error([&] { (void)resurgo::parse_size("fuzz.size", text); });

    const std::size_t equals = text.find('=');
    const std::string key = text.substr(0, equals);
    const std::string value = equals == std::string::npos ? std::string() : text.substr(equals + 1);
    expect_config_error([&] {
      resurgo::Config config;
      config.set(key, value);
      check(config);
    });
    expect_config_error([&] { check(resurgo::Config::load("", {{key, value}})); });

    for (const char* known : kKeys) {
      expect_config_error([&] {
        resurgo::Config config;
        config.set(known, text);
        check(config);
      });
    }
  } catch (const std::exception& error) {
    finding(std::string("exception that is not a resurgo::Error: ") + error.what());
  } catch (...) {
    finding("exception of unknown type");
  }
  return 0;
}
