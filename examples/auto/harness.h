// What the automatic-checkpointing mini-apps share: their command line, the
// store they open, the resurgo::autockpt::Runtime they declare their loops
// to (or none, for the baseline), the checkpoint and kill points, and the
// RESULT line the restart tests and bench/auto.py read.
//
// Command line (every option has a default):
//   --store NAME       store name                         (auto)
//   --dir DIR          L2 directory of the store          (checkpoints)
//   --size N           grid of N x N cells                (app's default)
//   --steps S          time steps                         (app's default)
//   --mode M           none | noinfo | initphase | fastfw | datlist | trigger
//                      none: no runtime at all (the baseline);
//                      noinfo: loops and queries declared, nothing else;
//                      initphase: + initphase_done();
//                      fastfw: + fastfw() at the top of each step (payload:
//                        the step and the simulated time);
//                      datlist: + datlist() of the app's hand-minimal
//                        datasets at the top of each step, with the payload;
//                      trigger: as fastfw, the checkpoint requested by
//                        trigger() right before fastfw()   (initphase)
//   --checkpoint-step K  a checkpoint is requested during step K (1-based):
//                      trigger mode calls trigger() at the top of the step,
//                      the other modes call it after the step's first loop,
//                      so the runtime itself finds where to start (-1: none)
//   --checkpoint-every E  and again every E steps after step K   (0: once)
//   --kill-step K      at the top of step K the run waits until the
//                      checkpoint is durable at L2 and kills itself with
//                      SIGKILL; when the runtime has not closed the
//                      checkpoint's region yet (it may span steps), at the
//                      top of the first later step where it has  (-1: none)
//   --term-step K      the same with SIGTERM (the in-memory flush path)
//   --in-memory        the store keeps versions only in memory and writes
//                      the newest to L2 on SIGTERM/SIGINT
//   --synchronous      checkpoints are written before trigger's region ends
//                      (buffer too small for the state: no thread offload)
//   --diagnostics D    autockpt::Options::diagnostics         (0)
//   --dump FILE        write every dataset's final bytes, in declaration
//                      order, to FILE (the restart tests compare them)
//
// The RESULT line is one JSON object: "app", "mode", "steps", "size",
// "checksum" (FNV-1a 64 of every dataset's final bytes in declaration
// order, as 16 hex digits),
// "iteration_seconds" (median over the steps executed, not replayed),
// "all_dataset_bytes", "hand_minimal_bytes", and when a checkpoint was taken
// "checkpoint": {version, loop_index, location, saved, halos, dataset_bytes,
// query_log_bytes, payload_bytes, staged_bytes, region_loops, timed_out,
// blocking_seconds} (the last one) and "checkpoints" (every one taken, in
// order, the same fields), and when the run restored "restore": {version,
// loop_index, skipped_loops, replayed_queries, fast_forward, read_seconds,
// replay_seconds}.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "resurgo/auto.hpp"

