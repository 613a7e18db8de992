#include "gpu/touch_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/units.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// A stream running beside one other keeps at least half its rate alone (a
// fair split), whatever the sharing rule says: on several cores touching and
// flushing do not share one bandwidth fully, and a measured Tc close to T
// would otherwise make a derived Ft many times Fc.
constexpr double kLeastShare = 0.5;
constexpr std::uint64_t kMostIterations = 1000000;

bool measured(double rate) { return rate > 0; }

void note(std::string* derived, const char* name) {
  if (derived == nullptr) return;
  if (!derived->empty()) *derived += ", ";
  *derived += name;
}

// Ft from whatever flush rate there is.
double flush_touched_from(const TouchRates& m) {
  if (measured(m.flush_touched)) return m.flush_touched;
  if (measured(m.flush_concurrent)) {
    const double touch_share = measured(m.touch_concurrent) ? m.touch_concurrent / m.touch_alone : 0.5;
    return m.flush_concurrent / std::max(kLeastShare, 1 - touch_share);
  }
  if (m.flush_untouched < m.touch_alone) return 1 / (1 / m.flush_untouched - 1 / m.touch_alone);
  return m.flush_untouched;
}

struct Simulated {
  double flush_seconds = 0;
  std::uint64_t iterations = 0;
};

Simulated simulate(TouchStrategy strategy, const TouchModelInputs& in, const TouchRates& r) {
  const bool concurrent = strategy == TouchStrategy::kConcurrent;
  const double flush_touched = concurrent ? r.flush_concurrent : r.flush_touched;
  const double flush_untouched =
      concurrent ? r.flush_untouched * r.flush_concurrent / r.flush_touched : r.flush_untouched;
  double ahead = in.touched_ahead_bytes;
  double untouched = in.untouched_bytes;
  auto touch = [&](double bytes) {
    bytes = std::min(bytes, untouched);
    ahead += bytes;
    untouched -= bytes;
  };
  Simulated out;
  while (untouched > 0 && out.iterations < kMostIterations) {
    double to_touched = std::min(in.checkpoint_bytes, ahead);
    double to_untouched = in.checkpoint_bytes - to_touched;
    if (to_untouched > untouched) {  // the rest lands on pages flushed before
      to_touched += to_untouched - untouched;
      to_untouched = untouched;
    }
    const double flush = to_touched / flush_touched + to_untouched / flush_untouched;
    ahead = std::max(0.0, ahead - to_touched);
    untouched -= to_untouched;
    if (concurrent) touch(r.touch_concurrent * flush);
    touch(r.touch_alone *
          (in.flushes_overlap_compute ? std::max(0.0, in.compute_seconds - flush) : in.compute_seconds));
    out.flush_seconds += flush;
    ++out.iterations;
  }
  return out;
}

void check_inputs(const TouchModelInputs& in) {
  const bool valid = std::isfinite(in.checkpoint_bytes) && in.checkpoint_bytes > 0 &&
                     std::isfinite(in.compute_seconds) && in.compute_seconds >= 0 &&
                     std::isfinite(in.untouched_bytes) && in.untouched_bytes >= 0 &&
                     std::isfinite(in.touched_ahead_bytes) && in.touched_ahead_bytes >= 0;
  if (!valid) {
    throw InvalidArgumentError(
        "touch model: the checkpoint size must be positive and the compute time, untouched "
        "and touched-ahead bytes finite and not negative (got S=" +
        std::to_string(in.checkpoint_bytes) + ", C=" + std::to_string(in.compute_seconds) +
        ", U=" + std::to_string(in.untouched_bytes) + ", L=" + std::to_string(in.touched_ahead_bytes) + ")");
  }
}

std::string rate_text(double bytes_per_second) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GB/s", bytes_per_second / 1e9);
  return text;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g s", seconds);
  return text;
}

}  // namespace

const char* to_string(TouchStrategy strategy) {
  return strategy == TouchStrategy::kConcurrent ? "concurrent" : "sequential";
}

