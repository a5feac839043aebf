// Whole-run wall-clock time: the steady-state days plus checkpoint writes, failures, lost work and
// restarts (docs/plan-search.md, "Whole-run time"). A first-order Young/Daly model:
//
//   delta = checkpoint bytes / (write bandwidth per node x nodes)        [s]  one checkpoint write
//   M     = MTBF of one GPU / GPUs                                       [s]  cluster MTBF
//   tau   = sqrt(2 delta M)  (Young 1974; Daly 2006, first order)        [s]  checkpoint interval
//   expected days = steady days x (1 + delta/tau + tau/(2M) + R/M)
//
// delta/tau: time spent writing checkpoints; tau/(2M): work lost per failure (on average half an
// interval) per unit time; R/M: restart cost R per failure. Valid while tau and R are small next
// to M (the factor is then a first-order expansion); the result flags when tau >= M.
#pragma once

#include "trainsim/model/scenario.hpp"
#include "trainsim/model/units.hpp"

#include <optional>

namespace trainsim::sim {

using model::kLlama3GpuMtbfHours;

// The run's parameters (a plan's `run` section: checkpoint write bandwidth per node, MTBF per GPU,
// restart time, optional fixed checkpoint interval). Defaults and sources: scenario_keys.cpp.
using RunModelParams = model::RunSettings;

struct RunTime {
    double checkpoint_bytes = 0;     // parameters x (2 B BF16 weights + 12 B FP32 master, Adam m, v)
    double checkpoint_write_s = 0;   // delta
    double cluster_mtbf_s = 0;       // M
    double checkpoint_interval_s = 0;  // tau
    double restart_s = 0;            // R
    double overhead_factor = 1;      // 1 + delta/tau + tau/(2M) + R/M
    double expected_days = 0;        // steady days x overhead_factor
    double expected_failures = 0;    // expected wall-clock seconds / M
    bool first_order_valid = true;   // tau < M and R < M
};

// Bytes per parameter in a checkpoint: BF16 weights (2) + FP32 master weights and Adam m, v (12).
inline constexpr double kCheckpointBytesPerParam = 2.0 + 12.0;

// Precondition: steady_days >= 0, params > 0, gpus >= 1, nodes >= 1.
[[nodiscard]] RunTime run_time(double steady_days, double params, int gpus, int nodes, const RunModelParams& p);
// The same for a plan (parameters from its model, GPUs and nodes from its cluster).
[[nodiscard]] RunTime run_time(const model::Plan& plan, double steady_days, const RunModelParams& p);

} // namespace trainsim::sim