namespace mini {

enum class Mode { kNone, kNoInfo, kInitPhase, kFastForward, kDatlist, kTrigger };

struct RunOptions {
  std::string app;  // set by the app: "tealeaf" or "cloverleaf"
  std::string store = "auto";
  std::string dir = "checkpoints";
  int size = 0;   // 0: the app's default
  int steps = 0;  // 0: the app's default
  Mode mode = Mode::kInitPhase;
  int checkpoint_step = -1;
  int checkpoint_every = 0;
  int kill_step = -1;
  int term_step = -1;
  bool in_memory = false;
  bool synchronous = false;
  int diagnostics = 0;
  std::string dump;
};

// Parses the command line above; exits with a usage message on bad input.
RunOptions parse(const std::string& app, int argc, char** argv);

// A 2-D field of doubles with a halo ring, row-major, (ny + 2h) x (nx + 2h).
struct Field {
  std::string name;
  int nx = 0, ny = 0, halo = 0;
  std::vector<double> values;
  int id = -1;  // the runtime's dataset id (-1 in mode none)
  double& at(int j, int i) { return values[static_cast<std::size_t>(j + halo) * (nx + 2 * halo) + (i + halo)]; }
  double at(int j, int i) const {
    return values[static_cast<std::size_t>(j + halo) * (nx + 2 * halo) + (i + halo)];
  }
};

// A 1-D array along one axis of the mesh (coordinates, spacings), with
// `halo` entries before the first cell: entry i, from -halo, at [i + halo].
struct Axis {
  std::vector<double>& values;
  int id = -1;  // the runtime's dataset id (-1 in mode none)
  int halo = 0;
  double& operator[](int i) { return values[static_cast<std::size_t>(i + halo)]; }
  double operator[](int i) const { return values[static_cast<std::size_t>(i + halo)]; }
};

// The 1-D geometry of a structured 2-D mesh, named as OPS's TeaLeaf and
// CloverLeaf name it: cell centres and widths, vertices and their spacings,
// along x and y.
struct Geometry {
  Axis cellx, celldx, vertexx, vertexdx, celly, celldy, vertexy, vertexdy;
};

// Loop arguments: fields are computed over their interior unless a range
// says otherwise; axes are read or written whole.
using resurgo::autockpt::Access;
using resurgo::autockpt::Arg;
using resurgo::autockpt::Range;
inline Arg reads(const Field& f, Range range = Range::kInterior) { return {f.id, Access::kRead, range}; }
inline Arg writes(const Field& f, Range range = Range::kInterior) { return {f.id, Access::kWrite, range}; }
inline Arg updates(const Field& f) { return {f.id, Access::kReadWrite, Range::kInterior}; }
inline Arg reads(const Axis& a) { return {a.id, Access::kRead, Range::kAll}; }
inline Arg writes(const Axis& a) { return {a.id, Access::kWrite, Range::kAll}; }

// The app's side of one run: owns the store and the runtime, and answers the
// app's calls in the way its mode asks.
class Driver {
 public:
  explicit Driver(RunOptions options);
  ~Driver();

  const RunOptions& options() const { return options_; }

  // Declares `field` (allocated here, zero-filled) as a dataset.
  Field& field(const std::string& name, int nx, int ny, int halo);
  // A 1-D dataset (a row of `count` values) as an axis of the mesh, `halo`
  // of its entries before the first cell.
  Axis axis(const std::string& name, int count, int halo);
  // The eight axes of an nx x ny mesh with a halo of `halo` cells.
  Geometry geometry(int nx, int ny, int halo);

  // Whether to execute the loop (false while replaying; true in mode none).
  bool loop(std::string_view name, std::initializer_list<resurgo::autockpt::Arg> args);
  // A reduction's result going to the app's control flow.
  double query(double value);

  void initphase_done();  // called by the app; forwarded only from mode initphase on

  // At the top of each step. `step` and `time` are the app's loop counter
  // and simulated time; `minimal` its hand-minimal datasets (for datlist).
  // Handles the kill/term points and the checkpoint request, and calls
  // fastfw()/datlist() in those modes: when that restores, `step` and `time`
  // are overwritten from the payload and true is returned (the app then
  // continues with that step).
  bool step_begins(int& step, double& time, std::span<Field* const> minimal);
  // After the first loop of each step: the checkpoint request of the modes
  // that let the runtime find the location.
  void first_loop_done(int step);
  // The time of one executed step, for iteration_seconds.
  void step_ends(double seconds);

  // Prints RESULT, writes --dump.
  void finish(std::uint64_t hand_minimal_bytes);

 private:
  RunOptions options_;
  std::unique_ptr<resurgo::Store> store_;
  std::unique_ptr<resurgo::autockpt::Runtime> runtime_;
  std::vector<std::unique_ptr<Field>> fields_;  // every dataset in declaration order; an axis is one row
  std::vector<double> step_seconds_;
  bool replaying_step_ = false;  // the current step began in replay: not timed
  nlohmann::ordered_json checkpoints_ = nlohmann::ordered_json::array();  // every checkpoint taken, in order
};

}  // namespace mini
