// The automatic checkpointing runtime (src/auto, include/resurgo/auto.hpp):
// its pieces (halo ring, query log, control record, location statistics)
// and the whole runtime on a small stencil application whose control flow
// depends on queried values, restarted by replay and by fast-forward.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include <gtest/gtest.h>

#include "../sanitized.h"
#include "auto/checkpoint_record.h"
#include "auto/halo_ring.h"
#include "auto/location_strategy.h"
#include "auto/query_log.h"
#include "resurgo/auto.hpp"
#include "test_util.h"

namespace resurgo::autockpt {
namespace {

// ------------------------------------------------------------------ pieces

TEST(HaloRing, PacksTheElementsWithinTheDepthOfABorderAndUnpacksThem) {
  const std::vector<std::int64_t> shape{6, 7};
  const HaloRing ring(shape, sizeof(int), 2);
  EXPECT_EQ(ring.bytes(), (6 * 7 - 2 * 3) * sizeof(int));  // all but the 2 x 3 interior
  std::vector<int> array(42);
  std::iota(array.begin(), array.end(), 0);
  std::vector<std::byte> packed(ring.bytes());
  ring.pack(reinterpret_cast<const std::byte*>(array.data()), packed.data());
  std::vector<int> restored(42, -1);
  ring.unpack(packed.data(), reinterpret_cast<std::byte*>(restored.data()));
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 7; ++i) {
      const bool interior = j >= 2 && j < 4 && i >= 2 && i < 5;
      EXPECT_EQ(restored[j * 7 + i], interior ? -1 : j * 7 + i) << j << "," << i;
    }
  }
}

TEST(HaloRing, CountsTheRingOfAThreeDimensionalArray) {
  const HaloRing ring({5, 6, 7}, 8, 1);
  EXPECT_EQ(ring.bytes(), (5 * 6 * 7 - 3 * 4 * 5) * 8u);
}

TEST(HaloRing, RefusesAnExtentThatTheRingWouldCover) {
  EXPECT_THROW(HaloRing({4, 10}, 8, 2), InvalidArgumentError);
}

TEST(QueryLog, ReplaysTheValuesInOrder) {
  QueryLog log;
  const double a = 1.5;
  const std::int64_t b = 42;
  log.append(3, 7, &a, sizeof a);
  log.append(9, 8, &b, sizeof b);
  QueryReplay replay(log.encoded(), "the test");
  EXPECT_EQ(replay.count(), 2u);
  double got_a = 0;
  std::int64_t got_b = 0;
  replay.next(3, 7, "x", &got_a, sizeof got_a);
  replay.next(9, 8, "y", &got_b, sizeof got_b);
  EXPECT_EQ(got_a, a);
  EXPECT_EQ(got_b, b);
}

TEST(QueryLog, NamesTheLoopWhereAReplayAsksDifferently) {
  QueryLog log;
  const double a = 1.5;
  log.append(3, 7, &a, sizeof a);
  double got = 0;
  QueryReplay at_another_loop(log.encoded(), "the test");
  try {
    at_another_loop.next(4, 7, "norm", &got, sizeof got);
    FAIL() << "no MismatchError";
  } catch (const MismatchError& error) {
    EXPECT_NE(std::string(error.what()).find("loop 4 'norm'"), std::string::npos) << error.what();
  }
  QueryReplay of_another_size(log.encoded(), "the test");
  float small = 0;
  EXPECT_THROW(of_another_size.next(3, 7, "norm", &small, sizeof small), MismatchError);
  QueryReplay one_too_many(log.encoded(), "the test");
  one_too_many.next(3, 7, "norm", &got, sizeof got);
  EXPECT_THROW(one_too_many.next(3, 7, "norm", &got, sizeof got), MismatchError);
}

