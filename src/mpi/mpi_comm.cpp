// Comm over MPI (include/resurgo/mpi.hpp). Point-to-point and collective
// calls on a duplicate of the application's communicator. The one collective
// with a deadline (allgather, used where a rank that never calls must not
// hang the others) gathers at rank 0 with non-blocking receives, so rank 0
// knows which ranks are missing and tells every rank that came.
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <vector>

#include "resurgo/errors.hpp"
#include "resurgo/mpi.hpp"

namespace resurgo {

namespace {

constexpr int kBytesTag = 1;
constexpr int kGatherTag = 2;
constexpr int kAnswerTag = 3;
constexpr std::size_t kMessagePiece = std::size_t{1} << 30;  // MPI counts are int

void check(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw StateError(std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

void pause_briefly() {
  const timespec pause{0, 100'000};  // 0.1 ms: the ranks of a collective arrive within milliseconds
  ::nanosleep(&pause, nullptr);
}

// Node of each rank: the shared-memory split, numbered by lowest rank.
int find_node(MPI_Comm comm, int rank) {
  MPI_Comm shared = MPI_COMM_NULL;
  check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared), "MPI_Comm_split_type");
  int leader = rank;
  check(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, shared), "MPI_Allreduce");
  MPI_Comm_free(&shared);
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<int> leaders(static_cast<std::size_t>(size));
  check(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm), "MPI_Allgather");
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  return static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), leader) - leaders.begin());
}

class MpiComm final : public Comm {
 public:
  // Takes ownership of `comm` (a duplicate made for the store). A `polite`
  // communicator waits by testing and sleeping instead of spinning in MPI:
  // the store's job thread uses one, so that waiting for the other ranks
  // does not take a core from the application.
  MpiComm(MPI_Comm comm, int node, bool polite) : comm_(comm), node_(node), polite_(polite) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    threads_may_call_ = provided == MPI_THREAD_MULTIPLE;
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node() const override { return node_; }
  bool threads_may_call() const override { return threads_may_call_; }

