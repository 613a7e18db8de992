// Validation of user-chosen names that end up in paths or file headers.
#pragma once

#include <cstddef>
#include <string>

namespace resurgo {

// The longest region label, in bytes (the container format's bound too).
inline constexpr std::size_t kMaxLabelBytes = 255;

// Store names become directory names: 1-128 characters of [A-Za-z0-9._-],
// not "." or "..". Throws InvalidArgumentError saying what is allowed;
// returns `name`.
const std::string& validate_store_name(const std::string& name);

// Region labels go into the region table: 1-kMaxLabelBytes bytes, no '/', no "..",
// no control characters (including NUL).
void validate_label(const std::string& label);

}  // namespace resurgo