TEST(QueryLog, AsOfAMarkShowsOnlyTheQueriesBeforeIt) {
  QueryLog log;
  const double a = 1.5;
  log.append(3, 7, &a, sizeof a);
  const QueryLog::Mark mark = log.mark();
  log.append(5, 9, &a, sizeof a);
  log.as_of(mark, [](const std::byte* bytes, std::size_t size) {
    const QueryReplay replay(std::vector<std::byte>(bytes, bytes + size), "the test");
    EXPECT_EQ(replay.count(), 1u);
  });
  EXPECT_EQ(QueryReplay(log.encoded(), "the test").count(), 2u);
}

TEST(QueryLog, ADamagedLogIsACorruptionError) {
  QueryLog log;
  const double a = 1.5;
  log.append(3, 7, &a, sizeof a);
  std::vector<std::byte> truncated = log.encoded();
  truncated.pop_back();
  EXPECT_THROW(QueryReplay(truncated, "the test"), CorruptionError);
  std::vector<std::byte> recounted = log.encoded();
  recounted[0] = std::byte{5};
  EXPECT_THROW(QueryReplay(recounted, "the test"), CorruptionError);
  EXPECT_THROW(QueryReplay(std::vector<std::byte>(3), "the test"), CorruptionError);
}

TEST(CheckpointRecord, RoundTripsAndRecognisesForeignMetadata) {
  const CheckpointRecord record{CheckpointKind::kFastForward, true, 1234, 17, 0xfeedu, "advec_cell"};
  const std::vector<std::byte> bytes = encode(record);
  const std::optional<CheckpointRecord> back = decode(bytes, "v");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->kind, CheckpointKind::kFastForward);
  EXPECT_TRUE(back->has_payload);
  EXPECT_EQ(back->loop_index, 1234u);
  EXPECT_EQ(back->init_end, 17u);
  EXPECT_EQ(back->sequence_hash, 0xfeedu);
  EXPECT_EQ(back->location, "advec_cell");
  const std::string foreign = "user metadata";
  EXPECT_FALSE(decode(std::as_bytes(std::span(foreign)), "v"));
  EXPECT_THROW(decode(std::span(bytes).first(bytes.size() - 3), "v"), CorruptionError);
}

// Two datasets: `state` is read first wherever a region starts; `scratch`
// is written first by "overwrite", so only a region entered before "use"
// (which reads it) must save it.
TEST(LocationStrategy, ChoosesTheRecurringLoopThatSavesLeast) {
  DatasetTable datasets;
  std::vector<double> state(100), scratch(300);
  const int s = datasets.add("state", state.data(), state.size() * 8, {}, 0);
  const int w = datasets.add("scratch", scratch.data(), scratch.size() * 8, {}, 0);
  LocationStrategy strategy(8);
  std::vector<PartAccess> accesses;
  std::uint64_t index = 0;
  const auto run = [&](const char* name, std::initializer_list<Arg> args) {
    datasets.accesses(std::span(args.begin(), args.size()), name, index + 1, accesses);
    datasets.mark_written(accesses);
    strategy.observe(name, ++index, accesses, datasets);
  };
  for (int step = 0; step < 20; ++step) {
    run("step", {{s, Access::kReadWrite}});
    run("overwrite", {{w, Access::kWrite}});
    run("use", {{w, Access::kRead}, {s, Access::kRead}});
  }
  const std::vector<LocationCandidate> ranking = strategy.ranking();
  ASSERT_EQ(ranking.size(), 3u);
  EXPECT_EQ(ranking[0].mean_bytes, 800);
  EXPECT_EQ(ranking[1].mean_bytes, 800);
  EXPECT_EQ(ranking[0].spread_bytes, 0);
  EXPECT_EQ(ranking[0].mean_spacing, 3);
  EXPECT_EQ(ranking[2].loop, "use");
  EXPECT_EQ(ranking[2].mean_bytes, 800 + 2400);
}

// ------------------------------------------------------------ the runtime

// A 1-D heat-like application: `u` (with a halo of one cell on each side)
// is smoothed into `next` and copied back each step; a norm query decides
// whether a damping loop runs, so replay must answer queries to follow the
// same path. `grid` is written only in the initialisation.
struct App {
  static constexpr int kCells = 64;
  std::vector<double> grid = std::vector<double>(kCells + 2);
  std::vector<double> u = std::vector<double>(kCells + 2);
  std::vector<double> next = std::vector<double>(kCells + 2);
  std::vector<double> unused = std::vector<double>(16);
  int g = -1, ui = -1, ni = -1, un = -1;
  int damped = 0;

