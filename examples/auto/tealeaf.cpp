// tealeaf: a TeaLeaf-like mini-app for automatic checkpointing (tealeaf.md).
// Heat conduction on a structured 2-D mesh: cell-centred temperatures, a
// five-point stencil, an implicit (backward Euler) step solved by conjugate
// gradients with a polynomial preconditioner (TeaLeaf's PPCG, here the
// Jacobi-scaled Neumann series). Every array is a dataset of the runtime and
// every array access happens in a loop that declares it; every value that
// steers the solver (the CG reductions) and the field summary goes through a
// query, so that a restarted run can replay to the checkpoint.
//
//   tealeaf [harness options, harness.h]
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "harness.h"

namespace {

using mini::Field;
using mini::Arg;
using mini::Axis;
using mini::Range;
using mini::reads;
using mini::updates;
using mini::writes;

constexpr int kDefaultSize = 256;       // with kDefaultSteps, about 1.3 s on one core
constexpr int kDefaultSteps = 10;
constexpr int kHalo = 2;                // TeaLeaf's halo depth
constexpr double kExtent = 10.0;        // the domain is [0, 10] x [0, 10], as in TeaLeaf's tea.in
constexpr double kTimeStep = 0.004;     // TeaLeaf's initial_timestep
constexpr double kEpsilon = 1e-10;      // convergence: |r.z|^1/2 below this fraction of its initial value
constexpr int kMaxIterations = 1000;    // CG iterations per step, at most
constexpr int kPreconditionerTerms = 2; // Neumann-series terms after the Jacobi one

// A material state of tea.in: a density and an energy in a rectangle (the
// first one, the background, covers the whole domain).
struct State {
  double density, energy;
  double xmin, xmax, ymin, ymax;
};
// A hot rectangle at the left end of a low-density (conducting) crooked pipe
// in a dense cold domain: TeaLeaf's benchmark deck.
constexpr std::array<State, 5> kStates{{{100.0, 0.0001, 0, kExtent, 0, kExtent},
                                        {0.1, 25.0, 0.0, 1.0, 1.0, 2.0},
                                        {0.1, 0.1, 1.0, 6.0, 1.0, 2.0},
                                        {0.1, 0.1, 5.0, 6.0, 1.0, 8.0},
                                        {0.1, 0.1, 5.0, 10.0, 7.0, 8.0}}};


// Reflective boundary: the interior index that index k (of 0..n-1 with the ring) mirrors.
int mirror(int k, int n) { return k < 0 ? -1 - k : (k >= n ? 2 * n - 1 - k : k); }

template <class Kernel>
void over_interior(int n, Kernel&& kernel) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) kernel(j, i);
  }
}

template <class Kernel>
void over_all(int n, Kernel&& kernel) {
  for (int j = -kHalo; j < n + kHalo; ++j) {
    for (int i = -kHalo; i < n + kHalo; ++i) kernel(j, i);
  }
}

class TeaLeaf {
 public:
  explicit TeaLeaf(mini::Driver& driver);
  void run();

 private:
  Field& field(const char* name) { return driver_.field(name, n_, n_, kHalo); }

  void initialise();
  void generate_chunk();
  void time_step();
  void solve();
  void precondition();
  double dot(const char* loop, const Field& a, const Field& b);
  void field_summary();
  void print_summary() const;
  void update_halo(Field& f);
  // (A x)(j, i) of the implicit step (I - dt div K grad) x; Kx, Ky hold K dt/dx^2 on the cell faces.
  double apply(const Field& x, int j, int i) const;

  mini::Driver& driver_;
  const int n_;
  Field &density_, &energy0_, &energy1_, &u_, &u0_;
  Field &r_, &Mi_, &w_, &z_, &Kx_, &Ky_, &p_, &sd_, &rtemp_;
  Field &volume_, &xarea_, &yarea_;
  mini::Geometry geometry_;
  double time_ = 0;
  std::array<double, 4> summary_{};  // volume, mass, internal energy, temperature: the last field summary
};

TeaLeaf::TeaLeaf(mini::Driver& driver)
    : driver_(driver),
      n_(driver.options().size),
      density_(field("density")),
      energy0_(field("energy0")),
      energy1_(field("energy1")),
      u_(field("u")),
      u0_(field("u0")),
      r_(field("vector_r")),
      Mi_(field("vector_Mi")),
      w_(field("vector_w")),
      z_(field("vector_z")),
      Kx_(field("vector_Kx")),
      Ky_(field("vector_Ky")),
      p_(field("vector_p")),
      sd_(field("vector_sd")),
      rtemp_(field("vector_rtemp")),
      volume_(field("volume")),
      xarea_(field("xarea")),
      yarea_(field("yarea")),
      geometry_(driver.geometry(n_, n_, kHalo)) {}

