// The words of the configuration's enums: one table per enum, read both to
// parse a key's value (Config::set) and to print one (resurgo::to_string,
// hence logs, stats and messages), and listed whole in the error for a word
// it lacks. With one table the words accepted, the words printed and the
// words an error suggests cannot drift apart. docs/config.md lists the same
// words. Also the beginning of a message about a key, and the RESURGO_
// variables that are not keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/printable.h"
#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

template <class Enum>
struct EnumName {
  Enum value;
  const char* name;
};

inline constexpr EnumName<CaptureMode> kCaptureModeNames[] = {
    {CaptureMode::kCopy, "copy"}, {CaptureMode::kFork, "fork"}, {CaptureMode::kAuto, "auto"},
    {CaptureMode::kDelta, "delta"}};
inline constexpr EnumName<TrackMethod> kTrackMethodNames[] = {
    {TrackMethod::kAuto, "auto"}, {TrackMethod::kUffd, "uffd"}, {TrackMethod::kSoftDirty, "soft-dirty"},
    {TrackMethod::kMprotect, "mprotect"}, {TrackMethod::kHash, "hash"}};
inline constexpr EnumName<PinPolicy> kPinPolicyNames[] = {
    {PinPolicy::kLazy, "lazy"}, {PinPolicy::kEager, "eager"}, {PinPolicy::kOff, "off"}};
inline constexpr EnumName<TouchSetting> kTouchSettingNames[] = {
    {TouchSetting::kAuto, "auto"}, {TouchSetting::kConcurrent, "concurrent"},
    {TouchSetting::kSequential, "sequential"}};
inline constexpr EnumName<DeviceBackend> kDeviceBackendNames[] = {
    {DeviceBackend::kCuda, "cuda"}, {DeviceBackend::kHost, "host"}};
inline constexpr EnumName<IntervalPolicy> kIntervalPolicyNames[] = {
    {IntervalPolicy::kNone, "none"}, {IntervalPolicy::kSeconds, "seconds"},
    {IntervalPolicy::kOverhead, "overhead"}, {IntervalPolicy::kYoungDaly, "young-daly"}};
inline constexpr EnumName<PartnerScheme> kPartnerSchemeNames[] = {
    {PartnerScheme::kNone, "none"}, {PartnerScheme::kPartner, "partner"}, {PartnerScheme::kXor, "xor"}};
inline constexpr EnumName<Codec> kCodecNames[] = {
    {Codec::kNone, "none"}, {Codec::kLz4, "lz4"}, {Codec::kZstd, "zstd"}, {Codec::kBloscLz4, "blosc-lz4"},
    {Codec::kBloscZstd, "blosc-zstd"}};
inline constexpr EnumName<Shuffle> kShuffleNames[] = {
    {Shuffle::kNone, "none"}, {Shuffle::kByte, "byte"}, {Shuffle::kBit, "bit"}};
inline constexpr EnumName<LogLevel> kLogLevelNames[] = {
    {LogLevel::kOff, "off"}, {LogLevel::kError, "error"}, {LogLevel::kWarn, "warn"}, {LogLevel::kInfo, "info"},
    {LogLevel::kDebug, "debug"}};

// The word for `value`; "unknown" for a value outside the table (a number
// read from a damaged file and cast).
template <class Enum, std::size_t N>
constexpr const char* name_in(const EnumName<Enum> (&names)[N], Enum value) {
  for (const auto& [known, name] : names) {
    if (known == value) return name;
  }
  return "unknown";
}

// "auto, uffd, soft-dirty, mprotect or hash": the words of a table for a
// message.
template <class Enum, std::size_t N>
std::string list_names(const EnumName<Enum> (&names)[N]) {
  std::string list = names[0].name;
  for (std::size_t i = 1; i < N; ++i) list += std::string(i + 1 == N ? " or " : ", ") + names[i].name;
  return list;
}

// `text` as the tables spell words: lower case, without surrounding blanks.
std::string config_word(const std::string& text);

// "configuration key '<key>': ", the key escaped (base/printable.h): how
// every message about a key's value begins.
inline std::string key_error_prefix(const std::string& key) {
  return "configuration key '" + printable(key) + "': ";
}

// "configuration key '<key>': '<text>' <why>", key and text escaped: the
// error for a value the key does not take; `why` says what it takes.
inline ConfigError bad_value(const std::string& key, const std::string& text, const std::string& why) {
  return ConfigError(key_error_prefix(key) + "'" + printable(text) + "' " + why);
}

// track.granularity = "doubling" (Appicpr's rule alone, docs/tracking.md) in
// Config::Track::granularity, beside 0 ("auto") and sizes in bytes: no
// management block is this large.
inline constexpr std::uint64_t kDoublingGranularity = UINT64_MAX;

// The environment variable that names a configuration file (Config::load).
inline constexpr char kConfigFileVariable[] = "RESURGO_CONFIG";

// The project's own RESURGO_ variables that are not configuration keys: the
// environment layer leaves them alone, whatever keys come to resemble them
// (docs/config.md, "Environment variables").
inline constexpr std::string_view kOtherVariables[] = {
    kConfigFileVariable,
    "RESURGO_SKIP_SYSTEM_CHECK",  // scripts/bootstrap.sh
    "RESURGO_BENCH_PACKAGES",     // scripts/bootstrap.sh (make bench-deps)
    "RESURGO_IO_FAULT_RUNS",      // tests/cpp/io_fault_test.cpp (make soak)
    "RESURGO_IO_FAULT_SEED",      // tests/cpp/io_fault_test.cpp (make soak)
    "RESURGO_FAKE_CUDA",          // tests/python/test_fake_cuda_driver.py
};

// The value `text` names, in any case. Throws ConfigError naming `key`, the
// text and every word of the table.
template <class Enum, std::size_t N>
Enum parse_name(const EnumName<Enum> (&names)[N], const std::string& key, const std::string& text) {
  const std::string word = config_word(text);
  for (const auto& [value, name] : names) {
    if (word == name) return value;
  }
  throw ConfigError(key_error_prefix(key) + "unknown value '" + printable(text) + "'; use " + list_names(names));
}

}  // namespace resurgo
