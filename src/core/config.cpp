#include "resurgo/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <string_view>
#include <toml++/toml.h>
#include <vector>

#include "base/checksum.h"
#include "base/printable.h"
#include "base/units.h"
#include "core/config_checks.h"
#include "core/config_names.h"
#include "core/toml_depth.h"
#include "resurgo/errors.hpp"

extern char** environ;

namespace resurgo {

// persistent.layout's words (config_names.h holds the other keys' tables).
inline constexpr EnumName<FileLayout> kFileLayoutNames[] = {{FileLayout::kPerRank, "per-rank"},
                                                            {FileLayout::kShared, "shared"}};

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
    throw bad_value(key, text, "is not an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

unsigned parse_mode(const std::string& key, const std::string& text) {
  std::string t = config_word(text);
  if (t.rfind("0o", 0) == 0) t = t.substr(2);
  const bool octal = !t.empty() && t.size() <= 4 &&
                     std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '7'; });
  const unsigned mode = octal ? static_cast<unsigned>(std::stoul(t, nullptr, 8)) : 0;
  if (!octal || (mode & 0600) != 0600 || mode > 0777) {
    throw bad_value(key, text,
                    "is not a file mode; give octal digits such as \"0600\" or \"0640\" (the owner needs read "
                    "and write)");
  }
  // Checkpoint files are data: another user who may write one could plant
  // a version (docs/reliability.md, "Security").
  if ((mode & 0133) != 0) {
    throw bad_value(key, text,
                    "lets others write the store's files or makes them executable; give read permission at most, "
                    "such as \"0600\", \"0640\" or \"0644\"");
  }
  return mode;
}

bool parse_flag(const std::string& key, const std::string& text) {
  const std::string word = config_word(text);
  if (word == "true" || word == "1" || word == "yes" || word == "on") return true;
  if (word == "false" || word == "0" || word == "no" || word == "off") return false;
  throw bad_value(key, text, "is not true or false");
}

// A management block: a power-of-two number of system pages, at most 1 GiB,
// or "doubling" (Appicpr's rule alone).
std::uint64_t parse_granularity(const std::string& key, const std::string& text) {
  if (config_word(text) == "doubling") return kDoublingGranularity;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::string allowed = "is not \"auto\", \"doubling\" or a power-of-two number of " +
                              std::to_string(page) + "-byte pages up to 1GiB (e.g. \"64KiB\")";
  std::uint64_t bytes = 0;
  try {
    bytes = parse_size(key, text);
  } catch (const ConfigError&) {
    throw bad_value(key, text, allowed);
  }
  if (bytes < page || bytes > (1u << 30) || bytes % page != 0 || !std::has_single_bit(bytes / page)) {
    throw bad_value(key, text, allowed);
  }
  return bytes;
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
  const std::string t = config_word(text);
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
    throw bad_value(key, text,
                    "is not a positive duration; give seconds or a unit: \"90s\", \"15min\", \"2h\", \"1d\"");
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
    throw bad_value(key, text, "is not a fraction in (0, 1]; give e.g. 0.05 or \"5%\"");
  }
  return *value;
}

// "auto" (any case) stands for 0: the size is then chosen at open.
template <class Parse>
auto or_auto(Parse parse) {
  return [parse](const std::string& key, const std::string& text) -> std::uint64_t {
    return config_word(text) == "auto" ? 0 : parse(key, text);
  };
}

auto integer_in(int min, int max) {
  return [min, max](const std::string& key, const std::string& text) {
    return static_cast<int>(parse_integer(key, text, min, max));
  };
}

// `allowed` completes "'<text>' is not ..." in the error.
auto size_in(std::uint64_t min, std::uint64_t max, const char* allowed) {
  return [min, max, allowed](const std::string& key, const std::string& text) {
    const std::uint64_t size = parse_size(key, text);
    if (size < min || size > max) {
      throw bad_value(key, text, std::string("is not ") + allowed);
    }
    return size;
  };
}