void TeaLeaf::run() {
  initialise();
  driver_.initphase_done();
  std::array<Field*, 1> minimal{&energy1_};
  for (int step = 1; step <= driver_.options().steps; ++step) {
    const auto started = std::chrono::steady_clock::now();
    driver_.step_begins(step, time_, minimal);  // may restore: step and time_ then come from the checkpoint
    update_halo(density_);
    driver_.first_loop_done(step);
    time_step();
    time_ += kTimeStep;
    driver_.step_ends(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  print_summary();
  driver_.finish(energy1_.values.size() * sizeof(double));  // the hand-minimal state: energy1 with its halo
}

// Geometry (vertices, cell centres and widths, volumes and face areas) and
// the initial states: TeaLeaf's start-up, run again by a restarted run from
// mode initphase on.
void TeaLeaf::initialise() {
  const double dx = kExtent / n_;
  const int vertices = n_ + kHalo;  // the last vertex index
  if (driver_.loop("init_vertex_x", {writes(geometry_.vertexx), writes(geometry_.vertexdx)})) {
    for (int k = -kHalo; k <= vertices; ++k) {
      geometry_.vertexx[k] = k * dx;
      geometry_.vertexdx[k] = dx;
    }
  }
  if (driver_.loop("init_vertex_y", {writes(geometry_.vertexy), writes(geometry_.vertexdy)})) {
    for (int k = -kHalo; k <= vertices; ++k) {
      geometry_.vertexy[k] = k * dx;
      geometry_.vertexdy[k] = dx;
    }
  }
  if (driver_.loop("init_cell_x", {reads(geometry_.vertexx), writes(geometry_.cellx), writes(geometry_.celldx)})) {
    for (int k = -kHalo; k < vertices; ++k) {
      geometry_.cellx[k] = (geometry_.vertexx[k] + geometry_.vertexx[k + 1]) / 2;
      geometry_.celldx[k] = geometry_.vertexx[k + 1] - geometry_.vertexx[k];
    }
  }
  if (driver_.loop("init_cell_y", {reads(geometry_.vertexy), writes(geometry_.celly), writes(geometry_.celldy)})) {
    for (int k = -kHalo; k < vertices; ++k) {
      geometry_.celly[k] = (geometry_.vertexy[k] + geometry_.vertexy[k + 1]) / 2;
      geometry_.celldy[k] = geometry_.vertexy[k + 1] - geometry_.vertexy[k];
    }
  }
  if (driver_.loop("init_volume_area", {reads(geometry_.celldx), reads(geometry_.celldy), writes(volume_, Range::kAll),
                                        writes(xarea_, Range::kAll), writes(yarea_, Range::kAll)})) {
    over_all(n_, [&](int j, int i) {
      volume_.at(j, i) = geometry_.celldx[i] * geometry_.celldy[j];
      xarea_.at(j, i) = geometry_.celldy[j];
      yarea_.at(j, i) = geometry_.celldx[i];
    });
  }
  generate_chunk();
  if (driver_.loop("set_field", {reads(energy0_), writes(energy1_)})) {
    over_interior(n_, [&](int j, int i) { energy1_.at(j, i) = energy0_.at(j, i); });
  }
  update_halo(density_);
  update_halo(energy1_);
}

// Each state overrides the ones before in the cells whose centre it covers.
void TeaLeaf::generate_chunk() {
  if (!driver_.loop("generate_chunk", {reads(geometry_.cellx), reads(geometry_.celly), writes(density_), writes(energy0_)})) return;
  over_interior(n_, [&](int j, int i) {
    for (const State& s : kStates) {
      if (geometry_.cellx[i] >= s.xmin && geometry_.cellx[i] < s.xmax && geometry_.celly[j] >= s.ymin && geometry_.celly[j] < s.ymax) {
        density_.at(j, i) = s.density;
        energy0_.at(j, i) = s.energy;
      }
    }
  });
}

// One time step after the density's halo (the step's first loop): TeaLeaf's
// tea_leaf() with its field summary and reset_field.
void TeaLeaf::time_step() {
  update_halo(energy1_);
  solve();
  if (driver_.loop("tea_leaf_finalise", {reads(u_), reads(density_), writes(energy1_)})) {
    over_interior(n_, [&](int j, int i) { energy1_.at(j, i) = u_.at(j, i) / density_.at(j, i); });
  }
  field_summary();
  if (driver_.loop("reset_field", {reads(energy1_), writes(energy0_)})) {
    over_interior(n_, [&](int j, int i) { energy0_.at(j, i) = energy1_.at(j, i); });
  }
}

// Solves A u = u0 (u0 = energy * density, the temperature before the step)
// by preconditioned conjugate gradients. The iteration count comes from
// queries only, so a replaying run takes the same path.
void TeaLeaf::solve() {
  if (driver_.loop("tea_leaf_init_u", {reads(energy1_), reads(density_), writes(u_), writes(u0_)})) {
    over_interior(n_, [&](int j, int i) {
      u_.at(j, i) = energy1_.at(j, i) * density_.at(j, i);
      u0_.at(j, i) = u_.at(j, i);
    });
  }
  update_halo(u_);
  // Conductivity from the density; the face coefficient is the mean of its
  // reciprocals on both sides, times dt * area / (distance * volume).
  if (driver_.loop("tea_leaf_init_w", {reads(density_, Range::kAll), writes(w_, Range::kAll)})) {
    over_all(n_, [&](int j, int i) { w_.at(j, i) = density_.at(j, i); });
  }
  if (driver_.loop("tea_leaf_init_Kx_Ky", {reads(w_, Range::kAll), reads(xarea_), reads(yarea_), reads(volume_),
                                           reads(geometry_.celldx), reads(geometry_.celldy), writes(Kx_), writes(Ky_)})) {
    over_interior(n_, [&](int j, int i) {
      const double w = w_.at(j, i), west = w_.at(j, i - 1), south = w_.at(j - 1, i);
      const double rx = kTimeStep * xarea_.at(j, i) / (geometry_.celldx[i] * volume_.at(j, i));
      const double ry = kTimeStep * yarea_.at(j, i) / (geometry_.celldy[j] * volume_.at(j, i));
      Kx_.at(j, i) = rx * (west + w) / (2 * west * w);
      Ky_.at(j, i) = ry * (south + w) / (2 * south * w);
    });
  }
  update_halo(Kx_);
  update_halo(Ky_);
  if (driver_.loop("tea_leaf_init_Mi", {reads(Kx_, Range::kAll), reads(Ky_, Range::kAll), writes(Mi_)})) {
    over_interior(n_, [&](int j, int i) {
      Mi_.at(j, i) = 1 / (1 + Kx_.at(j, i) + Kx_.at(j, i + 1) + Ky_.at(j, i) + Ky_.at(j + 1, i));
    });
  }
  if (driver_.loop("tea_leaf_calc_residual", {reads(u_, Range::kAll), reads(u0_), reads(Kx_, Range::kAll),
                                              reads(Ky_, Range::kAll), writes(w_), writes(r_)})) {
    over_interior(n_, [&](int j, int i) {
      w_.at(j, i) = apply(u_, j, i);
      r_.at(j, i) = u0_.at(j, i) - w_.at(j, i);
    });
  }
  precondition();
  double rro = 0;
  if (driver_.loop("tea_leaf_cg_init_p", {reads(r_), reads(z_), writes(p_)})) {
    over_interior(n_, [&](int j, int i) {
      p_.at(j, i) = z_.at(j, i);
      rro += r_.at(j, i) * z_.at(j, i);
    });
  }
  rro = driver_.query(rro);
  const double initial = std::sqrt(std::abs(rro));
  for (int iteration = 0; iteration < kMaxIterations && rro != 0; ++iteration) {
    update_halo(p_);
    double pw = 0;
    if (driver_.loop("tea_leaf_cg_calc_w", {reads(p_, Range::kAll), reads(Kx_, Range::kAll), reads(Ky_, Range::kAll),
                                            writes(w_)})) {
      over_interior(n_, [&](int j, int i) {
        w_.at(j, i) = apply(p_, j, i);
        pw += p_.at(j, i) * w_.at(j, i);
      });
    }
    const double alpha = rro / driver_.query(pw);
    if (driver_.loop("tea_leaf_cg_calc_ur", {reads(p_), reads(w_), updates(u_), updates(r_)})) {
      over_interior(n_, [&](int j, int i) {
        u_.at(j, i) += alpha * p_.at(j, i);
        r_.at(j, i) -= alpha * w_.at(j, i);
      });
    }
    precondition();
    const double rrn = dot("tea_leaf_cg_calc_rrn", r_, z_);
    const double beta = rrn / rro;
    if (driver_.loop("tea_leaf_cg_calc_p", {reads(z_), updates(p_)})) {
      over_interior(n_, [&](int j, int i) { p_.at(j, i) = z_.at(j, i) + beta * p_.at(j, i); });
    }
    rro = rrn;
    if (std::sqrt(std::abs(rrn)) < kEpsilon * initial) break;
  }
}

// z = sum over k = 0..kPreconditionerTerms of (I - M A)^k M r, M = diag(A)^-1:
// symmetric and positive definite since M A's spectrum lies in (0, 2).
void TeaLeaf::precondition() {
  if (driver_.loop("tea_leaf_ppcg_init_sd", {reads(r_), reads(Mi_), writes(sd_), writes(z_)})) {
    over_interior(n_, [&](int j, int i) {
      sd_.at(j, i) = Mi_.at(j, i) * r_.at(j, i);
      z_.at(j, i) = sd_.at(j, i);
    });
  }
  for (int term = 0; term < kPreconditionerTerms; ++term) {
    update_halo(sd_);
    if (driver_.loop("tea_leaf_ppcg_calc_rtemp", {reads(sd_, Range::kAll), reads(Kx_, Range::kAll),
                                                  reads(Ky_, Range::kAll), writes(rtemp_)})) {
      over_interior(n_, [&](int j, int i) { rtemp_.at(j, i) = apply(sd_, j, i); });
    }
    if (driver_.loop("tea_leaf_ppcg_update_z", {reads(Mi_), reads(rtemp_), updates(sd_), updates(z_)})) {
      over_interior(n_, [&](int j, int i) {
        sd_.at(j, i) -= Mi_.at(j, i) * rtemp_.at(j, i);
        z_.at(j, i) += sd_.at(j, i);
      });
    }
  }
}

double TeaLeaf::dot(const char* loop, const Field& a, const Field& b) {
  double sum = 0;
  if (driver_.loop(loop, {reads(a), reads(b)})) {
    over_interior(n_, [&](int j, int i) { sum += a.at(j, i) * b.at(j, i); });
  }
  return driver_.query(sum);
}

void TeaLeaf::field_summary() {
  double volume = 0, mass = 0, energy = 0, temperature = 0;
  if (driver_.loop("field_summary", {reads(volume_), reads(density_), reads(energy1_), reads(u_)})) {
    over_interior(n_, [&](int j, int i) {
      const double cell_mass = volume_.at(j, i) * density_.at(j, i);
      volume += volume_.at(j, i);
      mass += cell_mass;
      energy += cell_mass * energy1_.at(j, i);
      temperature += cell_mass * u_.at(j, i);
    });
  }
  summary_ = {driver_.query(volume), driver_.query(mass), driver_.query(energy), driver_.query(temperature)};
}

void TeaLeaf::print_summary() const {
  std::printf("field summary at t=%.3f: volume %.6e mass %.6e internal energy %.6e temperature %.6e\n", time_,
              summary_[0], summary_[1], summary_[2], summary_[3]);
}

// Reflective boundary: the ring mirrors the interior (zero flux through the
// domain's edges in the stencil).
void TeaLeaf::update_halo(Field& f) {
  if (!driver_.loop("update_halo_" + f.name, {reads(f), writes(f, Range::kHalo)})) return;
  for (int j = -kHalo; j < n_ + kHalo; ++j) {
    const int source_row = mirror(j, n_);
    const bool ring_row = source_row != j;
    for (int i = -kHalo; i < n_ + kHalo; ++i) {
      if (!ring_row && i == 0) i = n_;  // an interior row: its two ring ends only
      f.at(j, i) = f.at(source_row, mirror(i, n_));
    }
  }
}

double TeaLeaf::apply(const Field& x, int j, int i) const {
  const double west = Kx_.at(j, i), east = Kx_.at(j, i + 1), south = Ky_.at(j, i), north = Ky_.at(j + 1, i);
  return (1 + west + east + south + north) * x.at(j, i) - west * x.at(j, i - 1) - east * x.at(j, i + 1) -
         south * x.at(j - 1, i) - north * x.at(j + 1, i);
}

}  // namespace

int main(int argc, char** argv) {
  mini::RunOptions options = mini::parse("tealeaf", argc, argv);
  if (options.size == 0) options.size = kDefaultSize;
  if (options.steps == 0) options.steps = kDefaultSteps;
  if (options.size < kHalo) {
    std::fprintf(stderr, "tealeaf: --size %d is below the halo depth %d\n", options.size, kHalo);
    return 2;
  }
  try {
    mini::Driver driver(options);
    TeaLeaf(driver).run();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tealeaf: %s\n", e.what());
  }
  return 1;
}
