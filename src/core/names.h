// Validation of user-chosen names that end up in paths or file headers.
#pragma once

#include <string>

namespace resurgo {

// Store names become directory names: 1-128 characters of [A-Za-z0-9._-],
// not "." or "..". Throws InvalidArgumentError saying what is allowed.
void validate_store_name(const std::string& name);

// Region labels go into the region table: 1-255 bytes, no '/', no "..",
// no control characters (including NUL).
void validate_label(const std::string& label);

}  // namespace resurgo