// "auto" (any case) or a device ordinal (the driver's limit is far below
// the bound, which only keeps the number an int).
int parse_device_ordinal(const std::string& key, const std::string& text) {
  if (config_word(text) == "auto") return kAutoDevice;
  try {
    return static_cast<int>(parse_integer(key, text, 0, 1 << 16));
  } catch (const ConfigError&) {
    throw bad_value(key, text, "is not \"auto\" or a device ordinal (an integer from 0, e.g. 1)");
  }
}

template <class Enum, std::size_t N>
auto choice(const EnumName<Enum> (&names)[N]) {
  return [&names](const std::string& key, const std::string& text) { return parse_name(names, key, text); };
}

std::string verbatim(const std::string& /*key*/, const std::string& text) { return text; }

// One key and how its text becomes its field of one Config.
struct Key {
  const char* name;
  std::function<void(const std::string& text)> assign;
};

// `parse(key, text)` throws ConfigError naming the key, or gives the field's value.
template <class Field, class Parse>
Key entry(const char* name, Field& field, Parse parse) {
  return {name, [name, &field, parse](const std::string& text) { field = parse(name, text); }};
}

// Every key of docs/config.md, bound to the fields of `c`.
std::vector<Key> keys_of(Config& c) {
  const auto count = integer_in(0, 1 << 20);  // versions kept, every n-th checkpoint
  return {
      entry("capture.mode", c.capture.mode, choice(kCaptureModeNames)),
      entry("capture.auto_copy_above", c.capture.auto_copy_above, parse_fraction),
      entry("track.method", c.track.method, choice(kTrackMethodNames)),
      entry("track.granularity", c.track.granularity, or_auto(parse_granularity)),
      entry("delta.full_every", c.delta.full_every, integer_in(1, 1 << 20)),
      entry("delta.compact_after", c.delta.compact_after, integer_in(0, 1 << 20)),
      entry("delta.compact_share", c.delta.compact_share, parse_fraction),
      entry("buffer.capacity", c.buffer.capacity, or_auto(parse_size)),
      entry("buffer.pin", c.buffer.pin, choice(kPinPolicyNames)),
      entry("buffer.touch", c.buffer.touch, choice(kTouchSettingNames)),
      entry("buffer.pin_token_dir", c.buffer.pin_token_dir, verbatim),
      entry("buffer.pin_token_timeout", c.buffer.pin_token_timeout, parse_duration),
      entry("device.capacity", c.device.capacity, parse_size),
      entry("device.chunk", c.device.chunk, size_in(1, UINT64_MAX, "a size larger than 0 (default 1GiB)")),
      entry("device.backend", c.device.backend, choice(kDeviceBackendNames)),
      entry("device.ordinal", c.device.ordinal, parse_device_ordinal),
      entry("memory.every", c.memory.every, count),
      entry("memory.keep", c.memory.keep, count),
      entry("memory.capacity", c.memory.capacity, or_auto(parse_size)),
      entry("interval.policy", c.interval.policy, choice(kIntervalPolicyNames)),
      entry("interval.seconds", c.interval.seconds, parse_duration),
      entry("interval.max_overhead", c.interval.max_overhead, parse_fraction),
      entry("interval.mtbf", c.interval.mtbf, parse_duration),
      entry("partner.scheme", c.partner.scheme, choice(kPartnerSchemeNames)),
      entry("partner.set_size", c.partner.set_size, integer_in(2, 1 << 16)),
      entry("mpi.timeout", c.mpi.timeout, parse_duration),
      entry("mpi.ranks_per_node", c.mpi.ranks_per_node, integer_in(0, 1 << 24)),
      entry("local.path", c.local.path, verbatim),
      entry("local.keep", c.local.keep, count),
      entry("local.every", c.local.every, count),
      entry("local.mode", c.local.mode, parse_mode),
      entry("local.shared_group", c.local.shared_group, parse_flag),
      entry("local.durable", c.local.durable, parse_flag),
      entry("persistent.path", c.persistent.path, verbatim),
      entry("persistent.keep", c.persistent.keep, count),
      entry("persistent.every", c.persistent.every, count),
      entry("persistent.mode", c.persistent.mode, parse_mode),
      entry("persistent.shared_group", c.persistent.shared_group, parse_flag),
      entry("persistent.layout", c.persistent.layout, choice(kFileLayoutNames)),
      entry("restart.accept_foreign", c.restart.accept_foreign, parse_flag),
      entry("pipeline.threads", c.pipeline.threads, integer_in(0, 64)),
      entry("pipeline.compress", c.pipeline.compress, choice(kCodecNames)),
      entry("pipeline.compress_level", c.pipeline.compress_level, integer_in(1, 19)),
      entry("pipeline.shuffle", c.pipeline.shuffle, choice(kShuffleNames)),
      entry("pipeline.chunk_size", c.pipeline.chunk_size, size_in(64 * kKiB, kGiB, "a size from 64KiB to 1GiB")),
      entry("log.level", c.log.level, choice(kLogLevelNames)),
      entry("trace.path", c.trace.path, verbatim),
  };
}