  long allreduce_min(long value) override {
    long smallest = value;
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(&value, &smallest, 1, MPI_LONG, MPI_MIN, comm_, &request), "MPI_Iallreduce");
    complete({request});
    return smallest;
  }
  void barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    complete({request});
  }

  void send(int to_rank, const void* data, std::size_t bytes) override {
    std::vector<MPI_Request> requests;
    post_send(to_rank, static_cast<const char*>(data), bytes, requests);
    complete(std::move(requests));
  }
  void receive(int from_rank, void* data, std::size_t bytes) override {
    std::vector<MPI_Request> requests;
    post_receive(from_rank, static_cast<char*>(data), bytes, requests);
    complete(std::move(requests));
  }
  // Both directions at once: the two sides may need different numbers of pieces.
  void exchange(int to_rank, const void* out, std::size_t out_bytes, int from_rank, void* in,
                std::size_t in_bytes) override {
    std::vector<MPI_Request> requests;
    post_send(to_rank, static_cast<const char*>(out), out_bytes, requests);
    post_receive(from_rank, static_cast<char*>(in), in_bytes, requests);
    complete(std::move(requests));
  }

  std::unique_ptr<Comm> duplicate() override {
    MPI_Comm copy = MPI_COMM_NULL;
    check(MPI_Comm_dup(comm_, &copy), "MPI_Comm_dup");
    return std::make_unique<MpiComm>(copy, node_, true);
  }

  std::vector<long> allgather(long value, double timeout_seconds) override {
    ++sequence_;
    if (timeout_seconds <= 0) {
      std::vector<long> values(static_cast<std::size_t>(size_));
      MPI_Request request = MPI_REQUEST_NULL;
      check(MPI_Iallgather(&value, 1, MPI_LONG, values.data(), 1, MPI_LONG, comm_, &request), "MPI_Iallgather");
      complete({request});
      return values;
    }
    const Deadline deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(timeout_seconds));
    if (rank_ == 0) return gather_at_root(value, deadline, timeout_seconds);
    // The others wait longer than rank 0, so that rank 0's verdict (which
    // names the missing ranks) reaches them; they give up only when rank 0
    // itself does not come.
    return gather_from_root(value, deadline + (deadline - std::chrono::steady_clock::now()) + std::chrono::seconds(1),
                            timeout_seconds);
  }

 private:
  using Deadline = std::chrono::steady_clock::time_point;

  void post_send(int to_rank, const char* data, std::size_t bytes, std::vector<MPI_Request>& requests) {
    do {
      const std::size_t piece = std::min(bytes, kMessagePiece);
      MPI_Request request = MPI_REQUEST_NULL;
      check(MPI_Isend(data, static_cast<int>(piece), MPI_BYTE, to_rank, kBytesTag, comm_, &request), "MPI_Isend");
      requests.push_back(request);
      data += piece;
      bytes -= piece;
    } while (bytes > 0);
  }
  void post_receive(int from_rank, char* data, std::size_t bytes, std::vector<MPI_Request>& requests) {
    do {
      const std::size_t piece = std::min(bytes, kMessagePiece);
      MPI_Request request = MPI_REQUEST_NULL;
      check(MPI_Irecv(data, static_cast<int>(piece), MPI_BYTE, from_rank, kBytesTag, comm_, &request), "MPI_Irecv");
      requests.push_back(request);
      data += piece;
      bytes -= piece;
    } while (bytes > 0);
  }

  // Until every request completed: MPI_Waitall, or (polite) tests with
  // sleeps growing from 50 us to 1 ms once a short spin did not do.
  void complete(std::vector<MPI_Request> requests) {
    if (!polite_) {
      check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
      return;
    }
    long pause_ns = 50'000;
    for (int tries = 0;; ++tries) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (done) return;
      if (tries < 100) continue;
      const timespec pause{0, pause_ns};
      ::nanosleep(&pause, nullptr);
      pause_ns = std::min(pause_ns * 2, 1'000'000L);
    }
  }
  // Messages: {sequence, value} to rank 0; {sequence, missing count, values
  // (or, when ranks are missing, 1 for each missing rank)} back.

  std::vector<long> gather_at_root(long value, Deadline deadline, double timeout_seconds) {
    std::vector<long> values(static_cast<std::size_t>(size_), 0);
    values[0] = value;
    std::vector<bool> arrived(static_cast<std::size_t>(size_), false);
    arrived[0] = true;
    std::vector<long> messages(2 * static_cast<std::size_t>(size_));
    std::vector<MPI_Request> requests(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    const auto post = [&](int from) {
      check(MPI_Irecv(&messages[2 * static_cast<std::size_t>(from)], 2, MPI_LONG, from, kGatherTag, comm_,
                      &requests[static_cast<std::size_t>(from)]),
            "MPI_Irecv");
    };
    for (int from = 1; from < size_; ++from) post(from);
    int missing = size_ - 1;
    while (missing > 0 && std::chrono::steady_clock::now() < deadline) {
      int done = 0;
      int index = MPI_UNDEFINED;
      check(MPI_Testany(size_, requests.data(), &index, &done, MPI_STATUS_IGNORE), "MPI_Testany");
      if (!done || index == MPI_UNDEFINED) {
        pause_briefly();
        continue;
      }
      const std::size_t from = static_cast<std::size_t>(index);
      if (messages[2 * from] != sequence_) {  // a late answer to an earlier call: drop it
        post(index);
        continue;
      }
      values[from] = messages[2 * from + 1];
      arrived[from] = true;
      --missing;
    }
    for (MPI_Request& request : requests) {
      if (request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
    std::vector<long> answer{sequence_, missing};
    for (int rank = 0; rank < size_; ++rank) {
      answer.push_back(missing == 0 ? values[static_cast<std::size_t>(rank)] : arrived[static_cast<std::size_t>(rank)] ? 0 : 1);
    }
    for (int to = 1; to < size_; ++to) {
      if (!arrived[static_cast<std::size_t>(to)]) continue;
      check(MPI_Send(answer.data(), static_cast<int>(answer.size()), MPI_LONG, to, kAnswerTag, comm_), "MPI_Send");
    }
    if (missing > 0) throw_missing(answer, timeout_seconds);
    return values;
  }

  std::vector<long> gather_from_root(long value, Deadline deadline, double timeout_seconds) {
    const long message[2] = {sequence_, value};
    check(MPI_Send(message, 2, MPI_LONG, 0, kGatherTag, comm_), "MPI_Send");
    std::vector<long> answer(2 + static_cast<std::size_t>(size_));
    for (;;) {
      MPI_Request request = MPI_REQUEST_NULL;
      check(MPI_Irecv(answer.data(), static_cast<int>(answer.size()), MPI_LONG, 0, kAnswerTag, comm_, &request),
            "MPI_Irecv");
      int done = 0;
      while (!done && std::chrono::steady_clock::now() < deadline) {
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (!done) pause_briefly();
      }
      if (!done) {
        MPI_Cancel(&request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        throw StateError("rank " + std::to_string(rank_) + ": rank 0 did not answer within " +
                         std::to_string(timeout_seconds) + " s (mpi.timeout): it has not made the same call, or " +
                         "the job is out of step after an earlier timeout");
      }
      if (answer[0] == sequence_) break;  // else an answer to an earlier call: wait for ours
    }
    if (answer[1] > 0) throw_missing(answer, timeout_seconds);
    return std::vector<long>(answer.begin() + 2, answer.end());
  }

  [[noreturn]] void throw_missing(const std::vector<long>& answer, double timeout_seconds) const {
    std::string ranks;
    for (int rank = 0; rank < size_; ++rank) {
      if (answer[2 + static_cast<std::size_t>(rank)] != 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
    }
    throw StateError("rank " + std::to_string(rank_) + ": rank(s) " + ranks + " did not make the same call within " +
                     std::to_string(timeout_seconds) + " s (mpi.timeout); every rank of the job must call it");
  }

  MPI_Comm comm_;
  int node_;
  bool polite_;
  int rank_ = 0;
  int size_ = 1;
  bool threads_may_call_ = false;
  long sequence_ = 0;
};

}  // namespace

std::shared_ptr<Comm> mpi_comm(MPI_Comm comm) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    throw StateError("mpi_comm: MPI is not initialized (call MPI_Init or MPI_Init_thread first, and open stores "
                     "before MPI_Finalize)");
  }
  if (comm == MPI_COMM_NULL) throw InvalidArgumentError("mpi_comm: the communicator is MPI_COMM_NULL");
  MPI_Comm copy = MPI_COMM_NULL;
  check(MPI_Comm_dup(comm, &copy), "MPI_Comm_dup");
  int rank = 0;
  MPI_Comm_rank(copy, &rank);
  return std::make_shared<MpiComm>(copy, find_node(copy, rank), false);
}

}  // namespace resurgo
