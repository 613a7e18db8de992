// What a store's configuration cannot mean together, checked when the store
// opens (Config::load checks each key alone), and what it means, for the
// debug log.
#pragma once

#include <string>

#include "resurgo/config.hpp"

namespace resurgo {

// Throws ConfigError naming the store and the keys. Logs, at log.level =
// debug, the configuration the store opens with (config_summary).
const Config& check_store_config(const std::string& store, const Config& config);

// One line: the capture, each level with its path, every and keep, the
// pipeline, the interval: what a user reading a debug log needs to know
// which layer won (docs/config.md).
std::string config_summary(const Config& config);

}  // namespace resurgo