std::vector<std::string> key_names() {
  Config unused;  // keys_of binds fields; only the names are read here
  std::vector<std::string> names;
  for (const Key& known : keys_of(unused)) names.emplace_back(known.name);
  return names;
}

bool is_key(const std::string& key) {
  const std::vector<std::string> names = key_names();
  return std::find(names.begin(), names.end(), key) != names.end();
}

// "capture", "track", ...: the part before the dot of the known keys.
std::vector<std::string> section_names() {
  std::vector<std::string> sections;
  for (const std::string& key : key_names()) {
    const std::string section = key.substr(0, key.find('.'));
    if (std::find(sections.begin(), sections.end(), section) == sections.end()) sections.push_back(section);
  }
  return sections;
}

std::string comma_list(const std::vector<std::string>& words) {
  std::string list;
  for (const std::string& word : words) list += (list.empty() ? "" : ", ") + word;
  return list;
}

// Levenshtein distance: the letters to insert, delete or replace to turn `a`
// into `b`.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j < row.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known key within a typo's reach of `key` (a quarter of its letters, at
// least two), if any.
std::optional<std::string> nearest_key(const std::string& key) {
  std::optional<std::string> nearest;
  std::size_t best = std::max<std::size_t>(2, key.size() / 4) + 1;
  for (const std::string& name : key_names()) {
    // The distance is at least the difference of the lengths: a long key
    // (a whole file given as a key) costs no quadratic count.
    const std::size_t gap = name.size() > key.size() ? name.size() - key.size() : key.size() - name.size();
    if (gap >= best) continue;
    if (const std::size_t distance = edit_distance(key, name); distance < best) {
      best = distance;
      nearest = name;
    }
  }
  return nearest;
}

// How a key is written where it was misspelt: "local.keep" in a file or a
// call, RESURGO_LOCAL_KEEP in the environment.
using Spelling = std::string (*)(const std::string& key);
std::string as_key(const std::string& key) { return key; }

// Names the key, suggests the known key within a typo's reach and lists
// them all.
std::string unknown_key_message(const std::string& key, Spelling spell) {
  std::string message = "unknown configuration key '" + printable(key) + "'";
  if (const std::optional<std::string> nearest = nearest_key(key)) message += "; did you mean " + spell(*nearest) + "?";
  return message + "; known keys are " + comma_list(key_names());
}

