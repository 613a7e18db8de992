// The C API of automatic checkpointing (resurgo/auto.h) through the real
// runtime: a small stencil program checkpointed by rsg_auto_trigger and
// restored by replay (or fast-forward) in a new store and runtime; return
// codes and messages of bad input.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "resurgo/auto.h"
#include "resurgo/auto.hpp"
#include "resurgo/resurgo.h"
#include "levels_in_temp_dir.h"

namespace {

constexpr int kCells = 12;                 // interior cells per side
constexpr int kSide = kCells + 2;          // with the halo ring of depth 1
constexpr int kSteps = 10;
constexpr int kCheckpointStep = 4;

// How the program names its checkpoint location.
enum class Location { kRuntimeChooses, kFastForward, kDatlist };

// What the program's control flow carries from step to step: the fast-forward payload.
struct Payload {
  int step = 0;
  double total = 0;  // sum of every residual queried
};

// A heat-like stencil on u (halo 1), with a coefficient field written only
// by the initialisation, and a branch that depends on a queried residual.
class Program {
 public:
  explicit Program(rsg_auto* runtime)
      : rt_(runtime), u_id_(declare("u", u, 1)), v_id_(declare("v", v, 1)), coeff_id_(declare("coeff", coeff, 0)) {}

  // Runs every step; asks for a checkpoint in step kCheckpointStep.
  void run(Location location) {
    if (loop("init", {{u_id_, RSG_AUTO_WRITE, RSG_AUTO_ALL}, {coeff_id_, RSG_AUTO_WRITE, RSG_AUTO_ALL}})) {
      for (size_t i = 0; i < u.size(); ++i) {
        u[i] = static_cast<double>(i % 7) * 0.25;
        coeff[i] = 0.2 + static_cast<double>(i % 5) * 0.01;
      }
    }
    ASSERT_EQ(rsg_auto_initphase_done(rt_), RSG_OK) << rsg_last_error();
    for (payload.step = 0; payload.step < kSteps; ++payload.step) {
      if (payload.step == kCheckpointStep) {
        ASSERT_EQ(rsg_auto_trigger(rt_), RSG_OK) << rsg_last_error();
      }
      if (fast_forward(location)) resumed_at_step = payload.step;
      step();
    }
  }

  std::vector<double> u = std::vector<double>(kSide * kSide);
  std::vector<double> v = std::vector<double>(kSide * kSide);
  std::vector<double> coeff = std::vector<double>(kSide * kSide);
  Payload payload;
  int resumed_at_step = -1;  // the step a fast-forward restore continued from

 private:
  int declare(const char* name, std::vector<double>& field, int halo) {
    const long long shape[2] = {kSide, kSide};
    int id = -1;
    EXPECT_EQ(rsg_auto_dataset(rt_, name, field.data(), field.size() * sizeof(double), "float64", 2, shape, halo, &id),
              RSG_OK)
        << rsg_last_error();
    return id;
  }

  static size_t at(int j, int i) { return static_cast<size_t>(j * kSide + i); }

  bool loop(const char* name, std::initializer_list<rsg_auto_arg> args) {
    int execute = -1;
    EXPECT_EQ(rsg_auto_loop(rt_, name, args.begin(), args.size(), &execute), RSG_OK) << rsg_last_error();
    return execute == 1;
  }

  bool fast_forward(Location location) {
    int restored = 0;
    if (location == Location::kFastForward) {
      EXPECT_EQ(rsg_auto_fastfw(rt_, &payload, sizeof payload, &restored), RSG_OK) << rsg_last_error();
    } else if (location == Location::kDatlist) {
      const int minimal[] = {u_id_};
      EXPECT_EQ(rsg_auto_datlist(rt_, minimal, 1, &payload, sizeof payload, &restored), RSG_OK) << rsg_last_error();
    }
    return restored == 1;
  }

