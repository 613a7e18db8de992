// cloverleaf: a CloverLeaf-like 2-D Lagrangian-Eulerian hydrodynamics
// mini-app for automatic checkpointing (cloverleaf.md). The compressible
// Euler equations on a staggered grid: density and internal energy at cell
// centres, velocities at the nodes. Each step is CloverLeaf's hydro loop: a
// predictor-corrector Lagrangian step (PdV, accelerate) followed by an
// advective remap back to the fixed grid (first-order donor cell here), in
// x then y or y then x, alternating from one step to the next; reflective
// walls are halo updates. The problem is CloverLeaf's clover_bm deck: a
// dense hot gas in a corner of a light cold one.
//
// Every array is a dataset of the runtime and every access to one happens in
// a loop that declares it; every value that reaches the control flow (the
// time step, the field summary) goes through a query, so that a restarted
// run can replay to the checkpoint.
//
// Indexing, as CloverLeaf's: cells j in [0, nx), k in [0, ny); node (j, k) is
// the lower-left corner of cell (j, k), nodes run to nx and ny; the x face
// (j, k) is the left face of cell (j, k), the y face its bottom face. Fields
// are stored by rows: Field::at(k, j) is row k (y), column j (x).
//
//   cloverleaf [harness options, harness.h]
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "harness.h"

namespace {

using mini::Driver;
using mini::Field;
using mini::Arg;
using mini::Axis;
using mini::Range;
using mini::reads;
using mini::updates;
using mini::writes;

constexpr int kDefaultSize = 256;
constexpr int kDefaultSteps = 150;
constexpr int kHalo = 2;           // CloverLeaf's halo depth
constexpr double kExtent = 10.0;   // the domain is [0, 10] x [0, 10], as in clover.in
constexpr double kGamma = 1.4;     // ideal gas
constexpr double kMaxDt = 0.04;    // clover.in's initial and maximum time step
constexpr double kMinDt = 1e-9;    // below this the run has gone unstable
constexpr double kSoundSafe = 0.7; // CloverLeaf's dtc_safe, dtu_safe, dtv_safe, dtdiv_safe
constexpr double kVelocitySafe = 0.5;
constexpr double kDivergenceSafe = 0.7;
constexpr double kSmall = 1.0e-16;  // g_small
constexpr double kBig = 1.0e21;     // g_big
constexpr int kSummaryEvery = 10;   // clover.in's summary_frequency

// clover_bm: a background state and a dense hot rectangle in its corner.
struct State {
  double density, energy;
  double xmin, xmax, ymin, ymax;
};
constexpr std::array<State, 2> kStates{{{0.2, 1.0, 0, kExtent, 0, kExtent}, {1.0, 2.5, 0.0, 5.0, 0.0, 2.0}}};


// Calls body(j, k) for j in [j0, j1), k in [k0, k1), row by row.
template <class Body>
void over(int j0, int j1, int k0, int k1, Body&& body) {
  for (int k = k0; k < k1; ++k) {
    for (int j = j0; j < j1; ++j) body(j, k);
  }
}

// A sweep direction of the remap. The face of cell (j, k) across which it
// moves material is (j, k) below and (j + dj, k + dk) above.
enum class Dir { kX, kY };

struct Offset {
  int dj, dk;
};
Offset offset(Dir d) { return d == Dir::kX ? Offset{1, 0} : Offset{0, 1}; }
Dir across(Dir d) { return d == Dir::kX ? Dir::kY : Dir::kX; }
std::string_view dir_name(Dir d) { return d == Dir::kX ? "xdir" : "ydir"; }

// How a field reflects at the walls, per direction: staggered on the nodes
// (the wall is a node, ring entry -d mirrors d) or centred (the wall is a
// face, -1 - d mirrors d); the sign is -1 for the velocity or flux component
// normal to the wall, so that nothing crosses it.
struct Mirror {
  bool x_nodes, y_nodes;
  double x_sign, y_sign;
};
constexpr Mirror kCellMirror{false, false, 1, 1};
constexpr Mirror kXVelMirror{true, true, -1, 1};
constexpr Mirror kYVelMirror{true, true, 1, -1};
constexpr Mirror kXFaceMirror{true, false, -1, 1};
constexpr Mirror kYFaceMirror{false, true, 1, -1};

// The interior index that ring index i (of an axis of n interior entries) mirrors.
int mirrored(int i, int n, bool nodes) {
  if (i < 0) return nodes ? -i : -1 - i;
  return nodes ? 2 * (n - 1) - i : 2 * n - 1 - i;
}

struct Summary {
  double volume = 0, mass = 0, internal_energy = 0, kinetic_energy = 0, pressure = 0;
};

class CloverLeaf {
 public:
  explicit CloverLeaf(Driver& driver);
  void run();

