#include "resurgo/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string_view>
#include <toml++/toml.h>

#include "resurgo/errors.hpp"

extern char** environ;

namespace resurgo {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

long long parse_integer(const std::string& key, const std::string& text, long long min,
                        long long max) {
  const std::string t = trim(text);
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(t, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || value < min || value > max) {
    throw ConfigError("configuration key '" + key + "': '" + text + "' is not an integer in [" +
                      std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

unsigned parse_mode(const std::string& key, const std::string& text) {
  std::string t = lower(trim(text));
  if (t.rfind("0o", 0) == 0) t = t.substr(2);
  const bool octal = !t.empty() && t.size() <= 4 &&
                     std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '7'; });
  const unsigned mode = octal ? static_cast<unsigned>(std::stoul(t, nullptr, 8)) : 0;
  if (!octal || (mode & 0600) != 0600 || mode > 0777) {
    throw ConfigError("configuration key '" + key + "': '" + text +
                      "' is not a file mode; give octal digits such as \"0600\" or \"0640\" "
                      "(the owner needs read and write)");
  }
  return mode;
}

// A management block: a power-of-two number of system pages, at most 1 GiB.
std::uint64_t parse_granularity(const std::string& key, const std::string& text) {
  const std::uint64_t bytes = parse_size(key, text);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (bytes < page || bytes > (1u << 30) || bytes % page != 0 || !std::has_single_bit(bytes / page)) {
    throw ConfigError("configuration key '" + key + "': '" + text + "' is not a power-of-two number of " +
                      std::to_string(page) + "-byte pages up to 1GiB; give e.g. \"64KiB\" or \"auto\"");
  }
  return bytes;
}

template <class Enum>
Enum parse_choice(const std::string& key, const std::string& text,
                  std::initializer_list<std::pair<const char*, Enum>> choices) {
  std::string allowed;
  for (const auto& [name, value] : choices) {
    if (lower(trim(text)) == name) return value;
    allowed += (allowed.empty() ? "" : ", ") + std::string(name);
  }
  throw ConfigError("configuration key '" + key + "': '" + text + "' is not one of " + allowed);
}

// The whole of `text` as a finite number, or none.
std::optional<double> parse_number(const std::string& text) {
  std::size_t used = 0;
  try {
    const double value = std::stod(text, &used);
    if (used == text.size() && std::isfinite(value)) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// "90", "90s", "15min", "2h", "1d" -> seconds (> 0).
double parse_duration(const std::string& key, const std::string& text) {
  const std::string t = lower(trim(text));
  static const std::pair<const char*, double> units[] = {{"min", 60}, {"s", 1}, {"h", 3600}, {"d", 86400}};
  double scale = 1;
  std::string number = t;
  for (const auto& [suffix, seconds] : units) {
    const std::string unit = suffix;
    if (t.size() > unit.size() && t.compare(t.size() - unit.size(), unit.size(), unit) == 0) {
      scale = seconds;
      number = trim(t.substr(0, t.size() - unit.size()));
      break;
    }
  }
  const std::optional<double> value = parse_number(number);
  if (!value || *value <= 0) {
    throw ConfigError("configuration key '" + key + "': '" + text +
                      "' is not a positive duration; give seconds or a unit: \"90s\", \"15min\", \"2h\", \"1d\"");
  }
  return *value * scale;
}

// "0.05" or "5%" -> a fraction in (0, 1].
double parse_fraction(const std::string& key, const std::string& text) {
  std::string t = trim(text);
  const bool percent = !t.empty() && t.back() == '%';
  if (percent) t = trim(t.substr(0, t.size() - 1));
  std::optional<double> value = parse_number(t);
  if (value && percent) *value /= 100;
  if (!value || !(*value > 0 && *value <= 1)) {
    throw ConfigError("configuration key '" + key + "': '" + text +
                      "' is not a fraction in (0, 1]; give e.g. 0.05 or \"5%\"");
  }
  return *value;
}

using Setter = std::function<void(Config&, const std::string& key, const std::string& value)>;

const std::vector<std::pair<std::string, Setter>>& setters() {
  static const std::vector<std::pair<std::string, Setter>> table = {
      {"capture.mode",
       [](Config& c, const std::string& k, const std::string& v) {
         c.capture.mode = parse_choice<CaptureMode>(
             k, v, {{"copy", CaptureMode::kCopy},
              {"fork", CaptureMode::kFork},
              {"auto", CaptureMode::kAuto},
              {"delta", CaptureMode::kDelta}});
       }},
      {"track.method",
       [](Config& c, const std::string& k, const std::string& v) {
         static const char* const methods[] = {"auto", "uffd", "soft-dirty", "mprotect", "hash"};
         const std::string method = lower(trim(v));
         if (std::find(std::begin(methods), std::end(methods), method) == std::end(methods)) {
           throw ConfigError("configuration key '" + k + "': '" + v +
                             "' is not one of auto, uffd, soft-dirty, mprotect, hash");
         }
         c.track.method = method;
       }},
      {"track.granularity",
       [](Config& c, const std::string& k, const std::string& v) {
         c.track.granularity = lower(trim(v)) == "auto" ? 0 : parse_granularity(k, v);
       }},
      {"delta.full_every",
       [](Config& c, const std::string& k, const std::string& v) {
         c.delta.full_every = static_cast<int>(parse_integer(k, v, 1, 1 << 20));
       }},
      {"buffer.capacity",
       [](Config& c, const std::string& k, const std::string& v) {
         c.buffer.capacity = lower(trim(v)) == "auto" ? 0 : parse_size(k, v);
       }},
      {"buffer.pin",
       [](Config& c, const std::string& k, const std::string& v) {
         c.buffer.pin = parse_choice<PinPolicy>(
             k, v, {{"lazy", PinPolicy::kLazy}, {"eager", PinPolicy::kEager}, {"off", PinPolicy::kOff}});
       }},
      {"buffer.touch",
       [](Config& c, const std::string& k, const std::string& v) {
         c.buffer.touch = parse_choice<TouchSetting>(
             k, v, {{"auto", TouchSetting::kAuto}, {"concurrent", TouchSetting::kConcurrent},
                    {"sequential", TouchSetting::kSequential}});
       }},
      {"buffer.pin_token_dir", [](Config& c, const std::string&, const std::string& v) { c.buffer.pin_token_dir = v; }},
      {"device.capacity",
       [](Config& c, const std::string& k, const std::string& v) { c.device.capacity = parse_size(k, v); }},
      {"device.chunk",
       [](Config& c, const std::string& k, const std::string& v) {
         c.device.chunk = parse_size(k, v);
         if (c.device.chunk == 0) throw ConfigError("device.chunk must be larger than 0 (default 1GiB)");
       }},
      {"device.backend",
       [](Config& c, const std::string& k, const std::string& v) {
         c.device.backend =
             parse_choice<DeviceBackend>(k, v, {{"cuda", DeviceBackend::kCuda}, {"host", DeviceBackend::kHost}});
       }},
      {"memory.every",
       [](Config& c, const std::string& k, const std::string& v) {
         c.memory.every = static_cast<int>(parse_integer(k, v, 0, 1 << 20));
       }},
      {"memory.keep",
       [](Config& c, const std::string& k, const std::string& v) {
         c.memory.keep = static_cast<int>(parse_integer(k, v, 0, 1 << 20));
       }},
      {"memory.capacity",
       [](Config& c, const std::string& k, const std::string& v) {
         c.memory.capacity = lower(trim(v)) == "auto" ? 0 : parse_size(k, v);
       }},
      {"interval.policy",
       [](Config& c, const std::string& k, const std::string& v) {
         c.interval.policy = parse_choice<IntervalPolicy>(k, v,
                                                          {{"none", IntervalPolicy::kNone},
                                                           {"seconds", IntervalPolicy::kSeconds},
                                                           {"overhead", IntervalPolicy::kOverhead},
                                                           {"young-daly", IntervalPolicy::kYoungDaly}});
       }},
      {"interval.seconds",
       [](Config& c, const std::string& k, const std::string& v) { c.interval.seconds = parse_duration(k, v); }},
      {"interval.max_overhead",
       [](Config& c, const std::string& k, const std::string& v) { c.interval.max_overhead = parse_fraction(k, v); }},
      {"interval.mtbf",
       [](Config& c, const std::string& k, const std::string& v) { c.interval.mtbf = parse_duration(k, v); }},
      {"partner.scheme",
       [](Config& c, const std::string& k, const std::string& v) {
         c.partner.scheme = parse_choice<PartnerScheme>(
             k, v, {{"none", PartnerScheme::kNone}, {"partner", PartnerScheme::kPartner}, {"xor", PartnerScheme::kXor}});
       }},
      {"partner.set_size",
       [](Config& c, const std::string& k, const std::string& v) {
         c.partner.set_size = static_cast<int>(parse_integer(k, v, 2, 1 << 16));
       }},
      {"mpi.timeout",
       [](Config& c, const std::string& k, const std::string& v) { c.mpi.timeout = parse_duration(k, v); }},
      {"mpi.ranks_per_node",
       [](Config& c, const std::string& k, const std::string& v) {
         c.mpi.ranks_per_node = static_cast<int>(parse_integer(k, v, 0, 1 << 24));
       }},
      {"local.path", [](Config& c, const std::string&, const std::string& v) { c.local.path = v; }},
      {"local.keep",
       [](Config& c, const std::string& k, const std::string& v) {
         c.local.keep = static_cast<int>(parse_integer(k, v, 0, 1 << 20));
       }},
      {"local.every",
       [](Config& c, const std::string& k, const std::string& v) {
         c.local.every = static_cast<int>(parse_integer(k, v, 0, 1 << 20));
       }},
      {"local.mode",
       [](Config& c, const std::string& k, const std::string& v) { c.local.mode = parse_mode(k, v); }},
      {"persistent.path",
       [](Config& c, const std::string&, const std::string& v) { c.persistent.path = v; }},
      {"persistent.keep",
       [](Config& c, const std::string& k, const std::string& v) {
         c.persistent.keep = static_cast<int>(parse_integer(k, v, 0, 1 << 20));
       }},
      {"persistent.every",
       [](Config& c, const std::string& k, const std::string& v) {
         c.persistent.every = static_cast<int>(parse_integer(k, v, 0, 1 << 20));
       }},
      {"persistent.mode",
       [](Config& c, const std::string& k, const std::string& v) {
         c.persistent.mode = parse_mode(k, v);
       }},
      {"pipeline.threads",
       [](Config& c, const std::string& k, const std::string& v) {
         c.pipeline.threads = static_cast<int>(parse_integer(k, v, 0, 64));
       }},
      {"pipeline.compress",
       [](Config& c, const std::string& k, const std::string& v) {
         c.pipeline.compress = parse_choice<Codec>(
             k, v,
             {{"none", Codec::kNone},
              {"lz4", Codec::kLz4},
              {"zstd", Codec::kZstd},
              {"blosc-lz4", Codec::kBloscLz4},
              {"blosc-zstd", Codec::kBloscZstd}});
       }},
      {"pipeline.compress_level",
       [](Config& c, const std::string& k, const std::string& v) {
         c.pipeline.compress_level = static_cast<int>(parse_integer(k, v, 1, 19));
       }},
      {"pipeline.shuffle",
       [](Config& c, const std::string& k, const std::string& v) {
         c.pipeline.shuffle =
             parse_choice<Shuffle>(k, v, {{"none", Shuffle::kNone}, {"byte", Shuffle::kByte}, {"bit", Shuffle::kBit}});
       }},
      {"pipeline.chunk_size",
       [](Config& c, const std::string& k, const std::string& v) {
         const std::uint64_t size = parse_size(k, v);
         if (size < (64u << 10) || size > (1u << 30)) {
           throw ConfigError("configuration key '" + k + "': '" + v +
                             "' is outside the allowed range 64KiB to 1GiB");
         }
         c.pipeline.chunk_size = size;
       }},
      {"log.level",
       [](Config& c, const std::string& k, const std::string& v) {
         c.log.level = parse_choice<LogLevel>(k, v,
                                              {{"off", LogLevel::kOff},
                                               {"error", LogLevel::kError},
                                               {"warn", LogLevel::kWarn},
                                               {"info", LogLevel::kInfo},
                                               {"debug", LogLevel::kDebug}});
       }},
      {"trace.path", [](Config& c, const std::string&, const std::string& v) { c.trace.path = v; }},
  };
  return table;
}

std::string known_keys() {
  std::string keys;
  for (const auto& [key, setter] : setters()) keys += (keys.empty() ? "" : ", ") + key;
  return keys;
}

// TOML values become the same text an environment variable would carry, so
// that one parser per key serves the file, the environment and the API.
std::string toml_value_text(const std::string& key, const toml::node& node) {
  if (auto s = node.value_exact<std::string>()) return *s;
  if (auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  if (key == "local.mode" || key == "persistent.mode") {
    throw ConfigError("configuration key '" + key +
                      "': give the mode as a string of octal digits such as \"0640\"");
  }
  if (auto i = node.value_exact<int64_t>()) return std::to_string(*i);
  if (auto d = node.value_exact<double>()) {
    if (std::floor(*d) == *d && std::abs(*d) < 9.0e15) return std::to_string(static_cast<long long>(*d));
    if (key.rfind("interval.", 0) == 0) {  // fractions and durations
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", *d);
      return text;
    }
  }
  throw ConfigError("configuration key '" + key + "' has a value of an unsupported type");
}

void apply_file(Config& config, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    const auto& where = error.source().begin;
    throw ConfigError("configuration file '" + path + "' line " + std::to_string(where.line) +
                      ": " + std::string(error.description()));
  }
  static const std::string sections[] = {"capture", "track",    "delta",    "buffer",   "device", "memory", "local",
                                         "persistent", "partner", "pipeline", "interval", "mpi", "log", "trace"};
  std::string section_list;
  for (const std::string& section : sections) section_list += (section_list.empty() ? "" : ", ") + section;
  for (const auto& [section, node] : root) {
    const auto* table = node.as_table();
    const bool known = std::find(std::begin(sections), std::end(sections), section.str()) != std::end(sections);
    if (table != nullptr && table->empty() && !known) {  // keys of an unknown section are reported by set()
      throw ConfigError("configuration file '" + path + "': unknown section [" + std::string(section.str()) +
                        "]; sections are " + section_list);
    }
    if (table == nullptr) {
      throw ConfigError("configuration file '" + path + "': top-level key '" +
                        std::string(section.str()) + "' must be a [section]; sections are " + section_list);
    }
    for (const auto& [name, value] : *table) {
      const std::string key = std::string(section.str()) + "." + std::string(name.str());
      config.set(key, toml_value_text(key, value));
    }
  }
}

void apply_environment(Config& config) {
  constexpr std::string_view prefix = "RESURGO_";
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view assignment(*entry);
    if (!assignment.starts_with(prefix)) continue;
    const auto equals = assignment.find('=');
    if (equals == std::string_view::npos) continue;
    const std::string variable(assignment.substr(0, equals));
    const std::string rest = lower(variable.substr(prefix.size()));
    const auto underscore = rest.find('_');
    const std::string key =
        underscore == std::string::npos ? rest : rest.substr(0, underscore) + "." + rest.substr(underscore + 1);
    try {
      config.set(key, std::string(assignment.substr(equals + 1)));
    } catch (const ConfigError& error) {
      throw ConfigError("environment variable " + variable + ": " + error.what());
    }
  }
}

}  // namespace

std::uint64_t parse_size(const std::string& key, const std::string& text) {
  const std::string t = trim(text);
  std::size_t used = 0;
  double number = -1;
  try {
    number = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = lower(trim(t.substr(used)));
  static const std::pair<const char*, double> units[] = {
      {"", 1.0},          {"b", 1.0},           {"k", 1024.0},        {"kib", 1024.0},
      {"kb", 1e3},        {"m", 1048576.0},     {"mib", 1048576.0},   {"mb", 1e6},
      {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},         {"t", 1099511627776.0},
      {"tib", 1099511627776.0}, {"tb", 1e12}};
  const bool decimal = !t.empty() && (std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.') &&
                       lower(t).find('x') == std::string::npos;  // std::stod also reads hex
  for (const auto& [name, factor] : units) {
    const double bytes = std::round(number * factor);
    // 2^64 is exactly representable: below it the conversion cannot overflow.
    if (decimal && used > 0 && unit == name && bytes < 18446744073709551616.0 && (bytes >= 1 || number == 0)) {
      return static_cast<std::uint64_t>(bytes);
    }
  }
  throw ConfigError("configuration key '" + key + "': '" + text +
                    "' is not a size; write a number with an optional unit B, KiB, MiB, GiB, "
                    "TiB, KB, MB, GB or TB (e.g. \"512MiB\")");
}

void Config::set(const std::string& key, const std::string& value) {
  for (const auto& [name, setter] : setters()) {
    if (name == key) {
      setter(*this, key, value);
      return;
    }
  }
  throw ConfigError("unknown configuration key '" + key + "'; known keys are " + known_keys());
}

Config Config::load(const std::string& toml_path, const std::map<std::string, std::string>& overrides) {
  Config config;
  if (!toml_path.empty()) apply_file(config, toml_path);
  apply_environment(config);
  for (const auto& [key, value] : overrides) config.set(key, value);
  return config;
}

std::string Config::default_local_path() {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string base = (tmpdir != nullptr && *tmpdir != '\0') ? tmpdir : "/tmp";
  return base + "/resurgo-" + std::to_string(::getuid());
}

}  // namespace resurgo
