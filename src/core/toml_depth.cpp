#include "core/toml_depth.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/printable.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Every byte toml++ might take as part of a bare key: counting a key of
// odd characters as a key is safe, missing one is not.
bool is_bare(char c) { return std::strchr(" \t\r\n.=[]{},#\"'", c) == nullptr; }

// Walks a TOML document as toml++ will, only far enough to count how deep
// each key and value nests. Whatever it does not recognise is skipped to
// the end of its line: that is not TOML, and toml++ refuses it there,
// before building anything after it. The walk recurses only into arrays and
// inline tables, each level checked before it is entered.
class DepthScanner {
 public:
  DepthScanner(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  void run() {
    if (at("\xEF\xBB\xBF")) advance(3);  // toml++ skips a UTF-8 byte order mark
    for (skip_lines(); !at_end(); skip_lines()) {
      if (peek() == '[') {
        table_header();
      } else {
        key_value(table_depth_);
      }
      skip_line();  // a comment, or what toml++ will refuse
    }
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  bool at(std::string_view what) const { return !at_end() && text_.substr(pos_).starts_with(what); }
  void advance(std::size_t bytes) { pos_ = std::min(pos_ + bytes, text_.size()); }

  void check(int depth) const {
    if (depth <= kMaxTomlDepth) return;
    const auto line = 1 + std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(pos_), '\n');
    throw ConfigError("configuration file '" + printable(path_) + "' line " + std::to_string(line) +
                      ": tables, dotted keys, arrays and inline tables nest deeper than " +
                      std::to_string(kMaxTomlDepth) +
                      " levels; a Resurgo configuration needs two ([section] and key = value)");
  }

  void skip_blanks() {
    while (!at_end() && is_blank(peek())) advance(1);
  }
  void skip_line() {
    while (!at_end() && peek() != '\n') advance(1);
  }
  // Blanks, newlines and comments.
  void skip_lines() {
    for (;;) {
      skip_blanks();
      if (peek() == '#') skip_line();
      if (peek() != '\n') return;
      advance(1);
    }
  }

  // [a.b.c] sets the depth of the keys below it; [[a.b]] adds the array's level.
  void table_header() {
    advance(1);
    int depth = 0;
    if (peek() == '[') {
      advance(1);
      depth = 1;
    }
    table_depth_ = keys(depth);
  }

  // A dotted key: returns `depth` plus its number of parts.
  int keys(int depth) {
    for (;;) {
      skip_blanks();
      if (!key_part()) return depth;
      check(++depth);
      skip_blanks();
      if (peek() != '.') return depth;
      advance(1);
    }
  }

  bool key_part() {
    if (peek() == '"' || peek() == '\'') {
      string();
      return true;
    }
    const std::size_t start = pos_;
    while (!at_end() && is_bare(peek())) advance(1);
    return pos_ > start;
  }

  void key_value(int depth) {
    const std::size_t start = pos_;
    depth = keys(depth);
    skip_blanks();
    if (pos_ == start || peek() != '=') return;  // not a key/value pair
    advance(1);
    skip_blanks();
    value(depth);
  }

  void value(int depth) {
    check(depth);
    if (peek() == '[') return array(depth);
    if (peek() == '{') return inline_table(depth);
    if (peek() == '"' || peek() == '\'') return string();
    while (!at_end() && std::strchr(",]}#\n", peek()) == nullptr) advance(1);  // number, date, boolean
  }

  // [ value, value, ... ] over any number of lines: elements one level down.
  void array(int depth) {
    advance(1);
    for (skip_lines(); !at_end() && peek() != ']'; skip_lines()) {
      const std::size_t start = pos_;
      if (peek() != ',') value(depth + 1);
      if (pos_ == start) advance(1);  // a separator, or a byte no value starts with
    }
    advance(1);
  }

  // { key = value, ... }: its keys count from the table's own depth.
  void inline_table(int depth) {
    advance(1);
    for (skip_lines(); !at_end() && peek() != '}'; skip_lines()) {
      const std::size_t start = pos_;
      if (peek() != ',') key_value(depth);
      if (pos_ == start) advance(1);
    }
    advance(1);
  }

  // "basic", 'literal', """multi-line basic""" or '''multi-line literal'''.
  void string() {
    const char quote = peek();
    const bool basic = quote == '"';
    const std::string triple(3, quote);
    const bool multi_line = at(triple);
    advance(multi_line ? 3 : 1);
    while (!at_end() && (multi_line || peek() != '\n')) {
      if (basic && peek() == '\\') {
        advance(1);
        if (multi_line || peek() != '\n') advance(1);  // the escaped byte, never the end of a one-line string
      } else if (multi_line ? at(triple) : peek() == quote) {
        advance(multi_line ? 3 : 1);
        for (int extra = 0; multi_line && extra < 2 && peek() == quote; ++extra) advance(1);  // """a""""
        return;
      } else {
        advance(1);
      }
    }
  }

  std::string_view text_;
  const std::string& path_;
  std::size_t pos_ = 0;
  int table_depth_ = 0;
};

}  // namespace

void check_toml_depth(std::string_view text, const std::string& path) { DepthScanner(text, path).run(); }

std::string read_toml_within_depth(const std::string& path) {
  // A directory opens, and its "size" would be reserved below.
  if (std::error_code error; std::filesystem::is_directory(path, error)) {
    throw ConfigError("configuration file '" + printable(path) + "' is a directory; give the path of a TOML file");
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    throw ConfigError("configuration file '" + printable(path) +
                      "' cannot be opened for reading: " + std::strerror(errno));
  }
  // Sized once (when the file has a size): growing by doubling would cost
  // up to three times the file while it is read.
  std::string text;
  if (const std::streamoff size = in.tellg(); size > 0) text.reserve(static_cast<std::size_t>(size));
  in.seekg(0);
  char piece[1 << 16];
  while (in.read(piece, sizeof piece) || in.gcount() > 0) text.append(piece, static_cast<std::size_t>(in.gcount()));
  if (in.bad()) {
    throw ConfigError("configuration file '" + printable(path) + "' cannot be read: " + std::strerror(errno));
  }
  check_toml_depth(text, path);
  return text;
}

}  // namespace resurgo