 private:
  Field& cells(const char* name) { return driver_.field(name, nx_, ny_, kHalo); }
  Field& nodes(const char* name) { return driver_.field(name, nx_ + 1, ny_ + 1, kHalo); }
  Field& x_faces(const char* name) { return driver_.field(name, nx_ + 1, ny_, kHalo); }
  Field& y_faces(const char* name) { return driver_.field(name, nx_, ny_ + 1, kHalo); }

  Field& vol_flux(Dir d) { return d == Dir::kX ? vol_flux_x_ : vol_flux_y_; }
  Field& mass_flux(Dir d) { return d == Dir::kX ? mass_flux_x_ : mass_flux_y_; }
  const Mirror& face_mirror(Dir d) const { return d == Dir::kX ? kXFaceMirror : kYFaceMirror; }

  void initialise();
  void initialise_axis(const char* loop, Axis& vertex, Axis& vertexd, Axis& cell, Axis& celld, int n);
  void generate_chunk();
  double hydro(int step);
  double timestep(int step);
  void ideal_gas(const char* loop, const Field& density, const Field& energy);
  void viscosity();
  double calc_dt();
  void pdv(bool predict, double dt);
  void revert();
  void accelerate(double dt);
  void flux_calc(double dt);
  void advection(int step);
  void advec_cell(Dir d, int sweep);
  void advec_cell_volumes(Dir d, int sweep);
  void advec_mom(Field& vel, Dir d, int sweep);
  void reset_field();
  Summary field_summary(const char* ideal_gas_loop, const char* loop);
  void update_halo(Field& f, const Mirror& mirror, std::string_view site);
  void print_summary(const char* when, int step, const Summary& s) const;