  void step() {
    if (loop("boundary", {{u_id_, RSG_AUTO_WRITE, RSG_AUTO_HALO}})) {
      for (int k = 0; k < kSide; ++k) {
        u[at(0, k)] = u[at(kSide - 1, k)] = u[at(k, 0)] = u[at(k, kSide - 1)] = 1.0;
      }
    }
    if (loop("stencil", {{u_id_, RSG_AUTO_READ, RSG_AUTO_ALL},
                         {coeff_id_, RSG_AUTO_READ, RSG_AUTO_ALL},
                         {v_id_, RSG_AUTO_WRITE, RSG_AUTO_INTERIOR}})) {
      for (int j = 1; j <= kCells; ++j) {
        for (int i = 1; i <= kCells; ++i) {
          const double laplace =
              u[at(j - 1, i)] + u[at(j + 1, i)] + u[at(j, i - 1)] + u[at(j, i + 1)] - 4 * u[at(j, i)];
          v[at(j, i)] = u[at(j, i)] + coeff[at(j, i)] * laplace;
        }
      }
    }
    if (loop("copy", {{v_id_, RSG_AUTO_READ, RSG_AUTO_INTERIOR}, {u_id_, RSG_AUTO_WRITE, RSG_AUTO_INTERIOR}})) {
      for (int j = 1; j <= kCells; ++j) {
        for (int i = 1; i <= kCells; ++i) u[at(j, i)] = v[at(j, i)];
      }
    }
    double residual = 0;
    if (loop("residual", {{u_id_, RSG_AUTO_READ, RSG_AUTO_INTERIOR}})) {
      for (int j = 1; j <= kCells; ++j) {
        for (int i = 1; i <= kCells; ++i) residual += u[at(j, i)];
      }
    }
    ASSERT_EQ(rsg_auto_query(rt_, &residual, sizeof residual), RSG_OK) << rsg_last_error();
    payload.total += residual;
    // Control flow on a queried value: a replay must take the same branches.
    if (residual > 80 && loop("damp", {{u_id_, RSG_AUTO_READ_WRITE, RSG_AUTO_INTERIOR}})) {
      for (int j = 1; j <= kCells; ++j) {
        for (int i = 1; i <= kCells; ++i) u[at(j, i)] *= 0.5;
      }
    }
  }

  rsg_auto* rt_;
  int u_id_;
  int v_id_;
  int coeff_id_;
};

// Bit-for-bit equality (-0.0 and NaN payloads included).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

class AutoCApiTest : public LevelsInTempDirTest {
 protected:

  rsg_store* open_store() {
    rsg_store* store = nullptr;
    EXPECT_EQ(rsg_open(nullptr, "auto-c", &store), RSG_OK) << rsg_last_error();
    return store;
  }

