// A step of many micro-batches from three short simulations of the same layout (issue #43).
//
// Gradient accumulation repeats one pattern: past the pipeline's warm-up, every `period` more
// micro-batches (the pipeline depth: the interleaved schedules run micro-batches in groups of pp)
// add the same ops, costed the same, to every stage; the warm-up, the drain, the data-parallel
// reductions after the last backward and the optimizer do not depend on how many came before.
// In the discrete-event executor that makes every field of the step result (step time, each
// breakdown term, each stage's finish, events, ops, host time, per-kernel time) an affine function
// of the micro-batch count m over m = m1, m1 + period, m1 + 2 period, ... Three simulations at
// those counts (m1 the least count past twice the warm-up that is congruent to m modulo the
// period) whose two increments agree in every field give the step of m micro-batches by extending
// the last increment. The executor's times are whole picoseconds, and it rounds the end of a
// kernel it re-rates (slowed next to communication) to the nearest one, so two increments may
// differ by a picosecond (kPeriodicSlackPs); event and op counts must agree exactly, and the
// critical stage must stay the same. Where they do not agree (a schedule that is not periodic, a
// DP bucket that lands differently), or where the three short simulations would not be much
// shorter than the step itself, the step is simulated in full.
//
// It is an inference from three points, not a proof, so it is checked against the full
// simulation in tests/test_periodic.cpp on the schedules, shardings, recompute and offload the
// search enumerates, field by field; the plan search and `simulate` use the same function, so
// their numbers agree.
#pragma once

#include "trainsim/sim/step/executor.hpp"

#include <cstdint>
#include <optional>

namespace trainsim::sim {

// How far two periods' increments of a time may differ and still be one period (above). With it,
// an extended step is within k ps of the full simulation's, k the periods extended, if every later
// period stays within it too: a relative 1e-6 or less for any period over a microsecond (every
// period launches kernels, each microseconds). The plan search shaves its lower bounds by that.
inline constexpr std::int64_t kPeriodicSlackPs = 1;
inline constexpr double kPeriodicRelativeError = 1e-6;

// The micro-batch counts of the three short simulations for a plan: m1, m1 + period,
// m1 + 2 period. Empty when the plan's step is not long enough for them to save time (their
// micro-batches together must be at most half of the step's), or the options record per-op or
// per-pass output (which needs every micro-batch) or simulate all ranks.
struct PeriodicPoints {
    int m1 = 0;
    int period = 0;
};
[[nodiscard]] std::optional<PeriodicPoints> periodic_points(const model::Plan& plan, const ExecOptions& opt = {});
// The micro-batches the three short simulations run together.
[[nodiscard]] inline int periodic_microbatches(const PeriodicPoints& p) { return 3 * p.m1 + 3 * p.period; }

// The step of `plan` from three short simulations (above), or empty when they disagree or do not
// apply: the caller then runs execute_step on the step's graph.
[[nodiscard]] std::optional<StepResult> execute_step_periodic(const model::Plan& plan, const ComputeCost& compute,
                                                              const AnalyticNetwork& network,
                                                              const ExecOptions& opt = {});

} // namespace trainsim::sim
