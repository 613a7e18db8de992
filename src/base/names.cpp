#include "base/names.h"

#include <cctype>

#include "base/printable.h"
#include "resurgo/errors.hpp"

namespace resurgo {

const std::string& validate_store_name(const std::string& name) {
  bool valid = !name.empty() && name.size() <= 128 && name != "." && name != "..";
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '.' && c != '-' && c != '_') valid = false;
  }
  if (!valid) {
    throw InvalidArgumentError("invalid store name '" + printable(name) +
                               "': use 1-128 letters, digits, '.', '-' or '_' "
                               "(it becomes a directory name)");
  }
  return name;
}

void validate_label(const std::string& label) {
  if (label.empty() || label.size() > kMaxLabelBytes) {
    throw InvalidArgumentError("invalid region label '" + printable(label) + "': it must have 1-" +
                               std::to_string(kMaxLabelBytes) + " bytes");
  }
  for (char c : label) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '/') {
      throw InvalidArgumentError("invalid region label '" + printable(label) +
                                 "': no '/' or control characters allowed");
    }
  }
  if (label.find("..") != std::string::npos) {
    throw InvalidArgumentError("invalid region label '" + printable(label) + "': '..' is not allowed");
  }
}

}  // namespace resurgo