  // A checkpoint requested by rsg_auto_trigger, then a second store and
  // runtime in the same process that restores it and finishes bit-identical.
  void expect_restart_bit_identical(Location location) {
    rsg_store* store = open_store();
    rsg_auto* rt = nullptr;
    ASSERT_EQ(rsg_auto_attach(store, nullptr, &rt), RSG_OK) << rsg_last_error();
    Program first(rt);
    first.run(location);
    rsg_auto_checkpoint_report checkpoint{};
    ASSERT_EQ(rsg_auto_last_checkpoint(rt, &checkpoint), RSG_OK);
    ASSERT_GE(checkpoint.version, 0) << "trigger() led to no checkpoint";
    EXPECT_GT(checkpoint.dataset_bytes, 0u);
    ASSERT_EQ(rsg_wait(store, checkpoint.version, RSG_L2), RSG_OK) << rsg_last_error();
    ASSERT_EQ(rsg_auto_detach(rt), RSG_OK);
    ASSERT_EQ(rsg_close(store), RSG_OK) << rsg_last_error();

    store = open_store();
    ASSERT_EQ(rsg_auto_attach(store, nullptr, &rt), RSG_OK) << rsg_last_error();
    int restoring = 0;
    ASSERT_EQ(rsg_auto_restoring(rt, &restoring), RSG_OK);
    EXPECT_EQ(restoring, 1);
    Program second(rt);
    second.run(location);
    ASSERT_EQ(rsg_auto_restoring(rt, &restoring), RSG_OK);
    EXPECT_EQ(restoring, 0);
    rsg_auto_restore_report restore{};
    ASSERT_EQ(rsg_auto_last_restore(rt, &restore), RSG_OK);
    EXPECT_EQ(restore.version, checkpoint.version);
    EXPECT_EQ(restore.fast_forward, location == Location::kRuntimeChooses ? 0 : 1);
    if (location == Location::kRuntimeChooses) {
      EXPECT_EQ(restore.loop_index, checkpoint.loop_index);
      EXPECT_GT(restore.skipped_loops, 0u);
      EXPECT_GT(restore.replayed_queries, 0u);
    } else {
      EXPECT_EQ(second.resumed_at_step, kCheckpointStep);
      EXPECT_STREQ(checkpoint.location, location == Location::kFastForward ? "fastfw" : "datlist");
    }
    EXPECT_TRUE(same_bits(second.u, first.u));
    EXPECT_TRUE(same_bits(second.v, first.v));
    EXPECT_TRUE(same_bits(second.coeff, first.coeff));
    EXPECT_TRUE(same_bits(std::vector{second.payload.total}, std::vector{first.payload.total}));
    ASSERT_EQ(rsg_auto_detach(rt), RSG_OK);
    ASSERT_EQ(rsg_close(store), RSG_OK) << rsg_last_error();
  }
};

TEST_F(AutoCApiTest, TriggeredCheckpointRestoresByReplay) {
  expect_restart_bit_identical(Location::kRuntimeChooses);
}

TEST_F(AutoCApiTest, FastForwardRestoresThePayload) {
  expect_restart_bit_identical(Location::kFastForward);
}

TEST_F(AutoCApiTest, DatlistRestoresThePayload) {
  expect_restart_bit_identical(Location::kDatlist);
}

void collect(const char* line, void* context) { static_cast<std::vector<std::string>*>(context)->push_back(line); }

TEST_F(AutoCApiTest, OptionsReachTheRuntime) {
  rsg_auto_options options;
  ASSERT_EQ(rsg_auto_options_init(&options), RSG_OK);
  EXPECT_EQ(options.region_timeout_loops, resurgo::autockpt::Options{}.region_timeout_loops);
  EXPECT_EQ(options.flush_on_termination, 1);
  options.interval_loops = 7;  // no trigger: the interval alone asks for checkpoints
  options.diagnostics = 1;
  std::vector<std::string> lines;
  options.report = collect;
  options.report_context = &lines;
  rsg_store* store = open_store();
  rsg_auto* rt = nullptr;
  ASSERT_EQ(rsg_auto_attach(store, &options, &rt), RSG_OK) << rsg_last_error();
  double x[4] = {};
  int id = -1;
  ASSERT_EQ(rsg_auto_dataset(rt, "x", x, sizeof x, nullptr, 0, nullptr, 0, &id), RSG_OK) << rsg_last_error();
  for (int i = 0; i < 30; ++i) {
    const rsg_auto_arg args[] = {{id, RSG_AUTO_INCREMENT, RSG_AUTO_ALL}};
    int execute = 0;
    ASSERT_EQ(rsg_auto_loop(rt, "add", args, 1, &execute), RSG_OK) << rsg_last_error();
    ASSERT_EQ(execute, 1);
    for (double& value : x) value += 1;
  }
  unsigned long long index = 0;
  ASSERT_EQ(rsg_auto_loop_index(rt, &index), RSG_OK);
  EXPECT_EQ(index, 30u);
  rsg_auto_checkpoint_report checkpoint{};
  ASSERT_EQ(rsg_auto_last_checkpoint(rt, &checkpoint), RSG_OK);
  EXPECT_GE(checkpoint.version, 0);
  EXPECT_STREQ(checkpoint.location, "add");
  EXPECT_FALSE(lines.empty()) << "diagnostics 1 reports each checkpoint through the callback";
  unsigned long long bookkeeping = 0;
  EXPECT_EQ(rsg_auto_bookkeeping_bytes(rt, &bookkeeping), RSG_OK);
  EXPECT_EQ(rsg_auto_detach(rt), RSG_OK);
  EXPECT_EQ(rsg_close(store), RSG_OK) << rsg_last_error();
}

TEST_F(AutoCApiTest, BadInputIsRefusedWithAMessage) {
  rsg_auto* rt = nullptr;
  EXPECT_EQ(rsg_auto_options_init(nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_attach(nullptr, nullptr, &rt), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("rsg_auto_attach"), std::string::npos);
  rsg_store* store = open_store();
  EXPECT_EQ(rsg_auto_attach(store, nullptr, nullptr), RSG_EINVAL);
  ASSERT_EQ(rsg_auto_attach(store, nullptr, &rt), RSG_OK) << rsg_last_error();
  EXPECT_STREQ(rsg_last_error(), "");

  double u[16] = {};
  int id = -1;
  EXPECT_EQ(rsg_auto_dataset(rt, nullptr, u, sizeof u, nullptr, 0, nullptr, 0, &id), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_dataset(rt, "u", nullptr, sizeof u, nullptr, 0, nullptr, 0, &id), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_dataset(rt, "u", u, sizeof u, "float64", 2, nullptr, 1, &id), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("'u'"), std::string::npos) << rsg_last_error();
  const long long shape[2] = {4, 4};
  ASSERT_EQ(rsg_auto_dataset(rt, "u", u, sizeof u, "float64", 2, shape, 1, &id), RSG_OK) << rsg_last_error();

  int execute = -1;
  const rsg_auto_arg bad_access[] = {{id, 7, RSG_AUTO_ALL}};
  EXPECT_EQ(rsg_auto_loop(rt, "sweep", bad_access, 1, &execute), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("unknown access 7"), std::string::npos) << rsg_last_error();
  EXPECT_NE(std::string(rsg_last_error()).find("'sweep'"), std::string::npos) << rsg_last_error();
  const rsg_auto_arg bad_range[] = {{id, RSG_AUTO_READ, -1}};
  EXPECT_EQ(rsg_auto_loop(rt, "sweep", bad_range, 1, &execute), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("unknown range -1"), std::string::npos) << rsg_last_error();
  const rsg_auto_arg unknown_dataset[] = {{id + 41, RSG_AUTO_READ, RSG_AUTO_ALL}};
  EXPECT_EQ(rsg_auto_loop(rt, "sweep", unknown_dataset, 1, &execute), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("sweep"), std::string::npos) << rsg_last_error();
  EXPECT_EQ(rsg_auto_loop(rt, "sweep", nullptr, 1, &execute), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_loop(rt, nullptr, bad_access, 0, &execute), RSG_EINVAL);
  const rsg_auto_arg good[] = {{id, RSG_AUTO_READ, RSG_AUTO_INTERIOR}};
  EXPECT_EQ(rsg_auto_loop(rt, "sweep", good, 1, nullptr), RSG_EINVAL);
  EXPECT_EQ(execute, -1) << "a refused call leaves its output alone";
  ASSERT_EQ(rsg_auto_loop(rt, "sweep", good, 1, &execute), RSG_OK) << rsg_last_error();
  EXPECT_EQ(execute, 1);

  EXPECT_EQ(rsg_auto_query(rt, nullptr, 8), RSG_EINVAL);
  int restored = 0;
  EXPECT_EQ(rsg_auto_fastfw(rt, nullptr, 8, &restored), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_fastfw(rt, nullptr, 0, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_datlist(rt, nullptr, 2, nullptr, 0, &restored), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_restoring(rt, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_loop_index(nullptr, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_last_checkpoint(rt, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_last_restore(rt, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_trigger(nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_auto_initphase_done(nullptr), RSG_EINVAL);
  rsg_auto_checkpoint_report none{};
  ASSERT_EQ(rsg_auto_last_checkpoint(rt, &none), RSG_OK);
  EXPECT_EQ(none.version, -1);
  EXPECT_EQ(rsg_auto_detach(rt), RSG_OK);
  EXPECT_EQ(rsg_auto_detach(nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_close(store), RSG_OK) << rsg_last_error();
}

}  // namespace