// TOML values become the same text an environment variable would carry, so
// that one parser per key serves the file, the environment and the API.
std::string toml_value_text(const std::string& key, const toml::node& node) {
  if (auto s = node.value_exact<std::string>()) return *s;
  if (auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  if (key == "local.mode" || key == "persistent.mode") {
    throw ConfigError(key_error_prefix(key) + "give the mode as a string of octal digits such as \"0640\"");
  }
  if (auto i = node.value_exact<int64_t>()) return std::to_string(*i);
  // A fraction goes to the key's own parser, which refuses it where only
  // whole numbers make sense ("local.keep = 2.5"), naming the key.
  if (auto d = node.value_exact<double>()) {
    if (std::floor(*d) == *d && std::abs(*d) < 9.0e15) return std::to_string(static_cast<long long>(*d));
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", *d);
    return text;
  }
  std::ostringstream type;
  type << node.type();
  throw ConfigError(key_error_prefix(key) + "a TOML " + type.str() +
                    " is not a value; give a string, a number or true/false");
}

// "configuration file '<path>' line <n>: ", where a message about a part of
// the file begins.
std::string file_line_prefix(const std::string& path, const toml::source_region& where) {
  return "configuration file '" + printable(path) + "' line " + std::to_string(where.begin.line) + ": ";
}

// Each [section] of the file, checked before its keys are set.
void check_section(const std::string& path, const std::string& section, const toml::node& node) {
  const std::vector<std::string> sections = section_names();
  const bool known = std::find(sections.begin(), sections.end(), section) != sections.end();
  const auto* table = node.as_table();
  if (table != nullptr && table->empty() && !known) {  // keys of an unknown section are reported by set()
    throw ConfigError(file_line_prefix(path, node.source()) + "unknown section [" + printable(section) +
                      "]; sections are " + comma_list(sections));
  }
  if (table == nullptr) {
    throw ConfigError(file_line_prefix(path, node.source()) + "top-level key '" + printable(section) +
                      "' must be a [section]; sections are " + comma_list(sections));
  }
}

void apply_file(Config& config, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(read_toml_within_depth(path), path);  // toml++ is not safe on deep nesting
  } catch (const toml::parse_error& error) {
    throw ConfigError(file_line_prefix(path, error.source()) + printable(error.description()));
  }
  for (const auto& [section, node] : root) {
    check_section(path, std::string(section.str()), node);
    for (const auto& [name, value] : *node.as_table()) {
      const std::string key = std::string(section.str()) + "." + std::string(name.str());
      try {
        config.set(key, toml_value_text(key, value));
      } catch (const ConfigError& error) {
        throw ConfigError(file_line_prefix(path, value.source()) + error.what());
      }
    }
  }
}

// RESURGO_CONFIG: a file over the program's own (what the run's environment
// says beats what the program ships), under the RESURGO_<SECTION>_<KEY>
// variables (the more precise setting wins). Empty: none.
void apply_config_variable(Config& config) {
  const char* path = std::getenv(kConfigFileVariable);
  if (path == nullptr || *path == '\0') return;
  try {
    apply_file(config, path);
  } catch (const ConfigError& error) {
    throw ConfigError("environment variable " + std::string(kConfigFileVariable) + ": " + error.what());
  }
}

constexpr std::string_view kVariablePrefix = "RESURGO_";

// RESURGO_LOCAL_KEEP -> "local.keep": the first '_' after the prefix
// separates the section from the key.
std::string key_of_variable(const std::string& variable) {
  const std::string rest = lower(variable.substr(kVariablePrefix.size()));
  const auto underscore = rest.find('_');
  return underscore == std::string::npos ? rest : rest.substr(0, underscore) + "." + rest.substr(underscore + 1);
}

std::string variable_of_key(const std::string& key) {
  std::string variable(kVariablePrefix);
  for (const char c : key) variable += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return variable;
}

// A variable that is no key's: misspelt when its first word is a section
// ("RESURGO_LOCAL_KEPP") or a key is a typo away ("RESURGO_LOCL_PATH").
bool misspelt_key(const std::string& key) {
  const std::vector<std::string> sections = section_names();
  const std::string section = key.substr(0, key.find('.'));
  return std::find(sections.begin(), sections.end(), section) != sections.end() || nearest_key(key).has_value();
}

bool other_variable(std::string_view variable) {
  return std::find(std::begin(kOtherVariables), std::end(kOtherVariables), variable) != std::end(kOtherVariables);
}

