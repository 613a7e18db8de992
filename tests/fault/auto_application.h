// The application of the automatic checkpointing crash campaign
// (auto_crash_campaign.cpp): a stencil code whose datasets, loops and
// queried control flow exercise every decision of resurgo::autockpt.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "resurgo/auto.hpp"
#include "resurgo/resurgo.hpp"

namespace resurgo::fault {

using autockpt::Access;
using autockpt::Arg;
using autockpt::Range;
using autockpt::Runtime;

enum class Mode { kReplay, kFastForward, kDatlist, kDatlistReplay };
constexpr Mode kModes[] = {Mode::kReplay, Mode::kFastForward, Mode::kDatlist, Mode::kDatlistReplay};

inline const char* name_of(Mode mode) {
  switch (mode) {
    case Mode::kReplay:
      return "replay";
    case Mode::kFastForward:
      return "fastfw";
    case Mode::kDatlist:
      return "datlist";
    case Mode::kDatlistReplay:
      return "datlist-replay";
  }
  return "?";
}

// Restored from a payload rather than replayed.
inline bool fast_forwards(Mode mode) { return mode == Mode::kFastForward || mode == Mode::kDatlist; }

// The application's own state besides its datasets: the payload of fastfw()
// and datlist(), recomputed from the queries when replayed.
struct Progress {
  std::int32_t step = 0;
  std::int32_t damped = 0;  // steps whose energy norm ran the damping loop
  double time = 0;
};

constexpr std::size_t kNy = 128;              // interior rows of the 2-D fields
constexpr std::size_t kNx = 192;              // interior columns
constexpr std::size_t kDensityRow = kNx + 4;  // density: a halo of 2
constexpr std::size_t kFluxRow = kNx + 2;     // flux: a halo of 1
constexpr std::size_t kTracerCells = 65534;   // plus a halo of 1 at each end: 512 KiB
constexpr std::size_t kTable = 8192;          // material, history: 64 KiB
constexpr double kDampAbove = 0.01;           // mean squared energy that runs the damping loop

class Simulation {
 public:
  static constexpr std::int32_t kSteps = 48;

  void declare(Runtime& runtime) {
    material_ = add(runtime, "material", {kTable}, 0);
    density_ = add(runtime, "density", {kNy + 4, kDensityRow}, 2);
    flux_ = add(runtime, "flux", {kNy + 2, kFluxRow}, 1);
    energy_ = add(runtime, "energy", {kNy, kNx}, 0);
    tracer_ = add(runtime, "tracer", {kTracerCells + 2}, 1);
    history_ = add(runtime, "history", {kTable}, 0);
    scratch_.resize(kTracerCells + 2);
  }

  // Runs the initialisation and every step; when the runtime restores, it
  // decides which loops execute and fastfw()/datlist() restore progress_.
  void run(Runtime& runtime, Mode mode, bool init_phase, const std::function<void()>& after_step) {
    initialise(runtime);
    if (init_phase) runtime.initphase_done();
    // flux is dead at the top of a step: its interior and ring are written before they are read.
    const int listed[] = {material_, density_, energy_, tracer_, history_};
    while (progress_.step < kSteps) {
      if (mode == Mode::kFastForward) runtime.fastfw(&progress_, sizeof progress_);
      if (mode == Mode::kDatlist) runtime.datlist(listed, &progress_, sizeof progress_);
      if (mode == Mode::kDatlistReplay) runtime.datlist(listed);
      step(runtime);
      ++progress_.step;
      after_step();
    }
  }

  const Progress& progress() const { return progress_; }

  // The datasets in declaration order, then the progress.
  std::vector<std::byte> state() const {
    std::vector<std::byte> bytes;
    for (const Field& field : fields_) {
      const auto* begin = reinterpret_cast<const std::byte*>(field.values.data());
      bytes.insert(bytes.end(), begin, begin + field.values.size() * sizeof(double));
    }
    const auto* progress = reinterpret_cast<const std::byte*>(&progress_);
    bytes.insert(bytes.end(), progress, progress + sizeof progress_);
    return bytes;
  }

