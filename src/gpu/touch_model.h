// The performance model of the HiPC'22 cache-allocation paper, section IV-B:
// while the host buffer is not fully touched yet, should the forerunner keep
// touching pages while a flush writes into the buffer (concurrent), or only
// while the host memory is idle (sequential)?
//
// Touching and flushing share the host memory bandwidth. Concurrent touching
// slows the flush running now (it competes) but touches more pages, so later
// flushes find touched pages, which they write twice as fast as untouched
// ones (the write to an untouched page pays its fault). Sequential touching
// leaves each flush the whole bandwidth but touches only in the idle time
// between flushes; when flushes are longer than the compute between them
// there is none, and flushes keep landing on untouched pages. The paper
// measures concurrent ahead at 5 ms of compute per iteration and sequential
// ahead from 10 ms on (up to 2.7x, Fig. 5c).
//
// The model simulates both strategies, iteration after iteration (a flush of
// S bytes, then compute), from the present state until every page is
// touched, and picks the one whose flushes take less time in total over the
// same horizon. A pure function: the buffer measures, this decides.
#pragma once

#include <cstdint>
#include <string>

#include "resurgo/device_stats.hpp"

namespace resurgo::gpu {

using resurgo::TouchDecision;
using resurgo::TouchEstimate;
using resurgo::TouchModelInputs;
using resurgo::TouchRates;
using resurgo::TouchStrategy;

// Fills the rates not measured yet from the measured ones (`derived` names
// them). The rules, with T required and one flush rate at least:
//   fault rule:   a write to an untouched page pays the touch, then the
//                 copy: 1/Fu = 1/Ft + 1/T.
//   sharing rule: touching and flushing beside each other split one
//                 bandwidth: Tc/T + Fc/Ft = 1, but each keeps at least half
//                 its rate alone (a fair split; several cores do not share
//                 one bandwidth fully): Tc = T * max(1/2, 1 - Fc/Ft), and
//                 likewise Fc; with neither measured, Tc = T/2, Fc = Ft/2.
//   Ft from Fc (sharing rule: Ft = Fc / max(1/2, 1 - Tc/T), between Fc
//   and 2 Fc), else from Fu (fault rule; Ft = Fu when Fu >= T).
// Throws InvalidArgumentError when !measured.enough_to_decide().
TouchRates complete_rates(const TouchRates& measured, std::string* derived);

// The model. Per iteration, from L and U now, for each strategy:
//   the flush of S bytes writes a = min(S, L) touched bytes and b = S - a
//   untouched ones (at most U; beyond, it lands on pages flushed before):
//     sequential: D = a/Ft + b/Fu
//     concurrent: D = a/Fc + b/Fuc, with Fuc = Fu * Fc/Ft (the untouched
//                 write slowed by the same contention)
//   then L -= a, U -= b, and the forerunner touches (each touched byte
//   moves from U to L, never beyond U):
//     concurrent: Tc * D during the flush;
//     both:       T * idle after it, idle = max(0, C - D) when flushes
//                 overlap compute, else C.
// until U = 0 (n iterations; at most a million). Over the horizon
// N = max(n_concurrent, n_sequential), the strategy done first flushes its
// remaining iterations into touched pages at Ft (S/Ft each):
//   estimate = sum of D + (N - n) * S/Ft.
// The lower estimate wins; a tie (e.g. nothing left to touch) goes to
// sequential, which never slows a flush. Pinning follows in both cases at
// the same cost, so it is left out.
// Throws InvalidArgumentError for S <= 0, negative C, U or L, or rates
// missing (see complete_rates).
TouchDecision choose_touch_strategy(const TouchModelInputs& inputs);

}  // namespace resurgo::gpu
