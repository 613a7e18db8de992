// The nesting depth of a TOML configuration, checked before toml++ parses
// it. toml++ (3.3) builds one table per level of a table header or dotted
// key without a limit and frees them recursively: a header of 50,000 levels
// ("[a.a.a...]", 100 KB) exhausts the stack and kills the process.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace resurgo {

// Tables, dotted keys, arrays and inline tables count one level each; a
// Resurgo configuration needs two ([section] and key).
inline constexpr int kMaxTomlDepth = 32;

// Throws ConfigError naming `path` and the line where `text` nests deeper
// than kMaxTomlDepth. Text that is not TOML is left to the parser to
// refuse; this check only counts.
void check_toml_depth(std::string_view text, const std::string& path);

// The text of the configuration file `path`, once check_toml_depth accepts
// it. Throws ConfigError naming the file when it cannot be read.
std::string read_toml_within_depth(const std::string& path);

}  // namespace resurgo
