// The "--name value" pairs of a benchmark program's command line, in
// order, for the programs whose every option takes a value: `usage(why)`,
// which must not return, when the last name lacks its value.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

template <class Usage>
std::vector<std::pair<std::string_view, std::string>> option_pairs(int argc, char** argv, Usage usage) {
  std::vector<std::pair<std::string_view, std::string>> pairs;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) usage("missing value after " + std::string(argv[i]));
    pairs.emplace_back(argv[i], argv[i + 1]);
  }
  return pairs;
}
