// The loop of MPI-IO calls under a global-layout file's writes and reads
// (src/matrix/mpi_io_calls.h), handed calls that move what a test says
// instead of a file's: a call that moves part of what it was asked is
// followed by one for the rest, at the right file byte and memory address,
// until the whole range has moved; a call that moves nothing or reports an
// error ends the sequence with a failure that names it; a range past a GiB
// goes in calls of at most a GiB. (matrix_io_check slabs drives a real short
// write, under a file size limit, through write_global.) Prints
// "N passed, M failed" and exits non-zero on any failure.
//
//   io_calls_check   (1 rank)
#include <mpi.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "matrix/mpi_io_calls.h"
#include "mpi_checks.h"

namespace {

using resurgo::in_calls;
using resurgo::IoStatus;
using resurgo::mpi_checks::check;

// One call the loop made: where, into which byte of the range, how much.
struct Call {
  MPI_Offset at = 0;
  std::uint64_t byte = 0;
  int asked = 0;
};

// Address space for the ranges, never touched (the calls move nothing):
// reserved, so that the loop's addresses are valid ones.
const std::byte* reserved_range(std::uint64_t bytes) {
  void* range = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes of address space");
  return static_cast<const std::byte*>(range);
}

// Runs in_calls over `total` bytes at file byte `offset`; call k moves
// moves[k] bytes (the rest of what is asked once the list runs out), or
// returns `error` in place of its move when moves[k] is negative.
std::vector<Call> run(MPI_Offset offset, std::uint64_t total, const std::vector<int>& moves, IoStatus& status,
                      int error = MPI_ERR_IO) {
  static const std::byte* const start = reserved_range(std::uint64_t{3} << 30);
  std::vector<Call> calls;
  in_calls(offset, start, total, status, "MPI_File_write_at",
           [&](MPI_Offset at, const std::byte* from, int asked, MPI_Status* moved) {
             calls.push_back({at, static_cast<std::uint64_t>(from - start), asked});
             const std::size_t k = calls.size() - 1;
             const int count = k < moves.size() ? moves[k] : asked;
             if (count < 0) return error;
             MPI_Status_set_elements(moved, MPI_BYTE, count);
             return MPI_SUCCESS;
           });
  return calls;
}

bool same(const std::vector<Call>& calls, const std::vector<Call>& expected) {
  if (calls.size() != expected.size()) return false;
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const Call& a = calls[k];
    const Call& b = expected[k];
    if (a.at != b.at || a.byte != b.byte || a.asked != b.asked) return false;
  }
  return true;
}

void short_calls_go_on_for_the_rest() {
  IoStatus status;
  const auto calls = run(4096, 1000, {300, 1, 400}, status);
  check(status.ok() && same(calls, {{4096, 0, 1000}, {4396, 300, 700}, {4397, 301, 699}, {4797, 701, 299}}),
        "short moves of 300, 1 and 400 bytes are each followed by a call for the rest, at its file byte and address");
}

void a_call_that_moves_nothing_fails_the_sequence() {
  IoStatus status;
  const auto calls = run(0, 1000, {600, 0, 400}, status);
  check(calls.size() == 2 && !status.ok(), "a call that moves nothing ends the sequence");
  check(status.failure() == "MPI_File_write_at moved none of 400 bytes at file byte 600 and reported no error",
        "its failure names the call, what was asked and where: " + status.failure());
}

void an_error_ends_the_sequence_with_mpis_text() {
  IoStatus status;
  const auto calls = run(0, 1000, {600, -1, 400}, status);
  check(calls.size() == 2 && !status.ok(), "an error ends the sequence");
  check(status.failure().rfind("MPI_File_write_at failed: ", 0) == 0, "names the call: " + status.failure());
}

void a_failed_status_makes_no_call() {
  IoStatus status;
  status.fail("an earlier call failed");
  const auto calls = run(0, 1000, {}, status);
  check(calls.empty() && status.failure() == "an earlier call failed",
        "nothing more after the first failure, which is kept");
}

void more_than_a_gib_goes_in_calls_of_at_most_a_gib() {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  IoStatus status;
  const auto calls = run(8, 2 * kGiB + 5, {}, status);
  check(status.ok() && same(calls, {{8, 0, static_cast<int>(kGiB)},
                                    {static_cast<MPI_Offset>(8 + kGiB), kGiB, static_cast<int>(kGiB)},
                                    {static_cast<MPI_Offset>(8 + 2 * kGiB), 2 * kGiB, 5}}),
        "2 GiB + 5 bytes move in calls of a GiB, a GiB and 5 bytes");
  IoStatus short_status;
  const auto short_calls = run(0, 2 * kGiB, {static_cast<int>(kGiB - 1)}, short_status);
  check(short_status.ok() && same(short_calls, {{0, 0, static_cast<int>(kGiB)},
                                                {static_cast<MPI_Offset>(kGiB - 1), kGiB - 1, static_cast<int>(kGiB)},
                                                {static_cast<MPI_Offset>(2 * kGiB - 1), 2 * kGiB - 1, 1}}),
        "after a short first GiB, the next call starts where it stopped and asks a GiB again");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  try {
    short_calls_go_on_for_the_rest();
    a_call_that_moves_nothing_fails_the_sequence();
    an_error_ends_the_sequence_with_mpis_text();
    a_failed_status_makes_no_call();
    more_than_a_gib_goes_in_calls_of_at_most_a_gib();
  } catch (const std::exception& error) {
    check(false, std::string("unexpected error: ") + error.what());
  }
  return resurgo::mpi_checks::finish_counted("io_calls_check", "");
}