  void declare(Runtime& runtime) {
    const ElementType field{"float64", {kCells + 2}};
    g = runtime.dataset("grid", grid.data(), grid.size() * 8, field, 1);
    ui = runtime.dataset("u", u.data(), u.size() * 8, field, 1);
    ni = runtime.dataset("next", next.data(), next.size() * 8, field, 1);
    un = runtime.dataset("unused", unused.data(), unused.size() * 8);
  }

  void initialise(Runtime& runtime, bool with_init_phase) {
    if (runtime.loop("init_grid", {{g, Access::kWrite}})) {
      for (int i = 0; i < kCells + 2; ++i) grid[i] = i * 0.5;
    }
    if (runtime.loop("init_u", {{g, Access::kRead}, {ui, Access::kWrite}})) {
      for (int i = 0; i < kCells + 2; ++i) u[i] = std::sin(grid[i]) + 2.0;
    }
    if (runtime.loop("init_unused", {{un, Access::kWrite}})) std::fill(unused.begin(), unused.end(), 3.0);
    if (with_init_phase) runtime.initphase_done();
  }

  void step(Runtime& runtime) {
    if (runtime.loop("halo", {{ui, Access::kRead, Range::kInterior}, {ui, Access::kWrite, Range::kHalo}})) {
      u[0] = u[1];
      u[kCells + 1] = u[kCells];
    }
    if (runtime.loop("smooth", {{ui, Access::kRead}, {ni, Access::kWrite, Range::kInterior}})) {
      for (int i = 1; i <= kCells; ++i) next[i] = 0.25 * u[i - 1] + 0.5 * u[i] + 0.25 * u[i + 1];
    }
    double norm = 0;
    if (runtime.loop("copy_back", {{ni, Access::kRead, Range::kInterior}, {ui, Access::kWrite, Range::kInterior}})) {
      for (int i = 1; i <= kCells; ++i) {
        u[i] = next[i];
        norm += next[i] * next[i];
      }
    }
    norm = runtime.query(norm);
    if (norm > 200.0 && runtime.loop("damp", {{ui, Access::kReadWrite, Range::kInterior}})) {
      for (int i = 1; i <= kCells; ++i) u[i] *= 0.99;
      ++damped;
    }
  }
};

class AutoRuntime : public ::testing::Test {
 protected:
  Config config() const {
    Config c;
    c.local.path = dir_->path() + "/local";
    c.local.keep = 0;
    c.persistent.every = 0;
    return c;
  }
  // Runs `steps` steps with a fresh store and runtime; `before_step(step,
  // runtime)` may trigger or stop. Returns the final u.
  template <class BeforeStep>
  std::vector<double> run(int steps, Options options, bool init_phase, BeforeStep&& before_step,
                          App* out = nullptr) {
    Store store("app", config());
    Runtime runtime(store, std::move(options));
    App app;
    app.declare(runtime);
    app.initialise(runtime, init_phase);
    for (int s = 0; s < steps; ++s) {
      if (!before_step(s, runtime)) break;
      app.step(runtime);
    }
    if (out != nullptr) *out = app;
    store.wait();
    last_checkpoint_ = runtime.last_checkpoint();
    last_restore_ = runtime.last_restore();
    return app.u;
  }

  void start_over() { dir_ = std::make_unique<TempDir>(); }

  std::unique_ptr<TempDir> dir_ = std::make_unique<TempDir>();
  std::optional<CheckpointReport> last_checkpoint_;
  std::optional<RestoreReport> last_restore_;
};

const auto kEveryStep = [](int, Runtime&) { return true; };