  // Empty when `reference` (another run's state()) is this run's state byte
  // for byte; else where they first differ.
  std::string difference_from(const std::vector<std::byte>& reference) const {
    const std::vector<std::byte> mine = state();
    if (mine.size() != reference.size()) {
      return std::to_string(mine.size()) + " bytes of state against " + std::to_string(reference.size());
    }
    std::size_t offset = 0;
    for (const Field& field : fields_) {
      const std::size_t bytes = field.values.size() * sizeof(double);
      for (std::size_t i = 0; i < bytes; ++i) {
        if (mine[offset + i] != reference[offset + i]) {
          return "dataset '" + field.name + "' differs first at byte " + std::to_string(i) + " of " +
                 std::to_string(bytes);
        }
      }
      offset += bytes;
    }
    return std::memcmp(mine.data() + offset, reference.data() + offset, sizeof progress_) == 0
               ? ""
               : "the progress (step, damped steps, time) differs";
  }

 private:
  struct Field {
    std::string name;
    std::vector<double> values;
  };

  int add(Runtime& runtime, const char* name, std::vector<std::size_t> extents, int halo) {
    std::vector<std::int64_t> shape;
    std::size_t count = 1;
    for (const std::size_t extent : extents) {
      shape.push_back(static_cast<std::int64_t>(extent));
      count *= extent;
    }
    fields_.push_back({name, std::vector<double>(count)});
    std::vector<double>& storage = fields_.back().values;
    return runtime.dataset(name, storage.data(), count * sizeof(double), {"float64", shape}, halo);
  }
  std::vector<double>& values(int id) { return fields_[static_cast<std::size_t>(id)].values; }
  double& density(std::size_t row, std::size_t column) { return values(density_)[row * kDensityRow + column]; }
  double& flux(std::size_t row, std::size_t column) { return values(flux_)[row * kFluxRow + column]; }

  void initialise(Runtime& runtime) {
    std::vector<double>& material = values(material_);
    if (runtime.loop("init_material", {{material_, Access::kWrite}})) {
      for (std::size_t k = 0; k < kTable; ++k) material[k] = 1.0 + 0.25 * std::sin(0.013 * static_cast<double>(k));
    }
    if (runtime.loop("init_density", {{material_, Access::kRead}, {density_, Access::kWrite}})) {
      for (std::size_t row = 0; row < kNy + 4; ++row) {
        for (std::size_t column = 0; column < kDensityRow; ++column) {
          const double x = (static_cast<double>(column) - 1.5) / static_cast<double>(kNx) - 0.4;
          const double y = (static_cast<double>(row) - 1.5) / static_cast<double>(kNy) - 0.55;
          density(row, column) =
              1.0 + 0.5 * std::exp(-40 * (x * x + y * y)) + 0.01 * material[(row * kDensityRow + column) % kTable];
        }
      }
    }
    if (runtime.loop("init_energy", {{energy_, Access::kWrite}})) {
      std::vector<double>& energy = values(energy_);
      for (std::size_t c = 0; c < energy.size(); ++c) energy[c] = 0.05 * static_cast<double>(c % 97) / 97;
    }
    if (runtime.loop("init_tracer", {{tracer_, Access::kWrite}})) {
      std::vector<double>& tracer = values(tracer_);
      for (std::size_t k = 0; k < tracer.size(); ++k) {
        tracer[k] = ((k / 512) % 2 == 0 ? 1.0 : 0.2) + 1e-3 * static_cast<double>(k % 13);
      }
    }
    if (runtime.loop("init_history", {{history_, Access::kWrite}})) {
      std::fill(values(history_).begin(), values(history_).end(), 0.0);
    }
  }