  Driver& driver_;
  const int nx_, ny_;
  // Cell-centred: the state, then geometry and work arrays.
  Field &density0_, &density1_, &energy0_, &energy1_, &pressure_, &viscosity_, &soundspeed_;
  Field &volume_, &volume_change_, &pre_vol_, &post_vol_, &pre_mass_, &post_mass_, &advec_vol_, &post_ener_;
  // Node-centred: velocities and work arrays (ener_flux holds face values of either direction).
  Field &xvel0_, &xvel1_, &yvel0_, &yvel1_, &stepbymass_;
  Field &node_flux_, &node_mass_post_, &node_mass_pre_, &mom_flux_, &ener_flux_;
  // On the faces.
  Field &xarea_, &vol_flux_x_, &mass_flux_x_, &yarea_, &vol_flux_y_, &mass_flux_y_;
  mini::Geometry geometry_;
  double time_ = 0;
};

CloverLeaf::CloverLeaf(Driver& driver)
    : driver_(driver),
      nx_(driver.options().size),
      ny_(driver.options().size),
      density0_(cells("density0")),
      density1_(cells("density1")),
      energy0_(cells("energy0")),
      energy1_(cells("energy1")),
      pressure_(cells("pressure")),
      viscosity_(cells("viscosity")),
      soundspeed_(cells("soundspeed")),
      volume_(cells("volume")),
      volume_change_(cells("volume_change")),
      pre_vol_(cells("pre_vol")),
      post_vol_(cells("post_vol")),
      pre_mass_(cells("pre_mass")),
      post_mass_(cells("post_mass")),
      advec_vol_(cells("advec_vol")),
      post_ener_(cells("post_ener")),
      xvel0_(nodes("xvel0")),
      xvel1_(nodes("xvel1")),
      yvel0_(nodes("yvel0")),
      yvel1_(nodes("yvel1")),
      stepbymass_(nodes("stepbymass")),
      node_flux_(nodes("node_flux")),
      node_mass_post_(nodes("node_mass_post")),
      node_mass_pre_(nodes("node_mass_pre")),
      mom_flux_(nodes("mom_flux")),
      ener_flux_(nodes("ener_flux")),
      xarea_(x_faces("xarea")),
      vol_flux_x_(x_faces("vol_flux_x")),
      mass_flux_x_(x_faces("mass_flux_x")),
      yarea_(y_faces("yarea")),
      vol_flux_y_(y_faces("vol_flux_y")),
      mass_flux_y_(y_faces("mass_flux_y")),
      geometry_(driver_.geometry(nx_, ny_, kHalo)) {}

void CloverLeaf::run() {
  initialise();
  const Summary initial = field_summary("ideal_gas_start", "field_summary_start");
  driver_.initphase_done();
  // What an expert saves at the top of a step (cloverleaf.md), for datlist.
  const std::array<Field*, 4> minimal{&density0_, &energy0_, &xvel0_, &yvel0_};
  const int steps = driver_.options().steps;
  Summary last = initial;
  for (int step = 1; step <= steps; ++step) {
    const auto started = std::chrono::steady_clock::now();
    driver_.step_begins(step, time_, minimal);  // may restore: step and time_ then come from the checkpoint
    time_ += hydro(step);
    if (step % kSummaryEvery == 0 || step == steps) last = field_summary("ideal_gas_summary", "field_summary");
    driver_.step_ends(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  print_summary("start", 0, initial);
  print_summary("end", steps, last);
  // The hand-minimal state: density, energy and both velocities, whole (halos included).
  driver_.finish((density0_.values.size() + energy0_.values.size() + xvel0_.values.size() + yvel0_.values.size()) *
                 sizeof(double));
}

// ------------------------------------------------------------ initialisation

// CloverLeaf's initialise_chunk and generate_chunk: the geometry and the
// initial state, run again by a restarted run from mode initphase on.
void CloverLeaf::initialise() {
  initialise_axis("initialise_chunk_x", geometry_.vertexx, geometry_.vertexdx, geometry_.cellx, geometry_.celldx, nx_);
  initialise_axis("initialise_chunk_y", geometry_.vertexy, geometry_.vertexdy, geometry_.celly, geometry_.celldy, ny_);
  if (driver_.loop("initialise_chunk_volume", {reads(geometry_.celldx), reads(geometry_.celldy), writes(volume_, Range::kAll),
                                               writes(xarea_, Range::kAll), writes(yarea_, Range::kAll)})) {
    over(-kHalo, nx_ + kHalo, -kHalo, ny_ + kHalo, [&](int j, int k) { volume_.at(k, j) = geometry_.celldx[j] * geometry_.celldy[k]; });
    over(-kHalo, nx_ + 1 + kHalo, -kHalo, ny_ + kHalo, [&](int j, int k) { xarea_.at(k, j) = geometry_.celldy[k]; });
    over(-kHalo, nx_ + kHalo, -kHalo, ny_ + 1 + kHalo, [&](int j, int k) { yarea_.at(k, j) = geometry_.celldx[j]; });
  }
  generate_chunk();
}

// Vertices from -kHalo to n + kHalo, cells from -kHalo to n + kHalo - 1.
void CloverLeaf::initialise_axis(const char* loop, Axis& vertex, Axis& vertexd, Axis& cell, Axis& celld, int n) {
  if (!driver_.loop(loop, {writes(vertex), writes(vertexd), writes(cell), writes(celld)})) return;
  const double d = kExtent / n;
  for (int i = -kHalo; i <= n + kHalo; ++i) {
    vertex[i] = i * d;
    vertexd[i] = d;
  }
  for (int i = -kHalo; i < n + kHalo; ++i) {
    cell[i] = vertex[i] + 0.5 * vertexd[i];
    celld[i] = vertexd[i];
  }
}

// Each state overrides the ones before in the cells whose centre it covers;
// the gas starts at rest.
void CloverLeaf::generate_chunk() {
  if (!driver_.loop("generate_chunk", {reads(geometry_.cellx), reads(geometry_.celly), writes(density0_), writes(energy0_),
                                       writes(xvel0_), writes(yvel0_)})) {
    return;
  }
  over(0, nx_, 0, ny_, [&](int j, int k) {
    for (const State& s : kStates) {
      if (geometry_.cellx[j] >= s.xmin && geometry_.cellx[j] < s.xmax && geometry_.celly[k] >= s.ymin && geometry_.celly[k] < s.ymax) {
        density0_.at(k, j) = s.density;
        energy0_.at(k, j) = s.energy;
      }
    }
  });
  over(0, nx_ + 1, 0, ny_ + 1, [&](int j, int k) {
    xvel0_.at(k, j) = 0;
    yvel0_.at(k, j) = 0;
  });
}

// ----------------------------------------------------------------- hydro

// One pass of CloverLeaf's hydro loop; returns the time step taken.
double CloverLeaf::hydro(int step) {
  const double dt = timestep(step);
  pdv(true, dt);
  accelerate(dt);
  pdv(false, dt);
  flux_calc(dt);
  advection(step);
  reset_field();
  return dt;
}

// Equation of state, artificial viscosity and the stable time step.
double CloverLeaf::timestep(int step) {
  ideal_gas("ideal_gas_timestep", density0_, energy0_);
  driver_.first_loop_done(step);
  update_halo(pressure_, kCellMirror, "timestep");
  update_halo(energy0_, kCellMirror, "timestep");
  update_halo(density0_, kCellMirror, "timestep");
  update_halo(xvel0_, kXVelMirror, "timestep");
  update_halo(yvel0_, kYVelMirror, "timestep");
  viscosity();
  update_halo(viscosity_, kCellMirror, "timestep");
  return calc_dt();
}

void CloverLeaf::ideal_gas(const char* loop, const Field& density, const Field& energy) {
  if (!driver_.loop(loop, {reads(density), reads(energy), writes(pressure_), writes(soundspeed_)})) return;
  over(0, nx_, 0, ny_, [&](int j, int k) {
    const double p = (kGamma - 1) * density.at(k, j) * energy.at(k, j);
    pressure_.at(k, j) = p;
    soundspeed_.at(k, j) = std::sqrt(kGamma * p / density.at(k, j));
  });
}

// CloverLeaf's viscosity_kernel: a quadratic artificial viscosity, on only
// in cells under compression along the pressure gradient.
void CloverLeaf::viscosity() {
  if (!driver_.loop("viscosity", {reads(xvel0_), reads(yvel0_), reads(geometry_.celldx), reads(geometry_.celldy),
                                  reads(pressure_, Range::kAll), reads(density0_), writes(viscosity_)})) {
    return;
  }
  over(0, nx_, 0, ny_, [&](int j, int k) {
    const double ugrad = (xvel0_.at(k, j + 1) + xvel0_.at(k + 1, j + 1)) - (xvel0_.at(k, j) + xvel0_.at(k + 1, j));
    const double vgrad = (yvel0_.at(k + 1, j) + yvel0_.at(k + 1, j + 1)) - (yvel0_.at(k, j) + yvel0_.at(k, j + 1));
    const double div = geometry_.celldx[j] * ugrad + geometry_.celldy[k] * vgrad;
    const double strain2 =
        0.5 * (xvel0_.at(k + 1, j) + xvel0_.at(k + 1, j + 1) - xvel0_.at(k, j) - xvel0_.at(k, j + 1)) / geometry_.celldy[k] +
        0.5 * (yvel0_.at(k, j + 1) + yvel0_.at(k + 1, j + 1) - yvel0_.at(k, j) - yvel0_.at(k + 1, j)) / geometry_.celldx[j];
    double pgradx = (pressure_.at(k, j + 1) - pressure_.at(k, j - 1)) / (geometry_.celldx[j] + geometry_.celldx[j + 1]);
    double pgrady = (pressure_.at(k + 1, j) - pressure_.at(k - 1, j)) / (geometry_.celldy[k] + geometry_.celldy[k + 1]);
    const double pgradx2 = pgradx * pgradx, pgrady2 = pgrady * pgrady;
    const double limiter = ((0.5 * ugrad / geometry_.celldx[j]) * pgradx2 + (0.5 * vgrad / geometry_.celldy[k]) * pgrady2 +
                            strain2 * pgradx * pgrady) /
                           std::max(pgradx2 + pgrady2, kSmall);
    if (limiter > 0 || div >= 0) {
      viscosity_.at(k, j) = 0;
      return;
    }
    pgradx = std::copysign(std::max(kSmall, std::abs(pgradx)), pgradx);
    pgrady = std::copysign(std::max(kSmall, std::abs(pgrady)), pgrady);
    const double pgrad = std::sqrt(pgradx * pgradx + pgrady * pgrady);
    const double grad = std::min(std::abs(geometry_.celldx[j] * pgrad / pgradx), std::abs(geometry_.celldy[k] * pgrad / pgrady));
    viscosity_.at(k, j) = 2 * density0_.at(k, j) * grad * grad * limiter * limiter;
  });
}

// CloverLeaf's calc_dt_kernel: the least of the sound-crossing, transport
// and divergence limits over all cells, a reduction the step then uses.
double CloverLeaf::calc_dt() {
  double dt_min = kBig;
  if (driver_.loop("calc_dt", {reads(geometry_.celldx), reads(geometry_.celldy), reads(soundspeed_), reads(viscosity_),
                               reads(density0_), reads(xvel0_), reads(yvel0_), reads(xarea_), reads(yarea_),
                               reads(volume_)})) {
    over(0, nx_, 0, ny_, [&](int j, int k) {
      const double volume = volume_.at(k, j);
      const double cc = std::max(
          std::sqrt(soundspeed_.at(k, j) * soundspeed_.at(k, j) + 2 * viscosity_.at(k, j) / density0_.at(k, j)),
          kSmall);
      const double dtct = kSoundSafe * std::min(geometry_.celldx[j], geometry_.celldy[k]) / cc;
      double dv1 = (xvel0_.at(k, j) + xvel0_.at(k + 1, j)) * xarea_.at(k, j);
      double dv2 = (xvel0_.at(k, j + 1) + xvel0_.at(k + 1, j + 1)) * xarea_.at(k, j + 1);
      double div = dv2 - dv1;
      const double dtut = kVelocitySafe * 2 * volume / std::max({std::abs(dv1), std::abs(dv2), kSmall * volume});
      dv1 = (yvel0_.at(k, j) + yvel0_.at(k, j + 1)) * yarea_.at(k, j);
      dv2 = (yvel0_.at(k + 1, j) + yvel0_.at(k + 1, j + 1)) * yarea_.at(k + 1, j);
      div += dv2 - dv1;
      const double dtvt = kVelocitySafe * 2 * volume / std::max({std::abs(dv1), std::abs(dv2), kSmall * volume});
      div /= 2 * volume;
      const double dtdivt = div < -kSmall ? kDivergenceSafe * (-1 / div) : kBig;
      dt_min = std::min({dt_min, dtct, dtut, dtvt, dtdivt});
    });
  }
  const double dt = std::min(driver_.query(dt_min), kMaxDt);
  if (!(dt >= kMinDt)) {
    throw std::runtime_error("the time step fell to " + std::to_string(dt) + " at t=" + std::to_string(time_) +
                             ": the run went unstable; try a smaller --size");
  }
  return dt;
}

// CloverLeaf's PdV_kernel: density and energy after the cells' faces moved,
// from the work done by pressure and viscosity. The predictor moves them at
// the old velocities over half the step, the corrector at the mean of the old
// and new ones over the whole step.
void CloverLeaf::pdv(bool predict, double dt) {
  const bool run =
      predict ? driver_.loop("PdV_predict", {reads(xarea_), reads(yarea_), reads(volume_), reads(density0_),
                                             reads(energy0_), reads(pressure_), reads(viscosity_), reads(xvel0_),
                                             reads(yvel0_), writes(volume_change_), writes(density1_),
                                             writes(energy1_)})
              : driver_.loop("PdV_correct", {reads(xarea_), reads(yarea_), reads(volume_), reads(density0_),
                                             reads(energy0_), reads(pressure_), reads(viscosity_), reads(xvel0_),
                                             reads(yvel0_), reads(xvel1_), reads(yvel1_), writes(volume_change_),
                                             writes(density1_), writes(energy1_)});
  if (run) {
    const Field& xvel = predict ? xvel0_ : xvel1_;
    const Field& yvel = predict ? yvel0_ : yvel1_;
    const double step = predict ? 0.5 * dt : dt;
    over(0, nx_, 0, ny_, [&](int j, int k) {
      const auto u = [&](int jj, int kk) { return xvel0_.at(kk, jj) + xvel.at(kk, jj); };
      const auto v = [&](int jj, int kk) { return yvel0_.at(kk, jj) + yvel.at(kk, jj); };
      const double left = xarea_.at(k, j) * (u(j, k) + u(j, k + 1)) * 0.25 * step;
      const double right = xarea_.at(k, j + 1) * (u(j + 1, k) + u(j + 1, k + 1)) * 0.25 * step;
      const double bottom = yarea_.at(k, j) * (v(j, k) + v(j + 1, k)) * 0.25 * step;
      const double top = yarea_.at(k + 1, j) * (v(j, k + 1) + v(j + 1, k + 1)) * 0.25 * step;
      const double total_flux = right - left + top - bottom;
      const double volume = volume_.at(k, j), density = density0_.at(k, j);
      volume_change_.at(k, j) = volume / (volume + total_flux);
      const double energy_change = (pressure_.at(k, j) / density + viscosity_.at(k, j) / density) * total_flux / volume;
      energy1_.at(k, j) = energy0_.at(k, j) - energy_change;
      density1_.at(k, j) = density * volume_change_.at(k, j);
    });
  }
  if (!predict) return;
  // The predictor only serves the pressure at the half step.
  ideal_gas("ideal_gas_predict", density1_, energy1_);
  update_halo(pressure_, kCellMirror, "predict");
  revert();
}

void CloverLeaf::revert() {
  if (!driver_.loop("revert", {reads(density0_), reads(energy0_), writes(density1_), writes(energy1_)})) return;
  over(0, nx_, 0, ny_, [&](int j, int k) {
    density1_.at(k, j) = density0_.at(k, j);
    energy1_.at(k, j) = energy0_.at(k, j);
  });
}

// CloverLeaf's accelerate_kernel: new node velocities from the pressure and
// viscosity forces on the node's quarter cells.
void CloverLeaf::accelerate(double dt) {
  if (!driver_.loop("accelerate", {reads(density0_, Range::kAll), reads(volume_, Range::kAll),
                                   reads(pressure_, Range::kAll), reads(viscosity_, Range::kAll),
                                   reads(xarea_, Range::kAll), reads(yarea_, Range::kAll), reads(xvel0_),
                                   reads(yvel0_), writes(stepbymass_), writes(xvel1_), writes(yvel1_)})) {
    return;
  }
  over(0, nx_ + 1, 0, ny_ + 1, [&](int j, int k) {
    const auto mass = [&](int jj, int kk) { return density0_.at(kk, jj) * volume_.at(kk, jj); };
    const double nodal_mass = (mass(j - 1, k - 1) + mass(j, k - 1) + mass(j, k) + mass(j - 1, k)) * 0.25;
    const double stepbymass = 0.5 * dt / nodal_mass;
    stepbymass_.at(k, j) = stepbymass;
    const auto force_x = [&](const Field& p) {
      return xarea_.at(k, j) * (p.at(k, j) - p.at(k, j - 1)) +
             xarea_.at(k - 1, j) * (p.at(k - 1, j) - p.at(k - 1, j - 1));
    };
    const auto force_y = [&](const Field& p) {
      return yarea_.at(k, j) * (p.at(k, j) - p.at(k - 1, j)) +
             yarea_.at(k, j - 1) * (p.at(k, j - 1) - p.at(k - 1, j - 1));
    };
    xvel1_.at(k, j) = xvel0_.at(k, j) - stepbymass * force_x(pressure_) - stepbymass * force_x(viscosity_);
    yvel1_.at(k, j) = yvel0_.at(k, j) - stepbymass * force_y(pressure_) - stepbymass * force_y(viscosity_);
  });
}

// CloverLeaf's flux_calc_kernel: the volume swept by each face over the step.
void CloverLeaf::flux_calc(double dt) {
  if (!driver_.loop("flux_calc", {reads(xarea_), reads(yarea_), reads(xvel0_), reads(xvel1_), reads(yvel0_),
                                  reads(yvel1_), writes(vol_flux_x_), writes(vol_flux_y_)})) {
    return;
  }
  over(0, nx_ + 1, 0, ny_, [&](int j, int k) {
    vol_flux_x_.at(k, j) = 0.25 * dt * xarea_.at(k, j) *
                           (xvel0_.at(k, j) + xvel0_.at(k + 1, j) + xvel1_.at(k, j) + xvel1_.at(k + 1, j));
  });
  over(0, nx_, 0, ny_ + 1, [&](int j, int k) {
    vol_flux_y_.at(k, j) = 0.25 * dt * yarea_.at(k, j) *
                           (yvel0_.at(k, j) + yvel0_.at(k, j + 1) + yvel1_.at(k, j) + yvel1_.at(k, j + 1));
  });
}

// ------------------------------------------------------------- advection

// The remap, one direction after the other; CloverLeaf alternates which
// comes first from one step to the next.
void CloverLeaf::advection(int step) {
  update_halo(density1_, kCellMirror, "advection");
  update_halo(energy1_, kCellMirror, "advection");
  update_halo(vol_flux_x_, kXFaceMirror, "advection");
  update_halo(vol_flux_y_, kYFaceMirror, "advection");
  const Dir first = step % 2 == 1 ? Dir::kX : Dir::kY;
  for (int sweep = 1; sweep <= 2; ++sweep) {
    const Dir d = sweep == 1 ? first : across(first);
    advec_cell(d, sweep);
    const std::string site = "sweep" + std::to_string(sweep);
    update_halo(density1_, kCellMirror, site);
    update_halo(energy1_, kCellMirror, site);
    update_halo(xvel1_, kXVelMirror, site);
    update_halo(yvel1_, kYVelMirror, site);
    update_halo(mass_flux(d), face_mirror(d), site);
    advec_mom(xvel1_, d, sweep);
    advec_mom(yvel1_, d, sweep);
  }
}

// Volumes before and after this sweep's remap (CloverLeaf's
// advec_cell_kernel1/2), over the whole fields: the first sweep starts from
// the Lagrangian volume, with every face moved, the second from what the
// first left.
void CloverLeaf::advec_cell_volumes(Dir d, int sweep) {
  const Field& flux = vol_flux(d);
  const Field& other = vol_flux(across(d));
  const std::string loop = "advec_cell_" + std::string(dir_name(d)) + (sweep == 1 ? "_kernel1" : "_kernel2");
  const bool run = sweep == 1 ? driver_.loop(loop, {reads(volume_, Range::kAll), reads(flux, Range::kAll),
                                                    reads(other, Range::kAll), writes(pre_vol_, Range::kAll),
                                                    writes(post_vol_, Range::kAll)})
                              : driver_.loop(loop, {reads(volume_, Range::kAll), reads(flux, Range::kAll),
                                                    writes(pre_vol_, Range::kAll), writes(post_vol_, Range::kAll)});
  if (!run) return;
  const Offset o = offset(d), t = offset(across(d));
  over(-kHalo, nx_ + kHalo, -kHalo, ny_ + kHalo, [&](int j, int k) {
    const double own = flux.at(k + o.dk, j + o.dj) - flux.at(k, j);
    if (sweep == 1) {
      pre_vol_.at(k, j) = volume_.at(k, j) + (own + (other.at(k + t.dk, j + t.dj) - other.at(k, j)));
      post_vol_.at(k, j) = pre_vol_.at(k, j) - own;
    } else {
      pre_vol_.at(k, j) = volume_.at(k, j) + own;
      post_vol_.at(k, j) = volume_.at(k, j);
    }
  });
}

// Mass and energy carried across each face by its swept volume from the
// upwind (donor) cell, then the cells' new density and energy.
void CloverLeaf::advec_cell(Dir d, int sweep) {
  advec_cell_volumes(d, sweep);
  const Field& flux = vol_flux(d);
  Field& mass = mass_flux(d);
  const Offset o = offset(d);
  const std::string prefix = "advec_cell_" + std::string(dir_name(d));
  // ener_flux is node-sized: the row or column of nodes beyond the faces is zero.
  if (driver_.loop(prefix + "_kernel3", {reads(flux), reads(density1_, Range::kAll), reads(energy1_, Range::kAll),
                                         writes(mass), writes(ener_flux_, Range::kAll)})) {
    std::fill(ener_flux_.values.begin(), ener_flux_.values.end(), 0.0);
    over(0, nx_ + o.dj, 0, ny_ + o.dk, [&](int j, int k) {
      const bool from_below = flux.at(k, j) > 0;
      const int dj = from_below ? j - o.dj : j, dk = from_below ? k - o.dk : k;
      mass.at(k, j) = flux.at(k, j) * density1_.at(dk, dj);
      ener_flux_.at(k, j) = mass.at(k, j) * energy1_.at(dk, dj);
    });
  }
  if (!driver_.loop(prefix + "_kernel4", {reads(pre_vol_), reads(flux), reads(mass), reads(ener_flux_),
                                          updates(density1_), updates(energy1_), writes(pre_mass_),
                                          writes(post_mass_), writes(post_ener_), writes(advec_vol_)})) {
    return;
  }
  over(0, nx_, 0, ny_, [&](int j, int k) {
    const int ja = j + o.dj, ka = k + o.dk;
    pre_mass_.at(k, j) = density1_.at(k, j) * pre_vol_.at(k, j);
    post_mass_.at(k, j) = pre_mass_.at(k, j) + mass.at(k, j) - mass.at(ka, ja);
    post_ener_.at(k, j) =
        (energy1_.at(k, j) * pre_mass_.at(k, j) + ener_flux_.at(k, j) - ener_flux_.at(ka, ja)) / post_mass_.at(k, j);
    advec_vol_.at(k, j) = pre_vol_.at(k, j) + flux.at(k, j) - flux.at(ka, ja);
    density1_.at(k, j) = post_mass_.at(k, j) / advec_vol_.at(k, j);
    energy1_.at(k, j) = post_ener_.at(k, j);
  });
}

// Momentum remap of one velocity component in direction d (CloverLeaf's
// advec_mom_kernel, donor cell): the nodes' control volumes exchange the
// mass that crossed the cells' centre lines, carrying their velocity along.
void CloverLeaf::advec_mom(Field& vel, Dir d, int sweep) {
  const Field& mass = mass_flux(d);
  const Field& other = vol_flux(across(d));
  const Offset o = offset(d), t = offset(across(d));
  const std::string suffix = "_" + std::string(dir_name(d)) + "_" + vel.name;
  // Cell volumes after this sweep: the first still holds the other direction's displacement.
  const bool volumes = sweep == 1 ? driver_.loop("advec_mom_post_vol1" + suffix,
                                                 {reads(volume_, Range::kAll), reads(other, Range::kAll),
                                                  writes(post_vol_, Range::kAll)})
                                  : driver_.loop("advec_mom_post_vol2" + suffix,
                                                 {reads(volume_, Range::kAll), writes(post_vol_, Range::kAll)});
  if (volumes) {
    over(-kHalo, nx_ + kHalo, -kHalo, ny_ + kHalo, [&](int j, int k) {
      post_vol_.at(k, j) =
          sweep == 1 ? volume_.at(k, j) + other.at(k + t.dk, j + t.dj) - other.at(k, j) : volume_.at(k, j);
    });
  }
  // The mass through the centre line between node (j, k) and the next node in
  // direction d, from the two faces on either side of it; zero elsewhere.
  if (driver_.loop("advec_mom_node_flux" + suffix, {reads(mass, Range::kAll), writes(node_flux_, Range::kAll)})) {
    std::fill(node_flux_.values.begin(), node_flux_.values.end(), 0.0);
    over(-o.dj, nx_ + 1, -o.dk, ny_ + 1, [&](int j, int k) {
      node_flux_.at(k, j) = 0.25 * (mass.at(k - t.dk, j - t.dj) + mass.at(k, j) +
                                    mass.at(k + o.dk - t.dk, j + o.dj - t.dj) + mass.at(k + o.dk, j + o.dj));
    });
  }
  if (driver_.loop("advec_mom_node_mass" + suffix, {reads(density1_, Range::kAll), reads(post_vol_, Range::kAll),
                                                    reads(node_flux_, Range::kAll), writes(node_mass_post_),
                                                    writes(node_mass_pre_)})) {
    over(0, nx_ + 1, 0, ny_ + 1, [&](int j, int k) {
      const auto cell_mass = [&](int jj, int kk) { return density1_.at(kk, jj) * post_vol_.at(kk, jj); };
      node_mass_post_.at(k, j) =
          0.25 * (cell_mass(j, k - 1) + cell_mass(j, k) + cell_mass(j - 1, k - 1) + cell_mass(j - 1, k));
      node_mass_pre_.at(k, j) = node_mass_post_.at(k, j) - node_flux_.at(k - o.dk, j - o.dj) + node_flux_.at(k, j);
    });
  }
  if (driver_.loop("advec_mom_flux" + suffix, {reads(node_flux_, Range::kAll), reads(vel, Range::kAll),
                                               writes(mom_flux_, Range::kAll)})) {
    std::fill(mom_flux_.values.begin(), mom_flux_.values.end(), 0.0);
    over(-o.dj, nx_ + 1, -o.dk, ny_ + 1, [&](int j, int k) {
      const bool from_above = node_flux_.at(k, j) < 0;
      mom_flux_.at(k, j) = node_flux_.at(k, j) * vel.at(from_above ? k + o.dk : k, from_above ? j + o.dj : j);
    });
  }
  if (!driver_.loop("advec_mom_vel" + suffix, {reads(node_mass_pre_), reads(node_mass_post_),
                                               reads(mom_flux_, Range::kAll), updates(vel)})) {
    return;
  }
  over(0, nx_ + 1, 0, ny_ + 1, [&](int j, int k) {
    vel.at(k, j) = (vel.at(k, j) * node_mass_pre_.at(k, j) + mom_flux_.at(k - o.dk, j - o.dj) - mom_flux_.at(k, j)) /
                   node_mass_post_.at(k, j);
  });
}

// The end of the step's state becomes the start of the next one.
void CloverLeaf::reset_field() {
  if (driver_.loop("reset_field_kernel1",
                   {reads(density1_), reads(energy1_), writes(density0_), writes(energy0_)})) {
    over(0, nx_, 0, ny_, [&](int j, int k) {
      density0_.at(k, j) = density1_.at(k, j);
      energy0_.at(k, j) = energy1_.at(k, j);
    });
  }
  if (driver_.loop("reset_field_kernel2", {reads(xvel1_), reads(yvel1_), writes(xvel0_), writes(yvel0_)})) {
    over(0, nx_ + 1, 0, ny_ + 1, [&](int j, int k) {
      xvel0_.at(k, j) = xvel1_.at(k, j);
      yvel0_.at(k, j) = yvel1_.at(k, j);
    });
  }
}

// ------------------------------------------------------------- reporting

// Totals over the domain, each a query: mass is conserved to rounding, and
// internal plus kinetic energy to the scheme's dissipation.
Summary CloverLeaf::field_summary(const char* ideal_gas_loop, const char* loop) {
  ideal_gas(ideal_gas_loop, density0_, energy0_);
  Summary s;
  if (driver_.loop(loop, {reads(volume_), reads(density0_), reads(energy0_), reads(pressure_), reads(xvel0_),
                          reads(yvel0_)})) {
    over(0, nx_, 0, ny_, [&](int j, int k) {
      double vsqrd = 0;
      for (int kv = k; kv <= k + 1; ++kv) {
        for (int jv = j; jv <= j + 1; ++jv) {
          vsqrd += 0.25 * (xvel0_.at(kv, jv) * xvel0_.at(kv, jv) + yvel0_.at(kv, jv) * yvel0_.at(kv, jv));
        }
      }
      const double cell_volume = volume_.at(k, j), cell_mass = cell_volume * density0_.at(k, j);
      s.volume += cell_volume;
      s.mass += cell_mass;
      s.internal_energy += cell_mass * energy0_.at(k, j);
      s.kinetic_energy += cell_mass * 0.5 * vsqrd;
      s.pressure += cell_volume * pressure_.at(k, j);
    });
  }
  s.volume = driver_.query(s.volume);
  s.mass = driver_.query(s.mass);
  s.internal_energy = driver_.query(s.internal_energy);
  s.kinetic_energy = driver_.query(s.kinetic_energy);
  s.pressure = driver_.query(s.pressure);
  return s;
}

void CloverLeaf::print_summary(const char* when, int step, const Summary& s) const {
  std::printf("field summary at %s (step %d): volume %.10e mass %.10e internal energy %.10e kinetic energy %.10e "
              "total energy %.10e pressure %.10e\n",
              when, step, s.volume, s.mass, s.internal_energy, s.kinetic_energy, s.internal_energy + s.kinetic_energy,
              s.pressure);
}

// Reflective walls: the ring mirrors the interior across each wall, x first
// on the interior rows, then y on whole rows (corners included), so that the
// loop writes the whole ring.
void CloverLeaf::update_halo(Field& f, const Mirror& mirror, std::string_view site) {
  if (!driver_.loop("update_halo_" + f.name + "_" + std::string(site), {reads(f), writes(f, Range::kHalo)})) return;
  const int h = f.halo;
  for (int k = 0; k < f.ny; ++k) {
    for (int d = 1; d <= h; ++d) {
      for (const int j : {-d, f.nx - 1 + d}) f.at(k, j) = mirror.x_sign * f.at(k, mirrored(j, f.nx, mirror.x_nodes));
    }
  }
  for (int d = 1; d <= h; ++d) {
    for (const int k : {-d, f.ny - 1 + d}) {
      for (int j = -h; j < f.nx + h; ++j) f.at(k, j) = mirror.y_sign * f.at(mirrored(k, f.ny, mirror.y_nodes), j);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  mini::RunOptions options = mini::parse("cloverleaf", argc, argv);
  if (options.size == 0) options.size = kDefaultSize;
  if (options.steps == 0) options.steps = kDefaultSteps;
  if (options.size < 2 * kHalo) {
    std::fprintf(stderr, "cloverleaf: --size %d is below twice the halo depth %d\n", options.size, kHalo);
    return 2;
  }
  try {
    Driver driver(options);
    CloverLeaf(driver).run();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cloverleaf: %s\n", e.what());
    return 1;
  }
}