TEST_F(AutoRuntime, ARegionSavesWhatIsReadFirstAndDropsWhatIsWrittenFirst) {
  const std::vector<double> reference = run(30, {}, true, kEveryStep);
  EXPECT_FALSE(last_checkpoint_);  // no interval, no trigger: no checkpoint
  run(12, {}, true, [](int step, Runtime& runtime) {
    if (step == 10) runtime.trigger();
    return true;
  });
  ASSERT_TRUE(last_checkpoint_);
  // Entered at the next loop (no statistics yet): "halo" reads u's interior
  // and rewrites its ring; "smooth" reads u whole (ring included, but the
  // ring was decided already) and writes next's interior, whose ring was
  // never written. grid and unused belong to the initialisation phase.
  EXPECT_EQ(last_checkpoint_->saved, std::vector<std::string>{"u"});
  EXPECT_TRUE(last_checkpoint_->halos.empty());
  EXPECT_EQ(last_checkpoint_->dataset_bytes, (App::kCells + 2) * 8u);
  EXPECT_FALSE(last_checkpoint_->timed_out);
  EXPECT_GT(reference[1], 0);
}

TEST_F(AutoRuntime, WithoutAnInitialisationPhaseItsDatasetsAreSavedToo) {
  Options options;
  options.region_timeout_loops = 10;
  run(20, options, false, [](int step, Runtime& runtime) {
    if (step == 10) runtime.trigger();
    return true;
  });
  ASSERT_TRUE(last_checkpoint_);
  // grid and unused were written (by the initialisation loops) and are never
  // met again in the region: they are saved when its start loop comes round
  // again (a whole step later), with the one field the chosen location needs
  // (u or next).
  const std::vector<std::string>& saved = last_checkpoint_->saved;
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_NE(std::find(saved.begin(), saved.end(), "grid"), saved.end());
  EXPECT_NE(std::find(saved.begin(), saved.end(), "unused"), saved.end());
  EXPECT_FALSE(last_checkpoint_->timed_out);
  EXPECT_LE(last_checkpoint_->region_loops, 4u);  // one step
}

TEST_F(AutoRuntime, ACheckpointBeforeAnyLoopWroteADatasetHoldsNoneAndRestores) {
  const std::vector<double> reference = run(30, {}, true, kEveryStep);
  run(30, {}, true, [](int step, Runtime& runtime) {
    if (step == 0) runtime.trigger();  // right after the initialisation phase: nothing written since
    return step < 3;
  });
  ASSERT_TRUE(last_checkpoint_);
  EXPECT_TRUE(last_checkpoint_->saved.empty());
  EXPECT_EQ(last_checkpoint_->dataset_bytes, 0u);
  const std::vector<double> resumed = run(30, {}, true, kEveryStep);
  ASSERT_TRUE(last_restore_);
  EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), reference.size() * 8), 0);
}

// A field whose interior is rewritten each step while its halo ring is
// only read and then shifted: a region entered before "fill_interior" drops
// the interior, saves the ring alone, and copies aside the parts later loops
// of the region change (the ring, and `acc`) but not `late`, decided by the
// loop before which the region closes.
struct RingApp {
  std::vector<double> d = std::vector<double>(6 * 8);  // 4 x 6 interior, a ring of one
  std::vector<double> acc = std::vector<double>(5);
  std::vector<double> late = std::vector<double>(3);
  int di = -1, ai = -1, li = -1;