// A RESURGO_ variable is a key's (applied), one of the project's others
// (kOtherVariables: ignored), a key's misspelt (an error: a setting lost
// without a word is worse than a refusal), or someone else's (ignored).
void apply_environment(Config& config) {
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view assignment(*entry);
    const auto equals = assignment.find('=');
    if (!assignment.starts_with(kVariablePrefix) || equals == std::string_view::npos) continue;
    const std::string variable(assignment.substr(0, equals));
    const std::string key = key_of_variable(variable);
    if (other_variable(variable)) continue;
    if (is_key(key)) {
      try {
        config.set(key, std::string(assignment.substr(equals + 1)));
      } catch (const ConfigError& error) {
        throw ConfigError("environment variable " + printable(variable) + ": " + error.what());
      }
    } else if (misspelt_key(key)) {
      throw ConfigError("environment variable " + printable(variable) + ": " +
                        unknown_key_message(key, variable_of_key) + " (as variables RESURGO_<SECTION>_<KEY>)");
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
    const bool whole_bytes = factor != 1.0 || number == std::floor(number);  // "1.5 bytes" means nothing
    if (decimal && used > 0 && unit == name && whole_bytes && bytes < 18446744073709551616.0 &&
        (bytes >= 1 || number == 0)) {
      return static_cast<std::uint64_t>(bytes);
    }
  }
  throw bad_value(key, text,
                    "is not a size; write a number with an optional unit B, KiB, MiB, GiB, "
                    "TiB, KB, MB, GB or TB (e.g. \"512MiB\")");
}

std::string config_word(const std::string& text) { return lower(trim(text)); }

const char* to_string(CaptureMode mode) { return name_in(kCaptureModeNames, mode); }
const char* to_string(TrackMethod method) { return name_in(kTrackMethodNames, method); }
const char* to_string(PinPolicy policy) { return name_in(kPinPolicyNames, policy); }
const char* to_string(TouchSetting setting) { return name_in(kTouchSettingNames, setting); }
const char* to_string(DeviceBackend backend) { return name_in(kDeviceBackendNames, backend); }
const char* to_string(IntervalPolicy policy) { return name_in(kIntervalPolicyNames, policy); }
const char* to_string(PartnerScheme scheme) { return name_in(kPartnerSchemeNames, scheme); }
const char* to_string(FileLayout layout) { return name_in(kFileLayoutNames, layout); }
const char* to_string(Codec codec) { return name_in(kCodecNames, codec); }
const char* to_string(Shuffle shuffle) { return name_in(kShuffleNames, shuffle); }
const char* to_string(LogLevel level) { return name_in(kLogLevelNames, level); }

void Config::set(const std::string& key, const std::string& value) {
  for (const Key& known : keys_of(*this)) {
    if (known.name == key) return known.assign(value);
  }
  throw ConfigError(unknown_key_message(key, as_key));
}

Config Config::load(const std::string& toml_path, const std::map<std::string, std::string>& overrides) {
  Config config;
  if (!toml_path.empty()) apply_file(config, toml_path);
  apply_config_variable(config);
  apply_environment(config);
  for (const auto& [key, value] : overrides) config.set(key, value);
  return config;
}

// A folder per working directory, named after it and a hash of its path:
// two runs of one program in two directories never share L2, as they never
// share L4 (./checkpoints). The root: $TMPDIR when set (a batch system sets
// it to the job's node-local scratch), else the user's own
// $XDG_RUNTIME_DIR (mode 0700, no other user can pre-create anything in
// it), else /tmp. The directory checks (io/posix_directory.h) hold for all.
std::string Config::default_local_path() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const char* tmpdir = std::getenv("TMPDIR");
  std::string base;
  if (tmpdir != nullptr && *tmpdir == '/') {
    base = std::string(tmpdir) + "/resurgo-" + std::to_string(::geteuid());
  } else if (runtime != nullptr && *runtime == '/') {
    base = std::string(runtime) + "/resurgo";
  } else {
    base = "/tmp/resurgo-" + std::to_string(::geteuid());
  }
  const std::string cwd = std::filesystem::current_path().string();
  std::string leaf = std::filesystem::path(cwd).filename().string().substr(0, 32);
  for (char& c : leaf) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(checksum(cwd.data(), cwd.size())));
  if (leaf.empty()) leaf = "root";
  if (leaf[0] == '.') leaf[0] = '_';
  return base + "/" + leaf + "-" + hash;
}

}  // namespace resurgo
