// Automatic checkpointing from declared data accesses (docs/auto.md; the OPS
// paper, sections 4-5). The application declares its datasets and, before
// each parallel loop, the loop's name and the datasets it accesses with their
// access modes; every value the loops compute that reaches the application's
// control flow (reductions, queries) goes through query(). From that the
// runtime decides where a checkpoint starts and which datasets it holds: a
// dataset never written is not saved, a dataset whose first access after the
// checkpoint is a write-only one is dropped, the others are saved. A restarted
// run restores by replay: loops are skipped and queries answered from the
// checkpoint until the loop where the checkpoint was taken, where the
// datasets are restored and execution resumes.
//
// The model the application must respect: datasets are changed only by
// declared loops (or by code that runs again identically on restart, such as
// the initialisation before initphase_done), and the control flow depends
// only on values returned by query() and on the application's own
// deterministic code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "resurgo/resurgo.hpp"

namespace resurgo::autockpt {

// How a loop accesses a dataset. kWrite: every element the loop covers is
// written before it is read. kIncrement (a += into the dataset) reads the
// old value, as kReadWrite does.
enum class Access { kRead, kWrite, kReadWrite, kIncrement };

// The part of a dataset a loop covers: every element, the interior only
// (the halo ring of the dataset's halo depth keeps its old values), or the
// halo ring only (a boundary-condition or halo-update loop). A dataset with
// a halo is tracked as two parts, interior and ring, each saved or dropped
// on its own: a ring whose first access in a checkpointing region is a
// write is not saved even when the interior is.
enum class Range { kAll, kInterior, kHalo };

struct Arg {
  int dataset = -1;  // an id returned by Runtime::dataset()
  Access access = Access::kRead;
  Range range = Range::kAll;
};

struct Options {
  // When a checkpoint is due. interval_loops > 0: every that many loops;
  // else interval_seconds > 0: that many seconds after the previous one
  // (or the start); else the Store's need_checkpoint() when its [interval]
  // policy is set (docs/interval.md); else only after trigger().
  std::uint64_t interval_loops = 0;
  double interval_seconds = 0;
  // Loops a checkpointing region may span: when it is reached, the datasets
  // not met yet are saved and the region closes (Algorithm 1's timeout). A
  // region also closes when the loop it started at comes round again (a
  // whole period of the application). The location statistics use the same
  // windows.
  std::uint64_t region_timeout_loops = 20000;
  // 0: silent; 1: a line per checkpoint and per restore; 2: also the
  // checkpoint location chosen and the statistics behind it; 3: also every
  // dataset's decision (saved, dropped, halo only) in each region.
  int diagnostics = 0;
  // Debug mode for access modes that lie: hashes every dataset a loop
  // declares read-only before the loop and again at the next call into the
  // runtime, and throws MismatchError naming the loop and the dataset when
  // the loop changed it.
  bool check_access = false;
  // MPI jobs: loops between the ranks' exchanges of whether a checkpoint is
  // due (one small collective each time, posted to a thread under
  // MPI_THREAD_MULTIPLE and answered at the next exchange; a job of one
  // never exchanges).
  std::uint64_t agreement_loops = 64;
  // When the store keeps versions only in memory ([memory] every > 0,
  // local.every = persistent.every = 0): on SIGTERM or SIGINT the newest
  // automatic checkpoint is written to L2 before the signal takes its usual
  // course.
  bool flush_on_termination = true;
  // Where diagnostics go; standard error when empty.
  std::function<void(const std::string&)> report;
};

// The newest automatic checkpoint taken by this process.
struct CheckpointReport {
  int version = -1;
  std::uint64_t loop_index = 0;   // the loop (1-based) before which it was taken
  std::string location;           // that loop's name, or "fastfw" / "datlist"
  std::vector<std::string> saved; // datasets saved whole
  std::vector<std::string> halos; // datasets of which only the halo ring was saved
  std::uint64_t dataset_bytes = 0;   // bytes of the datasets' state saved (whole + halos)
  std::uint64_t query_log_bytes = 0; // bytes of the query log it holds
  std::uint64_t payload_bytes = 0;
  std::uint64_t staged_bytes = 0;    // bytes copied aside because a loop of the region was about to change them
  std::uint64_t region_loops = 0;    // loops the region spanned
  bool timed_out = false;            // closed by region_timeout_loops
  double blocking_seconds = 0;       // time the runtime held the application over the region
};

// The restore of this process, if it restarted from a checkpoint.
struct RestoreReport {
  int version = -1;
  std::uint64_t loop_index = 0;     // where execution resumed
  std::uint64_t skipped_loops = 0;  // loops replayed without executing them
  std::uint64_t replayed_queries = 0;
  bool fast_forward = false;        // resumed at fastfw()/datlist() from the payload
  double read_seconds = 0;          // reading the version (its log at attach, its datasets at the resume point)
  double replay_seconds = 0;        // from the end of the read (or of the initialisation phase,
                                    // which a run from scratch executes too) to the resume point
  int ranks = 0;  // the rank count that wrote it (0: a version written before it was recorded)
};

class Runtime {
 public:
  // Attaches to `store`, which must outlive the runtime. When the store
  // holds an automatic checkpoint, the runtime starts in restore mode: the
  // newest one's query log and payload are read now, its datasets at its
  // loop, straight into their memory.
  explicit Runtime(Store& store, Options options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Declares a dataset of `bytes` at `data`, named `name` (its label in the
  // checkpoint). A halo depth > 0 needs `type.shape` (row-major, the halo
  // counted in it): loops then name Range::kInterior or Range::kHalo.
  // Returns the id that loop arguments name.
  int dataset(const std::string& name, void* data, std::size_t bytes, const ElementType& type = {}, int halo = 0);
  // Declares a dataset that is this rank's block of a global array (MPI
  // jobs), as Store::protect does: `block.global_shape` and `block.offset`
  // row-major, `type.dtype` and `type.shape` (the block's) required, no
  // halo. When every dataset is declared so, an automatic checkpoint taken
  // on P ranks restarts on Q ranks (docs/auto.md, "Restart on another rank
  // count"); the ranks' blocks must then tile each global array, which is
  // checked before a checkpoint is written and before one is restored.
  int dataset(const std::string& name, void* data, std::size_t bytes, const ElementType& type,
              const GlobalBlock& block);

  // Call before each parallel loop. Returns whether to execute it: false
  // while replaying towards the restore point.
  bool loop(std::string_view name, std::span<const Arg> args);
  bool loop(std::string_view name, std::initializer_list<Arg> args) {
    return loop(name, std::span<const Arg>(args.begin(), args.size()));
  }

  // Every value computed by loops that the application reads (a reduction's
  // result, a norm, a dt) goes through here after the loop: the runtime logs
  // it, and while replaying overwrites `data` with the value the checkpointed
  // run saw. MismatchError when the replay asks for another size or at
  // another loop than the checkpointed run did.
  void query(void* data, std::size_t bytes);
  template <class T>
  T query(T value) {
    query(&value, sizeof value);
    return value;
  }

  // Ends the initialisation phase: datasets written so far count as never
  // written (not saved), and a restarted run executes this phase again
  // instead of skipping it.
  void initphase_done();

  // The checkpoint location named by the application, with its own state
  // (`payload`: the time step, the simulated time) saved in the checkpoint.
  // A due checkpoint starts here and the runtime still chooses the datasets.
  // When restoring, the first call restores the datasets and the payload
  // (into `payload`) and returns true: the application continues from the
  // payload's step without replaying loops. Returns false otherwise.
  bool fastfw(void* payload, std::size_t bytes);
  // As fastfw, with the datasets to save listed by the application (no
  // checkpointing region: they are saved right here). Without a payload the
  // restarted run replays up to this call.
  bool datlist(std::span<const int> datasets, void* payload = nullptr, std::size_t bytes = 0);

  // A checkpoint is due now, whatever the interval says.
  void trigger();

  bool restoring() const;
  std::uint64_t loop_index() const;  // loops declared so far (1-based index of the last)
  // The loop chosen (or named) as checkpoint location; empty before a choice.
  std::string location() const;
  std::optional<CheckpointReport> last_checkpoint() const;
  std::optional<RestoreReport> last_restore() const;
  // Bytes the runtime holds for its own bookkeeping: the query log, the
  // location statistics, staged copies and restore buffers.
  std::uint64_t bookkeeping_bytes() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace resurgo::autockpt