  void step(Runtime& runtime) {
    exchange_density_halo(runtime);
    const double dt = runtime.query(stable_time_step(runtime));
    diffuse(runtime, dt);
    deposit(runtime, dt);
    advect_tracer(runtime);
    damp_if_needed(runtime);
    smooth_tracer(runtime);
    if (progress_.step % 7 == 3) record(runtime);
    progress_.time += dt;
  }

  // Periodic: the ring of depth 2 copies the interior cells across.
  void exchange_density_halo(Runtime& runtime) {
    if (!runtime.loop("halo_density",
                      {{density_, Access::kRead, Range::kInterior}, {density_, Access::kWrite, Range::kHalo}})) {
      return;
    }
    for (std::size_t row = 0; row < kNy + 4; ++row) {
      for (std::size_t column = 0; column < kDensityRow; ++column) {
        const bool ring = row < 2 || row >= kNy + 2 || column < 2 || column >= kNx + 2;
        if (ring) density(row, column) = density(2 + (row + kNy - 2) % kNy, 2 + (column + kNx - 2) % kNx);
      }
    }
  }

  double stable_time_step(Runtime& runtime) {
    double peak_density = 0;
    double peak_energy = 0;
    if (runtime.loop("calc_dt", {{density_, Access::kRead}, {energy_, Access::kRead}})) {
      for (std::size_t row = 2; row < kNy + 2; ++row) {
        for (std::size_t column = 2; column < kNx + 2; ++column) {
          peak_density = std::max(peak_density, density(row, column));
        }
      }
      for (const double e : values(energy_)) peak_energy = std::max(peak_energy, e);
    }
    return 0.05 / (1.0 + peak_density + 0.1 * peak_energy);
  }

  // A fourth-order Laplacian of density into flux's interior, flux's ring
  // from its nearest interior cell, then density's interior from flux.
  void diffuse(Runtime& runtime, double dt) {
    const Arg fluxes[] = {
        {density_, Access::kRead}, {material_, Access::kRead}, {flux_, Access::kWrite, Range::kInterior}};
    if (runtime.loop("fluxes", fluxes)) {
      const std::vector<double>& material = values(material_);
      for (std::size_t j = 0; j < kNy; ++j) {
        for (std::size_t i = 0; i < kNx; ++i) {
          const std::size_t r = j + 2, c = i + 2;
          const double across = -density(r, c - 2) + 16 * density(r, c - 1) - 30 * density(r, c) +
                                16 * density(r, c + 1) - density(r, c + 2);
          const double down = -density(r - 2, c) + 16 * density(r - 1, c) - 30 * density(r, c) +
                              16 * density(r + 1, c) - density(r + 2, c);
          flux(j + 1, i + 1) = material[(j * kNx + i) % kTable] * (across + down) / 12;
        }
      }
    }
    if (runtime.loop("halo_flux", {{flux_, Access::kRead, Range::kInterior}, {flux_, Access::kWrite, Range::kHalo}})) {
      for (std::size_t row = 0; row < kNy + 2; ++row) {
        for (std::size_t column = 0; column < kFluxRow; ++column) {
          const bool ring = row == 0 || row == kNy + 1 || column == 0 || column == kNx + 1;
          if (!ring) continue;
          flux(row, column) = flux(std::clamp<std::size_t>(row, 1, kNy), std::clamp<std::size_t>(column, 1, kNx));
        }
      }
    }
    if (runtime.loop("update_density", {{flux_, Access::kRead}, {density_, Access::kReadWrite, Range::kInterior}})) {
      for (std::size_t j = 1; j <= kNy; ++j) {
        for (std::size_t i = 1; i <= kNx; ++i) {
          const double around = flux(j - 1, i) + flux(j + 1, i) + flux(j, i - 1) + flux(j, i + 1);
          density(j + 1, i + 1) += dt * (0.6 * flux(j, i) + 0.1 * around);
        }
      }
    }
  }