  void declare(Runtime& runtime) {
    di = runtime.dataset("d", d.data(), d.size() * 8, {"float64", {6, 8}}, 1);
    ai = runtime.dataset("acc", acc.data(), acc.size() * 8);
    li = runtime.dataset("late", late.data(), late.size() * 8);
  }
  void initialise(Runtime& runtime) {
    if (runtime.loop("init", {{di, Access::kWrite}, {ai, Access::kWrite}, {li, Access::kWrite}})) {
      for (std::size_t i = 0; i < d.size(); ++i) d[i] = 0.5 * static_cast<double>(i);
      std::fill(acc.begin(), acc.end(), 1.0);
      std::fill(late.begin(), late.end(), 2.0);
    }
  }
  static bool interior(std::size_t i) { return i / 8 >= 1 && i / 8 < 5 && i % 8 >= 1 && i % 8 < 7; }
  void step(Runtime& runtime, int number) {
    if (runtime.loop("fill_interior", {{di, Access::kWrite, Range::kInterior}})) {
      for (std::size_t i = 0; i < d.size(); ++i) {
        if (interior(i)) d[i] = number + 0.25 * static_cast<double>(i);
      }
    }
    if (runtime.loop("use", {{di, Access::kRead}, {ai, Access::kReadWrite}})) {
      for (std::size_t k = 0; k < acc.size(); ++k) acc[k] = 0.5 * acc[k] + d[k * 9 % d.size()];
    }
    if (runtime.loop("shift_ring", {{di, Access::kReadWrite, Range::kHalo}})) {
      for (std::size_t i = 0; i < d.size(); ++i) {
        if (!interior(i)) d[i] += acc[i % acc.size()];
      }
    }
    if (runtime.loop("touch_late", {{li, Access::kReadWrite}})) {
      for (double& value : late) value = value * 1.5 + acc[0];
    }
  }
};

TEST_F(AutoRuntime, AHaloRingIsSavedAloneAndWhatLaterLoopsChangeIsCopiedAside) {
  const auto run_ring = [&](int steps, int trigger_at, int stop_at) {
    Store store("ring", config());
    Runtime runtime(store, {});
    RingApp app;
    app.declare(runtime);
    app.initialise(runtime);
    runtime.initphase_done();
    for (int step = 0; step < steps && step < stop_at; ++step) {
      if (step == trigger_at) runtime.trigger();
      app.step(runtime, step);
    }
    store.wait();
    last_checkpoint_ = runtime.last_checkpoint();
    last_restore_ = runtime.last_restore();
    std::vector<double> all = app.d;
    all.insert(all.end(), app.acc.begin(), app.acc.end());
    all.insert(all.end(), app.late.begin(), app.late.end());
    return all;
  };
  const std::vector<double> reference = run_ring(20, -1, 20);
  start_over();
  run_ring(20, 6, 9);
  ASSERT_TRUE(last_checkpoint_);
  EXPECT_EQ(last_checkpoint_->location, "fill_interior");
  EXPECT_EQ(last_checkpoint_->halos, std::vector<std::string>{"d#halo"});
  EXPECT_EQ(last_checkpoint_->saved, (std::vector<std::string>{"acc", "late"}));
  const std::uint64_t ring_bytes = (6 * 8 - 4 * 6) * 8;
  EXPECT_EQ(last_checkpoint_->dataset_bytes, ring_bytes + 5 * 8 + 3 * 8);
  EXPECT_EQ(last_checkpoint_->staged_bytes, 5 * 8 + ring_bytes);  // acc before "use", the ring before "shift_ring"
  EXPECT_EQ(last_checkpoint_->region_loops, 4u);  // closed before "touch_late" ran: `late` read in place
  const std::vector<double> resumed = run_ring(20, -1, 20);
  ASSERT_TRUE(last_restore_);
  EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), reference.size() * 8), 0);
}

TEST_F(AutoRuntime, ARegionThatNeverClosesSavesTheRestAtItsTimeout) {
  const std::vector<double> reference = run(30, {}, false, kEveryStep);
  Options options;
  options.region_timeout_loops = 2;  // shorter than a step: the region cannot meet every dataset
  run(30, options, false, [](int step, Runtime& runtime) {
    if (step == 10) runtime.trigger();
    return step < 15;
  });
  ASSERT_TRUE(last_checkpoint_);
  EXPECT_TRUE(last_checkpoint_->timed_out);
  EXPECT_EQ(last_checkpoint_->region_loops, 2u);
  const std::vector<std::string>& saved = last_checkpoint_->saved;
  EXPECT_NE(std::find(saved.begin(), saved.end(), "grid"), saved.end());
  EXPECT_NE(std::find(saved.begin(), saved.end(), "unused"), saved.end());
  const std::vector<double> resumed = run(30, options, false, kEveryStep);
  ASSERT_TRUE(last_restore_);
  EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), reference.size() * 8), 0);
}

