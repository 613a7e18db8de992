// MPI-IO calls of any size with every failure kept: the write and read
// loops of a global-layout file (matrix_io.cpp), apart so that
// tests/mpi/io_calls_check.cpp can hand them calls that move short counts.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace resurgo {

// The first failure of a sequence of MPI-IO calls. Every rank makes each
// collective call of the sequence even after a failure (files report errors
// rather than abort), so that no rank waits for another at a call it
// skipped; the caller agrees on the outcome at the end.
class IoStatus {
 public:
  void note(int status, const char* call) {
    if (status == MPI_SUCCESS || !failure_.empty()) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, text, &length);
    fail(std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
  }
  // A failure MPI did not report as one.
  void fail(std::string failure) {
    if (failure_.empty()) failure_ = std::move(failure);
  }
  bool ok() const { return failure_.empty(); }
  const std::string& failure() const { return failure_; }

 private:
  std::string failure_;
};

// Moves `total` bytes at file byte `offset` in MPI-IO calls of at most a
// GiB (MPI's counts are ints): call(offset, bytes, count, status) returns
// MPI's error code and leaves in `status` what the call moved. A call that
// moved less than asked is followed by one for the rest, as a pwrite()
// loop does: Open MPI's MPI_File_write_at passes a short write (a file
// size limit or a full disk past the first bytes) through as a success
// with a short count, and only the next call gets the error. A call that
// moves nothing fails the sequence. Nothing more after the first failure.
template <typename Byte, typename Call>
void in_calls(MPI_Offset offset, Byte* bytes, std::uint64_t total, IoStatus& status, const char* name,
              const Call& call) {
  constexpr std::uint64_t kCallBytes = std::uint64_t{1} << 30;
  for (std::uint64_t done = 0; done < total && status.ok();) {
    const int asked = static_cast<int>(std::min(kCallBytes, total - done));
    const MPI_Offset at = offset + static_cast<MPI_Offset>(done);
    MPI_Status moved_status;
    status.note(call(at, bytes + done, asked, &moved_status), name);
    int moved = 0;
    if (status.ok()) MPI_Get_count(&moved_status, MPI_BYTE, &moved);
    if (status.ok() && moved <= 0) {
      status.fail(std::string(name) + " moved none of " + std::to_string(asked) + " bytes at file byte " +
                  std::to_string(at) + " and reported no error");
    }
    done += static_cast<std::uint64_t>(std::max(moved, 0));
  }
}

}  // namespace resurgo