  void deposit(Runtime& runtime, double dt) {
    if (!runtime.loop("deposit", {{density_, Access::kRead, Range::kInterior}, {energy_, Access::kIncrement}})) return;
    std::vector<double>& energy = values(energy_);
    for (std::size_t j = 0; j < kNy; ++j) {
      for (std::size_t i = 0; i < kNx; ++i) energy[j * kNx + i] += dt * 0.6 * density(j + 2, i + 2);
    }
  }

  // Periodic upwind advection at a speed that varies with the time.
  void advect_tracer(Runtime& runtime) {
    std::vector<double>& tracer = values(tracer_);
    if (runtime.loop("halo_tracer",
                     {{tracer_, Access::kRead, Range::kInterior}, {tracer_, Access::kWrite, Range::kHalo}})) {
      tracer[0] = tracer[kTracerCells];
      tracer[kTracerCells + 1] = tracer[1];
    }
    if (runtime.loop("advect", {{tracer_, Access::kRead}, {tracer_, Access::kReadWrite, Range::kInterior}})) {
      const double speed = 0.3 + 0.2 * std::sin(3 * progress_.time);
      for (std::size_t k = 1; k <= kTracerCells; ++k) scratch_[k] = tracer[k] - speed * (tracer[k] - tracer[k - 1]);
      std::copy(scratch_.begin() + 1, scratch_.begin() + 1 + kTracerCells, tracer.begin() + 1);
    }
  }

  // A queried norm decides whether the damping loop runs at all.
  void damp_if_needed(Runtime& runtime) {
    std::vector<double>& energy = values(energy_);
    double norm = 0;
    if (runtime.loop("energy_norm", {{energy_, Access::kRead}})) {
      for (const double e : energy) norm += e * e;
      norm /= static_cast<double>(energy.size());
    }
    if (runtime.query(norm) <= kDampAbove) return;
    ++progress_.damped;
    if (runtime.loop("damp", {{energy_, Access::kReadWrite}})) {
      for (double& e : energy) e *= 0.5;
    }
  }

  // A queried count of sweeps: the number of loops per step varies.
  void smooth_tracer(Runtime& runtime) {
    std::vector<double>& tracer = values(tracer_);
    double variation = 0;
    if (runtime.loop("variation", {{tracer_, Access::kRead, Range::kInterior}})) {
      for (std::size_t k = 2; k <= kTracerCells; ++k) variation += std::abs(tracer[k] - tracer[k - 1]);
    }
    const auto sweeps = runtime.query(static_cast<std::int32_t>(1 + static_cast<long>(variation * 7) % 3));
    for (std::int32_t sweep = 0; sweep < sweeps; ++sweep) {
      if (!runtime.loop("smooth", {{tracer_, Access::kRead}, {tracer_, Access::kReadWrite, Range::kInterior}})) {
        continue;
      }
      for (std::size_t k = 1; k <= kTracerCells; ++k) {
        scratch_[k] = 0.25 * tracer[k - 1] + 0.5 * tracer[k] + 0.25 * tracer[k + 1];
      }
      std::copy(scratch_.begin() + 1, scratch_.begin() + 1 + kTracerCells, tracer.begin() + 1);
    }
  }

  // Every seventh step only: a region that needs history waits for it.
  void record(Runtime& runtime) {
    if (!runtime.loop("record", {{density_, Access::kRead, Range::kInterior}, {history_, Access::kReadWrite}})) return;
    std::vector<double>& history = values(history_);
    for (std::size_t k = 0; k < kTable; ++k) history[k] = 0.5 * history[k] + density(2 + k % kNy, 2 + (k * 7) % kNx);
  }

  std::vector<Field> fields_;
  int material_ = -1, density_ = -1, flux_ = -1, energy_ = -1, tracer_ = -1, history_ = -1;
  std::vector<double> scratch_;  // the application's own, rewritten before each use: not a dataset
  Progress progress_;
};

}  // namespace resurgo::fault