TEST_F(AutoRuntime, AKilledRunRestartedByReplayEndsWithTheSameBytes) {
  for (const bool init_phase : {false, true}) {
    SCOPED_TRACE(init_phase ? "with an initialisation phase" : "without one");
    start_over();
    Options options;
    options.region_timeout_loops = 16;
    const std::vector<double> reference = run(40, options, init_phase, kEveryStep);
    run(40, options, init_phase, [](int step, Runtime& runtime) {
      if (step == 17) runtime.trigger();
      return step < 25;  // the process dies here
    });
    const std::vector<double> resumed = run(40, options, init_phase, kEveryStep);
    ASSERT_TRUE(last_restore_);
    EXPECT_GT(last_restore_->skipped_loops, 17 * 3u);
    EXPECT_GT(last_restore_->replayed_queries, 16u);
    EXPECT_FALSE(last_restore_->fast_forward);
    EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), reference.size() * 8), 0);
  }
}

TEST_F(AutoRuntime, TheRegionStartsAtTheLoopTheStatisticsChose) {
  Options options;
  options.region_timeout_loops = 12;
  options.interval_loops = 200;
  std::vector<std::string> reports;
  options.diagnostics = 2;
  options.report = [&](const std::string& line) { reports.push_back(line); };
  run(100, options, true, kEveryStep);
  ASSERT_TRUE(last_checkpoint_);
  // Entered before "halo", a region saves u's interior (its ring is
  // rewritten first); before "copy_back", next's interior; before "smooth",
  // u's interior and ring; before "damp" (only in the first steps), u's
  // interior. The least bytes, ties going to the more frequent loop: "halo"
  // or "copy_back", each saving one dataset whole.
  ASSERT_EQ(last_checkpoint_->saved.size(), 1u);
  EXPECT_EQ(last_checkpoint_->dataset_bytes, (App::kCells + 2) * 8u);
  EXPECT_TRUE(last_checkpoint_->location == "halo" || last_checkpoint_->location == "copy_back")
      << last_checkpoint_->location;
  bool explained = false;
  for (const std::string& line : reports) explained = explained || line.find("checkpoint location") != std::string::npos;
  EXPECT_TRUE(explained);
}

TEST_F(AutoRuntime, FastForwardResumesAtThePayloadsStepWithoutReplay) {
  const auto with_fastfw = [](int stop_at, int trigger_at) {
    return [=](int step, Runtime& runtime) {
      if (step == trigger_at) runtime.trigger();
      return step < stop_at;
    };
  };
  const std::vector<double> reference = run(40, {}, true, kEveryStep);
  // The application's step loop with fastfw() at its top.
  const auto run_fastfw = [&](int stop_at, int trigger_at) {
    Store store("app", config());
    Runtime runtime(store, {});
    App app;
    app.declare(runtime);
    app.initialise(runtime, true);
    const auto before = with_fastfw(stop_at, trigger_at);
    for (int step = 0; step < 40; ++step) {
      int payload = step;
      if (runtime.fastfw(&payload, sizeof payload)) step = payload;
      if (!before(step, runtime)) break;
      app.step(runtime);
    }
    store.wait();
    last_checkpoint_ = runtime.last_checkpoint();
    last_restore_ = runtime.last_restore();
    return app.u;
  };
  run_fastfw(25, 17);
  ASSERT_TRUE(last_checkpoint_);
  EXPECT_EQ(last_checkpoint_->location, "fastfw");
  EXPECT_EQ(last_checkpoint_->payload_bytes, sizeof(int));
  EXPECT_EQ(last_checkpoint_->query_log_bytes, QueryLog::kHeaderBytes);  // no records: no replay needed
  // Resumed at step 17, checkpointed again at step 30, stopped: the second
  // checkpoint must hold u, which no loop wrote since the restore.
  run_fastfw(33, 30);
  ASSERT_TRUE(last_restore_);
  EXPECT_TRUE(last_restore_->fast_forward);
  EXPECT_EQ(last_restore_->skipped_loops, 0u);
  ASSERT_TRUE(last_checkpoint_);
  EXPECT_EQ(last_checkpoint_->saved, std::vector<std::string>{"u"});
  const int second = last_checkpoint_->version;
  const std::vector<double> resumed = run_fastfw(40, -1);
  ASSERT_TRUE(last_restore_);
  EXPECT_EQ(last_restore_->version, second);
  EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), reference.size() * 8), 0);
}

