// What a store's configuration cannot mean together, checked when the store
// opens (Config::load checks each key alone).
#pragma once

#include <string>

#include "resurgo/config.hpp"

namespace resurgo {

// Throws ConfigError naming the store and the keys.
const Config& check_store_config(const std::string& store, const Config& config);

}  // namespace resurgo
