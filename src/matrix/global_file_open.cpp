// The serial readers of include/resurgo/global_file.hpp by path: the file opened
// through the Env (the checks of global_file_reader.cpp need only a
// ReadableFile, which the fuzzer hands in from memory).
#include <memory>
#include <string>

#include "matrix/global_file.h"
#include "matrix/global_file_reader.h"
#include "resurgo/env.hpp"
#include "resurgo/global_file.hpp"

namespace resurgo {

GlobalFileHeader read_global_file_header(const std::string& path) {
  return read_global_file_header(*Env::posix()->open(path), global_file_where("read_global_file", path));
}

void read_global_file(const std::string& path, void* elements, std::size_t bytes) {
  read_global_file(*Env::posix()->open(path), global_file_where("read_global_file", path), elements, bytes);
}

GlobalFileHeader verify_global_file(const std::string& path) {
  return verify_global_file(*Env::posix()->open(path), global_file_where("verify_global_file", path));
}

}  // namespace resurgo