TEST_F(AutoRuntime, DatlistSavesExactlyTheListedDatasetsAndRestoresThem) {
  const std::vector<double> reference = run(40, {}, true, kEveryStep);
  const auto run_datlist = [&](int stop_at, int trigger_at, bool with_payload) {
    Store store("app", config());
    Runtime runtime(store, {});
    App app;
    app.declare(runtime);
    app.initialise(runtime, true);
    for (int step = 0; step < 40; ++step) {
      if (step == trigger_at) runtime.trigger();
      int payload = step;
      const int listed[] = {app.ui};
      if (with_payload && runtime.datlist(listed, &payload, sizeof payload)) step = payload;
      if (!with_payload) runtime.datlist(listed);  // a restarted run replays up to here
      if (step >= stop_at) break;
      app.step(runtime);
    }
    store.wait();
    last_checkpoint_ = runtime.last_checkpoint();
    last_restore_ = runtime.last_restore();
    return app.u;
  };
  for (const bool with_payload : {true, false}) {
    SCOPED_TRACE(with_payload ? "with a payload" : "without one: by replay");
    start_over();
    run_datlist(25, 17, with_payload);
    ASSERT_TRUE(last_checkpoint_);
    EXPECT_EQ(last_checkpoint_->saved, std::vector<std::string>{"u"});
    EXPECT_EQ(last_checkpoint_->staged_bytes, 0u);
    const std::vector<double> resumed = run_datlist(40, -1, with_payload);
    ASSERT_TRUE(last_restore_);
    EXPECT_EQ(last_restore_->fast_forward, with_payload);
    EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), reference.size() * 8), 0);
  }
}

TEST_F(AutoRuntime, AReplayThatTakesAnotherPathFailsNamingTheLoop) {
  run(30, {}, true, [](int step, Runtime& runtime) {
    if (step == 17) runtime.trigger();
    return step < 20;
  });
  ASSERT_TRUE(last_checkpoint_);
  Store store("app", config());
  Runtime runtime(store, {});
  App app;
  app.declare(runtime);
  app.initialise(runtime, true);
  try {
    for (int step = 0; step < 30; ++step) {
      app.step(runtime);
      runtime.loop("an extra loop", {{app.ni, Access::kRead}});  // not in the checkpointed run
    }
    FAIL() << "the replay did not notice the extra loop";
  } catch (const MismatchError& error) {
    EXPECT_NE(std::string(error.what()).find("replay diverged"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("loop "), std::string::npos) << error.what();
  }
}

TEST_F(AutoRuntime, ARunStoppedInsideARegionRestoresThePreviousCheckpoint) {
  const std::vector<double> reference = run(40, {}, false, kEveryStep);
  // The second region opens during step 20 and would close when its start
  // loop comes round in step 21: the run stops before that.
  std::optional<int> first_version;
  run(40, {}, false, [&](int step, Runtime& runtime) {
    if (step == 5 || step == 20) runtime.trigger();
    if (step == 19) first_version = runtime.last_checkpoint()->version;
    return step < 21;
  });
  ASSERT_TRUE(first_version);
  EXPECT_EQ(last_checkpoint_->version, *first_version);  // the second never closed
  const std::vector<double> resumed = run(40, {}, false, kEveryStep);
  ASSERT_TRUE(last_restore_);
  EXPECT_EQ(last_restore_->version, *first_version);
  EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), reference.size() * 8), 0);
}

