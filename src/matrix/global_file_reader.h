// Reading a global-layout file (global_file.h): its head, checked before
// any element is read, and the check of the part sums against its table.
// read_global() uses both (rank 0 reads the head, the ranks add the sums of
// what each read); read_global_file() reads a whole file in one process,
// without MPI (include/resurgo/global_file.hpp; global_file_open.cpp opens the
// path, tests/fuzz/global_fuzzer.cpp hands in memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "matrix/global_file.h"
#include "resurgo/env.hpp"
#include "resurgo/global_file.hpp"

namespace resurgo {

// The header and table of `file` (FormatError, CorruptionError or
// MismatchError naming it: messages start with `where`), checked against
// `here` (the reader's shape and element size), or, without one, against
// the sizes the file's own shape implies.
std::vector<std::byte> read_global_head(const ReadableFile& file, const GlobalHeader* here, const std::string& where);

// CorruptionError naming the first part whose sum (`found`) differs from
// the table's; `consequence` says what became of what was read.
void check_global_parts(const std::vector<std::uint64_t>& found, const std::vector<std::uint64_t>& table,
                        const GlobalHeader& written, const std::string& where, const std::string& consequence);

// read_global_file_header(), read_global_file() and verify_global_file()
// of an open file; messages start with `where`.
GlobalFileHeader read_global_file_header(const ReadableFile& file, const std::string& where);
void read_global_file(const ReadableFile& file, const std::string& where, void* elements, std::size_t bytes);
GlobalFileHeader verify_global_file(const ReadableFile& file, const std::string& where);

}  // namespace resurgo