bool TouchRates::enough_to_decide() const {
  return measured(touch_alone) && (measured(flush_touched) || measured(flush_concurrent) || measured(flush_untouched));
}

TouchRates gpu::complete_rates(const TouchRates& m, std::string* derived) {
  if (!m.enough_to_decide()) {
    throw InvalidArgumentError("touch model: needs the touch rate alone and one flush rate at least (touch " +
                               rate_text(m.touch_alone) + "; flush " + rate_text(m.flush_touched) + " touched, " +
                               rate_text(m.flush_untouched) + " untouched, " + rate_text(m.flush_concurrent) +
                               " beside touching)");
  }
  TouchRates r = m;
  if (!measured(r.flush_touched)) {
    r.flush_touched = flush_touched_from(m);
    note(derived, "Ft");
  }
  if (!measured(r.flush_untouched)) {
    r.flush_untouched = 1 / (1 / r.flush_touched + 1 / r.touch_alone);
    note(derived, "Fu");
  }
  if (!measured(r.touch_concurrent)) {
    const double flush_share = measured(r.flush_concurrent) ? r.flush_concurrent / r.flush_touched : 0.5;
    r.touch_concurrent = r.touch_alone * std::max(kLeastShare, 1 - flush_share);
    note(derived, "Tc");
  }
  if (!measured(r.flush_concurrent)) {
    const double touch_share = measured(m.touch_concurrent) ? r.touch_concurrent / r.touch_alone : 0.5;
    r.flush_concurrent = r.flush_touched * std::max(kLeastShare, 1 - touch_share);
    note(derived, "Fc");
  }
  return r;
}

TouchDecision gpu::choose_touch_strategy(const TouchModelInputs& inputs) {
  check_inputs(inputs);
  TouchDecision d;
  d.inputs = inputs;
  d.rates = complete_rates(inputs.rates, &d.derived);
  const Simulated concurrent = simulate(TouchStrategy::kConcurrent, inputs, d.rates);
  const Simulated sequential = simulate(TouchStrategy::kSequential, inputs, d.rates);
  d.horizon_iterations = std::max(concurrent.iterations, sequential.iterations);
  auto over_horizon = [&](const Simulated& s) {
    const auto remaining = static_cast<double>(d.horizon_iterations - s.iterations);
    return TouchEstimate{s.flush_seconds + remaining * inputs.checkpoint_bytes / d.rates.flush_touched, s.iterations};
  };
  d.concurrent = over_horizon(concurrent);
  d.sequential = over_horizon(sequential);
  d.strategy =
      d.concurrent.flush_seconds < d.sequential.flush_seconds ? TouchStrategy::kConcurrent : TouchStrategy::kSequential;
  return d;
}

std::string TouchDecision::describe() const {
  return std::string("touch model: ") + to_string(strategy) + " (flushing until all is touched, over " +
         std::to_string(horizon_iterations) + " checkpoints: concurrent " + seconds_text(concurrent.flush_seconds) +
         ", sequential " + seconds_text(sequential.flush_seconds) + "; S=" + size_text(static_cast<std::uint64_t>(inputs.checkpoint_bytes)) +
         ", C=" + seconds_text(inputs.compute_seconds) + ", U=" + size_text(static_cast<std::uint64_t>(inputs.untouched_bytes)) +
         ", L=" + size_text(static_cast<std::uint64_t>(inputs.touched_ahead_bytes)) +
         (inputs.flushes_overlap_compute ? ", flushes overlap compute" : ", flushes between computes") +
         "; T=" + rate_text(rates.touch_alone) + ", Tc=" + rate_text(rates.touch_concurrent) +
         ", Ft=" + rate_text(rates.flush_touched) + ", Fu=" + rate_text(rates.flush_untouched) +
         ", Fc=" + rate_text(rates.flush_concurrent) + (derived.empty() ? "" : "; derived: " + derived) + ")";
}

}  // namespace resurgo