TEST_F(AutoRuntime, AnUndeclaredDatasetIsRefusedNamingTheLoop) {
  Store store("app", config());
  Runtime runtime(store, {});
  try {
    runtime.loop("stencil", {{7, Access::kRead}});
    FAIL() << "no InvalidArgumentError";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("loop 1 'stencil'"), std::string::npos) << error.what();
  }
  std::vector<double> flat(8);
  const int id = runtime.dataset("flat", flat.data(), 64);
  EXPECT_THROW(runtime.loop("x", {{id, Access::kWrite, Range::kHalo}}), InvalidArgumentError);
  EXPECT_THROW(runtime.dataset("flat", flat.data(), 64), InvalidArgumentError);
  EXPECT_THROW(runtime.dataset("resurgo.auto.queries", flat.data(), 64), InvalidArgumentError);
  EXPECT_THROW(runtime.dataset("ring", flat.data(), 64, {}, 1), InvalidArgumentError);  // a halo needs a shape
}

TEST_F(AutoRuntime, TheAccessCheckCatchesALoopThatWritesWhatItDeclaredRead) {
  Store store("app", config());
  Options options;
  options.check_access = true;
  Runtime runtime(store, options);
  std::vector<double> data(8, 1.0);
  const int id = runtime.dataset("data", data.data(), 64);
  if (runtime.loop("honest", {{id, Access::kRead}})) {
    EXPECT_EQ(data[0], 1.0);
  }
  if (runtime.loop("liar", {{id, Access::kRead}})) data[3] = 2.0;
  try {
    runtime.loop("next", {{id, Access::kRead}});
    FAIL() << "no MismatchError";
  } catch (const MismatchError& error) {
    EXPECT_NE(std::string(error.what()).find("loop 2 'liar'"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("'data'"), std::string::npos) << error.what();
  }
}

TEST_F(AutoRuntime, ItsMemoryDoesNotGrowWithTheNumberOfLoops) {
  Store store("app", config());
  Options options;
  options.region_timeout_loops = 64;
  Runtime runtime(store, options);
  std::vector<double> a(64), b(64);
  const int ai = runtime.dataset("a", a.data(), 512);
  const int bi = runtime.dataset("b", b.data(), 512);
  const auto loops = [&](std::uint64_t count) {
    for (std::uint64_t i = 0; i < count; ++i) {
      runtime.loop("write_b", {{ai, Access::kRead}, {bi, Access::kWrite}});
      runtime.loop("update_a", {{bi, Access::kRead}, {ai, Access::kReadWrite}});
    }
  };
  loops(1000);
  const std::uint64_t after_a_thousand = runtime.bookkeeping_bytes();
  // A sanitizer makes each loop call ten times slower: a tenth of the loops.
  const std::uint64_t many = kSanitized ? 500'000 : 5'000'000;
  loops(many);
  EXPECT_EQ(runtime.loop_index(), 2 * (1000 + many));
  EXPECT_EQ(runtime.bookkeeping_bytes(), after_a_thousand);
}

// The termination path: a memory-only store, SIGTERM raised while the
// runtime is inside a checkpoint (from its report callback), in a child
// process. The child dies by SIGTERM; its newest version is on L2.
TEST_F(AutoRuntime, SigtermWritesTheInMemoryCheckpointToDiskAndStillTerminates) {
  Config memory_only = config();
  memory_only.memory.every = 1;
  memory_only.memory.keep = 1;
  memory_only.local.every = 0;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Store store("app", memory_only);
    Options options;
    options.diagnostics = 1;
    int checkpoints = 0;
    options.report = [&](const std::string& line) {
      if (line.rfind("checkpoint ", 0) == 0 && ++checkpoints == 2) ::raise(SIGTERM);
    };
    Runtime runtime(store, options);
    App app;
    app.declare(runtime);
    app.initialise(runtime, true);
    for (int step = 0; step < 1000000; ++step) {
      if (step == 5 || step == 10) runtime.trigger();
      app.step(runtime);
    }
    ::_exit(3);  // not reached: SIGTERM ends the process
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  Store store("app", memory_only);
  EXPECT_EQ(store.latest(), 1);  // the second checkpoint, flushed to L2
  const VersionDescription description = store.describe(1);
  ASSERT_TRUE(decode(description.metadata, "v1"));
}

}  // namespace
}  // namespace resurgo::autockpt
